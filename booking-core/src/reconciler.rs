//! The reconciler (DESIGN "Reconciler"): the only path that releases a hold after a payment
//! attempt. Each [`Reconciler::step`] takes HELD holds within 6 minutes of their deadline or past
//! it, most overdue first, 8 at a time, and asks the gateway: completed → PAID; cancelled, failed,
//! expired, or not completed after the deadline → release (guarded); pending before the
//! deadline → leave; query error → leave (hold extension on repeated errors is a later issue).
//! Holds past their deadline with no payment are released without asking anyone.

use std::time::{Duration, Instant};

use crate::db::Actor;
use crate::error::ApiResult;
use crate::holds::{self, Hold};
use crate::payments::{settle, Settlement};
use crate::AppState;

/// Look-ahead window before a hold's deadline, ms (DESIGN: 6 minutes).
pub const WINDOW_MS: i64 = 6 * 60 * 1000;
/// Holds per batch (DESIGN: 8).
pub const BATCH: i64 = 8;
/// Time budget of one step (DESIGN: 45 s).
pub const BUDGET: Duration = Duration::from_secs(45);

/// What one step did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Holds looked at.
    pub examined: usize,
    /// Holds made PAID.
    pub paid: usize,
    /// Holds released.
    pub released: usize,
    /// Holds left alone (pending, or the gateway did not answer).
    pub left: usize,
}

/// Runs reconciliation steps.
#[derive(Debug, Clone)]
pub struct Reconciler {
    state: AppState,
}

impl Reconciler {
    /// A reconciler over the service state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }

    /// One pass at time `now_ms` (epoch ms): batches of [`BATCH`] until a batch changes nothing,
    /// is short, or the budget is spent.
    #[tracing::instrument(skip_all, fields(now_ms))]
    pub async fn step(&self, now_ms: i64) -> ApiResult<Outcome> {
        let started = Instant::now();
        let mut out = Outcome::default();
        let mut skip: i64 = 0;
        loop {
            let batch: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM holds WHERE status = 'HELD' AND expires_at <= ? \
                 ORDER BY expires_at ASC, id ASC LIMIT ? OFFSET ?",
            )
            .bind(now_ms + WINDOW_MS)
            .bind(BATCH)
            .bind(skip)
            .fetch_all(&self.state.db)
            .await?;
            for id in &batch {
                let Some(h) = holds::load(&self.state.db, id).await? else {
                    continue;
                };
                out.examined += 1;
                match self.one(&h, now_ms).await? {
                    Did::Paid => out.paid += 1,
                    Did::Released => out.released += 1,
                    Did::Left => {
                        out.left += 1;
                        skip += 1;
                    }
                }
            }
            if (batch.len() as i64) < BATCH || started.elapsed() > BUDGET {
                break;
            }
        }
        if out != Outcome::default() {
            tracing::info!(?out, "reconciler step");
        }
        Ok(out)
    }

    async fn one(&self, h: &Hold, now_ms: i64) -> ApiResult<Did> {
        let overdue = now_ms >= h.expires_at;
        let has_payment = h
            .payment_id
            .as_deref()
            .is_some_and(|p| !p.starts_with("pending:"));
        if !has_payment {
            if overdue && h.payment_id.is_none() {
                return self.release(h, "expired without payment", now_ms).await;
            }
            if overdue {
                // A payment create that never finished: the fan never got a checkout URL.
                return self.release(h, "payment never created", now_ms).await;
            }
            return Ok(Did::Left);
        }
        match settle(&self.state, h, Actor::Reconciler).await? {
            Settlement::Paid(_) => Ok(Did::Paid),
            Settlement::Dead(s) => {
                self.release(h, &format!("payment {s:?}").to_lowercase(), now_ms)
                    .await
            }
            Settlement::Pending(s) if overdue => {
                self.release(
                    h,
                    &format!("payment {s:?} after deadline").to_lowercase(),
                    now_ms,
                )
                .await
            }
            Settlement::Pending(_) => Ok(Did::Left),
            Settlement::Unknown(e) => {
                tracing::warn!(hold = %h.id, error = %e, "gateway did not answer; hold left");
                Ok(Did::Left)
            }
        }
    }

    async fn release(&self, h: &Hold, reason: &str, now_ms: i64) -> ApiResult<Did> {
        if holds::release(&self.state.db, &h.id, Actor::Reconciler, reason, now_ms).await? {
            Ok(Did::Released)
        } else {
            Ok(Did::Left)
        }
    }

    /// Loops `step` every `interval` until the task is dropped.
    pub async fn run(self, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = self.state.clock.now_ms();
            if let Err(e) = self.step(now).await {
                tracing::error!(error = %e, "reconciler step failed");
            }
        }
    }
}

enum Did {
    Paid,
    Released,
    Left,
}
