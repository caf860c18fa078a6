//! Prometheus metrics of the booking core (`GET /metrics`, text format), on the process-wide
//! recorder shared with the waiting room (`sale_common::prometheus`); every name starts `bc_`.
//!
//! Figures (issue 5 "Back office and figures"): hold attempts and successes per show and kind
//! (success rate = `bc_holds_created_total / bc_hold_attempts_total`; holds per second =
//! `rate(bc_holds_created_total)`), refusals and 409 conflicts per show and reason,
//! `bc_payment_to_booking_seconds` (payment created → booking), `bc_oldest_overdue_hold_seconds`,
//! `bc_reconciler_sweep_seconds`, `bc_hold_extensions_total`, `bc_alerts_total` and
//! `bc_alerts_open`, `bc_idempotent_replays_total`, `bc_pool_drift`,
//! `bc_late_payments_found_total`, `bc_waitlist_offers_total`.
//!
//! Layer: the bottom; imports nothing from the crate (callers pass plain names and numbers).

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// `GET /metrics`: Prometheus text; 503 when another global recorder was installed first.
pub async fn metrics() -> Response {
    // This host's view of time (case W11): compare with the scraper's clock to see the skew.
    metrics::gauge!("bc_clock_unix_seconds").set(sale_common::clock::unix_now_secs_f64());
    match sale_common::prometheus::handle() {
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

/// Installs the recorder (idempotent) so figures recorded before the first scrape are kept.
pub fn init() {
    let _ = sale_common::prometheus::handle();
}

/// A hold was asked for (`kind`: seats, pool, best).
pub fn hold_attempt(show: &str, kind: &'static str) {
    metrics::counter!("bc_hold_attempts_total", "show" => show.to_owned(), "kind" => kind)
        .increment(1);
}

/// A hold was created.
pub fn hold_created(show: &str, kind: &'static str) {
    metrics::counter!("bc_holds_created_total", "show" => show.to_owned(), "kind" => kind)
        .increment(1);
}

/// Awaits `work` and records how long it took, **seconds**, in the histogram `metric`
/// labelled `key = label` (a hold's phase, a hold-queue batch's part).
pub async fn timed<T>(
    metric: &'static str,
    key: &'static str,
    label: &'static str,
    work: impl std::future::Future<Output = T>,
) -> T {
    let started = std::time::Instant::now();
    let out = work.await;
    metrics::histogram!(metric, key => label).record(started.elapsed().as_secs_f64());
    out
}

/// Awaits `work`, one phase of a hold request (`door`, `preread`, `in_flight`, `seat_gate`, `queue`,
/// `one_trip`, `transaction`, `refusal`), timed in `bc_hold_phase_seconds{phase}` ([`timed`]):
/// where a hold's time goes at the server, beside the route's whole time
/// (`bc_request_seconds`).
pub async fn hold_phase<T>(phase: &'static str, work: impl std::future::Future<Output = T>) -> T {
    timed("bc_hold_phase_seconds", "phase", phase, work).await
}

/// A hold was refused with `status` and problem `reason`; 409s also count as conflicts.
pub fn hold_refused(show: &str, status: u16, reason: &str) {
    let (show, reason) = (show.to_owned(), reason.to_owned());
    if status == 409 {
        metrics::counter!("bc_conflicts_total", "show" => show.clone(), "reason" => reason.clone())
            .increment(1);
    }
    metrics::counter!("bc_hold_refusals_total", "show" => show, "reason" => reason).increment(1);
}

/// An idempotent replay was answered from the stored response.
pub fn replay(show: &str) {
    metrics::counter!("bc_idempotent_replays_total", "show" => show.to_owned()).increment(1);
}

/// A booking was made by `actor` (the audit actor's name, `db::Actor::as_str`); `latency_ms`
/// from the payment's creation.
pub fn booked(show: &str, actor: &'static str, latency_ms: Option<i64>) {
    metrics::counter!("bc_bookings_total", "show" => show.to_owned(), "actor" => actor)
        .increment(1);
    if let Some(ms) = latency_ms {
        metrics::histogram!("bc_payment_to_booking_seconds").record(ms.max(0) as f64 / 1000.0);
    }
}

/// One reconciler sweep took `secs`; the oldest overdue HELD hold is `overdue_ms` old.
pub fn sweep(secs: f64, overdue_ms: i64) {
    metrics::histogram!("bc_reconciler_sweep_seconds").record(secs);
    metrics::gauge!("bc_oldest_overdue_hold_seconds").set(overdue_ms.max(0) as f64 / 1000.0);
}

/// A hold was extended (gateway unreachable).
pub fn extended() {
    metrics::counter!("bc_hold_extensions_total").increment(1);
}

/// An operator alert was raised (also a row in `alerts`; the reconciler sets `bc_alerts_open`
/// from that table every step).
pub fn alert(kind: &'static str) {
    metrics::counter!("bc_alerts_total", "kind" => kind).increment(1);
}

/// The late-payment sweep found a payment completed after its hold was released.
pub fn late_payment_found() {
    metrics::counter!("bc_late_payments_found_total").increment(1);
}

/// A waitlisted fan was offered a released seat as a new hold (`inventory::waitlist::offer`).
pub fn waitlist_offer(show: &str) {
    metrics::counter!("bc_waitlist_offers_total", "show" => show.to_owned()).increment(1);
}
