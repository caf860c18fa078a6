//! Latency and outcome figures per endpoint: one HDR histogram (microseconds) and status counters
//! per endpoint name, shared by all synthetic fans.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Figures for one endpoint.
#[derive(Debug)]
pub struct EndpointStats {
    /// Latency in microseconds, 1 µs .. 60 s, 3 significant figures.
    pub latency_us: Histogram<u64>,
    /// Answers with a 5xx status or a transport error, except 503 + `Retry-After`.
    pub server_errors: u64,
    /// Answers 503 with `Retry-After`: the server asked to come back later (the fans do).
    pub retry_later: u64,
    /// Answers with a 4xx status.
    pub client_errors: u64,
}

impl EndpointStats {
    fn new() -> Self {
        Self {
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
            server_errors: 0,
            retry_later: 0,
            client_errors: 0,
        }
    }
}

/// All endpoints' figures, keyed by a short endpoint name (`join`, `hold`, …).
#[derive(Debug, Default)]
pub struct Stats {
    inner: Mutex<BTreeMap<&'static str, EndpointStats>>,
}

impl Stats {
    /// Records one call: its latency and its HTTP status (`None` = transport error).
    pub fn record(&self, endpoint: &'static str, took: Duration, status: Option<u16>) {
        self.record_answer(endpoint, took, status, false);
    }

    /// Like [`Stats::record`]; `retry_later`: the answer was 503 with `Retry-After`, counted
    /// apart from the server errors (fans wait and send it again).
    pub fn record_answer(
        &self,
        endpoint: &'static str,
        took: Duration,
        status: Option<u16>,
        retry_later: bool,
    ) {
        crate::timeline::record(endpoint, took, status, retry_later);
        let mut map = self.inner.lock().expect("stats lock");
        let e = map.entry(endpoint).or_insert_with(EndpointStats::new);
        let us = u64::try_from(took.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, 60_000_000);
        let _ = e.latency_us.record(us);
        match status {
            Some(503) if retry_later => e.retry_later += 1,
            None => e.server_errors += 1,
            Some(s) if s >= 500 => e.server_errors += 1,
            Some(s) if s >= 400 => e.client_errors += 1,
            Some(_) => {}
        }
    }

    /// Total calls, server errors (503 + `Retry-After` excepted) and 503 + `Retry-After`
    /// answers over all endpoints.
    pub fn totals(&self) -> (u64, u64, u64) {
        let map = self.inner.lock().expect("stats lock");
        map.values().fold((0, 0, 0), |(n, e, r), s| {
            (
                n + s.latency_us.len(),
                e + s.server_errors,
                r + s.retry_later,
            )
        })
    }

    /// Per-endpoint rows as JSON: calls, calls/s over `wall`, p50/p99/max ms, 4xx, 5xx.
    pub fn rows(&self, wall: Duration) -> serde_json::Value {
        let map = self.inner.lock().expect("stats lock");
        let secs = wall.as_secs_f64().max(1e-9);
        let ms = |v: u64| v as f64 / 1000.0;
        map.iter()
            .map(|(name, s)| {
                let h = &s.latency_us;
                serde_json::json!({
                    "endpoint": name, "calls": h.len(), "calls_per_sec": h.len() as f64 / secs,
                    "p50_ms": ms(h.value_at_quantile(0.5)), "p99_ms": ms(h.value_at_quantile(0.99)),
                    "max_ms": ms(h.max()), "client_errors": s.client_errors,
                    "server_errors": s.server_errors, "retry_later_503": s.retry_later,
                })
            })
            .collect()
    }

    /// A table: endpoint, calls, calls/s over `wall`, p50/p99/max in milliseconds, 4xx, 5xx.
    pub fn table(&self, wall: Duration) -> String {
        let map = self.inner.lock().expect("stats lock");
        let secs = wall.as_secs_f64().max(1e-9);
        let mut out = format!(
            "{:<12} {:>8} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6}\n",
            "endpoint", "calls", "calls/s", "p50 ms", "p99 ms", "max ms", "4xx", "5xx"
        );
        for (name, s) in map.iter() {
            let h = &s.latency_us;
            out.push_str(&format!(
                "{:<12} {:>8} {:>9.1} {:>9.2} {:>9.2} {:>9.2} {:>6} {:>6}\n",
                name,
                h.len(),
                h.len() as f64 / secs,
                h.value_at_quantile(0.50) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                h.max() as f64 / 1000.0,
                s.client_errors,
                s.server_errors
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_errors_by_class() {
        let s = Stats::default();
        s.record("join", Duration::from_millis(2), Some(200));
        s.record("join", Duration::from_millis(3), Some(429));
        s.record("hold", Duration::from_millis(4), Some(503));
        s.record("hold", Duration::from_millis(4), None);
        assert_eq!(s.totals(), (4, 2, 0));
        s.record_answer("hold", Duration::from_millis(4), Some(503), true);
        assert_eq!(s.totals(), (5, 2, 1));
        let t = s.table(Duration::from_secs(1));
        assert!(t.contains("join"));
        assert!(t.contains("hold"));
    }
}
