//! Payments through the untrusted gateway (DESIGN "Payments"): create once per hold, the browser
//! callback (issued ids only, per-payment signature, refused after the deadline, `status`
//! ignored), execute at most once under a conditional-update guard, one query after an execute
//! timeout, and the fan's release of a hold whose payment is dead.
//!
//! The rest of the payment side lives beside this file: [`confirm`] (the one HELD→PAID update,
//! late success and the refund it queues), [`cancel`] (a booking cancelled in full or by seat:
//! refunded or charged back at the gateway, or by an operator, with the refund it asks for), [`webhook`] (the gateway's signed notifications),
//! [`oversold`] (an operator moves, compensates or refunds an oversold pool booking),
//! [`reconciler`] (the only releaser after a payment attempt) with its extension [`ladder`] and
//! the [`late`]-success sweep. The gateway client is `crate::gateway`, one layer down.
//!
//! Layer: above `state` (the service state these take), `inventory`, `outbox`, `gateway`, `db`;
//! below `http`.

pub mod attempts;
pub mod cancel;
pub mod confirm;
pub mod ladder;
pub mod late;
pub mod oversold;
pub mod reconciler;
pub mod webhook;

use axum::http::StatusCode;
use hmac::{Hmac, Mac};
use sale_common::Problem;
use serde_json::{json, Value};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::db::{self, Actor};
use crate::error::ApiResult;
use crate::gateway::{GatewayError, PayStatus, PaymentState};
use crate::inventory::holds::{self, Hold};
use crate::inventory::releases::Release;
use crate::state::AppState;
use confirm::{confirm_paid, Confirm};

/// An execute claim older than this is considered abandoned (crashed owner), ms.
const EXECUTE_STALE_MS: i64 = 60_000;

/// A payment claim (`pending:{ms}:{uuid}`, [`claim_token`]) older than this is abandoned, ms:
/// the call that made it ended without storing a payment or giving the claim back (its store
/// failed while the database was locked or down, then so did the give-back; or the process
/// died between the gateway's create and the store). Longer than a create and its store take
/// at most (the gateway's 5 s timeout, the checkout's lock waits, the request limit's 15 s);
/// a late store by the abandoned call finds the claim gone and writes nothing
/// ([`attempts::store_created`]). A newcomer review saw such a claim answer every pay and
/// release `409 payment-in-progress` until the hold lapsed (8 minutes), the seat lost.
pub const PAYMENT_CLAIM_STALE_MS: i64 = 30_000;

/// A fresh payment claim for a hold's `payment_id` at `now_ms`: `pending:{now_ms}:{uuid}`.
pub(crate) fn claim_token(now_ms: i64) -> String {
    format!("pending:{now_ms}:{}", uuid::Uuid::new_v4())
}

/// Whether `payment_id` is a payment claim older than [`PAYMENT_CLAIM_STALE_MS`] at `now_ms`.
/// A claim without its time (`pending:{uuid}`, made before claims carried it) is never stale.
pub(crate) fn claim_is_stale(payment_id: &str, now_ms: i64) -> bool {
    payment_id
        .strip_prefix("pending:")
        .and_then(|rest| rest.split_once(':'))
        .and_then(|(ms, _)| ms.parse::<i64>().ok())
        .is_some_and(|at| now_ms.saturating_sub(at) > PAYMENT_CLAIM_STALE_MS)
}

/// What the gateway says about a hold's payment after [`settle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    /// The hold is PAID (by this call or earlier).
    Paid(Confirm),
    /// Cancelled, failed or expired at the gateway: the hold may be released.
    Dead(PayStatus),
    /// Not decided yet (created/approved, or another task is executing).
    Pending(PayStatus),
    /// The gateway did not answer; nothing may be concluded.
    Unknown(String),
}

fn real_payment_id(h: &Hold) -> Option<&str> {
    h.payment_id
        .as_deref()
        .filter(|p| !p.starts_with("pending:"))
}

