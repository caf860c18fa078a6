//! The reconciler (DESIGN "Reconciler", seed 000 Challenge 2): the only path that releases a
//! hold after a payment attempt, one instance at a time across processes (the `reconciler`
//! lease with an owner token). Each [`Reconciler::step`] takes HELD holds within 6 minutes of
//! their deadline or past it, most overdue first, 8 at a time, within a 45 s budget, and asks
//! the gateway: completed → PAID (and email); cancelled, failed, expired, or not completed after
//! the deadline → release (guarded; a cancelled or failed payment only once no new attempt can
//! start, [`crate::payments::pay_by_ms`], so the fan may pay again until then); pending before
//! the deadline → leave; the query failing
//! three times → extend the hold by 10 minutes, at most three times, then raise an alert and keep
//! the seat (see [`crate::payments::ladder`]). Holds past their deadline with no payment are released
//! without asking anyone. A release records why the hold ended ([`holds::Ended`]): lapsed →
//! `expired`, a payment refused at the gateway → `failed`, cancelled at the checkout →
//! `released`. Each step then runs the late-payment sweep over released holds
//! ([`crate::payments::late`]), voids superseded payment attempts
//! ([`crate::payments::attempts`]; it acts on a hold's current attempt only) and offers to the
//! waitlist what a release raced by a join did not ([`crate::inventory::waitlist::sweep`]).

use std::time::{Duration, Instant};

use crate::db::{lease, Actor};
use crate::error::ApiResult;
use crate::gateway::PayStatus;
use crate::inventory::holds::{self, Ended, Hold};
use crate::payments::attempts::{self, VoidOutcome};
use crate::payments::ladder::{self, Ladder};
use crate::payments::late::{self, LateOutcome};
use crate::payments::{pay_by_ms, settle, Settlement};
use crate::state::AppState;
use crate::telemetry;

/// Look-ahead window before a hold's deadline, ms (DESIGN: 6 minutes).
pub const WINDOW_MS: i64 = 6 * 60 * 1000;
/// Holds per batch (DESIGN: 8).
pub const BATCH: i64 = 8;
/// Time budget of one step (DESIGN: 45 s).
pub const BUDGET: Duration = Duration::from_secs(45);
/// Lease of the single reconciler, ms: the budget plus a margin, renewed by every step of its
/// holder, so a crashed holder is replaced after at most a minute.
pub const LEASE_MS: i64 = 60_000;
const LEASE: &str = "reconciler";

/// What one step did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Another process holds the reconciler lease: this step did nothing.
    pub skipped: bool,
    /// Holds looked at.
    pub examined: usize,
    /// Holds made PAID.
    pub paid: usize,
    /// Holds released.
    pub released: usize,
    /// Holds left alone (pending, or the gateway did not answer).
    pub left: usize,
    /// Holds extended by 10 minutes after three failed queries.
    pub extended: usize,
    /// Holds that ran out of extensions and raised an alert (seat kept).
    pub alerted: usize,
    /// Batches fetched.
    pub batches: usize,
    /// The late-payment sweep over released holds ([`crate::payments::late`]).
    pub late: LateOutcome,
    /// Superseded payment attempts voided at the gateway ([`attempts::void_superseded`]).
    pub superseded: VoidOutcome,
    /// Offers a release missed, made by the waitlist sweep ([`crate::inventory::waitlist::sweep`]).
    pub waitlist_offers: u64,
    /// Rows of PostgreSQL's seat change log pruned ([`crate::inventory::seatmap::prune_feed`]).
    pub feed_pruned: u64,
}

/// Runs reconciliation steps under the single-instance lease.
#[derive(Debug, Clone)]
pub struct Reconciler {
    state: AppState,
    owner: String,
    budget: Duration,
}

impl Reconciler {
    /// A reconciler over the service state with its own owner token and the 45 s budget.
    pub fn new(state: AppState) -> Self {
        Self {
            state,
            owner: uuid::Uuid::new_v4().to_string(),
            budget: BUDGET,
        }
    }

