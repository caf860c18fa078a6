//! The admitter (DESIGN.md "The cursor"): per event, a token bucket turns `admit_rate` into
//! cursor moves; exactly one instance per event runs across processes, elected with the store's
//! owner-token lock. Tests drive [`Admitter::step`] with a manual clock (STYLE.md rule 4).
//!
//! **Bucket.** Refilled each tick with `admit_rate × elapsed` from the rate read *this* tick, and
//! capped at [`Admitter::burst`] = `max(1, admit_rate × 2 × tick)` admissions, so a rate change
//! applies at the next tick with no fresh full bucket: over any period `T` the cursor invites at
//! most `rate × T + burst` fans. Paused, closed or sold out empties the bucket. Skipped (silent)
//! places cost no token: tokens count live fans invited.

use crate::domain::{AdvanceParams, AuditEntry, EventId, EventState, Liveness};
use crate::mode::QueueMode;
use crate::phases::Phase;
use crate::store::{QueueStore, StoreError, StoreResult};
use std::sync::Arc;

/// Pre-queued fans numbered per store step while opening (keeps each script short).
pub const OPEN_CHUNK: u64 = 10_000;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event does not exist (any more).
    Missing,
    /// The pre-queue was numbered in draw order `1..=prequeued`; the event is open.
    Opened {
        /// Fans that were pre-queued.
        prequeued: u64,
    },
    /// The cursor invited `moved` live fans (possibly 0) and skipped `skipped` silent places.
    Advanced {
        /// Cursor after the step.
        cursor: u64,
        /// Live fans invited by the cursor this step.
        moved: u64,
        /// Silent places skipped this step.
        skipped: u64,
        /// Returning (once skipped) fans invited this step.
        returned: u64,
    },
    /// Nothing to do in this state (before opening, paused, closed, sold out).
    Held(EventState),
    /// Open, but the line waits for stock: nothing can be held and `in_play` places are in
    /// live holds that may come back ([`crate::domain::EventMeta::stock_wait`]).
    /// A scheduled phase switched the event's state ([`crate::phases`]), audited as operator
    /// `schedule`.
    Scheduled { phase: Phase, state: EventState },
    /// The event is open in `maintenance` mode: nobody is let in ([`crate::mode`]).
    Maintenance,
    WaitingForStock {
        /// Places in live holds.
        in_play: u64,
    },
}

/// Opens an event now: `prequeue` → `opening`, numbers the pre-queue in draw order
/// (`crate::draw`) in chunks of [`OPEN_CHUNK`], then `open`. Also finishes an interrupted
/// opening. Returns the number of pre-queued fans numbered by this call's `begin_open` (0 when
/// resuming).
pub async fn open_event(store: &dyn QueueStore, event: &EventId) -> StoreResult<u64> {
    let n = store.begin_open(event).await?;
    while store.open_chunk(event, OPEN_CHUNK).await? > 0 {}
    // An empty pre-queue needs one more chunk call to flip `opening` → `open`: done above, since
    // the loop body runs at least once.
    Ok(n)
}

/// Records the draw's publication in `event`'s audit trail at `now_s` (epoch **seconds**),
/// after [`open_event`] (action `draw_published`: old = the commitment published before
/// opening; new = the seed, first number, the list's hash and its size), so operators can show
/// what was published and when (issue 15 item 1).
pub async fn audit_draw(store: &dyn QueueStore, event: &EventId, now_s: i64) -> StoreResult<()> {
    let p = crate::store::draw::publication(store, event).await?;
    let entry = AuditEntry {
        at: now_s,
        operator: "service".into(),
        action: "draw_published".into(),
        old: serde_json::json!({ "commitment": p.commitment }),
        new: serde_json::json!({
            "seed": p.seed,
            "first_number": p.first_number,
            "visitors_hash": p.visitors_hash,
            "prequeued": p.visitors.as_ref().map_or(0, Vec::len),
        }),
    };
    store.audit_append(event, &entry).await
}

