//! Prometheus metrics (`GET /metrics`, text format): the `metrics` facade with the Prometheus
//! recorder installed once per process and rendered into our own route (no exporter listener).
//! Figures are gauges labelled by event, set each time a status document is rebuilt; counters
//! for joins, heartbeats, rejected tokens (by reason), store errors; request latency histograms
//! by route. If another part of the process installed a global recorder first, `/metrics`
//! answers 503 rather than an empty page.

use crate::domain::Figures;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::PrometheusHandle;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// The process-wide Prometheus handle, shared with the booking core when both run in one
/// process (`sale_common::prometheus`).
pub fn handle() -> Option<&'static PrometheusHandle> {
    sale_common::prometheus::handle()
}

/// Runs the recorder's housekeeping (histogram buckets); the admitter loop calls it.
pub fn upkeep() {
    if let Some(h) = handle() {
        h.run_upkeep();
    }
}

/// `GET /metrics`: Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "public",
    summary = "Prometheus metrics (text format)",
    responses(
        (status = 200, description = "Prometheus text", body = String)
    ),
)]
pub async fn metrics() -> Response {
    // This host's view of time (case W11): compare with the scraper's clock to see each
    // service's skew. Keep hosts on time sync (chrony, systemd-timesyncd).
    metrics::gauge!("wr_clock_unix_seconds").set(sale_common::clock::unix_now_secs_f64());
    match handle() {
        Some(h) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            h.render(),
        )
            .into_response(),
        None => {
            sale_common::Problem::unavailable("metrics recorder not installed", 60).into_response()
        }
    }
}

/// Middleware: request counts and latency histogram per matched route and status class
/// (`wr_request_seconds`, `wr_requests_total`, `wr_unavailable_total`, `wr_http_in_flight`:
/// [`sale_common::routes`]).
pub async fn track(req: Request, next: Next) -> Response {
    sale_common::routes::track(axum::extract::State("wr"), req, next).await
}

/// What the status document derived from the figures (its `queue_length`, `admitted_per_sec`
/// and `wait.places_per_sec`), for the gauges.
#[derive(Debug, Clone, Copy)]
pub struct Derived {
    /// Fans waiting, places.
    pub queue_length: u64,
    /// Measured admissions per **second**.
    pub admitted_per_sec: f64,
    /// The cursor's measured speed, places per **second**.
    pub places_per_sec: f64,
}

/// Sets the gauges of one event from freshly read figures and what the status document derived
/// from them.
pub fn record_figures(f: &Figures, doc: Derived) {
    let e = f.meta.id.to_string();
    let g = |name: &'static str, v: f64| metrics::gauge!(name, "event" => e.clone()).set(v);
    g("wr_queue_length_live", doc.queue_length as f64);
    g("wr_broadcast_active", f.broadcast.is_some() as u8 as f64);
    for m in crate::mode::QueueMode::ALL {
        metrics::gauge!("wr_queue_mode", "event" => e.clone(), "mode" => m.as_str())
            .set((f.mode == m) as u8 as f64);
    }
    g("wr_cursor", f.cursor as f64);
    g("wr_last_number", f.last_number as f64);
    g("wr_prequeued", f.prequeued as f64);
    g("wr_active_sessions", f.active as f64);
    g("wr_silent_in_window", f.silent as f64);
    g("wr_left_places", f.left as f64);
    g("wr_admit_rate", f.meta.admit_rate);
    g("wr_admitted_per_sec", doc.admitted_per_sec);
    g("wr_cursor_places_per_sec", doc.places_per_sec);
    g("wr_admitted_total", f.admitted_total as f64);
    g("wr_skipped_places_total", f.skipped_total as f64);
    g("wr_sessions_ended_total", f.ended_total as f64);
    g("wr_max_active", f.meta.max_active as f64);
}

type EventCounters = RwLock<HashMap<&'static str, HashMap<String, metrics::Counter>>>;

/// Per-event counter handles (bounded by the number of events).
static EVENT_COUNTERS: OnceLock<EventCounters> = OnceLock::new();

/// Adds 1 to the counter `name` labelled `event`; the handle is registered once per (name,
/// event), so the hot paths (join, heartbeat) pay no registry lookup or label allocation.
pub fn count_event(name: &'static str, event: &str) {
    let table = EVENT_COUNTERS.get_or_init(Default::default);
    if let Some(c) = table
        .read()
        .ok()
        .and_then(|t| t.get(name).and_then(|m| m.get(event)).cloned())
    {
        return c.increment(1);
    }
    let mut t = match table.write() {
        Ok(t) => t,
        Err(p) => p.into_inner(),
    };
    t.entry(name)
        .or_default()
        .entry(event.to_owned())
        .or_insert_with(|| metrics::counter!(name, "event" => event.to_owned()))
        .increment(1);
}

/// Counts a rejected token (`kind`: join or admission, `reason`: malformed, forged, expired…).
pub fn rejected_token(kind: &'static str, reason: &'static str) {
    metrics::counter!("wr_rejected_tokens_total", "kind" => kind, "reason" => reason).increment(1);
}

/// Counts a store failure (`op`: the store call).
pub fn store_error(op: &'static str) {
    metrics::counter!("wr_store_errors_total", "op" => op).increment(1);
}
