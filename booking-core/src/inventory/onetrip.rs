//! The plain named-seat hold on PostgreSQL in ONE round trip (issue 13 item 2: "or one round
//! trip on PostgreSQL, for example a data-modifying CTE"). The full path ([`claim::create`])
//! costs a winner five: `BEGIN`, key and cap slots, the guarded update, the rows, `COMMIT`.
//! `perf` over the bench's PostgreSQL seat-hold phase put socket sends and receives at 17 % of
//! PostgreSQL's samples and the executor's start and finish per statement at 36 %.
//!
//! Here the same SQL runs as one statement outside an explicit transaction (its own implicit
//! transaction, committed when it ends), in an order that makes a loss write nothing:
//!
//! 1. `c`: the guarded update ([`holds::claim_many_into`], the only thing that decides a
//!    seat: all of the asked seats or none);
//! 2. `k`: the key's row, stored at once as the 201 (its body's `amount_cents` summed from
//!    `c`'s prices), only when `c` took every seat; a stored refusal of the same request is
//!    taken over, as in the full path;
//! 3. `s`: slot 0 of the admission's and the visitor's caps ([`caps::first_slots_sql`]), only
//!    for a key `k` took;
//! 4. the hold, its seats and its audit row ([`claim::write_parts`]), only when `k` has a row;
//! 5. the answer: how many seats `c` took, their sum, `k`'s and `s`'s rows, and, when every
//!    part agreed or none wrote, `synchronous_commit = off` for the implicit transaction (as
//!    [`crate::db::begin_hold`] sets it for the full path's). When the seats were taken but the
//!    key or a cap slot was not (a race after the read before the hold), it calls
//!    `hold_undone` (migration `20261206010000_hold_undone`), whose error (SQLSTATE
//!    [`UNDONE`]) aborts the statement whole.
//!
//! A grant is [`OneTrip::Held`]. A hold lost at `c` wrote nothing and is [`OneTrip::Lost`]:
//! the caller reads the key and the seats again ([`crate::inventory::preread::read`], a new
//! snapshot) and answers from that read: the stored 201 of an identical request another node
//! committed while this one waited on the seats' locks (case B12), else the 409 with the
//! seats' fresh statuses once the key is recorded as refused, as after a lost transaction;
//! when that read sees every seat free again, the statement runs again (a few times at most,
//! then the full path: `http::holds`, `ONE_TRIPS`). An undone hold, or one
//! aborted by a deadlock or serialization failure, is [`OneTrip::Other`]: the caller runs the
//! full path ([`claim::create`]), which decides it with every rule (`hold-exists`, the visitor
//! cap's later slots, a replay). The caller sends here only a hold whose read before it
//! ([`crate::inventory::preread`]) found no stored answer, no live cap slot and no ended
//! session, and every asked seat known, so undone holds stay rare.
//!
//! A fan's release of a plain seat hold ([`release`]) is one statement the same way: the
//! guarded HELD→RELEASED update first, every write of [`holds::release_writes_sql`] gated on
//! its row. A hold with places of a pool or an interval, or a show with fans on its
//! waitlist (whose offers the full release makes), fails that update's guard: nothing is
//! written and the caller runs the full release ([`crate::inventory::releases::alone`]).
//! Fans' releases arrive at the releases' group commit ([`crate::inventory::releases::OwnReleases`]),
//! which applies every one waiting in one such statement ([`release_own_many`]): one row per
//! hold through the same guards and writes, the seats of all of them locked in (show, seat)
//! order. Run on a worker with connections of its own, a release no longer waits for a pool
//! connection behind the hot show's hold requests.
//!
//! Layer: inventory (uses `db`).

use crate::db::{self, Actor, Db};
use crate::inventory::claim::{self, Ask, HoldAnswer, NewHold, Prepared, Request};
use crate::inventory::holds::{self, Ended, SeatAsk};
use crate::inventory::releases::Release;
use crate::inventory::{caps, seatmap};

/// SQLSTATE of `hold_undone`'s error: the statement took the seats but a later part refused.
pub const UNDONE: &str = "BH001";

