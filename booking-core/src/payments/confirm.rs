//! The one way a hold becomes PAID, shared by the callback, the webhook and the reconciler
//! (DESIGN "Payments"): one conditional update HELD→PAID that succeeds only while the hold is
//! HELD with the same payment id, its seats sold (locked in seat order), a booking, one
//! confirmation email in the outbox and an audit row, all in one transaction. A webhook's event
//! id is de-duplicated inside that same transaction.
//!
//! Late success (case B02): a payment that completes after its hold was released takes the same
//! seats again when they are still free; otherwise the money goes back: a `refunds` row and a
//! `refund` outbox message, exactly once per hold (primary key / UNIQUE(ref_id, kind)).

use serde_json::json;

use crate::db::{self, Actor, Backend, Db, Tx};
use crate::inventory::holds::Hold;
use crate::outbox::enqueue;

/// Result of [`confirm_paid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// This call made the HELD hold PAID; the new booking id.
    Paid(String),
    /// This call made a released hold PAID again on the same, still-free seats (late success).
    Retaken(String),
    /// Someone else already did (idempotent).
    AlreadyPaid,
    /// The seats are no longer ours: hold released if needed, refund queued (once).
    RefundQueued,
    /// The webhook event id was already processed: nothing changed.
    DuplicateEvent,
}

impl Confirm {
    /// Whether the hold is PAID after this call.
    pub fn is_paid(&self) -> bool {
        matches!(
            self,
            Confirm::Paid(_) | Confirm::Retaken(_) | Confirm::AlreadyPaid
        )
    }
}

/// Records webhook event `id` through `on` (a transaction, or the pool for a statement of its
/// own); false when it was already recorded (a duplicate).
pub async fn record_event<'e, E>(
    on: E,
    id: &str,
    payment_id: &str,
    now_ms: i64,
) -> sqlx::Result<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let n = sqlx::query(
        "INSERT INTO webhook_events (id, payment_id, received_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
    )
    .bind(id)
    .bind(payment_id)
    .bind(now_ms)
    .execute(on)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Marks `hold` PAID with gateway transaction `txn` (the gateway said completed), or, when the
/// hold was released meanwhile, retakes its seats or queues a refund. `event` is a webhook event
/// id to de-duplicate in the same transaction.
pub async fn confirm_paid(
    db: &Db,
    hold: &Hold,
    txn: &str,
    actor: Actor,
    now_ms: i64,
    event: Option<&str>,
) -> sqlx::Result<Confirm> {
    let Some(payment_id) = hold.payment_id.as_deref() else {
        return Ok(Confirm::AlreadyPaid);
    };
    // A hold read as PAID is PAID for good (every write out of a status guards on HELD or
    // RELEASED): nothing to update, and without a webhook's event id to record, nothing to
    // write. In the seed rehearsal the update below ran 3.6 times per payment (callback,
    // webhook deliveries, reconciler), 2.6 of them finding nothing, each after waiting on the
    // row lock of the confirmation that won.
    // With a webhook's event id, only the event to record: one statement of its own (the
    // seed rehearsal's two deliveries a payment each ran BEGIN, this INSERT and COMMIT).
    if hold.status == "PAID" {
        return Ok(match event {
            Some(ev) if !record_event(db, ev, payment_id, now_ms).await? => Confirm::DuplicateEvent,
            _ => Confirm::AlreadyPaid,
        });
    }
    let pg = db::backend(db) == Backend::Postgres;
    let mut tx = crate::db::begin_write(db).await?;
    if let Some(ev) = event {
        if !record_event(&mut *tx, ev, payment_id, now_ms).await? {
            return Ok(Confirm::DuplicateEvent);
        }
    }
    let Some(won) = mark_paid(&mut tx, &hold.id, payment_id, txn, now_ms).await? else {
        tx.commit().await?; // keeps the event id: the delivery was handled
        return Ok(Confirm::AlreadyPaid);
    };
    let retake = won.retake;
    if won.seats > 0 && !sell_seats(&mut tx, pg, hold, won.seats, now_ms).await? {
        tx.rollback().await?;
        return queue_refund(db, hold, txn, actor, now_ms, event).await;
    }
    let booking_id = uuid::Uuid::now_v7().to_string();
    let reason = if retake {
        "late success: same seats retaken"
    } else {
        txn
    };
    booked_writes(&mut tx, pg, hold, &booking_id, txn, reason, actor, now_ms).await?;
    // A pool's places, then an interval's claim, last (the order of a new hold: seats, pool,
    // interval): the pool row is locked from here to the commit only. Taken first, it was held
    // across the whole confirmation, and the seed rehearsal's pool holds waited up to 1.8 s on
    // `SELECT … FOR UPDATE` behind it (`pg_stat_statements`: 99 ms mean). Refused, the
    // rollback undoes the booking, its emails and the session's end with everything else.
    if (won.pool
        && !crate::inventory::pools::sell(&mut tx, pg, &hold.show_id, &hold.id, now_ms).await?)
        || (won.interval
            && !crate::inventory::resources::sell(&mut tx, pg, &hold.show_id, &hold.id, now_ms)
                .await?)
    {
        tx.rollback().await?;
        return queue_refund(db, hold, txn, actor, now_ms, event).await;
    }
    crate::outbox::notify::sold_out_if_done(&mut tx, &hold.show_id, now_ms).await?;
    tx.commit().await?;
    crate::telemetry::booked(
        &hold.show_id,
        actor.as_str(),
        won.started.map(|s| now_ms - s),
    );
    Ok(if retake {
        Confirm::Retaken(booking_id)
    } else {
        Confirm::Paid(booking_id)
    })
}

