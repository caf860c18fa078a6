//! Holds: the guarded all-or-nothing seat claim (DESIGN "Holds"), idempotent creation, expiry
//! enforced on every read, the seat map, and the guarded release.
//!
//! A seat is claimable when it is free or its hold's deadline has passed; the claim is one
//! conditional UPDATE inside one transaction, and fewer rows changed than asked means rollback.

use axum::http::StatusCode;
use sale_common::Problem;
use serde_json::{json, Map, Value};

use crate::db::{self, Actor, Backend, Db};

/// A hold as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Hold {
    /// Hold id (UUID v7).
    pub id: String,
    /// Show id.
    pub show_id: String,
    /// Owner (admission `sub`).
    pub visitor_id: String,
    /// Admission `jti` the hold was made with.
    pub admission_jti: String,
    /// `HELD`, `PAID` or `RELEASED`.
    pub status: String,
    /// Why a RELEASED hold ended ([`Ended`]'s stored name); `None` while HELD or PAID.
    pub ended_as: Option<String>,
    /// Sum of seat prices, cents.
    pub amount_cents: i64,
    /// Hold deadline, epoch ms.
    pub expires_at: i64,
    /// Payment-session deadline, epoch ms (before `expires_at`).
    pub payment_expires_at: i64,
    /// Gateway payment id once created (`pending:*` while being created).
    pub payment_id: Option<String>,
    /// Gateway's per-payment signature.
    pub payment_signature: Option<String>,
    /// Checkout URL returned to the fan.
    pub checkout_url: Option<String>,
    /// When an execute was claimed, epoch ms (the at-most-once guard).
    pub executing_at: Option<i64>,
    /// Gateway transaction id once PAID.
    pub transaction_id: Option<String>,
    /// Consecutive failed gateway queries by the reconciler (3 → extension).
    pub query_failures: i64,
    /// Extensions granted so far (at most 3, then an alert).
    pub extensions: i64,
    /// Sales channel whose lifetimes the hold got (config `channels`).
    pub channel: String,
}

/// The columns of a [`Hold`], in its fields' order.
const HOLD_COLUMNS: &str = "id, show_id, visitor_id, admission_jti, status, ended_as, amount_cents, expires_at, payment_expires_at, payment_id, payment_signature, checkout_url, executing_at, transaction_id, query_failures, extensions, channel";

/// Loads a hold by id.
pub async fn load(db: &Db, id: &str) -> sqlx::Result<Option<Hold>> {
    sqlx::query_as::<_, Hold>(&format!("SELECT {HOLD_COLUMNS} FROM holds WHERE id = $1"))
        .bind(id)
        .fetch_optional(db)
        .await
}

/// [`load`] on the calling thread's SQLite connection ([`db::local`]).
pub fn load_local(local: &db::local::LocalReads, id: &str) -> sqlx::Result<Option<Hold>> {
    let mut b = db::Binds::default();
    let sql = format!("SELECT {HOLD_COLUMNS} FROM holds WHERE id = {}", b.push(id));
    let rows = local.rows(&sql, &b, |x| {
        Ok(Hold {
            id: x.get(0)?,
            show_id: x.get(1)?,
            visitor_id: x.get(2)?,
            admission_jti: x.get(3)?,
            status: x.get(4)?,
            ended_as: x.get(5)?,
            amount_cents: x.get(6)?,
            expires_at: x.get(7)?,
            payment_expires_at: x.get(8)?,
            payment_id: x.get(9)?,
            payment_signature: x.get(10)?,
            checkout_url: x.get(11)?,
            executing_at: x.get(12)?,
            transaction_id: x.get(13)?,
            query_failures: x.get(14)?,
            extensions: x.get(15)?,
            channel: x.get(16)?,
        })
    })?;
    Ok(rows.into_iter().next())
}

/// Seat ids of a hold, in the fixed (sorted) order.
pub async fn seats_of(db: &Db, hold_id: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar("SELECT seat_id FROM hold_seats WHERE hold_id = $1 ORDER BY seat_id")
        .bind(hold_id)
        .fetch_all(db)
        .await
}

/// Loads the hold whose current payment is `payment_id` (the callback's and the webhook's
/// lookup: one statement where an id lookup and a load were two).
pub async fn load_by_payment(db: &Db, payment_id: &str) -> sqlx::Result<Option<Hold>> {
    sqlx::query_as::<_, Hold>(&format!(
        "SELECT {HOLD_COLUMNS} FROM holds WHERE payment_id = $1"
    ))
    .bind(payment_id)
    .fetch_optional(db)
    .await
}

