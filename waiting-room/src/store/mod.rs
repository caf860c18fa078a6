//! The queue store: one trait, two backends (in-memory, the embedded default; Redis for many
//! nodes), one conformance suite (`tests/conformance.rs`). DESIGN.md "State and its one owner":
//! every multi-key change is one atomic step — one `Mutex` critical section in memory, one Lua
//! script on Redis (one server or a Redis Cluster), where every key of an event shares the
//! `{event}` hash tag and every key a script touches is declared in its `KEYS`.
//!
//! **Queue numbers** are integers from an atomic counter, stored as integer strings in a hash
//! (visitor → number), never as sorted-set scores, so order is the order joins were applied and
//! never derived from ids (case W04). On Redis the counter passes through Lua numbers (doubles),
//! so numbers are exact up to 2^53 (~9·10^15 joins), far past 2^32.
//!
//! **Opening without stalling the store.** Before opening, joiners go into a pre-queue ranked
//! by the event's verifiable draw (`crate::draw`: rank = first 52 bits of HMAC-SHA256(seed,
//! public id), ties by public id; DECISIONS.md "Waiting room and cluster"), no number yet.
//! `begin_open` is one atomic step: state → `opening`, capture the pre-queue size `n` and the
//! first number it gets, and move the FIFO counter past it, so every later join gets `n+1, n+2,
//! …` — behind all pre-queued fans — while the numbering is still running. Then `open_chunk` is
//! called until the pre-queue is empty; each call is one short atomic step that takes up to
//! `max` fans of lowest rank (Redis: `ZPOPMIN` on a sorted set scored by the rank, members
//! `"{public id}:{visitor}"`) and gives them the next numbers. The order is fixed by the seed
//! once the pre-queue closes, so it is the same however the chunks fall and anyone can recompute
//! it once the seed is published. The last chunk sets state `open`. A million pre-queued fans
//! cost ~100 scripts of 10 000 members, each a few ms.

pub mod access;
pub mod draw;
pub mod memory;
pub mod redis;

use crate::domain::{
    AdmissionTerms, AdvanceParams, AuditEntry, ClaimOutcome, EventId, EventMeta, EventState,
    Figures, Heartbeat, JoinOutcome, Left, Position, ReportSample, SessionEnd, SessionRef,
    VisitorId,
};
use crate::draw::Draw;
use crate::lanes::{AddressRule, ShadowEntry};
use async_trait::async_trait;

/// Store failures. `NotFound` is a client error (404); `Unavailable` becomes 503 + Retry-After.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No such event.
    #[error("no such event")]
    NotFound,
    /// The store did not answer (or answered nonsense).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store is at its memory cap and refuses writes that would grow it (Redis `OOM` with
    /// `maxmemory-policy noeviction`, case W14); reads and in-place updates still work.
    #[error("store full: {0}")]
    Full(String),
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// Result of one cursor advance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advance {
    /// Cursor after the step.
    pub cursor: u64,
    /// Live fans the cursor invited this step (numbers passed minus skipped ones).
    pub moved: u64,
    /// Places the cursor skipped this step: silent fans, and places whose fans left the line.
    pub skipped: u64,
    /// Skipped fans who had come back and were invited this step.
    pub returned: u64,
}

/// Most numbers one [`QueueStore::numbered`] call reads.
pub const NUMBERED_CHUNK: u64 = 10_000;

/// Most address rules per event (`put_rule` beyond it is refused by the admin API).
pub const RULES_MAX: usize = 1_000;

/// What [`QueueStore::put_rule`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleAdded {
    /// Stored.
    Added,
    /// The event has its maximum number of rules: nothing stored.
    Full,
    /// A rule on the same range exists (this one): nothing stored.
    SameRange(AddressRule),
}

/// Most audit entries kept per event (older ones are dropped).
pub const AUDIT_KEEP: usize = 10_000;

/// Report samples kept per event: 17,280 = two days at the default 10 s (about 400 bytes
/// each in Redis, ~7 MB per event at most).
pub const REPORT_KEEP: usize = 17_280;

