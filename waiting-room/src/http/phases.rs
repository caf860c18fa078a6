//! Scheduled phases over HTTP (issue 14 item 2; API.md "Scheduled phases"): `PUT
//! /admin/events/{event}/phases` sets an event's schedule, `DELETE` clears it, both audited
//! (`set_phases`, `clear_phases`). The admitter applies each phase at its time
//! (`crate::admitter`, audited as operator `schedule`).

use super::admin::{figures_json, operator, record, OPENS_AT_SPAN_SECS};
use super::error::bounded;
use super::transitions::audited_transition;
use super::{parse_event, private_json, AppState};
use crate::domain::EventState;
use crate::http::openapi::ProblemDoc;
use crate::phases::Phases;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde_json::{json, Value};

#[utoipa::path(
    put,
    path = "/admin/events/{event}/phases",
    tag = "admin",
    summary = "Set the event's scheduled phases (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = Phases,
    responses(
        (status = 200, description = "figures, with `phases`", body = Object),
        (status = 422, description = "times out of order or range (invalid-phases), or unknown field", body = ProblemDoc),
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
    body: Result<JsonObject<Phases>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(p) = body?;
    let now = st.0.clock.now_secs();
    p.check(now, OPENS_AT_SPAN_SECS).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-phases",
            "Invalid phases",
        )
        .detail(e.to_string())
    })?;
    let old = bounded(st.store_timeout(), st.0.store.set_phases(&event, Some(&p))).await?;
    record(&st, &event, &who, "set_phases", json!(old), json!(p)).await;
    // Before the pre-queue opens the event takes no joins: closed until the schedule opens it.
    if p.prequeue_opens_at.is_some_and(|t| t > now) {
        let pre = [EventState::Prequeue];
        audited_transition(&st, &event, &who, &pre, EventState::Closed).await?;
    }
    st.refresh_status(&event).await;
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}

#[utoipa::path(
    delete,
    path = "/admin/events/{event}/phases",
    tag = "admin",
    summary = "Clear the event's scheduled phases (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures, `phases` null", body = Object),
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
    let old = bounded(st.store_timeout(), st.0.store.set_phases(&event, None)).await?;
    if old.is_some() {
        record(&st, &event, &who, "clear_phases", json!(old), Value::Null).await;
    }
    st.refresh_status(&event).await;
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}
