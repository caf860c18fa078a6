//! The outbox worker (DESIGN "Payments": the confirmation email is written to an outbox in the
//! same transaction as PAID and sent after, exactly one per booking). Each [`Outbox::step`]
//! claims due messages under a short lease (so several processes never send the same message
//! at once), then: emails (`confirmation-email`, `refund-notice`) are written to the mail
//! directory as `{kind}-{ref_id}.eml` (a retry rewrites the same file: still one email);
//! `refund` calls the gateway with the idempotent key `refund-{hold_id}`, records the refund and
//! queues the fan's `refund-notice` in one transaction; `booking-refund` (an operator's refund of
//! a cancellation) refunds its amount under the cancellation's id as the idempotency key, then
//! queues the fan's `cancellation-email`; `session-end` and `sold-out` are posted
//! to the waiting room's internal API ([`super::notify`]); emails go through [`super::mail`].

use std::sync::Arc;
use std::time::Duration;

use sale_common::SharedClock;
use serde_json::Value;

use super::mail::Mailer;
use super::{enqueue, notify};
use crate::config::Config;
use crate::db::{self, Actor, Db};
use crate::error::ApiResult;
use crate::gateway::Gateway;

/// Messages claimed per step.
pub const BATCH: i64 = 32;
/// Messages (of different `ref_id`s) sent at once within a step.
pub const SENDERS: usize = 8;
/// How long a claim protects a message being sent, ms.
pub const CLAIM_MS: i64 = 60_000;
/// Wait before retrying a failed message, ms per attempt so far.
pub const RETRY_MS: i64 = 5_000;

/// What one step did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Emails written to the mail directory.
    pub emails: usize,
    /// Refunds done at the gateway.
    pub refunds: usize,
    /// Waiting-room messages delivered (session ends, sold out).
    pub notices: usize,
    /// Waiting-room messages dropped unsent: no `service_token` configured.
    pub skipped: usize,
    /// Messages that failed this time (retried later).
    pub failed: usize,
    /// Messages due when the step began (at most [`BATCH`]; a full batch means more may wait).
    pub due: usize,
}

/// The worker.
#[derive(Debug, Clone)]
pub struct Outbox {
    db: Db,
    config: Arc<Config>,
    gateway: Gateway,
    clock: SharedClock,
    owner: String,
    http: reqwest::Client,
    mailer: Mailer,
}

