//! The operator's probes: liveness and the Prometheus scrape (`crate::telemetry` renders it).

use axum::response::Response;

use super::openapi::ProblemDoc;

/// `GET /healthz`.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "public",
    summary = "Liveness",
    responses((status = 200, description = "the text `ok`", body = String, content_type = "text/plain")),
)]
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "public",
    summary = "Prometheus text (names bc_…; API.md lists them)",
    responses(
        (status = 200, description = "Prometheus exposition format 0.0.4", body = String, content_type = "text/plain"),
        (status = 503, description = "unavailable: the metrics recorder is not installed", body = ProblemDoc),
    ),
)]
pub async fn metrics() -> Response {
    crate::telemetry::metrics().await
}
