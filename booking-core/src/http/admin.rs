//! Back-office endpoints behind the admin bearer token: per-show figures (including the
//! double-sale detector) and the bookings list.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use sale_common::Problem;
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::openapi::ProblemDoc;
use crate::error::ApiResult;
use crate::state::AppState;

/// An operator's name as given in an admin body: trimmed, 1 to 80 bytes, no control character
/// (a NUL or an escape was stored and audited as the name; the waiting room's `X-Operator` is
/// refused the same way). Else `400 bad-request`.
pub(crate) fn operator(who: &str) -> ApiResult<&str> {
    let who = who.trim();
    if who.is_empty() || !plain_text(who, 80) {
        let detail = "operator: 1 to 80 characters, no control character";
        return Err(Problem::bad_request(detail).into());
    }
    Ok(who)
}

/// Whether `text` is at most `max` characters (not bytes: `é` is one) with no control
/// character and no bidirectional control (`U+202E` would reorder what an operator or a fan
/// reads in an email or the audit trail: `sale_common::problem::is_bidi_control`).
pub(crate) fn plain_text(text: &str, max: usize) -> bool {
    text.chars().count() <= max
        && !text
            .chars()
            .any(|c| c.is_control() || sale_common::problem::is_bidi_control(c))
}

pub(crate) fn admin(state: &AppState, headers: &HeaderMap) -> ApiResult<()> {
    let given = sale_common::secret::bearer(headers);
    let ok: bool = given
        .as_bytes()
        .ct_eq(state.config.admin_token.expose().as_bytes())
        .into();
    if ok {
        Ok(())
    } else {
        Err(Problem::unauthorized("admin-required", "admin bearer token required").into())
    }
}

/// `GET /admin/shows/{show}/stats`: capacity, free (lapsed holds count free), held (live), sold,
/// holds_paid, bookings, seats_sold_twice (seats in more than one PAID hold; must be 0), and the
/// holds that ended by why: holds_expired (lapsed holds not yet swept included), holds_released,
/// holds_failed.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/stats",
    tag = "admin",
    summary = "Per-show figures and the double-sale detector",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{capacity, free, held, sold, holds_paid, bookings, seats_sold_twice, holds_expired, holds_released, holds_failed}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn stats(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    if !state.config.has_show(&show) {
        return Err(Problem::not_found(format!("show {}", crate::error::clip(&show))).into());
    }
    let now = state.clock.now_ms();
    let db = &state.db;
    let (capacity, sold, held) = crate::inventory::stock::seat_counts(db, &show, now).await?;
    let holds_paid: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM holds WHERE show_id = $1 AND status = 'PAID'")
            .bind(&show)
            .fetch_one(db)
            .await?;
    let bookings: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM bookings WHERE show_id = $1")
        .bind(&show)
        .fetch_one(db)
        .await?;
    let twice: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM (SELECT hs.seat_id FROM hold_seats hs JOIN holds h ON h.id = hs.hold_id \
         WHERE h.status = 'PAID' AND h.show_id = $1 AND hs.cancelled_at IS NULL GROUP BY hs.seat_id HAVING COUNT(*) > 1) t",
    )
    .bind(&show)
    .fetch_one(db)
    .await?;
    let ended = crate::inventory::stock::hold_ends(db, &show, now).await?;
    Ok(Json(json!({
        "capacity": capacity, "free": capacity - sold - held, "held": held, "sold": sold,
        "holds_paid": holds_paid, "bookings": bookings, "seats_sold_twice": twice,
        "holds_expired": ended.expired, "holds_released": ended.released,
        "holds_failed": ended.failed,
    })))
}