/// The confirmation's writes after the seats, in ONE call ([`db::write_all`]): the booking, its
/// confirmation email (outbox), the audit row, the hold's cap slots freed (its admission's
/// closed) and the session's end with its notice to the waiting room. They were seven round
/// trips for each of the seed rehearsal's ~12,000 bookings.
#[allow(clippy::too_many_arguments)]
async fn booked_writes(
    tx: &mut Tx<'_>,
    pg: bool,
    hold: &Hold,
    booking_id: &str,
    txn: &str,
    reason: &str,
    actor: Actor,
    now_ms: i64,
) -> sqlx::Result<()> {
    let mut b = db::Binds::default();
    let (bk, h, s, at, j) = (
        b.push(booking_id.to_owned()),
        b.push(hold.id.clone()),
        b.push(hold.show_id.clone()),
        b.push(now_ms),
        b.push(hold.admission_jti.clone()),
    );
    let mut statements = vec![format!(
        "INSERT INTO bookings (id, hold_id, show_id, visitor_id, transaction_id, created_at) \
         VALUES ({bk}, {h}, {s}, {}, {}, {at})",
        b.push(hold.visitor_id.clone()),
        b.push(txn.to_owned())
    )];
    let payload = json!({"booking_id": booking_id, "hold_id": hold.id, "visitor_id": hold.visitor_id,
        "show": hold.show_id, "amount_cents": hold.amount_cents, "transaction_id": txn});
    statements.push(crate::outbox::enqueue_sql(
        &mut b,
        &bk,
        "confirmation-email",
        &s,
        &payload,
        &at,
    ));
    statements.push(db::audit_sql(
        &mut b, &at, &s, &h, "paid", actor, reason, None,
    ));
    statements.push(crate::inventory::caps::free_slots_ending_sql(&h, "1 = 1"));
    statements.extend(crate::outbox::notify::session_end_after_paid_sql(
        &mut b,
        &hold.show_id,
        &s,
        &hold.admission_jti,
        (&j, &at, &h),
    ));
    db::write_all(tx, pg, b, Vec::new(), statements).await
}

/// What [`mark_paid`] learned about the hold it made PAID, in the same statement.
struct Won {
    /// The hold had been released (a late success retakes its seats).
    retake: bool,
    /// Its seats (`hold_seats` rows; 0 for a pool or interval hold).
    seats: i64,
    /// It holds places of a pool (`hold_pools`).
    pool: bool,
    /// It holds an interval of a resource (`hold_resources`).
    interval: bool,
    /// When its payment was created (its latest `payment-created` audit row), epoch ms.
    started: Option<i64>,
}

