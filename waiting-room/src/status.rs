//! The public status document (API.md "Status document"). Rebuilt whole from the store's
//! figures by the admitter tick (and right after an operator change) and kept in memory, so
//! `GET /status/{event}.json` never costs a store call; the CDN caches it for `max-age`.

use crate::domain::{EventId, EventState, Figures};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::RwLock;

/// One event's status document.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatusDoc {
    /// Event id.
    pub event: String,
    /// Public state (`opening` shows as `open`).
    pub state: &'static str,
    /// Opening time, epoch seconds.
    pub opens_at: i64,
    /// Numbers `<=` cursor may claim admission.
    pub cursor: u64,
    /// Fans waiting (numbered above the cursor plus the pre-queue).
    pub queue_length: u64,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Most concurrent admitted sessions.
    pub max_active: u64,
    /// Live admissions and invitations.
    pub active: u64,
    /// Whether the event is sold out.
    pub sold_out: bool,
    /// How often fans should poll, milliseconds.
    pub poll_interval_ms: u64,
    /// Booking core base URL.
    pub booking_url: String,
    /// When this document was built, epoch seconds.
    pub updated_at: i64,
}

impl StatusDoc {
    /// Builds the document from figures read at `now` (epoch s).
    pub fn build(f: &Figures, poll_interval_ms: u64, now: i64) -> Self {
        Self {
            event: f.meta.id.to_string(),
            state: f.meta.state.public(),
            opens_at: f.meta.opens_at,
            cursor: f.cursor,
            queue_length: f.queue_length(),
            admit_rate: f.meta.admit_rate,
            max_active: f.meta.max_active,
            active: f.active,
            sold_out: f.meta.state == EventState::SoldOut,
            poll_interval_ms,
            booking_url: f.meta.booking_url.clone(),
            updated_at: now,
        }
    }
}

/// The in-memory board of status documents, one per event; whole documents are swapped in.
#[derive(Debug, Default)]
pub struct StatusBoard {
    docs: RwLock<HashMap<EventId, StatusDoc>>,
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
}
