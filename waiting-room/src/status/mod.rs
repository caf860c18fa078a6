//! The public status document (API.md "Status document"). Rebuilt whole from the store's
//! figures by the admitter tick (and right after an operator change) and kept in memory, so
//! `GET /status/{event}.json` never costs a store call; the CDN caches it for `max-age`. The
//! board also keeps each event's [`RateMeter`] (measured speeds and the wait estimate).
//!
//! Every document carries `version`, the store's state generation: a document never replaces
//! one with a larger `(version, cursor)` — not on the board, not in a [`StatusSink`] — so a
//! stale builder cannot make a sold-out or closed event look open again (seed 000, "The live
//! status document": the last bug found before launch). [`publisher`] decides *when* to write
//! (transition and throttle latches), [`dir`] and [`s3`] are the sinks.

pub mod dir;
pub mod publisher;
pub mod s3;

pub use dir::DirSink;
pub use publisher::{Decision, LatchedPublisher, PublishRules, Published, StatusPublisher};
pub use s3::S3Sink;

use crate::domain::{EventId, EventState, Figures};
use crate::rates::{RateMeter, WaitEstimate};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

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
    /// Path of the event's verifiable pre-queue draw (`GET /api/events/{event}/draw`: the
    /// commitment before opening, the seed and hashed visitor list after; issue 15 item 1).
    pub draw: String,
    /// Places in live holds while nothing can be held: the line waits until they come back
    /// (the closed loop's stock rule); 0 = not waiting for stock.
    pub waiting_for_stock: u64,
    /// The operator's broadcast message to everyone waiting (`null` when none; plain text per
    /// language, issue 14 item 3): shown within one poll. Setting or clearing it bumps
    /// `version`, so the new document is published at once and gets a new `ETag`.
    pub broadcast: Option<crate::broadcast::Broadcast>,
    /// How the line runs: `scheduled`, `always_on`, `pass_through` or `maintenance`
    /// ([`crate::mode`]); pages show the maintenance notice in `maintenance`.
    pub mode: crate::mode::QueueMode,
    /// The event's scheduled phases (epoch s), or `null` ([`crate::phases`]).
    pub phases: Option<crate::phases::Phases>,
    /// When this content was built, epoch seconds. On the board (`GET /status/{event}.json`) a
    /// rebuild that changes nothing else keeps the earlier time ([`StatusBoard::publish`]).
    pub updated_at: i64,
    /// The store's state generation when the figures were read (`Figures::state_gen`): grows
    /// on every state change, so of two documents the one with the larger `(version, cursor)`
    /// is the newer; writers never replace a newer one.
    pub version: u64,
}

/// The status document's `Cache-Control`: public for `max_age_secs`, and
/// `stale-while-revalidate=1` so that a CDN (nginx honours it) answers the polls that arrive
/// while one request refreshes an expired copy with that copy — at most `max-age` + 1 s old —
/// instead of sending every one of them to the origin. The first poll after an idle gap is not
/// one of them: it refreshes the copy itself and gets the new document.
pub fn cache_control(max_age_secs: u64) -> String {
    format!("public, max-age={max_age_secs}, stale-while-revalidate=1")
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
        // `opening` (the pre-queue being numbered) is public `open`, and the cursor moves as
        // soon as it is done: the page needs the configured range then, not `held` zeros, which
        // it read as a point (its fallback to `admit_rate`, low = high). In the seed rehearsal
        // on a slower machine, the fans that read the document while opening were shown one
        // figure instead of a range (70.0 % of fans inside the range shown, goal 90 %).
        let estimating = moving || f.meta.state == EventState::Opening;
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
            wait: meter.estimate(estimating, f.meta.admit_rate),
            booking_url: f.meta.booking_url.clone(),
            draw: format!("/api/events/{}/draw", f.meta.id),
            waiting_for_stock: if moving { f.meta.stock_wait } else { 0 },
            broadcast: f.broadcast.clone(),
            mode: f.mode,
            phases: f.phases,
            updated_at: now,
            version: f.state_gen,
        }
    }

    /// What the gauges take from this document ([`crate::telemetry::record_figures`]).
    pub fn derived(&self) -> crate::telemetry::Derived {
        crate::telemetry::Derived {
            queue_length: self.queue_length,
            admitted_per_sec: self.admitted_per_sec,
            places_per_sec: self.wait.places_per_sec,
        }
    }

    /// The order of documents of one event: `(version, cursor)`, both only grow.
    pub fn order(&self) -> (u64, u64) {
        (self.version, self.cursor)
    }

    /// The JSON body as published (the bytes every sink writes).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// What a sink did with one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// The document was written (it replaced an older one or none).
    Written,
    /// A newer document (larger `(version, cursor)`) was already there: nothing written.
    Stale,
}

/// Where published documents go: overwritten whole, conditionally on being newer than what is
/// there (unless built [`without the version guard`](DirSink::without_version_guard), which
/// only tests use to show the stale-overwrite bug).
#[async_trait::async_trait]
pub trait StatusSink: Send + Sync + std::fmt::Debug {
    /// Short name for metrics and logs (`dir`, `s3`).
    fn name(&self) -> &'static str;
    /// Writes `doc` whole unless a newer document of the same event is already there.
    async fn put(&self, doc: &StatusDoc) -> anyhow::Result<Put>;
}

