//! The hot path on SQLite's writer thread ([`crate::db::writer`]): a fan's hold of named seats
//! or pool places, a fan's release, and a refused key, each run as plain calls on the thread
//! that owns the connection, with the same SQL as the sqlx path (the builders of [`claim`],
//! [`holds`] and [`pools`]) and in a savepoint of the writer's group commit.
//!
//! Only the common outcomes are decided here: a hold granted, a hold lost at the guarded
//! update (its key recorded as refused in the same transaction), a release done or refused by
//! its guard, a refusal stored. Anything rarer (a replayed or reused key, a cap's refusal, an
//! unknown seat or pool, a full pool with lapsed holds to reclaim, a release with a
//! waitlist to offer or an interval to free) undoes what the job wrote and answers
//! [`Fast::Other`]: the caller then runs the sqlx path ([`claim::create`],
//! [`holds::release_in`]), which decides it with every rule, as before this module existed. So
//! a rule lives once, in the sqlx path, and this module only skips its hand-offs when the
//! answer is the plain one.
//!
//! Layer: inventory (uses `db`).

use rusqlite::Connection;

use crate::db::writer::{self, Step, Writer};
use crate::db::Actor;
use crate::inventory::claim::{self, HoldAnswer, Lost, NewHold, Prepared, Refused, Request};
use crate::inventory::holds::{self, Ended, SeatAsk};
use crate::inventory::hotq::Owned;
use crate::inventory::{caps, pools, releases::Release, seatmap};

/// What a job on the writer decided.
#[derive(Debug)]
pub enum Fast<T> {
    /// The answer.
    Done(T),
    /// Not decided here: nothing was written; run the sqlx path.
    Other,
}

/// A hold's outcome on the writer.
#[derive(Debug)]
pub enum Held {
    /// Held (committed): the 201.
    Created(HoldAnswer),
    /// Lost at the guarded update: nothing held, the key recorded as refused; `ours` is false
    /// when another request (another body) had stored the key first (422).
    Lost {
        /// What was not there (the 409's fresh availability is read after the commit).
        lost: Lost,
        /// Whether the key's stored row is this request's.
        ours: bool,
    },
}

/// Runs the hold `r` at `now_ms` on the writer when it is named seats or pool places (other
/// asks: [`Fast::Other`] at once).
pub async fn hold(w: &Writer, r: &Request<'_>, now_ms: i64) -> sqlx::Result<Fast<Held>> {
    if !matches!(r.ask, claim::Ask::Seats(_) | claim::Ask::Pool { .. }) {
        return Ok(Fast::Other);
    }
    let owned = Owned::of(r);
    // Hashed here, not on the writer's thread, where every job waits for the one before.
    let hash = r.ask.request_hash(r.show, r.channel);
    let out = w
        .run(move |conn| hold_job(&owned, &hash, conn, now_ms))
        .await?;
    // After the commit: a snapshot polled from now on sees it.
    seatmap::touch();
    Ok(out)
}

