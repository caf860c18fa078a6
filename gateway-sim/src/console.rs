//! The gateway's own console, played by an endpoint (no token, like the simulator's payment
//! list): an operator at the gateway refunds a payment (in full or by amount) or a fan's bank
//! charges it back. These happen outside the shop; the shop learns of them only from the
//! `payment.refunded` / `payment.disputed` webhooks and from querying the payment.

use axum::extract::{Path, State};
use axum::Json;
use sale_common::Problem;
use serde_json::Value;

use crate::payments::{do_refund, not_allowed, refund_body, unknown};
use crate::AppState;

/// `POST /v1/sim/payments/{id}/refund` `{"amount_cents"?}`: a refund made in the console (a new
/// refund on every call).
pub async fn refund(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, Problem> {
    let b = refund_body(&body)?;
    let key = format!("console-{}", state.store.rng().hex_id(12));
    do_refund(&state, &id, &key, b.amount_cents)
}

/// `POST /v1/sim/payments/{id}/dispute`: a chargeback; completed → `disputed`.
pub async fn dispute(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    match state.store.dispute(&id).ok_or_else(|| unknown(&id))? {
        Ok(p) => Ok(Json(
            serde_json::json!({"payment_id": p.payment_id, "status": p.status}),
        )),
        Err(s) => Err(not_allowed(s, "not-completed", "Payment not completed")),
    }
}
