//! The waitlist (issue 5 "Released seats go to someone who wants them"): fans who found a show
//! sold out join it — a request, not a hold: it claims nothing. When a hold is released
//! ([`crate::inventory::holds::release_in`], whoever releases it), its seats are offered to the first
//! waiting fan as a NEW hold with its own expiry, made by the same [`claim::create_in`] as any
//! hold (guarded update, caps, audit, idempotency row), inside the releasing transaction and its
//! own savepoint. The offer lapses like any hold; when the reconciler releases it, the row ends
//! `lapsed` and the seats go to the next waiting fan. A fan a cap refuses is `skipped`.
//!
//! Offers use the web channel's lifetimes ([`OFFER_TIMING`]) and the default visitor cap
//! ([`OFFER_VISITOR_CAP`]): the release paths carry no configuration.

use serde_json::{json, Value};

use crate::db::{self, Actor, Db, Tx};
use crate::door::Admission;
use crate::inventory::claim::{self, Ask, Request, Timing};

/// Lifetimes of an offered hold: the web channel's 480 s hold and 420 s payment session (DESIGN
/// "Timing").
pub const OFFER_TIMING: Timing = Timing {
    hold_ttl_ms: 480_000,
    payment_session_ms: 420_000,
};
/// Live holds per visitor when offering (`Config::max_holds_per_visitor`'s default).
pub const OFFER_VISITOR_CAP: u32 = 2;

/// Joins `visitor` (with admission `jti`) to the waitlist of `show`, for seats or for places in
/// `pool`; idempotent. Returns whether this call wrote the row (false: the fan was on it
/// already, a concurrent join of theirs first) and the fan's row as JSON (see [`status`]).
pub async fn join(
    db: &Db,
    show: &str,
    visitor: &str,
    jti: &str,
    pool: Option<&str>,
    now_ms: i64,
) -> sqlx::Result<(bool, Value)> {
    let wrote = sqlx::query(
        "INSERT INTO waitlist (show_id, visitor_id, admission_jti, joined_at, pool_id) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (show_id, visitor_id) DO NOTHING",
    )
    .bind(show)
    .bind(visitor)
    .bind(jti)
    .bind(now_ms)
    .bind(pool)
    .execute(db)
    .await?
    .rows_affected();
    let entry = status(db, show, visitor).await?.unwrap_or(Value::Null);
    Ok((wrote == 1, entry))
}

/// Whether admission `jti`'s session ended (it paid, released, or the fan left): such an
/// admission books nothing more, so it does not join.
pub async fn admission_ended(db: &Db, jti: &str) -> sqlx::Result<bool> {
    let n: i64 = sqlx::query_scalar(crate::outbox::notify::ENDED_SQL)
        .bind(jti)
        .fetch_one(db)
        .await?;
    Ok(n > 0)
}

/// The fan's waitlist entry: `status` (waiting, offered, lapsed, skipped), `position` (1 = next,
/// while waiting: the fans waiting ahead in the offers' own order, `joined_at` then
/// `visitor_id`, so fans who joined in the same millisecond each have a position of their own)
/// and the offered `hold_id`; `None` when the fan never joined.
pub async fn status(db: &Db, show: &str, visitor: &str) -> sqlx::Result<Option<Value>> {
    /// Status, joined at (epoch ms), offered hold, pool, and the offered hold's status.
    type Entry = (String, i64, Option<String>, Option<String>, Option<String>);
    let row: Option<Entry> = sqlx::query_as(
        "SELECT w.status, w.joined_at, w.hold_id, w.pool_id, h.status FROM waitlist w \
             LEFT JOIN holds h ON h.id = w.hold_id WHERE w.show_id = $1 AND w.visitor_id = $2",
    )
    .bind(show)
    .bind(visitor)
    .fetch_optional(db)
    .await?;
    let Some((mut st, joined, hold, pool, held)) = row else {
        return Ok(None);
    };
    if st == "offered" && held.as_deref() == Some("PAID") {
        // The fan paid the offer (a newcomer review: the entry still said `offered` after the
        // booking). Read from the hold, so a payment writes nothing more.
        st = "booked".into();
    }
    let mut v = json!({"show": show, "status": st, "joined_at": joined / 1000});
    if let Some(p) = pool {
        v["pool"] = p.into();
    }
    if st == "waiting" {
        let ahead: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM waitlist WHERE show_id = $1 AND status = 'waiting' \
             AND (joined_at < $2 OR (joined_at = $2 AND visitor_id < $3))",
        )
        .bind(show)
        .bind(joined)
        .bind(visitor)
        .fetch_one(db)
        .await?;
        v["position"] = (ahead + 1).into();
    }
    if let Some(h) = hold {
        v["hold_id"] = h.into();
    }
    Ok(Some(v))
}

