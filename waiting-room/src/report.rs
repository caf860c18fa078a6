//! The sale's report (issue "closed loop and report", item 2): per event, per minute, the
//! queue's length, admissions against the target, time in queue, abandonment, no-shows, the
//! booking core's holds, bookings, hold p99 and errors, with totals; as JSON, CSV and a PNG of
//! stacked charts (`GET /admin/events/{id}/report[.csv|.png]`, API.md "Sale report").
//!
//! How it is made: every `report_sample_secs` the one node holding the event's report lock
//! (owner token, like the admitter's) reads the event's figures from the store and, when the
//! event's booking core answers `/internal/load`, the booking core's figures since the last
//! sample, and appends one [`ReportSample`] to the store; any node builds the report from the
//! samples. The waiting room's figures are the store's cumulative counts (the same values as
//! the `wr_admitted_total`, `wr_skipped_places_total`, `wr_sessions_ended_total` and
//! `wr_last_number` gauges), so minutes add up to the totals exactly; the booking core's are
//! differences of its cumulative counters, node by node (a node seen for the first time or
//! restarted counts everything since its start; an unread node's counts are taken at its next
//! read), so they add up to its own counters too. The booking core's hold and error figures are
//! the node's, every show together; its stock (bookings) is the event's show.
//!
//! Definitions: **abandoned** = places the cursor skipped (fans who stopped polling before
//! their turn); **no-shows** = admissions that ran out without the booking core ending them
//! (neither paid nor released), live ones excluded; **time in queue** = from a number being
//! handed out to the cursor passing it, read off the two cumulative curves (numbers are
//! FIFO), so its resolution is one sample; **conversion** = bookings ÷ admissions.

use crate::domain::{BookingSample, EventId, EventState, Figures, ReportSample};
use crate::store::QueueStore;
use sale_common::load::LoadDoc;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// One sample of `f` taken at `at_ms` (epoch ms).
pub fn sample(f: &Figures, at_ms: i64, booking: Option<BookingSample>) -> ReportSample {
    ReportSample {
        at_ms,
        state: f.meta.state,
        last_number: f.last_number,
        cursor: f.cursor,
        prequeued: f.prequeued,
        active: f.active,
        admitted_total: f.admitted_total,
        skipped_total: f.skipped_total,
        ended_total: f.ended_total,
        admit_rate: f.meta.admit_rate,
        max_active: f.meta.max_active,
        stock_wait: f.meta.stock_wait,
        booking,
    }
}

/// The previous `/internal/load` read of every booking-core URL, to take differences from.
#[derive(Debug, Default)]
pub struct BookingReads {
    last: HashMap<String, LoadDoc>,
}

impl BookingReads {
    /// The booking core's figures since the previous call, every read node summed, for
    /// `show`; `None` when no node could be read. A node read for the first time, or with a new
    /// node id (restarted), counts from zero; a node not read keeps its baseline, so its counts
    /// land in a later sample instead of being lost.
    pub fn diff(
        &mut self,
        reads: Vec<(String, Option<LoadDoc>)>,
        show: &str,
    ) -> Option<BookingSample> {
        let mut out: Option<BookingSample> = None;
        for (url, doc) in reads {
            let Some(doc) = doc else { continue };
            let prev = self
                .last
                .get(&url)
                .filter(|p| p.node == doc.node && p.hold_counts.len() == doc.hold_counts.len());
            let since = |now: u64, then: Option<u64>| now.saturating_sub(then.unwrap_or(0));
            let o = out.get_or_insert_with(|| BookingSample {
                bounds_ms: doc.hold_bounds_ms.clone(),
                hold_counts: vec![0; doc.hold_counts.len()],
                ..BookingSample::default()
            });
            if o.bounds_ms == doc.hold_bounds_ms {
                for (i, sum) in o.hold_counts.iter_mut().enumerate() {
                    let then = prev.and_then(|p| p.hold_counts.get(i).copied());
                    *sum += since(doc.hold_counts.get(i).copied().unwrap_or(0), then);
                }
            }
            o.requests += since(doc.requests, prev.map(|p| p.requests));
            o.server_errors += since(doc.server_errors, prev.map(|p| p.server_errors));
            // Every node reads the same database: the last answer's stock is the show's.
            if let Some(s) = doc.shows.iter().find(|s| s.show == show) {
                (o.sold, o.held, o.free, o.bookings) = (s.sold, s.held, s.free, s.bookings);
                o.ended = s.ended;
            }
            self.last.insert(url, doc);
        }
        out
    }
}

