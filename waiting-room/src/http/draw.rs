//! `GET /api/events/{event}/draw`: the verifiable pre-queue draw (issue 15 item 1, API.md
//! "Verifiable draw"). Before the pre-queue is numbered: the commitment `SHA-256(seed)`; after:
//! also the seed, the public ids in number order and their hash, which `waiting-room
//! verify-draw` (or anyone) recomputes. A complete publication never changes, so each node
//! builds it once from the store (one build at a time: the requests that arrive meanwhile wait
//! for it rather than each reading the whole list) and serves it from memory.

use super::error::{bounded, store_problem};
use super::openapi::ProblemDoc;
use super::{parse_event, AppState};
use crate::domain::EventId;
use crate::draw::Publication;
use crate::store::draw::{numbered_range, publication_of};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use sale_common::Problem;

/// `max-age` of a complete publication, **seconds** (it never changes once complete).
pub const PUBLISHED_MAX_AGE_SECS: u64 = 3600;

/// `max-age` of the commitment alone, **seconds**: the seed appears once the event opens, so
/// caches keep the earlier answer only as long as a status document.
pub const COMMITTED_MAX_AGE_SECS: u64 = 1;

/// `GET /api/events/{event}/draw`.
#[utoipa::path(
    get,
    path = "/api/events/{event}/draw",
    tag = "public",
    summary = "The verifiable pre-queue draw: commitment, then seed and hashed visitor list",
    params(("event" = String, Path, description = "event id")),
    responses(
        (status = 200, description = "the draw as published so far", body = Publication),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
)]
pub async fn draw(State(st): State<AppState>, Path(e): Path<String>) -> Result<Response, Problem> {
    let event = parse_event(&e)?;
    if let Some(body) = cached(&st, &event) {
        return Ok(json(body, PUBLISHED_MAX_AGE_SECS));
    }
    let store = st.0.store.as_ref();
    let d = bounded(st.store_timeout(), store.draw(&event)).await?;
    if numbered_range(&d).is_none() {
        // The commitment alone: no list to read.
        let p = publication_of(store, &event, &d)
            .await
            .map_err(store_problem)?;
        return Ok(json(to_json(&p)?, COMMITTED_MAX_AGE_SECS));
    }
    let _building = st.0.draw_build.lock().await;
    if let Some(body) = cached(&st, &event) {
        return Ok(json(body, PUBLISHED_MAX_AGE_SECS));
    }
    // Reading a large list takes more than one store call's bound.
    let p = bounded(st.store_timeout() * 30, publication_of(store, &event, &d)).await?;
    let body = to_json(&p)?;
    if let Ok(mut m) = st.0.draws.write() {
        m.insert(event, body.clone());
    }
    Ok(json(body, PUBLISHED_MAX_AGE_SECS))
}

fn cached(st: &AppState, event: &EventId) -> Option<Bytes> {
    st.0.draws.read().ok().and_then(|m| m.get(event).cloned())
}

fn to_json(p: &Publication) -> Result<Bytes, Problem> {
    serde_json::to_vec(p)
        .map(Bytes::from)
        .map_err(|_| Problem::internal())
}

fn json(body: Bytes, max_age_secs: u64) -> Response {
    let cc = HeaderValue::from_str(&format!("public, max-age={max_age_secs}"))
        .unwrap_or(HeaderValue::from_static("no-cache"));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CACHE_CONTROL, cc),
        ],
        body,
    )
        .into_response()
}
