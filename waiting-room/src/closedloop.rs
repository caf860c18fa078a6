//! Admission that follows the booking core (issue "closed loop and report", item 1): between
//! the operator's `min_rate` and `max_rate`, the admit rate is lowered when the booking core's
//! hold p99 or its share of 5xx answers pass a threshold, and raised again
//! when they recover. Every change is an audited operator action (`closed-loop`,
//! `auto_admit_rate`, with the reason), so the console and `admin audit` show it.
//!
//! The figures come from each booking-core node's `GET /internal/load` (API.md): cumulative
//! counters, read every `interval_secs`; the loop takes the difference with its previous read
//! of the same node and **sums the buckets of every node** before reading the p99 (DECISIONS:
//! histogram buckets merged across nodes, never averaged p99s). When any node cannot be read, or
//! a node restarted (a new `node` id: no baseline yet), the rate is **held** as it is.
//!
//! The holds still running at each read (`hold_running_counts`, by how long they have run)
//! count in the p99 at the age they reached: a booking core that stalls (a lock on the seats, a
//! hung database) finishes few holds, all of them quick, and by the finished ones alone it read
//! as healthy and got more fans (CI, `closed_loop::the_admit_rate_follows_a_booking_core_slowed_mid_sale`:
//! 6.3 → 8.6 → 10.9 a second during the stall). With too few holds for a p99 and one running
//! past `hold_p99_ms`, the rate is held, not raised.
//!
//! The rule is additive increase, multiplicative decrease (TCP's congestion control, RFC 5681
//! §3.1, applied to admissions): overloaded → × `decrease` (default 0.7); healthy → +
//! `(max − min) / 10`; in between (figures missing, too few holds to read a p99 from while the
//! other signals are fine) → unchanged. One node runs each event's loop at a time (an owner-token
//! lock in the store, like the admitter's).
//!
//! The database pool (`pool` in the figures) is reported, not judged: a pool's idle count at one
//! instant says nothing about waiting (SQLite's one writer connection reads busy whenever a
//! write is running; a newcomer's review saw the loop cut an idle sale to its minimum on it).
//! A slow pool shows in the hold p99 anyway.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use sale_common::load::{LoadDoc, PoolFigures};

use crate::domain::{AuditEntry, EventId};
use crate::store::QueueStore;

/// An event's closed loop (config `events[].closed_loop`). Rates in admissions per **second**.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedLoop {
    /// Lowest admit rate the loop sets, > 0.
    pub min_rate: f64,
    /// Highest admit rate the loop sets, ≥ `min_rate`.
    pub max_rate: f64,
    /// Overloaded when the merged hold p99 is above this, **milliseconds** (default 500, the
    /// seed rehearsal's target).
    #[serde(default = "default_p99")]
    pub hold_p99_ms: u64,
    /// Overloaded when more than this share of the fan calls answered 5xx (default 0.01).
    #[serde(default = "default_errors")]
    pub error_ratio: f64,
    /// How often the figures are read, **seconds** (default 5).
    #[serde(default = "default_interval")]
    pub interval_secs: u64,
    /// Multiplier applied when overloaded, in (0, 1) (default 0.7).
    #[serde(default = "default_decrease")]
    pub decrease: f64,
    /// Fewest hold requests in one interval to read a p99 from (default 20).
    #[serde(default = "default_min_samples")]
    pub min_samples: u64,
    /// Every booking-core node's base URL (default: the event's `booking_url`, one node or a
    /// balancer; behind a balancer the reads land on any node, so list the nodes).
    #[serde(default)]
    pub load_urls: Vec<String>,
}

fn default_p99() -> u64 {
    500
}
fn default_errors() -> f64 {
    0.01
}
fn default_interval() -> u64 {
    5
}
fn default_decrease() -> f64 {
    0.7
}
fn default_min_samples() -> u64 {
    20
}

