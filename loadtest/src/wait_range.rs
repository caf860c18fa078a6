//! The wait range the waiting page shows, measured against the wait that followed (issue 18
//! item 5: "the share of fans whose wait fell inside the range shown; the goal is 90%").
//!
//! [`shown`] is `static/wait.js` `showWait` in Rust, from the same status document: with
//! `to_go = queue_number − cursor`, the page shows `to_go / high_places_per_sec` to
//! `to_go / low_places_per_sec` seconds, rounded outward to whole seconds (the low end down,
//! the high end up; [`displayed`]); while `active ≥ max_active` it shows only
//! "at least" the first; before opening, with no speed, or on the fan's turn it shows nothing.
//!
//! The rounding is judged as shown, without slack: a fan shown "3 s to 5 s" who waited 5.2 s
//! waited longer than it was told, and one shown "0 s to 0 s" is inside only if its turn came at
//! once. The actual wait is measured to the millisecond, from the fan reading the document the
//! range came from to the fan reading the first document that shows its turn (what the page
//! would show). [`summarize`] also counts the samples whose verdict the rounding decided.
//!
//! An accuracy goal bounds its own slack (DECISIONS "Tests and CI"): a range is tight when
//! its high ≤ [`MAX_SPREAD`] × its low; an "at least" (no high) never is.

use crate::model::{Check, FanOutcome, ShownWait};
use serde_json::{json, Value};

/// The goal: share of fans whose wait fell inside the range shown at joining (issue 18 item 5).
pub const GOAL: f64 = 0.90;
/// Largest honest ratio of a range's high to its low (DECISIONS "Tests and CI").
pub const MAX_SPREAD: f64 = 3.0;

/// JavaScript's `a || b` for numbers: `a` unless it is missing, 0 or NaN.
fn or(a: Option<f64>, b: f64) -> f64 {
    a.filter(|x| *x != 0.0 && !x.is_nan()).unwrap_or(b)
}

/// The range `static/wait.js` `showWait` shows for `to_go` places left, from the status
/// document `doc`; `None` when the page shows no wait. `at_ms`, `minute`: when it was read.
pub fn shown(doc: &Value, to_go: u64, at_ms: u64, minute: u32) -> Option<ShownWait> {
    let w = &doc["wait"];
    let f = |v: &Value| v.as_f64();
    let high = or(
        f(&w["high_places_per_sec"]),
        or(
            f(&w["places_per_sec"]),
            or(f(&doc["admitted_per_sec"]), or(f(&doc["admit_rate"]), 0.0)),
        ),
    );
    let low = or(f(&w["low_places_per_sec"]), high);
    let open = doc["state"] == "open";
    let max_active = doc["max_active"].as_u64().unwrap_or(0);
    let stalled = open && max_active > 0 && doc["active"].as_u64().unwrap_or(0) >= max_active;
    // The page's `!(x > 0)` tests; `or` never gives NaN.
    let moving = high > 0.0 && low > 0.0;
    if !moving || to_go == 0 || !open {
        return None;
    }
    let places = to_go as f64;
    Some(ShownWait {
        at_ms,
        minute,
        low_secs: places / high,
        high_secs: (!stalled).then_some(places / low),
        to_go,
        measured: w["basis"] == "measured",
    })
}

/// A range's ends as the page writes them: whole seconds rounded outward (the low end down, the
/// high end up, never below 0), so the range shown always contains the range computed — a
/// range rounded to the nearest second promised "3 s to 5 s" for 2.6 s to 5.4 s.
pub fn displayed(secs: f64, high_end: bool) -> f64 {
    let s = secs.max(0.0);
    if high_end {
        s.ceil()
    } else {
        s.floor()
    }
}

/// Whether a wait of `actual_ms` falls inside `s`, judged on the page's whole seconds
/// (`displayed = true`) or on the unrounded range.
pub fn inside(s: &ShownWait, actual_ms: u64, displayed_secs: bool) -> bool {
    let r = |x: f64, high_end: bool| {
        if displayed_secs {
            displayed(x, high_end)
        } else {
            x
        }
    };
    let actual = actual_ms as f64 / 1000.0;
    actual >= r(s.low_secs, false) && s.high_secs.is_none_or(|h| actual <= r(h, true))
}

