//! HTTP surface of the booking core (API.md "Booking core"): the router factory, the fan and
//! admin handlers, the static pages, and the OpenAPI description of all of them (`openapi`,
//! served at `/openapi.json`; `tests/openapi.rs` checks it names exactly the routes below).
//!
//! Layer: the top; may use every other module. Fan handlers parse input and call into
//! `inventory` and `payments`; the admin and back-office handlers also read reports straight
//! from the database (counts, audit history): they decide nothing.

pub mod admin;
pub mod cancel;
pub mod fan;
pub mod gate;
pub mod history;
pub mod holds;
pub mod load;
pub mod office;
pub mod openapi;
pub mod ops;
pub mod oversell;
pub mod resources;
pub mod venue;
pub mod waitlist;
pub mod webhook;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::middleware::map_response;
use axum::routing::{get, post};
use axum::Router;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::error::{method_not_allowed, not_found, problems_only};
use crate::state::AppState;

/// Largest request body any route reads (JSON, forms, webhooks); larger → 413 problem.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// All routes; `/api`, `/session`, `/payment`, `/admin` and `/internal` answers are
/// `private, no-store`, but for the seat map and its overview (`no-cache` with an `ETag`).
/// Fan calls (`/api/…`) are measured for the closed loop ([`load`]). Every error is
/// `application/problem+json`: unknown routes 404, wrong methods 405, bodies over
/// [`BODY_LIMIT`] 413, and any plain-text rejection is turned into a problem.
pub fn router(state: AppState) -> Router {
    let static_dir = state.config.static_dir.clone();
    let api = Router::new()
        .route("/session", post(fan::session))
        .route("/api/me", get(fan::me))
        .route("/api/leave", post(fan::leave))
        .route(
            "/api/shows/{show}/holds",
            post(holds::create_hold).layer(axum::middleware::from_fn_with_state(
                state.clone(),
                fan::notes_map_write,
            )),
        )
        .route("/api/shows/{show}/resources/{kind}", get(resources::free))
        .route("/api/shows/{show}/venue", get(venue::venue))
        .route(
            "/api/shows/{show}/waitlist",
            get(waitlist::status).post(waitlist::join),
        )
        .route(
            "/api/holds/{hold}",
            get(holds::get_hold).delete(axum::handler::Handler::layer(
                holds::delete_hold,
                axum::middleware::from_fn_with_state(state.clone(), fan::notes_map_write),
            )),
        )
        .route("/api/holds/{hold}/pay", post(holds::pay))
        .route("/payment/callback", get(fan::callback))
        .route("/payment/webhook", post(webhook::receive))
        .route("/admin/shows/{show}/stats", get(admin::stats))
        .route("/admin/shows/{show}/bookings", get(admin::bookings))
        .route(
            "/admin/bookings/{booking}/cancel",
            post(cancel::cancel_booking),
        )
        .route("/office", get(cancel::office_page))
        .route("/admin/shows/{show}/outbox", get(office::outbox))
        .route("/admin/shows/{show}/refunds", get(office::refunds))
        .route("/admin/alerts", get(office::alerts))
        .route("/admin/shows/{show}/holds", get(history::holds))
        .route(
            "/admin/shows/{show}/seats/{seat}/history",
            get(history::seat),
        )
        .route("/admin/holds/{hold}/history", get(history::hold))
        .route("/admin/shows/{show}/pools/drift", get(admin::drift))
        .route(
            "/admin/shows/{show}/resources/claims",
            get(resources::claims),
        )
        .route(
            "/admin/shows/{show}/hold-queue",
            get(admin::hold_queue).post(admin::set_hold_queue),
        )
        .route(
            "/admin/shows/{show}/pools/{pool}/oversell",
            get(oversell::get).post(oversell::set),
        )
        .route("/admin/shows/{show}/oversold", get(oversell::list))
        .route(
            "/admin/bookings/{booking}/oversell-resolution",
            post(oversell::resolve),
        )
        .route("/internal/load", get(load::load))
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-store"),
        ));
    // The seat map and its overview: the same for every fan, `no-cache` with an `ETag`
    // (revalidated with `If-None-Match`, [`NOT_MODIFIED`]), not `private, no-store`.
    let maps = Router::new()
        .route("/api/shows/{show}/seats", get(fan::seats))
        .route("/api/shows/{show}/sections", get(fan::sections));
    let mut app = Router::new()
        .route("/gate/{audience}/check", get(gate::check))
        .route("/gate/{audience}/enter", post(gate::enter))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(openapi::openapi))
        .merge(api)
        .merge(maps)
        .method_not_allowed_fallback(method_not_allowed);
    app = match static_dir {
        Some(dir) => app.fallback_service(
            tower::ServiceBuilder::new()
                .layer(axum::middleware::from_fn(sale_common::files::names_fit))
                .service(
                    // Another method than GET or HEAD on a path no route has is a 404 too,
                    // as without the directory (ServeDir alone answers 405: a newcomer's
                    // `DELETE /api/holds/{hold}/`, trailing slash, read "method not allowed").
                    ServeDir::new(dir)
                        .call_fallback_on_method_not_allowed(true)
                        .not_found_service(axum::routing::any(not_found).with_state(())),
                ),
        ),
        None => app.fallback(not_found),
    };
    app.layer(axum::middleware::from_fn_with_state(
        NOT_MODIFIED,
        sale_common::conditional::not_modified,
    ))
    .layer(axum::middleware::from_fn(crate::error::refuse_nul))
    .layer(axum::middleware::from_fn_with_state(
        state.clone(),
        outage_gate,
    ))
    .layer(DefaultBodyLimit::max(BODY_LIMIT))
    .layer(map_response(problems_only))
    .layer(axum::middleware::from_fn_with_state(
        state.clone(),
        load::measure,
    ))
    // Per-route latency as the server sees it (`bc_request_seconds{route, method}`, …).
    .layer(axum::middleware::from_fn_with_state(
        "bc",
        sale_common::routes::track,
    ))
    .with_state(state)
}