impl ClosedLoop {
    /// What is wrong with these settings, one line each (`events[i].closed_loop.…: rule`).
    pub fn problems(&self, at: &str) -> Vec<String> {
        let mut p = Vec::new();
        if !(self.min_rate > 0.0 && self.min_rate <= 1_000_000.0) {
            p.push(format!("{at}.min_rate: a number in (0, 1000000]"));
        }
        if !(self.max_rate >= self.min_rate && self.max_rate <= 1_000_000.0) {
            p.push(format!("{at}.max_rate: a number in [min_rate, 1000000]"));
        }
        if self.hold_p99_ms == 0 {
            p.push(format!("{at}.hold_p99_ms: at least 1"));
        }
        if !(self.error_ratio > 0.0 && self.error_ratio < 1.0) {
            p.push(format!("{at}.error_ratio: a number in (0, 1)"));
        }
        if !(1..=3600).contains(&self.interval_secs) {
            p.push(format!("{at}.interval_secs: 1..=3600"));
        }
        if !(self.decrease > 0.0 && self.decrease < 1.0) {
            p.push(format!("{at}.decrease: a number in (0, 1)"));
        }
        for (i, u) in self.load_urls.iter().enumerate() {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                p.push(format!("{at}.load_urls[{i}]: an absolute http(s) URL"));
            }
        }
        p
    }

    /// The read interval.
    pub fn interval(&self) -> Duration {
        Duration::from_secs(self.interval_secs)
    }
}

/// The figures of one interval, every node summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interval {
    /// Bucket bounds, ms (`None` = +Inf).
    pub bounds_ms: Vec<Option<u64>>,
    /// Hold requests per bucket in the interval, cumulative, summed over nodes.
    pub hold_counts: Vec<u64>,
    /// Hold requests still running at the interval's end, by how long they had run, in the
    /// same buckets, cumulative, summed over nodes (`LoadDoc::hold_running_counts`; empty when
    /// no node sent them).
    pub running_counts: Vec<u64>,
    /// Fan calls answered in the interval.
    pub requests: u64,
    /// Of them, 5xx.
    pub server_errors: u64,
}

impl Interval {
    /// The p99 of the merged hold latencies as its bucket's upper bound: `Some(Some(ms))`, or
    /// `Some(None)` for the +Inf bucket; `None` when there were fewer than `min` holds. The
    /// holds still running count at the age they had reached (a lower bound of their
    /// latency): a booking core that stalled mid-interval finishes few holds, and those it
    /// finished were quick.
    pub fn hold_p99_bound(&self, min: u64) -> Option<Option<u64>> {
        let counts = self.finished_and_running();
        let total = *counts.last()?;
        if total < min.max(1) {
            return None;
        }
        let want = (total as f64 * 0.99).ceil() as u64;
        let i = counts.iter().position(|&c| c >= want)?;
        Some(self.bounds_ms.get(i).copied().flatten())
    }

    /// [`Interval::hold_counts`] plus [`Interval::running_counts`], bucket by bucket.
    fn finished_and_running(&self) -> Vec<u64> {
        let mut counts = self.hold_counts.clone();
        if self.running_counts.len() == counts.len() {
            for (c, r) in counts.iter_mut().zip(&self.running_counts) {
                *c += r;
            }
        }
        counts
    }

    /// Hold requests still running at the interval's end, and the lower bound (ms) of the
    /// bucket of the longest-running one: it has run longer than that. `None` when none runs.
    pub fn oldest_running(&self) -> Option<(u64, u64)> {
        let total = *self.running_counts.last()?;
        if total == 0 {
            return None;
        }
        let i = self.running_counts.iter().position(|&c| c >= total)?;
        let over = match i.checked_sub(1) {
            Some(prev) => self.bounds_ms.get(prev).copied().flatten().unwrap_or(0),
            None => 0,
        };
        Some((total, over))
    }
}

/// What the loop concluded from an interval.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Lower the rate; why.
    Overloaded(String),
    /// Raise the rate; the figures that say so.
    Healthy(String),
    /// Keep the rate; why.
    Hold(String),
}

