//! The reconciler's answer to a gateway that cannot be reached (DESIGN "Reconciler", seed 000
//! Challenge 2: "never release a seat only because we could not get an answer"): every failed
//! query is counted on the hold; the third in a row extends the hold (and its seats) by
//! [`EXTENSION_MS`], at most [`MAX_EXTENSIONS`] times; after that an alert row is written once,
//! logged at error level, and the seats are kept held until an operator or the gateway decides.

use crate::db::{self, Actor, Db};
use crate::error::ApiResult;
use crate::inventory::holds::Hold;

/// Failed queries in a row that trigger an extension (seed: 3).
pub const FAILURES_PER_EXTENSION: i64 = 3;
/// Extension length, ms (seed: 10 minutes).
pub const EXTENSION_MS: i64 = 10 * 60 * 1000;
/// Extensions at most, then alert (seed: 3).
pub const MAX_EXTENSIONS: i64 = 3;
/// `seats.hold_expires_at` of seats kept after an alert: far in the future (year 2255), so
/// read-time expiry never frees them.
pub const KEPT_UNTIL_MS: i64 = 9_000_000_000_000;

/// What a failed query led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ladder {
    /// Nothing to count (the gateway answered).
    None,
    /// Counted; not yet three in a row.
    Counted,
    /// The hold was extended by 10 minutes.
    Extended,
    /// Out of extensions: alert raised (once), seats kept.
    Alerted,
}

/// The gateway answered: the run of failed queries is over.
pub async fn answered(db: &Db, hold_id: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE holds SET query_failures = 0 WHERE id = $1 AND query_failures > 0")
        .bind(hold_id)
        .execute(db)
        .await?;
    Ok(())
}

/// Counts one failed query of `h` at `now_ms` and climbs the ladder when it is the third.
pub async fn failed_query(db: &Db, h: &Hold, now_ms: i64) -> ApiResult<Ladder> {
    let mut tx = crate::db::begin_write(db).await?;
    let row: Option<(i64, i64, Option<i64>, i64)> = sqlx::query_as(
        "UPDATE holds SET query_failures = query_failures + 1 WHERE id = $1 AND status = 'HELD' \
         RETURNING query_failures, extensions, alerted_at, expires_at",
    )
    .bind(&h.id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((failures, extensions, alerted_at, expires_at)) = row else {
        return Ok(Ladder::None);
    };
    if failures < FAILURES_PER_EXTENSION {
        tx.commit().await?;
        return Ok(Ladder::Counted);
    }
    if extensions < MAX_EXTENSIONS {
        let until = expires_at.max(now_ms) + EXTENSION_MS;
        sqlx::query("UPDATE holds SET expires_at = $1, extensions = extensions + 1, query_failures = 0 WHERE id = $2")
            .bind(until)
            .bind(&h.id)
            .execute(&mut *tx)
            .await?;
        keep_seats(&mut tx, &h.id, until).await?;
        crate::inventory::caps::extend_slots(&mut tx, &h.id, until).await?;
        let why = format!(
            "gateway unreachable: extension {} of {MAX_EXTENSIONS}",
            extensions + 1
        );
        db::audit(
            &mut tx,
            now_ms,
            &h.show_id,
            &h.id,
            "extended",
            Actor::Reconciler,
            &why,
        )
        .await?;
        tx.commit().await?;
        tracing::warn!(hold = %h.id, until_ms = until, "hold extended: gateway unreachable");
        crate::telemetry::extended();
        return Ok(Ladder::Extended);
    }
    if alerted_at.is_some() {
        tx.commit().await?;
        return Ok(Ladder::Counted);
    }
    sqlx::query("UPDATE holds SET alerted_at = $1 WHERE id = $2")
        .bind(now_ms)
        .bind(&h.id)
        .execute(&mut *tx)
        .await?;
    keep_seats(&mut tx, &h.id, KEPT_UNTIL_MS).await?;
    let msg = format!(
        "payment {} of hold {} unknown after {MAX_EXTENSIONS} extensions; seats kept",
        h.payment_id.as_deref().unwrap_or("-"),
        h.id
    );
    sqlx::query(
        "INSERT INTO alerts (at, show_id, hold_id, kind, message) VALUES ($1, $2, $3, 'payment-unknown', $4) \
         ON CONFLICT (hold_id) DO NOTHING",
    )
    .bind(now_ms)
    .bind(&h.show_id)
    .bind(&h.id)
    .bind(&msg)
    .execute(&mut *tx)
    .await?;
    db::audit(
        &mut tx,
        now_ms,
        &h.show_id,
        &h.id,
        "alert",
        Actor::Reconciler,
        &msg,
    )
    .await?;
    tx.commit().await?;
    tracing::error!(hold = %h.id, alert = "payment-unknown", "{msg}");
    crate::telemetry::alert("payment-unknown");
    Ok(Ladder::Alerted)
}

async fn keep_seats(tx: &mut db::Tx<'_>, hold_id: &str, until: i64) -> sqlx::Result<()> {
    crate::inventory::seatmap::touch();
    sqlx::query(crate::inventory::holds::KEEP_SEATS)
        .bind(until)
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
