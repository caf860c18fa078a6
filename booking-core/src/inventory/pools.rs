//! General-admission pools (seed 001 "Counters for Pooled Inventory", DESIGN "Holds"): a
//! capacity row per pool claimed with one conditional counter update in the hold's transaction,
//! `UPDATE pools SET taken = taken + n WHERE … AND taken + n <= capacity + oversell`.
//!
//! Expiry on read applies to pools too. `taken` counts every `hold_pools` row with
//! `counted = 1`: live holds, paid holds, and lapsed holds not yet reclaimed. Readers subtract the
//! lapsed ones (a HELD hold past its deadline, not kept by an alert); a claim first reclaims them
//! (`counted = 0`, `taken -= n`) in its own transaction, so a dead hold never blocks a live fan.
//! A payment that arrives for a reclaimed hold claims again (or is refunded, case B02).
//!
//! Releases and the hot row (issue 13 item 3): on PostgreSQL a release does not write the pool
//! row. It uncounts its `hold_pools` row (guarded by `counted = 1`, so a release and a reclaim
//! of one hold uncount it once) and appends its places to `pool_returns`; the next guarded
//! increment, which locks the pool row anyway, folds every committed return into `taken` in the
//! same statement. Every reader counts `taken − Σ pool_returns` as taken ([`TAKEN`]). In the
//! bench's pool phase releases had queued on the pool row's lock beside the holds, each holding
//! it across its commit (the release's statement 7.8 ms mean, `pg_stat_statements`). On SQLite,
//! one writer, a release still decrements `taken` itself and `pool_returns` stays empty.
//!
//! Lock order on PostgreSQL: confirmations take the hold row, then (after the seats and the
//! booking's own rows, as a new hold takes its pool places last) the pool row (`FOR UPDATE`),
//! then `hold_pools` rows; a reclaim the pool row, then `hold_pools` rows; a release
//! the hold row, then its own `hold_pools` row; an increment the pool row, then the returns it
//! folds (only a holder of the pool row deletes returns, so two folds never cross). A new
//! hold takes no lock on the pool row until its last statement, the guarded increment; its own
//! hold and `hold_pools` rows are new, so no one else waits on them.

use serde_json::{json, Value};

use crate::db::{Db, Tx};

async fn lock_pool(tx: &mut Tx<'_>, pg: bool, show: &str, pool: &str) -> sqlx::Result<()> {
    if pg {
        sqlx::query("SELECT pool_id FROM pools WHERE show_id = $1 AND pool_id = $2 FOR UPDATE")
            .bind(show)
            .bind(pool)
            .fetch_optional(&mut **tx)
            .await?;
    }
    Ok(())
}

/// The counted `hold_pools` rows `hp` of pool `pool` of show `show` whose holds lapsed by `now`
/// (epoch ms; each an SQL expression: a placeholder, or a column of an outer query) and are not kept by an alert, as a condition on `hold_pools hp`. The rows come
/// from the range `lapses_at <= $3` of the index `hold_pools_pool (show_id, pool_id, counted,
/// lapses_at)`: `lapses_at` is a lower bound of the hold's deadline, NULL once it is PAID
/// (migration `20261205030000_pool_lapse_hint`), so only this pool's own lapsed holds are
/// read; each row's hold is then checked by its primary key (a scalar subquery, which no plan
/// turns into a walk of every HELD hold, as a join did on a small table). Found from every
/// lapsed hold instead (`holds_due`, seat holds too: hundreds of walk-aways between two
/// reconciler steps in the seed rehearsal), [`availability`]'s sum averaged 2.3 ms over 13,608
/// calls and [`lapsed_exist`] 1.6 ms over 11,545 in one minute (`pg_stat_statements`), about
/// 0.8 of the machine's two CPUs.
pub(crate) fn lapsed(show: &str, pool: &str, now: &str) -> String {
    format!(
        "hp.show_id = {show} AND hp.pool_id = {pool} AND hp.counted = 1 AND hp.lapses_at <= {now} \
         AND (SELECT h.status = 'HELD' AND h.expires_at <= {now} AND h.alerted_at IS NULL \
         FROM holds h WHERE h.id = hp.hold_id)"
    )
}

