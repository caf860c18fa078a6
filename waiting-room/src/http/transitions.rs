//! Operator state transitions (API.md "admin"): pause, resume, open now, close, sold out. Each
//! is a compare-and-set in the store, recorded in the audit trail with the state before and
//! after, and republishes the status document at once. The booking core's sold-out report
//! (`internal`) goes through [`audited_transition`] too.

use super::admin::{figures_json, operator, record};
use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::admitter::{audit_draw, open_event};
use crate::domain::{EventId, EventState};
use crate::http::openapi::ProblemDoc;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::Problem;
use serde_json::json;

/// A compare-and-set state change, recorded in the audit trail with the state before and
/// after; returns the state after (unchanged when the event was not in one of `from`).
pub async fn audited_transition(
    st: &AppState,
    event: &EventId,
    who: &str,
    from: &[EventState],
    to: EventState,
) -> Result<EventState, Problem> {
    let limit = st.store_timeout();
    let old = bounded(limit, st.0.store.event(event))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    let (after, moved) = bounded(limit, st.0.store.transition(event, from, to)).await?;
    if !moved {
        // Nothing changed (already there, or not from one of `from`): nothing to audit.
        return Ok(after);
    }
    let action = if to == EventState::Open && old.state == EventState::SoldOut {
        "reopen"
    } else if to == EventState::Open {
        "resume"
    } else {
        to.as_str()
    };
    record(
        st,
        event,
        who,
        action,
        old.state.as_str().into(),
        after.as_str().into(),
    )
    .await;
    st.refresh_status(event).await;
    Ok(after)
}

/// 409 `invalid-transition`: the event's state `from` does not allow the move to `to`.
pub fn invalid_transition(from: EventState, to: &str) -> Problem {
    Problem::new(
        StatusCode::CONFLICT,
        "invalid-transition",
        "Invalid state transition",
    )
    .detail(format!("cannot go from {} to {to}", from.as_str()))
    .with("from", from.as_str())
    .with("to", to)
}

/// An operator transition: 409 (and no audit entry) unless the event is in one of `from`,
/// also when a concurrent change wins the compare-and-set.
async fn change(
    st: &AppState,
    event: &str,
    headers: &HeaderMap,
    from: &[EventState],
    to: EventState,
) -> Result<Response, Problem> {
    let event = parse_event(event)?;
    let who = operator(headers)?;
    let limit = st.store_timeout();
    let old = bounded(limit, st.0.store.event(&event))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    if !from.contains(&old.state) || old.state == to {
        return Err(invalid_transition(old.state, to.as_str()));
    }
    // Only the call that moved the state succeeds and is audited: a concurrent identical call
    // finds it moved already and is 409 (newcomer review: 8 concurrent pauses gave two 200s
    // and two audit entries in 3 of 10 rounds).
    let (after, moved) = bounded(limit, st.0.store.transition(&event, from, to)).await?;
    if !moved {
        return Err(invalid_transition(after, to.as_str()));
    }
    let action = if to == EventState::Open && old.state == EventState::SoldOut {
        "reopen"
    } else if to == EventState::Open {
        "resume"
    } else {
        to.as_str()
    };
    record(
        st,
        &event,
        &who,
        action,
        old.state.as_str().into(),
        after.as_str().into(),
    )
    .await;
    st.refresh_status(&event).await;
    Ok(private_json(
        StatusCode::OK,
        figures_json(st, &event).await?,
    ))
}

type Ev = Path<String>;

#[utoipa::path(
    post,
    path = "/admin/events/{event}/pause",
    tag = "admin",
    summary = "Hold the cursor (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 409, description = "invalid-transition: not allowed from the current state", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn pause(
    State(st): State<AppState>,
    Path(e): Ev,
    h: HeaderMap,
) -> Result<Response, Problem> {
    change(&st, &e, &h, &[EventState::Open], EventState::Paused).await
}

#[utoipa::path(
    post,
    path = "/admin/events/{event}/resume",
    tag = "admin",
    summary = "Move the cursor again (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 409, description = "invalid-transition: not allowed from the current state", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn resume(
    State(st): State<AppState>,
    Path(e): Ev,
    h: HeaderMap,
) -> Result<Response, Problem> {
    change(&st, &e, &h, &[EventState::Paused], EventState::Open).await
}

#[utoipa::path(
    post,
    path = "/admin/events/{event}/close",
    tag = "admin",
    summary = "No more joins or claims (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 409, description = "invalid-transition: not allowed from the current state", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn close(
    State(st): State<AppState>,
    Path(e): Ev,
    h: HeaderMap,
) -> Result<Response, Problem> {
    use EventState::*;
    change(&st, &e, &h, &[Prequeue, Opening, Open, Paused], Closed).await
}

#[utoipa::path(
    post,
    path = "/admin/events/{event}/sold-out",
    tag = "admin",
    summary = "Sold out (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 409, description = "invalid-transition: not allowed from the current state", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn sold_out(
    State(st): State<AppState>,
    Path(e): Ev,
    h: HeaderMap,
) -> Result<Response, Problem> {
    use EventState::*;
    change(
        &st,
        &e,
        &h,
        &[Prequeue, Opening, Open, Paused, Closed],
        SoldOut,
    )
    .await
}

/// `POST /admin/events/{event}/open`: opens now (numbers the pre-queue in draw order, audits the draw's publication) when still pre-queued.
#[utoipa::path(
    post,
    path = "/admin/events/{event}/open",
    tag = "admin",
    summary = "Open now (number the pre-queue in draw order) (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 409, description = "invalid-transition: not allowed from the current state", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub(crate) async fn open(
    State(st): State<AppState>,
    Path(e): Ev,
    h: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&e)?;
    let who = operator(&h)?;
    let limit = st.store_timeout();
    let old = bounded(limit, st.0.store.event(&event))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    // Only a pre-queued event opens (an interrupted opening, `opening`, is finished).
    if !matches!(old.state, EventState::Prequeue | EventState::Opening) {
        return Err(invalid_transition(old.state, "open"));
    }
    // The numbering runs in bounded chunks; give it more time than a single store call.
    let n = bounded(limit * 30, open_event(st.0.store.as_ref(), &event)).await?;
    let now = st.0.clock.now_secs();
    bounded(limit * 30, audit_draw(st.0.store.as_ref(), &event, now)).await?;
    let new = json!({"state": "open", "prequeued_numbered": n});
    record(&st, &event, &who, "open", old.state.as_str().into(), new).await;
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}