/// The parts of a hold's view, one row each, in one statement (one snapshot):
/// `(part, a, b, c, n1, n2, n3)` with part `h` the hold itself (a = status, b = why it ended,
/// c = payment id, n1..n3 = deadline, payment deadline in epoch ms, amount in cents), `a` its
/// current payment's attempt (a = the gateway's last final answer, n1 = its number), `b` its
/// booking (a = id, b = `active` or `cancelled`), `p` its pool (a = pool, n1 = quantity), `r`
/// its interval (a = kind, b = resource, n1..n3 = start, end, until in epoch ms), `s` a seat
/// (a = seat id, in seat order; n1 = 1 once cancelled from its booking). `$1` the hold.
const VIEW_PARTS: &str = "SELECT 'h' AS part, status AS a, ended_as AS b, payment_id AS c, \
     CAST(expires_at AS BIGINT) AS n1, CAST(payment_expires_at AS BIGINT) AS n2, \
     CAST(amount_cents AS BIGINT) AS n3 FROM holds WHERE id = $1 \
     UNION ALL SELECT 'a', pa.gateway_status, NULL, NULL, CAST(pa.attempt AS BIGINT), 0, 0 \
     FROM payment_attempts pa JOIN holds h ON h.payment_id = pa.payment_id WHERE h.id = $1 \
     UNION ALL SELECT 'b', id, status, NULL, 0, 0, 0 FROM bookings WHERE hold_id = $1 \
     UNION ALL SELECT 'p', pool_id, NULL, NULL, CAST(quantity AS BIGINT), 0, 0 FROM hold_pools WHERE hold_id = $1 \
     UNION ALL SELECT 'r', kind, resource, NULL, CAST(start_ms AS BIGINT), CAST(end_ms AS BIGINT), \
     CAST(until_ms AS BIGINT) FROM hold_resources WHERE hold_id = $1 \
     UNION ALL SELECT 's', seat_id, NULL, NULL, \
     CAST(CASE WHEN cancelled_at IS NULL THEN 0 ELSE 1 END AS BIGINT), 0, 0 FROM hold_seats WHERE hold_id = $1 \
     ORDER BY 1, 2";

/// The fan-facing JSON of a hold (API.md `GET /api/holds/{hold}`). Times in epoch s. With
/// `payment: {attempt, gateway_status}` for its current gateway payment, if any. One statement
/// ([`VIEW_PARTS`]): the seed rehearsal's `GET /api/holds/{hold}` ran six one after another on
/// the checkout's connections (the hold, then its seats, booking, pool, interval and attempt).
/// A booked hold also has `booking_status` (`active`, or `cancelled` once an operator or the
/// gateway's refund cancelled all of it) and, when seats of it were cancelled,
/// `cancelled_seats` (no longer in `seats`): a fan whose booking was refunded saw "PAID" and
/// every seat (newcomer review).
/// The status, deadlines and payment come from that statement too, not from `h` (the caller's
/// earlier read, used only if the hold is gone): a view read while the payment's confirmation
/// commits showed `HELD` with a `booking_id` (newcomer review, 13 of ~2,600 reads on SQLite).
pub async fn view(db: &Db, h: &Hold) -> sqlx::Result<Value> {
    type Part = (
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        i64,
        i64,
        i64,
    );
    let parts: Vec<Part> = sqlx::query_as(VIEW_PARTS).bind(&h.id).fetch_all(db).await?;
    let mut v = json!({
        "hold_id": h.id, "show": h.show_id, "seats": [], "status": h.status, "ended_as": h.ended_as,
        "expires_at": h.expires_at / 1000, "payment_expires_at": h.payment_expires_at / 1000,
        "amount_cents": h.amount_cents,
    });
    let mut payment = h.payment_id.clone();
    let (mut seats, mut cancelled) = (Vec::new(), Vec::new());
    for (part, a, b, c, n1, n2, n3) in parts {
        match part.as_str() {
            "h" => {
                v["status"] = a.into();
                v["ended_as"] = b.into();
                v["expires_at"] = (n1 / 1000).into();
                v["payment_expires_at"] = (n2 / 1000).into();
                v["amount_cents"] = n3.into();
                payment = c;
            }
            "a" => v["payment"] = json!({"attempt": n1, "gateway_status": a}),
            "b" => {
                v["booking_id"] = a.into();
                v["booking_status"] = b.into();
            }
            "p" => {
                v["pool"] = a.into();
                v["quantity"] = n1.into();
            }
            "r" => {
                let (kind, resource) = (a.unwrap_or_default(), b.unwrap_or_default());
                v["interval"] =
                    crate::inventory::resources::interval_json(&kind, &resource, n1, n2, n3);
            }
            "s" if n1 == 1 => cancelled.extend(a),
            "s" => seats.extend(a),
            _ => {}
        }
    }
    if let Some(p) = payment.filter(|p| !p.starts_with("pending:")) {
        v["payment_id"] = p.into();
    }
    v["seats"] = seats.into();
    if !cancelled.is_empty() {
        v["cancelled_seats"] = cancelled.into();
    }
    Ok(v)
}

