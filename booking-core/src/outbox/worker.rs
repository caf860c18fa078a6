//! The outbox worker (DESIGN "Payments": the confirmation email is written to an outbox in the
//! same transaction as PAID and sent after, exactly one per booking). Each [`Outbox::step`]
//! claims due messages under a short lease (so several processes never send the same message
//! at once), then: emails (`confirmation-email`, `refund-notice`) are written to the mail
//! directory as `{kind}-{ref_id}.eml` (a retry rewrites the same file: still one email);
//! `refund` calls the gateway with the idempotent key `refund-{hold_id}`, records the refund and
//! queues the fan's `refund-notice` in one transaction; `booking-refund` (an operator's refund of
//! a cancellation) refunds its amount under the cancellation's id as the idempotency key, then
//! queues the fan's `cancellation-email`; `session-end`, `sold-out` and `reopen` are posted
//! to the waiting room's internal API ([`super::notify`]); emails go through [`super::mail`].

use std::sync::Arc;
use std::time::Duration;

use sale_common::SharedClock;
use serde_json::Value;

use super::mail::{Booked, Mailer};
use super::{enqueue, notify};
use crate::config::Config;
use crate::db::{self, Actor, Db};
use crate::error::ApiResult;
use crate::gateway::{Gateway, GatewayError, PayStatus};