/// What [`hold`] did.
#[derive(Debug)]
pub enum OneTrip {
    /// Held (committed): the 201.
    Held(HoldAnswer),
    /// Lost at the guarded update: nothing was written.
    Lost,
    /// Not decided here (undone, aborted, or not a named-seat hold): nothing was written; run
    /// the full path.
    Other,
}

/// The one-statement hold of `r` at `now_ms` (epoch ms) on PostgreSQL's pool `db` (see the
/// module's text). `Err`: the database's, other than the undone statement and retryable
/// aborts, which are [`OneTrip::Other`].
pub async fn hold(db: &Db, r: &Request<'_>, now_ms: i64) -> sqlx::Result<OneTrip> {
    let Ask::Seats(seats) = &r.ask else {
        return Ok(OneTrip::Other);
    };
    let p = Prepared {
        hold_id: uuid::Uuid::now_v7().to_string(),
        expires_at: now_ms + r.timing.hold_ttl_ms,
        pool_price: None,
    };
    // The amount is summed by the statement from the prices the guarded update returns.
    let hold = NewHold::of(r, &p, seats.clone(), 0, now_ms);
    let hash = r.ask.request_hash(r.show, r.channel);
    let Some((sql, b)) = sql(r, &p, &hold, &hash, now_ms) else {
        return Ok(OneTrip::Other);
    };
    let row: sqlx::Result<(i64, i64, i64, i64, String)> =
        sqlx::query_as_with(&sql, b.args()).fetch_one(db).await;
    match row {
        Ok((taken, amount, keys, slots, _)) => {
            if taken == 0 {
                return Ok(OneTrip::Lost);
            }
            // The statement committed: a snapshot polled from now on sees the seats held.
            seatmap::touch();
            debug_assert!(granted(taken, seats.len(), keys, slots));
            let mut answer = hold.answer();
            answer.body["amount_cents"] = amount.into();
            Ok(OneTrip::Held(answer))
        }
        Err(sqlx::Error::Database(e))
            if matches!(e.code().as_deref(), Some(UNDONE | "40001" | "40P01")) =>
        {
            Ok(OneTrip::Other)
        }
        Err(e) => Err(e),
    }
}

/// Whether the statement's counts are a grant: every seat taken, the key, both cap slots.
fn granted(taken: i64, asked: usize, keys: i64, slots: i64) -> bool {
    usize::try_from(taken) == Ok(asked) && keys == 1 && slots == 2
}