/// The hold job: [`claim::create_in`]'s steps for one plain hold, three calls (key and cap
/// slots, the guarded update, the rows; a pool's counter last).
fn hold_job(
    o: &Owned,
    hash: &str,
    conn: &Connection,
    now_ms: i64,
) -> rusqlite::Result<Step<Fast<Held>>> {
    let r = o.request();
    let p = Prepared {
        hold_id: uuid::Uuid::now_v7().to_string(),
        expires_at: now_ms + r.timing.hold_ttl_ms,
        pool_price: None,
    };
    let slots = [p.slots(&r)];
    let (sql, b) =
        claim::keys_and_slots_sql(false, &[(&r, now_ms)], &[hash.to_owned()], &slots, now_ms);
    let rows: Vec<(String, String, String)> =
        writer::rows(conn, &sql, &b, |x| Ok((x.get(0)?, x.get(1)?, x.get(2)?)))?;
    let key_taken = rows
        .iter()
        .any(|(t, v, k)| t == "k" && *v == r.adm.sub && k == r.key);
    let taken: Vec<(String, String)> = rows
        .iter()
        .filter(|(t, _, _)| t == "s")
        .map(|(_, a, b)| (a.clone(), b.clone()))
        .collect();
    // A replay, a reused key, a refused slot or a later cap slot: the sqlx path's answer.
    if !key_taken || caps::slots_got(&slots, &taken)[0] != (true, true) {
        return Ok(Step::Undo(Fast::Other));
    }
    let (seats, amount) = match &r.ask {
        claim::Ask::Seats(seats) => {
            let ask = SeatAsk {
                hold_id: &p.hold_id,
                expires_at: p.expires_at,
                seats,
                now_ms,
            };
            let Some((sql, b)) = holds::claim_many_sql(false, r.show, &[ask]) else {
                return Ok(Step::Undo(Fast::Other));
            };
            let prices: Vec<i64> = writer::rows(conn, &sql, &b, |x| x.get(2))?;
            if prices.len() != seats.len() {
                return lost(o, conn, Lost::Seats(seats.clone()), hash, now_ms);
            }
            (seats.clone(), prices.iter().sum())
        }
        claim::Ask::Pool { pool, quantity } => {
            let name = format!("{}|{pool}", r.show);
            let price = rows
                .iter()
                .find(|(t, n, _)| t == "p" && *n == name)
                .and_then(|(_, _, price)| price.parse::<i64>().ok());
            // An unknown pool: 422 from the sqlx path.
            let Some(price) = price else {
                return Ok(Step::Undo(Fast::Other));
            };
            (Vec::new(), price * i64::from(*quantity))
        }
        _ => return Ok(Step::Undo(Fast::Other)),
    };
    let hold = NewHold::of(&r, &p, seats, amount, now_ms);
    let (sql, b) = claim::write_holds_sql(false, &[(&r, &hold)]);
    let stored: Vec<(String, String)> =
        writer::rows(conn, &sql, &b, |x| Ok((x.get(0)?, x.get(1)?)))?;
    if stored.is_empty() {
        return Ok(Step::Undo(Fast::Other));
    }
    // A pool's places last (as `claim::create_in`): the conditional counter decides.
    if let Some((pool, quantity)) = r.ask.pool() {
        let mut b = crate::db::Binds::default();
        b.push(i64::from(quantity));
        b.push(r.show);
        b.push(pool);
        b.push(1_i64);
        if !took_one(conn, pools::SQLITE_TAKE, &b)? {
            // Full: lost, unless lapsed holds still count (then the sqlx path reclaims them
            // and tries again), as `pools::claim` decides.
            let (sql, b) = pools::lapsed_exist_sql(r.show, pool, now_ms);
            let lapsed: Vec<i64> = writer::rows(conn, &sql, &b, |x| x.get(0))?;
            if lapsed.first() == Some(&1) {
                return Ok(Step::Undo(Fast::Other));
            }
            return lost(o, conn, Lost::Pool(pool.to_owned()), hash, now_ms);
        }
    }
    Ok(Step::Keep(Fast::Done(Held::Created(hold.answer()))))
}

/// The hold lost at the guarded update: what it wrote is rolled back to a savepoint of its
/// own and its key recorded as refused (as `claim::create` does after its rollback), unless
/// a seat does not exist (422 from the sqlx path).
fn lost(
    o: &Owned,
    conn: &Connection,
    lost: Lost,
    hash: &str,
    now_ms: i64,
) -> rusqlite::Result<Step<Fast<Held>>> {
    if let Lost::Seats(seats) = &lost {
        let (sql, b) = claim::known_seats_sql(&o.show, seats);
        let known: Vec<String> = writer::rows(conn, &sql, &b, |x| x.get(0))?;
        if known.len() != seats.len() {
            return Ok(Step::Undo(Fast::Other));
        }
    }
    writer::rollback_to_start(conn)?;
    let row = Refused::of(&o.adm.sub, &o.key, hash, now_ms);
    let ours = refuse_in(conn, &[&row])?[0];
    Ok(Step::Keep(Fast::Done(Held::Lost { lost, ours })))
}

/// Runs the one-row statement `sql`; true when it changed a row.
fn took_one(conn: &Connection, sql: &str, b: &crate::db::Binds) -> rusqlite::Result<bool> {
    writer::execute(conn, sql, b)?;
    Ok(conn.changes() == 1)
}

