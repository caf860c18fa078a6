//! The late-payment sweep (issue 4: "late success when the webhook is dropped"; seed 000
//! Challenge 2). The reconciler releases a hold whose payment is still pending after the
//! deadline; the gateway may complete that payment afterwards, and its webhook may never come.
//! So each reconciler step also asks the gateway about released holds whose payment may still
//! complete: a real payment id, no final answer yet, no refund, and within [`WATCH_MS`] of the
//! payment session's deadline. Completed → the same confirm path as everything else (retake the
//! same seats if free, else refund once and tell the fan); cancelled, failed, expired → final,
//! never asked again; pending or no answer → asked again after [`RETRY_MS`].

use crate::db::Actor;
use crate::error::ApiResult;
use crate::gateway::PayStatus;
use crate::inventory::holds::{self, Hold};
use crate::payments::confirm::{confirm_paid, Confirm};
use crate::state::AppState;
use crate::telemetry;

/// How long after the payment session's deadline a released hold's payment is watched, ms
/// (the simulator's late success comes 120 s after it; real gateways settle within minutes).
pub const WATCH_MS: i64 = 30 * 60 * 1000;
/// Wait before asking again about a payment that was still pending, ms.
pub const RETRY_MS: i64 = 60_000;
/// Holds asked about per step (the reconciler's batch size).
pub const BATCH: i64 = 8;

/// What one sweep did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LateOutcome {
    /// Released holds asked about.
    pub examined: usize,
    /// Late payments that took their seats again (PAID).
    pub retaken: usize,
    /// Late payments refunded (seats gone).
    pub refunded: usize,
    /// Payments found final and not completed: never asked again.
    pub closed: usize,
}

/// One sweep at `now_ms` (epoch ms). Runs under the reconciler's lease.
pub async fn sweep(state: &AppState, now_ms: i64) -> ApiResult<LateOutcome> {
    let db = &state.db;
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT id FROM holds WHERE status = 'RELEASED' AND late_checked_at IS NULL \
         AND payment_id IS NOT NULL AND payment_id NOT LIKE 'pending:%' \
         AND payment_expires_at > $1 AND (late_next_at IS NULL OR late_next_at <= $2) \
         AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.hold_id = holds.id) \
         ORDER BY COALESCE(late_next_at, 0), released_at LIMIT $3",
    )
    .bind(now_ms - WATCH_MS)
    .bind(now_ms)
    .bind(BATCH)
    .fetch_all(db)
    .await?;
    let mut out = LateOutcome::default();
    for id in ids {
        let Some(h) = holds::load(db, &id).await? else {
            continue;
        };
        out.examined += 1;
        one(state, &h, now_ms, &mut out).await?;
    }
    Ok(out)
}

async fn one(state: &AppState, h: &Hold, now_ms: i64, out: &mut LateOutcome) -> ApiResult<()> {
    let pid = h.payment_id.as_deref().unwrap_or_default();
    let answer = match state.gateway.query(pid).await {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(hold = %h.id, error = %e, "late sweep: gateway did not answer");
            return later(state, &h.id, now_ms).await;
        }
    };
    match answer.status {
        PayStatus::Completed | PayStatus::Refunded => {
            telemetry::late_payment_found();
            let txn = answer
                .transaction_id
                .unwrap_or_else(|| format!("unknown-{pid}"));
            match confirm_paid(&state.db, h, &txn, Actor::Reconciler, now_ms, None).await? {
                Confirm::Retaken(_) | Confirm::Paid(_) => out.retaken += 1,
                Confirm::RefundQueued => out.refunded += 1,
                Confirm::AlreadyPaid | Confirm::DuplicateEvent => {}
            }
            tracing::warn!(hold = %h.id, "late payment found by the sweep (webhook missing)");
            close(state, &h.id, now_ms).await
        }
        s if s.is_dead() => {
            out.closed += 1;
            close(state, &h.id, now_ms).await
        }
        _ => later(state, &h.id, now_ms).await,
    }
}

async fn close(state: &AppState, id: &str, now_ms: i64) -> ApiResult<()> {
    sqlx::query("UPDATE holds SET late_checked_at = $1 WHERE id = $2")
        .bind(now_ms)
        .bind(id)
        .execute(&state.db)
        .await?;
    Ok(())
}

async fn later(state: &AppState, id: &str, now_ms: i64) -> ApiResult<()> {
    sqlx::query("UPDATE holds SET late_next_at = $1 WHERE id = $2")
        .bind(now_ms + RETRY_MS)
        .bind(id)
        .execute(&state.db)
        .await?;
    Ok(())
}
