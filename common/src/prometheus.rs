//! The one Prometheus recorder of a process. The `metrics` facade allows a single global
//! recorder, and the launcher runs the waiting room and the booking core in one process: both
//! take their handle from here, so neither install fails. Each service's `/metrics` renders the
//! whole process's figures (names are prefixed `wr_` and `bc_`, so they never clash).

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

/// Latency histogram buckets, **seconds**.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Buckets of the histograms named `*_batch_size`, **items per batch** (a hold queue's,
/// the refusals' and the releases' batches: 1 to 256 items; the latency buckets read sizes
/// above 5 as `+Inf`, as a newcomer review found).
pub const BATCH_SIZE_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process-wide Prometheus handle; installs the recorder on first use. `None` only when
/// something outside this crate installed another global recorder first.
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let b = PrometheusBuilder::new()
                .set_buckets(LATENCY_BUCKETS)
                .ok()?
                .set_buckets_for_metric(Matcher::Suffix("_batch_size".into()), BATCH_SIZE_BUCKETS)
                .ok()?;
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

    /// Batch sizes get buckets of their own: 20 items fall under `le="32"`, not only `+Inf`.
    #[test]
    fn batch_sizes_are_bucketed_by_count_not_by_seconds() {
        let h = super::handle().expect("recorder installs");
        metrics::histogram!("common_test_batch_size").record(20.0);
        let text = h.render();
        assert!(
            text.contains("common_test_batch_size_bucket{le=\"32\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("common_test_batch_size_bucket{le=\"16\"} 0"),
            "{text}"
        );
    }
}
