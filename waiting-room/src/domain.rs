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
    /// A fresh random visitor id: a v4 UUID from the thread-local CSPRNG (`rand`'s
    /// `ThreadRng`, ChaCha12 reseeded from the OS) rather than one `getrandom` system call per id.
    pub fn random() -> Self {
        Self(
            uuid::Builder::from_random_bytes(rand::random())
                .into_uuid()
                .to_string(),
        )
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
/// pre-queue is being numbered in the draw's order (reported to fans as `open`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventState {
    /// Before opening: joins accepted, no queue numbers yet.
    Prequeue,
    /// The pre-queue is being numbered in draw order (bounded chunks); the cursor waits.
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
    /// Proof-of-work difficulty of a new join, leading zero **bits** of SHA-256 (0 = off).
    pub pow_bits: u32,
    /// The line waits for stock: nothing can be held, and this many places are in live holds
    /// that may come back (set by the closed loop; 0 = not waiting). The admitter lets nobody
    /// in meanwhile, so no fan is admitted to an empty map.
    pub stock_wait: u64,
    /// IANA time zone the event's local times are read in and shown in (issue 17 item 4;
    /// DECISIONS "Waiting-room events get a time zone field of their own"; default `UTC`).
    pub time_zone: String,
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
    /// People ahead (issue 18 item 5; DECISIONS.md "People ahead"): `queue_number − cursor −
    /// 1` minus the places between the cursor and this number whose fans left the line
    /// (the store's `QueueStore::leave`); 0 once the cursor reached the
    /// number; `None` without a number. Counted by the store in the same read (O(log n) on
    /// Redis: one `ZCOUNT`).
    pub ahead: Option<u64>,
}

impl Position {
    /// [`Position::ahead`] from the number, the cursor and the vacated places strictly between
    /// them (`vacated_between`).
    pub fn ahead_of(queue_number: Option<u64>, cursor: u64, vacated_between: u64) -> Option<u64> {
        queue_number.map(|n| {
            n.saturating_sub(cursor)
                .saturating_sub(1)
                .saturating_sub(vacated_between)
        })
    }
}

/// What the store's `QueueStore::leave` did ("Leave the line", issue 18
/// item 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// The fan's number (above the cursor) is free: the people behind have one fewer ahead.
    Vacated(u64),
    /// The fan left the pre-queue (no number yet).
    Unqueued,
    /// Nothing to leave: no place, or the cursor already reached the number (the invitation
    /// or admission runs its course).
    NotWaiting,
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
    /// The cursor skipped this fan while silent; they came back within the rejoin grace and are
    /// invited at the next admitter tick (retry shortly; the place is kept).
    Returning {
        /// The fan's number (below the cursor).
        queue_number: u64,
    },
    /// Skipped and back too late: the place is gone (a join gives a new number at the back).
    Lost {
        /// The number the fan had.
        queue_number: u64,
    },
}

/// How long an admission lives and how long its `max_active` slot outlives it (case W10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionTerms {
    /// Token lifetime: `exp = iat + ttl_secs`, **seconds**.
    pub ttl_secs: u64,
    /// The slot stays taken until `exp + slot_tail_secs`, **seconds**: the configured
    /// `max_clock_skew_secs`, because a booking door whose clock is that far behind accepts the
    /// token until then (DECISIONS "Tokens, capacity and clocks").
    pub slot_tail_secs: u64,
}

impl AdmissionTerms {
    /// Terms with a lifetime and a slot tail, both **seconds**.
    pub const fn new(ttl_secs: u64, slot_tail_secs: u64) -> Self {
        Self {
            ttl_secs,
            slot_tail_secs,
        }
    }
}

/// Liveness rules of one admitter tick (DESIGN.md "Liveness"; defaults in `Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// A fan in the ready window whose last sign of life is older than this is silent, **ms**.
    pub silence_ms: u64,
    /// Places right behind the cursor whose fans must heartbeat (fans further back are presumed
    /// live and send nothing).
    pub ready_window: u64,
    /// Most queue numbers the cursor examines (and window entries it stamps) per tick.
    pub scan_limit: u64,
}

/// What the cursor may do in one tick (the store's `advance_cursor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvanceParams {
    /// Admission tokens available: live fans to invite at most.
    pub n: u64,
    /// Most live admissions plus fresh invitations.
    pub max_active: u64,
    /// Now, epoch **milliseconds**.
    pub now_ms: i64,
    /// How long an unclaimed invitation holds a slot, **seconds**.
    pub invite_grace_secs: u64,
    /// Liveness rules.
    pub liveness: Liveness,
}

/// Where a fan stands, as a heartbeat reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// No number yet (pre-queued) or never joined.
    Unnumbered,
    /// Further back than the ready window: presumed live, no heartbeat needed yet.
    Waiting,
    /// In the ready window: heartbeat recorded, keep sending them.
    Ready,
    /// The cursor has reached the fan: claim admission now.
    YourTurn,
    /// Skipped while silent, back within the rejoin grace: invited at the next tick.
    Returning,
    /// Skipped and back too late.
    Lost,
    /// Holds an admission already.
    Admitted,
}

impl Place {
    /// Wire name (`waiting`, `ready`, `your_turn`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unnumbered => "unnumbered",
            Self::Waiting => "waiting",
            Self::Ready => "ready",
            Self::YourTurn => "your_turn",
            Self::Returning => "returning",
            Self::Lost => "lost",
            Self::Admitted => "admitted",
        }
    }
    /// Parses the wire name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Unnumbered,
            Self::Waiting,
            Self::Ready,
            Self::YourTurn,
            Self::Returning,
            Self::Lost,
            Self::Admitted,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }
}