/// Places of `pool` free now (lapsed holds count free); `None` for an unknown pool. Joining a
/// pool's waitlist is for a sold-out pool only.
pub async fn free_places(
    db: &Db,
    show: &str,
    pool: &str,
    now_ms: i64,
) -> sqlx::Result<Option<i64>> {
    let pools = crate::inventory::pools::availability(db, show, now_ms).await?;
    Ok(pools
        .iter()
        .find(|p| p["id"] == pool)
        .and_then(|p| p["available"].as_i64()))
}

/// Seats of `show` free now (lapsed holds count free): joining is for sold-out shows only.
pub async fn free_seats(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar(concat!(
        "SELECT COUNT(*) FROM seats WHERE show_id = $1 AND ",
        crate::db::unsold_seat!(),
        " AND (status = 'free' OR (status = 'held' AND hold_expires_at <= $2))"
    ))
    .bind(show)
    .bind(now_ms)
    .fetch_one(db)
    .await
}

/// Releases this far (ms) before the first waiting fan joined are looked at by [`sweep`]: a
/// join reads the clock before its "nothing left" check, a racing release may read it earlier.
pub const SWEEP_LOOKBACK_MS: i64 = 60_000;

/// Released holds per show looked at by one [`sweep`].
pub const SWEEP_HOLDS: i64 = 64;

/// Offers a release missed, once per reconciler step (DESIGN "Reconciler": the sweep that heals
/// what a race left). A join checks "nothing left" and then writes its row; a release checks
/// "nobody waits" in its own snapshot (the one-statement release's guard). Run at once, each
/// misses the other (write skew under READ COMMITTED; ninth session's newcomer review: 1 in
/// 12 runs), and the fan waits while the seats are free. Neither side can see the other in
/// one statement, so the reconciler looks: for each show with fans waiting for seats and
/// seats free, the seats still free of each hold released since shortly before the first of
/// them joined are offered as their release would have offered them ([`offer_freed`]; a seat
/// taken meanwhile is left out: newcomer review, a fan kept waiting with three of the four
/// freed seats free because a first version offered a release only whole), oldest release
/// first, in a write transaction each; for fans waiting for
/// a pool's places, each released hold's places while that many are free ([`offer_pool`]).
/// Returns the offers made.
pub async fn sweep(db: &Db, now_ms: i64) -> sqlx::Result<u64> {
    let waits: Vec<(String, Option<String>, i64)> = sqlx::query_as(
        "SELECT show_id, pool_id, MIN(joined_at) FROM waitlist WHERE status = 'waiting' \
         GROUP BY show_id, pool_id",
    )
    .fetch_all(db)
    .await?;
    let mut offered = 0;
    for (show, pool, since) in waits {
        offered += match pool {
            None => sweep_seats(db, &show, since, now_ms).await?,
            Some(pool) => sweep_pool(db, &show, &pool, since, now_ms).await?,
        };
    }
    Ok(offered)
}

/// Holds of `show` released since shortly before `since` (epoch ms), oldest release first, at
/// most [`SWEEP_HOLDS`]: with `pool`, that pool's holds as `(id, quantity)`; without, the seat
/// holds with a seat free at `now_ms` (quantity 0), chosen in the statement, so a long
/// sale's many releases whose seats were taken again do not hide a recent one (a `LIMIT` over
/// every release would stop at the oldest).
async fn released_since(
    db: &Db,
    show: &str,
    pool: Option<&str>,
    since: i64,
    now_ms: i64,
) -> sqlx::Result<Vec<(String, i64)>> {
    let q = match pool {
        // Free: `free`, or held by a hold that lapsed (a sold seat is neither).
        None => sqlx::query_as(
            "SELECT h.id, CAST(0 AS BIGINT) FROM holds h WHERE h.show_id = $1 \
             AND h.status = 'RELEASED' AND h.released_at >= $2 \
             AND EXISTS (SELECT 1 FROM hold_seats hs JOIN seats s \
                 ON s.show_id = hs.show_id AND s.seat_id = hs.seat_id WHERE hs.hold_id = h.id \
                 AND (s.status = 'free' OR (s.status = 'held' AND s.hold_expires_at <= $4))) \
             ORDER BY h.released_at, h.id LIMIT $3",
        )
        .bind(show)
        .bind(since - SWEEP_LOOKBACK_MS)
        .bind(SWEEP_HOLDS)
        .bind(now_ms),
        Some(pool) => sqlx::query_as(
            "SELECT h.id, hp.quantity FROM holds h JOIN hold_pools hp ON hp.hold_id = h.id \
             WHERE h.show_id = $1 AND h.status = 'RELEASED' AND h.released_at >= $2 \
             AND hp.pool_id = $4 ORDER BY h.released_at, h.id LIMIT $3",
        )
        .bind(show)
        .bind(since - SWEEP_LOOKBACK_MS)
        .bind(SWEEP_HOLDS)
        .bind(pool),
    };
    q.fetch_all(db).await
}

