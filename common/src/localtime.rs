//! Operators' local wall-clock times (issue 17 item 4 "Time zones done right"): a time given as
//! `YYYY-MM-DDTHH:MM[:SS]` with no offset is read in an IANA time zone with `jiff` and its
//! bundled tz database. A local time in a spring-forward gap never happens and is refused; one
//! in a fall-back hour happens twice and is refused unless the offset is given
//! (`2026-10-25T01:30+01:00`), which makes it an exact instant. The HTTP problem kinds are
//! [`LocalTimeError::kind`]. Used by the booking core's venue file (interval windows) and the
//! waiting room's event opening (admin API, CLI, console).

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;

/// Why a wall-clock time cannot become one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalTimeError {
    /// Not a date-time (`YYYY-MM-DDTHH:MM[:SS]`, optionally with `Z` or `±HH:MM`), or the zone
    /// is not an IANA name.
    Invalid(String),
    /// The local time is in a gap: the zone's clocks jump from offset `before` to `after` over it.
    Nonexistent {
        /// The time as given.
        local: String,
        /// The IANA zone.
        zone: String,
        /// Offset before the gap (`+00:00`).
        before: String,
        /// Offset after the gap (`+01:00`).
        after: String,
    },
    /// The local time happens twice: first at offset `earlier`, then at `later`.
    Ambiguous {
        /// The time as given.
        local: String,
        /// The IANA zone.
        zone: String,
        /// Offset of the first occurrence (`+01:00`).
        earlier: String,
        /// Offset of the second occurrence (`+00:00`).
        later: String,
    },
}

impl LocalTimeError {
    /// The problem+json kind: `invalid-local-time`, `nonexistent-local-time` or
    /// `ambiguous-local-time`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "invalid-local-time",
            Self::Nonexistent { .. } => "nonexistent-local-time",
            Self::Ambiguous { .. } => "ambiguous-local-time",
        }
    }

    /// The two offsets an ambiguous time may take, earlier first (`["+01:00", "+00:00"]`).
    pub fn candidate_offsets(&self) -> Option<[&str; 2]> {
        match self {
            Self::Ambiguous { earlier, later, .. } => Some([earlier, later]),
            _ => None,
        }
    }
}

impl std::fmt::Display for LocalTimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(why) => f.write_str(why),
            Self::Nonexistent {
                local,
                zone,
                before,
                after,
            } => write!(
                f,
                "{local} does not exist in {zone}: it falls in the spring-forward gap where the \
                 clocks jump from UTC{before} to UTC{after}; give a time outside the gap"
            ),
            Self::Ambiguous {
                local,
                zone,
                earlier,
                later,
            } => write!(
                f,
                "{local} happens twice in {zone} (the clocks go back): give the offset, \
                 {local}{earlier} for the first or {local}{later} for the second"
            ),
        }
    }
}

impl std::error::Error for LocalTimeError {}

/// Whether `text` carries its own offset (`Z` or `±HH:MM` after the time): an exact instant.
pub fn has_offset(text: &str) -> bool {
    text.get(11..)
        .is_some_and(|t| t.contains(['Z', 'z', '+', '-']))
}

/// The zone named `zone`, or [`LocalTimeError::Invalid`].
pub fn zone(zone: &str) -> Result<TimeZone, LocalTimeError> {
    TimeZone::get(zone).map_err(|_| {
        LocalTimeError::Invalid(format!(
            "{zone:?} is not an IANA time zone (e.g. Europe/London)"
        ))
    })
}

/// The instant of `text` in `zone_name`: with an offset it is that exact instant (RFC 3339);
/// without, the local wall-clock time in the zone, refused in a gap or a fold (see
/// [`LocalTimeError`]).
pub fn to_instant(text: &str, zone_name: &str) -> Result<Timestamp, LocalTimeError> {
    let tz = zone(zone_name)?;
    if text.contains('[') {
        return Err(LocalTimeError::Invalid(format!(
            "{text:?}: no [zone] suffix; the zone is {zone_name}"
        )));
    }
    if has_offset(text) {
        return text.parse::<Timestamp>().map_err(|e| {
            LocalTimeError::Invalid(format!("{text:?} is not an RFC 3339 instant: {e}"))
        });
    }
    let dt: DateTime = text.parse().map_err(|_| {
        LocalTimeError::Invalid(format!(
            "{text:?} is not a local date-time (YYYY-MM-DDTHH:MM, or with ±HH:MM)"
        ))
    })?;
    let zoned = tz.to_ambiguous_zoned(dt);
    match zoned.offset() {
        AmbiguousOffset::Unambiguous { .. } => zoned
            .unambiguous()
            .map(|z| z.timestamp())
            .map_err(|e| LocalTimeError::Invalid(e.to_string())),
        AmbiguousOffset::Gap { before, after } => Err(LocalTimeError::Nonexistent {
            local: text.to_owned(),
            zone: zone_name.to_owned(),
            before: hh_mm(before),
            after: hh_mm(after),
        }),
        AmbiguousOffset::Fold { before, after } => Err(LocalTimeError::Ambiguous {
            local: text.to_owned(),
            zone: zone_name.to_owned(),
            earlier: hh_mm(before),
            later: hh_mm(after),
        }),
    }
}