/// Answer of a heartbeat (one store call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// The fan's number, if numbered.
    pub queue_number: Option<u64>,
    /// The cursor.
    pub cursor: u64,
    /// Event state.
    pub state: EventState,
    /// Where the fan stands.
    pub place: Place,
}

/// Which session the booking core reports finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionRef {
    /// By the admission token's `jti`.
    Jti(String),
    /// By visitor id (the token's `sub`).
    Visitor(String),
}

/// Result of ending a session (idempotent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEnd {
    /// The session held a `max_active` slot and no longer does.
    Ended,
    /// Already ended (or expired) before this call.
    AlreadyEnded,
    /// No admission with that `jti` / visitor.
    Unknown,
}

/// One recorded operator action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// When, epoch **seconds**.
    pub at: i64,
    /// Who: the operator name sent with the admin token (`X-Operator`), or `service`.
    pub operator: String,
    /// What: `create`, `set_admit_rate`, `set_max_active`, `pause`, `resume`, `open`, …
    pub action: String,
    /// The value before (JSON; `null` when none).
    pub old: serde_json::Value,
    /// The value after (JSON).
    pub new: serde_json::Value,
}

/// One sample of an event's sale report (issue "closed loop and report", item 2), taken every
/// `report_sample_secs` by the one node that holds the event's report lock and kept in the
/// store, so every node builds the same report. The waiting room's figures are the store's
/// cumulative ones (they are also the `wr_…` gauges of `/metrics`); `booking` is what the
/// booking core's `/internal/load` said since the previous sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSample {
    /// When, epoch **milliseconds**.
    pub at_ms: i64,
    /// The event's state then.
    pub state: EventState,
    /// Highest queue number handed out.
    pub last_number: u64,
    /// The admission cursor.
    pub cursor: u64,
    /// Fans in the pre-queue.
    pub prequeued: u64,
    /// Live admissions and invitations.
    pub active: u64,
    /// Admissions ever granted.
    pub admitted_total: u64,
    /// Places the cursor skipped ever (fans who left the line).
    pub skipped_total: u64,
    /// Sessions the booking core ended early ever (paid, released, left).
    pub ended_total: u64,
    /// The admit rate then, fans per **second** (the operator's or the closed loop's).
    pub admit_rate: f64,
    /// `max_active` then.
    pub max_active: u64,
    /// Places in live holds the line waited for (the stock rule; 0 when not waiting).
    pub stock_wait: u64,
    /// The booking core's figures since the previous sample, every node summed; `None` when
    /// it could not be read.
    pub booking: Option<BookingSample>,
}

/// What the booking core did between two report samples, every node summed (a node seen for
/// the first time, or restarted, counts everything since its start).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BookingSample {
    /// Hold-latency bucket bounds, ms (`None` = +Inf).
    pub bounds_ms: Vec<Option<u64>>,
    /// Hold requests per bucket in the interval, cumulative over the buckets.
    pub hold_counts: Vec<u64>,
    /// Fan calls answered in the interval.
    pub requests: u64,
    /// Of them, 5xx.
    pub server_errors: u64,
    /// Seats and places of the show sold at the read (cumulative).
    pub sold: i64,
    /// Bookings (paid holds) of the show at the read, whatever their size (cumulative).
    #[serde(default)]
    pub bookings: i64,
    /// In live holds at the read.
    pub held: i64,
    /// Free at the read.
    pub free: i64,
    /// Holds of the show that ended, by why, at the read (cumulative; lapsed holds not yet
    /// swept count as expired).
    #[serde(default)]
    pub ended: sale_common::load::HoldEnds,
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
    /// Fans in the ready window whose last sign of life is older than the silence grace.
    pub silent: u64,
    /// Skipped fans who came back and wait for the next tick.
    pub returning: u64,
    /// Places above the cursor whose fans left the line (the cursor skips them).
    pub left: u64,
    /// Places the cursor skipped, ever.
    pub skipped_total: u64,
    /// Sessions ended early by the booking core, ever.
    pub ended_total: u64,
    /// Ready window (places) the admitter last used; 0 before the first tick.
    pub ready_window: u64,
    /// State generation: grows on every public state change (created, opened, paused, resumed,
    /// sold out, closed, reopened) to `max(gen + 1, store time in ms)`, so it also grows across
    /// a store emptied and refilled. Status documents carry it as `version`.
    pub state_gen: u64,
    /// The operator's broadcast message, if one is set ([`crate::broadcast`]).
    pub broadcast: Option<crate::broadcast::Broadcast>,
    /// How the line runs ([`crate::mode`]).
    pub mode: crate::mode::QueueMode,
    /// The event's scheduled phases, if set ([`crate::phases`]).
    pub phases: Option<crate::phases::Phases>,
}

impl Figures {
    /// Live fans still waiting: numbered above the cursor, minus the silent ones in the ready
    /// window and the places whose fans left the line, plus returning fans and the pre-queue. Fans behind the ready window are presumed
    /// live: they are not asked to heartbeat, so nothing could say otherwise.
    pub fn queue_length(&self) -> u64 {
        self.last_number
            .saturating_sub(self.cursor)
            .saturating_sub(self.silent)
            .saturating_sub(self.left)
            + self.returning
            + self.prequeued
    }
}