/// The shared conditional update: HELD, or RELEASED for a late success, → PAID, only with the
/// same payment id, and never once a refund was queued for the hold. `Some` when this call won
/// ([`Won`]: `retake` when the hold had been released; only a release sets `released_at`, and
/// nothing clears it), `None` when it lost. One statement for both: the HELD one and then the
/// RELEASED one ran one after another when the first found nothing. It also returns what the
/// confirmation goes on to sell (a hold's parts are written with it and never removed) and when
/// the payment started: four reads that each took a round trip of their own.
async fn mark_paid(
    tx: &mut Tx<'_>,
    hold_id: &str,
    payment_id: &str,
    txn: &str,
    now_ms: i64,
) -> sqlx::Result<Option<Won>> {
    type Row = (i64, i64, i64, i64, Option<i64>);
    let won: Option<Row> = sqlx::query_as(
        "UPDATE holds SET status = 'PAID', ended_as = NULL, transaction_id = $1, paid_at = $2 \
         WHERE id = $3 AND status IN ('HELD', 'RELEASED') AND payment_id = $4 \
         AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.hold_id = $3) \
         RETURNING CAST(CASE WHEN released_at IS NULL THEN 0 ELSE 1 END AS BIGINT), \
         CAST((SELECT COUNT(*) FROM hold_seats s WHERE s.hold_id = $3) AS BIGINT), \
         CAST(CASE WHEN EXISTS (SELECT 1 FROM hold_pools p WHERE p.hold_id = $3) THEN 1 ELSE 0 END AS BIGINT), \
         CAST(CASE WHEN EXISTS (SELECT 1 FROM hold_resources r WHERE r.hold_id = $3) THEN 1 ELSE 0 END AS BIGINT), \
         CAST((SELECT MAX(a.at) FROM audit a WHERE a.hold_id = $3 AND a.action = 'payment-created') AS BIGINT)",
    )
    .bind(txn)
    .bind(now_ms)
    .bind(hold_id)
    .bind(payment_id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(won.map(|(released, seats, pool, interval, started)| Won {
        retake: released == 1,
        seats,
        pool: pool == 1,
        interval: interval == 1,
        started,
    }))
}

/// Sells every seat of `hold` (`count` of them) that it still holds, or that is free or lapsed;
/// true when all. On PostgreSQL the seats are locked first in seat order
/// ([`db::lock_seats_of_hold`]: no deadlock between two confirmations).
async fn sell_seats(
    tx: &mut Tx<'_>,
    pg: bool,
    hold: &Hold,
    count: i64,
    now_ms: i64,
) -> sqlx::Result<bool> {
    crate::inventory::seatmap::touch();
    db::lock_seats_of_hold(tx, pg, &hold.show_id, &hold.id).await?;
    let sold = sqlx::query(
        "UPDATE seats SET status = 'sold', hold_id = $1, hold_expires_at = NULL \
         WHERE show_id = $2 AND seat_id IN (SELECT seat_id FROM hold_seats WHERE hold_id = $1) \
         AND ((status = 'held' AND hold_id = $1) OR status = 'free' OR (status = 'held' AND hold_expires_at <= $3))",
    )
    .bind(&hold.id)
    .bind(&hold.show_id)
    .bind(now_ms)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(i64::try_from(sold).is_ok_and(|n| n == count))
}

/// Money taken but the seats are gone: release what this hold still holds (the one release
/// code), record one pending refund and its outbox message (the outbox worker calls the
/// gateway with an idempotent refund key and then tells the fan).
async fn queue_refund(
    db: &Db,
    hold: &Hold,
    txn: &str,
    actor: Actor,
    now_ms: i64,
    event: Option<&str>,
) -> sqlx::Result<Confirm> {
    let pg = db::backend(db) == Backend::Postgres;
    let payment_id = hold.payment_id.clone().unwrap_or_default();
    let mut tx = crate::db::begin_write(db).await?;
    if let Some(ev) = event {
        if !record_event(&mut *tx, ev, &payment_id, now_ms).await? {
            return Ok(Confirm::DuplicateEvent);
        }
    }
    crate::inventory::holds::release_in(
        &mut tx,
        pg,
        &hold.id,
        None,
        actor,
        crate::inventory::holds::Ended::Expired,
        "paid after its seats were taken",
        now_ms,
    )
    .await?;
    // Row-locks the hold (PostgreSQL) and makes sure no other path made it PAID meanwhile.
    let released = sqlx::query(
        "UPDATE holds SET released_at = COALESCE(released_at, $1) WHERE id = $2 AND status = 'RELEASED'",
    )
    .bind(now_ms)
    .bind(&hold.id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if released == 0 {
        tx.commit().await?;
        return Ok(Confirm::AlreadyPaid);
    }
    let inserted = sqlx::query(
        "INSERT INTO refunds (hold_id, show_id, payment_id, transaction_id, amount_cents, status, created_at) \
         VALUES ($1, $2, $3, $4, $5, 'pending', $6) ON CONFLICT (hold_id) DO NOTHING",
    )
    .bind(&hold.id)
    .bind(&hold.show_id)
    .bind(&payment_id)
    .bind(txn)
    .bind(hold.amount_cents)
    .bind(now_ms)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if inserted == 1 {
        let payload = json!({"hold_id": hold.id, "visitor_id": hold.visitor_id, "payment_id": payment_id,
            "transaction_id": txn, "amount_cents": hold.amount_cents});
        enqueue(&mut tx, &hold.id, "refund", &hold.show_id, &payload, now_ms).await?;
        db::audit(
            &mut tx,
            now_ms,
            &hold.show_id,
            &hold.id,
            "refund-required",
            actor,
            "paid after its seats were taken",
        )
        .await?;
    }
    tx.commit().await?;
    Ok(Confirm::RefundQueued)
}
