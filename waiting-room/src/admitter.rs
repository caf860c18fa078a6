//! The admitter (DESIGN.md "The cursor"): per event, a token bucket turns `admit_rate` into
//! cursor moves; exactly one instance per event runs across processes, elected with the store's
//! owner-token lock. Tests drive [`Admitter::step`] with a manual clock (STYLE.md rule 4).

use crate::domain::{EventId, EventState};
use crate::store::{QueueStore, StoreError, StoreResult};
use std::sync::Arc;

/// Pre-queued fans numbered per store step while opening (keeps each script short).
pub const OPEN_CHUNK: u64 = 10_000;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The event does not exist (any more).
    Missing,
    /// The pre-queue was shuffled into numbers `1..=prequeued`; the event is open.
    Opened {
        /// Fans that were pre-queued.
        prequeued: u64,
    },
    /// The cursor moved over `moved` numbers (possibly 0) to `cursor`.
    Advanced {
        /// Cursor after the step.
        cursor: u64,
        /// Numbers passed this step.
        moved: u64,
    },
    /// Nothing to do in this state (before opening, paused, closed, sold out).
    Held(EventState),
}

/// Opens an event now: `prequeue` → `opening`, numbers the pre-queue in random order in chunks
/// of [`OPEN_CHUNK`], then `open`. Also finishes an interrupted opening. Returns the number of
/// pre-queued fans numbered by this call's `begin_open` (0 when resuming).
pub async fn open_event(store: &dyn QueueStore, event: &EventId) -> StoreResult<u64> {
    let n = store.begin_open(event).await?;
    while store.open_chunk(event, OPEN_CHUNK, rand::random()).await? > 0 {}
    // An empty pre-queue needs one more chunk call to flip `opening` → `open`: done above, since
    // the loop body runs at least once.
    Ok(n)
}

/// The admitter of one event.
#[derive(Debug)]
pub struct Admitter {
    store: Arc<dyn QueueStore>,
    event: EventId,
    tick_ms: u64,
    invite_grace_secs: u64,
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
            tokens: 0.0,
            last_ms: None,
        }
    }

    /// One tick at `now_ms` (epoch **milliseconds**). Opens the event once `now >= opens_at`;
    /// while open, adds `admit_rate × elapsed` admissions to the bucket (the fraction carries to
    /// the next tick) and moves the cursor by the whole part, bounded by `max_active`. The
    /// bucket holds at most one interval's worth, so a rate change or a freed slot never bursts.
    pub async fn step(&mut self, now_ms: i64) -> StoreResult<Outcome> {
        let meta = match self.store.event(&self.event).await? {
            Some(m) => m,
            None => return Ok(Outcome::Missing),
        };
        let now_s = now_ms.div_euclid(1000);
        let elapsed_ms = self.last_ms.map_or(0, |l| (now_ms - l).max(0));
        self.last_ms = Some(now_ms);
        match meta.state {
            EventState::Prequeue if now_s >= meta.opens_at => self.open().await,
            EventState::Opening => self.open().await,
            EventState::Open => {
                let interval_s = (elapsed_ms.max(self.tick_ms as i64)) as f64 / 1000.0;
                let cap = (meta.admit_rate * interval_s).max(1.0);
                let added = meta.admit_rate * elapsed_ms as f64 / 1000.0;
                self.tokens = (self.tokens + added).min(cap);
                let n = self.tokens.floor() as u64;
                let adv = self
                    .store
                    .advance_cursor(
                        &self.event,
                        n,
                        meta.max_active,
                        now_s,
                        self.invite_grace_secs,
                    )
                    .await?;
                self.tokens -= adv.moved as f64;
                Ok(Outcome::Advanced {
                    cursor: adv.cursor,
                    moved: adv.moved,
                })
            }
            state => {
                self.tokens = 0.0;
                Ok(Outcome::Held(state))
            }
        }
    }

    async fn open(&mut self) -> StoreResult<Outcome> {
        self.tokens = 0.0;
        match open_event(self.store.as_ref(), &self.event).await {
            Ok(prequeued) => Ok(Outcome::Opened { prequeued }),
            Err(StoreError::NotFound) => Ok(Outcome::Missing),
            Err(e) => Err(e),
        }
    }
}