/// [`sweep`] for the fans of `show` waiting for seats, the first of whom joined at `since`.
async fn sweep_seats(db: &Db, show: &str, since: i64, now_ms: i64) -> sqlx::Result<u64> {
    let pg = db::backend(db) == db::Backend::Postgres;
    if free_seats(db, show, now_ms).await? == 0 {
        return Ok(0);
    }
    let mut offered = 0;
    for (hold, _) in released_since(db, show, None, since, now_ms).await? {
        let seats: Vec<String> = sqlx::query_scalar(
            "SELECT hs.seat_id FROM hold_seats hs JOIN seats s \
             ON s.show_id = hs.show_id AND s.seat_id = hs.seat_id WHERE hs.hold_id = $1 \
             AND hs.show_id = $2 AND (s.status = 'free' OR (s.status = 'held' \
             AND s.hold_expires_at <= $3)) ORDER BY hs.seat_id",
        )
        .bind(&hold)
        .bind(show)
        .bind(now_ms)
        .fetch_all(db)
        .await?;
        if seats.is_empty() {
            continue;
        }
        let mut tx = db::begin_write(db).await?;
        let made = offer_freed(&mut tx, pg, show, &format!("sweep:{hold}"), &seats, now_ms).await?;
        tx.commit().await?;
        match made {
            Some(_) => offered += 1,
            // Nobody left waiting who can take them.
            None => break,
        }
    }
    Ok(offered)
}

/// [`sweep`] for the fans of `show` waiting for places of `pool`, the first of whom joined at
/// `since`: each released hold's places while that many are free.
async fn sweep_pool(db: &Db, show: &str, pool: &str, since: i64, now_ms: i64) -> sqlx::Result<u64> {
    let pg = db::backend(db) == db::Backend::Postgres;
    let mut free = free_places(db, show, pool, now_ms).await?.unwrap_or(0);
    let mut offered = 0;
    for (hold, quantity) in released_since(db, show, Some(pool), since, now_ms).await? {
        if free <= 0 {
            break;
        }
        if quantity > free {
            continue;
        }
        let mut tx = db::begin_write(db).await?;
        let made = offer_pool(
            &mut tx,
            pg,
            show,
            &format!("sweep:{hold}"),
            pool,
            quantity,
            now_ms,
        )
        .await?;
        tx.commit().await?;
        match made {
            Some(_) => (offered, free) = (offered + 1, free - quantity),
            None => break,
        }
    }
    Ok(offered)
}

/// In the transaction that released `released` (whose seats were just freed): ends that hold's
/// own offer row, then offers `seats` to the first fan waiting for seats who can take them.
/// Returns the new hold's id, if any.
pub async fn offer(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    released: &str,
    seats: &[String],
    now_ms: i64,
) -> sqlx::Result<Option<String>> {
    sqlx::query(&lapse_offer_sql("$1"))
        .bind(released)
        .execute(&mut **tx)
        .await?;
    offer_freed(tx, pg, show, released, seats, now_ms).await
}

/// The SQL that ends the offer row of hold `hold` (a placeholder), the first step of
/// [`offer`]: a release writes it with its other statements in one call.
pub fn lapse_offer_sql(hold: &str) -> String {
    format!("UPDATE waitlist SET status = 'lapsed' WHERE hold_id = {hold} AND status = 'offered'")
}

