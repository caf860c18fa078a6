//! The shadow line's fan answers (issue 15 item 2): a shadowed visitor's join, position,
//! heartbeat and claim get answers shaped like a fan's, from the published status document and
//! its own entry, never from the fans' line. Its number is its entry's `behind + shadow_number`
//! (a place at the back as it joined, counted from the shadow line's own sequence: no fan's
//! number is taken and the fans' counter never moves); the cursor it is told stops below that
//! number, and its claim is always `409 not-your-turn` (or the event's refusal), so it is never
//! admitted and never takes a `max_active` slot.

use super::{private_json, AppState};
use crate::domain::{EventId, VisitorId};
use crate::lanes::ShadowEntry;
use axum::http::StatusCode;
use axum::response::Response;
use sale_common::Problem;
use serde_json::json;

/// What a shadowed visitor is told: (queue number, cursor, public state).
fn view(st: &AppState, event: &EventId, e: &ShadowEntry) -> (Option<u64>, u64, &'static str) {
    let (state, cursor) =
        st.0.status
            .get(event)
            .map_or(("prequeue", 0), |d| (d.state, d.cursor));
    if state == "prequeue" {
        return (None, 0, state);
    }
    let n = e.shown_number();
    (Some(n), cursor.min(n.saturating_sub(1)), state)
}

/// The join answer: a join token and a number, like a fan's.
pub fn joined(st: &AppState, event: &EventId, visitor: &VisitorId, e: &ShadowEntry) -> Response {
    let (n, _, state) = view(st, event, e);
    let now = st.0.clock.now_secs();
    let token =
        st.0.join_keys
            .issue(event, visitor, now, st.0.config.join_token_ttl_secs);
    private_json(
        StatusCode::OK,
        json!({
            "visitor_id": visitor.as_str(),
            "join_token": token,
            "queue_number": n,
            "state": state,
        }),
    )
}

/// `GET …/position`.
pub fn position(st: &AppState, event: &EventId, visitor: &VisitorId, e: &ShadowEntry) -> Response {
    let (n, cursor, state) = view(st, event, e);
    private_json(
        StatusCode::OK,
        json!({
            "visitor_id": visitor.as_str(),
            "queue_number": n,
            "cursor": cursor,
            "ahead": n.map(|n| n - cursor - 1),
            "state": state,
            "admitted": false,
        }),
    )
}

/// `POST …/heartbeat`.
pub fn heartbeat(st: &AppState, event: &EventId, e: &ShadowEntry) -> Response {
    let (n, cursor, state) = view(st, event, e);
    let place = if n.is_some() { "waiting" } else { "unnumbered" };
    private_json(
        StatusCode::OK,
        json!({
            "queue_number": n,
            "cursor": cursor,
            "state": state,
            "place": place,
            "heartbeat_interval_ms": st.0.config.heartbeat_interval_ms,
        }),
    )
}

/// `POST …/admission`: never an admission.
pub fn claim(st: &AppState, event: &EventId, e: &ShadowEntry) -> Problem {
    let (n, cursor, state) = view(st, event, e);
    match crate::domain::EventState::parse(state) {
        Some(
            s @ (crate::domain::EventState::Paused
            | crate::domain::EventState::Closed
            | crate::domain::EventState::SoldOut),
        ) => super::fan::refused(s),
        _ => Problem::new(StatusCode::CONFLICT, "not-your-turn", "Not your turn yet")
            .with("queue_number", n)
            .with("cursor", cursor),
    }
}