/// Judges one merged interval against the thresholds.
pub fn judge(cfg: &ClosedLoop, i: &Interval) -> Verdict {
    let p99 = i.hold_p99_bound(cfg.min_samples);
    let fmt = |b: Option<u64>| b.map_or("over 30 s".to_owned(), |ms| format!("≤ {ms} ms"));
    if let Some(bound) = p99 {
        // A bucket bound above the threshold: the p99 is past it (bounds are upper bounds).
        if bound.is_none_or(|ms| ms > cfg.hold_p99_ms) {
            let running = i.oldest_running().map_or(String::new(), |(n, over)| {
                format!(
                    " ({n} holds still running counted at their age, the oldest over {over} ms)"
                )
            });
            return Verdict::Overloaded(format!(
                "hold p99 {} above {} ms{running}",
                fmt(bound),
                cfg.hold_p99_ms
            ));
        }
    }
    if i.requests > 0 {
        let ratio = i.server_errors as f64 / i.requests as f64;
        if ratio > cfg.error_ratio {
            return Verdict::Overloaded(format!(
                "5xx {} of {} calls ({:.1}%) above {:.1}%",
                i.server_errors,
                i.requests,
                ratio * 100.0,
                cfg.error_ratio * 100.0
            ));
        }
    }
    match p99 {
        Some(bound) => Verdict::Healthy(format!(
            "hold p99 {} within {} ms, 5xx {} of {}",
            fmt(bound),
            cfg.hold_p99_ms,
            i.server_errors,
            i.requests
        )),
        // Too few holds to read a p99 from, and one still running past the threshold: the
        // booking core may be stalled (a lock, a hung database), not idle. Not raised.
        None if i
            .oldest_running()
            .is_some_and(|(_, over)| over >= cfg.hold_p99_ms) =>
        {
            let (running, over) = i.oldest_running().unwrap_or_default();
            Verdict::Hold(format!(
                "{} holds finished (too few for a p99), {running} still running, one for over \
                 {over} ms",
                i.hold_counts.last().copied().unwrap_or(0),
            ))
        }
        None if i.requests > 0 => Verdict::Healthy(format!(
            "{} holds (too few for a p99), 5xx {} of {}",
            i.hold_counts.last().copied().unwrap_or(0),
            i.server_errors,
            i.requests
        )),
        None => Verdict::Hold("no fan calls in the interval".into()),
    }
}

/// The rate after `verdict`, from `rate`, within `[min_rate, max_rate]`.
pub fn next_rate(cfg: &ClosedLoop, rate: f64, verdict: &Verdict) -> f64 {
    let next = match verdict {
        Verdict::Overloaded(_) => rate * cfg.decrease,
        Verdict::Healthy(_) => rate + ((cfg.max_rate - cfg.min_rate) / 10.0).max(0.1),
        Verdict::Hold(_) => rate,
    };
    // Rounded to thousandths: the audit trail reads 1.421, not 1.4209999999999998.
    ((next * 1000.0).round() / 1000.0).clamp(cfg.min_rate, cfg.max_rate)
}

/// The previous reads of every node, to take differences from.
#[derive(Debug, Default)]
pub struct Baselines {
    last: HashMap<String, LoadDoc>,
}