/// `ts` as the zone's local time with its offset and zone name, to the minute
/// (`2026-10-25T01:30+00:00[Europe/London]`), for operators and fans.
pub fn show_in(ts: Timestamp, zone_name: &str) -> Result<String, LocalTimeError> {
    let z = ts.to_zoned(zone(zone_name)?);
    Ok(format!(
        "{}{}[{zone_name}]",
        z.strftime("%Y-%m-%dT%H:%M"),
        hh_mm(z.offset())
    ))
}

/// An offset as RFC 3339 writes it, `±HH:MM` (jiff's `Display` drops a zero minute part).
fn hh_mm(o: jiff::tz::Offset) -> String {
    let s = o.seconds();
    let sign = if s < 0 { '-' } else { '+' };
    let m = s.unsigned_abs() / 60;
    format!("{sign}{:02}:{:02}", m / 60, m % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LONDON: &str = "Europe/London";

    #[test]
    fn dst_gap_local_time_is_refused() {
        // 2026-03-29: London's clocks go from 01:00 GMT to 02:00 BST.
        let e = to_instant("2026-03-29T01:30", LONDON).unwrap_err();
        assert_eq!(e.kind(), "nonexistent-local-time");
        let msg = e.to_string();
        assert!(
            msg.contains("gap") && msg.contains("+00:00") && msg.contains("+01:00"),
            "{msg}"
        );
        let before = to_instant("2026-03-29T00:59", LONDON).unwrap();
        let after = to_instant("2026-03-29T02:00", LONDON).unwrap();
        assert_eq!(
            after.as_second() - before.as_second(),
            60,
            "00:59 GMT to 02:00 BST"
        );
    }

    #[test]
    fn dst_overlap_local_time_needs_an_offset() {
        // 2026-10-25: London's 01:00–02:00 happens twice (BST, then GMT).
        let e = to_instant("2026-10-25T01:30", LONDON).unwrap_err();
        assert_eq!(e.kind(), "ambiguous-local-time");
        assert_eq!(e.candidate_offsets(), Some(["+01:00", "+00:00"]));
        assert!(e.to_string().contains("2026-10-25T01:30+01:00"), "{e}");
        let first = to_instant("2026-10-25T01:30+01:00", LONDON).unwrap();
        let second = to_instant("2026-10-25T01:30+00:00", LONDON).unwrap();
        assert_eq!(
            second.as_second() - first.as_second(),
            3600,
            "one hour apart"
        );
        assert_eq!(first.to_string(), "2026-10-25T00:30:00Z");
        assert_eq!(
            show_in(second, LONDON).unwrap(),
            "2026-10-25T01:30+00:00[Europe/London]"
        );
    }

    #[test]
    fn ordinary_local_times_and_bad_input() {
        let t = to_instant("2026-07-01T19:30", LONDON).unwrap();
        assert_eq!(t.to_string(), "2026-07-01T18:30:00Z");
        assert_eq!(
            to_instant("2026-07-01T19:30:00", "UTC")
                .unwrap()
                .to_string(),
            "2026-07-01T19:30:00Z"
        );
        for bad in [
            "tomorrow",
            "2026-02-30T10:00",
            "2026-07-01T19:30[Europe/London]",
        ] {
            assert_eq!(
                to_instant(bad, LONDON).unwrap_err().kind(),
                "invalid-local-time",
                "{bad}"
            );
        }
        assert_eq!(
            to_instant("2026-07-01T19:30", "Mars/Olympus")
                .unwrap_err()
                .kind(),
            "invalid-local-time"
        );
    }
}
