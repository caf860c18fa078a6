//! The operator's probes: liveness, readiness and the Prometheus scrape (`crate::telemetry`
//! renders it).

use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use sale_common::Problem;

use super::openapi::ProblemDoc;
use crate::state::AppState;

/// How long [`readyz`] waits for the database's answer.
pub const READY_WITHIN: Duration = Duration::from_secs(2);

/// `GET /readyz`: 200 `ready` when the booking database answers `SELECT 1` within
/// [`READY_WITHIN`] (on a SQLite file one of the reader connections, so a balancer's check
/// never queues behind the holds on the one writer); else `503 unavailable` with
/// `Retry-After: 1`. While the node is stopping, the lame duck's middleware answers
/// `503 stopping` first (`sale_common::shutdown`). A newcomer found no `/readyz` here: 404,
/// though the README says every service has one.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "public",
    summary = "Readiness: the database answers",
    responses(
        (status = 200, description = "the text `ready`", body = String, content_type = "text/plain"),
        (status = 503, description = "the database did not answer, or the node is stopping (`Retry-After`)", body = ProblemDoc),
    ),
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    let ping = sqlx::query("SELECT 1").execute(&state.reads);
    match tokio::time::timeout(READY_WITHIN, ping).await {
        Ok(Ok(_)) => "ready".into_response(),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readiness: the database refused");
            Problem::unavailable("the booking database does not answer", 1).into_response()
        }
        Err(_) => Problem::unavailable(
            format!(
                "the booking database did not answer within {} s",
                READY_WITHIN.as_secs()
            ),
            1,
        )
        .into_response(),
    }
}

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
