//! Public endpoints: health, readiness, the cached status document, what an event is (for the
//! waiting page) and the JWKS.

use super::error::RETRY_AFTER_SECS;
use super::{parse_event, public_json, AppState};
use crate::http::openapi::ProblemDoc;
use crate::status::StatusDoc;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use sale_common::Problem;

/// `GET /healthz`: the process answers (no store call).
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "public",
    summary = "The process answers",
    responses(
        (status = 200, description = "ok", body = String)
    ),
)]
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 when the store answers a ping within the bound, else 503 + Retry-After.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "public",
    summary = "The store answers",
    responses(
        (status = 200, description = "ready", body = String),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
)]
pub async fn readyz(State(st): State<AppState>) -> Response {
    match tokio::time::timeout(st.store_timeout(), st.0.store.ping()).await {
        Ok(Ok(())) => "ready".into_response(),
        // Not fit to serve (eviction policy, lost events, an unanswered call): say why.
        Ok(Err(e)) => Problem::unavailable(format!("queue store not ready: {e}"), RETRY_AFTER_SECS)
            .into_response(),
        _ => Problem::unavailable("queue store not reachable", RETRY_AFTER_SECS).into_response(),
    }
}

/// `GET /status/{event}.json`: the last published document, never a store call.
#[utoipa::path(
    get,
    path = "/status/{file}",
    tag = "public",
    summary = "The status document (public, max-age=1)",
    params(("file" = String, Path, description = "`{event}.json`")),
    responses(
        (status = 200, description = "the status document, with a strong ETag", body = StatusDoc),
        (status = 304, description = "not modified: If-None-Match matched the ETag (weak comparison)"),
        (status = 404, description = "no such event", body = ProblemDoc)
    ),
)]
pub async fn status(
    State(st): State<AppState>,
    Path(file): Path<String>,
) -> Result<Response, Problem> {
    let raw = file
        .strip_suffix(".json")
        .ok_or_else(|| Problem::not_found("status documents end in .json"))?;
    let event = parse_event(raw)?;
    let (body, etag) =
        st.0.status
            .body_and_etag(&event)
            .ok_or_else(|| Problem::not_found(format!("no event {raw:?}")))?;
    // No Last-Modified: the content can change twice within its one-second resolution.
    // A matching If-None-Match becomes a 304 in `sale_common::conditional`.
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ),
        (header::CACHE_CONTROL, st.0.status_cache_control.clone()),
        (header::ETAG, etag),
        // Public and credential-free: the booking core's pages read it from their own origin
        // for the operator's broadcast message (`static/broadcast.js`).
        (
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        ),
    ];
    Ok((headers, body).into_response())
}

/// `GET /.well-known/jwks.json`: the admission-token public keys, `public, max-age=60`.
#[utoipa::path(
    get,
    path = "/.well-known/jwks.json",
    tag = "public",
    summary = "Admission-token public keys (OKP Ed25519)",
    responses(
        (status = 200, description = "JWKS", body = Object)
    ),
)]
pub async fn jwks(State(st): State<AppState>) -> Response {
    public_json(st.0.signer.jwks(), JWKS_MAX_AGE_SECS)
}

/// `max-age` of the JWKS and the admission policy, **seconds**. A booking door that fetches the
/// JWKS through a cache sees a removed key up to this much later (case W09).
pub const JWKS_MAX_AGE_SECS: u64 = 60;

/// `GET /.well-known/admission-policy.json`: the token rules both sides must agree on
/// (DECISIONS "Tokens, capacity and clocks"): `issuer`, `audience`, `max_clock_skew_secs`
/// (tokens carry `nbf = iat - max_clock_skew_secs`; a `max_active` slot is freed at
/// `exp + max_clock_skew_secs`), `door_exp_leeway_secs` (always 0: the door checks `exp`
/// exactly) and `max_admission_ttl_secs` (the longest admission lifetime of the configured
/// events). The booking door refuses to start when its own configuration differs.
#[utoipa::path(
    get,
    path = "/.well-known/admission-policy.json",
    tag = "public",
    summary = "Admission-token policy: skew, leeway, issuer, audience",
    responses(
        (status = 200, description = "the policy", body = Object)
    ),
)]
pub async fn admission_policy(State(st): State<AppState>) -> Response {
    let c = &st.0.config;
    let longest = c
        .events
        .iter()
        .map(|e| e.admission_ttl_secs)
        .max()
        .unwrap_or(0);
    public_json(
        serde_json::json!({
            "issuer": c.issuer,
            "audience": c.audience,
            "max_clock_skew_secs": c.max_clock_skew_secs,
            "door_exp_leeway_secs": 0,
            "max_admission_ttl_secs": longest,
            "jwks_max_age_secs": JWKS_MAX_AGE_SECS,
        }),
        JWKS_MAX_AGE_SECS,
    )
}

/// `GET /api/events/{event}/about`: what the fan waits for, from the configuration (never a
/// store call): `{event, name, venue, starts_at, time_zone}` (`name`, `venue`, `starts_at`
/// null when not configured), `public, max-age=60`. The opening time is the status document's
/// `opens_at` (an operator may move it). An event not in the configuration → 404.
#[utoipa::path(
    get,
    path = "/api/events/{event}/about",
    tag = "public",
    summary = "The event's display name, venue, date and time zone (public, max-age=60)",
    params(("event" = String, Path, description = "event id")),
    responses(
        (status = 200, description = "{event, name, venue, starts_at (epoch s), time_zone (IANA)}", body = Object),
        (status = 404, description = "no such event in the configuration", body = ProblemDoc)
    ),
)]
pub async fn about(
    State(st): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Response, Problem> {
    let event = parse_event(&raw)?;
    let e =
        st.0.config
            .events
            .iter()
            .find(|e| e.id == event)
            .ok_or_else(|| Problem::not_found(format!("no event {:?}", event.as_str())))?;
    Ok(public_json(
        serde_json::json!({
            "event": e.id, "name": e.name, "venue": e.venue,
            "starts_at": e.starts_at, "time_zone": e.time_zone,
        }),
        ABOUT_MAX_AGE_SECS,
    ))
}

/// `max-age` of an event's about document, **seconds**.
pub const ABOUT_MAX_AGE_SECS: u64 = 60;