/// Asks the gateway about `hold`'s payment, executing it at most once (owner-token guard: a
/// conditional update of `executing_at`) and only before the hold's deadline, querying once
/// after an execute timeout, and confirming the hold when the gateway says completed.
pub async fn settle(state: &AppState, hold: &Hold, actor: Actor) -> ApiResult<Settlement> {
    Ok(settle_owned(state, hold, actor).await?.0)
}

/// [`settle`], and whether this call held the execute (the owner lock, [`take_execute`]):
/// false when another request was executing and this one only asked the gateway.
async fn settle_owned(
    state: &AppState,
    hold: &Hold,
    actor: Actor,
) -> ApiResult<(Settlement, bool)> {
    let Some(pid) = real_payment_id(hold) else {
        return Ok((Settlement::Unknown("no payment".into()), false));
    };
    let now = state.clock.now_ms();
    // The callback executes at once (the fan just approved); the reconciler and the fan's
    // cancel ask first and execute only an approved payment.
    if actor != Actor::Callback {
        match state.gateway.query(pid).await {
            Ok(s) if s.status == PayStatus::Approved => {}
            Ok(s) => return Ok((finish(state, hold, actor, s).await?, false)),
            Err(e) => return Ok((Settlement::Unknown(e.to_string()), false)),
        }
    }
    let owner = if now < hold.expires_at {
        // One statement, committed on its own: no BEGIN and COMMIT round trips around it.
        take_execute(&state.db, hold, pid, now).await?
    } else {
        // Only the reconciler gets here past the deadline, and only for an approved payment.
        actor == Actor::Reconciler && keep_to_execute(state, hold, pid, now).await?
    };
    let answer = if owner {
        let executed = match state.gateway.execute(pid).await {
            Ok(s) => Ok(s),
            Err(GatewayError::Timeout) => state.gateway.query(pid).await,
            Err(GatewayError::Refused(Some(st))) => Ok(PaymentState {
                status: st,
                transaction_id: None,
                refunded_cents: 0,
            }),
            Err(e) => Err(e),
        };
        if state.config.crash_after_execute && actor == Actor::Callback {
            if let Ok(PaymentState {
                status: PayStatus::Completed,
                ..
            }) = &executed
            {
                tracing::error!(hold = %hold.id, "simulated crash after execute (B08 test hook)");
                return Err(anyhow::anyhow!("simulated crash after execute").into());
            }
        }
        executed
    } else {
        state.gateway.query(pid).await
    };
    let settled = match answer {
        Ok(s) => finish(state, hold, actor, s).await?,
        Err(e) => Settlement::Unknown(e.to_string()),
    };
    Ok((settled, owner))
}