/// One minute of the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Minute {
    /// The minute's start, epoch **milliseconds**.
    pub minute_ms: i64,
    /// The event's state at the minute's last sample.
    pub state: String,
    /// Fans holding a number and not yet let in, at the minute's last sample.
    pub queue_length: u64,
    /// Fans in the pre-queue then.
    pub prequeued: u64,
    /// Admissions granted in the minute.
    pub admitted: u64,
    /// Admissions the admit rate aimed at in the minute (rate × seconds open).
    pub target: f64,
    /// The admit rate at the minute's last sample, fans per **second**.
    pub admit_rate: f64,
    /// Places skipped in the minute (fans who left the line).
    pub abandoned: u64,
    /// Sessions the booking core ended in the minute (paid, released, left).
    pub sessions_ended: u64,
    /// Hold requests the booking core answered in the minute.
    pub holds: u64,
    /// Their p99 as its bucket's upper bound, ms; `None` with no holds. A p99 past the largest
    /// bucket reads as that bucket's bound.
    pub hold_p99_ms: Option<u64>,
    /// The worst p99 of one sampling interval (`report_sample_secs`) in the minute, ms: a few
    /// slow seconds that the minute's p99 averages away (what the closed loop reacts to).
    pub hold_p99_worst_ms: Option<u64>,
    /// Bookings (paid holds, whatever their size) made in the minute.
    pub bookings: i64,
    /// Seats and places sold in the minute.
    pub places_sold: i64,
    /// Fan calls the booking core answered in the minute.
    pub requests: u64,
    /// Of them, 5xx.
    pub server_errors: u64,
}

/// The report's totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Totals {
    /// Fans who joined: numbers handed out plus fans still in the pre-queue.
    pub joined: u64,
    /// Admissions granted (= `wr_admitted_total`).
    pub admitted: u64,
    /// Places skipped (= `wr_skipped_places_total`).
    pub abandoned: u64,
    /// Sessions ended by the booking core (= `wr_sessions_ended_total`).
    pub sessions_ended: u64,
    /// Admissions that ran out unused: admitted − ended − still live.
    pub no_shows: u64,
    /// Time in queue, median and 90th percentile, **seconds** (one sample's resolution);
    /// `None` before anyone was let in.
    pub time_in_queue_p50_secs: Option<f64>,
    /// See `time_in_queue_p50_secs`.
    pub time_in_queue_p90_secs: Option<f64>,
    /// Hold requests the booking core answered while sampled.
    pub holds: u64,
    /// Bookings of the show (paid holds, whatever their size; = `bc_bookings_total{show}`
    /// when none was cancelled).
    pub bookings: i64,
    /// Seats and places of the show sold.
    pub places_sold: i64,
    /// Holds of the show that lapsed (released by the booking core's reconciler, or past their
    /// deadline and not swept yet): "the customer walked away" (seed 001).
    pub holds_expired: i64,
    /// Holds the fan (or an operator) let go: "the customer said no".
    pub holds_released: i64,
    /// Holds that ended because their payment failed.
    pub holds_failed: i64,
    /// bookings ÷ admitted (at most 1 when each admission books once); `None` before any
    /// admission.
    pub conversion: Option<f64>,
    /// Fan calls the booking core answered while sampled.
    pub requests: u64,
    /// Of them, 5xx.
    pub server_errors: u64,
}

