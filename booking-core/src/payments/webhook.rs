//! The gateway's signed webhook (DESIGN "Payments" path 2, seed 000 Challenge 1). The signature
//! header `Gateway-Signature: t=<epoch s>,v1=<hex>[,v1=<hex>…]` carries HMAC-SHA256 over
//! `"{t}.{raw body}"`; any `v1` matching any configured key is accepted (secret rotation). A
//! timestamp more than the tolerance (300 s) away from now is refused. A correctly signed
//! delivery is always answered 200: the event only prompts a gateway query, the transaction id
//! is compared, and the event id is de-duplicated in the same transaction as the state change.
//! A payment the gateway says was refunded or charged back cancels its booking
//! ([`crate::payments::cancel`], case B14).

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::db::Actor;
use crate::error::ApiResult;
use crate::gateway::PayStatus;
use crate::inventory::holds;
use crate::payments::cancel::{self, Cancelled};
use crate::payments::confirm::{self, confirm_paid, Confirm};
use crate::state::AppState;

/// Header carrying the signature.
pub const HEADER: &str = "gateway-signature";

/// Why a delivery was refused (nothing changes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// No or unparsable signature header → 400.
    #[error("missing or malformed Gateway-Signature header")]
    Malformed,
    /// Timestamp outside the tolerance → 401.
    #[error("webhook timestamp outside the tolerance")]
    Stale,
    /// No signature matches any key → 401.
    #[error("webhook signature does not match")]
    BadSignature,
}

/// hex HMAC-SHA256(key, "{t}.{body}") (API.md "Webhooks").
pub fn sign(key: &[u8], t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// Checks `header` against `body`, `keys` and `now_s` with `tolerance_s`.
pub fn verify(
    header: Option<&str>,
    body: &[u8],
    keys: &[&[u8]],
    now_s: i64,
    tolerance_s: i64,
) -> Result<(), Refused> {
    let header = header.ok_or(Refused::Malformed)?;
    let mut t: Option<i64> = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = Some(v.parse().map_err(|_| Refused::Malformed)?),
            Some(("v1", v)) => sigs.push(v.to_owned()),
            _ => {}
        }
    }
    let t = t.ok_or(Refused::Malformed)?;
    if sigs.is_empty() {
        return Err(Refused::Malformed);
    }
    if (now_s - t).abs() > tolerance_s {
        return Err(Refused::Stale);
    }
    let ok = keys.iter().any(|k| {
        let want = sign(k, t, body);
        sigs.iter()
            .any(|s| bool::from(s.as_bytes().ct_eq(want.as_bytes())))
    });
    if ok {
        Ok(())
    } else {
        Err(Refused::BadSignature)
    }
}

/// A gateway event (API.md "Webhooks").
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// Unique event id (`evt_…`); redeliveries repeat it.
    pub id: String,
    /// `payment.approved`, `payment.completed`, `payment.failed`, `payment.cancelled`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The payment concerned.
    pub data: EventData,
}

/// Payload of an [`Event`].
#[derive(Debug, Clone, Deserialize)]
pub struct EventData {
    /// Gateway payment id.
    pub payment_id: String,
    /// Set on completed payments.
    #[serde(default)]
    pub transaction_id: Option<String>,
}

/// What a correctly signed delivery led to (all answered 200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// Not JSON we understand: ignored.
    Unreadable,
    /// A payment id this core never issued: ignored.
    UnknownPayment,
    /// The gateway could not be asked: left to the reconciler (not recorded, so a redelivery
    /// tries again).
    Deferred,
    /// The event's transaction id differs from the gateway's: ignored and logged.
    Mismatch,
    /// Recorded; the payment is not completed (the reconciler releases, never the webhook).
    Noted(PayStatus),
    /// The confirm path ran.
    Confirmed(Confirm),
    /// This event id was processed before.
    Duplicate,
    /// Refunded or charged back at the gateway: the booking was cancelled now (case B14).
    Cancelled,
    /// Refunded or charged back, and the booking was cancelled before: nothing changed.
    Unchanged,
}

/// Longest event id (and payment id), bytes, that a delivery may carry; a longer event id is
/// [`Handled::Unreadable`], a longer payment id [`Handled::UnknownPayment`]
/// (no gateway id is that long, and PostgreSQL cannot index one past about 2,700 bytes: the
/// insert of the de-duplication row failed with a 500; newcomer review, 2026-12-05).
pub const EVENT_ID_MAX: usize = 255;