/// The owner lock on executing `hold`'s payment (the callback's and the reconciler's): one
/// conditional update of `executing_at`, won by one caller while the hold is HELD with this
/// payment; a claim older than [`EXECUTE_STALE_MS`] is abandoned and may be taken again.
async fn take_execute<'e, E>(on: E, hold: &Hold, pid: &str, now: i64) -> sqlx::Result<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let n = sqlx::query(
        "UPDATE holds SET executing_at = $1 WHERE id = $2 AND status = 'HELD' AND payment_id = $3 \
         AND (executing_at IS NULL OR executing_at < $4)",
    )
    .bind(now)
    .bind(&hold.id)
    .bind(pid)
    .bind(now - EXECUTE_STALE_MS)
    .execute(on)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Case B13: at or past the deadline the gateway says approved (the fan paid; the callback was
/// lost). Releasing would sell the seat again while the payment can still complete, so the
/// reconciler takes the same owner lock as the callback and, in the same transaction, keeps the
/// hold's seats for the execute ([`holds::keep`]: the seats, not a lapsed copy another fan has
/// taken since). False when another caller executes or the seats are gone (the hold is then
/// released as before: the approved payment is never executed, so no money is taken).
async fn keep_to_execute(state: &AppState, hold: &Hold, pid: &str, now: i64) -> ApiResult<bool> {
    let pg = db::backend(&state.db) == db::Backend::Postgres;
    let mut tx = crate::db::begin_write(&state.db).await?;
    if !take_execute(&mut *tx, hold, pid, now).await?
        || !holds::keep(&mut tx, pg, hold, now + EXECUTE_STALE_MS).await?
    {
        tx.rollback().await?;
        return Ok(false);
    }
    db::audit(
        &mut tx,
        now,
        &hold.show_id,
        &hold.id,
        "execute-after-deadline",
        Actor::Reconciler,
        "approved at the deadline: executed, seats kept",
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Turns the gateway's answer into a [`Settlement`], confirming a completed payment.
async fn finish(
    state: &AppState,
    hold: &Hold,
    actor: Actor,
    st: PaymentState,
) -> ApiResult<Settlement> {
    match st.status {
        PayStatus::Completed | PayStatus::Refunded | PayStatus::Disputed => {
            let pid = hold.payment_id.as_deref().unwrap_or_default();
            let txn = st
                .transaction_id
                .unwrap_or_else(|| format!("unknown-{pid}"));
            let now = state.clock.now_ms();
            let c = confirm_paid(&state.db, hold, &txn, actor, now, None).await?;
            if c.is_paid() && cancel::money_back(st.status) {
                // Paid, then refunded or charged back at the gateway: the booking ends (B14).
                cancel::at_gateway(&state.db, &hold.id, st.status, None, now).await?;
            }
            Ok(Settlement::Paid(c))
        }
        s if s.is_dead() => {
            if let Some(pid) = real_payment_id(hold) {
                attempts::record_outcome(&state.db, pid, s).await?;
            }
            Ok(Settlement::Dead(s))
        }
        s => Ok(Settlement::Pending(s)),
    }
}

/// The detail of a `409 payment-in-progress` answered while another request of the fan's is
/// creating the hold's payment at the gateway.
const CREATING: &str =
    "another request is creating this hold's payment at the gateway; ask again in a second";

/// `409 hold-paid`.
pub(crate) fn paid_problem() -> Problem {
    Problem::new(StatusCode::CONFLICT, "hold-paid", "Hold is paid")
        .detail("this hold is already paid: there is nothing left to pay")
}

/// `gateway-unavailable` with `Retry-After`, as `status` (502 on create, 503 on void).
pub(crate) fn gateway_unavailable(status: StatusCode) -> Problem {
    Problem::new(status, "gateway-unavailable", "Payment gateway unavailable").retry_after(2)
}

/// `422 unknown-attempt`: `replaces` names no payment attempt of this hold.
pub(crate) fn unprocessable_attempt(pid: &str) -> crate::error::ApiError {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "unknown-attempt",
        "Unknown payment attempt",
    )
    .detail(format!(
        "{} is not a payment of this hold",
        crate::error::clip(pid)
    ))
    .into()
}

/// Whether a payment may start now: the hold is HELD (else `409 hold-paid` or `409
/// hold-not-held` with `hold_status`) and its last moment to start paying has not passed (else
/// `409 payment-session-over`).
pub(crate) fn payable(state: &AppState, hold: &Hold) -> Result<(), Problem> {
    if hold.status == "PAID" {
        return Err(paid_problem());
    }
    if hold.status != "HELD" {
        // `status` in a problem body is the HTTP code (RFC 9457): the hold's goes elsewhere.
        return Err(
            Problem::new(StatusCode::CONFLICT, "hold-not-held", "Hold is not held")
                .with("hold_status", hold.status.clone()),
        );
    }
    let pay_by = pay_by_ms(&state.config, hold);
    if state.clock.now_ms() >= pay_by {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "payment-session-over",
            "Payment session is over",
        )
        .detail("the last moment to start paying for this hold has passed")
        .with("pay_by", pay_by / 1000));
    }
    Ok(())
}