/// SQL for a seat's effective status: a hold past its deadline counts as free (DESIGN: expiry
/// is enforced on every read, the sweeper is only housekeeping). `now_ms` is always `$1`.
pub(crate) const EFFECTIVE: &str =
    "CASE WHEN status = 'held' AND hold_expires_at <= $1 THEN 'free' ELSE status END";

/// Fresh effective status of the given seats, read through `on`: the pool, or a transaction
/// (`&mut **tx`: the read then sees the transaction's own writes, as the hold queue's batch
/// needs for its losers). No seats: no read.
pub async fn availability<'e, E>(
    on: E,
    show: &str,
    seats: &[String],
    now_ms: i64,
) -> sqlx::Result<Map<String, Value>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    if seats.is_empty() {
        return Ok(Map::new());
    }
    let (sql, b) = availability_sql(show, seats, now_ms);
    Ok(
        sqlx::query_as_with::<_, (String, String), _>(&sql, b.args())
            .fetch_all(on)
            .await?
            .into_iter()
            .map(|(k, v)| (k, Value::from(v)))
            .collect(),
    )
}

/// [`availability`] on the calling thread's SQLite connection ([`db::local`]).
pub fn availability_local(
    local: &db::local::LocalReads,
    show: &str,
    seats: &[String],
    now_ms: i64,
) -> sqlx::Result<Map<String, Value>> {
    let (sql, b) = availability_sql(show, seats, now_ms);
    Ok(local
        .rows(&sql, &b, |x| {
            Ok((x.get::<_, String>(0)?, x.get::<_, String>(1)?))
        })?
        .into_iter()
        .map(|(k, v)| (k, Value::from(v)))
        .collect())
}

/// The SQL of [`availability`] (rows: seat id, effective status) and its values.
fn availability_sql(show: &str, seats: &[String], now_ms: i64) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    b.push(now_ms);
    b.push(show);
    let params: Vec<String> = seats.iter().map(|s| b.push(s.as_str())).collect();
    let sql = format!(
        "SELECT seat_id, {EFFECTIVE} FROM seats WHERE show_id = $2 AND seat_id IN ({})",
        params.join(", ")
    );
    (sql, b)
}

/// The seat map of a show (API.md `GET /api/shows/{show}/seats`): `capacity`/`available` count
/// discrete seats; `pools` lists general-admission pools with their own `available`.
pub async fn seat_map(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<Value> {
    let sql = format!("SELECT seat_id, section, seat_row, number, price_cents, {EFFECTIVE} FROM seats WHERE show_id = $2 ORDER BY section, seat_row, number");
    let rows = sqlx::query_as::<_, (String, String, i64, i64, i64, String)>(&sql)
        .bind(now_ms)
        .bind(show)
        .fetch_all(db)
        .await?;
    let available = rows.iter().filter(|r| r.5 == "free").count();
    let seats: Vec<Value> = rows
        .iter()
        .map(|(id, sec, row, n, price, st)| json!({"id": id, "section": sec, "row": row, "number": n, "price_cents": price, "status": st}))
        .collect();
    let pools = crate::inventory::pools::availability(db, show, now_ms).await?;
    Ok(
        json!({"show": show, "capacity": rows.len(), "available": available, "seats": seats, "pools": pools}),
    )
}

/// Parses and normalises the asked seats: 1..=max, no duplicates, sorted (the fixed lock order).
pub fn normalise_seats(mut seats: Vec<String>, max: usize) -> Result<Vec<String>, Problem> {
    seats.sort();
    let before = seats.len();
    seats.dedup();
    if seats.len() != before {
        return Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "duplicate-seats",
            "A seat is asked twice",
        ));
    }
    if seats.is_empty() || seats.len() > max {
        return Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "seat-count",
            "Wrong number of seats",
        )
        .detail(format!("a hold takes 1 to {max} seats"))
        .with("max_seats", max));
    }
    Ok(seats)
}

/// The guarded claim of one hold: [`claim_many`] with one ask. Returns the price of each seat
/// it took (the hold's amount without a read of the seats); fewer than asked means rollback.
pub async fn claim(
    tx: &mut db::Tx<'_>,
    pg: bool,
    show: &str,
    seats: &[String],
    hold_id: &str,
    expires_at: i64,
    now_ms: i64,
) -> sqlx::Result<Vec<i64>> {
    let ask = SeatAsk {
        hold_id,
        expires_at,
        seats,
        now_ms,
    };
    let got = claim_many(tx, pg, show, &[ask], false).await?;
    Ok(got.into_iter().map(|g| g.price_cents).collect())
}