/// The statement of [`hold`] and its values; `None` when `r` asks no named seat. Its one row:
/// seats taken, their price summed (cents), keys stored (0 or 1), cap slots taken (0 to 2),
/// and `set_config`'s answer.
pub(crate) fn sql(
    r: &Request<'_>,
    p: &Prepared,
    hold: &NewHold,
    hash: &str,
    now_ms: i64,
) -> Option<(String, db::Binds)> {
    let Ask::Seats(seats) = &r.ask else {
        return None;
    };
    let mut b = db::Binds::default();
    let ask = SeatAsk {
        hold_id: &p.hold_id,
        expires_at: p.expires_at,
        seats,
        now_ms,
    };
    let claim = holds::claim_many_into(&mut b, true, r.show, &[ask], false)?;
    let asked = b.push(i64::try_from(seats.len()).unwrap_or(i64::MAX));
    let amount = "(SELECT CAST(COALESCE(SUM(price_cents), 0) AS BIGINT) FROM c)";
    let key = format!(
        "INSERT INTO idempotency (visitor_id, key, request_hash, status, body, created_at) \
         SELECT {v}, {k}, {hash}, 201, \
         CAST(jsonb_set(CAST({body} AS jsonb), '{{amount_cents}}', to_jsonb({amount})) AS TEXT), {now} \
         WHERE (SELECT COUNT(*) FROM c) = {asked} \
         ON CONFLICT (visitor_id, key) DO UPDATE SET status = excluded.status, \
         body = excluded.body, created_at = excluded.created_at \
         WHERE idempotency.status = {refused} AND idempotency.request_hash = excluded.request_hash \
         RETURNING idempotency.visitor_id, idempotency.key",
        v = b.push(r.adm.sub.clone()),
        k = b.push(r.key.to_owned()),
        hash = b.push(hash.to_owned()),
        body = b.push(hold.body_text()),
        now = b.push(now_ms),
        refused = b.push(claim::REFUSED),
    );
    let slots = [p.slots(r)];
    let key_taken = "EXISTS (SELECT 1 FROM k WHERE k.visitor_id = w.kv AND k.key = w.kk)";
    let slots = caps::first_slots_sql(&mut b, &slots, now_ms, key_taken, "scope, owner")?;
    let parts = claim::write_parts(&mut b, &[(r, hold)], Some(amount));
    let mut with = vec![
        format!("c AS ({claim})"),
        format!("k AS ({key})"),
        format!("s AS ({slots})"),
    ];
    for (name, insert) in [
        ("h", &parts.holds),
        ("hs", &parts.seats),
        ("a", &parts.audit),
    ] {
        with.extend(insert.values_if("k").map(|i| format!("{name} AS ({i})")));
    }
    let (taken, keys, slots) = (
        "(SELECT COUNT(*) FROM c)",
        "(SELECT COUNT(*) FROM k)",
        "(SELECT COUNT(*) FROM s)",
    );
    let sql = format!(
        "WITH {} SELECT {taken}, {amount}, {keys}, {slots}, \
         CASE WHEN {taken} = 0 OR ({taken} = {asked} AND {keys} = 1 AND {slots} = 2) \
         THEN set_config('synchronous_commit', 'off', true) \
         ELSE hold_undone('the seats were taken but the key or a cap slot was not') END",
        with.join(", ")
    );
    Some((sql, b))
}

/// A fan's release `r` of a plain seat hold in one statement on PostgreSQL's pool `db` (see the
/// module's text): true when it released the hold (committed); false when it wrote nothing
/// and the full release must decide (the hold is not `HELD` with the payment `r` read, has
/// a pool's places or an interval, or the show has a waitlist; or a deadlock or
/// serialization failure aborted the statement). `Err`: the database's other errors.
pub async fn release(db: &Db, r: &Release) -> sqlx::Result<bool> {
    run_release(db, r, None).await
}

/// [`release`] with no read before it: `r` is what the fan's admission says (its show and
/// `jti`, no payment), and the guard also requires the hold to be `visitor`'s. True when that
/// released it; false (nothing written) when the hold is someone else's, was made under
/// another admission, has a payment, is no longer HELD, or needs the full release (waitlist,
/// pool or interval): the caller reads the hold and decides as before. Saves the fan's read
/// of its own hold, one round trip of a won hold's four in `loadtest bench`.
pub async fn release_own(db: &Db, r: &Release, visitor: &str) -> sqlx::Result<bool> {
    run_release(db, r, Some(visitor)).await
}