/// The fan's one deadline for `hold`, epoch ms (DECISIONS "Tokens, capacity and clocks"): the
/// earliest of the hold's end and the payment session's last useful start (its end minus the
/// channel's minimum checkout time, `Channel::min_checkout`). The admission's end does not cut it short: paying needs a
/// live hold, not a live admission.
pub fn pay_by_ms(config: &crate::config::Config, hold: &Hold) -> i64 {
    // A channel no longer configured: the default minute.
    let min_checkout_s = config
        .channels
        .get(&hold.channel)
        .map_or(60, crate::config::Channel::min_checkout);
    let min_checkout_ms = i64::try_from(min_checkout_s)
        .unwrap_or(0)
        .saturating_mul(1000);
    let last_start = hold.payment_expires_at.saturating_sub(min_checkout_ms);
    last_start.min(hold.expires_at)
}

/// The hold's current attempt as the pay call answers it: `{payment_id, checkout_url, attempt}`.
pub(crate) async fn current_answer(state: &AppState, hold: &Hold) -> ApiResult<Value> {
    let (Some(pid), Some(url)) = (real_payment_id(hold), hold.checkout_url.as_deref()) else {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "payment-in-progress",
            "Payment is being created",
        )
        .detail(CREATING)
        .retry_after(1)
        .into());
    };
    let attempt = attempts::current(&state.db, pid)
        .await?
        .map_or(1, |(n, _)| n);
    Ok(json!({"payment_id": pid, "checkout_url": url, "attempt": attempt}))
}

/// `POST /api/holds/{hold}/pay`: creates the gateway payment once; again → the same one (also
/// when it died: paying again is [`attempts::pay_again`], which names the attempt it replaces).
/// A paid hold → `409 hold-paid`; a released one → `409 hold-not-held` (with `hold_status`).
pub async fn start(state: &AppState, hold: &Hold) -> ApiResult<Value> {
    if hold.status == "HELD" && real_payment_id(hold).is_some() && hold.checkout_url.is_some() {
        return current_answer(state, hold).await;
    }
    payable(state, hold)?;
    let now = state.clock.now_ms();
    let token = claim_token(now);
    // An abandoned claim is taken over (`PAYMENT_CLAIM_STALE_MS`); `payment_id = NULL` never
    // holds, so without one only a hold with no payment is claimed.
    let stale = hold
        .payment_id
        .as_deref()
        .filter(|p| claim_is_stale(p, now));
    let claimed = sqlx::query(
        "UPDATE holds SET payment_id = $1 WHERE id = $2 AND status = 'HELD' \
         AND (payment_id IS NULL OR payment_id = $3)",
    )
    .bind(&token)
    .bind(&hold.id)
    .bind(stale)
    .execute(&state.db)
    .await?
    .rows_affected();
    if let (1, Some(old)) = (claimed, stale) {
        tracing::warn!(hold = %hold.id, claim = %old, "took over an abandoned payment claim");
    }
    if claimed == 0 {
        // Released (or paid) since it was read: say so, not "in progress".
        if let Some(now) = holds::load(&state.db, &hold.id).await? {
            payable(state, &now)?;
        }
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "payment-in-progress",
            "Payment is being created",
        )
        .detail(CREATING)
        .retry_after(1)
        .into());
    }
    create_at_gateway(state, hold, &token).await
}

