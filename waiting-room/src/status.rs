//! The public status document (API.md "Status document"). Rebuilt whole from the store's
//! figures by the admitter tick (and right after an operator change) and kept in memory, so
//! `GET /status/{event}.json` never costs a store call; the CDN caches it for `max-age`. The
//! board also keeps each event's [`RateMeter`] (measured speeds and the wait estimate).

use crate::domain::{EventId, EventState, Figures};
use crate::rates::{RateMeter, WaitEstimate};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Mutex, RwLock};

/// One event's status document.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct StatusDoc {
    /// Event id.
    pub event: String,
    /// Public state (`opening` shows as `open`).
    pub state: &'static str,
    /// Opening time, epoch seconds.
    pub opens_at: i64,
    /// Numbers `<=` cursor may claim admission.
    pub cursor: u64,
    /// Live fans waiting: numbered above the cursor minus silent ones in the ready window, plus
    /// returning fans and the pre-queue (fans behind the ready window are presumed live).
    pub queue_length: u64,
    /// Configured admissions per second.
    pub admit_rate: f64,
    /// Measured admissions (claims) per second over the last 60 s.
    pub admitted_per_sec: f64,
    /// Most concurrent admitted sessions.
    pub max_active: u64,
    /// Live admissions and invitations.
    pub active: u64,
    /// Whether the event is sold out.
    pub sold_out: bool,
    /// How often fans should poll this document, milliseconds.
    pub poll_interval_ms: u64,
    /// How often fans in the ready window send a heartbeat, milliseconds.
    pub heartbeat_interval_ms: u64,
    /// Fans with `queue_number − cursor <= ready_window` must heartbeat (places).
    pub ready_window: u64,
    /// Proof-of-work difficulty of a new join, leading zero bits (0 = off).
    pub pow_difficulty: u32,
    /// Wait estimate: speeds a client divides its `queue_number − cursor` by.
    pub wait: WaitEstimate,
    /// Booking core base URL.
    pub booking_url: String,
    /// When this document was built, epoch seconds.
    pub updated_at: i64,
}

/// Intervals advertised to fans (from `Config`).
#[derive(Debug, Clone, Copy)]
pub struct Intervals {
    /// Poll interval, **ms**.
    pub poll_ms: u64,
    /// Heartbeat interval, **ms**.
    pub heartbeat_ms: u64,
    /// Ready window, places (used until the admitter has published one).
    pub ready_window: u64,
}

impl StatusDoc {
    /// Builds the document from figures read at `now` (epoch s) and the event's meter.
    pub fn build(f: &Figures, iv: Intervals, meter: &RateMeter, now: i64) -> Self {
        let moving = matches!(f.meta.state, EventState::Open);
        Self {
            event: f.meta.id.to_string(),
            state: f.meta.state.public(),
            opens_at: f.meta.opens_at,
            cursor: f.cursor,
            queue_length: f.queue_length(),
            admit_rate: f.meta.admit_rate,
            admitted_per_sec: meter.admitted_per_sec(),
            max_active: f.meta.max_active,
            active: f.active,
            sold_out: f.meta.state == EventState::SoldOut,
            poll_interval_ms: iv.poll_ms,
            heartbeat_interval_ms: iv.heartbeat_ms,
            ready_window: if f.ready_window > 0 {
                f.ready_window
            } else {
                iv.ready_window
            },
            pow_difficulty: f.meta.pow_bits,
            wait: meter.estimate(moving, f.meta.admit_rate),
            booking_url: f.meta.booking_url.clone(),
            updated_at: now,
        }
    }
}

/// The in-memory board of status documents and rate meters, one per event; whole documents
/// are swapped in.
#[derive(Debug, Default)]
pub struct StatusBoard {
    docs: RwLock<HashMap<EventId, StatusDoc>>,
    meters: Mutex<HashMap<EventId, RateMeter>>,
}

impl StatusBoard {
    /// The current document of `event`, if one was published.
    pub fn get(&self, event: &EventId) -> Option<StatusDoc> {
        self.docs.read().ok()?.get(event).cloned()
    }

    /// Replaces `event`'s document.
    pub fn publish(&self, event: EventId, doc: StatusDoc) {
        if let Ok(mut g) = self.docs.write() {
            g.insert(event, doc);
        }
    }

    /// Samples `f` at `now_ms` (epoch ms) into the event's meter and builds its document.
    pub fn build(&self, f: &Figures, iv: Intervals, now_ms: i64) -> StatusDoc {
        let now = now_ms.div_euclid(1000);
        let mut g = match self.meters.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let m = g.entry(f.meta.id.clone()).or_default();
        m.record(now_ms, f.cursor, f.admitted_total);
        StatusDoc::build(f, iv, m, now)
    }
}