impl Baselines {
    /// Merges the differences between `reads` (one per URL, `None` = could not be read) and
    /// the previous reads; `Err(why)` when the interval cannot be judged (a node missing, or
    /// one without a baseline yet). Every read becomes the next baseline either way.
    pub fn merge(&mut self, reads: Vec<(String, Option<LoadDoc>)>) -> Result<Interval, String> {
        let mut out = Interval::default();
        let mut why = None;
        for (url, read) in reads {
            let Some(doc) = read else {
                why.get_or_insert(format!("no figures from {url}"));
                self.last.remove(&url);
                continue;
            };
            match self.last.get(&url) {
                Some(prev)
                    if prev.node == doc.node
                        && prev.hold_bounds_ms == doc.hold_bounds_ms
                        && prev.hold_counts.len() == doc.hold_counts.len() =>
                {
                    if out.bounds_ms.is_empty() {
                        out.bounds_ms = doc.hold_bounds_ms.clone();
                        out.hold_counts = vec![0; doc.hold_counts.len()];
                    }
                    if out.bounds_ms == doc.hold_bounds_ms {
                        for (sum, (now, then)) in out
                            .hold_counts
                            .iter_mut()
                            .zip(doc.hold_counts.iter().zip(&prev.hold_counts))
                        {
                            *sum += now.saturating_sub(*then);
                        }
                    } else {
                        why.get_or_insert(format!("{url} uses other buckets"));
                    }
                    if doc.hold_running_counts.len() == out.bounds_ms.len()
                        && out.bounds_ms == doc.hold_bounds_ms
                    {
                        out.running_counts.resize(out.bounds_ms.len(), 0);
                        for (sum, r) in out.running_counts.iter_mut().zip(&doc.hold_running_counts)
                        {
                            *sum += r;
                        }
                    }
                    out.requests += doc.requests.saturating_sub(prev.requests);
                    out.server_errors += doc.server_errors.saturating_sub(prev.server_errors);
                }
                _ => {
                    why.get_or_insert(format!("first figures from {url} (or it restarted)"));
                }
            }
            self.last.insert(url, doc);
        }
        match why {
            Some(w) => Err(w),
            None => Ok(out),
        }
    }
}

/// The operator name of the loop's audit entries.
pub const OPERATOR: &str = "closed-loop";

/// One event's loop as the runner sees it.
#[derive(Debug, Clone)]
pub struct EventLoop {
    /// The event.
    pub event: EventId,
    /// Its settings.
    pub cfg: ClosedLoop,
    /// Where its figures are read (`load_urls`, else the event's booking URL).
    pub urls: Vec<String>,
}

/// Reads one node's figures (2 s timeout); `None` on any failure.
pub(crate) async fn read(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
) -> Option<LoadDoc> {
    let mut req = http
        .get(format!("{}/internal/load", url.trim_end_matches('/')))
        .timeout(Duration::from_secs(2));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    resp.json().await.ok()
}