/// Creates the payment at the gateway for a hold whose `payment_id` was claimed as `token`
/// (`pending:…`), then stores it as the hold's current attempt. A failed create gives the claim
/// back (`payment_id` NULL: the fan may start again) and answers `502 gateway-unavailable`
/// (`503` when no gateway access token could be had: nothing was sent), with `Retry-After`.
pub(crate) async fn create_at_gateway(
    state: &AppState,
    hold: &Hold,
    token: &str,
) -> ApiResult<Value> {
    let now = state.clock.now_ms();
    let return_url = format!("{}/payment/callback", state.config.public_base());
    let notify_url = format!("{}/payment/webhook", state.config.public_base());
    let currency = state
        .config
        .shows
        .iter()
        .find(|s| s.id == hold.show_id)
        .map_or("EUR", |s| s.venue.currency.as_str());
    let created = state
        .gateway
        .create(
            hold.amount_cents,
            currency,
            &hold.id,
            &return_url,
            &notify_url,
            hold.payment_expires_at / 1000,
        )
        .await;
    let created = match created {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, hold = %hold.id, "payment create failed");
            sqlx::query("UPDATE holds SET payment_id = NULL WHERE id = $1 AND payment_id = $2")
                .bind(&hold.id)
                .bind(token)
                .execute(&state.db)
                .await?;
            // Without a token nothing reached the gateway: the booking core itself is not
            // ready yet (RFC 9110 15.6.4: 503 with Retry-After). Otherwise the gateway failed.
            let status = match e {
                GatewayError::NoToken(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::BAD_GATEWAY,
            };
            return Err(gateway_unavailable(status).into());
        }
    };
    let stored = attempts::NewPayment {
        hold_id: &hold.id,
        show_id: &hold.show_id,
        token,
        payment_id: &created.payment_id,
        signature: &created.signature,
        checkout_url: &created.checkout_url,
    };
    let attempt = match attempts::store_created(&state.db, &stored, now).await {
        Ok(Some(attempt)) => attempt,
        Ok(None) => {
            // The claim was no longer the hold's (taken over as abandoned, or the hold ended):
            // nothing was stored, and this payment, never shown to the fan, is voided.
            void_unshown(state, &hold.id, &created.payment_id).await;
            let Some(now_hold) = holds::load(&state.db, &hold.id).await? else {
                return Err(Problem::not_found(format!("hold {}", hold.id)).into());
            };
            payable(state, &now_hold)?;
            return current_answer(state, &now_hold).await;
        }
        Err(e) => {
            // Not stored (a lock held past its wait, the database gone): the claim is given
            // back so the fan's retry pays, unless the store did commit and only its answer
            // was lost (the hold then carries the payment, not the claim, and the give-back
            // changes nothing). Given back, the payment was not stored: void it. When the
            // give-back fails too, the claim is taken over once abandoned.
            let given_back =
                sqlx::query("UPDATE holds SET payment_id = NULL WHERE id = $1 AND payment_id = $2")
                    .bind(&hold.id)
                    .bind(token)
                    .execute(&state.db)
                    .await
                    .is_ok_and(|r| r.rows_affected() == 1);
            tracing::warn!(error = %e, hold = %hold.id, given_back, "created payment not stored");
            if given_back {
                void_unshown(state, &hold.id, &created.payment_id).await;
            }
            return Err(e.into());
        }
    };
    Ok(
        json!({"payment_id": created.payment_id, "checkout_url": created.checkout_url, "attempt": attempt}),
    )
}

/// Voids `payment_id`, a payment the gateway created for `hold_id` that was not stored and
/// whose checkout URL no fan was given (so nobody can have approved it); an error is only
/// logged (unvoided, it lapses at the gateway at its payment session's end).
async fn void_unshown(state: &AppState, hold_id: &str, payment_id: &str) {
    if let Err(e) = state.gateway.void(payment_id).await {
        tracing::warn!(error = %e, hold = %hold_id, payment = %payment_id, "void of an unstored payment failed");
    }
}