/// Conditional GET for answers with an `ETag` (the seat map and its overview): a matching
/// `If-None-Match` gets `304` with the `ETag`, `Cache-Control` and `Seat-Map-Age-Ms` and no
/// body, counted in `bc_http_not_modified_total{route}`.
pub const NOT_MODIFIED: sale_common::conditional::NotModified =
    sale_common::conditional::NotModified {
        metric: "bc_http_not_modified_total",
        keep: &[fan::SEAT_MAP_AGE],
    };

/// Whether a request to `path` needs the database, so the outage gate refuses it at once while
/// the database is unreachable. Not gated: `/healthz`, `/metrics`, the OpenAPI document and the
/// static pages (no database), `GET /api/me` and the edge gate (the door only), and the seat
/// map, its sections and the venue (served from the last snapshot, or the configuration).
fn needs_db(method: &axum::http::Method, path: &str) -> bool {
    const DB: [&str; 6] = [
        "/api/",
        "/admin/",
        "/session",
        "/payment/",
        "/internal/",
        "/readyz",
    ];
    if !DB.iter().any(|p| path.starts_with(p)) || path == "/api/me" {
        return false;
    }
    let snapshot = ["/seats", "/sections", "/venue"];
    !(method == axum::http::Method::GET
        && path.starts_with("/api/shows/")
        && snapshot.iter().any(|s| path.ends_with(s)))
}

/// The outage gate's answer while the database is unreachable: 503 + `Retry-After: 1`.
pub(super) fn db_not_answering() -> sale_common::Problem {
    sale_common::Problem::unavailable("the booking database is not answering; try again", 1)
}

