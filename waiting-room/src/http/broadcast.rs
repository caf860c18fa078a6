//! The operator's broadcast message (issue 14 item 3; API.md "Broadcast message"):
//! `PUT /admin/events/{event}/broadcast` sets it, `DELETE` clears it. Both are audited
//! (`set_broadcast`, `clear_broadcast`, old and new message) and republish the status
//! document at once, which carries the message to every waiting fan within one poll.

use super::admin::{figures_json, operator, record};
use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::broadcast::Broadcast;
use crate::domain::EventId;
use crate::http::openapi::ProblemDoc;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::Value;

/// Body of `PUT /admin/events/{event}/broadcast`: the text per language, at least one, each
/// at most [`crate::broadcast::BROADCAST_MAX_CHARS`] characters of plain text. Unknown fields
/// (another language) are refused (422).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetBroadcast {
    en: Option<String>,
    fr: Option<String>,
}

/// Stores `message` (or clears it), audits the change under `action`, republishes the status
/// document and answers the figures. No audit entry when nothing was set before a clear.
async fn apply(
    st: &AppState,
    event: &EventId,
    who: &str,
    message: Option<Broadcast>,
) -> Result<Response, Problem> {
    let write = st.0.store.set_broadcast(event, message.as_ref());
    let old = bounded(st.store_timeout(), write).await?;
    let action = if message.is_some() {
        "set_broadcast"
    } else {
        "clear_broadcast"
    };
    if old.is_some() || message.is_some() {
        let json = |m: Option<Broadcast>| m.map_or(Value::Null, |m| serde_json::json!(m));
        record(st, event, who, action, json(old), json(message)).await;
        metrics::counter!("wr_broadcast_changes_total",
            "event" => event.to_string(), "action" => action)
        .increment(1);
    }
    st.refresh_status(event).await;
    Ok(private_json(StatusCode::OK, figures_json(st, event).await?))
}

#[utoipa::path(
    put,
    path = "/admin/events/{event}/broadcast",
    tag = "admin",
    summary = "Set the broadcast message shown to every waiting fan (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = SetBroadcast,
    responses(
        (status = 200, description = "figures, with the message under `broadcast`", body = Object),
        (status = 422, description = "no language, too long, control or bidirectional formatting characters or unknown field", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn set(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<SetBroadcast>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    let message = Broadcast::new(b.en, b.fr, st.0.clock.now_secs()).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            e.slug(),
            "Invalid broadcast message",
        )
        .detail(e.to_string())
    })?;
    apply(&st, &event, &who, Some(message)).await
}

#[utoipa::path(
    delete,
    path = "/admin/events/{event}/broadcast",
    tag = "admin",
    summary = "Clear the broadcast message (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures, `broadcast` null", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn clear(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    apply(&st, &event, &who, None).await
}
