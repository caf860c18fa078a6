//! The booking core's load figures on the wire (`GET /internal/load`, API.md): written by the
//! booking core (`booking_core::load`), read by the waiting room's closed loop
//! (`waiting_room::closedloop`). Counters are cumulative since the process started.

use serde::{Deserialize, Serialize};

/// The JSON of `GET /internal/load` (API.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadDoc {
    /// This process's random id (counters restart with it: a new id means a new baseline).
    pub node: String,
    /// Bounds of the hold-latency buckets, ms, then `null` for `+Inf`.
    pub hold_bounds_ms: Vec<Option<u64>>,
    /// Cumulative hold counts per bucket, since `node` started.
    pub hold_counts: Vec<u64>,
    /// Hold requests still running at the read, by how long they have run so far, in the
    /// buckets of `hold_bounds_ms`, cumulative (`[≤ 5 ms, ≤ 10 ms, …, all]`; empty from a
    /// booking core that does not send it). Not a counter since start: a snapshot. A stalled
    /// booking core (a lock, a hung database) finishes few holds, so the finished ones alone
    /// read as healthy; its running holds show the stall.
    #[serde(default)]
    pub hold_running_counts: Vec<u64>,
    /// Fan calls answered since start.
    pub requests: u64,
    /// Of them, 5xx.
    pub server_errors: u64,
    /// The database pool now: connections open and idle (`idle` 0 with `size` at the
    /// maximum: callers are waiting for a connection).
    pub pool: PoolFigures,
    /// Places left per show.
    pub shows: Vec<ShowStock>,
}

/// The database pool's state at the read.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PoolFigures {
    /// Connections open.
    pub size: u32,
    /// Of them, idle.
    pub idle: u32,
    /// The pool's maximum.
    pub max: u32,
}

/// One show's stock: seats and pool places.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShowStock {
    /// Show id (= waiting-room event id).
    pub show: String,
    /// Seats and pool places that can be held now (lapsed holds count free).
    pub free: i64,
    /// Seats and pool places in live holds: they may come back.
    pub held: i64,
    /// Sold.
    pub sold: i64,
    /// Bookings (paid holds) of the show: one per payment, whatever its seats, places or
    /// interval (a field added later: 0 from a booking core that does not send it).
    #[serde(default)]
    pub bookings: i64,
    /// Holds of the show that ended how (issue 17 item 6), counted apart, since the show began:
    /// see [`HoldEnds`] (0s from a booking core that does not send them).
    #[serde(default)]
    pub ended: HoldEnds,
}

/// Holds that ended, by why (the booking core's `holds.ended_as`, API.md "Hold ends").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HoldEnds {
    /// Lapsed: released by the reconciler after their deadline, plus HELD holds past their
    /// deadline that it has not swept yet (expiry is enforced on read).
    pub expired: i64,
    /// Let go by the fan or an operator (or cancelled by the fan at the checkout).
    pub released: i64,
    /// Ended because their payment failed at the gateway.
    pub failed: i64,
}
