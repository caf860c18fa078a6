//! The rehearsal's figures over time: every HTTP call's second, endpoint, status and latency
//! (recorded with every answer the fans count, by `stats`), and a sampler that reads the public
//! status document and the admin figures once a second (queue length, cursor, state, admissions). At
//! the end [`Timeline::series`] folds them into 1-second buckets for the report and the plots.

use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

static T0: OnceLock<Instant> = OnceLock::new();
static CALLS: Mutex<Vec<Call>> = Mutex::new(Vec::new());

#[derive(Debug, Clone, Copy)]
struct Call {
    at_ms: u64,
    endpoint: &'static str,
    status: u16,
    took_us: u32,
    retry_later: bool,
}

/// One recorded call as the chaos checks read it: when it was sent and answered (ms since the
/// origin), its endpoint and status (0 = transport error).
#[derive(Debug, Clone, Copy)]
pub struct CallSpan {
    /// Sent, ms since the origin.
    pub sent_ms: u64,
    /// Answered (or failed), ms since the origin.
    pub done_ms: u64,
    /// Endpoint name.
    pub endpoint: &'static str,
    /// HTTP status, 0 for a transport error.
    pub status: u16,
    /// A 503 that carried `Retry-After`.
    pub retry_later: bool,
}

/// Every call recorded so far (a copy; [`Timeline::series`] still gets them all).
pub fn spans() -> Vec<CallSpan> {
    CALLS
        .lock()
        .expect("timeline")
        .iter()
        .map(|c| CallSpan {
            sent_ms: c.at_ms.saturating_sub(u64::from(c.took_us) / 1000),
            done_ms: c.at_ms,
            endpoint: c.endpoint,
            status: c.status,
            retry_later: c.retry_later,
        })
        .collect()
}

/// An endpoint's calls while the fans were making them ([`busy_rate`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Busy {
    /// Calls sent inside the span.
    pub calls: usize,
    /// The span's start and end, ms since the origin (sending times).
    pub from_ms: u64,
    /// See `from_ms`.
    pub to_ms: u64,
    /// `calls` per second of the span.
    pub per_sec: f64,
}

/// Share of an endpoint's calls left out at each end of its busy span (1 %: the first fans'
/// stragglers before the rush and the patient fans' last tries after the sell-out).
pub const BUSY_TAIL: f64 = 0.01;

/// `endpoint`'s calls per second during the rush: the calls sent between the 1st and the 99th
/// percentile of their sending times ([`BUSY_TAIL`]), over that span. The table's calls/s
/// divides by the whole wall, which also counts the seconds before the sale opens and after
/// the last fan's call (issue 13 asks for "hold requests/s during the rush"). `None` before
/// 100 calls, or over a zero span.
pub fn busy_rate(endpoint: &str) -> Option<Busy> {
    let sent: Vec<u64> = spans()
        .into_iter()
        .filter(|c| c.endpoint == endpoint)
        .map(|c| c.sent_ms)
        .collect();
    busy_of(sent)
}

/// [`busy_rate`] over the sending times `sent` (ms, any order).
pub fn busy_of(mut sent: Vec<u64>) -> Option<Busy> {
    if sent.len() < 100 {
        return None;
    }
    sent.sort_unstable();
    let cut = (sent.len() as f64 * BUSY_TAIL).floor() as usize;
    let inside = &sent[cut..sent.len() - cut];
    let (from_ms, to_ms) = (*inside.first()?, *inside.last()?);
    let span = to_ms.checked_sub(from_ms).filter(|s| *s > 0)?;
    Some(Busy {
        calls: inside.len(),
        from_ms,
        to_ms,
        per_sec: inside.len() as f64 * 1000.0 / span as f64,
    })
}

/// Sets the run's time origin (call once, before the fans start).
pub fn start(at: Instant) {
    let _ = T0.set(at);
}

/// Milliseconds since the run's origin (0 before [`start`]).
pub fn now_ms() -> u64 {
    T0.get().map_or(0, |t| t.elapsed().as_millis() as u64)
}

/// Records one HTTP call (`status` `None` = transport error, kept as 0; `retry_later`: a 503
/// with `Retry-After`).
pub fn record(endpoint: &'static str, took: Duration, status: Option<u16>, retry_later: bool) {
    if T0.get().is_none() {
        return;
    }
    let c = Call {
        at_ms: now_ms(),
        endpoint,
        status: status.unwrap_or(0),
        took_us: u32::try_from(took.as_micros()).unwrap_or(u32::MAX),
        retry_later,
    };
    CALLS.lock().expect("timeline").push(c);
}

/// One sample of the status document and the admin figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    /// Milliseconds since the run's origin.
    pub t_ms: u64,
    /// Public state (`prequeue`, `open`, `sold_out`, …).
    pub state: String,
    /// Cursor (last number invited).
    pub cursor: u64,
    /// Live queue length (fans).
    pub queue_length: u64,
    /// Live admitted sessions.
    pub active: u64,
    /// Admissions granted so far (admin figures).
    pub admitted_total: u64,
}

/// The sampler's handle: stop it to get the samples.
#[derive(Debug)]
pub struct Sampler {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// Client, URL and admin token for the closing sample.
    closing: (reqwest::Client, String, String),
}

