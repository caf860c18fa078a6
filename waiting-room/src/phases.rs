//! Scheduled phases per event (issue 14 item 2): the pre-queue opens, the sale opens and the
//! sale ends at set times, by themselves. Pure rules only: the store keeps the phases and how
//! far they got (`QueueStore::set_phases`, `phase_done`), the admitter of the one node holding
//! the event's admitter lock applies the next due phase at its tick, audited as operator
//! `schedule`; `http/phases.rs` sets and clears them.

use serde::{Deserialize, Serialize};

/// An event's schedule, Unix epoch **seconds**. `sale_opens_at` is required (it becomes the
/// event's `opens_at`); the other two are optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// The pre-queue opens (state `closed` → `prequeue`): joins accepted from then on. Absent:
    /// the event takes joins as soon as it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prequeue_opens_at: Option<i64>,
    /// The sale opens (`prequeue` → numbered in draw order → `open`).
    pub sale_opens_at: i64,
    /// The sale ends (`prequeue`/`opening`/`open`/`paused` → `closed`). Absent: runs until an
    /// operator closes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sale_ends_at: Option<i64>,
}

/// One scheduled switch, in order; the store records the last one applied (its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// `prequeue_opens_at`.
    PrequeueOpens = 1,
    /// `sale_opens_at`.
    SaleOpens = 2,
    /// `sale_ends_at`.
    SaleEnds = 3,
}

impl Phase {
    /// The audit action of the switch.
    pub fn action(self) -> &'static str {
        match self {
            Self::PrequeueOpens => "prequeue_opens",
            Self::SaleOpens => "sale_opens",
            Self::SaleEnds => "sale_ends",
        }
    }
}

/// Why a schedule was refused (a 422 `invalid-phases` at the API).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhasesError {
    /// The times are not in order (pre-queue ≤ sale opens < sale ends).
    #[error("want prequeue_opens_at <= sale_opens_at < sale_ends_at")]
    Order,
    /// A time is more than `span` seconds from now.
    #[error("every time must be within one year of now")]
    Span,
}

impl Phases {
    /// Checks order and that every time lies within `span` seconds of `now`.
    pub fn check(&self, now: i64, span: i64) -> Result<(), PhasesError> {
        let pre = self.prequeue_opens_at.unwrap_or(self.sale_opens_at);
        if pre > self.sale_opens_at || self.sale_ends_at.is_some_and(|e| e <= self.sale_opens_at) {
            return Err(PhasesError::Order);
        }
        let times = [Some(pre), Some(self.sale_opens_at), self.sale_ends_at];
        if times.into_iter().flatten().any(|t| (t - now).abs() > span) {
            return Err(PhasesError::Span);
        }
        Ok(())
    }

    fn at(&self, p: Phase) -> Option<i64> {
        match p {
            Phase::PrequeueOpens => self.prequeue_opens_at,
            Phase::SaleOpens => Some(self.sale_opens_at),
            Phase::SaleEnds => self.sale_ends_at,
        }
    }

    /// The latest phase due at `now` (epoch s) after the one applied (`done`, 0 = none): a
    /// node that missed several switches applies only the last due one, so an event never
    /// reopens a pre-queue that should already be closed.
    pub fn due(&self, now: i64, done: u8) -> Option<Phase> {
        [Phase::SaleEnds, Phase::SaleOpens, Phase::PrequeueOpens]
            .into_iter()
            .find(|p| *p as u8 > done && self.at(*p).is_some_and(|t| t <= now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_come_due_in_order_and_only_once() {
        let p = Phases {
            prequeue_opens_at: Some(10),
            sale_opens_at: 20,
            sale_ends_at: Some(30),
        };
        assert_eq!(p.check(0, 100), Ok(()));
        assert_eq!(p.due(9, 0), None);
        assert_eq!(p.due(10, 0), Some(Phase::PrequeueOpens));
        assert_eq!(p.due(15, 1), None);
        assert_eq!(p.due(25, 1), Some(Phase::SaleOpens));
        assert_eq!(p.due(35, 0), Some(Phase::SaleEnds), "only the last due one");
        assert_eq!(p.due(35, 3), None);
        let bad = Phases {
            sale_ends_at: Some(20),
            ..p
        };
        assert_eq!(bad.check(0, 100), Err(PhasesError::Order));
        assert_eq!(p.check(0, 5), Err(PhasesError::Span));
    }
}
