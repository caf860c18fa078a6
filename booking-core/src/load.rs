//! The booking core's load figures for the waiting room's closed loop (issue "closed loop and
//! report", item 1; DECISIONS: "The closed loop reads the booking core's figures through its API
//! (histogram buckets merged across nodes, never averaged p99s)"). Cumulative counters since the
//! process started, served by `GET /internal/load`: the caller takes the difference between two
//! reads, sums the buckets of every node, and reads the p99 from the sum.
//!
//! Layer: the bottom one, imports nothing from the crate.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds of the hold-latency buckets, **milliseconds** (the last bucket, `+Inf`, is
/// implied: `counts` has one more entry than this).
pub const BOUNDS_MS: [u64; 12] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000];

/// A latency histogram of fixed buckets ([`BOUNDS_MS`]), lock-free.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Non-cumulative: `buckets[i]` counts values in `(BOUNDS_MS[i-1], BOUNDS_MS[i]]`; the last
    /// counts values above every bound.
    buckets: [AtomicU64; BOUNDS_MS.len() + 1],
}

impl Histogram {
    /// Counts one value of `ms` milliseconds.
    pub fn record(&self, ms: u64) {
        let i = BOUNDS_MS
            .iter()
            .position(|&b| ms <= b)
            .unwrap_or(BOUNDS_MS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Cumulative counts: `[≤ 5 ms, ≤ 10 ms, …, all]` (Prometheus's `le` convention).
    pub fn cumulative(&self) -> Vec<u64> {
        let mut sum = 0;
        self.buckets
            .iter()
            .map(|b| {
                sum += b.load(Ordering::Relaxed);
                sum
            })
            .collect()
    }
}

/// The Prometheus twins of [`Load`]'s counters, registered once (no registry lookup per call).
fn prometheus_counters() -> &'static [metrics::Counter; 3] {
    static C: std::sync::OnceLock<[metrics::Counter; 3]> = std::sync::OnceLock::new();
    C.get_or_init(|| {
        [
            metrics::counter!("bc_api_requests_total"),
            metrics::counter!("bc_api_server_errors_total"),
            metrics::counter!("bc_hold_requests_total"),
        ]
    })
}

/// What the booking core measured since it started (one per process, in `AppState`).
#[derive(Debug, Default)]
pub struct Load {
    /// Latency of `POST /api/shows/{show}/holds`, whatever the answer.
    pub holds: Histogram,
    /// Fan calls answered (`/api/…`).
    pub requests: AtomicU64,
    /// Fan calls answered 5xx (503 included: an overloaded core sheds load with it).
    pub server_errors: AtomicU64,
    /// Hold requests still running: when each started (epoch ms of the service's clock), by a
    /// number of its own.
    running: Mutex<BTreeMap<u64, i64>>,
    /// The next running hold's number.
    next_running: AtomicU64,
}

/// A hold request counted as running in [`Load`] until this is dropped. The measuring
/// middleware holds one, and hands a clone (`Arc`) to the request through its extensions: the
/// hold's work on the holds' thread keeps it (`http::holds::create_hold`), so a request whose
/// client gave up (hyper drops the request's future, not the work it handed over) still counts
/// while its statement runs (a newcomer review: 32 abandoned holds waiting on a locked seat
/// showed as 1).
#[derive(Debug)]
pub struct Running {
    load: std::sync::Arc<Load>,
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.load
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&self.id);
    }
}

pub use sale_common::load::{LoadDoc, PoolFigures, ShowStock};

impl Load {
    /// Counts one answered fan call; `hold`: it was a hold request, taking `ms` milliseconds.
    /// The same counts go to Prometheus (`bc_api_requests_total`, `bc_api_server_errors_total`,
    /// `bc_hold_requests_total`), which the waiting room's sale report must match.
    pub fn answered(&self, status: u16, hold: bool, ms: u64) {
        let [requests, server_errors, holds] = prometheus_counters();
        self.requests.fetch_add(1, Ordering::Relaxed);
        requests.increment(1);
        if status >= 500 {
            self.server_errors.fetch_add(1, Ordering::Relaxed);
            server_errors.increment(1);
        }
        if hold {
            self.holds.record(ms);
            holds.increment(1);
        }
    }

    /// Counts a hold request as running from `started_ms` (epoch ms of the service's clock,
    /// `AppState::clock`, so tests can move it) until the guard is dropped.
    pub fn running_hold(self: &std::sync::Arc<Self>, started_ms: i64) -> Running {
        let id = self.next_running.fetch_add(1, Ordering::Relaxed);
        self.running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(id, started_ms);
        Running {
            load: self.clone(),
            id,
        }
    }

    /// The hold requests running at `now_ms` (epoch ms), by how long they have run so far,
    /// cumulative in the buckets of [`BOUNDS_MS`] (as [`Histogram::cumulative`]).
    pub fn running_cumulative(&self, now_ms: i64) -> Vec<u64> {
        let ages = Histogram::default();
        for started in self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
        {
            ages.record(u64::try_from(now_ms.saturating_sub(*started)).unwrap_or(0));
        }
        ages.cumulative()
    }

    /// The document at `now_ms` (epoch ms), with this node's id, its pool and its shows' stock.
    pub fn doc(
        &self,
        node: &str,
        now_ms: i64,
        pool: PoolFigures,
        shows: Vec<ShowStock>,
    ) -> LoadDoc {
        LoadDoc {
            node: node.to_owned(),
            hold_bounds_ms: BOUNDS_MS.iter().map(|&b| Some(b)).chain([None]).collect(),
            hold_counts: self.holds.cumulative(),
            hold_running_counts: self.running_cumulative(now_ms),
            requests: self.requests.load(Ordering::Relaxed),
            server_errors: self.server_errors.load(Ordering::Relaxed),
            pool,
            shows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_with_the_le_convention() {
        let h = Histogram::default();
        for ms in [0, 5, 6, 10, 700, 40_000] {
            h.record(ms);
        }
        let c = h.cumulative();
        assert_eq!(c.len(), BOUNDS_MS.len() + 1);
        // ≤5: 0 and 5; ≤10: +6, +10; ≤1000: +700; +Inf: +40000.
        assert_eq!(&c[..3], &[2, 4, 4]);
        assert_eq!(c[7], 5);
        assert_eq!(*c.last().unwrap(), 6);
    }

    #[test]
    fn a_running_hold_counts_by_its_age_until_it_ends() {
        let load = std::sync::Arc::new(Load::default());
        let t0 = 1_800_000_000_000;
        let slow = load.running_hold(t0);
        let fast = load.running_hold(t0 + 1_990);
        let at = t0 + 2_000;
        let c = load.running_cumulative(at);
        // 10 ms so far: the ≤ 10 ms bucket; 2,000 ms: the ≤ 2,500 ms one.
        assert_eq!((c[0], c[1], c[7], c[8]), (0, 1, 1, 2));
        drop(slow);
        assert_eq!(*load.running_cumulative(at).last().unwrap(), 1);
        drop(fast);
        assert_eq!(*load.running_cumulative(at).last().unwrap(), 0);
    }
}