/// hex HMAC-SHA256(secret, payment_id), the gateway's per-payment signature.
pub fn expected_signature(secret: &str, payment_id: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(payment_id.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// Where the callback sends the browser.
#[derive(Debug, PartialEq, Eq)]
pub enum CallbackOutcome {
    /// `/confirmation.html?hold=…`
    Confirmed(String),
    /// `/book.html?show=…&hold=…`
    Back {
        /// Show id.
        show: String,
        /// Hold id.
        hold: String,
    },
}

/// `GET /payment/callback`: verify, then settle through the gateway; the redirect's `status` is
/// never read (anyone can forge it, case B09).
pub async fn callback(
    state: &AppState,
    payment_id: &str,
    signature: &str,
) -> ApiResult<CallbackOutcome> {
    let started = tokio::time::Instant::now();
    let hold: Option<Hold> = if payment_id.starts_with("pending:") {
        None
    } else {
        holds::load_by_payment(&state.db, payment_id).await?
    };
    let Some(hold) = hold else {
        return superseded_callback(state, payment_id, signature).await;
    };
    let stored = hold.payment_signature.clone().unwrap_or_default();
    check_signature(state, payment_id, &stored, signature)?;
    let back = CallbackOutcome::Back {
        show: hold.show_id.clone(),
        hold: hold.id.clone(),
    };
    match hold.status.as_str() {
        "PAID" => return Ok(CallbackOutcome::Confirmed(hold.id)),
        "RELEASED" => return Ok(back),
        _ => {}
    }
    if state.clock.now_ms() >= hold.expires_at {
        return Err(
            Problem::new(StatusCode::CONFLICT, "hold-expired", "Hold expired")
                .detail("the hold ended before the payment returned; the reconciler will settle it")
                .with("hold_id", hold.id)
                .into(),
        );
    }
    match settle_owned(state, &hold, Actor::Callback).await? {
        (Settlement::Paid(c), _) if c.is_paid() => Ok(CallbackOutcome::Confirmed(hold.id)),
        // Another request holds the execute (the fan's browser sent the return twice, or two
        // tabs came back): its outcome, not this moment's "approved", says where the fan goes.
        (Settlement::Pending(PayStatus::Approved), false) => {
            wait_for_execute(state, &hold, back, started).await
        }
        _ => Ok(back),
    }
}

/// How often a callback that lost the execute to another request reads the hold, and how
/// often it asks the gateway meanwhile.
const OWNER_POLL: std::time::Duration = std::time::Duration::from_millis(100);
const OWNER_QUERY_EVERY: u32 = 10;

/// The callback that found `hold`'s payment approved while another request executes it
/// (the owner lock, [`take_execute`]) waits for that outcome: the hold PAID → the confirmation;
/// the hold no longer HELD with this payment, or the gateway (asked every second) past
/// `approved` and not completed → the hold's page. It waits only while the owner may still be
/// executing: at most twice the gateway timeout and a second after its claim (`executing_at`,
/// the service clock; an execute that timed out and its one query), since the claim itself
/// stays for [`EXECUTE_STALE_MS`] so that no second execute is sent meanwhile (a newcomer
/// review: returns arriving after the owner gave up each waited 11 s for nothing). It also stops
/// a gateway timeout and two seconds before the request's limit (`db::outage::REQUEST_WITHIN`,
/// counted from `started`, the callback's start: a request cut off there trips the node's
/// outage gate), so a query begun in the loop ends within it. Then the hold's page, as before.
/// Without the wait one of two concurrent returns went to the booking page while the other
/// executed (newcomer review: 2 of 13 runs).
async fn wait_for_execute(
    state: &AppState,
    hold: &Hold,
    back: CallbackOutcome,
    started: tokio::time::Instant,
) -> ApiResult<CallbackOutcome> {
    let pid = hold.payment_id.clone().unwrap_or_default();
    let until = started
        + db::outage::REQUEST_WITHIN
            .saturating_sub(state.config.gateway_timeout)
            .saturating_sub(std::time::Duration::from_secs(2));
    let owner_runs_ms = i64::try_from((state.config.gateway_timeout * 2).as_millis())
        .unwrap_or(i64::MAX)
        .saturating_add(1_000);
    let mut polls = 0u32;
    loop {
        let Some(now) = holds::load(&state.db, &hold.id).await? else {
            return Ok(back);
        };
        if now.status == "PAID" {
            return Ok(CallbackOutcome::Confirmed(now.id));
        }
        let owner_may_run = now
            .executing_at
            .is_some_and(|at| state.clock.now_ms() < at.saturating_add(owner_runs_ms));
        if now.status != "HELD" || now.payment_id.as_deref() != Some(pid.as_str()) || !owner_may_run
        {
            return Ok(back);
        }
        if tokio::time::Instant::now() >= until {
            return Ok(back);
        }
        tokio::time::sleep(OWNER_POLL).await;
        polls += 1;
        if polls.is_multiple_of(OWNER_QUERY_EVERY) {
            match state.gateway.query(&pid).await {
                Ok(s) if s.status == PayStatus::Approved => {}
                Ok(s) => {
                    return Ok(match finish(state, &now, Actor::Callback, s).await? {
                        Settlement::Paid(c) if c.is_paid() => CallbackOutcome::Confirmed(now.id),
                        _ => back,
                    });
                }
                Err(_) => {}
            }
        }
    }
}

/// Both the stored signature and the HMAC must match `signature` (constant time), else `400
/// bad-signature`.
fn check_signature(
    state: &AppState,
    payment_id: &str,
    stored: &str,
    signature: &str,
) -> Result<(), Problem> {
    let expected = expected_signature(state.config.gateway_secret.expose(), payment_id);
    let ok_stored: bool = stored.as_bytes().ct_eq(signature.as_bytes()).into();
    let ok_hmac: bool = expected.as_bytes().ct_eq(signature.as_bytes()).into();
    if ok_stored && ok_hmac {
        Ok(())
    } else {
        Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-signature",
            "Bad payment signature",
        ))
    }
}

