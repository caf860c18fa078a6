//! When the status document is written out (API.md "Status document"; seed 000, "The live
//! status document"; DESIGN.md "Status document"):
//!
//! 1. Each step reads the event's figures from the store in one read and builds the document
//!    **whole** — never a read-modify-write of a published copy.
//! 2. A state transition (opened, paused, resumed, sold out, closed, reopened) is published at
//!    once, exactly once across every process: the store's transition latch
//!    ([`QueueStore::status_transition`]) lets one caller per state generation through and
//!    clears the other states' latches, so a freed seat reopening a sold-out event publishes
//!    again.
//! 3. Otherwise at most one publish per `throttle_ms` across every process: the store's
//!    throttle latch ([`QueueStore::status_throttle`], `SET NX PX` on Redis).
//! 4. Each sink writes conditionally on `(version, cursor)` ([`StatusSink`]), so a builder
//!    that read "open" and was delayed cannot overwrite a newer "sold_out".
//!
//! The board (served at `/status/{event}.json`) is refreshed at every step on every node, with
//! the same version guard. Tests drive [`StatusPublisher::publish`] with a `ManualClock`.

use super::{Intervals, Put, StatusBoard, StatusDoc, StatusSink};
use crate::domain::EventId;
use crate::store::{QueueStore, StoreResult};
use futures::future::BoxFuture;
use std::sync::{Arc, RwLock};

/// A hook awaited between building a document and writing it (tests inject a pause here to
/// reproduce two racing publishers).
pub type PauseHook = Arc<dyn Fn(&StatusDoc) -> BoxFuture<'static, ()> + Send + Sync>;

/// Why a step did or did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The event does not exist.
    Missing,
    /// No sink is configured: only the in-memory board was refreshed.
    BoardOnly,
    /// This step won the transition latch: written at once.
    Transition,
    /// This step won the throttle latch: written.
    Throttle,
    /// Another step (any process) published within the throttle interval: not written.
    LatchSkip,
}

/// What one step did.
#[derive(Debug, Clone)]
pub struct Published {
    /// The document built (`None` when the event is missing).
    pub doc: Option<StatusDoc>,
    /// Whether and why it was written.
    pub decision: Decision,
    /// Each sink's answer, in sink order (empty unless written).
    pub puts: Vec<(&'static str, Put)>,
}

/// The publishing loop step, one event at a time.
#[async_trait::async_trait]
pub trait StatusPublisher: Send + Sync + std::fmt::Debug {
    /// Builds `event`'s document from the store at `now_ms` (epoch **ms**), refreshes the board
    /// and writes it to the sinks when a latch allows. Store failures keep the old documents.
    async fn publish(&self, event: &EventId, now_ms: i64) -> StoreResult<Published>;
}

/// The knobs of a [`LatchedPublisher`] (from `Config`).
#[derive(Debug, Clone, Copy)]
pub struct PublishRules {
    /// Intervals advertised in the document.
    pub intervals: Intervals,
    /// Silence grace for the live figures, **ms** (`silence_grace_ms`).
    pub silence_ms: u64,
    /// At most one periodic publish per this many **ms** across processes
    /// (`status_throttle_ms`; seed 000 used 2 s).
    pub throttle_ms: u64,
}

/// The publisher: store latches in front of a list of sinks.
pub struct LatchedPublisher {
    store: Arc<dyn QueueStore>,
    board: Arc<StatusBoard>,
    sinks: Vec<Arc<dyn StatusSink>>,
    rules: PublishRules,
    pause: RwLock<Option<PauseHook>>,
}

impl std::fmt::Debug for LatchedPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatchedPublisher")
            .field("sinks", &self.sinks)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

impl LatchedPublisher {
    /// A publisher refreshing `board` and writing to `sinks`.
    pub fn new(
        store: Arc<dyn QueueStore>,
        board: Arc<StatusBoard>,
        sinks: Vec<Arc<dyn StatusSink>>,
        rules: PublishRules,
    ) -> Self {
        Self {
            store,
            board,
            sinks,
            rules,
            pause: RwLock::new(None),
        }
    }

    /// Installs (or removes) the hook awaited between build and write (tests).
    pub fn set_pause(&self, hook: Option<PauseHook>) {
        if let Ok(mut g) = self.pause.write() {
            *g = hook;
        }
    }

    /// The configured sinks.
    pub fn sinks(&self) -> &[Arc<dyn StatusSink>] {
        &self.sinks
    }

    async fn decide(&self, doc: &StatusDoc, now_ms: i64) -> StoreResult<Decision> {
        let event = EventId::parse(&doc.event).ok_or(crate::store::StoreError::NotFound)?;
        if self.sinks.is_empty() {
            return Ok(Decision::BoardOnly);
        }
        let store = self.store.as_ref();
        if store
            .status_transition(&event, doc.state, doc.version)
            .await?
        {
            return Ok(Decision::Transition);
        }
        let throttle = self.rules.throttle_ms;
        Ok(if store.status_throttle(&event, now_ms, throttle).await? {
            Decision::Throttle
        } else {
            Decision::LatchSkip
        })
    }

    async fn write(&self, doc: &StatusDoc) -> Vec<(&'static str, Put)> {
        let mut puts = Vec::with_capacity(self.sinks.len());
        for sink in &self.sinks {
            match sink.put(doc).await {
                Ok(p) => {
                    if p == Put::Stale {
                        metrics::counter!("wr_status_stale_skips_total",
                            "event" => doc.event.clone(), "sink" => sink.name())
                        .increment(1);
                    }
                    puts.push((sink.name(), p));
                }
                Err(e) => {
                    metrics::counter!("wr_status_publish_errors_total", "sink" => sink.name())
                        .increment(1);
                    tracing::warn!(event = %doc.event, sink = sink.name(), error = %e,
                        "status document not written");
                }
            }
        }
        puts
    }
}

#[async_trait::async_trait]
impl StatusPublisher for LatchedPublisher {
    async fn publish(&self, event: &EventId, now_ms: i64) -> StoreResult<Published> {
        let silence = self.rules.silence_ms;
        let Some(f) = self.store.figures(event, now_ms, silence).await? else {
            return Ok(Published {
                doc: None,
                decision: Decision::Missing,
                puts: Vec::new(),
            });
        };
        let doc = self.board.build(&f, self.rules.intervals, now_ms);
        crate::telemetry::record_figures(&f, doc.derived());
        self.board.publish(event.clone(), doc.clone());
        let decision = self.decide(&doc, now_ms).await?;
        let reason = match decision {
            Decision::Transition => "transition",
            Decision::Throttle => "throttle",
            Decision::LatchSkip => {
                metrics::counter!("wr_status_latch_skips_total", "event" => event.to_string())
                    .increment(1);
                return Ok(Published {
                    doc: Some(doc),
                    decision,
                    puts: Vec::new(),
                });
            }
            Decision::Missing | Decision::BoardOnly => {
                return Ok(Published {
                    doc: Some(doc),
                    decision,
                    puts: Vec::new(),
                })
            }
        };
        let hook = self.pause.read().ok().and_then(|g| g.clone());
        if let Some(hook) = hook {
            hook(&doc).await;
        }
        let puts = self.write(&doc).await;
        metrics::counter!("wr_status_publishes_total",
            "event" => event.to_string(), "reason" => reason)
        .increment(1);
        Ok(Published {
            doc: Some(doc),
            decision,
            puts,
        })
    }
}
