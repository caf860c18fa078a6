//! The sale report over the admin API (API.md "Sale report"; `crate::report`): JSON, CSV and a
//! PNG of charts, built on any node from the samples in the store. Behind the admin token.

use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::domain::ReportSample;
use crate::http::openapi::ProblemDoc;
use crate::report::{self, Report};
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sale_common::Problem;

async fn build(st: &AppState, event: &str) -> Result<(Report, Vec<ReportSample>), Problem> {
    let event = parse_event(event)?;
    let samples = bounded(st.store_timeout(), st.0.store.report_samples(&event)).await?;
    Ok((
        report::build(&event, &samples, st.0.clock.now_ms()),
        samples,
    ))
}

/// A private (never cached) answer of `content_type`, offered as a download named `file`.
fn download(content_type: &'static str, file: String, body: Vec<u8>) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{file}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    r
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}/report",
    tag = "admin",
    summary = "The sale report: per minute and totals (JSON)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "the report", body = Report),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn json(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let (r, _) = build(&st, &event).await?;
    let body = serde_json::to_value(r).map_err(|_| Problem::internal())?;
    Ok(private_json(StatusCode::OK, body))
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}/report.csv",
    tag = "admin",
    summary = "The sale report as CSV: one row per minute, then `total,<name>,<value>` lines",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "text/csv", content_type = "text/csv"),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn csv(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let (r, _) = build(&st, &event).await?;
    let file = format!("{}-report.csv", r.event);
    Ok(download(
        "text/csv; charset=utf-8",
        file,
        report::csv(&r).into_bytes(),
    ))
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}/report.png",
    tag = "admin",
    summary = "The sale report as stacked charts (PNG, 1000 px wide)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "image/png", content_type = "image/png"),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn png(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let (r, samples) = build(&st, &event).await?;
    let file = format!("{}-report.png", r.event);
    // Drawing takes tens of milliseconds of CPU: off the async workers.
    let png = tokio::task::spawn_blocking(move || report::png(&r, &samples))
        .await
        .map_err(|_| Problem::internal())?
        .map_err(|e| {
            tracing::error!(error = %e, "report chart not drawn");
            Problem::internal()
        })?;
    Ok(download("image/png", file, png))
}