/// The sinks named by the configuration: `status_dir` ([`DirSink`]) and `s3_bucket`
/// ([`S3Sink`] from the standard AWS configuration), in that order.
pub async fn sinks_from_config(c: &crate::Config) -> Vec<std::sync::Arc<dyn StatusSink>> {
    let mut sinks: Vec<std::sync::Arc<dyn StatusSink>> = Vec::new();
    if let Some(dir) = &c.status_dir {
        sinks.push(std::sync::Arc::new(DirSink::new(dir)));
    }
    if let Some(bucket) = &c.s3_bucket {
        let age = c.status_max_age_secs;
        sinks.push(std::sync::Arc::new(
            S3Sink::from_env(bucket, &c.s3_prefix, age).await,
        ));
    }
    sinks
}

/// A document on the board with its JSON body and `ETag`, made once when published so
/// `GET /status/{event}.json` copies no document and builds no JSON (a reference-counted
/// `Bytes` clone per request).
#[derive(Debug)]
struct Posted {
    doc: StatusDoc,
    body: axum::body::Bytes,
    etag: axum::http::HeaderValue,
}

impl Posted {
    fn new(doc: StatusDoc) -> Self {
        let body: axum::body::Bytes = doc.to_bytes().into();
        let etag = etag_of(&body);
        Self { doc, body, etag }
    }
}

/// A strong `ETag` of `body`: the first 16 bytes of its SHA-256, hex, quoted.
pub fn etag_of(body: &[u8]) -> axum::http::HeaderValue {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body);
    let tag = format!("\"{}\"", hex_of(&digest[..16]));
    axum::http::HeaderValue::from_str(&tag).unwrap_or(axum::http::HeaderValue::from_static("\"\""))
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `new` says nothing `old` does not: equal but for `updated_at`.
fn same_content(old: &StatusDoc, new: &StatusDoc) -> bool {
    old.updated_at <= new.updated_at
        && *old
            == StatusDoc {
                updated_at: old.updated_at,
                ..new.clone()
            }
}

/// The in-memory board of status documents and rate meters, one per event; whole documents
/// are swapped in.
#[derive(Debug, Default)]
pub struct StatusBoard {
    docs: RwLock<HashMap<EventId, Arc<Posted>>>,
    meters: Mutex<HashMap<EventId, RateMeter>>,
}

impl StatusBoard {
    fn posted(&self, event: &EventId) -> Option<Arc<Posted>> {
        self.docs.read().ok()?.get(event).cloned()
    }

    /// The current document of `event`, if one was published.
    pub fn get(&self, event: &EventId) -> Option<StatusDoc> {
        self.posted(event).map(|p| p.doc.clone())
    }

    /// The current document's JSON body (the bytes [`StatusDoc::to_bytes`] gives), if one was
    /// published.
    pub fn body(&self, event: &EventId) -> Option<axum::body::Bytes> {
        self.posted(event).map(|p| p.body.clone())
    }

    /// The current document's JSON body and its strong `ETag`, if one was published.
    pub fn body_and_etag(
        &self,
        event: &EventId,
    ) -> Option<(axum::body::Bytes, axum::http::HeaderValue)> {
        self.posted(event).map(|p| (p.body.clone(), p.etag.clone()))
    }

    /// The queue mode of `event`'s current document (this node's view, refreshed at every
    /// admitter tick and right after an operator change), if one was published.
    pub fn mode(&self, event: &EventId) -> Option<crate::mode::QueueMode> {
        self.posted(event).map(|p| p.doc.mode)
    }

    /// The admit rate and `max_active` of `event`'s current document, if one was published.
    pub fn knobs(&self, event: &EventId) -> Option<(f64, u64)> {
        self.posted(event)
            .map(|p| (p.doc.admit_rate, p.doc.max_active))
    }

    /// The proof-of-work difficulty (bits) of `event`'s current document, if one was published.
    pub fn pow_bits(&self, event: &EventId) -> Option<u32> {
        self.posted(event).map(|p| p.doc.pow_difficulty)
    }

    /// Replaces `event`'s document unless the board holds a newer one (larger
    /// `(version, cursor)`); `true` when replaced. A document that differs from the posted one
    /// only by a later `updated_at` keeps the posted one (and its `ETag`): `updated_at` is when
    /// the content last changed, so an unchanged document answers `304 Not Modified` to a CDN
    /// revalidating it rather than a new copy every second.
    pub fn publish(&self, event: EventId, doc: StatusDoc) -> bool {
        let Ok(mut g) = self.docs.write() else {
            return false;
        };
        match g.get(&event) {
            Some(old) if old.doc.order() > doc.order() => false,
            Some(old) if same_content(&old.doc, &doc) => true,
            _ => {
                g.insert(event, Arc::new(Posted::new(doc)));
                true
            }
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
        let moving = matches!(f.meta.state, EventState::Open);
        m.record(now_ms, f.cursor, f.admitted_total, moving);
        StatusDoc::build(f, iv, m, now)
    }
}