/// Processes one correctly signed delivery.
pub async fn handle(state: &AppState, body: &[u8]) -> ApiResult<Handled> {
    let Ok(ev) = serde_json::from_slice::<Event>(body) else {
        return Ok(Handled::Unreadable);
    };
    // A NUL cannot be stored in PostgreSQL's text (it answered `400 invalid-text`, which the
    // gateway would deliver again and again; newcomer review): no gateway id carries one.
    if ev.id.is_empty() || ev.id.len() > EVENT_ID_MAX || ev.id.contains('\0') {
        return Ok(Handled::Unreadable);
    }
    let pid = &ev.data.payment_id;
    if pid.len() > EVENT_ID_MAX || pid.contains('\0') {
        return Ok(Handled::UnknownPayment);
    }
    let Some(hold) = holds::load_by_payment(&state.db, &ev.data.payment_id).await? else {
        return Ok(Handled::UnknownPayment);
    };
    let gw = match state.gateway.query(&ev.data.payment_id).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(event = %ev.id, error = %e, "webhook: gateway query failed; deferred");
            return Ok(Handled::Deferred);
        }
    };
    let now = state.clock.now_ms();
    let money_back = cancel::money_back(gw.status);
    if gw.status != PayStatus::Completed && !money_back {
        let fresh = confirm::record_event(&state.db, &ev.id, &ev.data.payment_id, now).await?;
        return Ok(if fresh {
            Handled::Noted(gw.status)
        } else {
            Handled::Duplicate
        });
    }
    let Some(txn) = gw.transaction_id else {
        return Ok(Handled::Mismatch);
    };
    if ev.data.transaction_id.as_deref().is_some_and(|t| t != txn) {
        tracing::warn!(event = %ev.id, "webhook transaction id differs from the gateway's; ignored");
        return Ok(Handled::Mismatch);
    }
    if money_back {
        // Refunded or charged back at the gateway (case B14), whatever event reported it and in
        // whatever order: a hold not PAID yet is confirmed first, then its booking cancelled
        // once, with the event id recorded in the cancelling transaction.
        if hold.status != "PAID" {
            confirm_paid(&state.db, &hold, &txn, Actor::Webhook, now, None).await?;
        }
        let done = cancel::at_gateway(&state.db, &hold.id, gw.status, Some(&ev.id), now).await?;
        return Ok(match done {
            Cancelled::DuplicateEvent => Handled::Duplicate,
            Cancelled::Nothing => Handled::Unchanged,
            Cancelled::Done(_) => Handled::Cancelled,
        });
    }
    if gw.refunded_cents > 0 {
        partial_at_gateway(state, &hold, gw.refunded_cents, now).await?;
    }
    let c = confirm_paid(&state.db, &hold, &txn, Actor::Webhook, now, Some(&ev.id)).await?;
    Ok(match c {
        Confirm::DuplicateEvent => Handled::Duplicate,
        c => Handled::Confirmed(c),
    })
}

/// Part of a payment was refunded and the payment is still completed: if the shop did not ask
/// for all of it (its cancellations' refunds), someone refunded at the gateway's console and
/// nothing says which seats; an operator is alerted once per hold.
async fn partial_at_gateway(
    state: &AppState,
    hold: &holds::Hold,
    refunded: i64,
    now: i64,
) -> ApiResult<()> {
    let ours: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(amount_cents), 0) AS BIGINT) FROM cancellations \
         WHERE hold_id = $1 AND refund IN ('pending', 'refunded')",
    )
    .bind(&hold.id)
    .fetch_one(&state.db)
    .await?;
    if refunded <= ours {
        return Ok(());
    }
    let msg = format!(
        "{refunded} cents refunded at the gateway, {ours} asked by the shop: check the booking's seats"
    );
    sqlx::query(
        "INSERT INTO alerts (at, show_id, hold_id, kind, message) VALUES ($1, $2, $3, 'refund-at-gateway', $4) \
         ON CONFLICT (hold_id) DO NOTHING",
    )
    .bind(now)
    .bind(&hold.show_id)
    .bind(&hold.id)
    .bind(&msg)
    .execute(&state.db)
    .await?;
    tracing::warn!(hold = %hold.id, %msg, "partial refund made at the gateway");
    Ok(())
}
