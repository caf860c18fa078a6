//! HTTP surface of the booking core (API.md "Booking core"): the router factory, the fan and
//! admin handlers, and the static pages.

pub mod admin;
pub mod fan;
pub mod history;
pub mod office;
pub mod waitlist;
pub mod webhook;

use axum::http::{header, HeaderValue};
use axum::routing::{get, post};
use axum::Router;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::AppState;

/// All routes; `/api`, `/session`, `/payment` and `/admin` answers are `private, no-store`.
pub fn router(state: AppState) -> Router {
    let static_dir = state.config.static_dir.clone();
    let api = Router::new()
        .route("/session", post(fan::session))
        .route("/api/me", get(fan::me))
        .route("/api/leave", post(fan::leave))
        .route("/api/shows/{show}/seats", get(fan::seats))
        .route("/api/shows/{show}/holds", post(fan::create_hold))
        .route(
            "/api/shows/{show}/waitlist",
            get(waitlist::status).post(waitlist::join),
        )
        .route(
            "/api/holds/{hold}",
            get(fan::get_hold).delete(fan::delete_hold),
        )
        .route("/api/holds/{hold}/pay", post(fan::pay))
        .route("/payment/callback", get(fan::callback))
        .route("/payment/webhook", post(webhook::receive))
        .route("/admin/shows/{show}/stats", get(admin::stats))
        .route("/admin/shows/{show}/bookings", get(admin::bookings))
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
            "/admin/shows/{show}/hold-queue",
            get(admin::hold_queue).post(admin::set_hold_queue),
        )
        .route(
            "/admin/shows/{show}/pools/{pool}/oversell",
            post(admin::oversell),
        )
        .layer(SetResponseHeaderLayer::overriding(
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-store"),
        ));
    let mut app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(crate::telemetry::metrics))
        .merge(api);
    if let Some(dir) = static_dir {
        app = app.fallback_service(ServeDir::new(dir));
    }
    app.with_state(state)
}