/// One step of `lp`: reads every node, judges, and when the rate changes sets it in the store;
/// sets the stock rule ([`stock_wait`]); returns the audit entries it appended (`at` = `now_s`,
/// epoch seconds).
///
/// # Errors
/// The store's, when reading the event or setting the rate fails.
pub async fn step(
    store: &dyn QueueStore,
    http: &reqwest::Client,
    token: Option<&str>,
    lp: &EventLoop,
    baselines: &mut Baselines,
    now_s: i64,
) -> crate::store::StoreResult<Vec<AuditEntry>> {
    let reads = futures::future::join_all(
        lp.urls
            .iter()
            .map(|u| async move { (u.clone(), read(http, u, token).await) }),
    )
    .await;
    // Every node reads the same database: the first answer's stock is the show's.
    let stock = reads
        .iter()
        .find_map(|(_, d)| d.as_ref())
        .and_then(|d| d.shows.iter().find(|s| s.show == lp.event.as_str()))
        .map(|s| (s.free, s.held));
    let verdict = match baselines.merge(reads) {
        Ok(interval) => judge(&lp.cfg, &interval),
        Err(why) => Verdict::Hold(why),
    };
    let label = match &verdict {
        Verdict::Overloaded(_) => "overloaded",
        Verdict::Healthy(_) => "healthy",
        Verdict::Hold(_) => "hold",
    };
    metrics::counter!("wr_closed_loop_verdicts_total", "event" => lp.event.to_string(), "verdict" => label)
        .increment(1);
    let Some(meta) = store.event(&lp.event).await? else {
        return Ok(Vec::new());
    };
    let mut entries = Vec::new();
    let wait = stock.map_or(meta.stock_wait, |(free, held)| stock_wait(free, held));
    metrics::gauge!("wr_stock_wait_places", "event" => lp.event.to_string()).set(wait as f64);
    if wait != meta.stock_wait {
        store.set_stock_wait(&lp.event, wait).await?;
        let reason = if wait > 0 {
            format!("nothing left to hold; {wait} places in live holds may come back")
        } else {
            "places free again (or none left in holds): admissions resume".to_owned()
        };
        let entry = AuditEntry {
            at: now_s,
            operator: OPERATOR.to_owned(),
            action: "stock_wait".to_owned(),
            old: meta.stock_wait.into(),
            new: serde_json::json!({"in_play": wait, "reason": reason}),
        };
        tracing::info!(event = %lp.event, in_play = wait, "closed loop: stock rule changed");
        store.audit_append(&lp.event, &entry).await?;
        entries.push(entry);
    }
    let rate = next_rate(&lp.cfg, meta.admit_rate, &verdict);
    metrics::gauge!("wr_closed_loop_rate", "event" => lp.event.to_string()).set(rate);
    if (rate - meta.admit_rate).abs() < 1e-9 {
        return Ok(entries);
    }
    store.set_knobs(&lp.event, Some(rate), None).await?;
    let reason = match verdict {
        Verdict::Overloaded(r) | Verdict::Healthy(r) | Verdict::Hold(r) => r,
    };
    let entry = AuditEntry {
        at: now_s,
        operator: OPERATOR.to_owned(),
        action: "auto_admit_rate".to_owned(),
        old: meta.admit_rate.into(),
        new: serde_json::json!({"admit_rate": rate, "reason": reason}),
    };
    tracing::info!(event = %lp.event, old = meta.admit_rate, new = rate, reason = %reason, "closed loop changed the admit rate");
    store.audit_append(&lp.event, &entry).await?;
    entries.push(entry);
    Ok(entries)
}

/// The stock rule (issue "closed loop and report": "when nothing is left but held seats that
/// may come back, the line waits … instead of admitting fans to an empty map"): the places in
/// live holds when nothing can be held, else 0 (free places, or nothing left at all: sold out
/// is the booking core's own notice).
pub fn stock_wait(free: i64, held: i64) -> u64 {
    if free <= 0 && held > 0 {
        u64::try_from(held).unwrap_or(0)
    } else {
        0
    }
}