/// [`lapsed`] of pool `$2` of show `$1` by `$3`.
fn lapsed_123() -> String {
    lapsed("$1", "$2", "$3")
}

/// Whether [`reclaim`] would free anything, read without the pool row's lock.
async fn lapsed_exist(tx: &mut Tx<'_>, show: &str, pool: &str, now_ms: i64) -> sqlx::Result<bool> {
    let (sql, b) = lapsed_exist_sql(show, pool, now_ms);
    let n: i64 = sqlx::query_scalar_with(&sql, b.args())
        .fetch_one(&mut **tx)
        .await?;
    Ok(n == 1)
}

/// The SQL of [`lapsed_exist`] (one row: 1 when some lapsed hold still counts) and its values.
/// Also run by SQLite's writer thread ([`crate::inventory::fast`]).
pub fn lapsed_exist_sql(show: &str, pool: &str, now_ms: i64) -> (String, crate::db::Binds) {
    let l = lapsed_123();
    let mut b = crate::db::Binds::default();
    b.push(show);
    b.push(pool);
    b.push(now_ms);
    let sql = format!(
        "SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM hold_pools hp WHERE {l}) THEN 1 ELSE 0 END AS BIGINT)"
    );
    (sql, b)
}

/// Reclaims the lapsed holds of a pool (the pool row must be locked). Returns units freed.
async fn reclaim(tx: &mut Tx<'_>, show: &str, pool: &str, now_ms: i64) -> sqlx::Result<i64> {
    let l = lapsed_123();
    crate::inventory::seatmap::touch();
    let freed: Vec<i64> = sqlx::query_scalar(&format!(
        "UPDATE hold_pools AS hp SET counted = 0 WHERE {l} RETURNING quantity"
    ))
    .bind(show)
    .bind(pool)
    .bind(now_ms)
    .fetch_all(&mut **tx)
    .await?;
    let n: i64 = freed.iter().sum();
    if n > 0 {
        sqlx::query("UPDATE pools SET taken = taken - $1 WHERE show_id = $2 AND pool_id = $3")
            .bind(n)
            .bind(show)
            .bind(pool)
            .execute(&mut **tx)
            .await?;
    }
    Ok(n)
}

/// The guarded claim of `qty` units: one short conditional increment, the only thing that
/// decides (no `SELECT … FOR UPDATE` first, so the pool row is locked only from this update to
/// the commit: a hold runs it as its last statement). Only when it fails, and a lapsed hold
/// of the pool still counts (read without a lock), are lapsed holds reclaimed, under the pool
/// row's lock taken first (the lock order of confirmations), and the increment tried once
/// more. True when the units were taken (the hold's `hold_pools` row may be written before or
/// after, in the same transaction).
pub async fn claim(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    pool: &str,
    qty: i64,
    now_ms: i64,
) -> sqlx::Result<bool> {
    crate::inventory::seatmap::touch();
    if take(tx, pg, show, pool, qty, true).await? {
        return Ok(true);
    }
    // Nothing lapsed (a sold-out pool, most of the time): refused without queueing for the
    // pool row's lock. In the seed rehearsal fans asking a sold-out pool waited over a second
    // each on `SELECT … FOR UPDATE` behind one another, to reclaim nothing.
    if !lapsed_exist(tx, show, pool, now_ms).await? {
        return Ok(false);
    }
    lock_pool(tx, pg, show, pool).await?;
    if reclaim(tx, show, pool, now_ms).await? == 0 {
        return Ok(false);
    }
    take(tx, pg, show, pool, qty, true).await
}

/// SQL of the places a pool counts as taken, for a query over `pools p`: `taken` less the
/// returns not folded yet.
pub const TAKEN: &str = "CAST(p.taken - (SELECT COALESCE(SUM(r.quantity), 0) FROM pool_returns r \
     WHERE r.show_id = p.show_id AND r.pool_id = p.pool_id) AS BIGINT)";

