//! Interval resources of a venue (issue 17 item 1): kinds of named resources (parking bays,
//! hospitality boxes, meet-and-greet slots) booked for `[start, end)`, within bookable windows,
//! on a slot grid, with a buffer after each booking that belongs to the stored range. The pure
//! rules live here: the checks of an asked interval and the free runs left between taken
//! ranges. Instants are epoch milliseconds; the file gives windows as RFC 3339 instants.
//!
//! Layer: the bottom (part of `venue`); imports nothing from the crate.

use serde::{Deserialize, Serialize};

/// One bookable window: RFC 3339 instants with an offset (`2026-12-31T18:00:00Z`), closed-open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// First bookable instant.
    pub start: String,
    /// First instant no longer bookable.
    pub end: String,
}

/// A kind of interval resource and its named resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceKind {
    /// Kind id, `[A-Za-z0-9-]{1,40}` (`parking`).
    pub kind: String,
    /// Resource names, `[A-Za-z0-9-]{1,40}`, unique across the venue (`P1`, `P2`).
    pub resources: Vec<String>,
    /// Bookable windows, in order, not overlapping; each a whole number of slots long.
    pub windows: Vec<Window>,
    /// Slot granularity, minutes (1 to 1440): an interval starts and ends on the window's grid.
    pub slot_minutes: u32,
    /// Minutes after each booking the resource stays blocked (cleaning, turnaround), 0 to 1440.
    #[serde(default)]
    pub buffer_minutes: u32,
    /// Price of one slot, cents.
    #[serde(default)]
    pub price_cents_per_slot: i64,
}

const MINUTE_MS: i64 = 60_000;

/// An asked interval that cannot be held, whatever the others hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntervalError {
    /// `end <= start`.
    Empty,
    /// Start or end is not on the slot grid of its window.
    OffGrid,
    /// Not inside one bookable window.
    OutsideWindows,
}

/// Parses an RFC 3339 instant to epoch ms.
pub fn parse_instant(s: &str) -> Result<i64, String> {
    let t: jiff::Timestamp = s
        .parse()
        .map_err(|e| format!("{s:?} is not an RFC 3339 instant with an offset: {e}"))?;
    Ok(t.as_millisecond())
}