async fn run_release(db: &Db, r: &Release, visitor: Option<&str>) -> sqlx::Result<bool> {
    let (sql, b) = release_sql(r, visitor);
    let row: sqlx::Result<(i64, String)> = sqlx::query_as_with(&sql, b.args()).fetch_one(db).await;
    match row {
        Ok((released, _)) if released > 0 => {
            seatmap::touch();
            holds::count_release(&r.show, Actor::Api, Ended::Released);
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(sqlx::Error::Database(e)) if matches!(e.code().as_deref(), Some("40001" | "40P01")) => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// The statement of [`release`] and its values. Its one row: holds released (0 or 1) and
/// `set_config`'s answer.
pub(crate) fn release_sql(r: &Release, visitor: Option<&str>) -> (String, db::Binds) {
    let gate = "EXISTS (SELECT 1 FROM h)";
    // Binds the hold, show, admission and now first: `$1` to `$4`.
    let (mut b, ctes, statements) = holds::release_writes_sql(
        true,
        &r.hold_id,
        &r.show,
        &r.jti,
        true,
        Actor::Api,
        Ended::Released,
        &r.reason,
        r.now_ms,
        Some(gate),
    );
    let end = b.push(Ended::Released.as_str());
    let payment = b.push(r.payment.clone());
    let guard = holds::release_guard_sql(
        "$4",
        "$1",
        &end,
        &format!("COALESCE(payment_id, '') = {payment}"),
    );
    let owner = match visitor {
        Some(v) => format!(" AND visitor_id = {}", b.push(v.to_owned())),
        None => String::new(),
    };
    let mut with = vec![format!(
        "h AS ({guard} AND show_id = $2 AND admission_jti = $3{owner} \
         AND NOT EXISTS (SELECT 1 FROM waitlist w WHERE w.show_id = $2 AND w.status = 'waiting') \
         AND NOT EXISTS (SELECT 1 FROM hold_pools p WHERE p.hold_id = $1) \
         AND NOT EXISTS (SELECT 1 FROM hold_resources x WHERE x.hold_id = $1) RETURNING id)"
    )];
    with.extend(ctes);
    with.extend(db::data_ctes(&statements));
    let sql = format!(
        "WITH {} SELECT (SELECT COUNT(*) FROM h), set_config('synchronous_commit', 'off', true)",
        with.join(", ")
    );
    (sql, b)
}

/// One fan's release for [`release_own_many`]: what [`release_own`] takes.
#[derive(Debug, Clone)]
pub struct OwnRelease {
    /// The release, as the fan's admission says it (show, `jti`, no payment).
    pub release: Release,
    /// The visitor the hold must be of.
    pub visitor: String,
}

/// Fans' releases of plain seat holds, many in ONE statement on PostgreSQL's pool `db` (the
/// releases' group commit, [`crate::inventory::releases::OwnBatch`]): each answer is what
/// [`release_own`] would have answered for that release alone, true when its hold was released
/// (committed), false when its guard failed and nothing of it was written (the caller then
/// decides it as after [`release_own`]). The seats of every released hold are locked in
/// (show, seat) order, the order holds lock them in, so a batch and a hold never wait on each
/// other in a cycle. A hold whose row another transaction keeps locked is skipped (`FOR UPDATE
/// SKIP LOCKED`): false, and its caller decides it alone, where it waits for the lock at most
/// `Config::checkout_lock_wait_ms` (newcomer review: one such hold made its batch, and every
/// fan's release in it, wait as long as the lock was kept). `Err`: the database's, deadlocks,
/// serialization failures and lock waits past the worker's limit included (the caller then
/// releases each alone).
pub async fn release_own_many(db: &Db, items: &[&OwnRelease]) -> sqlx::Result<Vec<bool>> {
    let (sql, b) = release_own_many_sql(items);
    let released: Vec<(String, String)> = sqlx::query_as_with(&sql, b.args()).fetch_all(db).await?;
    let released: std::collections::HashSet<&str> =
        released.iter().map(|(id, _)| id.as_str()).collect();
    if !released.is_empty() {
        seatmap::touch();
    }
    // Counted once per hold released, though the batch may ask for one twice.
    let mut counted = std::collections::HashSet::new();
    Ok(items
        .iter()
        .map(|o| {
            let r = &o.release;
            let done = released.contains(r.hold_id.as_str());
            if done && counted.insert(r.hold_id.as_str()) {
                holds::count_release(&r.show, Actor::Api, Ended::Released);
            }
            done
        })
        .collect())
}

/// The statement of [`release_own_many`] and its values: [`release_sql`]'s writes with one row
/// per hold (a hold asked twice is released once), the session-end check of an admission
/// counting none of the batch's holds as live (two holds of one admission released together
/// end its session, as one after the other would). Its rows: the released holds' ids, each
/// with `set_config`'s answer.
pub(crate) fn release_own_many_sql(items: &[&OwnRelease]) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::with_capacity(items.len());
    for o in items {
        let r = &o.release;
        if !seen.insert(r.hold_id.as_str()) {
            continue;
        }
        let payload = crate::outbox::notify::session_end_payload(&r.show, &r.jti).to_string();
        rows.push(format!(
            "({}, {}, {}, {}, {}, {}, {}, {})",
            b.push(r.hold_id.clone()),
            b.push(r.show.clone()),
            b.push(r.jti.clone()),
            b.push(o.visitor.clone()),
            b.push(r.payment.clone()),
            b.push(r.now_ms),
            b.push(r.reason.clone()),
            b.push(payload),
        ));
    }
    let end = b.push(Ended::Released.as_str());
    let (jti_scope, kind, action, actor) = (
        b.push(crate::outbox::notify::ADMISSION_SCOPE),
        b.push(crate::outbox::notify::SESSION_END),
        b.push(Ended::Released.as_str()),
        b.push(Actor::Api.as_str()),
    );
    let closed = crate::outbox::notify::SLOT_CLOSED;
    let sql = format!(
        "WITH v (hold, show, jti, visitor, payment, at, reason, payload) AS (VALUES {rows}), \
         k AS MATERIALIZED (SELECT id FROM holds WHERE id IN (SELECT hold FROM v) \
         FOR UPDATE SKIP LOCKED), \
         h AS (UPDATE holds SET status = 'RELEASED', ended_as = {end}, released_at = v.at FROM v \
         WHERE holds.id = v.hold AND holds.id IN (SELECT id FROM k) AND holds.status = 'HELD' \
         AND COALESCE(holds.payment_id, '') = v.payment AND holds.show_id = v.show \
         AND holds.admission_jti = v.jti AND holds.visitor_id = v.visitor \
         AND NOT EXISTS (SELECT 1 FROM waitlist w WHERE w.show_id = v.show AND w.status = 'waiting') \
         AND NOT EXISTS (SELECT 1 FROM hold_pools p WHERE p.hold_id = v.hold) \
         AND NOT EXISTS (SELECT 1 FROM hold_resources x WHERE x.hold_id = v.hold) \
         RETURNING holds.id, holds.show_id, holds.admission_jti AS jti, v.at, v.reason, v.payload), \
         l AS (SELECT s.show_id, s.seat_id, s.hold_id FROM seats s \
         JOIN hold_seats hs ON hs.show_id = s.show_id AND hs.seat_id = s.seat_id AND hs.hold_id = s.hold_id \
         JOIN h ON h.id = hs.hold_id WHERE s.status = 'held' \
         ORDER BY s.show_id, s.seat_id FOR UPDATE OF s), \
         e AS (SELECT h.id, h.show_id, h.jti, h.at, h.payload FROM h WHERE NOT EXISTS (SELECT 1 FROM hold_slots o \
         WHERE o.scope = {jti_scope} AND o.owner = h.jti AND o.live_until > h.at \
         AND o.hold_id NOT IN (SELECT id FROM h))), \
         w0 AS (UPDATE seats SET status = 'free', hold_id = NULL, hold_expires_at = NULL FROM l \
         WHERE seats.show_id = l.show_id AND seats.seat_id = l.seat_id \
         AND seats.hold_id = l.hold_id AND seats.status = 'held'), \
         w1 AS (UPDATE hold_slots SET live_until = CASE WHEN scope = {jti_scope} \
         AND hold_id IN (SELECT id FROM e) THEN {closed} ELSE 0 END \
         WHERE hold_id IN (SELECT id FROM h)), \
         w2 AS (INSERT INTO admissions_ended (jti, at) SELECT DISTINCT ON (jti) jti, at FROM e \
         ON CONFLICT (jti) DO NOTHING), \
         w3 AS (INSERT INTO outbox (ref_id, kind, show_id, payload, created_at) \
         SELECT DISTINCT ON (jti) jti, {kind}, show_id, payload, at FROM e \
         ON CONFLICT (ref_id, kind) DO NOTHING), \
         w4 AS (INSERT INTO audit (at, show_id, hold_id, action, actor, reason) \
         SELECT at, show_id, id, {action}, {actor}, reason FROM h), \
         w5 AS (UPDATE waitlist SET status = 'lapsed' WHERE hold_id IN (SELECT id FROM h) \
         AND status = 'offered') \
         SELECT h.id, set_config('synchronous_commit', 'off', true) FROM h",
        rows = rows.join(", "),
    );
    (sql, b)
}