/// How the admitter sizes the ready window and judges silence (from `Config`).
/// One `pass_through` move: every waiting fan the scan reaches is invited, whatever the rate
/// and `max_active` ([`crate::mode`]).
pub fn pass_through_params(
    now_ms: i64,
    invite_grace_secs: u64,
    liveness: Liveness,
) -> AdvanceParams {
    AdvanceParams {
        n: liveness.scan_limit,
        max_active: u64::MAX / 2,
        now_ms,
        invite_grace_secs,
        liveness,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LivenessRules {
    /// Silence grace, **ms**.
    pub silence_ms: u64,
    /// Ready window in seconds of admissions at the admit rate, **s**.
    pub ready_window_secs: u64,
    /// Smallest ready window, places.
    pub ready_window_min: u64,
    /// Most numbers examined per tick.
    pub scan_limit: u64,
}

impl Default for LivenessRules {
    /// The `Config` defaults: 30 s silence, 60 s window of at least 100 places, 10 000 scans.
    fn default() -> Self {
        Self {
            silence_ms: 30_000,
            ready_window_secs: 60,
            ready_window_min: 100,
            scan_limit: 10_000,
        }
    }
}

impl LivenessRules {
    /// The rules at `admit_rate` (per second): window = `max(min, rate × secs)` places.
    pub fn at_rate(&self, admit_rate: f64) -> Liveness {
        let by_rate = (admit_rate.max(0.0) * self.ready_window_secs as f64).ceil() as u64;
        Liveness {
            silence_ms: self.silence_ms,
            ready_window: by_rate.max(self.ready_window_min),
            scan_limit: self.scan_limit.max(1),
        }
    }
}

/// The admitter of one event.
#[derive(Debug)]
pub struct Admitter {
    store: Arc<dyn QueueStore>,
    event: EventId,
    tick_ms: u64,
    invite_grace_secs: u64,
    rules: LivenessRules,
    tokens: f64,
    last_ms: Option<i64>,
}

impl Admitter {
    /// A new admitter; `tick_ms` is the loop period (ms), `invite_grace_secs` how long an
    /// unclaimed invitation holds a slot (s).
    pub fn new(
        store: Arc<dyn QueueStore>,
        event: EventId,
        tick_ms: u64,
        invite_grace_secs: u64,
    ) -> Self {
        Self {
            store,
            event,
            tick_ms,
            invite_grace_secs,
            rules: LivenessRules::default(),
            tokens: 0.0,
            last_ms: None,
        }
    }

    /// Replaces the liveness rules (the loop passes the configured ones).
    pub fn with_rules(mut self, rules: LivenessRules) -> Self {
        self.rules = rules;
        self
    }

    /// The bucket's capacity at `admit_rate` (per second): `max(1, rate × 2 × tick)` admissions.
    pub fn burst(&self, admit_rate: f64) -> f64 {
        (admit_rate * 2.0 * self.tick_ms as f64 / 1000.0).max(1.0)
    }

    /// One tick at `now_ms` (epoch **milliseconds**). Opens the event once `now >= opens_at`;
    /// while open, adds `admit_rate × elapsed` admissions to the bucket (the fraction carries to
    /// the next tick, the bucket holds at most [`Admitter::burst`], or what a late tick's
    /// elapsed time earned up to one second's worth) and invites the whole part,
    /// bounded by `max_active`, skipping silent places.
    pub async fn step(&mut self, now_ms: i64) -> StoreResult<Outcome> {
        let meta = match self.store.event(&self.event).await? {
            Some(m) => m,
            None => return Ok(Outcome::Missing),
        };
        let now_s = now_ms.div_euclid(1000);
        let elapsed_ms = self.last_ms.map_or(0, |l| (now_ms - l).max(0));
        self.last_ms = Some(now_ms);
        if let Some(out) = self.schedule(meta.state, now_ms).await? {
            return Ok(out);
        }
        match meta.state {
            EventState::Prequeue if now_s >= meta.opens_at => self.open(now_ms).await,
            EventState::Opening => self.open(now_ms).await,
            EventState::Open if meta.stock_wait > 0 => {
                // No fan is admitted to an empty map; the bucket does not fill meanwhile, so
                // admissions resume at the admit rate, not in one burst.
                self.tokens = 0.0;
                Ok(Outcome::WaitingForStock {
                    in_play: meta.stock_wait,
                })
            }
            EventState::Open => match self.store.mode(&self.event).await? {
                QueueMode::Maintenance => {
                    self.tokens = 0.0;
                    Ok(Outcome::Maintenance)
                }
                QueueMode::PassThrough => {
                    let p = pass_through_params(
                        now_ms,
                        self.invite_grace_secs,
                        self.rules.at_rate(meta.admit_rate),
                    );
                    let adv = self.store.advance_cursor(&self.event, &p).await?;
                    Ok(Outcome::Advanced {
                        cursor: adv.cursor,
                        moved: adv.moved,
                        skipped: adv.skipped,
                        returned: adv.returned,
                    })
                }
                QueueMode::Scheduled | QueueMode::AlwaysOn => {
                    self.at_rate(&meta, now_ms, elapsed_ms).await
                }
            },
            state => {
                self.tokens = 0.0;
                Ok(Outcome::Held(state))
            }
        }
    }

    /// Applies the event's next due scheduled phase, if any (one per tick; the marker's
    /// compare-and-set makes it once), and audits it as operator `schedule`.
    async fn schedule(&mut self, before: EventState, now_ms: i64) -> StoreResult<Option<Outcome>> {
        let (Some(phases), done) = self.store.phases(&self.event).await? else {
            return Ok(None);
        };
        let Some(phase) = phases.due(now_ms.div_euclid(1000), done) else {
            return Ok(None);
        };
        if !self
            .store
            .phase_done(&self.event, done, phase as u8)
            .await?
        {
            return Ok(None);
        }
        let store = self.store.clone();
        let (pre, all) = (EventState::Prequeue, [EventState::Closed]);
        let after = match phase {
            Phase::PrequeueOpens => store.transition(&self.event, &all, pre).await?.0,
            Phase::SaleOpens => {
                if phases.prequeue_opens_at.is_some() {
                    store.transition(&self.event, &all, pre).await?;
                }
                let state = |m: Option<crate::domain::EventMeta>| m.map_or(before, |m| m.state);
                let now = state(store.event(&self.event).await?);
                if matches!(now, EventState::Prequeue | EventState::Opening) {
                    self.open(now_ms).await?;
                }
                state(store.event(&self.event).await?)
            }
            Phase::SaleEnds => {
                let from = [
                    pre,
                    EventState::Opening,
                    EventState::Open,
                    EventState::Paused,
                ];
                store
                    .transition(&self.event, &from, EventState::Closed)
                    .await?
                    .0
            }
        };
        let entry = AuditEntry {
            at: now_ms.div_euclid(1000),
            operator: "schedule".into(),
            action: phase.action().into(),
            old: before.as_str().into(),
            new: after.as_str().into(),
        };
        self.store.audit_append(&self.event, &entry).await?;
        Ok(Some(Outcome::Scheduled {
            phase,
            state: after,
        }))
    }

    async fn at_rate(
        &mut self,
        meta: &crate::domain::EventMeta,
        now_ms: i64,
        elapsed_ms: i64,
    ) -> StoreResult<Outcome> {
        let added = meta.admit_rate * elapsed_ms as f64 / 1000.0;
        // A late tick (a loaded node, a slow store call) keeps what its elapsed time earned, up
        // to one second's worth: capped at two ticks, the bucket dropped the rest, and under the
        // seed rehearsal's opening load the cursor moved at a third of the admit rate while the
        // wait estimate promised the rate (issue 18 item 5). Tokens still accrue at the rate
        // only, so any window T admits at most rate × T plus one bucket.
        let cap = self.burst(meta.admit_rate).max(added.min(meta.admit_rate));
        self.tokens = (self.tokens + added).min(cap);
        let p = AdvanceParams {
            n: self.tokens.floor() as u64,
            max_active: meta.max_active,
            now_ms,
            invite_grace_secs: self.invite_grace_secs,
            liveness: self.rules.at_rate(meta.admit_rate),
        };
        let adv = self.store.advance_cursor(&self.event, &p).await?;
        self.tokens -= (adv.moved + adv.returned) as f64;
        Ok(Outcome::Advanced {
            cursor: adv.cursor,
            moved: adv.moved,
            skipped: adv.skipped,
            returned: adv.returned,
        })
    }

    async fn open(&mut self, now_ms: i64) -> StoreResult<Outcome> {
        self.tokens = 0.0;
        match open_event(self.store.as_ref(), &self.event).await {
            Ok(prequeued) => {
                audit_draw(self.store.as_ref(), &self.event, now_ms.div_euclid(1000)).await?;
                Ok(Outcome::Opened { prequeued })
            }
            Err(StoreError::NotFound) => Ok(Outcome::Missing),
            Err(e) => Err(e),
        }
    }
}
