//! Service-to-service API for the booking core (API.md "internal"): bearer `service_token`
//! compared in constant time; absent from the config → every call is 404 (the API is off).
//! `sessions/end` frees a `max_active` slot when a session finishes (booking paid, hold
//! released, fan left), idempotently; `sold-out` is the state transition the booking core
//! reports when inventory runs out (recorded in the audit trail as operator `service`), and
//! `reopen` its undo when a seat is freed after that (seed 000: "a freed seat reopens the level
//! on the page"; the status document's transition latch publishes it at once).

use super::admin::token_matches;
use super::error::bounded;
use super::transitions::audited_transition;
use super::{parse_event, private_json, AppState};
use crate::domain::{EventState, SessionEnd, SessionRef};
use crate::http::openapi::ProblemDoc;
use crate::store::StoreError;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::json;

/// The internal routes, behind the service-token check.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/internal/events/{event}/sessions/end", post(end_session))
        .route(
            "/internal/events/{event}/sessions/end-batch",
            post(end_sessions),
        )
        .route("/internal/events/{event}/sold-out", post(sold_out))
        .route("/internal/events/{event}/reopen", post(reopen))
        .route_layer(middleware::from_fn_with_state(state, require_service))
}

async fn require_service(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let Some(expected) = st.0.config.service_token.as_ref() else {
        return Problem::not_found("the internal API is not configured").into_response();
    };
    let given = sale_common::secret::bearer(req.headers());
    if !token_matches(given, expected.expose()) {
        return Problem::unauthorized(
            "service-token-required",
            "send Authorization: Bearer <service token>",
        )
        .into_response();
    }
    next.run(req).await
}

/// Body of `POST /internal/events/{event}/sessions/end`: exactly one of the two.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndSession {
    jti: Option<String>,
    visitor_id: Option<String>,
}

#[utoipa::path(
    post,
    path = "/internal/events/{event}/sessions/end",
    tag = "internal",
    summary = "A booking session finished: free its max_active slot (idempotent)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = EndSession,
    responses(
        (status = 200, description = "ended, already_ended", body = Object),
        (status = 404, description = "unknown jti / visitor or event", body = ProblemDoc),
        (status = 422, body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("service_token" = [])),
)]
pub(crate) async fn end_session(
    State(st): State<AppState>,
    Path(event): Path<String>,
    body: Result<JsonObject<EndSession>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let JsonObject(b) = body?;
    let session = match (b.jti, b.visitor_id) {
        (Some(j), None) if jti_ok(&j) => SessionRef::Jti(j),
        (None, Some(v)) if uuid::Uuid::parse_str(&v).is_ok() => SessionRef::Visitor(v),
        _ => {
            return Err(invalid_body(
                "send exactly one of {\"jti\"} or {\"visitor_id\": uuid}",
            ))
        }
    };
    let now = st.0.clock.now_secs();
    let call = st.0.store.end_session(&event, &session, now);
    let out = bounded(st.store_timeout(), call).await?;
    let ended = match out {
        SessionEnd::Ended => true,
        SessionEnd::AlreadyEnded => false,
        SessionEnd::Unknown => {
            return Err(Problem::not_found("no admission with that jti / visitor"))
        }
    };
    sessions_ended(&st, &event, usize::from(ended)).await;
    Ok(private_json(
        StatusCode::OK,
        json!({"ended": ended, "already_ended": !ended}),
    ))
}

/// Longest jti `sessions/end` and `sessions/end-batch` take, characters (the booking core's
/// `notify::end_of` keeps to it).
pub const JTI_MAX: usize = 128;

fn jti_ok(j: &str) -> bool {
    (1..=JTI_MAX).contains(&j.len())
}

fn invalid_body(detail: impl Into<String>) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid-body",
        "Invalid request body",
    )
    .detail(detail)
}

/// After `n` sessions of `event` ended here: counted, and the status document refreshed
/// (its `active` figure) when `n > 0`.
async fn sessions_ended(st: &AppState, event: &crate::domain::EventId, n: usize) {
    if n == 0 {
        return;
    }
    // Not `wr_sessions_ended_total`: that is the gauge of the store's count (every node's);
    // one name with two types made an invalid exposition that summed to twice the truth.
    metrics::counter!("wr_session_ends_received_total", "event" => event.to_string())
        .increment(n as u64);
    st.refresh_status(event).await;
}

