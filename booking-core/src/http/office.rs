//! Back-office lists behind the admin bearer token: the outbox (emails and refund messages,
//! sent or pending), the refunds of late payments (case B02), and operator alerts (case B03).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use serde_json::{json, Value};

use super::admin::admin;
use super::openapi::ProblemDoc;
use crate::error::ApiResult;
use crate::state::AppState;

/// `GET /admin/shows/{show}/outbox`: `{"emails_sent","emails_pending","notices_pending",
/// "messages":[{"id","kind","ref_id","sent_at"?,"attempts"}]}`; `sent_at` in epoch ms;
/// `emails_pending` counts messages to fans (emails, refunds), `notices_pending` those to the
/// waiting room.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/outbox",
    tag = "admin",
    summary = "The outbox: emails, refunds and notices to the waiting room",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{emails_sent, emails_pending, notices_pending, messages:[{id, kind, ref_id, sent_at?, attempts}]} (sent_at epoch ms)", body = Object),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn outbox(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let rows: Vec<(i64, String, String, Option<i64>, i64)> = sqlx::query_as(
        "SELECT id, kind, ref_id, sent_at, attempts FROM outbox WHERE show_id = $1 ORDER BY id",
    )
    .bind(&show)
    .fetch_all(&state.db)
    .await?;
    let is_email = |k: &str| k == "confirmation-email";
    let sent = rows
        .iter()
        .filter(|r| is_email(&r.1) && r.3.is_some())
        .count();
    let to_fan = |k: &str| !crate::outbox::notify::is_notice(k);
    let pending = rows
        .iter()
        .filter(|r| to_fan(&r.1) && r.3.is_none())
        .count();
    let notices_pending = rows
        .iter()
        .filter(|r| !to_fan(&r.1) && r.3.is_none())
        .count();
    let messages: Vec<Value> = rows
        .iter()
        .map(|(id, kind, ref_id, sent_at, attempts)| {
            json!({"id": id, "kind": kind, "ref_id": ref_id, "sent_at": sent_at, "attempts": attempts})
        })
        .collect();
    Ok(Json(
        json!({"emails_sent": sent, "emails_pending": pending, "notices_pending": notices_pending, "messages": messages}),
    ))
}

/// `GET /admin/shows/{show}/refunds`: `[{"hold_id","payment_id","transaction_id","amount_cents",
/// "status":"pending"/"refunded","refund_id"?}]`.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/refunds",
    tag = "admin",
    summary = "Refunds of payments that completed after their seats were gone",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "[{hold_id, payment_id, transaction_id, amount_cents, status: pending/refunded, refund_id?}]", body = Object),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn refunds(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let rows: Vec<(String, String, String, i64, String, Option<String>)> = sqlx::query_as(
        "SELECT hold_id, payment_id, transaction_id, amount_cents, status, refund_id FROM refunds \
         WHERE show_id = $1 ORDER BY created_at, hold_id",
    )
    .bind(&show)
    .fetch_all(&state.db)
    .await?;
    Ok(Json(Value::Array(
        rows.into_iter()
            .map(|(h, p, t, a, s, r)| json!({"hold_id": h, "payment_id": p, "transaction_id": t, "amount_cents": a, "status": s, "refund_id": r}))
            .collect(),
    )))
}

/// One `alerts` row: id, at (epoch ms), show, hold, kind, message.
type AlertRow = (i64, i64, Option<String>, Option<String>, String, String);

/// `GET /admin/alerts`: `[{"id","at","show","hold_id","kind","message"}]` (`at` in epoch ms).
#[utoipa::path(
    get,
    path = "/admin/alerts",
    tag = "admin",
    summary = "Operator alerts",
    params(),
    responses(
        (status = 200, description = "[{id, at, show, hold_id, kind, message}] (at epoch ms)", body = Object),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn alerts(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let rows: Vec<AlertRow> =
        sqlx::query_as("SELECT id, at, show_id, hold_id, kind, message FROM alerts ORDER BY id")
            .fetch_all(&state.db)
            .await?;
    Ok(Json(Value::Array(
        rows.into_iter()
            .map(|(id, at, s, h, k, m)| json!({"id": id, "at": at, "show": s, "hold_id": h, "kind": k, "message": m}))
            .collect(),
    )))
}
