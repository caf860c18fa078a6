//! A small closed-loop load generator: `connections` workers, each sending its next request as
//! soon as the previous answer arrived, for a fixed time, through one shared `reqwest` client.
//! Latency goes into one HDR histogram per worker (microseconds), merged at the end. The first
//! `warmup` of the run is sent but not counted (connections open, caches fill).

use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One request's result as the workload reports it: its HTTP status (0 = transport error) and
/// the time the measured request took (the workload may do untimed bookkeeping calls around it).
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// HTTP status, 0 for a transport error.
    pub status: u16,
    /// Time of the measured request alone.
    pub took: Duration,
}

/// A workload: called with (worker index, iteration index) for each request.
pub type Workload = Arc<dyn Fn(usize, u64) -> BoxFuture<'static, Sample> + Send + Sync>;

/// What one measurement found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measured {
    /// Short name (`join`, `status`, …).
    pub name: String,
    /// Answers with an expected status, counted after the warm-up.
    pub ok: u64,
    /// Answers with any other status below 500 (e.g. 409 on a hot show), counted.
    pub other_4xx: u64,
    /// 5xx answers and transport errors.
    pub errors: u64,
    /// Measured window, seconds.
    pub secs: f64,
    /// Answered requests per second: (`ok` + `other_4xx`) / `secs`.
    pub rps: f64,
    /// Requests per second with an expected status: `ok` / `secs`.
    pub ok_rps: f64,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: f64,
    /// Largest latency, milliseconds.
    pub max_ms: f64,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("histogram bounds")
}

/// Runs `work` closed-loop on `connections` workers for `warmup + duration`; statuses in
/// `ok_statuses` are "ok", other statuses below 500 are counted apart, the rest are errors.
pub async fn closed_loop(
    name: &str,
    connections: usize,
    warmup: Duration,
    duration: Duration,
    ok_statuses: &[u16],
    work: Workload,
) -> Measured {
    closed_loop_tally(connections, warmup, duration, ok_statuses, work)
        .await
        .measured(name)
}

/// What one closed-loop run counted: latencies (µs) and answers by kind over `secs`; tallies
/// of slices of one figure add up ([`Tally::add`]).
pub struct Tally {
    h: Histogram<u64>,
    ok: u64,
    other: u64,
    errors: u64,
    secs: f64,
}

impl Tally {
    /// Adds another slice's counts and latencies.
    pub fn add(&mut self, other: &Tally) {
        let _ = self.h.add(&other.h);
        self.ok += other.ok;
        self.other += other.other;
        self.errors += other.errors;
        self.secs += other.secs;
    }

    /// The figure named `name`.
    pub fn measured(&self, name: &str) -> Measured {
        let secs = self.secs.max(1e-9);
        let ms = |q: f64| self.h.value_at_quantile(q) as f64 / 1000.0;
        Measured {
            name: name.to_owned(),
            ok: self.ok,
            other_4xx: self.other,
            errors: self.errors,
            secs,
            rps: (self.ok + self.other) as f64 / secs,
            ok_rps: self.ok as f64 / secs,
            p50_ms: ms(0.5),
            p99_ms: ms(0.99),
            max_ms: self.h.max() as f64 / 1000.0,
        }
    }
}

/// Two figures measured in alternating slices, A B B A (each slice half of `duration`, after
/// its own warm-up), so that the machine's drift during the run weighs on both alike: their
/// ratio is what a run measures, not which one ran while the machine was faster.
pub async fn interleaved(
    connections: usize,
    warmup: Duration,
    duration: Duration,
    a: (&str, &[u16], Workload),
    b: (&str, &[u16], Workload),
) -> (Measured, Measured) {
    let half = duration / 2;
    let mut ta = closed_loop_tally(connections, warmup, half, a.1, a.2.clone()).await;
    let mut tb = closed_loop_tally(connections, warmup, half, b.1, b.2.clone()).await;
    tb.add(&closed_loop_tally(connections, warmup, half, b.1, b.2).await);
    ta.add(&closed_loop_tally(connections, warmup, half, a.1, a.2).await);
    (ta.measured(a.0), tb.measured(b.0))
}

/// [`closed_loop`]'s counting, unnamed.
async fn closed_loop_tally(
    connections: usize,
    warmup: Duration,
    duration: Duration,
    ok_statuses: &[u16],
    work: Workload,
) -> Tally {
    let start = Instant::now();
    let counted_from = start + warmup;
    let end = counted_from + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..connections.max(1) {
        let work = work.clone();
        let oks: Vec<u16> = ok_statuses.to_vec();
        tasks.spawn(async move {
            let mut h = histogram();
            let (mut ok, mut other, mut err) = (0u64, 0u64, 0u64);
            let mut i = 0u64;
            loop {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let s = work(w, i).await;
                i += 1;
                if Instant::now() > end || now < counted_from {
                    continue;
                }
                let us = u64::try_from(s.took.as_micros()).unwrap_or(u64::MAX);
                let _ = h.record(us.clamp(1, 60_000_000));
                if oks.contains(&s.status) {
                    ok += 1;
                } else if (1..500).contains(&s.status) {
                    other += 1;
                } else {
                    err += 1;
                }
            }
            (h, ok, other, err)
        });
    }
    let mut h = histogram();
    let (mut ok, mut other, mut errors) = (0, 0, 0);
    while let Some(r) = tasks.join_next().await {
        if let Ok((wh, o, x, e)) = r {
            let _ = h.add(&wh);
            ok += o;
            other += x;
            errors += e;
        }
    }
    Tally {
        h,
        ok,
        other,
        errors,
        secs: duration.as_secs_f64(),
    }
}

/// Sends `req`, reads the whole body, and times it. Status 0 on a transport error.
pub async fn timed(req: reqwest::RequestBuilder) -> (Sample, Option<bytes_body::Body>) {
    let t = Instant::now();
    match req.send().await {
        Ok(r) => {
            let status = r.status().as_u16();
            let body = r.bytes().await.ok();
            (
                Sample {
                    status,
                    took: t.elapsed(),
                },
                body.map(|b| bytes_body::Body(b.to_vec())),
            )
        }
        Err(_) => (
            Sample {
                status: 0,
                took: t.elapsed(),
            },
            None,
        ),
    }
}

/// The body of an answer, kept as received.
pub mod bytes_body {
    /// Raw response bytes.
    #[derive(Debug)]
    pub struct Body(pub Vec<u8>);

    impl Body {
        /// The body as JSON (`Null` when it is not JSON).
        pub fn json(&self) -> serde_json::Value {
            serde_json::from_slice(&self.0).unwrap_or(serde_json::Value::Null)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_statuses_by_class() {
        let work: Workload = Arc::new(|_, i| {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let status = [200, 409, 503][(i % 3) as usize];
                Sample {
                    status,
                    took: Duration::from_millis(1),
                }
            })
        });
        let m = closed_loop(
            "t",
            2,
            Duration::ZERO,
            Duration::from_millis(200),
            &[200],
            work,
        )
        .await;
        assert!(m.ok > 0 && m.other_4xx > 0 && m.errors > 0, "{m:?}");
        assert!(m.rps > m.ok_rps);
        assert!(m.p50_ms >= 1.0);
    }
}
