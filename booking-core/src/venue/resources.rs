//! Interval resources of a venue (issue 17 item 1): kinds of named resources (parking bays,
//! hospitality boxes, meet-and-greet slots) booked for `[start, end)`, within bookable windows,
//! on a slot grid, with a buffer after each booking that belongs to the stored range. The pure
//! rules live here: the checks of an asked interval and the free runs left between taken
//! ranges. Instants are epoch milliseconds; the file gives windows as RFC 3339 instants.
//!
//! Layer: the bottom (part of `venue`); imports nothing from the crate.

use serde::{Deserialize, Serialize};

/// One bookable window, closed-open: RFC 3339 instants with an offset (`2026-12-31T18:00:00Z`),
/// or, in a venue file, local wall-clock times in the venue's `time_zone` (`2026-12-31T18:00`),
/// which [`crate::Venue::resolve_local_times`] turns into instants in UTC on load.
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

/// Whether `s` has RFC 3339's `date-time` shape (section 5.6): `YYYY-MM-DDTHH:MM:SS`, at most
/// three fraction digits (the booking core keeps milliseconds and never rounds a time silently),
/// then `Z` or `±HH:MM` with HH ≤ 23 and MM ≤ 59. jiff alone also takes a space for `T`, offset
/// seconds and `[zone]` suffixes (RFC 9557), which a client of this API must not rely on.
fn rfc3339_shape(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    let date_time = digits(0..4)
        && at(4, b"-")
        && digits(5..7)
        && at(7, b"-")
        && digits(8..10)
        && at(10, b"Tt")
        && digits(11..13)
        && at(13, b":")
        && digits(14..16)
        && at(16, b":")
        && digits(17..19);
    if !date_time {
        return Err(format!(
            "{s:?} is not an RFC 3339 instant (YYYY-MM-DDTHH:MM:SSZ or ±HH:MM)"
        ));
    }
    let mut i = 19;
    if at(i, b".") {
        let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 3 {
            return Err(format!("{s:?}: 1 to 3 fraction digits (milliseconds)"));
        }
        i += 1 + n;
    }
    let two = |r: std::ops::Range<usize>| std::str::from_utf8(b.get(r)?).ok()?.parse::<u8>().ok();
    let zone = match b.get(i) {
        Some(b'Z' | b'z') => b.len() == i + 1,
        Some(b'+' | b'-') => {
            b.len() == i + 6
                && at(i + 3, b":")
                && digits(i + 1..i + 3)
                && digits(i + 4..i + 6)
                && two(i + 1..i + 3).is_some_and(|h| h <= 23)
                && two(i + 4..i + 6).is_some_and(|m| m <= 59)
        }
        _ => false,
    };
    if zone {
        Ok(())
    } else {
        Err(format!(
            "{s:?}: the offset must be Z or ±HH:MM, nothing after it"
        ))
    }
}

/// Parses an RFC 3339 instant to epoch ms (the shape checked by [`rfc3339_shape`]).
pub fn parse_instant(s: &str) -> Result<i64, String> {
    rfc3339_shape(s)?;
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

    #[test]
    fn instants_are_rfc_3339_and_at_most_milliseconds() {
        assert_eq!(parse_instant("2030-06-01T19:00:00Z"), Ok(1_906_570_800_000));
        assert_eq!(
            parse_instant("2030-06-01T21:00:00.5+02:00"),
            Ok(1_906_570_800_500)
        );
        assert_eq!(
            parse_instant("2030-06-01t19:00:00.123z"),
            Ok(1_906_570_800_123)
        );
        for bad in [
            "2030-06-01T19:00:00.0009Z",
            "2030-06-01 19:00:00Z",
            "2030-06-01T19:00:00+24:00",
            "2030-06-01T19:00:00+01:00:30",
            "2030-06-01T19:00:00+01:00[Europe/Paris]",
            "2030-06-01T19:00:00",
            "2030-02-30T19:00:00Z",
            "1906570800000",
            "",
        ] {
            assert!(parse_instant(bad).is_err(), "{bad}");
        }
    }

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