/// [`claim::record_refused_rows`] on the writer's connection.
fn refuse_in(conn: &Connection, rows: &[&Refused]) -> rusqlite::Result<Vec<bool>> {
    let key_row = |x: &rusqlite::Row<'_>| Ok((x.get(0)?, x.get(1)?, x.get(2)?));
    let (sql, b) = claim::refused_rows_sql(rows);
    let inserted: claim::KeyRows = writer::rows(conn, &sql, &b, key_row)?.into_iter().collect();
    let stored: claim::KeyRows = match claim::met_keys_sql(rows, &inserted) {
        Some((sql, b)) => writer::rows(conn, &sql, &b, key_row)?.into_iter().collect(),
        None => Default::default(),
    };
    Ok(claim::refused_ours(rows, &inserted, &stored))
}

/// Stores the refused key `row` on the writer (with whatever else is waiting: one commit);
/// true when the key's stored row is this request's (see [`claim::record_refused_rows`]).
pub async fn refuse(w: &Writer, row: Refused) -> sqlx::Result<bool> {
    w.run(move |conn| Ok(Step::Keep(refuse_in(conn, &[&row])?[0])))
        .await
}

/// A fan's release `r` on the writer ([`holds::release_in`] with the fan's guard on the
/// payment): `Done(true)` released, `Done(false)` its guard failed (nothing written);
/// [`Fast::Other`] when the hold has an interval claim or a fan of its show is waiting on the
/// waitlist (the sqlx path offers what it frees).
pub async fn release(w: &Writer, r: Release) -> sqlx::Result<Fast<bool>> {
    let out = w.run(move |conn| release_in(conn, &r)).await?;
    seatmap::touch();
    if let Fast::Done(Some(show)) = &out {
        holds::count_release(show, Actor::Api, Ended::Released);
    }
    Ok(match out {
        Fast::Done(show) => Fast::Done(show.is_some()),
        Fast::Other => Fast::Other,
    })
}

/// The release job: the show of the released hold, or `None` when its guard failed.
fn release_in(conn: &Connection, r: &Release) -> rusqlite::Result<Step<Fast<Option<String>>>> {
    let end = Ended::Released;
    let (sql, b) = holds::released_sql(false, &r.hold_id, Some(&r.payment), end, r.now_ms);
    let rows = writer::rows(conn, &sql, &b, |x| {
        Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?, x.get(4)?))
    })?;
    let Some(released) = holds::released_of(rows) else {
        return Ok(Step::Keep(Fast::Done(None)));
    };
    if released.parts.interval || released.waiting {
        return Ok(Step::Undo(Fast::Other));
    }
    let (b, _, statements) = holds::release_writes_sql(
        false,
        &r.hold_id,
        &released.show,
        &released.jti,
        !released.parts.seats.is_empty(),
        Actor::Api,
        end,
        &r.reason,
        r.now_ms,
        None,
    );
    writer::execute(conn, &statements.join("; "), &b)?;
    if let Some((pool, _, _)) = &released.parts.pool {
        let mut b = crate::db::Binds::default();
        b.push(r.hold_id.as_str());
        b.push(released.show.as_str());
        b.push(pool.as_str());
        writer::execute(conn, pools::SQLITE_RELEASE, &b)?;
    }
    Ok(Step::Keep(Fast::Done(Some(released.show))))
}

/// The hold `r` at `now_ms`: on `writer` when there is one and it decides ([`hold`]), else
/// [`claim::create`] (with `refusals` for a lost hold's key). The answer and refusals are
/// [`claim::create`]'s: a lost hold's 409 with fresh availability read from `reads` (a seat
/// hold's on this thread through `local` when given).
#[allow(clippy::too_many_arguments)]
pub async fn create(
    writer: Option<&Writer>,
    local: Option<&crate::db::local::LocalReads>,
    db: &crate::db::Db,
    reads: &crate::db::Db,
    refusals: Option<&crate::inventory::refusals::Refusals>,
    r: &Request<'_>,
    now_ms: i64,
) -> crate::error::ApiResult<HoldAnswer> {
    if let Some(w) = writer {
        match hold(w, r, now_ms).await? {
            Fast::Done(Held::Created(answer)) => return Ok(answer),
            Fast::Done(Held::Lost { lost, ours }) => {
                if !ours {
                    return Err(claim::key_reused().into());
                }
                return Err(lost.problem(reads, local, r.show, now_ms).await?.into());
            }
            Fast::Other => {}
        }
    }
    claim::create(db, reads, refusals, r, now_ms).await
}