/// Seats one hold asks for in [`claim_many`].
#[derive(Debug, Clone, Copy)]
pub struct SeatAsk<'a> {
    /// The hold that will hold them.
    pub hold_id: &'a str,
    /// Its deadline, epoch ms.
    pub expires_at: i64,
    /// The seats (no seat in two asks of one call).
    pub seats: &'a [String],
    /// The request's `now`, epoch ms: a seat whose hold ended at or before it is free.
    pub now_ms: i64,
}

/// A seat [`claim_many`] took.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Taken {
    /// Seat id.
    pub seat_id: String,
    /// The hold that now holds it.
    pub hold_id: String,
    /// Its price, cents.
    pub price_cents: i64,
}

/// The guarded claim: ONE `UPDATE` that takes, for every ask, its seats when every one of them
/// is free or held by a hold that lapsed at the ask's `now`, and none of them otherwise (the
/// only thing that decides a seat; all or nothing per ask, so a lost ask wrote no seat). Returns
/// the seats it took; an ask with none taken is lost (a single hold's caller rolls back; the
/// per-show hold queue, which passes a whole batch, undoes the loser's key and slots:
/// issue 13 item 4). Parameters are one row per seat (`$N` on both stores: sqlx's `Any` has
/// no arrays). The asks must not share a seat.
///
/// On PostgreSQL the same statement first locks, in seat order, those of the asked seats that
/// are free or lapsed (a `MATERIALIZED` `FOR UPDATE` CTE: case B05, ordered locks never
/// deadlock) and judges each ask on the locked, newest row versions, which no one else can
/// change before the commit: an ask with a seat it could not lock is lost. Seats held by
/// others are not locked, so their holders' releases never wait on a claim (locking them made
/// a hold-queue batch, which holds an earlier pass's locks, deadlock with releases). The guard
/// in the update's `WHERE` still decides each row. SQLite has one writer
/// (`BEGIN IMMEDIATE`): nothing to lock.
///
/// With `skip_locked` (the hold queue's batches), a seat another transaction has locked is
/// skipped (`FOR UPDATE SKIP LOCKED`) rather than waited for, and an ask with such a seat
/// loses here like one with a taken seat: a batch of a whole show's holds never waits on one
/// seat's lock (a newcomer review: a seat kept locked in a session stalled every batch of a
/// queued show behind it). The caller tells the two apart by a read of the seats afterwards:
/// a loser whose seats all read free lost to a lock, not to a holder.
pub async fn claim_many(
    tx: &mut db::Tx<'_>,
    pg: bool,
    show: &str,
    asks: &[SeatAsk<'_>],
    skip_locked: bool,
) -> sqlx::Result<Vec<Taken>> {
    crate::inventory::seatmap::touch();
    let mut b = db::Binds::default();
    let Some(sql) = claim_many_into(&mut b, pg, show, asks, skip_locked) else {
        return Ok(Vec::new());
    };
    sqlx::query_as_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await
}

/// The SQL of [`claim_many`] and its values (rows [`Taken`]); `None` when no seat is asked.
/// Also run by SQLite's writer thread ([`crate::inventory::fast`]).
pub fn claim_many_sql(pg: bool, show: &str, asks: &[SeatAsk<'_>]) -> Option<(String, db::Binds)> {
    let mut b = db::Binds::default();
    claim_many_into(&mut b, pg, show, asks, false).map(|sql| (sql, b))
}

/// The SQL of [`claim_many`], its values bound into `b` (which may hold a larger statement's
/// values already: the one-round-trip hold on PostgreSQL, [`crate::inventory::onetrip`], nests
/// it as a data-modifying CTE); `None` when no seat is asked. `skip_locked`: see [`claim_many`].
pub(crate) fn claim_many_into(
    b: &mut db::Binds,
    pg: bool,
    show: &str,
    asks: &[SeatAsk<'_>],
    skip_locked: bool,
) -> Option<String> {
    let show_p = b.push(show.to_owned());
    let mut rows = Vec::new();
    for a in asks {
        for s in a.seats {
            rows.push(format!(
                "({}, {}, {}, {})",
                b.push(s.clone()),
                b.push(a.hold_id.to_owned()),
                b.push(a.expires_at),
                b.push(a.now_ms)
            ));
        }
    }
    if rows.is_empty() {
        return None;
    }
    let guard =
        "(seats.status = 'free' OR (seats.status = 'held' AND seats.hold_expires_at <= w.now))";
    let free = |t: &str| {
        format!("({t}.status = 'free' OR ({t}.status = 'held' AND {t}.hold_expires_at <= w.now))")
    };
    let set = "SET status = 'held', hold_id = w.hold, hold_expires_at = w.exp";
    let back = "RETURNING seats.seat_id, seats.hold_id, seats.price_cents";
    // A `VALUES` list, not `UNION ALL`: SQLite caps a compound SELECT at 500 terms, a batch can
    // have 128 holds of several seats.
    let values = rows.join(", ");
    let sql = if pg {
        let latest = b.push(asks.iter().map(|a| a.now_ms).max().unwrap_or(0));
        format!(
            "WITH w (seat, hold, exp, now) AS (VALUES {values}), \
             l AS MATERIALIZED (SELECT seat_id, status, hold_expires_at FROM seats \
             WHERE show_id = {show_p} AND seat_id IN (SELECT seat FROM w) \
             AND (status = 'free' OR (status = 'held' AND hold_expires_at <= {latest})) \
             ORDER BY seat_id FOR UPDATE{skip}), \
             bad AS (SELECT DISTINCT w.hold FROM w LEFT JOIN l ON l.seat_id = w.seat \
             WHERE l.seat_id IS NULL OR NOT {}) \
             UPDATE seats {set} FROM w WHERE seats.show_id = {show_p} AND seats.seat_id = w.seat \
             AND w.hold NOT IN (SELECT hold FROM bad) AND {guard} {back}",
            free("l"),
            skip = if skip_locked { " SKIP LOCKED" } else { "" },
        )
    } else {
        format!(
            "WITH w (seat, hold, exp, now) AS (VALUES {values}), \
             bad AS (SELECT DISTINCT w.hold FROM w LEFT JOIN seats s ON s.show_id = {show_p} \
             AND s.seat_id = w.seat WHERE s.seat_id IS NULL OR NOT {}) \
             UPDATE seats {set} FROM w WHERE seats.show_id = {show_p} AND seats.seat_id = w.seat \
             AND w.hold NOT IN (SELECT hold FROM bad) AND {guard} {back}",
            free("s")
        )
    };
    Some(sql)
}

/// Why a hold ended (issue 17 item 6; seed 001: "the customer walked away" and "the customer
/// said no" are different facts), stored in `holds.ended_as` beside status RELEASED and written
/// as the audit action of the release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It lapsed: its deadline passed without a payment (or with one still undecided or
    /// expired at the gateway). Written by the reconciler, the only sweeper of lapsed holds.
    Expired,
    /// The fan (or an operator) let it go, or cancelled its payment at the gateway.
    Released,
    /// Its payment failed (the gateway refused it) and no new attempt came in time.
    Failed,
}

impl Ended {
    /// Stored name: `ended_as` and the audit action.
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Expired => "expired",
            Ended::Released => "released",
            Ended::Failed => "failed",
        }
    }
}