/// The queue's state, shared by every waiting-room node.
#[async_trait]
pub trait QueueStore: Send + Sync + std::fmt::Debug + 'static {
    /// Answers when the store is reachable (readyz).
    async fn ping(&self) -> StoreResult<()>;
    /// Creates an event in `prequeue` state unless it exists (`NX`); `true` when created.
    async fn create_event(&self, meta: &EventMeta) -> StoreResult<bool>;
    /// Settings and state of an event, `None` when unknown.
    async fn event(&self, event: &EventId) -> StoreResult<Option<EventMeta>>;
    /// All event ids.
    async fn list_events(&self) -> StoreResult<Vec<EventId>>;
    /// Operator knobs; a `None` leaves the value. `NotFound` for an unknown event.
    async fn set_knobs(
        &self,
        event: &EventId,
        admit_rate: Option<f64>,
        max_active: Option<u64>,
    ) -> StoreResult<()>;
    /// Sets the proof-of-work difficulty of new joins (leading zero bits; 0 = off).
    async fn set_pow(&self, event: &EventId, bits: u32) -> StoreResult<()>;
    /// Sets [`EventMeta::stock_wait`] (places in live holds while nothing can be held; 0 = the
    /// line does not wait for stock).
    async fn set_stock_wait(&self, event: &EventId, in_play: u64) -> StoreResult<()>;
    /// Sets (`Some`) or clears (`None`) the event's broadcast message in one atomic step and
    /// returns the one it replaced. A change bumps the state generation, so the status
    /// document carrying it is published at once (transition latch) and replaces the old one
    /// in every sink. `NotFound` for an unknown event.
    async fn set_broadcast(
        &self,
        event: &EventId,
        message: Option<&crate::broadcast::Broadcast>,
    ) -> StoreResult<Option<crate::broadcast::Broadcast>>;
    /// Sets the event's queue mode ([`crate::mode`]) in one atomic step and returns the one it
    /// replaced; a change bumps the state generation (published at once). `NotFound` for an
    /// unknown event.
    async fn set_mode(
        &self,
        event: &EventId,
        mode: crate::mode::QueueMode,
    ) -> StoreResult<crate::mode::QueueMode>;
    /// The event's queue mode (`scheduled` unless set). `NotFound` for an unknown event.
    async fn mode(&self, event: &EventId) -> StoreResult<crate::mode::QueueMode>;
    /// Sets (`Some`) or clears the event's schedule ([`crate::phases`]) in one atomic step:
    /// a schedule also sets `opens_at` to its `sale_opens_at`; either way the applied-phase
    /// marker goes back to 0. Returns the schedule it replaced. `NotFound` for an unknown event.
    async fn set_phases(
        &self,
        event: &EventId,
        phases: Option<&crate::phases::Phases>,
    ) -> StoreResult<Option<crate::phases::Phases>>;
    /// The event's schedule and the number of the last phase applied (0 = none).
    /// `NotFound` for an unknown event.
    async fn phases(&self, event: &EventId) -> StoreResult<(Option<crate::phases::Phases>, u8)>;
    /// Compare-and-set of the applied-phase marker: `from` → `to`; `true` when moved (so a
    /// phase is applied once even if two nodes ever both thought they held the admitter lock).
    async fn phase_done(&self, event: &EventId, from: u8, to: u8) -> StoreResult<bool>;
    /// Compare-and-set of the state: moves to `to` only from one of `from` (and not from `to`
    /// itself). Returns the state after the call and whether THIS call moved it: of two
    /// concurrent identical calls one is `(to, true)`, the other `(to, false)` (the state after
    /// alone cannot tell them apart, and both would be audited as the change).
    async fn transition(
        &self,
        event: &EventId,
        from: &[EventState],
        to: EventState,
    ) -> StoreResult<(EventState, bool)>;
    /// Joins with `NX` semantics (case W05): a visitor who already has a place keeps it; before
    /// opening the visitor goes into the pre-queue; after, gets the next FIFO number. Closed or
    /// sold-out events take no new fans (`queue_number: None`). A re-join is a sign of life: a
    /// skipped fan back within `rejoin_grace_ms` keeps the place (invited at the next tick), one
    /// back later gets a new number at the back. A new number inside the ready window starts its
    /// silence clock at `now_ms` (epoch ms).
    async fn join(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<JoinOutcome>;
    /// A fan's sign of life (one atomic step): refreshes the silence clock when the fan is in the
    /// ready window, brings a skipped fan back within `rejoin_grace_ms`, reports the place.
    async fn heartbeat(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<Heartbeat>;
    /// A visitor's place, the cursor, the state and the people ahead in one read.
    async fn position(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Position>;
    /// "Leave the line" (issue 18 item 5), one atomic step: a numbered fan above the cursor
    /// gives the number up — it joins the event's vacated places (Redis: sorted set
    /// `wr:{event}:vac` scored by number), which [`QueueStore::position`] subtracts from the
    /// people ahead of everyone behind and the cursor skips without an invitation (removing
    /// it then, so every vacated place stays above the cursor); a pre-queued fan leaves the
    /// pre-queue. The visitor keeps nothing: a later join is a new place at the back.
    async fn leave(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Left>;
    /// `prequeue` → `opening`; returns the pre-queue size `n` (later joins get numbers > n).
    /// Does nothing (returns 0) in any other state.
    async fn begin_open(&self, event: &EventId) -> StoreResult<u64>;
    /// Numbers up to `max` pre-queued fans in draw order (lowest rank first, `crate::draw`);
    /// returns how many remain. When none remain and the state is `opening`, sets `open`.
    async fn open_chunk(&self, event: &EventId, max: u64) -> StoreResult<u64>;
    /// The event's draw: its seed (created with the event; an event stored before the draw
    /// existed gets one on first use, before any pre-queue join can be ranked), state, and once
    /// opening began, the numbers the pre-queue got. `NotFound` for an unknown event.
    async fn draw(&self, event: &EventId) -> StoreResult<Draw>;
    /// The visitors holding numbers `first ..= first + count - 1` (`None` where no one does),
    /// in number order; callers read at most [`NUMBERED_CHUNK`] per call.
    async fn numbered(
        &self,
        event: &EventId,
        first: u64,
        count: u64,
    ) -> StoreResult<Vec<Option<String>>>;
    /// One admitter move (case W06). First invites returning fans (skipped, came back), then
    /// moves the cursor: each number it passes whose fan is silent (in the ready window, last
    /// sign of life older than `silence_ms`) is skipped; each live one gets an invitation slot
    /// for `invite_grace_secs` or until claimed. Invites at most `n` fans in all, never past the
    /// last number handed out, never so many that live admissions plus fresh invitations exceed
    /// `max_active`, examining at most `scan_limit` numbers. Finally numbers newly inside the
    /// ready window get their silence clock started at `now_ms`.
    async fn advance_cursor(&self, event: &EventId, p: &AdvanceParams) -> StoreResult<Advance>;
    /// Claims admission (case W08): the stored admission again if there is one; else, when the
    /// visitor's number is `<=` cursor and the state allows, stores `{jti, now, now+ttl}` and
    /// counts a live admission until `exp + slot_tail_secs` (case W10). The slot is the fan's
    /// invitation; when that lapsed, a free slot is taken only if live admissions and
    /// invitations are below `max_active`, else the fan is `Returning` (first in line at the
    /// next tick), so the live count never exceeds `max_active`. A skipped fan is `Returning`
    /// (within `rejoin_grace_ms`, invited at the next tick) or `Lost`. `now_ms` epoch
    /// **milliseconds**.
    async fn claim(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        terms: AdmissionTerms,
        new_jti: &str,
        rejoin_grace_ms: u64,
    ) -> StoreResult<ClaimOutcome>;
    /// All live figures in one read at `now_ms` (epoch ms): admissions past their expiry are not
    /// live, fans in the ready window silent for more than `silence_ms` are not counted waiting.
    async fn figures(
        &self,
        event: &EventId,
        now_ms: i64,
        silence_ms: u64,
    ) -> StoreResult<Option<Figures>>;
    /// The booking core reports a session finished (paid, released, left): its `max_active` slot
    /// frees at once. Idempotent. `now` epoch **seconds**.
    async fn end_session(
        &self,
        event: &EventId,
        session: &SessionRef,
        now: i64,
    ) -> StoreResult<SessionEnd>;
    /// Appends an operator action to the event's audit trail (keeps the last [`AUDIT_KEEP`]).
    async fn audit_append(&self, event: &EventId, entry: &AuditEntry) -> StoreResult<()>;
    /// The last `limit` audit entries of an event, oldest first.
    async fn audit(&self, event: &EventId, limit: usize) -> StoreResult<Vec<AuditEntry>>;
    /// The event's address rules (issue 15 item 2), in no particular order. `NotFound` for an
    /// unknown event.
    async fn rules(&self, event: &EventId) -> StoreResult<Vec<AddressRule>>;
    /// Adds a rule in one atomic step unless the event already has `max` rules or a rule on the
    /// same range (`cidr` compared as written: callers store the canonical form). Two
    /// operators adding at once can neither pass the cap nor both put one range.
    async fn put_rule(
        &self,
        event: &EventId,
        rule: &AddressRule,
        max: usize,
    ) -> StoreResult<RuleAdded>;
    /// Deletes a rule; `Some(rule)` when it existed.
    async fn delete_rule(&self, event: &EventId, id: &str) -> StoreResult<Option<AddressRule>>;
    /// Puts `entry.visitor` in the shadow line in one atomic step unless it is there already
    /// (then its stored entry is returned unchanged). The store fills `shadow_number` from the
    /// shadow line's own counter (never the fans' counter, which does not move) and `behind`
    /// from the fans numbered or pre-queued now; the caller's values of both are ignored.
    async fn shadow_join(&self, event: &EventId, entry: &ShadowEntry) -> StoreResult<ShadowEntry>;
    /// A visitor's shadow-line entry, `None` when it is not in the shadow line.
    async fn shadow_entry(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>>;
    /// The shadow line, oldest first, at most `limit` entries.
    async fn shadow_list(&self, event: &EventId, limit: usize) -> StoreResult<Vec<ShadowEntry>>;
    /// Takes a visitor out of the shadow line; `Some(entry)` when it was there.
    async fn shadow_remove(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>>;
    /// Appends one sample to the event's sale report (keeps the last [`REPORT_KEEP`]).
    async fn report_append(&self, event: &EventId, sample: &ReportSample) -> StoreResult<()>;
    /// The event's report samples, oldest first. Errors: `NotFound` for an unknown event.
    async fn report_samples(&self, event: &EventId) -> StoreResult<Vec<ReportSample>>;
    /// Operator/test hook: sets the FIFO counter (the last number handed out) to `value`.
    async fn set_counter(&self, event: &EventId, value: u64) -> StoreResult<()>;
    /// Throttle latch of the status document (API.md "Status document"; seed 000: "a 2-second
    /// SET NX throttle"): `true` for one caller per `throttle_ms` **ms** per event across every
    /// process. Redis: `SET wr:{event}:status:throttle NX PX throttle_ms` (real time); in
    /// memory the same window measured on `now_ms` (epoch **ms**, the caller's clock).
    async fn status_throttle(
        &self,
        event: &EventId,
        now_ms: i64,
        throttle_ms: u64,
    ) -> StoreResult<bool>;
    /// Transition latch of the status document: `true` for exactly one caller per state
    /// generation `gen` (`Figures::state_gen`) newer than every latched one; it latches the
    /// public `state` and clears the other states' latches (a freed seat reopening a sold-out
    /// event publishes again). Older or equal generations get `false`.
    async fn status_transition(&self, event: &EventId, state: &str, gen: u64) -> StoreResult<bool>;
    /// Owner-token lock: `SET key token NX PX ttl_ms`; `true` when acquired.
    async fn try_lock(&self, key: &str, token: &str, ttl_ms: u64) -> StoreResult<bool>;
    /// Extends the lock only if `token` still owns it (compare-and-act).
    async fn renew_lock(&self, key: &str, token: &str, ttl_ms: u64) -> StoreResult<bool>;
    /// Deletes the lock only if `token` still owns it (compare-and-act).
    async fn release_lock(&self, key: &str, token: &str) -> StoreResult<bool>;
    /// The access codes' storage (issue 14 item 1); `None` (the default, for test doubles)
    /// keeps every event open.
    fn access(&self) -> Option<&dyn access::AccessStore> {
        None
    }
}