/// Inside over total; `None` with no sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Share {
    /// Samples whose wait fell inside the range shown.
    pub inside: usize,
    /// Samples counted.
    pub total: usize,
}

impl Share {
    /// `inside / total`, `None` with no sample.
    pub fn ratio(&self) -> Option<f64> {
        (self.total > 0).then(|| self.inside as f64 / self.total as f64)
    }

    fn pct(&self) -> String {
        self.ratio()
            .map_or("n/a".into(), |r| format!("{:.1}%", r * 100.0))
    }
}

/// The measurement over every fan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// One sample per fan: the first range it was shown (at joining, or at the first read after
    /// opening for a pre-queued fan).
    pub joining: Share,
    /// The samples taken at each whole minute of a fan's wait.
    pub minutes: Share,
    /// Samples that showed only a lower bound ("at least …").
    pub lower_only: usize,
    /// Samples whose verdict differs between the displayed whole seconds and the unrounded range.
    pub rounding_decided: usize,
    /// Fans shown a range whose turn never came (sold out, closed, deadline): not counted.
    pub no_turn: usize,
    /// Median of actual ÷ low over every sample (1 = the shortest wait shown).
    pub median_over_low: Option<f64>,
    /// Median of actual ÷ high over the samples with a high (1 = the longest wait shown).
    pub median_over_high: Option<f64>,
    /// Samples (joining and minutes) whose high > [`MAX_SPREAD`] × low, "at least" ones included.
    pub too_wide: usize,
    /// Largest high ÷ low among the samples with a high.
    pub max_spread: Option<f64>,
    /// The fans' first ranges judged against when the waiting room's cursor reached them (its
    /// 1-s samples) instead of when the fan saw it: a check on the measurement itself.
    pub by_cursor: Share,
    /// Median time from the cursor reaching a fan (1-s samples) to the fan seeing it, seconds.
    pub turn_lag_secs: Option<f64>,
}

impl Summary {
    /// Samples counted, joining and minutes together.
    pub fn samples(&self) -> usize {
        self.joining.total + self.minutes.total
    }

    /// The report's line.
    pub fn line(&self) -> String {
        let med = |m: Option<f64>| m.map_or("n/a".into(), |x| format!("{x:.2}"));
        format!(
            "wait estimate: {} of fans waited within the range shown at joining ({} fans; {} \
             samples at each minute: {}); spread: median actual/low {}, actual/high {}; {} \
             samples decided by the display's 1-s rounding, {} \"at least\" only, {} fans \
             shown a range never got their turn (not counted); by the waiting room's cursor \
             (1-s samples): {} inside, turns seen a median {} s after the cursor",
            self.joining.pct(),
            self.joining.total,
            self.minutes.total,
            self.minutes.pct(),
            med(self.median_over_low),
            med(self.median_over_high),
            self.rounding_decided,
            self.lower_only,
            self.no_turn,
            self.by_cursor.pct(),
            med(self.turn_lag_secs)
        )
    }

    /// The figures for `summary.json`.
    pub fn figures(&self) -> Value {
        json!({
            "line": self.line(),
            "joining_inside": self.joining.inside, "joining_fans": self.joining.total,
            "joining_share": self.joining.ratio(),
            "minute_inside": self.minutes.inside, "minute_samples": self.minutes.total,
            "minute_share": self.minutes.ratio(),
            "median_actual_over_low": self.median_over_low,
            "median_actual_over_high": self.median_over_high,
            "lower_bound_only": self.lower_only, "rounding_decided": self.rounding_decided,
            "no_turn": self.no_turn, "too_wide": self.too_wide, "max_spread": self.max_spread,
            "by_cursor_inside": self.by_cursor.inside, "by_cursor_fans": self.by_cursor.total,
            "turn_lag_median_secs": self.turn_lag_secs,
        })
    }
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    })
}