/// Epoch ms as an RFC 3339 instant in UTC.
pub fn format_instant(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn name_ok(s: &str) -> bool {
    (1..=40).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl ResourceKind {
    /// Slot length, ms.
    pub fn slot_ms(&self) -> i64 {
        i64::from(self.slot_minutes) * MINUTE_MS
    }

    /// Buffer after each booking, ms.
    pub fn buffer_ms(&self) -> i64 {
        i64::from(self.buffer_minutes) * MINUTE_MS
    }

    /// The windows as epoch-ms pairs (invalid ones skipped: `validate` refuses them).
    pub fn windows_ms(&self) -> Vec<(i64, i64)> {
        self.windows
            .iter()
            .filter_map(|w| Some((parse_instant(&w.start).ok()?, parse_instant(&w.end).ok()?)))
            .collect()
    }

    /// The asked `[start, end)` against the grid and the windows.
    pub fn check(&self, start: i64, end: i64) -> Result<(), IntervalError> {
        if end <= start {
            return Err(IntervalError::Empty);
        }
        let Some((ws, _)) = self
            .windows_ms()
            .into_iter()
            .find(|(ws, we)| *ws <= start && end <= *we)
        else {
            return Err(IntervalError::OutsideWindows);
        };
        let slot = self.slot_ms();
        if (start - ws) % slot != 0 || (end - ws) % slot != 0 {
            return Err(IntervalError::OffGrid);
        }
        Ok(())
    }

    /// The price of `[start, end)`, cents.
    pub fn price(&self, start: i64, end: i64) -> i64 {
        (end - start) / self.slot_ms() * self.price_cents_per_slot
    }

    /// The free runs of one resource within `[from, to)` and the windows, given the ranges
    /// `taken` (each `[start, end + buffer)` of a live claim): maximal `[a, b)` on the grid such
    /// that `[a, b + buffer)` meets no taken range, at least one slot long.
    pub fn free_runs(&self, taken: &[(i64, i64)], from: i64, to: i64) -> Vec<(i64, i64)> {
        let (slot, buffer) = (self.slot_ms(), self.buffer_ms());
        let mut taken = taken.to_vec();
        taken.sort_unstable();
        let mut out = Vec::new();
        for (ws, we) in self.windows_ms() {
            let (lo, hi) = (ws.max(from), we.min(to));
            if lo >= hi {
                continue;
            }
            // Walk the gaps between taken ranges inside [lo, hi).
            let mut cursor = lo;
            let ends = taken
                .iter()
                .copied()
                .filter(|(s, e)| *s < hi + buffer && *e > lo)
                .chain(std::iter::once((hi + buffer, hi + buffer)));
            for (s, e) in ends {
                let a = ws + (cursor - ws + slot - 1).div_euclid(slot) * slot;
                let b_max = (s - buffer).min(hi);
                let b = ws + (b_max - ws).div_euclid(slot) * slot;
                if b > a {
                    out.push((a, b));
                }
                cursor = cursor.max(e);
            }
        }
        out
    }

    /// `resources[i]`-relative checks; `field` is the kind's path (`resources[0]`).
    pub fn validate(&self, field: &str) -> Result<(), String> {
        if !name_ok(&self.kind) {
            return Err(format!(
                "{field}.kind: {:?} must be [A-Za-z0-9-]{{1,40}}",
                self.kind
            ));
        }
        if self.resources.is_empty() {
            return Err(format!("{field}.resources: name at least one resource"));
        }
        if let Some(r) = self.resources.iter().find(|r| !name_ok(r)) {
            return Err(format!(
                "{field}.resources: {r:?} must be [A-Za-z0-9-]{{1,40}}"
            ));
        }
        if !(1..=1440).contains(&self.slot_minutes) {
            return Err(format!("{field}.slot_minutes: 1 to 1440"));
        }
        if self.buffer_minutes > 1440 {
            return Err(format!("{field}.buffer_minutes: 0 to 1440"));
        }
        if self.price_cents_per_slot < 0 {
            return Err(format!(
                "{field}.price_cents_per_slot: must not be negative"
            ));
        }
        if self.windows.is_empty() {
            return Err(format!(
                "{field}.windows: give at least one bookable window"
            ));
        }
        let mut last_end = i64::MIN;
        for (i, w) in self.windows.iter().enumerate() {
            let f = format!("{field}.windows[{i}]");
            let s = parse_instant(&w.start).map_err(|e| format!("{f}.start: {e}"))?;
            let e = parse_instant(&w.end).map_err(|e| format!("{f}.end: {e}"))?;
            if e <= s {
                return Err(format!("{f}.end: must be after start"));
            }
            if (e - s) % self.slot_ms() != 0 {
                return Err(format!(
                    "{f}.end: the window must be a whole number of slots"
                ));
            }
            if s < last_end {
                return Err(format!(
                    "{f}.start: windows must be in order and not overlap"
                ));
            }
            last_end = e;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(buffer: u32) -> ResourceKind {
        ResourceKind {
            kind: "parking".into(),
            resources: vec!["P1".into()],
            windows: vec![Window {
                start: "2026-12-31T18:00:00Z".into(),
                end: "2026-12-31T22:00:00Z".into(),
            }],
            slot_minutes: 30,
            buffer_minutes: buffer,
            price_cents_per_slot: 100,
        }
    }

    fn at(hhmm: &str) -> i64 {
        parse_instant(&format!("2026-12-31T{hhmm}:00Z")).unwrap()
    }

    #[test]
    fn asked_intervals_are_checked_against_grid_and_windows() {
        let k = kind(0);
        assert_eq!(k.check(at("19:00"), at("20:00")), Ok(()));
        assert_eq!(k.check(at("20:00"), at("19:00")), Err(IntervalError::Empty));
        assert_eq!(
            k.check(at("19:10"), at("20:00")),
            Err(IntervalError::OffGrid)
        );
        assert_eq!(
            k.check(at("21:30"), at("22:30")),
            Err(IntervalError::OutsideWindows)
        );
        assert_eq!(k.price(at("19:00"), at("20:00")), 200);
    }

    #[test]
    fn free_runs_leave_the_buffer_after_each_claim() {
        let k = kind(30);
        // Taken 19:00-20:00 plus its 30-minute buffer.
        let runs = k.free_runs(&[(at("19:00"), at("20:30"))], i64::MIN, i64::MAX);
        assert_eq!(
            runs,
            vec![(at("18:00"), at("18:30")), (at("20:30"), at("22:00"))]
        );
        let k = kind(0);
        let runs = k.free_runs(&[(at("19:00"), at("20:00"))], i64::MIN, i64::MAX);
        assert_eq!(
            runs,
            vec![(at("18:00"), at("19:00")), (at("20:00"), at("22:00"))]
        );
    }
}