/// Most admissions one `sessions/end-batch` call may end.
pub const END_BATCH_MAX: usize = 256;

/// Body of `POST /internal/events/{event}/sessions/end-batch`: 1..=[`END_BATCH_MAX`] jtis,
/// each 1..=[`JTI_MAX`] characters.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndSessions {
    jtis: Vec<String>,
}

#[utoipa::path(
    post,
    path = "/internal/events/{event}/sessions/end-batch",
    tag = "internal",
    summary = "Several booking sessions finished: free their max_active slots in one call (idempotent)",
    description = "What `sessions/end` does for each jti, in one request (the booking core's \
        outbox sends one per event and poll instead of one per admission). Never 404: an \
        unknown jti, or every jti of an unknown event, is counted in `unknown`, so a 404 means \
        a waiting room without this route (the booking core then sends them one by one).",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = EndSessions,
    responses(
        (status = 200, description = "ended, already_ended, unknown: counts of the jtis", body = Object),
        (status = 422, body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After); the call may be repeated whole", body = ProblemDoc)
    ),
    security(("service_token" = [])),
)]
pub(crate) async fn end_sessions(
    State(st): State<AppState>,
    Path(event): Path<String>,
    body: Result<JsonObject<EndSessions>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let JsonObject(b) = body?;
    let n = b.jtis.len();
    if n == 0 || n > END_BATCH_MAX || !b.jtis.iter().all(|j| jti_ok(j)) {
        return Err(invalid_body(format!(
            "send {{\"jtis\": [...]}}: 1 to {END_BATCH_MAX} jtis of 1 to {JTI_MAX} characters"
        )));
    }
    let now = st.0.clock.now_secs();
    // One store call per jti, all in flight at once (Redis pipelines them on the one
    // multiplexed connection), bounded together by the store timeout.
    let (store, ev) = (&st.0.store, &event);
    let calls = b.jtis.into_iter().map(|j| async move {
        match store.end_session(ev, &SessionRef::Jti(j), now).await {
            Err(StoreError::NotFound) => Ok(SessionEnd::Unknown),
            other => other,
        }
    });
    let all = async { futures::future::join_all(calls).await.into_iter().collect() };
    let outs: Vec<SessionEnd> = bounded(st.store_timeout(), all).await?;
    let count = |k: SessionEnd| outs.iter().filter(|o| **o == k).count();
    let ended = count(SessionEnd::Ended);
    sessions_ended(&st, &event, ended).await;
    Ok(private_json(
        StatusCode::OK,
        json!({
            "ended": ended,
            "already_ended": count(SessionEnd::AlreadyEnded),
            "unknown": count(SessionEnd::Unknown),
        }),
    ))
}

#[utoipa::path(
    post,
    path = "/internal/events/{event}/sold-out",
    tag = "internal",
    summary = "Inventory ran out (audited as operator service)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "event, state", body = Object),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("service_token" = [])),
)]
pub(crate) async fn sold_out(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    use EventState::*;
    let event = parse_event(&event)?;
    let from = [Prequeue, Opening, Open, Paused, Closed];
    let state = audited_transition(&st, &event, "service", &from, SoldOut).await?;
    Ok(private_json(
        StatusCode::OK,
        json!({"event": event.as_str(), "state": state.public()}),
    ))
}

#[utoipa::path(
    post,
    path = "/internal/events/{event}/reopen",
    tag = "internal",
    summary = "A seat was freed after sold out: sold_out → open (audited as operator service)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "event, state (unchanged unless it was sold_out)", body = Object),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("service_token" = [])),
)]
pub(crate) async fn reopen(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let from = [EventState::SoldOut];
    let state = audited_transition(&st, &event, "service", &from, EventState::Open).await?;
    Ok(private_json(
        StatusCode::OK,
        json!({"event": event.as_str(), "state": state.public()}),
    ))
}
