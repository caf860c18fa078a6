//! The rehearsal's fairness and cap checks: admission order equals queue order after opening
//! (Kendall τ over the fans' observed turn windows), the pre-queue shuffle (join order does not
//! predict queue number: |τ| within four standard errors of 0), admissions stopped at the cap
//! (sold out), one hold at a time across tabs, and one answer per idempotency key.

use crate::model::{Check, FanOutcome};
use crate::timeline::Sample;
use rand::Rng;

/// Largest number of pairs compared exactly; beyond it, this many random pairs are sampled.
const MAX_PAIRS: u64 = 4_000_000;

/// Each pair `(i, j)` of `0..n` (all pairs when few, else `MAX_PAIRS` random ones).
fn pairs(n: usize, mut f: impl FnMut(usize, usize)) {
    let all = (n as u64) * (n as u64).saturating_sub(1) / 2;
    if all <= MAX_PAIRS {
        for i in 0..n {
            for j in i + 1..n {
                f(i, j);
            }
        }
    } else {
        let mut rng = rand::thread_rng();
        for _ in 0..MAX_PAIRS {
            let (i, j) = (rng.gen_range(0..n), rng.gen_range(0..n));
            if i != j {
                f(i.min(j), i.max(j));
            }
        }
    }
}

/// Kendall τ-a of two rankings given as `(x, y)` points (pairs tied in either are neither
/// concordant nor discordant). Returns `(τ, concordant, discordant)`.
pub fn kendall(points: &[(f64, f64)]) -> (f64, u64, u64) {
    let (mut c, mut d, mut n) = (0u64, 0u64, 0u64);
    pairs(points.len(), |i, j| {
        n += 1;
        let s = (points[i].0 - points[j].0) * (points[i].1 - points[j].1);
        if s > 0.0 {
            c += 1;
        } else if s < 0.0 {
            d += 1;
        }
    });
    let tau = if n == 0 {
        0.0
    } else {
        (c as f64 - d as f64) / n as f64
    };
    (tau, c, d)
}

/// Standard error of τ under independence for `n` points.
pub fn tau_sigma(n: usize) -> f64 {
    let n = n as f64;
    (2.0 * (2.0 * n + 5.0) / (9.0 * n * (n - 1.0))).sqrt()
}

/// Staleness allowed for a "not yet" status document (max-age 1 s), milliseconds.
const STALE_MS: u64 = 1000;

/// Admission order = queue order: for two fans `a < b` by queue number, with turn windows
/// `[lo, hi]` (last "not yet" minus staleness, first "reached"), the pair is concordant when
/// `hi_a <= lo_b`, discordant when `lo_a > hi_b` (a's turn provably came after b's), else a tie
/// (same tick / poll window). τ = (C − D) / (C + D) must be ≥ 0.99.
/// `None` (printed as SKIP) when no two fans' turn windows are ordered: every fan was admitted
/// within one poll window, so the run holds no evidence about order either way.
pub fn admission_order(fans: &[FanOutcome]) -> Option<Check> {
    let mut w: Vec<(u64, u64, u64)> = fans
        .iter()
        .filter_map(|f| Some((f.queue_number?, f.turn_window_ms?)))
        .map(|(n, (lo, hi))| (n, lo.saturating_sub(STALE_MS), hi))
        .collect();
    w.sort_unstable();
    let (mut c, mut d) = (0u64, 0u64);
    pairs(w.len(), |i, j| {
        let (a, b) = (w[i], w[j]);
        if a.2 <= b.1 {
            c += 1;
        } else if a.1 > b.2 {
            d += 1;
        }
    });
    let tau = if c + d == 0 {
        0.0
    } else {
        (c as f64 - d as f64) / (c + d) as f64
    };
    let name = "admission order equals queue order (Kendall tau >= 0.99)";
    if c + d == 0 {
        println!(
            "SKIP {name}: no ordered pairs among {} fans (all admitted within one poll window)",
            w.len()
        );
        return None;
    }
    Some(Check {
        name,
        pass: tau >= 0.99,
        detail: format!(
            "tau {tau:.4} over {} fans seen waiting ({c} ordered pairs, {d} reversed, ties = same poll window)",
            w.len()
        ),
    })
}

/// Pre-queue shuffle: among fans who joined before opening (their join answer carried no queue
/// number), join time must not predict queue number: |τ| below four standard errors of τ under
/// independence. Fans meant to join early who arrived after opening (a starved machine) are
/// numbered in join order by design and are left out.
/// `None` (printed as SKIP) with fewer than 30 pre-queued fans: too few to say anything.
pub fn shuffle(fans: &[FanOutcome]) -> Option<Check> {
    let pts: Vec<(f64, f64)> = fans
        .iter()
        .filter(|f| !f.late_arrival && f.prequeued)
        .filter_map(|f| Some((f.joined_at_ms? as f64, f.queue_number? as f64)))
        .collect();
    let name = "pre-queue shuffle: join order does not predict queue number";
    if pts.len() < 30 {
        println!(
            "SKIP {name}: only {} pre-queued fans (30 needed)",
            pts.len()
        );
        return None;
    }
    let (tau, _, _) = kendall(&pts);
    let bound = 4.0 * tau_sigma(pts.len());
    Some(Check {
        name,
        pass: tau.abs() < bound,
        detail: format!(
            "Kendall tau {tau:+.4} over {} pre-queued fans, |tau| must be < {bound:.4} (4 sigma)",
            pts.len()
        ),
    })
}

