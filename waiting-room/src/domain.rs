//! Domain vocabulary of the queue: event ids, visitor ids, event states and the records the store
//! hands back. Parsed at the edge (STYLE.md rule 3); no axum, no redis in here.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An event id, `[a-z0-9-]{1,40}` (API.md "Waiting room"). Safe inside Redis keys and URLs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EventId(String);

impl EventId {
    /// Parses an event id; `None` unless it matches `[a-z0-9-]{1,40}`.
    pub fn parse(s: &str) -> Option<Self> {
        let ok = !s.is_empty()
            && s.len() <= 40
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        ok.then(|| Self(s.to_owned()))
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for EventId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s).ok_or_else(|| format!("invalid event id {s:?}: want [a-z0-9-]{{1,40}}"))
    }
}

impl From<EventId> for String {
    fn from(e: EventId) -> Self {
        e.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A visitor id. Always chosen by the server (a UUID v4), never by the client (case W04).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VisitorId(String);

impl VisitorId {
    /// A fresh random visitor id.
    pub fn random() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }
    /// Wraps an id taken from a verified join token (the server minted it).
    pub fn from_verified(s: String) -> Self {
        Self(s)
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Lifecycle of an event (API.md "States"), plus the internal `opening` state while the
/// pre-queue is being shuffled into queue numbers (reported to fans as `open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventState {
    /// Before opening: joins accepted, no queue numbers yet.
    Prequeue,
    /// The pre-queue is being numbered in random order (bounded chunks); the cursor waits.
    Opening,
    /// Numbers assigned FIFO, the admitter moves the cursor.
    Open,
    /// The admitter holds the cursor; claims refused.
    Paused,
    /// No more joins or claims.
    Closed,
    /// Like closed, reported as sold out.
    SoldOut,
}

impl EventState {
    /// Wire name (`prequeue`, `open`, …). `opening` is shown as `open` to fans.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prequeue => "prequeue",
            Self::Opening => "opening",
            Self::Open => "open",
            Self::Paused => "paused",
            Self::Closed => "closed",
            Self::SoldOut => "sold_out",
        }
    }
    /// The state as fans see it (`opening` → `open`).
    pub fn public(self) -> &'static str {
        match self {
            Self::Opening => "open",
            s => s.as_str(),
        }
    }
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "prequeue" => Self::Prequeue,
            "opening" => Self::Opening,
            "open" => Self::Open,
            "paused" => Self::Paused,
            "closed" => Self::Closed,
            "sold_out" => Self::SoldOut,
            _ => return None,
        })
    }
}

/// The settings and state of one event as the store keeps them.
#[derive(Debug, Clone, PartialEq)]
pub struct EventMeta {
    /// Event id.
    pub id: EventId,
    /// Current state.
    pub state: EventState,
    /// Opening time, Unix epoch **seconds**.
    pub opens_at: i64,
    /// Admissions per **second** (f64 > 0).
    pub admit_rate: f64,
    /// Most concurrently admitted sessions.
    pub max_active: u64,
    /// Lifetime of an admission, **seconds**.
    pub admission_ttl_secs: u64,
    /// The booking core's public base URL.
    pub booking_url: String,
}

/// Answer of a join: the place, if numbered yet (`None` while pre-queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinOutcome {
    /// Queue number, `None` before opening (pre-queue) or when the event no longer takes joins.
    pub queue_number: Option<u64>,
    /// State of the event when the join was applied.
    pub state: EventState,
}

/// A fan's view of their place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Queue number, `None` while pre-queued (or never joined).
    pub queue_number: Option<u64>,
    /// Every number `<=` cursor may claim admission.
    pub cursor: u64,
    /// Event state.
    pub state: EventState,
    /// Whether this visitor holds an admission.
    pub admitted: bool,
}

/// A stored admission (idempotent: claiming again returns the same one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Token id.
    pub jti: String,
    /// Issued at, epoch **seconds**.
    pub iat: i64,
    /// Expires at, epoch **seconds**.
    pub exp: i64,
}

/// Result of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// Admitted (new or the stored one again).
    Admitted(Admission),
    /// Number above the cursor (or not numbered yet: `queue_number` None).
    NotYourTurn {
        /// The fan's number.
        queue_number: Option<u64>,
        /// The cursor.
        cursor: u64,
    },
    /// The event refuses claims in this state.
    Refused(EventState),
}

/// The live figures of one event, read whole from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Settings and state.
    pub meta: EventMeta,
    /// Admission cursor.
    pub cursor: u64,
    /// Highest queue number handed out (0 when none).
    pub last_number: u64,
    /// Fans waiting in the pre-queue (no number yet).
    pub prequeued: u64,
    /// Admissions (and fresh invitations) not yet expired.
    pub active: u64,
    /// Admissions ever granted.
    pub admitted_total: u64,
    /// Highest `active` ever observed at a claim.
    pub max_active_seen: u64,
}

impl Figures {
    /// Fans still waiting: numbered above the cursor plus the pre-queue.
    pub fn queue_length(&self) -> u64 {
        self.last_number.saturating_sub(self.cursor) + self.prequeued
    }
}