/// Releases a HELD hold: hold → RELEASED with `ended_as` = `end`, and its seats → free only
/// where this hold still holds them. Returns false when the hold was not HELD (already paid or
/// released). Audited as `end`. This is the one release path (reconciler, fan cancel, refund):
/// see [`release_in`].
pub async fn release(
    db: &Db,
    hold_id: &str,
    actor: Actor,
    end: Ended,
    reason: &str,
    now_ms: i64,
) -> sqlx::Result<bool> {
    let pg = db::backend(db) == Backend::Postgres;
    let mut tx = db::begin_write(db).await?;
    let done = release_in(&mut tx, pg, hold_id, None, actor, end, reason, now_ms).await?;
    tx.commit().await?;
    Ok(done)
}

/// [`release`] inside the caller's transaction: the guarded HELD→RELEASED update and one read
/// of what the hold has ([`released`], one call), an interval's claim, then ONE call
/// ([`db::write_all`]) for the seats freed only where `hold_id` still holds them (as
/// [`free_seats`]), the cap slots, the session's end and its notice, the audit row and the
/// hold's own waitlist offer ended; the seats offered to the waitlist; a pool's units last
/// (the pool row is locked only from there to the commit, as a new hold's increment: issue 13
/// item 3), then offered to the pool's waitlist. Kinds the hold does not have cost no
/// statement, and nor do the waitlist offers when no fan of the show is waiting.
///
/// `payment`: when `Some(p)`, the hold is released only if its `payment_id` is still `p` (`""`
/// for none): a fan's release read the hold before a pay may have claimed it, and must not
/// release under a payment being created (newcomer review: an approved payment was left on a
/// RELEASED hold). The one guarded update checks it; false as for a hold no longer HELD.
#[allow(clippy::too_many_arguments)]
pub async fn release_in(
    tx: &mut db::Tx<'_>,
    pg: bool,
    hold_id: &str,
    payment: Option<&str>,
    actor: Actor,
    end: Ended,
    reason: &str,
    now_ms: i64,
) -> sqlx::Result<bool> {
    crate::inventory::seatmap::touch();
    let Some(Released {
        show,
        jti,
        parts,
        waiting,
    }) = released(tx, pg, hold_id, payment, end, now_ms).await?
    else {
        return Ok(false);
    };
    if parts.interval {
        crate::inventory::resources::release(tx, hold_id).await?;
    }
    // One call: the seats freed, the cap slots, the session's end and its notice, the audit
    // row and the hold's own waitlist offer ended (issue 13: was six round trips).
    let (b, ctes, statements) = release_writes_sql(
        pg,
        hold_id,
        &show,
        &jti,
        !parts.seats.is_empty(),
        actor,
        end,
        reason,
        now_ms,
        None,
    );
    db::write_all(tx, pg, b, ctes, statements).await?;
    if waiting {
        crate::inventory::waitlist::offer_freed(tx, pg, &show, hold_id, &parts.seats, now_ms)
            .await?;
    }
    if let Some((pool, qty, counted)) = parts.pool {
        crate::inventory::pools::release_of(tx, pg, &show, hold_id, &pool).await?;
        if counted == 1 && waiting {
            crate::inventory::waitlist::offer_pool(tx, pg, &show, hold_id, &pool, qty, now_ms)
                .await?;
        }
    }
    count_release(&show, actor, end);
    Ok(true)
}