/// One booking with its hold: id, hold, visitor, status, amount, pool and places (pool
/// bookings), and an interval's kind, resource, start, end and blocked-until (epoch ms).
type BookingRow = (
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// `GET /admin/shows/{show}/bookings`: every booking, seat, pool or interval, oldest first:
/// `[{booking_id, hold_id, visitor_id, status, amount_cents (paid), refunded_cents (what its
/// cancellations gave back so far, by the shop or by the provider; a partial refund made in the
/// gateway's console cancels nothing and is an alert, not counted), currency, seats,
/// cancelled_seats, pool?, quantity?, interval?}]` (`interval` as in the fan's hold view: kind,
/// resource, start and end in epoch ms and ISO 8601, blocked-until).
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/bookings",
    tag = "admin",
    summary = "Bookings (seats, pool places and intervals), oldest first",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "[{booking_id, hold_id, visitor_id, status: active/cancelled, amount_cents (paid), refunded_cents (refunded so far), currency, seats, cancelled_seats, pool?, quantity?, interval? {kind, resource, start, end, start_at, end_at, blocked_until}}]", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn bookings(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    if !state.config.has_show(&show) {
        return Err(Problem::not_found(format!("show {}", crate::error::clip(&show))).into());
    }
    let rows: Vec<BookingRow> = sqlx::query_as(
        "SELECT b.id, b.hold_id, b.visitor_id, b.status, h.amount_cents, hp.pool_id, \
         CAST(hp.quantity AS BIGINT), hr.kind, hr.resource, CAST(hr.start_ms AS BIGINT), \
         CAST(hr.end_ms AS BIGINT), CAST(hr.until_ms AS BIGINT) \
         FROM bookings b JOIN holds h ON h.id = b.hold_id \
         LEFT JOIN hold_pools hp ON hp.hold_id = b.hold_id \
         LEFT JOIN hold_resources hr ON hr.hold_id = b.hold_id \
         WHERE b.show_id = $1 ORDER BY b.created_at, b.id",
    )
    .bind(&show)
    .fetch_all(&state.db)
    .await?;
    let seats: Vec<(String, String, Option<i64>)> = sqlx::query_as(
        "SELECT hs.hold_id, hs.seat_id, hs.cancelled_at FROM hold_seats hs JOIN bookings b ON b.hold_id = hs.hold_id \
         WHERE b.show_id = $1 ORDER BY hs.seat_id",
    )
    .bind(&show)
    .fetch_all(&state.db)
    .await?;
    // Money back so far per booking: its cancellations refunded by us or by the provider.
    let refunded: std::collections::HashMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "SELECT booking_id, CAST(SUM(amount_cents) AS BIGINT) FROM cancellations \
         WHERE show_id = $1 AND refund IN ('refunded', 'at-gateway') GROUP BY booking_id",
    )
    .bind(&show)
    .fetch_all(&state.db)
    .await?
    .into_iter()
    .collect();
    let currency = state
        .config
        .shows
        .iter()
        .find(|s| s.id == show)
        .map(|s| s.venue.currency.clone())
        .unwrap_or_default();
    let mut by_hold: std::collections::HashMap<&str, (Vec<&str>, Vec<&str>)> = Default::default();
    for (hold, seat, cancelled) in &seats {
        let e = by_hold.entry(hold.as_str()).or_default();
        if cancelled.is_some() {
            e.1.push(seat)
        } else {
            e.0.push(seat)
        }
    }
    let out: Vec<Value> = rows
        .iter()
        .map(|(bid, hid, vid, st, amount, pool, qty, kind, resource, start, end, until)| {
            let (live, gone) = by_hold.get(hid.as_str()).cloned().unwrap_or_default();
            let back = refunded.get(bid.as_str()).copied().unwrap_or(0);
            let mut v = json!({"booking_id": bid, "hold_id": hid, "visitor_id": vid, "status": st,
                "amount_cents": amount, "refunded_cents": back, "currency": currency,
                "seats": live, "cancelled_seats": gone});
            if let Some(p) = pool {
                v["pool"] = p.clone().into();
                v["quantity"] = (*qty).into();
            }
            if let (Some(k), Some(r), Some(a), Some(e), Some(u)) = (kind, resource, start, end, until) {
                v["interval"] = crate::inventory::resources::interval_json(k, r, *a, *e, *u);
            }
            v
        })
        .collect();
    Ok(Json(Value::Array(out)))
}

/// `GET /admin/shows/{show}/pools/drift`: the pool counters against the rows they cache,
/// `{"show","pools":[{"pool","taken","counted_rows","drift"}],"drifting"}`; also sets the
/// `bc_pool_drift` gauge. Any `drift` ≠ 0 is a bug to investigate.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/pools/drift",
    tag = "admin",
    summary = "Pool counters against the rows they cache (drift must be 0)",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{show, pools:[{pool, taken, counted_rows, drift}], drifting}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn drift(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    if !state.config.has_show(&show) {
        return Err(Problem::not_found(format!("show {}", crate::error::clip(&show))).into());
    }
    let pools = crate::inventory::pools::drift(&state.db, &show).await?;
    let drifting = pools.iter().filter(|p| p["drift"] != 0).count();
    Ok(Json(
        json!({"show": show, "pools": pools, "drifting": drifting}),
    ))
}

/// Body of `POST /admin/shows/{show}/hold-queue`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSwitch {
    /// Whether the show's holds go through its queue.
    enabled: bool,
}

/// `GET /admin/shows/{show}/hold-queue`: whether the show's holds go through its queue.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/hold-queue",
    tag = "admin",
    summary = "Whether the show's holds go through its queue",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{show, enabled}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn hold_queue(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    if !state.config.has_show(&show) {
        return Err(Problem::not_found(format!("show {}", crate::error::clip(&show))).into());
    }
    let on = state.hold_queues.is_on(&show);
    Ok(Json(json!({"show": show, "enabled": on})))
}

/// `POST /admin/shows/{show}/hold-queue {"enabled": bool}`: the per-show hold queue switch
/// (seed 002, `crate::inventory::hotq`), in this process.
#[utoipa::path(
    post,
    path = "/admin/shows/{show}/hold-queue",
    tag = "admin",
    summary = "Switch the show's hold queue (this process)",
    params(("show" = String, Path, description = "show id")),
    request_body(content = QueueSwitch),
    responses(
        (status = 200, description = "{show, enabled}", body = Object),
        (status = 400, description = "invalid-body", body = ProblemDoc),
        (status = 415, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 422, description = "invalid-body: a member missing, unknown or of the wrong type", body = ProblemDoc),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn set_hold_queue(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let body: QueueSwitch = sale_common::body::object(&headers, body)?;
    if !state.config.has_show(&show) {
        return Err(Problem::not_found(format!("show {}", crate::error::clip(&show))).into());
    }
    state.hold_queues.set(&show, body.enabled);
    tracing::info!(show, enabled = body.enabled, "hold queue switched");
    Ok(Json(json!({"show": show, "enabled": body.enabled})))
}
