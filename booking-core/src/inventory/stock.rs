//! How much of a show is left: seats free, held and sold (a hold past its deadline counts free:
//! expiry on read), plus the places of its pools. Read by the back office's stats and by the
//! closed loop's load figures (`GET /internal/load`), with the holds that ended counted by why.

use crate::db::Db;
use crate::load::ShowStock;
use sale_common::load::HoldEnds;

/// Holds of `show` that ended, by why, at `now_ms`: `holds.ended_as` of RELEASED holds, and a
/// HELD hold past its deadline counts as expired before the reconciler sweeps it (DECISIONS:
/// "reports also count lapsed holds not yet swept").
pub async fn hold_ends(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<HoldEnds> {
    let (expired, released, failed): (i64, i64, i64) = sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(CASE WHEN ended_as = 'expired' \
                    OR (status = 'HELD' AND expires_at <= $2) THEN 1 ELSE 0 END), 0) AS BIGINT), \
                CAST(COALESCE(SUM(CASE WHEN ended_as = 'released' THEN 1 ELSE 0 END), 0) AS BIGINT), \
                CAST(COALESCE(SUM(CASE WHEN ended_as = 'failed' THEN 1 ELSE 0 END), 0) AS BIGINT) \
         FROM holds WHERE show_id = $1 AND status <> 'PAID'",
    )
    .bind(show)
    .bind(now_ms)
    .fetch_one(db)
    .await?;
    Ok(HoldEnds {
        expired,
        released,
        failed,
    })
}

/// Seats of `show` at `now_ms`: `(capacity, sold, held)`; free = capacity − sold − held.
pub async fn seat_counts(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<(i64, i64, i64)> {
    sqlx::query_as(
        "SELECT COUNT(*), \
         COALESCE(SUM(CASE WHEN status = 'sold' THEN 1 ELSE 0 END), 0), \
         COALESCE(SUM(CASE WHEN status = 'held' AND hold_expires_at > $1 THEN 1 ELSE 0 END), 0) \
         FROM seats WHERE show_id = $2",
    )
    .bind(now_ms)
    .bind(show)
    .fetch_one(db)
    .await
}

/// Seats and pool places of `show` at `now_ms`: free, held (live holds: they may come back)
/// and sold.
pub async fn of_show(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<ShowStock> {
    let (capacity, sold, held) = seat_counts(db, show, now_ms).await?;
    let bookings: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM holds WHERE show_id = $1 AND status = 'PAID'",
    )
    .bind(show)
    .fetch_one(db)
    .await?;
    let mut stock = ShowStock {
        show: show.to_owned(),
        free: capacity - sold - held,
        held,
        sold,
        bookings,
        ended: hold_ends(db, show, now_ms).await?,
    };
    for pool in super::pools::availability(db, show, now_ms).await? {
        stock.free += pool["available"].as_i64().unwrap_or(0);
    }
    let (held, sold): (i64, i64) = sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(CASE WHEN h.status = 'HELD' AND h.expires_at > $2 \
                                  THEN hp.quantity ELSE 0 END), 0) AS BIGINT), \
                CAST(COALESCE(SUM(CASE WHEN h.status = 'PAID' THEN hp.quantity ELSE 0 END), 0) AS BIGINT) \
         FROM hold_pools hp JOIN holds h ON h.id = hp.hold_id \
         WHERE hp.show_id = $1 AND hp.counted = 1",
    )
    .bind(show)
    .bind(now_ms)
    .fetch_one(db)
    .await?;
    stock.held += held;
    stock.sold += sold;
    Ok(stock)
}