/// The metrics of a release of a hold of `show`.
pub fn count_release(show: &str, actor: Actor, end: Ended) {
    metrics::counter!("bc_holds_released_total", "show" => show.to_owned(), "actor" => actor.as_str())
        .increment(1);
    metrics::counter!("bc_holds_ended_total", "show" => show.to_owned(), "ended_as" => end.as_str())
        .increment(1);
}

/// The writes of [`release_in`] after its guarded update, for [`db::write_all`]: its values,
/// lock CTEs (PostgreSQL) and statements: the seats `hold_id` still holds freed (when it has
/// `seats`), its cap
/// slots, the session's end and its notice, the audit row, and the hold's own waitlist offer
/// ended. Also run by SQLite's writer thread ([`crate::inventory::fast`]). `gate`: a SQL
/// condition every write also requires (the one-statement release on PostgreSQL,
/// [`crate::inventory::onetrip::release`], gates them on its guarded update's row); the hold,
/// show, admission and `now_ms` are bound first, as `$1` to `$4`.
#[allow(clippy::too_many_arguments)]
pub fn release_writes_sql(
    pg: bool,
    hold_id: &str,
    show: &str,
    jti: &str,
    seats: bool,
    actor: Actor,
    end: Ended,
    reason: &str,
    now_ms: i64,
    gate: Option<&str>,
) -> (db::Binds, Vec<String>, Vec<String>) {
    // One call: the seats freed, the cap slots, the session's end and its notice, the audit
    // row and the hold's own waitlist offer ended (issue 13: was six round trips).
    let mut b = db::Binds::default();
    let (h, s, j, at) = (
        b.push(hold_id.to_owned()),
        b.push(show.to_owned()),
        b.push(jti.to_owned()),
        b.push(now_ms),
    );
    let (mut ctes, mut statements) = (Vec::new(), Vec::new());
    let and_gate = gate.map(|g| format!(" AND {g}")).unwrap_or_default();
    if seats {
        let (lock, update) = free_seats_sql(pg, &h, &s, &and_gate);
        ctes.extend(lock.map(|l| format!("l AS ({l})")));
        statements.push(update);
    }
    // The session ends unless another hold of the admission is live; its slot is then closed,
    // not freed (`notify::SLOT_CLOSED`).
    let ends = crate::outbox::notify::ends_after_hold_sql(&mut b, &j, &at, &h);
    statements.push(format!(
        "{}{and_gate}",
        crate::inventory::caps::free_slots_ending_sql(&h, &ends)
    ));
    statements.extend(crate::outbox::notify::session_end_after_hold_sql(
        &mut b,
        show,
        &s,
        jti,
        &j,
        &at,
        &format!("{ends}{and_gate}"),
    ));
    statements.push(db::audit_sql(
        &mut b,
        &at,
        &s,
        &h,
        end.as_str(),
        actor,
        reason,
        gate,
    ));
    statements.push(format!(
        "{}{and_gate}",
        crate::inventory::waitlist::lapse_offer_sql(&h)
    ));
    (b, ctes, statements)
}

