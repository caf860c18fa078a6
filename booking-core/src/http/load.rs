//! `GET /internal/load` (the figures the waiting room's closed loop follows, [`crate::load`])
//! and the middleware that measures them: every `/api/…` answer counted, 5xx apart, the
//! latency of every hold request, and the hold requests still running.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::Response;
use axum::Json;
use sale_common::Problem;
use subtle::ConstantTimeEq;

use crate::error::ApiResult;
use crate::load::{LoadDoc, PoolFigures};
use crate::state::AppState;

/// Whether the request is `POST /api/shows/{show}/holds`.
fn is_hold(method: &Method, path: &str) -> bool {
    method == Method::POST
        && path
            .strip_prefix("/api/shows/")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(show, tail)| !show.is_empty() && tail == "holds")
}

/// A hold request's place among the running ones ([`crate::load::Running`]), in its
/// extensions: whoever carries the request's work further keeps a clone.
#[derive(Debug, Clone)]
pub struct RunningHold(pub Arc<crate::load::Running>);

/// Measures fan calls (`/api/…`) into `state.load`.
pub async fn measure(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if !path.starts_with("/api/") {
        return next.run(req).await;
    }
    let hold = is_hold(req.method(), path);
    let start = Instant::now();
    let mut req = req;
    let running = hold.then(|| Arc::new(state.load.running_hold(state.clock.now_ms())));
    if let Some(r) = &running {
        req.extensions_mut().insert(RunningHold(r.clone()));
    }
    let resp = next.run(req).await;
    drop(running);
    let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    state.load.answered(resp.status().as_u16(), hold, ms);
    resp
}

/// The service token (the waiting room's) or the admin token, as a bearer.
fn service_or_admin(state: &AppState, headers: &HeaderMap) -> ApiResult<()> {
    let given = sale_common::secret::bearer(headers);
    let is = |secret: &str| -> bool { given.as_bytes().ct_eq(secret.as_bytes()).into() };
    let service = state
        .config
        .service_token
        .as_ref()
        .is_some_and(|t| is(t.expose()));
    if service || is(state.config.admin_token.expose()) {
        Ok(())
    } else {
        Err(Problem::unauthorized(
            "service-token-required",
            "service or admin bearer token required",
        )
        .into())
    }
}

/// `GET /internal/load`.
#[utoipa::path(
    get,
    path = "/internal/load",
    tag = "admin",
    summary = "Load figures for the waiting room's closed loop (cumulative since start)",
    responses(
        (status = 200, description = "{node, hold_bounds_ms, hold_counts, hold_running_counts, requests, server_errors, pool: {size, idle, max}, shows: [{show, free, held, sold, bookings, ended: {expired, released, failed}}]}", body = Object),
        (status = 401, description = "`service-token-required`", body = super::openapi::ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn load(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<LoadDoc>> {
    service_or_admin(&state, &headers)?;
    let now = state.clock.now_ms();
    let mut shows = Vec::with_capacity(state.config.shows.len());
    for show in &state.config.shows {
        shows.push(crate::inventory::stock::of_show(&state.db, &show.id, now).await?);
    }
    let size = state.db.size();
    let pool = PoolFigures {
        size,
        // sqlx counts idle connections apart from open ones: clamp a momentary overcount.
        idle: u32::try_from(state.db.num_idle()).unwrap_or(0).min(size),
        max: state.db.options().get_max_connections(),
    };
    // The running holds' ages at the answer (the stock reads above may have waited on a lock).
    let at = state.clock.now_ms();
    Ok(Json(state.load.doc(&state.node_id, at, pool, shows)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hold_creation_counts_as_a_hold() {
        assert!(is_hold(&Method::POST, "/api/shows/demo/holds"));
        assert!(!is_hold(&Method::GET, "/api/shows/demo/holds"));
        assert!(!is_hold(&Method::POST, "/api/shows//holds"));
        assert!(!is_hold(&Method::POST, "/api/shows/demo/seats"));
        assert!(!is_hold(&Method::POST, "/api/holds/h1/pay"));
    }
}
