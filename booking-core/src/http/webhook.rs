//! `POST /payment/webhook`: the raw body is verified before anything is parsed; a refused
//! delivery gets 400/401 and changes nothing (case B07); a correctly signed one always gets 200.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sale_common::Problem;
use serde_json::{json, Value};

use super::openapi::ProblemDoc;
use crate::error::ApiResult;
use crate::payments::webhook::{self, Handled, Refused};
use crate::state::AppState;

/// The handler (API.md "Booking core").
#[utoipa::path(
    post,
    path = "/payment/webhook",
    tag = "payment",
    summary = "A gateway event, verified on the raw body before anything is parsed",
    request_body(content = Object, description = "a gateway event {id, type, created, data: {payment_id, transaction_id?, …}}"),
    responses(
        (status = 200, description = "{received: true, result} for every correctly signed delivery (result e.g. confirmed, duplicate, unknown-payment)", body = Object),
        (status = 400, description = "bad-webhook: Gateway-Signature missing or malformed; nothing changes", body = ProblemDoc),
        (status = 401, description = "bad-webhook: no v1 matches a key, or t more than the tolerance (300 s) away; nothing changes", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("webhook_signature" = [])),
)]
pub async fn receive(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    state
        .clone()
        .on_checkout(move |state| async move {
            let header = headers.get(webhook::HEADER).and_then(|v| v.to_str().ok());
            let keys: Vec<&[u8]> = state
                .config
                .webhook_secrets
                .iter()
                .map(|s| s.expose().as_bytes())
                .collect();
            let now_s = state.clock.now_ms().div_euclid(1000);
            if let Err(e) = webhook::verify(
                header,
                &body,
                &keys,
                now_s,
                state.config.webhook_tolerance_secs,
            ) {
                tracing::warn!(reason = %e, "webhook refused");
                let status = if e == Refused::Malformed {
                    StatusCode::BAD_REQUEST
                } else {
                    StatusCode::UNAUTHORIZED
                };
                return Err(Problem::new(status, "bad-webhook", "Webhook refused")
                    .detail(e.to_string())
                    .into());
            }
            let result = match webhook::handle(&state, &body).await? {
                Handled::Unreadable => "unreadable".to_owned(),
                Handled::UnknownPayment => "unknown-payment".to_owned(),
                Handled::Deferred => "deferred".to_owned(),
                Handled::Mismatch => "mismatch".to_owned(),
                Handled::Noted(s) => format!("noted-{s:?}").to_lowercase(),
                Handled::Confirmed(c) => format!("{c:?}")
                    .split('(')
                    .next()
                    .unwrap_or("")
                    .to_lowercase(),
                Handled::Duplicate => "duplicate".to_owned(),
                Handled::Cancelled => "cancelled".to_owned(),
                Handled::Unchanged => "unchanged".to_owned(),
            };
            Ok(Json(json!({"received": true, "result": result})))
        })
        .await
}
