//! The one way a hold becomes PAID, shared by the callback and the reconciler (DESIGN
//! "Payments"): one conditional update on the hold, its seats sold (only those still held by it,
//! or free again), a booking, one confirmation email in the outbox and an audit row — all in one
//! transaction. A payment that completed after its seats went to someone else is recorded for an
//! automatic refund, exactly once (outbox UNIQUE(ref_id, kind)).

use serde_json::json;

use crate::db::{self, Actor, Db};
use crate::holds::Hold;

/// Result of [`confirm_paid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// This call made the hold PAID; the new booking id.
    Paid(String),
    /// Someone else already did (idempotent).
    AlreadyPaid,
    /// The seats are no longer ours: hold released, refund queued.
    RefundQueued,
}

/// Marks `hold` PAID with gateway transaction `txn` (the gateway said completed).
pub async fn confirm_paid(
    db: &Db,
    hold: &Hold,
    txn: &str,
    actor: Actor,
    now_ms: i64,
) -> sqlx::Result<Confirm> {
    let Some(payment_id) = hold.payment_id.as_deref() else {
        return Ok(Confirm::AlreadyPaid);
    };
    let mut tx = db.begin().await?;
    // RELEASED is allowed too: a late success takes the same seats again if they are free (B02).
    let won = sqlx::query(
        "UPDATE holds SET status = 'PAID', transaction_id = ?, paid_at = ? \
         WHERE id = ? AND status IN ('HELD', 'RELEASED') AND payment_id = ?",
    )
    .bind(txn)
    .bind(now_ms)
    .bind(&hold.id)
    .bind(payment_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if won == 0 {
        return Ok(Confirm::AlreadyPaid);
    }
    let asked: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM hold_seats WHERE hold_id = ?")
        .bind(&hold.id)
        .fetch_one(&mut *tx)
        .await?;
    let sold = sqlx::query(
        "UPDATE seats SET status = 'sold', hold_id = ?, hold_expires_at = NULL \
         WHERE show_id = ? AND seat_id IN (SELECT seat_id FROM hold_seats WHERE hold_id = ?) \
         AND ((status = 'held' AND hold_id = ?) OR status = 'free' OR (status = 'held' AND hold_expires_at <= ?))",
    )
    .bind(&hold.id)
    .bind(&hold.show_id)
    .bind(&hold.id)
    .bind(&hold.id)
    .bind(now_ms)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if i64::try_from(sold).unwrap_or(-1) != asked {
        tx.rollback().await?;
        return queue_refund(db, hold, txn, actor, now_ms).await;
    }
    let booking_id = uuid::Uuid::now_v7().to_string();
    sqlx::query("INSERT INTO bookings (id, hold_id, show_id, visitor_id, transaction_id, created_at) VALUES (?, ?, ?, ?, ?, ?)")
        .bind(&booking_id)
        .bind(&hold.id)
        .bind(&hold.show_id)
        .bind(&hold.visitor_id)
        .bind(txn)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
    let payload = json!({"booking_id": booking_id, "hold_id": hold.id, "visitor_id": hold.visitor_id, "show": hold.show_id});
    sqlx::query("INSERT INTO outbox (ref_id, kind, payload, created_at) VALUES (?, 'confirmation-email', ?, ?)")
        .bind(&booking_id)
        .bind(payload.to_string())
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
    db::audit(&mut tx, now_ms, &hold.show_id, &hold.id, "paid", actor, txn).await?;
    tx.commit().await?;
    Ok(Confirm::Paid(booking_id))
}

/// Money taken but the seats are gone: release what this hold still holds, queue one refund.
async fn queue_refund(
    db: &Db,
    hold: &Hold,
    txn: &str,
    actor: Actor,
    now_ms: i64,
) -> sqlx::Result<Confirm> {
    let mut tx = db.begin().await?;
    sqlx::query(
        "UPDATE holds SET status = 'RELEASED', released_at = ? WHERE id = ? AND status = 'HELD'",
    )
    .bind(now_ms)
    .bind(&hold.id)
    .execute(&mut *tx)
    .await?;
    sqlx::query("UPDATE seats SET status = 'free', hold_id = NULL, hold_expires_at = NULL WHERE hold_id = ? AND status = 'held'")
        .bind(&hold.id)
        .execute(&mut *tx)
        .await?;
    let payload = json!({"hold_id": hold.id, "visitor_id": hold.visitor_id, "transaction_id": txn, "amount_cents": hold.amount_cents});
    let inserted = sqlx::query(
        "INSERT INTO outbox (ref_id, kind, payload, created_at) VALUES (?, 'refund', ?, ?) ON CONFLICT (ref_id, kind) DO NOTHING",
    )
    .bind(&hold.id)
    .bind(payload.to_string())
    .bind(now_ms)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 1 {
        db::audit(
            &mut tx,
            now_ms,
            &hold.show_id,
            &hold.id,
            "refund-required",
            actor,
            "paid after seats were taken",
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Confirm::RefundQueued)
}