    /// The same with another time budget per step (tests of the budget limit).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// One pass at time `now_ms` (epoch ms): takes or renews the lease, then batches of
    /// [`BATCH`] until a batch is short or the budget is spent.
    #[tracing::instrument(skip_all, fields(now_ms))]
    pub async fn step(&self, now_ms: i64) -> ApiResult<Outcome> {
        let db = &self.state.db;
        if !lease::acquire(db, LEASE, &self.owner, now_ms, now_ms + LEASE_MS).await? {
            return Ok(Outcome {
                skipped: true,
                ..Outcome::default()
            });
        }
        let started = Instant::now();
        let mut out = Outcome::default();
        let mut skip: i64 = 0;
        loop {
            let batch: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM holds WHERE status = 'HELD' AND expires_at <= $1 \
                 ORDER BY expires_at ASC, id ASC LIMIT $2 OFFSET $3",
            )
            .bind(now_ms + WINDOW_MS)
            .bind(BATCH)
            .bind(skip)
            .fetch_all(db)
            .await?;
            out.batches += 1;
            for id in &batch {
                let Some(h) = holds::load(db, id).await? else {
                    continue;
                };
                out.examined += 1;
                match self.one(&h, now_ms).await? {
                    Did::Paid => out.paid += 1,
                    Did::Released => out.released += 1,
                    Did::Left(l) => {
                        out.left += 1;
                        skip += 1;
                        match l {
                            Ladder::Extended => out.extended += 1,
                            Ladder::Alerted => out.alerted += 1,
                            Ladder::Counted | Ladder::None => {}
                        }
                    }
                }
            }
            if (batch.len() as i64) < BATCH || started.elapsed() >= self.budget {
                break;
            }
        }
        if started.elapsed() < self.budget {
            out.late = late::sweep(&self.state, now_ms).await?;
        }
        if started.elapsed() < self.budget {
            out.superseded = attempts::void_superseded(&self.state, now_ms).await?;
        }
        if started.elapsed() < self.budget {
            out.waitlist_offers = crate::inventory::waitlist::sweep(db, now_ms).await?;
        }
        out.feed_pruned = crate::inventory::seatmap::prune_feed(db).await?;
        let oldest: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(expires_at) FROM holds WHERE status = 'HELD' AND expires_at <= $1",
        )
        .bind(now_ms)
        .fetch_one(db)
        .await?;
        let alerts: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM alerts")
            .fetch_one(db)
            .await?;
        metrics::gauge!("bc_alerts_open").set(alerts as f64);
        telemetry::sweep(
            started.elapsed().as_secs_f64(),
            oldest.map_or(0, |t| now_ms - t),
        );
        if out.examined > 0
            || out.late.examined > 0
            || out.superseded.examined > 0
            || out.waitlist_offers > 0
        {
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
            if overdue {
                let why = if h.payment_id.is_none() {
                    "expired without payment"
                } else {
                    "payment never created"
                };
                return self.release(h, Ended::Expired, why, now_ms).await;
            }
            return Ok(Did::Left(Ladder::None));
        }
        match settle(&self.state, h, Actor::Reconciler).await? {
            Settlement::Paid(c) if c.is_paid() => Ok(Did::Paid),
            Settlement::Paid(_) => Ok(Did::Released),
            // The fan may pay again (a new attempt) until the last moment to start paying:
            // the seats are released only once no new attempt can start.
            Settlement::Dead(_) if now_ms < pay_by_ms(&self.state.config, h) => {
                Ok(Did::Left(Ladder::None))
            }
            Settlement::Dead(s) => {
                let why = format!("payment {s:?}").to_lowercase();
                self.release(h, dead_end(s), &why, now_ms).await
            }
            Settlement::Pending(s) if overdue => {
                self.release(
                    h,
                    Ended::Expired,
                    &format!("payment {s:?} after deadline").to_lowercase(),
                    now_ms,
                )
                .await
            }
            Settlement::Pending(_) => {
                ladder::answered(&self.state.db, &h.id).await?;
                Ok(Did::Left(Ladder::None))
            }
            Settlement::Unknown(e) => {
                tracing::warn!(hold = %h.id, error = %e, "gateway did not answer; hold kept");
                Ok(Did::Left(
                    ladder::failed_query(&self.state.db, h, now_ms).await?,
                ))
            }
        }
    }

    async fn release(&self, h: &Hold, end: Ended, reason: &str, now_ms: i64) -> ApiResult<Did> {
        let db = &self.state.db;
        if holds::release(db, &h.id, Actor::Reconciler, end, reason, now_ms).await? {
            Ok(Did::Released)
        } else {
            Ok(Did::Left(Ladder::None))
        }
    }

    /// Loops `step` every `interval` until the task is dropped.
    /// Steps every `interval` until `stop` turns true; a step in progress finishes first, then
    /// the lease is given back so another process's reconciler takes over at once instead of
    /// after [`LEASE_MS`] (case W13).
    pub async fn run(self, interval: Duration, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => break,
            }
            let now = self.state.clock.now_ms();
            if let Err(e) = self.step(now).await {
                tracing::error!(error = %e, "reconciler step failed");
            }
            if *stop.borrow() {
                break;
            }
        }
        if let Err(e) = lease::set_until(&self.state.db, LEASE, &self.owner, 0).await {
            tracing::warn!(error = %e, "could not give the reconciler lease back");
        }
    }
}

/// Why a hold whose payment died at the gateway ended once no new attempt could start:
/// refused → `failed`; cancelled by the fan at the checkout → `released` (the fan said no);
/// the gateway's session ran out → `expired` (the fan walked away).
fn dead_end(s: PayStatus) -> Ended {
    match s {
        PayStatus::Failed => Ended::Failed,
        PayStatus::Cancelled => Ended::Released,
        _ => Ended::Expired,
    }
}

enum Did {
    Paid,
    Released,
    Left(Ladder),
}
