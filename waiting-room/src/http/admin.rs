//! Operator API (API.md "admin"): bearer admin token compared in constant time; create events,
//! change admit rate and `max_active` live, pause/resume/open/close, read figures. Every change
//! is logged with the operator action and time, and republishes the status document at once.

use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::admitter::open_event;
use crate::domain::{EventId, EventMeta, EventState};
use crate::status::StatusDoc;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use sale_common::Problem;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The admin routes, behind the admin-token check.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin/events", get(list).post(create))
        .route("/admin/events/{event}", get(figures).patch(patch))
        .route("/admin/events/{event}/pause", post(pause))
        .route("/admin/events/{event}/resume", post(resume))
        .route("/admin/events/{event}/open", post(open))
        .route("/admin/events/{event}/close", post(close))
        .route("/admin/events/{event}/sold-out", post(sold_out))
        .route_layer(middleware::from_fn_with_state(state, require_admin))
}

async fn require_admin(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    // Hash both sides so the comparison is constant-time regardless of length.
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(st.0.config.admin_token.expose().as_bytes());
    if given.is_empty() || !bool::from(a.ct_eq(&b)) {
        return axum::response::IntoResponse::into_response(Problem::unauthorized(
            "admin-token-required",
            "send Authorization: Bearer <admin token>",
        ));
    }
    next.run(req).await
}

async fn figures_json(st: &AppState, event: &EventId) -> Result<serde_json::Value, Problem> {
    let now = st.0.clock.now_secs();
    let f = bounded(st.store_timeout(), st.0.store.figures(event, now))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    let doc = StatusDoc::build(&f, st.0.config.poll_interval_ms, now);
    st.0.status.publish(event.clone(), doc.clone());
    let mut v = serde_json::to_value(doc).map_err(|_| Problem::internal())?;
    v["admitted_total"] = f.admitted_total.into();
    v["max_active_seen"] = f.max_active_seen.into();
    Ok(v)
}

async fn list(State(st): State<AppState>) -> Result<Response, Problem> {
    let ids = bounded(st.store_timeout(), st.0.store.list_events()).await?;
    let mut out = Vec::new();
    for id in ids {
        out.push(figures_json(&st, &id).await?);
    }
    Ok(private_json(StatusCode::OK, serde_json::Value::Array(out)))
}

/// Body of `POST /admin/events`.
#[derive(Debug, Deserialize)]
pub struct CreateEvent {
    id: String,
    opens_at: i64,
    admit_rate: f64,
    max_active: u64,
    admission_ttl_secs: Option<u64>,
    booking_url: Option<String>,
}

fn unprocessable(detail: impl Into<String>) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid-body",
        "Invalid request body",
    )
    .detail(detail)
}

fn check_rate(r: f64) -> Result<f64, Problem> {
    if r.is_finite() && r > 0.0 {
        Ok(r)
    } else {
        Err(unprocessable("admit_rate must be a number > 0"))
    }
}

async fn create(
    State(st): State<AppState>,
    body: Result<Json<CreateEvent>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(b) = body?;
    let id = EventId::parse(&b.id).ok_or_else(|| unprocessable("id must match [a-z0-9-]{1,40}"))?;
    let default_url = st.0.config.events.first().map(|e| e.booking_url.clone());
    let meta = EventMeta {
        id: id.clone(),
        state: EventState::Prequeue,
        opens_at: b.opens_at,
        admit_rate: check_rate(b.admit_rate)?,
        max_active: b.max_active,
        admission_ttl_secs: b.admission_ttl_secs.unwrap_or(600),
        booking_url: b.booking_url.or(default_url).unwrap_or_default(),
    };
    if !bounded(st.store_timeout(), st.0.store.create_event(&meta)).await? {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "event-exists",
            "Event exists",
        ));
    }
    tracing::info!(event = %id, action = "create", "operator change");
    Ok(private_json(
        StatusCode::CREATED,
        figures_json(&st, &id).await?,
    ))
}

async fn figures(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}

/// Body of `PATCH /admin/events/{event}`.
#[derive(Debug, Deserialize)]
pub struct PatchEvent {
    admit_rate: Option<f64>,
    max_active: Option<u64>,
}

async fn patch(
    State(st): State<AppState>,
    Path(event): Path<String>,
    body: Result<Json<PatchEvent>, JsonRejection>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let Json(b) = body?;
    let rate = b.admit_rate.map(check_rate).transpose()?;
    bounded(
        st.store_timeout(),
        st.0.store.set_knobs(&event, rate, b.max_active),
    )
    .await?;
    tracing::info!(event = %event, action = "patch", ?rate, max_active = ?b.max_active, "operator change");
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}

async fn change(
    st: &AppState,
    event: &str,
    from: &[EventState],
    to: EventState,
) -> Result<Response, Problem> {
    let event = parse_event(event)?;
    bounded(st.store_timeout(), st.0.store.transition(&event, from, to)).await?;
    tracing::info!(event = %event, action = to.as_str(), "operator change");
    Ok(private_json(
        StatusCode::OK,
        figures_json(st, &event).await?,
    ))
}

async fn pause(State(st): State<AppState>, Path(e): Path<String>) -> Result<Response, Problem> {
    change(&st, &e, &[EventState::Open], EventState::Paused).await
}

async fn resume(State(st): State<AppState>, Path(e): Path<String>) -> Result<Response, Problem> {
    change(&st, &e, &[EventState::Paused], EventState::Open).await
}

async fn close(State(st): State<AppState>, Path(e): Path<String>) -> Result<Response, Problem> {
    use EventState::*;
    change(&st, &e, &[Prequeue, Opening, Open, Paused], Closed).await
}

async fn sold_out(State(st): State<AppState>, Path(e): Path<String>) -> Result<Response, Problem> {
    use EventState::*;
    change(&st, &e, &[Prequeue, Opening, Open, Paused, Closed], SoldOut).await
}

/// `POST /admin/events/{event}/open`: opens now (shuffles the pre-queue) when still pre-queued.
async fn open(State(st): State<AppState>, Path(e): Path<String>) -> Result<Response, Problem> {
    let event = parse_event(&e)?;
    // The shuffle runs in bounded chunks; give it more time than a single store call.
    let limit = st.store_timeout() * 30;
    bounded(limit, open_event(st.0.store.as_ref(), &event)).await?;
    tracing::info!(event = %event, action = "open", "operator change");
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}
