//! The one Prometheus recorder of a process. The `metrics` facade allows a single global
//! recorder, and the launcher runs the waiting room and the booking core in one process: both
//! take their handle from here, so neither install fails. Each service's `/metrics` renders the
//! whole process's figures (names are prefixed `wr_` and `bc_`, so they never clash).

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Latency histogram buckets, **seconds**.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process-wide Prometheus handle; installs the recorder on first use. `None` only when
/// something outside this crate installed another global recorder first.
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let b = PrometheusBuilder::new().set_buckets(LATENCY_BUCKETS).ok()?;
            b.install_recorder().ok()
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_handle_per_process_renders_recorded_figures() {
        let h = super::handle().expect("recorder installs");
        metrics::counter!("common_test_total").increment(3);
        assert!(
            super::handle().is_some(),
            "a second call reuses the recorder"
        );
        assert!(h.render().contains("common_test_total 3"), "{}", h.render());
    }
}
