//! Queue modes per event (issue 14 item 2): how the line runs once the event is open. Pure
//! rules only; the store keeps the mode (`QueueStore::set_mode`), the admitter and the fan
//! endpoints apply it, `http/mode.rs` switches it, audited.
//!
//! - `scheduled` (the default, the sale as before): the admitter lets fans in at `admit_rate`,
//!   never past `max_active`.
//! - `always_on`: a fan joining an open event is let straight through — invited at once, then
//!   claims an admission token as usual — while the line moves no faster than `admit_rate`
//!   and `max_active` has room: at most one straight-through per `1 / admit_rate` seconds
//!   across every node (a store latch, [`through_window_ms`]), on top of the admitter's own
//!   ticks. Above that the fan queues like in a scheduled sale.
//! - `pass_through`: everyone who joins an open event is invited at once, whatever the rate
//!   and `max_active`; joins, admissions and active sessions are still counted.
//! - `maintenance`: nobody is let in (the admitter holds the cursor, claims answer 503
//!   `maintenance`); joins are still accepted and keep their places, so fans who come during
//!   maintenance are not punished for it when the line moves again. Pages show the maintenance
//!   notice and the operator's broadcast message.

use serde::{Deserialize, Serialize};

/// How an event's line runs (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// Admitted at `admit_rate`, never past `max_active` (the sale as before).
    #[default]
    Scheduled,
    /// Straight through while demand is below `admit_rate` and `max_active`, queued above.
    AlwaysOn,
    /// Everyone invited at once; figures still counted.
    PassThrough,
    /// Nobody let in; joins kept.
    Maintenance,
}

impl QueueMode {
    /// Every mode, in the order the console lists them.
    pub const ALL: [QueueMode; 4] = [
        Self::Scheduled,
        Self::AlwaysOn,
        Self::PassThrough,
        Self::Maintenance,
    ];

    /// Wire name (`scheduled`, `always_on`, `pass_through`, `maintenance`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::AlwaysOn => "always_on",
            Self::PassThrough => "pass_through",
            Self::Maintenance => "maintenance",
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// The `always_on` straight-through window, **ms**: one fan per `1000 / admit_rate` ms (at
/// least 1 ms), so straight-through admissions never exceed the admit rate across nodes.
pub fn through_window_ms(admit_rate: f64) -> u64 {
    if admit_rate > 0.0 && admit_rate.is_finite() {
        ((1000.0 / admit_rate).ceil() as u64).max(1)
    } else {
        u64::MAX / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_round_trip_and_the_window_follows_the_rate() {
        for m in QueueMode::ALL {
            assert_eq!(QueueMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(QueueMode::parse("open"), None);
        assert_eq!(through_window_ms(2.0), 500);
        assert_eq!(through_window_ms(3.0), 334);
        assert_eq!(through_window_ms(1e9), 1);
    }
}