/// An event's sale report (JSON of `GET /admin/events/{id}/report`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Report {
    /// The event.
    pub event: String,
    /// When the report was built, epoch **milliseconds**.
    pub generated_at_ms: i64,
    /// Samples it was built from.
    pub samples: usize,
    /// First and last sample, epoch **milliseconds** (`None` without samples).
    pub from_ms: Option<i64>,
    /// See `from_ms`.
    pub to_ms: Option<i64>,
    /// Minute by minute, oldest first (minutes without a sample are left out).
    pub minutes: Vec<Minute>,
    /// The whole sale so far.
    pub totals: Totals,
}

/// The p99 of cumulative bucket `counts` with `bounds` (ms, `None` = +Inf) as the bucket's
/// bound; `None` without counts.
fn p99_bound(bounds: &[Option<u64>], counts: &[u64]) -> Option<u64> {
    let total = *counts.last()?;
    if total == 0 {
        return None;
    }
    let want = (total as f64 * 0.99).ceil() as u64;
    let i = counts.iter().position(|&c| c >= want)?;
    let largest = bounds.iter().flatten().max().copied();
    bounds.get(i).copied().flatten().or(largest)
}

/// Nearest-rank percentile `q` (0–1) of sorted `v`.
fn percentile(v: &[f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Times in queue, seconds, of (at most about 20,000 evenly spread) numbers the cursor
/// passed: for number `n`, the first sample where `last_number ≥ n` to the first where
/// `cursor ≥ n`.
fn times_in_queue(samples: &[ReportSample]) -> Vec<f64> {
    let Some(last) = samples.last() else {
        return Vec::new();
    };
    let passed = last.cursor.min(last.last_number);
    let step = (passed / 20_000).max(1);
    let first_at = |n: u64, of: fn(&ReportSample) -> u64| {
        let i = samples.partition_point(|s| of(s) < n);
        samples.get(i).map(|s| s.at_ms)
    };
    let mut out: Vec<f64> = (1..=passed)
        .step_by(step as usize)
        .filter_map(|n| {
            let joined = first_at(n, |s| s.last_number)?;
            let let_in = first_at(n, |s| s.cursor)?;
            Some((let_in - joined).max(0) as f64 / 1000.0)
        })
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

/// Builds `event`'s report from its samples (oldest first) at `now_ms`. Samples whose
/// cumulative figures went down (a store emptied and refilled) start a new baseline.
pub fn build(event: &EventId, samples: &[ReportSample], now_ms: i64) -> Report {
    // The cumulative curves must not go down for the FIFO reading; keep them monotone.
    let mut mono: Vec<ReportSample> = Vec::with_capacity(samples.len());
    for s in samples {
        let mut s = s.clone();
        if let Some(p) = mono.last() {
            s.last_number = s.last_number.max(p.last_number);
            s.cursor = s.cursor.max(p.cursor);
        }
        mono.push(s);
    }
    // Per minute start: the row, and its merged hold buckets (counts, bounds).
    type Buckets = (Vec<u64>, Vec<Option<u64>>);
    let mut minutes: BTreeMap<i64, (Minute, Buckets)> = BTreeMap::new();
    let mut totals = Totals::default();
    let mut prev: Option<&ReportSample> = None;
    let (mut last_sold, mut last_bookings) = (0i64, 0i64);
    for s in samples {
        let since =
            |now: u64, then: fn(&ReportSample) -> u64| now.saturating_sub(prev.map_or(0, then));
        let minute_ms = s.at_ms.div_euclid(60_000) * 60_000;
        let (m, (counts, bounds)) = minutes.entry(minute_ms).or_default();
        m.minute_ms = minute_ms;
        m.state = s.state.as_str().to_owned();
        m.queue_length = s.last_number.saturating_sub(s.cursor);
        m.prequeued = s.prequeued;
        m.admit_rate = s.admit_rate;
        m.admitted += since(s.admitted_total, |p| p.admitted_total);
        m.abandoned += since(s.skipped_total, |p| p.skipped_total);
        m.sessions_ended += since(s.ended_total, |p| p.ended_total);
        if let Some(p) = prev {
            if s.state == EventState::Open && s.stock_wait == 0 {
                m.target += s.admit_rate * (s.at_ms - p.at_ms).max(0) as f64 / 1000.0;
            }
        }
        if let Some(b) = &s.booking {
            let holds = b.hold_counts.last().copied().unwrap_or(0);
            if let Some(p99) = p99_bound(&b.bounds_ms, &b.hold_counts) {
                m.hold_p99_worst_ms = Some(m.hold_p99_worst_ms.map_or(p99, |w| w.max(p99)));
            }
            m.holds += holds;
            totals.holds += holds;
            if counts.is_empty() {
                (*counts, *bounds) = (vec![0; b.hold_counts.len()], b.bounds_ms.clone());
            }
            if *bounds == b.bounds_ms {
                for (sum, c) in counts.iter_mut().zip(&b.hold_counts) {
                    *sum += c;
                }
            }
            m.requests += b.requests;
            m.server_errors += b.server_errors;
            totals.requests += b.requests;
            totals.server_errors += b.server_errors;
            m.places_sold += (b.sold - last_sold).max(0);
            m.bookings += (b.bookings - last_bookings).max(0);
            (last_sold, last_bookings) = (b.sold, b.bookings);
            (totals.places_sold, totals.bookings) = (b.sold, b.bookings);
            (
                totals.holds_expired,
                totals.holds_released,
                totals.holds_failed,
            ) = (b.ended.expired, b.ended.released, b.ended.failed);
        }
        prev = Some(s);
    }
    let minutes: Vec<Minute> = minutes
        .into_values()
        .map(|(mut m, (counts, bounds))| {
            m.hold_p99_ms = p99_bound(&bounds, &counts);
            m.target = (m.target * 1000.0).round() / 1000.0;
            m
        })
        .collect();
    if let Some(last) = samples.last() {
        totals.joined = last.last_number + last.prequeued;
        totals.admitted = last.admitted_total;
        totals.abandoned = last.skipped_total;
        totals.sessions_ended = last.ended_total;
        totals.no_shows = last
            .admitted_total
            .saturating_sub(last.ended_total)
            .saturating_sub(last.active);
    }
    let waits = times_in_queue(&mono);
    totals.time_in_queue_p50_secs = percentile(&waits, 0.5);
    totals.time_in_queue_p90_secs = percentile(&waits, 0.9);
    totals.conversion = (totals.admitted > 0).then(|| {
        (totals.bookings.max(0) as f64 / totals.admitted as f64 * 1000.0).round() / 1000.0
    });
    Report {
        event: event.to_string(),
        generated_at_ms: now_ms,
        samples: samples.len(),
        from_ms: samples.first().map(|s| s.at_ms),
        to_ms: samples.last().map(|s| s.at_ms),
        minutes,
        totals,
    }
}

/// The report's minutes as CSV (RFC 4180, a header line, `\r\n` line ends; an empty p99 cell
/// when there were no holds), then the totals as `total,<name>,<value>` lines.
pub fn csv(r: &Report) -> String {
    let mut out = String::from(
        "minute_utc,minute_ms,state,queue_length,prequeued,admitted,target,admit_rate,abandoned,\
         sessions_ended,holds,hold_p99_ms,hold_p99_worst_ms,bookings,places_sold,requests,\
         server_errors\r\n",
    );
    for m in &r.minutes {
        let utc = chrono_free_utc(m.minute_ms);
        out.push_str(&format!(
            "{utc},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n",
            m.minute_ms,
            m.state,
            m.queue_length,
            m.prequeued,
            m.admitted,
            m.target,
            m.admit_rate,
            m.abandoned,
            m.sessions_ended,
            m.holds,
            m.hold_p99_ms.map(|v| v.to_string()).unwrap_or_default(),
            m.hold_p99_worst_ms
                .map(|v| v.to_string())
                .unwrap_or_default(),
            m.bookings,
            m.places_sold,
            m.requests,
            m.server_errors
        ));
    }
    let t = &r.totals;
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for (name, value) in [
        ("joined", t.joined.to_string()),
        ("admitted", t.admitted.to_string()),
        ("abandoned", t.abandoned.to_string()),
        ("sessions_ended", t.sessions_ended.to_string()),
        ("no_shows", t.no_shows.to_string()),
        ("time_in_queue_p50_secs", opt(t.time_in_queue_p50_secs)),
        ("time_in_queue_p90_secs", opt(t.time_in_queue_p90_secs)),
        ("holds", t.holds.to_string()),
        ("bookings", t.bookings.to_string()),
        ("places_sold", t.places_sold.to_string()),
        ("holds_expired", t.holds_expired.to_string()),
        ("holds_released", t.holds_released.to_string()),
        ("holds_failed", t.holds_failed.to_string()),
        ("conversion", opt(t.conversion)),
        ("requests", t.requests.to_string()),
        ("server_errors", t.server_errors.to_string()),
    ] {
        out.push_str(&format!("total,{name},{value}\r\n"));
    }
    out
}

/// `YYYY-MM-DDTHH:MMZ` of an epoch-ms minute (civil-from-days, H. Hinnant's algorithm).
fn chrono_free_utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The report as a PNG: five stacked charts over minutes since the first sample: the queue,
/// admissions per minute against the target, the admit rate (the closed loop's curve) right
/// above the booking core's hold p99, and holds, bookings and 5xx per minute. The queue, the
/// rate and the p99 are drawn sample by sample (`samples`, the report's own), the rest per
/// minute (at the minute's middle).
///
/// Errors: drawing fails.
pub fn png(r: &Report, samples: &[ReportSample]) -> anyhow::Result<Vec<u8>> {
    use sale_common::plots::{charts_png, Line, Panel};
    let t0 = samples.first().map_or(0, |s| s.at_ms);
    let at = |ms: i64| (ms - t0).max(0) as f64 / 60_000.0;
    let per_sample = |name: &str, y: &dyn Fn(&ReportSample) -> Option<f64>| -> Line {
        let pts = samples.iter().filter_map(|s| Some((at(s.at_ms), y(s)?)));
        (name.to_owned(), pts.collect())
    };
    let per_minute = |name: &str, y: &dyn Fn(&Minute) -> f64| -> Line {
        let pts = r.minutes.iter().map(|m| (at(m.minute_ms + 30_000), y(m)));
        (name.to_owned(), pts.collect())
    };
    let queue = [
        per_sample("waiting", &|s| {
            Some(s.last_number.saturating_sub(s.cursor) as f64)
        }),
        per_sample("pre-queue", &|s| Some(s.prequeued as f64)),
    ];
    let admissions = [
        per_minute("admitted", &|m| m.admitted as f64),
        per_minute("target", &|m| m.target),
    ];
    let rate = [per_sample("admit rate", &|s| Some(s.admit_rate))];
    let p99 = [per_sample("hold p99", &|s| {
        let b = s.booking.as_ref()?;
        p99_bound(&b.bounds_ms, &b.hold_counts).map(|v| v as f64)
    })];
    let booking = [
        per_minute("holds", &|m| m.holds as f64),
        per_minute("bookings", &|m| m.bookings as f64),
        per_minute("5xx", &|m| m.server_errors as f64),
    ];
    let title = format!("Queue of {} (fans)", r.event);
    charts_png(
        "minutes since the first sample",
        &[
            Panel {
                title: &title,
                y_label: "fans",
                lines: &queue,
            },
            Panel {
                title: "Admissions per minute",
                y_label: "fans per minute",
                lines: &admissions,
            },
            Panel {
                title: "Admit rate",
                y_label: "fans per second",
                lines: &rate,
            },
            Panel {
                title: "Booking core hold p99",
                y_label: "ms",
                lines: &p99,
            },
            Panel {
                title: "Booking core per minute",
                y_label: "per minute",
                lines: &booking,
            },
        ],
    )
}

/// The owner-token lock of an event's report sampler.
pub fn lock_key(event: &EventId) -> String {
    crate::store::redis::report_lock_key(event)
}

/// Where each configured event's booking-core figures are read: its closed loop's `load_urls`
/// when set, else its `booking_url`; an event not in it (created through the admin API) is read
/// at its own `booking_url`.
pub type LoadUrls = HashMap<EventId, Vec<String>>;

/// Samples every event every `every` until `stop`, on the one node holding each event's
/// report lock (TTL 3 × `every`); locks are released on stop. An event's booking core is read
/// only with a service token (its `/internal/load` needs one).
pub async fn run(
    store: Arc<dyn QueueStore>,
    urls: LoadUrls,
    token: Option<String>,
    silence_ms: u64,
    every: Duration,
    clock: sale_common::SharedClock,
    mut stop: watch::Receiver<bool>,
) {
    let http = reqwest::Client::new();
    let owner = uuid::Uuid::new_v4().to_string();
    let ttl = u64::try_from(every.as_millis()).unwrap_or(u64::MAX / 3) * 3;
    let mut held: HashMap<EventId, BookingReads> = HashMap::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        let Ok(events) = store.list_events().await else {
            continue;
        };
        for event in events {
            let key = lock_key(&event);
            let got = if held.contains_key(&event) {
                store.renew_lock(&key, &owner, ttl).await
            } else {
                store.try_lock(&key, &owner, ttl).await
            };
            if !matches!(got, Ok(true)) {
                held.remove(&event);
                continue;
            }
            let reads = held.entry(event.clone()).or_default();
            let now_ms = clock.now_ms();
            let Ok(Some(f)) = store.figures(&event, now_ms, silence_ms).await else {
                continue;
            };
            // An event created through the admin API is read at its own booking URL.
            let list: Vec<String> = urls
                .get(&event)
                .cloned()
                .unwrap_or_else(|| vec![f.meta.booking_url.clone()])
                .into_iter()
                .filter(|u| !u.is_empty())
                .collect();
            let booking = match (&token, list.is_empty()) {
                (Some(t), false) => {
                    let http = &http;
                    let docs = futures::future::join_all(list.iter().map(|u| async move {
                        (u.clone(), crate::closedloop::read(http, u, Some(t)).await)
                    }))
                    .await;
                    reads.diff(docs, event.as_str())
                }
                _ => None,
            };
            if let Err(e) = store
                .report_append(&event, &sample(&f, now_ms, booking))
                .await
            {
                tracing::warn!(event = %event, error = %e, "report sample not stored");
            }
        }
    }
    for event in held.keys() {
        let _ = store.release_lock(&lock_key(event), &owner).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sale_common::load::{PoolFigures, ShowStock};

    fn at(i: i64, last_number: u64, cursor: u64, admitted: u64) -> ReportSample {
        ReportSample {
            at_ms: 1_800_000_000_000 + i * 10_000,
            state: EventState::Open,
            last_number,
            cursor,
            prequeued: 0,
            active: 0,
            admitted_total: admitted,
            skipped_total: 0,
            ended_total: 0,
            admit_rate: 1.0,
            max_active: 100,
            stock_wait: 0,
            booking: None,
        }
    }

    #[test]
    fn minutes_add_up_to_the_totals_and_the_target_follows_the_rate() {
        // 12 samples 10 s apart = two minutes; 1 admission per second.
        let samples: Vec<_> = (0..12)
            .map(|i| at(i, 200, 10 * i as u64, 10 * i as u64))
            .collect();
        let r = build(&EventId::parse("e").unwrap(), &samples, 0);
        assert_eq!(r.minutes.len(), 2);
        let admitted: u64 = r.minutes.iter().map(|m| m.admitted).sum();
        assert_eq!(admitted, r.totals.admitted);
        assert_eq!(r.totals.admitted, 110);
        let target: f64 = r.minutes.iter().map(|m| m.target).sum();
        assert!((target - 110.0).abs() < 1e-9, "{target}");
        assert_eq!(r.minutes[1].queue_length, 200 - 110);
    }

    #[test]
    fn time_in_queue_is_read_off_the_fifo_curves() {
        // Number n is handed out at sample n/10 and let in 3 samples (30 s) later.
        let samples: Vec<_> = (0..20)
            .map(|i| at(i, 10 * i as u64, 10 * (i as u64).saturating_sub(3), 0))
            .collect();
        let r = build(&EventId::parse("e").unwrap(), &samples, 0);
        assert_eq!(r.totals.time_in_queue_p50_secs, Some(30.0));
        assert_eq!(r.totals.time_in_queue_p90_secs, Some(30.0));
    }

    fn doc(node: &str, holds: [u64; 3], sold: i64) -> LoadDoc {
        LoadDoc {
            node: node.into(),
            hold_bounds_ms: vec![Some(100), Some(1000), None],
            hold_counts: holds.to_vec(),
            hold_running_counts: Vec::new(),
            requests: holds[2] * 2,
            server_errors: 0,
            pool: PoolFigures {
                size: 1,
                idle: 1,
                max: 1,
            },
            shows: vec![ShowStock {
                show: "e".into(),
                free: 1,
                held: 0,
                sold,
                bookings: sold,
                ended: sale_common::load::HoldEnds {
                    expired: 2,
                    released: 1,
                    failed: 0,
                },
            }],
        }
    }

    #[test]
    fn booking_counts_are_differences_and_a_restart_counts_from_zero() {
        let mut r = BookingReads::default();
        let a = r
            .diff(vec![("u".into(), Some(doc("n1", [5, 9, 10], 3)))], "e")
            .unwrap();
        assert_eq!(
            a.hold_counts,
            vec![5, 9, 10],
            "first read: since the node started"
        );
        let b = r
            .diff(vec![("u".into(), Some(doc("n1", [6, 10, 12], 4)))], "e")
            .unwrap();
        assert_eq!(b.hold_counts, vec![1, 1, 2]);
        assert_eq!(b.sold, 4);
        assert_eq!(
            (b.ended.expired, b.ended.released, b.ended.failed),
            (2, 1, 0),
            "hold ends are the show's, counted apart"
        );
        assert!(r.diff(vec![("u".into(), None)], "e").is_none());
        let c = r
            .diff(vec![("u".into(), Some(doc("n2", [1, 1, 1], 4)))], "e")
            .unwrap();
        assert_eq!(
            c.hold_counts,
            vec![1, 1, 1],
            "a restarted node counts from zero"
        );
        assert_eq!(p99_bound(&a.bounds_ms, &a.hold_counts), Some(1000));
        assert_eq!(p99_bound(&a.bounds_ms, &[0, 0, 0]), None);
        assert_eq!(
            p99_bound(&a.bounds_ms, &[0, 0, 5]),
            Some(1000),
            "+Inf reads as the largest bound"
        );
    }

    #[test]
    fn csv_has_a_row_per_minute_and_the_totals() {
        let samples: Vec<_> = (0..12).map(|i| at(i, 20, i as u64, i as u64)).collect();
        let r = build(&EventId::parse("e").unwrap(), &samples, 0);
        let text = csv(&r);
        let lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines.len(), 1 + 2 + 16);
        assert!(lines[1].starts_with("2027-01-15T08:00Z,"), "{}", lines[1]);
        assert!(text.contains("total,admitted,11\r\n"));
    }
}