/// What a hold has, read in one statement: its seats (in seat order), its pool row `(pool,
/// quantity, counted)`, and whether it has an interval claim.
#[derive(Debug, Default)]
pub struct Parts {
    /// Seat ids, sorted.
    pub seats: Vec<String>,
    /// `(pool id, units, counted 0/1)`.
    pub pool: Option<(String, i64, i64)>,
    /// Whether an interval resource is claimed.
    pub interval: bool,
}

/// What [`released`] found: the hold's show and admission, its [`Parts`], and whether any fan
/// of the show is on the waitlist (read in the same statement; none waiting, a release skips
/// its waitlist reads).
#[derive(Debug)]
pub struct Released {
    /// The hold's show.
    pub show: String,
    /// The hold's admission `jti`.
    pub jti: String,
    /// What the hold had.
    pub parts: Parts,
    /// Whether a fan of the show was waiting on the waitlist.
    pub waiting: bool,
}

/// The guarded HELD→RELEASED update of `hold_id` (and when `payment` is `Some(p)`, only if
/// its payment is still `p`, `""` for none) and one read of what the hold has, in ONE call:
/// on PostgreSQL the update as a data-modifying CTE the read's first row comes from, on SQLite
/// the update's `RETURNING` and the read in one call to the writer. `None` when the hold was
/// not HELD (or its payment moved): nothing was changed.
pub async fn released(
    tx: &mut db::Tx<'_>,
    pg: bool,
    hold_id: &str,
    payment: Option<&str>,
    end: Ended,
    now_ms: i64,
) -> sqlx::Result<Option<Released>> {
    let (sql, b) = released_sql(pg, hold_id, payment, end, now_ms);
    let rows: Vec<(String, String, String, i64, i64)> = sqlx::query_as_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await?;
    Ok(released_of(rows))
}

/// The guarded HELD→RELEASED update of hold `hold` at `now` as `end` (placeholders), when
/// `payment` (a SQL condition on the hold's `payment_id`) holds: the one guard of every release
/// ([`released_sql`], and [`crate::inventory::onetrip::release`], which adds its own
/// conditions after it).
pub fn release_guard_sql(now: &str, hold: &str, end: &str, payment: &str) -> String {
    format!(
        "UPDATE holds SET status = 'RELEASED', ended_as = {end}, released_at = {now} \
         WHERE id = {hold} AND status = 'HELD' AND {payment}"
    )
}

/// The SQL of [`released`] and its values; rows `(kind, id, other, n, counted)` for
/// [`released_of`]. Also run by SQLite's writer thread ([`crate::inventory::fast`]).
pub fn released_sql(
    pg: bool,
    hold_id: &str,
    payment: Option<&str>,
    end: Ended,
    now_ms: i64,
) -> (String, db::Binds) {
    let update = release_guard_sql(
        "$1",
        "$2",
        "$3",
        "($4 = 0 OR COALESCE(payment_id, '') = $5)",
    );
    let waiting = "CAST(CASE WHEN EXISTS (SELECT 1 FROM waitlist w WHERE w.show_id = holds.show_id AND w.status = 'waiting') \
         THEN 1 ELSE 0 END AS BIGINT)";
    let parts = "SELECT 's', seat_id, '', CAST(0 AS BIGINT), CAST(0 AS BIGINT) FROM hold_seats WHERE hold_id = $2 \
         UNION ALL SELECT 'p', pool_id, '', quantity, counted FROM hold_pools WHERE hold_id = $2 \
         UNION ALL SELECT 'r', resource, '', CAST(0 AS BIGINT), CAST(0 AS BIGINT) FROM hold_resources WHERE hold_id = $2";
    let sql = if pg {
        format!(
            "WITH h AS ({update} RETURNING show_id, admission_jti, {waiting} AS waiting) \
             SELECT 'h', show_id, admission_jti, waiting, CAST(0 AS BIGINT) FROM h UNION ALL {parts}"
        )
    } else {
        format!("{update} RETURNING 'h', show_id, admission_jti, {waiting}, 0; {parts}")
    };
    let mut b = db::Binds::default();
    b.push(now_ms);
    b.push(hold_id);
    b.push(end.as_str());
    b.push(i64::from(payment.is_some()));
    b.push(payment.unwrap_or_default());
    (sql, b)
}

/// What [`released_sql`]'s rows say: `None` when the hold was not released.
pub fn released_of(rows: Vec<(String, String, String, i64, i64)>) -> Option<Released> {
    let mut found = None;
    let mut parts = Parts::default();
    for (kind, id, other, n, counted) in rows {
        match kind.as_str() {
            "h" => found = Some((id, other, n == 1)),
            "s" => parts.seats.push(id),
            "p" => parts.pool = Some((id, n, counted)),
            _ => parts.interval = true,
        }
    }
    parts.seats.sort();
    found.map(|(show, jti, waiting)| Released {
        show,
        jti,
        parts,
        waiting,
    })
}