/// One conditional increment of `qty` units; true when they fitted under `capacity`, plus
/// `oversell` when `with_oversell` (a hold; a booking moved by an operator fits the physical
/// capacity only). On PostgreSQL one statement locks the pool row, folds the committed returns
/// into `taken` whether or not the places fit (the fold is never lost with a refusal), and
/// answers from `last_fit`, which it sets under that lock. On SQLite releases decrement
/// `taken` themselves, so there are no returns to count.
pub async fn take(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    pool: &str,
    qty: i64,
    with_oversell: bool,
) -> sqlx::Result<bool> {
    let over = i64::from(with_oversell);
    if pg {
        let fit: Option<i64> = sqlx::query_scalar(
            "WITH p AS (SELECT pool_id FROM pools WHERE show_id = $2 AND pool_id = $3 FOR UPDATE), \
             r AS (DELETE FROM pool_returns WHERE show_id = $2 AND pool_id = $3 \
             AND EXISTS (SELECT 1 FROM p) RETURNING quantity), \
             b AS (SELECT CAST(COALESCE(SUM(quantity), 0) AS BIGINT) AS back FROM r) \
             UPDATE pools SET \
             taken = taken - b.back + CASE WHEN taken - b.back + $1 <= capacity + oversell * $4 THEN $1 ELSE 0 END, \
             last_fit = CASE WHEN taken - b.back + $1 <= capacity + oversell * $4 THEN 1 ELSE 0 END \
             FROM b WHERE pools.show_id = $2 AND pools.pool_id = $3 RETURNING pools.last_fit",
        )
        .bind(qty)
        .bind(show)
        .bind(pool)
        .bind(over)
        .fetch_optional(&mut **tx)
        .await?;
        return Ok(fit == Some(1));
    }
    let n = sqlx::query(SQLITE_TAKE)
        .bind(qty)
        .bind(show)
        .bind(pool)
        .bind(over)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(n == 1)
}

/// [`take`] on SQLite, `$1` units of pool `$3` of show `$2`, `$4` = 1 to count the pool's
/// oversell (a hold): one row changed when they fitted. Also run by SQLite's writer thread.
pub const SQLITE_TAKE: &str =
    "UPDATE pools SET taken = taken + $1 WHERE show_id = $2 AND pool_id = $3 \
     AND taken + $1 <= capacity + oversell * $4";

/// [`release_of`] on SQLite (`$1` hold, `$2` show, `$3` pool): `taken` decremented by the
/// hold's counted units, the hold's row uncounted. Also run by SQLite's writer thread.
pub const SQLITE_RELEASE: &str = "UPDATE pools SET taken = taken - (SELECT quantity FROM hold_pools WHERE hold_id = $1 AND counted = 1) \
     WHERE show_id = $2 AND pool_id = $3 \
     AND EXISTS (SELECT 1 FROM hold_pools WHERE hold_id = $1 AND counted = 1); \
     UPDATE hold_pools SET counted = 0 WHERE hold_id = $1 AND counted = 1";

/// The pool part of a hold: (pool id, quantity, counted).
pub async fn of_hold(tx: &mut Tx<'_>, hold_id: &str) -> sqlx::Result<Option<(String, i64, i64)>> {
    sqlx::query_as("SELECT pool_id, quantity, counted FROM hold_pools WHERE hold_id = $1")
        .bind(hold_id)
        .fetch_optional(&mut **tx)
        .await
}

/// Whether the hold's pool units still count (the pool row locked first on PostgreSQL, so a
/// reclaim waits); true for holds without a pool part.
pub async fn counted(tx: &mut Tx<'_>, pg: bool, show: &str, hold_id: &str) -> sqlx::Result<bool> {
    let Some((pool, _, _)) = of_hold(tx, hold_id).await? else {
        return Ok(true);
    };
    lock_pool(tx, pg, show, &pool).await?;
    Ok(matches!(of_hold(tx, hold_id).await?, Some((_, _, 1))))
}