impl Outbox {
    /// A worker with its own claim owner token, over the parts of the service state it uses
    /// (`AppState::outbox` passes them).
    pub fn new(db: Db, config: Arc<Config>, gateway: Gateway, clock: SharedClock) -> Self {
        // `Config::validate` already refused an unusable `smtp_url` at start-up.
        let mailer = Mailer::from_config(&config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "smtp_url unusable; writing emails to mail_dir");
            Mailer::Dir(config.mail_dir.clone())
        });
        Self {
            db,
            config,
            gateway,
            clock,
            owner: uuid::Uuid::new_v4().to_string(),
            http: reqwest::Client::new(),
            mailer,
        }
    }

    /// One pass at `now_ms` (epoch ms): up to [`BATCH`] due messages, oldest first, sent
    /// [`SENDERS`] at a time (each a claim, a send and its mark; messages of one `ref_id` one
    /// after another, in id order, so a booking's emails keep their order). Sent one by one, at
    /// most one batch per 500 ms tick, the seed rehearsal ended with 832 confirmation emails
    /// and 1,647 session ends still queued. `Err` is the first database error (the other
    /// messages of the pass were still sent or left for a retry).
    #[tracing::instrument(skip_all, fields(now_ms))]
    pub async fn step(&self, now_ms: i64) -> ApiResult<Outcome> {
        use futures::StreamExt;
        let due: Vec<(i64, String, String, String)> = sqlx::query_as(
            "SELECT id, ref_id, kind, payload FROM outbox WHERE sent_at IS NULL \
             AND (claimed_until IS NULL OR claimed_until <= $1) ORDER BY id LIMIT $2",
        )
        .bind(now_ms)
        .bind(BATCH)
        .fetch_all(&self.db)
        .await?;
        let mut out = Outcome {
            due: due.len(),
            ..Outcome::default()
        };
        let mut groups: Vec<Vec<(i64, String, String, String)>> = Vec::new();
        for m in due {
            match groups.iter_mut().find(|g| g[0].1 == m.1) {
                Some(g) => g.push(m),
                None => groups.push(vec![m]),
            }
        }
        let results: Vec<ApiResult<Outcome>> = futures::stream::iter(groups)
            .map(|group| async move {
                let mut got = Outcome::default();
                for m in group {
                    self.one(m, now_ms, &mut got).await?;
                }
                Ok(got)
            })
            .buffer_unordered(SENDERS)
            .collect()
            .await;
        let mut first_err = None;
        for r in results {
            match r {
                Ok(o) => {
                    out.emails += o.emails;
                    out.refunds += o.refunds;
                    out.notices += o.notices;
                    out.skipped += o.skipped;
                    out.failed += o.failed;
                }
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Claims and sends one message `(id, ref_id, kind, payload)`, counting it in `out`; a
    /// failed send is retried later (`RETRY_MS` per attempt so far).
    async fn one(
        &self,
        (id, ref_id, kind, payload): (i64, String, String, String),
        now_ms: i64,
        out: &mut Outcome,
    ) -> ApiResult<()> {
        let db = &self.db;
        let claimed = sqlx::query(
            "UPDATE outbox SET claimed_by = $1, claimed_until = $2, attempts = attempts + 1 \
             WHERE id = $3 AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= $4)",
        )
        .bind(&self.owner)
        .bind(now_ms + CLAIM_MS)
        .bind(id)
        .bind(now_ms)
        .execute(db)
        .await?
        .rows_affected();
        if claimed != 1 {
            return Ok(());
        }
        let payload: Value = serde_json::from_str(&payload).unwrap_or_default();
        let res = match kind.as_str() {
            "refund" => self
                .refund(id, &ref_id, &payload, now_ms)
                .await
                .map(|()| out.refunds += 1),
            "booking-refund" => self
                .booking_refund(id, &ref_id, &payload, now_ms)
                .await
                .map(|()| out.refunds += 1),
            notify::SESSION_END | notify::SOLD_OUT => self
                .notice(id, &kind, &payload, now_ms)
                .await
                .map(|sent| match sent {
                    true => out.notices += 1,
                    false => out.skipped += 1,
                }),
            _ => self
                .email(id, &ref_id, &kind, &payload, now_ms)
                .await
                .map(|()| out.emails += 1),
        };
        if let Err(e) = res {
            out.failed += 1;
            tracing::warn!(outbox = id, kind = %kind, error = %e, "outbox message failed; will retry");
            sqlx::query("UPDATE outbox SET claimed_until = $1 + attempts * $2, last_error = $3 WHERE id = $4 AND claimed_by = $5")
                .bind(now_ms)
                .bind(RETRY_MS)
                .bind(e.to_string())
                .bind(id)
                .bind(&self.owner)
                .execute(db)
                .await?;
        }
        Ok(())
    }

    async fn mark_sent(&self, tx: &mut db::Tx<'_>, id: i64, now_ms: i64) -> sqlx::Result<()> {
        sqlx::query("UPDATE outbox SET sent_at = $1 WHERE id = $2 AND claimed_by = $3")
            .bind(now_ms)
            .bind(id)
            .bind(&self.owner)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn email(
        &self,
        id: i64,
        ref_id: &str,
        kind: &str,
        payload: &Value,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        self.mailer.send(ref_id, kind, payload).await?;
        let mut tx = crate::db::begin_write(&self.db).await?;
        self.mark_sent(&mut tx, id, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// A waiting-room message; false when skipped (no service token).
    async fn notice(
        &self,
        id: i64,
        kind: &str,
        payload: &Value,
        now_ms: i64,
    ) -> anyhow::Result<bool> {
        let cfg = &self.config;
        let token = cfg.service_token.as_ref().map(|t| t.expose());
        let sent = notify::send(&self.http, &cfg.waiting_room_url, token, kind, payload).await?;
        let mut tx = crate::db::begin_write(&self.db).await?;
        self.mark_sent(&mut tx, id, now_ms).await?;
        if !sent {
            sqlx::query("UPDATE outbox SET last_error = 'skipped: no service_token' WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(sent)
    }

    async fn refund(
        &self,
        id: i64,
        hold_id: &str,
        payload: &Value,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        let pid = payload["payment_id"].as_str().unwrap_or_default();
        let r = self
            .gateway
            .refund(pid, &format!("refund-{hold_id}"), None)
            .await?;
        let mut tx = crate::db::begin_write(&self.db).await?;
        let show: Option<String> = sqlx::query_scalar(
            "UPDATE refunds SET status = 'refunded', refund_id = $1, done_at = $2 \
             WHERE hold_id = $3 AND status = 'pending' RETURNING show_id",
        )
        .bind(&r.refund_id)
        .bind(now_ms)
        .bind(hold_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(show) = show {
            let mut notice = payload.clone();
            notice["refund_id"] = r.refund_id.clone().into();
            enqueue(&mut tx, hold_id, "refund-notice", &show, &notice, now_ms).await?;
            db::audit(
                &mut tx,
                now_ms,
                &show,
                hold_id,
                "refunded",
                Actor::Reconciler,
                &r.refund_id,
            )
            .await?;
        }
        self.mark_sent(&mut tx, id, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// An operator's refund of a cancellation (`ref_id` = the cancellation id, also the gateway
    /// refund's idempotency key): `amount_cents` back at the gateway, then the fan's
    /// `cancellation-email`, in one transaction with the refund recorded and audited.
    async fn booking_refund(
        &self,
        id: i64,
        cancel_id: &str,
        payload: &Value,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        let pid = payload["payment_id"].as_str().unwrap_or_default();
        let amount = payload["amount_cents"].as_i64();
        let r = self.gateway.refund(pid, cancel_id, amount).await?;
        let mut tx = crate::db::begin_write(&self.db).await?;
        let row: Option<(String, String)> = sqlx::query_as(
            "UPDATE cancellations SET refund = 'refunded', refund_id = $1, done_at = $2 \
             WHERE id = $3 AND refund = 'pending' RETURNING show_id, hold_id",
        )
        .bind(&r.refund_id)
        .bind(now_ms)
        .bind(cancel_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((show, hold)) = row {
            let mut mail = payload.clone();
            mail["refund"] = "refunded".into();
            mail["refund_id"] = r.refund_id.clone().into();
            // the email the cancellation asked for (a compensation's differs), by default the
            // cancellation's
            let kind = payload["mail"].as_str().unwrap_or("cancellation-email");
            enqueue(&mut tx, cancel_id, kind, &show, &mail, now_ms).await?;
            let why = format!("{} cents, {}", amount.unwrap_or_default(), r.refund_id);
            db::audit(
                &mut tx,
                now_ms,
                &show,
                &hold,
                "refunded",
                Actor::Operator,
                &why,
            )
            .await?;
        }
        self.mark_sent(&mut tx, id, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Loops `step` every `interval` until the task is dropped.
    pub async fn run(self, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // A full batch: more may be due, so the next step starts at once (a backlog drains
            // at the senders' pace, not one batch per tick).
            loop {
                match self.step(self.clock.now_ms()).await {
                    Ok(o) if o.due == BATCH as usize && o.failed < o.due => continue,
                    Ok(_) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "outbox step failed");
                        break;
                    }
                }
            }
        }
    }
}