/// Messages claimed per step (a step's session ends of one event go to the waiting room in
/// one call, [`notify::send_ends`]).
pub const BATCH: i64 = 128;
/// The poll of [`Outbox::step`]: the oldest [`BATCH`] (`$2`) unsent messages whose claim is
/// free or lapsed by `$1` (epoch ms), as `(id, ref_id, kind, payload)`. Served in id order by
/// the partial index `outbox_unsent (id) WHERE sent_at IS NULL` (migration
/// `20261202030000_outbox_unsent`), so it reads about one batch whatever the backlog: over the
/// old `(sent_at, id)` index PostgreSQL read and sorted every unsent row (`IS NULL` does not
/// make `sent_at` a constant for the `ORDER BY`), 4,964 rows and 7.4 ms a poll after one bench.
pub const DUE: &str = "SELECT id, ref_id, kind, payload FROM outbox WHERE sent_at IS NULL \
     AND (claimed_until IS NULL OR claimed_until <= $1) ORDER BY id LIMIT $2";
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
    /// True once this node is stopping ([`Outbox::stopping`]); `None`: never.
    stopping: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Outbox {
    /// A worker with its own claim owner token, over the parts of the service state it uses
    /// (`AppState::outbox` passes them).
    pub fn new(db: Db, config: Arc<Config>, gateway: Gateway, clock: SharedClock) -> Self {
        // `Config::validate` already refused an unusable `smtp_url` at start-up.
        let mailer = Mailer::from_config(&config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "smtp_url unusable; writing emails to mail_dir");
            Mailer::dir(&config)
        });
        Self {
            db,
            config,
            gateway,
            clock,
            owner: uuid::Uuid::new_v4().to_string(),
            http: reqwest::Client::new(),
            mailer,
            stopping: None,
        }
    }

    /// This worker with the node's stop signal (`true` once it is stopping): session ends it
    /// cannot deliver then are logged at info, not warn. They stay queued for the next process
    /// either way; a waiting room stopped with the node (as `up` and `rush --spawn` stop both
    /// together) made every run end with seconds of "session ends failed; will retry".
    pub fn stopping(mut self, stop: tokio::sync::watch::Receiver<bool>) -> Self {
        self.stopping = Some(stop);
        self
    }

    fn is_stopping(&self) -> bool {
        self.stopping.as_ref().is_some_and(|s| *s.borrow())
    }

    /// One pass at `now_ms` (epoch ms): up to [`BATCH`] due messages, oldest first, claimed in
    /// one statement, sent [`SENDERS`] at a time (each a send and its mark, the waiting-room
    /// notices marked together in one statement at the end of the pass; messages of one
    /// `ref_id` one after another, in id order, so a booking's emails keep their order). Sent one by one, at
    /// most one batch per 500 ms tick, the seed rehearsal ended with 832 confirmation emails
    /// and 1,647 session ends still queued. `Err` is the first database error (the other
    /// messages of the pass were still sent or left for a retry).
    #[tracing::instrument(skip_all, fields(now_ms))]
    pub async fn step(&self, now_ms: i64) -> ApiResult<Outcome> {
        use futures::StreamExt;
        let due: Vec<(i64, String, String, String)> = sqlx::query_as(DUE)
            .bind(now_ms)
            .bind(BATCH)
            .fetch_all(&self.db)
            .await?;
        let mut out = Outcome {
            due: due.len(),
            ..Outcome::default()
        };
        // The batch claimed in one statement (another node's worker may hold some of it).
        let claimed = self.claim(&due, now_ms).await?;
        // The session ends (read once, `(id, event, jti)`) go in batches; the rest one by one.
        let (mut ends, mut rest) = (Vec::new(), Vec::new());
        for m in due.into_iter().filter(|m| claimed.contains(&m.0)) {
            match (m.2 == notify::SESSION_END)
                .then(|| notify::end_of(&m.3))
                .flatten()
            {
                Some((event, jti)) => ends.push((m.0, event, jti)),
                None => rest.push(m),
            }
        }
        let mut groups: Vec<Vec<(i64, String, String, String)>> = Vec::new();
        for m in rest {
            match groups.iter_mut().find(|g| g[0].1 == m.1) {
                Some(g) => g.push(m),
                None => groups.push(vec![m]),
            }
        }
        let others = futures::stream::iter(groups)
            .map(|group| async move {
                let (mut got, mut notices) = (Outcome::default(), Vec::new());
                for m in group {
                    notices.extend(self.one(m, now_ms, &mut got).await?);
                }
                Ok((got, notices))
            })
            .buffer_unordered(SENDERS)
            .collect::<Vec<ApiResult<(Outcome, Vec<(i64, bool)>)>>>();
        let (mut results, ended) = tokio::join!(others, self.ends(ends, now_ms));
        results.push(ended);
        let mut first_err = None;
        let mut notices = Vec::new();
        for r in results {
            match r {
                Ok((o, n)) => {
                    notices.extend(n);
                    out.emails += o.emails;
                    out.refunds += o.refunds;
                    out.notices += o.notices;
                    out.skipped += o.skipped;
                    out.failed += o.failed;
                }
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        if let Err(e) = self.mark_notices(&notices, now_ms).await {
            first_err = first_err.or(Some(e.into()));
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Claims the due messages `due` (by id) for this worker in one statement; the ids it got
    /// (a message another worker claimed meanwhile, or sent, is left out).
    async fn claim(
        &self,
        due: &[(i64, String, String, String)],
        now_ms: i64,
    ) -> sqlx::Result<std::collections::HashSet<i64>> {
        if due.is_empty() {
            return Ok(Default::default());
        }
        let mut b = db::Binds::default();
        let (owner, until, now) = (
            b.push(self.owner.clone()),
            b.push(now_ms + CLAIM_MS),
            b.push(now_ms),
        );
        let ids: Vec<String> = due.iter().map(|m| b.push(m.0)).collect();
        let sql = format!(
            "UPDATE outbox SET claimed_by = {owner}, claimed_until = {until}, attempts = attempts + 1 \
             WHERE id IN ({}) AND sent_at IS NULL AND (claimed_until IS NULL OR claimed_until <= {now}) \
             RETURNING id",
            ids.join(", ")
        );
        let got: Vec<i64> = sqlx::query_scalar_with(&sql, b.args())
            .fetch_all(&self.db)
            .await?;
        Ok(got.into_iter().collect())
    }

    /// Marks the waiting-room messages of a step sent, in one statement: `(id, delivered)`,
    /// where not delivered means dropped for want of a service token (noted in `last_error`).
    async fn mark_notices(&self, notices: &[(i64, bool)], now_ms: i64) -> sqlx::Result<()> {
        if notices.is_empty() {
            return Ok(());
        }
        let mut b = db::Binds::default();
        let (at, owner) = (b.push(now_ms), b.push(self.owner.clone()));
        let ids: Vec<String> = notices.iter().map(|(id, _)| b.push(*id)).collect();
        let skipped: Vec<String> = notices
            .iter()
            .filter(|(_, sent)| !sent)
            .map(|(id, _)| b.push(*id))
            .collect();
        let note = if skipped.is_empty() {
            String::new()
        } else {
            format!(
                ", last_error = CASE WHEN id IN ({}) THEN 'skipped: no service_token' ELSE last_error END",
                skipped.join(", ")
            )
        };
        let sql = format!(
            "UPDATE outbox SET sent_at = {at}{note} WHERE id IN ({}) AND claimed_by = {owner}",
            ids.join(", ")
        );
        let mut tx = crate::db::begin_write(&self.db).await?;
        sqlx::query_with(&sql, b.args()).execute(&mut *tx).await?;
        tx.commit().await
    }

    /// Sends one message `(id, ref_id, kind, payload)` this worker claimed, counting it in
    /// `out`; a failed send is retried later (`RETRY_MS` per attempt so far). A waiting-room
    /// message is marked sent by the caller with the step's others: `Some((id, delivered))`.
    async fn one(
        &self,
        (id, ref_id, kind, payload): (i64, String, String, String),
        now_ms: i64,
        out: &mut Outcome,
    ) -> ApiResult<Option<(i64, bool)>> {
        let db = &self.db;
        let mut notice = None;
        let payload: Value = serde_json::from_str(&payload).unwrap_or_default();
        let report = matches!(kind.as_str(), notify::SOLD_OUT | notify::REOPEN);
        let event = payload["event"].as_str().unwrap_or_default();
        let superseded = report && notify::superseded(db, event, id).await?;
        let res = match kind.as_str() {
            "refund" => self
                .refund(id, &ref_id, &payload, now_ms)
                .await
                .map(|()| out.refunds += 1),
            "booking-refund" => self
                .booking_refund(id, &ref_id, &payload, now_ms)
                .await
                .map(|()| out.refunds += 1),
            notify::SOLD_OUT | notify::REOPEN if superseded => {
                // A later report of the show is the one to send (marked sent, not posted).
                out.skipped += 1;
                notice = Some((id, true));
                Ok(())
            }
            notify::SESSION_END | notify::SOLD_OUT | notify::REOPEN => {
                self.notice(&kind, &payload).await.map(|sent| {
                    match sent {
                        true => out.notices += 1,
                        false => out.skipped += 1,
                    }
                    notice = Some((id, sent));
                })
            }
            _ => self
                .email(id, &ref_id, &kind, &payload, now_ms)
                .await
                .map(|()| out.emails += 1),
        };
        if let Err(e) = res {
            out.failed += 1;
            // `{:#}`: the whole chain (reqwest's own text hides the cause, e.g. "connection
            // refused"), in the log and in `last_error`.
            let why = format!("{e:#}");
            tracing::warn!(outbox = id, kind = %kind, error = %why, "outbox message failed; will retry");
            self.retry_later(&[id], now_ms, &why).await?;
        }
        Ok(notice)
    }

    /// Sends the step's session ends `(id, event, jti)` (those [`notify::end_of`] reads; any
    /// other is sent alone by [`Outbox::one`]), one call per event and
    /// [`notify::END_BATCH`] jtis ([`notify::send_ends`]; sent one per admission, one PostgreSQL
    /// bench run made 11,630 POSTs for as many session ends, about 110 per call now). The
    /// delivered ones come back for [`Outbox::mark_notices`]; a failed call's are retried later.
    async fn ends(
        &self,
        ends: Vec<(i64, String, String)>,
        now_ms: i64,
    ) -> ApiResult<(Outcome, Vec<(i64, bool)>)> {
        let mut by_event: Vec<(String, Vec<(i64, String)>)> = Vec::new();
        for (id, event, jti) in ends {
            match by_event.iter_mut().find(|(e, _)| *e == event) {
                Some((_, v)) => v.push((id, jti)),
                None => by_event.push((event, vec![(id, jti)])),
            }
        }
        let (mut out, mut notices) = (Outcome::default(), Vec::new());
        let cfg = &self.config;
        let token = cfg.service_token.as_ref().map(|t| t.expose());
        for (event, all) in &by_event {
            for chunk in all.chunks(notify::END_BATCH) {
                let jtis: Vec<&str> = chunk.iter().map(|(_, j)| j.as_str()).collect();
                let url = &cfg.waiting_room_url;
                let ids = chunk.iter().map(|(id, _)| *id);
                match notify::send_ends(&self.http, url, token, event, &jtis).await {
                    Ok(sent) => {
                        match sent {
                            true => out.notices += chunk.len(),
                            false => out.skipped += chunk.len(),
                        }
                        notices.extend(ids.map(|id| (id, sent)));
                    }
                    Err(e) => {
                        out.failed += chunk.len();
                        let why = format!("{e:#}");
                        if self.is_stopping() {
                            tracing::info!(event = %event, n = chunk.len(), error = %why, "session ends not sent while this node stops; kept for the next process");
                        } else {
                            tracing::warn!(event = %event, n = chunk.len(), error = %why, "session ends failed; will retry");
                        }
                        self.retry_later(&ids.collect::<Vec<_>>(), now_ms, &why)
                            .await?;
                    }
                }
            }
        }
        Ok((out, notices))
    }

    /// Releases this worker's claim on messages `ids` that failed with `error`: each is due
    /// again [`RETRY_MS`] per attempt so far after `now_ms`.
    async fn retry_later(&self, ids: &[i64], now_ms: i64, error: &str) -> sqlx::Result<()> {
        let mut b = db::Binds::default();
        let (now, wait, err, owner) = (
            b.push(now_ms),
            b.push(RETRY_MS),
            b.push(error.to_owned()),
            b.push(self.owner.clone()),
        );
        let ids: Vec<String> = ids.iter().map(|id| b.push(*id)).collect();
        let sql = format!(
            "UPDATE outbox SET claimed_until = {now} + attempts * {wait}, last_error = {err} \
             WHERE id IN ({}) AND claimed_by = {owner}",
            ids.join(", ")
        );
        sqlx::query_with(&sql, b.args()).execute(&self.db).await?;
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
        let booked = self.booked(kind, payload).await?;
        self.mailer.send(ref_id, kind, payload, &booked).await?;
        let mut tx = crate::db::begin_write(&self.db).await?;
        self.mark_sent(&mut tx, id, now_ms).await?;
        tx.commit().await?;
        Ok(())
    }

    /// What an email of `kind` about `payload` names for the fan beside the payload: the
    /// show's and venue's names and currency from the configuration and the link to the
    /// booking's page; for a `confirmation-email` or `cancellation-email`, also what the hold
    /// booked (one read by its `hold_id`: its seats in the venue's order, its pool places, its
    /// interval) and, for a partial cancellation, whether the booking was cancelled whole since
    /// (one read). A show the configuration no longer has is named by its id.
    async fn booked(&self, kind: &str, payload: &Value) -> sqlx::Result<Booked> {
        let hold = payload["hold_id"].as_str().unwrap_or_default();
        let show = payload["show"].as_str().unwrap_or_default();
        let cfg = &self.config;
        let conf = cfg.shows.iter().find(|s| s.id == show);
        let mut named = Booked {
            show_name: conf.map_or_else(|| show.to_owned(), |c| c.name.clone()),
            venue_name: conf.map(|c| c.venue.name.clone()).unwrap_or_default(),
            currency: conf.map(|c| c.venue.currency.clone()).unwrap_or_default(),
            link: match hold.is_empty() {
                true => String::new(),
                false => format!("{}/confirmation.html?hold={hold}", cfg.public_base()),
            },
            ..Booked::default()
        };
        // What was booked, for a confirmation and for a cancellation (its pool's name, and the
        // interval a whole cancellation ends).
        if !matches!(kind, "confirmation-email" | "cancellation-email") {
            return Ok(named);
        }
        if kind == "cancellation-email" && payload["booking_status"].as_str() == Some("active") {
            let now: Option<String> =
                sqlx::query_scalar("SELECT status FROM bookings WHERE id = $1")
                    .bind(payload["booking_id"].as_str().unwrap_or_default())
                    .fetch_optional(&self.db)
                    .await?;
            named.cancelled_since = now.as_deref() == Some("cancelled");
        }
        // One read for the three parts, seats first in the venue's order: `s` rows (seat id,
        // section, row, number), a `p` row (pool id, places), an `i` row (kind, resource, start
        // and end in epoch ms).
        let parts: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
            "SELECT 's', hs.seat_id, s.section, s.seat_row, s.number FROM hold_seats hs \
             JOIN seats s ON s.show_id = hs.show_id AND s.seat_id = hs.seat_id \
             WHERE hs.hold_id = $1 \
             UNION ALL SELECT 'p', pool_id, '', quantity, 0 FROM hold_pools WHERE hold_id = $1 \
             UNION ALL SELECT 'i', kind, resource, start_ms, end_ms FROM hold_resources \
             WHERE hold_id = $1 \
             ORDER BY 1 DESC, 3, 4, 5, 2",
        )
        .bind(hold)
        .fetch_all(&self.db)
        .await?;
        let zone = conf.map_or("UTC", |c| c.venue.time_zone.as_str());
        let local = |ms: i64| {
            jiff::Timestamp::from_millisecond(ms)
                .ok()
                .and_then(|t| sale_common::localtime::show_in(t, zone).ok())
                .map_or_else(|| ms.to_string(), |t| super::mail::readable_time(&t))
        };
        for (part, a, b, x, y) in parts {
            match part.as_str() {
                "s" => named.seats.push(a),
                "p" => named.places = Some((a, x)),
                _ => named.interval = Some((a, b, local(x), local(y))),
            }
        }
        Ok(named)
    }

    /// Sends a waiting-room message; false when skipped (no service token). Marked sent by
    /// [`Outbox::mark_notices`].
    async fn notice(&self, kind: &str, payload: &Value) -> anyhow::Result<bool> {
        let cfg = &self.config;
        let token = cfg.service_token.as_ref().map(|t| t.expose());
        notify::send(&self.http, &cfg.waiting_room_url, token, kind, payload).await
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
            // The show names the email's show and currency (`Outbox::booked`).
            notice["show"] = show.clone().into();
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
        // `None`: the gateway refused, and the money had already come back whole by the
        // payment provider (a refund or chargeback made there meanwhile, case B14: a newcomer
        // review's per-seat cancel racing a full refund at the gateway was retried for ever,
        // its fan never told).
        // `earlier`: cents of this cancellation the provider had refunded before (a partial
        // refund in its console), so the shop refunded only the rest (third review: asking
        // for the whole amount was refused for ever).
        let mut earlier = 0;
        let refund = match self.gateway.refund(pid, cancel_id, amount).await {
            Ok(r) => Some(r),
            Err(e) => match self.gateway.query(pid).await {
                Ok(s) if matches!(s.status, PayStatus::Refunded | PayStatus::Disputed) => None,
                Ok(s) if !matches!(e, GatewayError::Timeout) => {
                    let left = self.left_to_refund(payload, s.refunded_cents).await?;
                    match (amount, left) {
                        (Some(asked), Some(left)) if left > 0 && left < asked => {
                            let key = format!("{cancel_id}-rest");
                            earlier = asked - left;
                            Some(self.gateway.refund(pid, &key, Some(left)).await?)
                        }
                        // The gateway answers and the money is not back: a refusal to show.
                        _ => {
                            self.refund_refused(cancel_id, payload, &e, now_ms).await?;
                            return Err(e.into());
                        }
                    }
                }
                _ => return Err(e.into()),
            },
        };
        let (state, refund_id) = match &refund {
            Some(r) => ("refunded", Some(r.refund_id.clone())),
            None => ("at-gateway", None),
        };
        let mut tx = crate::db::begin_write(&self.db).await?;
        let row: Option<(String, String)> = sqlx::query_as(
            "UPDATE cancellations SET refund = $1, refund_id = $2, done_at = $3 \
             WHERE id = $4 AND refund = 'pending' RETURNING show_id, hold_id",
        )
        .bind(state)
        .bind(refund_id.as_deref())
        .bind(now_ms)
        .bind(cancel_id)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((show, hold)) = row {
            let mut mail = payload.clone();
            mail["refund"] = state.into();
            mail["refund_id"] = refund_id.clone().into();
            if earlier > 0 {
                mail["refunded_earlier_cents"] = earlier.into();
            }
            // the email the cancellation asked for (a compensation's differs), by default the
            // cancellation's
            let kind = payload["mail"].as_str().unwrap_or("cancellation-email");
            enqueue(&mut tx, cancel_id, kind, &show, &mail, now_ms).await?;
            let why = match &refund_id {
                Some(id) if earlier > 0 => format!(
                    "{} cents, {id}; {earlier} cents of it refunded at the gateway before",
                    amount.unwrap_or_default() - earlier
                ),
                Some(id) => format!("{} cents, {id}", amount.unwrap_or_default()),
                None => format!(
                    "{} cents, refunded at the gateway before the operator's refund",
                    amount.unwrap_or_default()
                ),
            };
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

    /// What is left to refund of `payload`'s payment (cents): its hold's amount less what the
    /// gateway says it refunded (`refunded_cents`); `None` for an unknown hold.
    async fn left_to_refund(
        &self,
        payload: &Value,
        refunded_cents: i64,
    ) -> sqlx::Result<Option<i64>> {
        let paid: Option<i64> = sqlx::query_scalar("SELECT amount_cents FROM holds WHERE id = $1")
            .bind(payload["hold_id"].as_str().unwrap_or_default())
            .fetch_optional(&self.db)
            .await?;
        Ok(paid.map(|p| p - refunded_cents))
    }

    /// An operator's refund the gateway refused (it answered a query, and the money is not
    /// back): the message is retried (`RETRY_MS` per attempt), and the booking's hold gets one
    /// `refund-refused` alert for the back office (`/admin/alerts`), so it is not retried
    /// unseen.
    async fn refund_refused(
        &self,
        cancel_id: &str,
        payload: &Value,
        error: &GatewayError,
        now_ms: i64,
    ) -> sqlx::Result<()> {
        sqlx::query(
            "INSERT INTO alerts (at, show_id, hold_id, kind, message) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (hold_id) DO NOTHING",
        )
        .bind(now_ms)
        .bind(payload["show"].as_str())
        .bind(payload["hold_id"].as_str())
        .bind("refund-refused")
        .bind(format!(
            "the gateway refused the refund of {} ({} cents): {error}; retried",
            cancel_id,
            payload["amount_cents"].as_i64().unwrap_or_default()
        ))
        .execute(&self.db)
        .await?;
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