/// A callback from an attempt the hold no longer uses (an old checkout tab): verified like any
/// other, then the browser goes back to the hold's page; nothing is settled (the reconciler voids
/// superseded attempts). A payment id the booking core never issued is `404 unknown-payment`.
async fn superseded_callback(
    state: &AppState,
    payment_id: &str,
    signature: &str,
) -> ApiResult<CallbackOutcome> {
    let old = if payment_id.starts_with("pending:") {
        None
    } else {
        attempts::superseded(&state.db, payment_id).await?
    };
    let Some((hold_id, stored)) = old else {
        return Err(
            Problem::new(StatusCode::NOT_FOUND, "unknown-payment", "Unknown payment")
                .detail("this payment was not issued by the booking core")
                .into(),
        );
    };
    check_signature(state, payment_id, &stored, signature)?;
    let Some(hold) = holds::load(&state.db, &hold_id).await? else {
        return Err(Problem::not_found(format!("hold {hold_id}")).into());
    };
    if hold.status == "PAID" {
        return Ok(CallbackOutcome::Confirmed(hold.id));
    }
    Ok(CallbackOutcome::Back {
        show: hold.show_id,
        hold: hold.id,
    })
}

/// The fan asked to end payment `pid` (a release, or paying again) and the gateway answered the
/// void with completed: the fan paid after all, so the hold is confirmed (the caller answers
/// `409 hold-paid`).
pub(crate) async fn paid_on_void(
    state: &AppState,
    hold: &Hold,
    pid: &str,
    transaction_id: Option<String>,
) -> ApiResult<()> {
    let txn = transaction_id.unwrap_or_else(|| format!("unknown-{pid}"));
    confirm_paid(
        &state.db,
        hold,
        &txn,
        Actor::Api,
        state.clock.now_ms(),
        None,
    )
    .await?;
    Ok(())
}

/// The fan's release of hold `id` on PostgreSQL with no read of the hold first
/// ([`crate::inventory::onetrip::release_own`], in a batch with the other fans' releases
/// waiting: [`crate::inventory::releases::OwnReleases`]): `Some` (the answer [`release_by_fan`] gives a
/// released hold) when `id` is a plain seat hold of `adm`'s visitor, made under `adm`, HELD
/// with no payment, and the one statement released it; `None` (nothing written) otherwise, or
/// on SQLite: the caller reads the hold and runs [`release_by_fan`].
pub async fn release_own_plain(
    state: &AppState,
    adm: &crate::door::Admission,
    id: &str,
) -> ApiResult<Option<Value>> {
    if crate::db::backend(&state.db) != crate::db::Backend::Postgres {
        return Ok(None);
    }
    let release = Release {
        hold_id: id.to_owned(),
        show: adm.event.clone(),
        jti: adm.jti.clone(),
        payment: String::new(),
        reason: FAN_RELEASE.to_owned(),
        now_ms: state.clock.now_ms(),
    };
    let own = crate::inventory::onetrip::OwnRelease {
        release,
        visitor: adm.sub.clone(),
    };
    let released = state.own_releases.release(&state.db, own).await?;
    Ok(released.then(|| released_answer(id)))
}