/// The outage gate (`db::outage`): while the database is unreachable, a request that needs it
/// is `503 unavailable` with `Retry-After: 1` at once; otherwise its body is read whole first
/// (within `Config::body_within_ms`, [`body_in`]); then an answer marked
/// [`crate::error::DbUnreachable`] (a pool timeout, a refused or lost connection), or on
/// PostgreSQL a request still unanswered after `db::outage::REQUEST_WITHIN`, trips it.
async fn outage_gate(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let needs = needs_db(req.method(), req.uri().path());
    if needs && state.outage.is_down() {
        metrics::counter!("bc_db_outage_refused_total").increment(1);
        return db_not_answering().into_response();
    }
    // The body first, on its own clock (every store): the request limit below is the
    // database's.
    let req = match body_in(req, state.config.body_within_ms).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    let resp = if needs && state.outage.guards() {
        let within = crate::db::outage::REQUEST_WITHIN;
        match tokio::time::timeout(within, next.run(req)).await {
            Ok(resp) => resp,
            Err(_) => {
                tracing::warn!(?within, "request cut off: the database did not answer");
                metrics::counter!("bc_db_requests_cut_off_total").increment(1);
                state.outage.trip();
                return sale_common::Problem::unavailable(
                    format!(
                        "the booking database did not answer within {} s; try again",
                        within.as_secs()
                    ),
                    1,
                )
                .into_response();
            }
        }
    } else {
        next.run(req).await
    };
    if resp
        .extensions()
        .get::<crate::error::DbUnreachable>()
        .is_some()
    {
        state.outage.trip();
    }
    resp
}

/// `req` with its body read whole (at most [`BODY_LIMIT`] bytes) within `within_ms`
/// milliseconds (`Config::body_within_ms`), so a client's slow or unfinished body is never
/// charged to the database's request limit. Refused: `408 request-timeout` with `Connection:
/// close` when the body did not arrive in time, `413 payload-too-large` over the limit, `400
/// invalid-body` when the connection failed under it. A request with no body passes as it is.
async fn body_in(
    req: axum::extract::Request,
    within_ms: u64,
) -> Result<axum::extract::Request, axum::response::Response> {
    use axum::body::HttpBody;
    use axum::response::IntoResponse;
    use futures::StreamExt;
    if req.body().is_end_stream() {
        return Ok(req);
    }
    // A body announced over the limit is refused before a byte of it is awaited (a newcomer
    // review: it waited out `within_ms` for its 408).
    if req.body().size_hint().lower() > BODY_LIMIT as u64 {
        return Err(sale_common::Problem::payload_too_large().into_response());
    }
    let (parts, body) = req.into_parts();
    let read = async {
        let mut stream = body.into_data_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| {
                sale_common::body::rejection(
                    axum::http::StatusCode::BAD_REQUEST,
                    "the request body could not be read",
                )
            })?;
            if buf.len() + chunk.len() > BODY_LIMIT {
                return Err(sale_common::Problem::payload_too_large());
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(buf)
    };
    match tokio::time::timeout(std::time::Duration::from_millis(within_ms), read).await {
        Ok(Ok(buf)) => Ok(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::from(buf),
        )),
        Ok(Err(problem)) => Err(problem.into_response()),
        Err(_) => {
            metrics::counter!("bc_http_body_timeouts_total").increment(1);
            let problem = sale_common::Problem::new(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "request-timeout",
                "Request timeout",
            )
            .detail(format!(
                "the request body did not arrive within {within_ms} ms"
            ));
            let mut resp = problem.into_response();
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(resp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::needs_db;
    use axum::http::Method;

    /// The gate refuses what needs the database and lets the door, the snapshots and the
    /// static pages through.
    #[test]
    fn the_outage_gate_passes_what_needs_no_database() {
        for (m, p) in [
            (Method::POST, "/api/shows/s/holds"),
            (Method::GET, "/api/holds/h"),
            (Method::GET, "/admin/shows/s/stats"),
            (Method::GET, "/readyz"),
            (Method::POST, "/payment/webhook"),
        ] {
            assert!(needs_db(&m, p), "{m} {p}");
        }
        for (m, p) in [
            (Method::GET, "/healthz"),
            (Method::GET, "/api/me"),
            (Method::GET, "/api/shows/s/seats"),
            (Method::GET, "/api/shows/s/sections"),
            (Method::GET, "/book.html"),
            (Method::GET, "/gate/a/check"),
        ] {
            assert!(!needs_db(&m, p), "{m} {p}");
        }
    }
}
