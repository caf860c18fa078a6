//! "Leave the line" (issue 18 item 5): a fan who gives up frees their place at once, so the
//! people behind see one fewer ahead on their next position read (API.md
//! `POST /api/events/{event}/leave`). A shadowed visitor gets the same answer and keeps its
//! shadow entry (leaving must not turn a shadowed id into a fan's).

use super::error::bounded;
use super::fan::{require_identity, shadow_entry};
use super::{parse_event, private_json, AppState};
use crate::domain::Left;
use crate::http::openapi::ProblemDoc;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::Problem;
use serde_json::json;

/// `POST /api/events/{event}/leave`.
#[tracing::instrument(skip_all, fields(event = %event))]
#[utoipa::path(
    post,
    path = "/api/events/{event}/leave",
    tag = "fan",
    summary = "Leave the line (give the place up)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "left: `place` (the number given up, vacated for the people behind) or `prequeue`; queue_number", body = Object),
        (status = 409, description = "not-waiting: no place to leave, or the cursor already reached it (the invitation or admission runs its course)", body = ProblemDoc),
        (status = 401, description = "missing, malformed, forged or expired token", body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 429, description = "rate-limited per client IP (Retry-After)", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("join_token" = [])),
)]
pub async fn leave(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = require_identity(&st, &headers, &event)?;
    let left = match shadow_entry(&st, &event, &visitor).await? {
        Some(e) => Left::Vacated(e.shown_number()),
        None => bounded(st.store_timeout(), st.0.store.leave(&event, &visitor)).await?,
    };
    let (what, number) = match left {
        Left::Vacated(n) => ("place", Some(n)),
        Left::Unqueued => ("prequeue", None),
        Left::NotWaiting => return Err(not_waiting()),
    };
    crate::telemetry::count_event("wr_leaves_total", event.as_str());
    Ok(private_json(
        StatusCode::OK,
        json!({"visitor_id": visitor.as_str(), "left": what, "queue_number": number}),
    ))
}

fn not_waiting() -> Problem {
    Problem::new(
        StatusCode::CONFLICT,
        "not-waiting",
        "There is no place in the line to leave",
    )
    .detail("not in the line, or your turn has come: the invitation or admission runs its course")
}