/// Frees the seats `hold_id` still holds, in one statement: on PostgreSQL it locks them in seat
/// order first (a `FOR UPDATE` CTE the update joins: case B05, the order a claim locks in).
pub async fn free_seats(
    tx: &mut db::Tx<'_>,
    pg: bool,
    show: &str,
    hold_id: &str,
) -> sqlx::Result<u64> {
    let (lock, update) = free_seats_sql(pg, "$1", "$2", "");
    let sql = match lock {
        Some(l) => format!("WITH l AS ({l}) {update}"),
        None => update,
    };
    Ok(sqlx::query(&sql)
        .bind(hold_id)
        .bind(show)
        .execute(&mut **tx)
        .await?
        .rows_affected())
}

/// The SQL of [`free_seats`] with `hold` and `show` placeholders: on PostgreSQL the body of
/// the lock CTE (to be named `l`) and the update that joins it; on SQLite the update alone.
/// The hold's seats are found through `hold_seats`'s primary key, then the seats' ([`KEEP_SEATS`]
/// says why). `and_gate`: `""`, or ` AND <condition>` every seat freed must also meet (on
/// PostgreSQL in the lock, which the update joins).
pub fn free_seats_sql(
    pg: bool,
    hold: &str,
    show: &str,
    and_gate: &str,
) -> (Option<String>, String) {
    let set = "SET status = 'free', hold_id = NULL, hold_expires_at = NULL";
    let of_hold = format!("SELECT seat_id FROM hold_seats WHERE hold_id = {hold}");
    if pg {
        (
            Some(format!(
                "SELECT seat_id FROM seats WHERE show_id = {show} AND seat_id IN ({of_hold}) \
                 AND hold_id = {hold} AND status = 'held'{and_gate} ORDER BY seat_id FOR UPDATE"
            )),
            format!(
                "UPDATE seats {set} FROM l WHERE seats.show_id = {show} AND seats.seat_id = l.seat_id \
                 AND seats.hold_id = {hold} AND seats.status = 'held'"
            ),
        )
    } else {
        (
            None,
            format!(
                "UPDATE seats {set} WHERE show_id = {show} AND seat_id IN ({of_hold}) \
                 AND hold_id = {hold} AND status = 'held'{and_gate}"
            ),
        )
    }
}

/// Moves the deadline of the seats hold `$2` still holds to `$1` (epoch ms); the rows it
/// changes are the seats still the hold's. The seats are found through `hold_seats`'s primary
/// key, as every statement that looks a hold's seats up does: `seats` has no index on
/// `hold_id`, whose entries every hold and release of a seat wrote (migration
/// `20261205010000_seat_index_diet`).
pub const KEEP_SEATS: &str = "UPDATE seats SET hold_expires_at = $1 \
     WHERE (show_id, seat_id) IN (SELECT show_id, seat_id FROM hold_seats WHERE hold_id = $2) \
     AND hold_id = $2 AND status = 'held'";

/// Keeps a HELD hold's inventory until `until_ms` (epoch ms) when all of it is still the hold's:
/// every seat still held by it (lapsed or not, but not taken by another hold) and its pool
/// units still counted. Moves the hold's deadline, its seats' and its cap slots' to `until_ms`
/// and returns true; false (nothing changed) when something is gone. On PostgreSQL the seats
/// and the pool row are locked first, so a claim of a lapsed seat waits and then sees the new
/// deadline. The reconciler uses this before executing an approved payment at the deadline
/// (case B13).
pub async fn keep(tx: &mut db::Tx<'_>, pg: bool, h: &Hold, until_ms: i64) -> sqlx::Result<bool> {
    crate::inventory::seatmap::touch();
    let seats: Vec<String> =
        sqlx::query_scalar("SELECT seat_id FROM hold_seats WHERE hold_id = $1 ORDER BY seat_id")
            .bind(&h.id)
            .fetch_all(&mut **tx)
            .await?;
    db::lock_seats(tx, pg, &h.show_id, &seats).await?;
    let kept = sqlx::query(KEEP_SEATS)
        .bind(until_ms)
        .bind(&h.id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    if kept != seats.len() as u64
        || !crate::inventory::pools::counted(tx, pg, &h.show_id, &h.id).await?
        || !crate::inventory::resources::counted(tx, pg, &h.id).await?
    {
        return Ok(false);
    }
    sqlx::query("UPDATE holds SET expires_at = $1 WHERE id = $2 AND status = 'HELD'")
        .bind(until_ms)
        .bind(&h.id)
        .execute(&mut **tx)
        .await?;
    crate::inventory::caps::extend_slots(tx, &h.id, until_ms).await?;
    Ok(true)
}
