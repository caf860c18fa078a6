//! Back-office history behind the admin bearer token (issue 5, seed 001 "Auditing": "I booked
//! that and you gave it away" must be answerable): holds filtered and paged, a seat's history
//! (every hold that included it and each of that hold's audit rows: who held it, when, why it
//! was released) and a hold's history. Times in epoch ms (`at`).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Json;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::{json, Value};

use super::admin::admin;
use super::openapi::ProblemDoc;
use crate::error::ApiResult;
use crate::state::AppState;

/// Paging and filters: `limit` 1..=500 (default 100), `offset` (default 0), `status`
/// (`HELD`/`PAID`/`RELEASED`), `ended_as` (`expired`/`released`/`failed`), `visitor`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Page {
    limit: Option<i64>,
    offset: Option<i64>,
    status: Option<String>,
    ended_as: Option<String>,
    visitor: Option<String>,
}

impl Page {
    /// `(limit, offset)`, or 422 `invalid-page` when `limit` is outside 1..=500 or `offset`
    /// is negative.
    fn bounds(&self) -> Result<(i64, i64), Problem> {
        let limit = self.limit.unwrap_or(100);
        let offset = self.offset.unwrap_or(0);
        if !(1..=500).contains(&limit) || offset < 0 {
            return Err(unprocessable("invalid-page", "Invalid paging")
                .detail("limit must be 1 to 500 and offset 0 or more"));
        }
        Ok((limit, offset))
    }

    /// The `status` filter, or 422 `invalid-status` unless it is HELD, PAID or RELEASED.
    fn status(&self) -> Result<String, Problem> {
        match self.status.as_deref() {
            None | Some("") => Ok(String::new()),
            Some(s @ ("HELD" | "PAID" | "RELEASED")) => Ok(s.to_owned()),
            Some(_) => Err(unprocessable("invalid-status", "Invalid status filter")
                .detail("status must be HELD, PAID or RELEASED")),
        }
    }

    /// The `ended_as` filter, or 422 `invalid-ended-as` unless it is expired, released or failed.
    fn ended_as(&self) -> Result<String, Problem> {
        match self.ended_as.as_deref() {
            None | Some("") => Ok(String::new()),
            Some(s @ ("expired" | "released" | "failed")) => Ok(s.to_owned()),
            Some(_) => Err(unprocessable("invalid-ended-as", "Invalid ended_as filter")
                .detail("ended_as must be expired, released or failed")),
        }
    }
}

fn unprocessable(kind: &'static str, title: &str) -> Problem {
    crate::inventory::claim::unprocessable(kind, title)
}

/// The query, or its rejection as a problem.
fn page(q: Result<Query<Page>, QueryRejection>) -> Result<Page, Problem> {
    q.map(|Query(p)| p)
        .map_err(|r| crate::error::rejection(r.status(), "query", &r.body_text()))
}

/// One audit row joined with its hold: at, hold, visitor, action, actor, reason.
type Row = (i64, String, Option<String>, String, String, Option<String>);

fn rows_json(rows: Vec<Row>) -> Vec<Value> {
    rows.into_iter()
        .map(|(at, hold, visitor, action, actor, reason)| {
            json!({"at": at, "hold_id": hold, "visitor_id": visitor, "action": action, "actor": actor, "reason": reason})
        })
        .collect()
}