/// Admissions stopped at the cap: once every seat is sold the waiting room goes `sold_out`
/// (told by the booking core) and no fan is admitted more than one sample (1 s) + 1 s after
/// the first `sold_out` sample. `None` (not applicable, printed as SKIP) when inventory did not
/// run out during the run, so there was no cap to stop at.
pub fn stopped_at_cap(
    fans: &[FanOutcome],
    samples: &[Sample],
    capacity: u64,
    sold: u64,
) -> Option<Check> {
    let name = "admissions stopped at the cap (sold out)";
    let first = samples.iter().find(|s| s.state == "sold_out");
    let Some(first) = first else {
        if sold < capacity || capacity == 0 {
            println!(
                "SKIP {name}: inventory did not run out ({sold} of {capacity} seats sold), so there was no cap to stop at"
            );
            return None;
        }
        return Some(Check {
            name,
            pass: false,
            detail: format!(
                "every seat sold ({sold} of {capacity}) but the waiting room never went sold_out"
            ),
        });
    };
    let limit = first.t_ms + 2000;
    let late = fans
        .iter()
        .filter_map(|f| f.admitted_at_ms)
        .filter(|&t| t > limit)
        .count();
    let after: u64 = samples
        .iter()
        .filter(|s| s.t_ms > limit)
        .map(|s| s.admitted_total)
        .max()
        .unwrap_or(first.admitted_total);
    let at = samples
        .iter()
        .filter(|s| s.t_ms <= limit)
        .map(|s| s.admitted_total)
        .max()
        .unwrap_or(first.admitted_total);
    Some(Check {
        name,
        pass: late == 0 && after == at && sold == capacity,
        detail: format!(
            "sold_out at {:.1} s with {sold} of {capacity} seats sold; admitted_total {at} then {after}; \
             {late} fans admitted later",
            first.t_ms as f64 / 1000.0
        ),
    })
}

/// Several tabs with one admission token: at most one hold at a time.
pub fn tabs(fans: &[FanOutcome]) -> Check {
    let tried: Vec<usize> = fans.iter().filter_map(|f| f.tabs_won).collect();
    let over = tried.iter().filter(|&&w| w > 1).count();
    Check {
        name: "several tabs, one admission: one hold at a time",
        pass: over == 0 && !tried.is_empty(),
        detail: format!(
            "{} several-tab fans, {over} won more than one hold at once",
            tried.len()
        ),
    }
}

/// A hold retried with the same `Idempotency-Key` names one hold.
pub fn idempotency(fans: &[FanOutcome]) -> Check {
    let tried = fans.iter().filter(|f| f.idempotent_checked).count();
    let bad = fans.iter().filter(|f| f.idempotency_mismatch).count();
    Check {
        name: "a retried hold with the same Idempotency-Key names one hold",
        pass: bad == 0 && tried > 0,
        detail: format!("{tried} fans retried with the same key, {bad} saw different answers"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kendall_of_identical_and_reversed_rankings() {
        let up: Vec<(f64, f64)> = (0..50).map(|i| (i as f64, i as f64)).collect();
        assert!((kendall(&up).0 - 1.0).abs() < 1e-9);
        let down: Vec<(f64, f64)> = (0..50).map(|i| (i as f64, -(i as f64))).collect();
        assert!((kendall(&down).0 + 1.0).abs() < 1e-9);
        assert!(tau_sigma(400) > 0.03 && tau_sigma(400) < 0.04);
    }

    #[test]
    fn a_late_turn_for_an_earlier_number_is_reversed() {
        let fan = |n, lo, hi| FanOutcome {
            queue_number: Some(n),
            turn_window_ms: Some((lo, hi)),
            ..Default::default()
        };
        let ok = admission_order(&[fan(1, 1000, 2000), fan(2, 3500, 4000)]).expect("pairs");
        assert!(ok.pass, "{}", ok.detail);
        let bad = admission_order(&[fan(1, 9000, 9500), fan(2, 3500, 4000)]).expect("pairs");
        assert!(!bad.pass, "{}", bad.detail);
        // Overlapping windows only: no evidence either way, so no verdict.
        assert!(admission_order(&[fan(1, 1000, 4000), fan(2, 1500, 4000)]).is_none());
    }
}