/// [`offer`] after its first step ([`lapse_offer_sql`]) was written: `seats` offered to the
/// first fan waiting for seats who can take them (none when `seats` is empty).
pub async fn offer_freed(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    released: &str,
    seats: &[String],
    now_ms: i64,
) -> sqlx::Result<Option<String>> {
    if seats.is_empty() {
        return Ok(None);
    }
    offer_to(
        tx,
        pg,
        show,
        released,
        None,
        Ask::Seats(seats.to_vec()),
        now_ms,
    )
    .await
}

/// The same for `quantity` places of `pool` freed by `released`: offered to the first fan
/// waiting for that pool.
pub async fn offer_pool(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    released: &str,
    pool: &str,
    quantity: i64,
    now_ms: i64,
) -> sqlx::Result<Option<String>> {
    let Ok(quantity) = u32::try_from(quantity) else {
        return Ok(None);
    };
    let ask = Ask::Pool {
        pool: pool.to_owned(),
        quantity,
    };
    offer_to(tx, pg, show, released, Some(pool), ask, now_ms).await
}

/// Offers `ask` to the first fan waiting for that kind (`pool`, or seats when `None`).
async fn offer_to(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    released: &str,
    pool: Option<&str>,
    ask: Ask,
    now_ms: i64,
) -> sqlx::Result<Option<String>> {
    let lock = if pg { " FOR UPDATE SKIP LOCKED" } else { "" };
    let next_sql = format!(
        "SELECT visitor_id, admission_jti FROM waitlist WHERE show_id = $1 AND status = 'waiting' \
         AND COALESCE(pool_id, '') = $2 ORDER BY joined_at, visitor_id LIMIT 1{lock}"
    );
    loop {
        let next: Option<(String, String)> = sqlx::query_as(&next_sql)
            .bind(show)
            .bind(pool.unwrap_or(""))
            .fetch_optional(&mut **tx)
            .await?;
        let Some((visitor, jti)) = next else {
            return Ok(None);
        };
        let (state, hold) =
            try_offer(tx, pg, show, released, ask.clone(), &visitor, &jti, now_ms).await?;
        sqlx::query(
            "UPDATE waitlist SET status = $1, hold_id = $2 WHERE show_id = $3 AND visitor_id = $4",
        )
        .bind(state)
        .bind(&hold)
        .bind(show)
        .bind(&visitor)
        .execute(&mut **tx)
        .await?;
        match state {
            "offered" => {
                crate::telemetry::waitlist_offer(show);
                return Ok(hold);
            }
            "skipped" => continue,
            _ => return Ok(None),
        }
    }
}

/// One offer in a savepoint: `("offered", hold)`, `("skipped", None)` when a cap refused the
/// fan, or `("waiting", None)` when the seats were not claimable (the fan keeps their place).
#[allow(clippy::too_many_arguments)]
async fn try_offer(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    released: &str,
    ask: Ask,
    visitor: &str,
    jti: &str,
    now_ms: i64,
) -> sqlx::Result<(&'static str, Option<String>)> {
    let adm = Admission {
        iss: "waitlist".into(),
        aud: "booking-core".into(),
        sub: visitor.into(),
        event: show.into(),
        jti: jti.into(),
        iat: now_ms / 1000,
        nbf: now_ms / 1000,
        exp: (now_ms + OFFER_TIMING.hold_ttl_ms) / 1000,
        tier: None,
    };
    let key = format!("waitlist-offer:{released}");
    let r = Request {
        adm: &adm,
        show,
        ask,
        key: &key,
        channel: "web",
        timing: OFFER_TIMING,
        visitor_cap: OFFER_VISITOR_CAP,
    };
    let mut sp = sqlx::Acquire::begin(&mut **tx).await?;
    match claim::create_in(&mut sp, pg, &r, now_ms).await {
        Ok(Ok(a)) => {
            sp.commit().await?;
            let hold = a.body["hold_id"].as_str().map(String::from);
            if let Some(h) = &hold {
                db::audit(
                    tx,
                    now_ms,
                    show,
                    h,
                    "waitlist-offer",
                    Actor::Operator,
                    visitor,
                )
                .await?;
            }
            Ok(("offered", hold))
        }
        Ok(Err(_lost)) => {
            sp.rollback().await?;
            Ok(("waiting", None))
        }
        Err(_) => {
            sp.rollback().await?;
            Ok(("skipped", None))
        }
    }
}