impl Sampler {
    /// Reads `GET {wr}/admin/events/{event}` (the status document plus `admitted_total`) every
    /// `every`.
    pub fn spawn(
        client: reqwest::Client,
        wr: &str,
        event: &str,
        admin: &str,
        every: Duration,
    ) -> Self {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let (url, admin, out) = (
            format!("{wr}/admin/events/{event}"),
            admin.to_owned(),
            samples.clone(),
        );
        let (client_for_close, url_for_close, admin_for_close) =
            (client.clone(), url.clone(), admin.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                if let Some(sample) = sample_once(&client, &url, &admin).await {
                    out.lock().expect("samples").push(sample);
                }
            }
        });
        Self {
            samples,
            stop,
            task,
            closing: (client_for_close, url_for_close, admin_for_close),
        }
    }

    /// Stops sampling and takes one closing sample (so a state reached just before the end, such
    /// as `sold_out` delivered by the booking core's outbox, is seen); the samples in time order.
    pub async fn finish(self) -> Vec<Sample> {
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let (client, url, admin) = &self.closing;
        let last = sample_once(client, url, admin).await;
        let mut v = std::mem::take(&mut *self.samples.lock().expect("samples"));
        v.extend(last);
        v
    }
}

/// One `GET {url}` of the admin figures as a [`Sample`]; `None` when the call fails.
async fn sample_once(client: &reqwest::Client, url: &str, admin: &str) -> Option<Sample> {
    let t_ms = now_ms();
    let d = client
        .get(url)
        .bearer_auth(admin)
        .send()
        .await
        .ok()?
        .json::<serde_json::Value>()
        .await
        .ok()?;
    let u = |k: &str| d[k].as_u64().unwrap_or(0);
    Some(Sample {
        t_ms,
        state: d["state"].as_str().unwrap_or("").to_owned(),
        cursor: u("cursor"),
        queue_length: u("queue_length"),
        active: u("active"),
        admitted_total: u("admitted_total"),
    })
}

/// Per-second series for the report (index = second since the origin).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    /// Status samples.
    pub samples: Vec<Sample>,
    /// Admissions per second (fans' successful claims).
    pub admissions: Vec<u64>,
    /// Hold requests answered 201 per second.
    pub holds: Vec<u64>,
    /// Hold requests answered 409 per second.
    pub conflicts: Vec<u64>,
    /// Holds read back PAID per second.
    pub paid: Vec<u64>,
    /// 5xx answers and transport errors per second.
    pub errors: Vec<u64>,
    /// p99 latency per endpoint per second, milliseconds (0 where no call).
    pub p99_ms: BTreeMap<&'static str, Vec<f64>>,
}

fn bump(v: &mut Vec<u64>, sec: usize) {
    if v.len() <= sec {
        v.resize(sec + 1, 0);
    }
    v[sec] += 1;
}

impl Timeline {
    /// Folds the recorded calls, the fans' admission and payment times and the samples.
    pub fn series(samples: Vec<Sample>, admitted_ms: &[u64], paid_ms: &[u64]) -> Self {
        let calls = std::mem::take(&mut *CALLS.lock().expect("timeline"));
        let mut t = Self {
            samples,
            ..Default::default()
        };
        let mut lat: BTreeMap<&'static str, Vec<Vec<u32>>> = BTreeMap::new();
        for c in &calls {
            let sec = (c.at_ms / 1000) as usize;
            match (c.endpoint, c.status) {
                ("hold", 201) | ("hold", 200) => bump(&mut t.holds, sec),
                ("hold", 409) => bump(&mut t.conflicts, sec),
                _ => {}
            }
            if c.status == 0 || c.status >= 500 {
                bump(&mut t.errors, sec);
            }
            let e = lat.entry(c.endpoint).or_default();
            if e.len() <= sec {
                e.resize(sec + 1, Vec::new());
            }
            e[sec].push(c.took_us);
        }
        for &ms in admitted_ms {
            bump(&mut t.admissions, (ms / 1000) as usize);
        }
        for &ms in paid_ms {
            bump(&mut t.paid, (ms / 1000) as usize);
        }
        for (name, secs) in lat {
            let p99 = secs
                .into_iter()
                .map(|mut v| {
                    if v.is_empty() {
                        return 0.0;
                    }
                    v.sort_unstable();
                    let i = ((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1;
                    f64::from(v[i]) / 1000.0
                })
                .collect();
            t.p99_ms.insert(name, p99);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_span_leaves_out_the_stragglers_at_both_ends() {
        // 1,000 calls evenly over 10 s (t = 20 s .. 30 s), 10 early and 10 late stragglers.
        let mut sent: Vec<u64> = (0..1000).map(|i| 20_000 + i * 10).collect();
        sent.extend((0..10).map(|i| i * 100));
        sent.extend((0..10).map(|i| 100_000 + i * 1000));
        let b = busy_of(sent).expect("enough calls");
        assert_eq!(b.calls, 1000);
        assert_eq!((b.from_ms, b.to_ms), (20_000, 29_990));
        assert!(
            (b.per_sec - 1000.0 * 1000.0 / 9_990.0).abs() < 1e-9,
            "{b:?}"
        );
        // Over the wall (0 .. 109 s) the same calls make ~9.3/s: the table's figure.
        assert!(busy_of(vec![5; 99]).is_none(), "too few calls");
        assert!(busy_of(vec![5; 200]).is_none(), "no span");
    }
}