/// Release: the hold's units stop counting, in the caller's transaction (the one that changed
/// the hold's status).
pub async fn release(tx: &mut Tx<'_>, pg: bool, show: &str, hold_id: &str) -> sqlx::Result<()> {
    let Some((pool, _, _)) = of_hold(tx, hold_id).await? else {
        return Ok(());
    };
    release_of(tx, pg, show, hold_id, &pool).await
}

/// [`release`] of a hold whose pool the caller knows: the hold's row uncounted and its places
/// given back in ONE statement. On PostgreSQL they are appended to `pool_returns` (the module's
/// "Releases and the hot row": the pool row is not written, so a release never waits on it);
/// on SQLite (one writer) `taken` is decremented, two statements in one call.
pub async fn release_of(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold_id: &str,
    pool: &str,
) -> sqlx::Result<()> {
    crate::inventory::seatmap::touch();
    if pg {
        sqlx::query(
            "WITH c AS (UPDATE hold_pools SET counted = 0 WHERE hold_id = $1 AND counted = 1 \
             RETURNING show_id, pool_id, quantity) \
             INSERT INTO pool_returns (show_id, pool_id, hold_id, quantity) \
             SELECT show_id, pool_id, $1, quantity FROM c",
        )
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
        return Ok(());
    }
    sqlx::query(SQLITE_RELEASE)
        .bind(hold_id)
        .bind(show)
        .bind(pool)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Confirmation of a pool hold: true when its units count (still counted, or claimed again
/// after a reclaim or a release); false when the pool is full (the caller refunds). True for
/// holds without a pool part.
pub async fn sell(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold_id: &str,
    now_ms: i64,
) -> sqlx::Result<bool> {
    crate::inventory::seatmap::touch();
    let Some((pool, _, _)) = of_hold(tx, hold_id).await? else {
        return Ok(true);
    };
    lock_pool(tx, pg, show, &pool).await?;
    let Some((_, qty, counted)) = of_hold(tx, hold_id).await? else {
        return Ok(true);
    };
    if counted == 0 && !claim(tx, pg, show, &pool, qty, now_ms).await? {
        return Ok(false);
    }
    // A sold hold's places no longer lapse: its row leaves the lapsed range ([`lapsed`]).
    sqlx::query("UPDATE hold_pools SET counted = 1, lapses_at = NULL WHERE hold_id = $1")
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
    Ok(true)
}

/// Per pool of `show`: `{"id","price_cents","capacity","oversell","available"}` where
/// `available = capacity + oversell − taken + lapsed` (expiry on read; `taken` net of the
/// returns not folded yet, [`TAKEN`]), never negative.
pub async fn availability(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<Vec<Value>> {
    let l = lapsed_123();
    let mut out = Vec::new();
    for (id, price, cap, over, taken) in pool_rows(db, show).await? {
        let lapsed: i64 = sqlx::query_scalar(&format!(
            "SELECT CAST(COALESCE(SUM(hp.quantity), 0) AS BIGINT) FROM hold_pools hp WHERE {l}"
        ))
        .bind(show)
        .bind(&id)
        .bind(now_ms)
        .fetch_one(db)
        .await?;
        out.push(pool_json(id, price, cap, over, taken, lapsed));
    }
    Ok(out)
}

/// [`availability`] and when it next changes by itself: the earliest deadline after `now_ms`
/// (epoch ms) of a live pool hold of `show` (`None`: no live hold will lapse). Per pool, one
/// statement reads its lapsed places and, by the same index range (`hold_pools_pool`, whose
/// last column `lapses_at` is a lower bound of each hold's deadline, NULL once paid), the first
/// lapse bound still ahead, and for the holds whose bound has passed (lapsed and not reclaimed
/// yet, or moved later by the extension ladder or a B13 keep) their deadline itself. A bound
/// earlier than the deadline only makes the seat map poll sooner.
///
/// Issue 13: the seat map's poll read the next lapse in a statement of its own, the booking
/// core's costliest in the seed rehearsal (13,173 calls, 0.60 ms each plus 0.46 ms planning,
/// `pg_stat_statements`): its join of the passed bounds was planned as a sequential scan of
/// `hold_pools` (2.5 ms at the end of a rehearsal, `EXPLAIN ANALYZE`). Here each passed bound's
/// hold state is a condition on the range's rows, as in [`lapsed`], which keeps the index.
/// One statement for the whole show was tried and dropped: PostgreSQL planned it afresh at
/// most calls, 1–1.8 ms each, slower than the statements it replaced.
pub async fn availability_until(
    db: &Db,
    show: &str,
    now_ms: i64,
) -> sqlx::Result<(Vec<Value>, Option<i64>)> {
    let l = lapsed_123();
    let (mut out, mut next) = (Vec::new(), None);
    for (id, price, cap, over, taken) in pool_rows(db, show).await? {
        let (lapsed, bound, kept): (i64, Option<i64>, Option<i64>) = sqlx::query_as(&format!(
            "SELECT CAST(COALESCE((SELECT SUM(hp.quantity) FROM hold_pools hp WHERE {l}), 0) AS BIGINT), \
             (SELECT hp.lapses_at FROM hold_pools hp WHERE hp.show_id = $1 AND hp.pool_id = $2 \
             AND hp.counted = 1 AND hp.lapses_at > $3 ORDER BY hp.lapses_at LIMIT 1), \
             (SELECT MIN((SELECT h.expires_at FROM holds h WHERE h.id = hp.hold_id)) \
             FROM hold_pools hp WHERE hp.show_id = $1 AND hp.pool_id = $2 AND hp.counted = 1 \
             AND hp.lapses_at <= $3 AND (SELECT h.status = 'HELD' AND h.expires_at > $3 \
             FROM holds h WHERE h.id = hp.hold_id))"
        ))
        .bind(show)
        .bind(&id)
        .bind(now_ms)
        .fetch_one(db)
        .await?;
        next = [next, bound, kept].into_iter().flatten().min();
        out.push(pool_json(id, price, cap, over, taken, lapsed));
    }
    Ok((out, next))
}

/// The pools of `show` in id order: `(id, price_cents, capacity, oversell, taken)`.
async fn pool_rows(db: &Db, show: &str) -> sqlx::Result<Vec<(String, i64, i64, i64, i64)>> {
    sqlx::query_as(&format!(
        "SELECT p.pool_id, p.price_cents, p.capacity, p.oversell, {TAKEN} FROM pools p \
         WHERE p.show_id = $1 ORDER BY p.pool_id"
    ))
    .bind(show)
    .fetch_all(db)
    .await
}

/// One pool's entry of [`availability`].
pub(crate) fn pool_json(
    id: String,
    price: i64,
    cap: i64,
    over: i64,
    taken: i64,
    lapsed: i64,
) -> Value {
    let available = (cap + over - taken + lapsed).max(0);
    json!({"id": id, "price_cents": price, "capacity": cap, "oversell": over, "available": available})
}

/// Drift per pool of `show`: `{"pool","taken","counted_rows","drift"}` (`taken` net of the
/// returns not folded yet, [`TAKEN`]) where `counted_rows` sums
/// the counted units of HELD and PAID holds; any `drift` ≠ 0 means some path changed a hold's
/// status without touching the counter.
pub async fn drift(db: &Db, show: &str) -> sqlx::Result<Vec<Value>> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(&format!(
        "SELECT p.pool_id, {TAKEN}, CAST(COALESCE((SELECT SUM(hp.quantity) FROM hold_pools hp JOIN holds h ON h.id = hp.hold_id \
         WHERE hp.show_id = p.show_id AND hp.pool_id = p.pool_id AND hp.counted = 1 AND h.status IN ('HELD', 'PAID')), 0) AS BIGINT) \
         FROM pools p WHERE p.show_id = $1 ORDER BY p.pool_id"
    ))
    .bind(show)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(p, t, c)| {
            metrics::gauge!("bc_pool_drift", "show" => show.to_owned(), "pool" => p.clone())
                .set((t - c) as f64);
            json!({"pool": p, "taken": t, "counted_rows": c, "drift": t - c})
        })
        .collect())
}
