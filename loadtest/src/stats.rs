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
    /// What the server errors were: the status (`"502"`), or `"transport: KIND"` (see
    /// [`transport_kind`]) → count.
    pub server_error_kinds: BTreeMap<String, u64>,
}

impl EndpointStats {
    fn new() -> Self {
        Self {
            latency_us: Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds"),
            server_errors: 0,
            retry_later: 0,
            client_errors: 0,
            server_error_kinds: BTreeMap::new(),
        }
    }
}

/// Every endpoint's figures added up ([`Stats::totals`]).
#[derive(Debug, Default, Clone)]
pub struct Totals {
    /// Calls answered or failed.
    pub calls: u64,
    /// 5xx answers and transport errors, 503 + `Retry-After` excepted.
    pub server_errors: u64,
    /// 503 + `Retry-After` answers (fans wait and send them again).
    pub retry_later: u64,
    /// [`Stats::server_error_breakdown`].
    pub breakdown: String,
}

/// All endpoints' figures, keyed by a short endpoint name (`join`, `hold`, …).
#[derive(Debug, Default)]
pub struct Stats {
    inner: Mutex<BTreeMap<&'static str, EndpointStats>>,
}

impl Stats {
    /// Records a call that got no answer: a transport error of kind `kind` (see
    /// [`transport_kind`]); a server error.
    pub fn record_transport_error(&self, endpoint: &'static str, took: Duration, kind: &str) {
        crate::timeline::record(endpoint, took, None, false);
        self.tally(endpoint, took, None, false, kind);
    }

    /// The server errors by endpoint and kind, e.g. `claim 502 × 2, join transport: reset × 1`
    /// (empty when there were none).
    pub fn server_error_breakdown(&self) -> String {
        let map = self.inner.lock().expect("stats lock");
        map.iter()
            .flat_map(|(name, s)| {
                s.server_error_kinds
                    .iter()
                    .map(move |(kind, n)| format!("{name} {kind} × {n}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Records one answered call: its latency and its HTTP status; `retry_later`: the answer
    /// was 503 with `Retry-After`, counted apart from the server errors (fans wait and send it
    /// again).
    pub fn record_answer(
        &self,
        endpoint: &'static str,
        took: Duration,
        status: Option<u16>,
        retry_later: bool,
    ) {
        crate::timeline::record(endpoint, took, status, retry_later);
        self.tally(endpoint, took, status, retry_later, "other");
    }

    /// Counts one call; `transport`: the kind of transport error when `status` is `None`.
    fn tally(
        &self,
        endpoint: &'static str,
        took: Duration,
        status: Option<u16>,
        retry_later: bool,
        transport: &str,
    ) {
        let mut map = self.inner.lock().expect("stats lock");
        let e = map.entry(endpoint).or_insert_with(EndpointStats::new);
        let us = u64::try_from(took.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, 60_000_000);
        let _ = e.latency_us.record(us);
        match status {
            Some(503) if retry_later => e.retry_later += 1,
            None => {
                e.server_errors += 1;
                *e.server_error_kinds
                    .entry(format!("transport: {transport}"))
                    .or_default() += 1;
            }
            Some(s) if s >= 500 => {
                e.server_errors += 1;
                *e.server_error_kinds.entry(s.to_string()).or_default() += 1;
            }
            Some(s) if s >= 400 => e.client_errors += 1,
            Some(_) => {}
        }
    }

    /// Every endpoint's calls, server errors and 503 + `Retry-After` answers, added up.
    pub fn totals(&self) -> Totals {
        let breakdown = self.server_error_breakdown();
        let map = self.inner.lock().expect("stats lock");
        map.values().fold(
            Totals {
                breakdown,
                ..Totals::default()
            },
            |t, s| Totals {
                calls: t.calls + s.latency_us.len(),
                server_errors: t.server_errors + s.server_errors,
                retry_later: t.retry_later + s.retry_later,
                ..t
            },
        )
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

/// A short name for a transport error (no HTTP answer): `timeout`, `connect`, `body`, `request`
/// or `other`, from reqwest's own classification.
pub fn transport_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else if e.is_request() {
        "request"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_errors_by_class() {
        let s = Stats::default();
        let ms = Duration::from_millis;
        s.record_answer("join", ms(2), Some(200), false);
        s.record_answer("join", ms(3), Some(429), false);
        s.record_answer("hold", ms(4), Some(503), false);
        s.record_transport_error("hold", ms(4), "timeout");
        let t = s.totals();
        assert_eq!((t.calls, t.server_errors, t.retry_later), (4, 2, 0));
        assert_eq!(t.breakdown, "hold 503 × 1, hold transport: timeout × 1");
        s.record_answer("hold", ms(4), Some(503), true);
        let t = s.totals();
        assert_eq!((t.calls, t.server_errors, t.retry_later), (5, 2, 1));
        let t = s.table(Duration::from_secs(1));
        assert!(t.contains("join"));
        assert!(t.contains("hold"));
    }
}