/// When the cursor first reached `n` in `cursor` (`(ms since the start, cursor)`, in time
/// order; a cursor that went back, e.g. across a failover, counts at its highest so far).
fn cursor_reached(cursor: &[(u64, u64)], n: u64) -> Option<u64> {
    let mut high = 0;
    cursor.iter().find_map(|&(t, c)| {
        high = high.max(c);
        (high >= n).then_some(t)
    })
}

/// Every fan's shown ranges against its wait: `turn_window_ms.1` (when the fan saw its turn)
/// minus when each range was read; `cursor`: the waiting room's cursor over time
/// (`(ms since the start, cursor)`) for the cross-check.
pub fn summarize(fans: &[FanOutcome], cursor: &[(u64, u64)]) -> Summary {
    let mut s = Summary::default();
    let (mut over_low, mut over_high, mut lag) = (Vec::new(), Vec::new(), Vec::new());
    for f in fans.iter().filter(|f| !f.wait_shown.is_empty()) {
        let Some(turn_ms) = f.turn_window_ms.map(|w| w.1) else {
            s.no_turn += 1;
            continue;
        };
        let reached = f.queue_number.and_then(|n| cursor_reached(cursor, n));
        if let (Some(r), Some(first)) = (reached, f.wait_shown.first()) {
            lag.push(turn_ms.saturating_sub(r) as f64 / 1000.0);
            s.by_cursor.total += 1;
            s.by_cursor.inside += usize::from(inside(first, r.saturating_sub(first.at_ms), true));
        }
        for w in &f.wait_shown {
            let actual = turn_ms.saturating_sub(w.at_ms);
            let ok = inside(w, actual, true);
            let share = if w.minute == 0 {
                &mut s.joining
            } else {
                &mut s.minutes
            };
            share.total += 1;
            share.inside += usize::from(ok);
            s.rounding_decided += usize::from(ok != inside(w, actual, false));
            let secs = actual as f64 / 1000.0;
            if w.low_secs > 0.0 {
                over_low.push(secs / w.low_secs);
            }
            match w.high_secs {
                Some(h) => {
                    over_high.push(secs / h);
                    let spread = h / w.low_secs;
                    s.max_spread = Some(s.max_spread.map_or(spread, |m: f64| m.max(spread)));
                    s.too_wide += usize::from(spread > MAX_SPREAD);
                }
                None => {
                    s.lower_only += 1;
                    s.too_wide += 1;
                }
            }
        }
    }
    s.median_over_low = median(over_low);
    s.median_over_high = median(over_high);
    s.turn_lag_secs = median(lag);
    s
}

/// Every sample, one CSV row each, for the report folder (`wait_samples.csv`): the fan's
/// number, the sample's minute, when it was read and the fan's turn seen (ms since the start),
/// the places to go, the basis, the range (seconds, unrounded) and the verdict as displayed.
pub fn samples_csv(fans: &[FanOutcome]) -> String {
    let mut out = String::from(
        "queue_number,minute,at_ms,turn_ms,to_go,basis,low_secs,high_secs,actual_secs,inside\n",
    );
    for f in fans {
        let turn = f.turn_window_ms.map(|w| w.1);
        for w in &f.wait_shown {
            let actual = turn.map(|t| t.saturating_sub(w.at_ms));
            out.push_str(&format!(
                "{},{},{},{},{},{},{:.3},{},{},{}\n",
                f.queue_number.map_or(String::new(), |n| n.to_string()),
                w.minute,
                w.at_ms,
                turn.map_or(String::new(), |t| t.to_string()),
                w.to_go,
                if w.measured { "measured" } else { "configured" },
                w.low_secs,
                w.high_secs.map_or(String::new(), |h| format!("{h:.3}")),
                actual.map_or(String::new(), |a| format!("{:.3}", a as f64 / 1000.0)),
                actual.map_or(String::new(), |a| inside(w, a, true).to_string()),
            ));
        }
    }
    out
}