/// `GET /admin/shows/{show}/holds?status=&ended_as=&visitor=&limit=&offset=`: newest first,
/// `{"holds":[{"hold_id","visitor_id","status","ended_as","channel","amount_cents",
/// "created_at","expires_at","seats":[…]}],"limit","offset"}`; `ended_as` is why a RELEASED
/// hold ended (null otherwise).
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/holds",
    tag = "admin",
    summary = "Holds newest first, filtered and paged",
    params(("show" = String, Path, description = "show id"),
        ("status" = Option<String>, Query, description = "HELD, PAID or RELEASED"),
        ("ended_as" = Option<String>, Query, description = "expired, released or failed"),
        ("visitor" = Option<String>, Query, description = "visitor id"),
        ("limit" = Option<i64>, Query, description = "1..=500, default 100"),
        ("offset" = Option<i64>, Query, description = "0 or more, default 0")),
    responses(
        (status = 200, description = "{holds:[{hold_id, visitor_id, status, ended_as (expired/released/failed or null), channel, amount_cents, created_at, expires_at, seats}], limit, offset} (times epoch ms)", body = Object),
        (status = 400, description = "invalid-query: an unknown or unparsable parameter", body = ProblemDoc),
        (status = 422, description = "invalid-page, invalid-status, invalid-ended-as", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn holds(
    State(state): State<AppState>,
    Path(show): Path<String>,
    q: Result<Query<Page>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let p = page(q)?;
    let (limit, offset) = p.bounds()?;
    let status = p.status()?;
    let ended_as = p.ended_as()?;
    type H = (
        String,
        String,
        String,
        Option<String>,
        String,
        i64,
        i64,
        i64,
    );
    let rows: Vec<H> = sqlx::query_as(
        "SELECT id, visitor_id, status, ended_as, channel, amount_cents, created_at, expires_at \
         FROM holds WHERE show_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR visitor_id = $3) \
         AND ($6 = '' OR ended_as = $6) ORDER BY created_at DESC, id DESC LIMIT $4 OFFSET $5",
    )
    .bind(&show)
    .bind(status)
    .bind(p.visitor.clone().unwrap_or_default())
    .bind(limit)
    .bind(offset)
    .bind(ended_as)
    .fetch_all(&state.db)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for (id, visitor, status, ended_as, channel, amount, created, expires) in rows {
        let seats = crate::inventory::holds::seats_of(&state.db, &id).await?;
        out.push(
            json!({"hold_id": id, "visitor_id": visitor, "status": status, "ended_as": ended_as, "channel": channel,
            "amount_cents": amount, "created_at": created, "expires_at": expires, "seats": seats}),
        );
    }
    Ok(Json(
        json!({"holds": out, "limit": limit, "offset": offset}),
    ))
}

/// `GET /admin/shows/{show}/seats/{seat}/history?limit=&offset=`: oldest first, every audit
/// row of every hold that included the seat: `{"seat","history":[{"at","hold_id","visitor_id",
/// "action","actor","reason"}]}`.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/seats/{seat}/history",
    tag = "admin",
    summary = "Every audit row of every hold that included the seat, oldest first",
    params(("show" = String, Path, description = "show id"),
        ("seat" = String, Path, description = "seat id {section}-{row}-{n}"),
        ("limit" = Option<i64>, Query, description = "1..=500, default 100"),
        ("offset" = Option<i64>, Query, description = "0 or more, default 0")),
    responses(
        (status = 200, description = "{seat, history:[{at, hold_id, visitor_id, action, actor, reason}]} (at epoch ms)", body = Object),
        (status = 400, description = "invalid-query: an unknown or unparsable parameter", body = ProblemDoc),
        (status = 422, description = "invalid-page", body = ProblemDoc),
        (status = 404, description = "no such seat", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn seat(
    State(state): State<AppState>,
    Path((show, seat)): Path<(String, String)>,
    q: Result<Query<Page>, QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let p = page(q)?;
    let (limit, offset) = p.bounds()?;
    let known: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM seats WHERE show_id = $1 AND seat_id = $2",
    )
    .bind(&show)
    .bind(&seat)
    .fetch_one(&state.db)
    .await?;
    if known == 0 {
        return Err(Problem::not_found(format!("seat {}", crate::error::clip(&seat))).into());
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT a.at, a.hold_id, h.visitor_id, a.action, a.actor, a.reason FROM audit a \
         JOIN hold_seats hs ON hs.hold_id = a.hold_id JOIN holds h ON h.id = a.hold_id \
         WHERE hs.show_id = $1 AND hs.seat_id = $2 ORDER BY a.at, a.id LIMIT $3 OFFSET $4",
    )
    .bind(&show)
    .bind(&seat)
    .bind(limit)
    .bind(offset)
    .fetch_all(&state.db)
    .await?;
    Ok(Json(json!({"seat": seat, "history": rows_json(rows)})))
}

/// `GET /admin/holds/{hold}/history`: `{"hold_id","show","visitor_id","status","seats",
/// "history":[…]}`, oldest first; 404 for an unknown hold.
#[utoipa::path(
    get,
    path = "/admin/holds/{hold}/history",
    tag = "admin",
    summary = "A hold and its audit rows, oldest first",
    params(("hold" = String, Path, description = "hold id")),
    responses(
        (status = 200, description = "{hold_id, show, visitor_id, status, seats, history:[…]}", body = Object),
        (status = 404, description = "no such hold", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn hold(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let Some(h) = crate::inventory::holds::load(&state.db, &id).await? else {
        return Err(Problem::not_found(format!("hold {}", crate::error::clip(&id))).into());
    };
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT a.at, a.hold_id, h.visitor_id, a.action, a.actor, a.reason FROM audit a \
         JOIN holds h ON h.id = a.hold_id WHERE a.hold_id = $1 ORDER BY a.at, a.id",
    )
    .bind(&id)
    .fetch_all(&state.db)
    .await?;
    let seats = crate::inventory::holds::seats_of(&state.db, &id).await?;
    Ok(Json(
        json!({"hold_id": h.id, "show": h.show_id, "visitor_id": h.visitor_id,
        "status": h.status, "seats": seats, "history": rows_json(rows)}),
    ))
}