/// The answer to a fan's `DELETE` of a hold that is (or already was) released.
fn released_answer(id: &str) -> Value {
    json!({"hold_id": id, "status": "RELEASED"})
}

/// The audit reason of a fan's release of a hold with no payment.
const FAN_RELEASE: &str = "released by fan";

/// `DELETE /api/holds/{hold}`: the fan cancels on the booking page. A hold with no payment is
/// released at once; otherwise the payment is voided at the gateway and the hold released
/// (through the one release code) only once the gateway confirms it cancelled, failed or
/// expired. A payment that completed instead is confirmed; anything uncertain answers 409.
pub async fn release_by_fan(state: &AppState, hold: &Hold) -> ApiResult<Value> {
    let conflict = |kind: &'static str, title: &str| -> ApiResult<Value> {
        Err(Problem::new(StatusCode::CONFLICT, kind, title).into())
    };
    match hold.status.as_str() {
        "RELEASED" => return Ok(released_answer(&hold.id)),
        "PAID" => return conflict("hold-paid", "Hold is paid"),
        _ => {}
    }
    let reason = match (&hold.payment_id, real_payment_id(hold)) {
        (None, _) => FAN_RELEASE.to_owned(),
        // An abandoned claim (`PAYMENT_CLAIM_STALE_MS`): no payment was stored or shown.
        (Some(p), None) if claim_is_stale(p, state.clock.now_ms()) => {
            format!("{FAN_RELEASE}; abandoned payment claim")
        }
        (Some(_), None) => return conflict("payment-in-progress", "Payment is being created"),
        (Some(_), Some(pid)) => match state.gateway.void(pid).await {
            Ok(s) if s.status.is_dead() => {
                // The fan's view of the hold names the gateway's final answer (API.md
                // `payment.gateway_status`), as after a settle (newcomer review: `null`).
                attempts::record_outcome(&state.db, pid, s.status).await?;
                format!("released by fan; payment {:?}", s.status).to_lowercase()
            }
            Ok(PaymentState {
                status: PayStatus::Completed,
                transaction_id,
                ..
            }) => {
                paid_on_void(state, hold, pid, transaction_id).await?;
                return conflict("hold-paid", "Hold is paid");
            }
            Ok(_) => {
                return conflict(
                    "payment-in-progress",
                    "A payment for this hold may still complete",
                )
            }
            Err(e) => {
                tracing::warn!(error = %e, "gateway void failed on release");
                return Err(Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "gateway-unavailable",
                    "Payment gateway unavailable",
                )
                .detail("the payment could not be cancelled yet; try again")
                .retry_after(2)
                .into());
            }
        },
    };
    // Released only if the hold's payment is still the one read above: a pay that claimed the
    // hold meanwhile (its `pending:` token, then a payment at the gateway) must not be left on
    // a released hold (newcomer review: 20 DELETEs against 5 pays, once in about 66 tries, an
    // approved payment on a RELEASED hold that nothing voided). The release's own guarded
    // update checks it; on PostgreSQL a pay's claim then waits on the hold row and finds it
    // released.
    // On SQLite the release is applied with the others waiting, in one transaction
    // (`inventory::releases`).
    let release = Release {
        hold_id: hold.id.clone(),
        show: hold.show_id.clone(),
        jti: hold.admission_jti.clone(),
        payment: hold.payment_id.clone().unwrap_or_default(),
        reason,
        now_ms: state.clock.now_ms(),
    };
    let released = state.releases.release(&state.db, release).await?;
    if !released {
        let now = holds::load(&state.db, &hold.id).await?;
        return match now.as_ref().map(|h| h.status.as_str()) {
            Some("RELEASED") | None => Ok(released_answer(&hold.id)),
            Some("PAID") => conflict("hold-paid", "Hold is paid"),
            _ => Err(Problem::new(
                StatusCode::CONFLICT,
                "payment-in-progress",
                "A payment for this hold was just started",
            )
            .detail("the payment is being created; try again to cancel it")
            .retry_after(1)
            .into()),
        };
    }
    Ok(released_answer(&hold.id))
}