/// Runs every event's loop until `stop`: each `interval_secs`, on the one node that holds the
/// event's closed-loop lock (owner token, TTL 3 intervals), [`step`]. Locks are released on
/// stop.
pub async fn run(
    store: Arc<dyn QueueStore>,
    loops: Vec<EventLoop>,
    token: Option<String>,
    clock: sale_common::SharedClock,
    mut stop: watch::Receiver<bool>,
) {
    if loops.is_empty() {
        return;
    }
    let http = reqwest::Client::new();
    let owner = uuid::Uuid::new_v4().to_string();
    let tick = loops
        .iter()
        .map(|l| l.cfg.interval())
        .min()
        .unwrap_or(Duration::from_secs(5));
    let mut state: Vec<(EventLoop, Baselines, bool, i64)> = loops
        .into_iter()
        .map(|l| (l, Baselines::default(), false, 0))
        .collect();
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => break,
        }
        let now_ms = clock.now_ms();
        for (lp, base, held, last_ms) in &mut state {
            let every_ms = i64::try_from(lp.cfg.interval().as_millis()).unwrap_or(i64::MAX);
            if now_ms - *last_ms < every_ms {
                continue;
            }
            *last_ms = now_ms;
            let key = crate::store::redis::closed_loop_lock_key(&lp.event);
            let ttl = 3 * u64::try_from(every_ms).unwrap_or(u64::MAX / 3);
            let got = if *held {
                store.renew_lock(&key, &owner, ttl).await
            } else {
                store.try_lock(&key, &owner, ttl).await
            };
            let was = *held;
            *held = matches!(got, Ok(true));
            if !*held {
                continue;
            }
            if !was {
                // A fresh holder has no baseline: its first read only sets one.
                *base = Baselines::default();
            }
            if let Err(e) = step(
                store.as_ref(),
                &http,
                token.as_deref(),
                lp,
                base,
                now_ms / 1000,
            )
            .await
            {
                tracing::warn!(event = %lp.event, error = %e, "closed loop step failed");
            }
        }
    }
    for (lp, _, held, _) in state {
        if held {
            let _ = store
                .release_lock(
                    &crate::store::redis::closed_loop_lock_key(&lp.event),
                    &owner,
                )
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> ClosedLoop {
        serde_json::from_value(serde_json::json!({"min_rate": 2.0, "max_rate": 52.0}))
            .expect("defaults")
    }

    fn doc(node: &str, counts: [u64; 4], requests: u64, errors: u64) -> LoadDoc {
        LoadDoc {
            node: node.into(),
            hold_bounds_ms: vec![Some(100), Some(500), Some(1000), None],
            hold_counts: counts.to_vec(),
            hold_running_counts: Vec::new(),
            requests,
            server_errors: errors,
            pool: PoolFigures {
                size: 4,
                idle: 2,
                max: 8,
            },
            shows: Vec::new(),
        }
    }

    #[test]
    fn buckets_are_summed_across_nodes_before_the_p99_is_read() {
        let mut b = Baselines::default();
        let first = b.merge(vec![
            ("a".into(), Some(doc("A", [0, 0, 0, 0], 0, 0))),
            ("b".into(), Some(doc("B", [0, 0, 0, 0], 0, 0))),
        ]);
        assert!(first.is_err(), "no baseline yet: hold");
        // Node a: 98 fast holds; node b: 2 slow ones. Averaging per-node p99s would say
        // (100 + 1000) / 2 = 550; merged, 99 of 100 are within 100 ms.
        let i = b
            .merge(vec![
                ("a".into(), Some(doc("A", [98, 98, 98, 98], 98, 0))),
                ("b".into(), Some(doc("B", [0, 0, 2, 2], 2, 0))),
            ])
            .expect("merged");
        assert_eq!(i.hold_counts, vec![98, 98, 100, 100]);
        assert_eq!(i.hold_p99_bound(20), Some(Some(1000)));
        assert!(matches!(judge(&cfg(), &i), Verdict::Overloaded(_)));
        let i = b
            .merge(vec![
                ("a".into(), Some(doc("A", [296, 296, 296, 296], 296, 0))),
                ("b".into(), Some(doc("B", [0, 0, 2, 2], 4, 0))),
            ])
            .expect("merged");
        assert_eq!(i.hold_p99_bound(20), Some(Some(100)));
        assert!(matches!(judge(&cfg(), &i), Verdict::Healthy(_)));
    }

    #[test]
    fn a_missing_or_restarted_node_holds_the_rate() {
        let mut b = Baselines::default();
        let _ = b.merge(vec![("a".into(), Some(doc("A", [0; 4], 0, 0)))]);
        assert!(b.merge(vec![("a".into(), None)]).is_err());
        let _ = b.merge(vec![("a".into(), Some(doc("A", [5; 4], 5, 0)))]);
        let restarted = b.merge(vec![("a".into(), Some(doc("A2", [1; 4], 1, 0)))]);
        assert!(restarted.is_err(), "{restarted:?}");
    }

    #[test]
    fn a_stalled_booking_core_is_not_read_as_healthy() {
        let c = cfg();
        let bounds = vec![Some(100), Some(500), Some(1000), None];
        // Three quick holds finished; fans' other calls answered: healthy by those alone.
        let quick = Interval {
            bounds_ms: bounds.clone(),
            hold_counts: vec![3, 3, 3, 3],
            requests: 400,
            ..Interval::default()
        };
        assert!(matches!(judge(&c, &quick), Verdict::Healthy(_)));
        // The same, with 4 holds running for over 1 s: too few for a p99, so held, not raised.
        let stalled = Interval {
            running_counts: vec![0, 0, 0, 4],
            ..quick.clone()
        };
        let v = judge(&c, &stalled);
        assert!(
            matches!(&v, Verdict::Hold(r) if r.contains("4 still running, one for over 1000 ms")),
            "{v:?}"
        );
        assert_eq!(next_rate(&c, 10.0, &v), 10.0);
        // Running holds younger than the threshold say nothing against the rate.
        let young = Interval {
            running_counts: vec![2, 4, 4, 4],
            ..quick.clone()
        };
        assert!(matches!(judge(&c, &young), Verdict::Healthy(_)));
        // Enough of them for a p99: they count at their age, and the rate is cut.
        let piled = Interval {
            running_counts: vec![0, 0, 30, 30],
            ..quick
        };
        assert_eq!(piled.hold_p99_bound(c.min_samples), Some(Some(1000)));
        assert!(
            matches!(judge(&c, &piled), Verdict::Overloaded(r) if r.contains("30 holds still running"))
        );
    }

    #[test]
    fn running_holds_are_summed_across_nodes() {
        let mut b = Baselines::default();
        let with_running = |node: &str, counts, running: [u64; 4]| LoadDoc {
            hold_running_counts: running.to_vec(),
            ..doc(node, counts, 10, 0)
        };
        let _ = b.merge(vec![
            ("a".into(), Some(with_running("A", [0; 4], [0; 4]))),
            ("b".into(), Some(doc("B", [0; 4], 0, 0))),
        ]);
        let i = b
            .merge(vec![
                ("a".into(), Some(with_running("A", [1; 4], [0, 1, 2, 2]))),
                ("b".into(), Some(with_running("B", [1; 4], [0, 0, 0, 3]))),
            ])
            .expect("merged");
        assert_eq!(i.running_counts, vec![0, 1, 2, 5]);
        assert_eq!(i.oldest_running(), Some((5, 1000)));
        // A node that sends no running holds (an older booking core) adds none.
        let i = b
            .merge(vec![
                ("a".into(), Some(doc("A", [2; 4], 20, 0))),
                ("b".into(), Some(with_running("B", [2; 4], [1, 1, 1, 1]))),
            ])
            .expect("merged");
        assert_eq!(i.running_counts, vec![1, 1, 1, 1]);
    }

    #[test]
    fn errors_lower_the_rate_too() {
        let c = cfg();
        let busy = Interval {
            requests: 1000,
            server_errors: 50,
            ..Interval::default()
        };
        assert!(matches!(judge(&c, &busy), Verdict::Overloaded(r) if r.contains("5xx")));
        assert!(matches!(judge(&c, &Interval::default()), Verdict::Hold(_)));
    }

    #[test]
    fn the_line_waits_only_while_every_place_left_is_in_a_live_hold() {
        assert_eq!(stock_wait(0, 12), 12);
        assert_eq!(stock_wait(1, 12), 0, "a free place: admit");
        assert_eq!(
            stock_wait(0, 0),
            0,
            "sold out: the booking core says so itself"
        );
    }

    #[test]
    fn the_rate_stays_between_min_and_max() {
        let c = cfg();
        let down = Verdict::Overloaded(String::new());
        let up = Verdict::Healthy(String::new());
        assert_eq!(next_rate(&c, 10.0, &down), 7.0);
        assert_eq!(next_rate(&c, 2.5, &down), 2.0);
        assert_eq!(next_rate(&c, 10.0, &up), 15.0);
        assert_eq!(next_rate(&c, 50.0, &up), 52.0);
        assert_eq!(next_rate(&c, 10.0, &Verdict::Hold(String::new())), 10.0);
    }
}