/// The two checks. `enforced` (`--profile seed` only): below the goal or with a range wider
/// than [`MAX_SPREAD`] is a FAIL; elsewhere the checks only report (CI runs are too short and
/// too loaded to be a fair test of an estimate).
pub fn checks(s: &Summary, enforced: bool) -> Vec<Check> {
    // Report-only, a check still says whether it met its goal (a newcomer review: "PASS … 26
    // of 151 fans inside" read as met).
    let note = |met: bool| match (enforced, met) {
        (true, _) => "",
        (false, true) => " (report-only: enforced with --profile seed)",
        (false, false) => " (report-only, goal NOT met: enforced with --profile seed)",
    };
    let accurate = s.joining.ratio().is_some_and(|r| r >= GOAL);
    let tight = s.samples() > 0 && s.too_wide == 0;
    vec![
        Check {
            name: "wait estimate inside the shown range ≥ 90%",
            pass: !enforced || accurate,
            detail: format!(
                "{} of {} fans inside the range shown at joining, {} of {} minute samples{}",
                s.joining.inside,
                s.joining.total,
                s.minutes.inside,
                s.minutes.total,
                note(accurate)
            ),
        },
        Check {
            name: "wait range high ≤ 3 × low",
            pass: !enforced || tight,
            detail: format!(
                "{} of {} samples wider ({:.1}%; {} of them \"at least\" only), largest \
                 high/low {}{}",
                s.too_wide,
                s.samples(),
                if s.samples() == 0 {
                    0.0
                } else {
                    100.0 * s.too_wide as f64 / s.samples() as f64
                },
                s.lower_only,
                s.max_spread.map_or("n/a".into(), |m| format!("{m:.2}")),
                note(tight)
            ),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(low: f64, high: f64, active: u64) -> Value {
        json!({"state": "open", "max_active": 100, "active": active, "admit_rate": 50.0,
               "wait": {"low_places_per_sec": low, "high_places_per_sec": high}})
    }

    #[test]
    fn the_page_range_from_the_status_document() {
        let s = shown(&doc(10.0, 20.0, 0), 100, 7, 0).unwrap();
        assert_eq!((s.low_secs, s.high_secs), (5.0, Some(10.0)));
        // Every place taken: only "at least" the shortest wait.
        let s = shown(&doc(10.0, 20.0, 100), 100, 7, 1).unwrap();
        assert_eq!((s.low_secs, s.high_secs, s.minute), (5.0, None, 1));
        // JavaScript's `||`: a 0 speed falls through to the next figure (here the admit rate).
        let s = shown(&doc(0.0, 0.0, 0), 100, 7, 0).unwrap();
        assert_eq!((s.low_secs, s.high_secs), (2.0, Some(2.0)));
        // Nothing shown on the fan's turn, before opening or with no speed at all.
        assert!(shown(&doc(10.0, 20.0, 0), 0, 7, 0).is_none());
        let mut pre = doc(10.0, 20.0, 0);
        pre["state"] = json!("prequeue");
        assert!(shown(&pre, 100, 7, 0).is_none());
        assert!(shown(&json!({"state": "open"}), 100, 7, 0).is_none());
    }

    #[test]
    fn inside_is_judged_on_the_displayed_whole_seconds() {
        let w = ShownWait {
            at_ms: 0,
            minute: 0,
            low_secs: 2.6,
            high_secs: Some(4.4),
            ..Default::default()
        };
        // Shown "2 s to 5 s": rounded outward, the shown range contains the computed one.
        assert!(inside(&w, 2_000, true) && !inside(&w, 2_000, false));
        assert!(!inside(&w, 1_900, true) && !inside(&w, 5_100, true));
        assert!(inside(&w, 2_700, true) && inside(&w, 2_700, false));
        assert!(inside(&w, 4_800, true) && !inside(&w, 4_800, false));
        let at_least = ShownWait {
            high_secs: None,
            ..w
        };
        assert!(inside(&at_least, 600_000, true) && !inside(&at_least, 1_900, true));
    }

    fn fan(shown: &[(u64, u32, f64, Option<f64>)], turn_ms: Option<u64>) -> FanOutcome {
        FanOutcome {
            wait_shown: shown
                .iter()
                .map(|&(at_ms, minute, low_secs, high_secs)| ShownWait {
                    at_ms,
                    minute,
                    low_secs,
                    high_secs,
                    ..Default::default()
                })
                .collect(),
            turn_window_ms: turn_ms.map(|t| (t - 500, t)),
            ..Default::default()
        }
    }

    /// Eight of ten fans inside (80%): the enforced check fails, the report-only one passes
    /// and says the goal was not met.
    #[test]
    fn below_the_goal_fails_only_when_enforced() {
        let mut fans: Vec<FanOutcome> = (0..8)
            .map(|_| fan(&[(1_000, 0, 10.0, Some(20.0))], Some(16_000)))
            .collect();
        fans.push(fan(&[(1_000, 0, 10.0, Some(20.0))], Some(31_000))); // 30 s: too long
        fans.push(fan(&[(1_000, 0, 10.0, Some(20.0))], Some(6_000))); // 5 s: too short
        fans.push(fan(&[(1_000, 0, 10.0, Some(20.0))], None)); // never its turn
        fans.push(FanOutcome::default()); // never shown a range
        let s = summarize(&fans, &[]);
        assert_eq!(
            s.joining,
            Share {
                inside: 8,
                total: 10
            }
        );
        assert_eq!((s.no_turn, s.too_wide, s.lower_only), (1, 0, 0));
        assert_eq!(s.median_over_low, Some(1.5));
        let enforced = checks(&s, true);
        assert!(!enforced[0].pass, "{:?}", enforced[0]);
        assert!(enforced[1].pass, "{:?}", enforced[1]);
        let reported = checks(&s, false);
        assert!(reported.iter().all(|c| c.pass));
        // Report-only, the line still says the goal was missed.
        assert!(
            reported[0].detail.contains("goal NOT met"),
            "{:?}",
            reported[0]
        );
        assert!(!reported[1].detail.contains("NOT"), "{:?}", reported[1]);
        // Nine of ten is the goal.
        fans[8] = fan(&[(1_000, 0, 10.0, Some(20.0))], Some(21_000));
        assert!(checks(&summarize(&fans, &[]), true)[0].pass);
    }

    /// The cross-check: the cursor reached the fan at 12 s (inside "10 s to 20 s" read at 1 s)
    /// and the fan saw it 19 s later, at 31 s (outside): the measurement, not the range, is late.
    #[test]
    fn the_cursor_cross_check_shows_a_late_measurement() {
        let mut f = fan(&[(1_000, 0, 10.0, Some(20.0))], Some(31_000));
        f.queue_number = Some(500);
        let cursor = [(0, 0), (11_000, 450), (12_000, 520), (13_000, 400)];
        assert_eq!(cursor_reached(&cursor, 500), Some(12_000));
        assert_eq!(cursor_reached(&cursor, 521), None);
        let s = summarize(&[f], &cursor);
        assert_eq!(
            s.joining,
            Share {
                inside: 0,
                total: 1
            }
        );
        assert_eq!(
            s.by_cursor,
            Share {
                inside: 1,
                total: 1
            }
        );
        assert_eq!(s.turn_lag_secs, Some(19.0));
    }

    #[test]
    fn minute_samples_and_wide_ranges_are_counted_apart() {
        let fans = [fan(
            &[
                (0, 0, 50.0, Some(160.0)),      // 3.2× wide; 150 s: inside
                (60_000, 1, 20.0, None),        // "at least 20 s"; 90 s: inside, unbounded
                (120_000, 2, 40.0, Some(60.0)), // 30 s: shorter than shown
            ],
            Some(150_000),
        )];
        let s = summarize(&fans, &[]);
        assert_eq!(
            s.joining,
            Share {
                inside: 1,
                total: 1
            }
        );
        assert_eq!(
            s.minutes,
            Share {
                inside: 1,
                total: 2
            }
        );
        assert_eq!((s.too_wide, s.lower_only), (2, 1));
        let c = checks(&s, true);
        assert!(c[0].pass && !c[1].pass, "{c:?}");
        assert!(c[1].detail.starts_with("2 of 3 samples wider"), "{c:?}");
        let csv = samples_csv(&fans);
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 4, "{csv}");
        assert_eq!(
            rows[1],
            ",0,0,150000,0,configured,50.000,160.000,150.000,true"
        );
        assert!(rows[2].ends_with(",20.000,,90.000,true"), "{csv}");
    }
}
