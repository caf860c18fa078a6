//! The read before a hold's transaction (issue 13: the hold path in a few statements): ONE
//! statement on the reader connections returns the key's stored answer (a replay is answered
//! before the rate limiter and never counts against it, case B12) and, for a named-seat hold,
//! each asked seat's effective status (a lapsed hold counts as free, as on every read).
//!
//! The same read refuses a pool hold whose pool has fewer places left than asked (lapsed
//! holds' places counting as free, as the transaction reclaims them), by the same rule as
//! below: in the seed rehearsal's hot show 29,500 of 29,900 pool requests in 80 s came after
//! the pool had sold out, and each went through the per-show hold queue (its batches, the
//! pool row's lock, its one worker) only to be refused there.
//!
//! A best-available hold is not checked here (measured and dropped): counting a section's free
//! seats reads every unsold seat of it, and a sold-out section keeps hundreds of held seats
//! (walk-aways wait for their deadline), so the count cost 0.28–0.31 ms a read at the
//! database, about as much as the queue's batch spends on such a request; in two rehearsals
//! on one binary, PostgreSQL's statement time was 83.3 s with the count and 68.7 s without,
//! the fans' hold p99 823 and 612 ms.
//!
//! A hold whose seats this read shows taken, from an admission with no live cap slot and a
//! session not ended (also read), is refused without a transaction: the read is a snapshot the
//! guarded update would have seen a moment later, so its refusal is the one the transaction
//! would have given, with the same fresh availability, and in the same order of refusals (the
//! caps and the session end come first there, so a request they would refuse goes on to it). A grant is only ever decided
//! by the guarded update (`holds::claim_many`): a seat the read shows free may still be lost
//! there. On the hot show of `loadtest bench` more than half of the requests lose; each cost a
//! transaction, a rollback, a known-seat check and an availability read, and on SQLite held the
//! one writer while doing so.

use serde_json::{Map, Value};

use crate::db::local::LocalReads;
use crate::db::{self, Db};
use crate::error::ApiResult;
use crate::inventory::claim::{self, Ask, HoldAnswer, Lost};
use crate::inventory::{caps, holds, pools};

/// What [`read`] checks besides the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check<'a> {
    /// The key only.
    Key,
    /// These named seats (each asked seat's status).
    Seats(&'a [String]),
    /// Whether this pool has `quantity` places left.
    Pool(&'a str, u32),
}

impl<'a> Check<'a> {
    /// What to check before a hold of `ask`: its seats or its pool; the key only for best
    /// available (see the module's text), an interval or a mixed order (whose transaction
    /// decides every part together).
    pub fn of(ask: &'a Ask) -> Self {
        match ask {
            Ask::Seats(seats) => Check::Seats(seats),
            Ask::Pool { pool, quantity } => Check::Pool(pool, *quantity),
            Ask::Best { .. } | Ask::Interval { .. } | Ask::Mixed(_) => Check::Key,
        }
    }

    /// The asked named seats (none for any other check).
    fn seats(self) -> &'a [String] {
        match self {
            Check::Seats(seats) => seats,
            _ => &[],
        }
    }
}

/// What [`read`] saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// The key's stored answer: replay it.
    pub answer: Option<HoldAnswer>,
    /// Refused from the read: every asked seat is known and at least one is not free
    /// ([`Lost::SeatsSeen`] with the seats' effective statuses, `{seat id: "free" | "held" |
    /// "sold"}`, the 409's fresh availability), the pool has fewer places left than asked
    /// ([`Lost::PoolSeen`]).
    pub lost: Option<Lost>,
    /// Nothing the read saw would make the transaction refuse other than at the guarded update:
    /// no stored answer but a refusal of this same request, no live cap slot of the admission
    /// or the visitor, a session not ended, every asked seat known. Only such a hold of named
    /// seats is tried in one round trip on PostgreSQL ([`crate::inventory::onetrip`]).
    pub plain: bool,
    /// The key is stored as refused for this request (`lost` is set): inserted by this read
    /// (on PostgreSQL the statement stores the refusal it makes, in the same round trip, by the
    /// same conditions as the code reading its rows), or stored so by an earlier try of the
    /// same request. The 409 needs no record of its own ([`crate::inventory::refusals`]); when
    /// false, another request may have stored the key meanwhile, and the record decides.
    pub recorded: bool,
    /// The key was stored as refused for this same request before this read, and the read
    /// refuses it again (`lost` is set): a repeat of an answered request, not a new attempt.
    pub repeated: bool,
}

/// Reads the key `(visitor, key)` of a request whose hash is `hash` and, for `check` of `show`
/// ([`Check::Key`]: the key only), what it names at `now_ms` (epoch ms: the asked seats'
/// effective statuses, the pool's places left) and whether the admission `jti` or the visitor holds a live cap slot or the
/// admission's session ended: the transaction would then refuse with `hold-exists`,
/// `visitor-hold-cap` or `admission-ended` first (or, under the visitor cap, may still grant),
/// so such a request is not refused here. Nor is one naming an unknown seat or pool (the
/// transaction's 422). `Err` is 422 `idempotency-key-reused` or 409 `concurrent-request`,
/// as [`claim::stored_answer`].
/// With `record`, on PostgreSQL, the statement also stores the refusal it makes
/// ([`Seen::recorded`]); the caller passes false when nothing may be written for the request
/// (over its rate limit). On a SQLite file the read runs on the calling thread (`local`:
/// [`LocalReads`]), else on `db`.
#[allow(clippy::too_many_arguments)]
pub async fn read(
    db: &Db,
    local: Option<&LocalReads>,
    visitor: &str,
    jti: &str,
    key: &str,
    hash: &str,
    show: &str,
    check: Check<'_>,
    now_ms: i64,
    record: bool,
) -> ApiResult<Seen> {
    // On PostgreSQL, with `record`, the read also stores the refusal it makes (see
    // [`Seen::recorded`]).
    let record =
        (record && local.is_none() && db::backend(db) == db::Backend::Postgres).then_some(hash);
    let (sql, b) = sql(visitor, jti, key, show, check, now_ms, record);
    let rows: Vec<(String, String, String, String)> = match local {
        Some(local) => local.rows(&sql, &b, |x| {
            Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?))
        })?,
        None => sqlx::query_as_with(&sql, b.args()).fetch_all(db).await?,
    };
    let (mut stored, mut capped, mut pool, mut inserted) = (None, false, None, false);
    let mut statuses = Map::new();
    for (t, a, b, c) in rows {
        match t.as_str() {
            "k" => stored = Some((a, b.parse::<i64>().unwrap_or_default(), c)),
            "c" => capped = b != "0",
            "p" => pool = pool_entry(a, &b, &c),
            "r" => inserted = true,
            _ => {
                statuses.insert(a, Value::from(b));
            }
        }
    }
    // A stored row that is no answer is a refusal of this same request (another body's is
    // `Err` here).
    let refused_before = stored.is_some();
    let answer = claim::answer_of(stored, hash)?;
    let seats = check.seats();
    let plain = answer.is_none() && !capped && !seats.is_empty() && statuses.len() == seats.len();
    let lost = if capped {
        None
    } else {
        match check {
            Check::Key => None,
            // An unknown seat is the transaction's 422 (`unknown-seat`): not refused here.
            Check::Seats(_) => (statuses.len() == seats.len()
                && statuses.values().any(|s| s != "free"))
            .then_some(Lost::SeatsSeen(statuses)),
            Check::Pool(_, quantity) => pool
                .filter(|p| p["available"].as_i64().unwrap_or(0) < i64::from(quantity))
                .map(Lost::PoolSeen),
        }
    };
    let repeated = lost.is_some() && refused_before;
    let recorded = repeated || (lost.is_some() && inserted);
    debug_assert!(
        !inserted || lost.is_some(),
        "the statement stored a refusal the read did not make"
    );
    Ok(Seen {
        answer,
        lost,
        plain,
        recorded,
        repeated,
    })
}

/// The statement of [`read`] and its values. Its rows `(t, a, b, c)`, all text: `k` the key's
/// (hash, status, body); `c` the admission's live cap slots and ended session, counted (`b`);
/// `s` a seat's (id, status); `p` the pool's (id, places left, "price,capacity,oversell").
/// With `record` (the request's hash; PostgreSQL only) the read is a CTE, and one more row `r`
/// says it stored the key as refused: when the key has no row, no cap slot is live, the session
/// has not ended, and every asked seat is known with one not free, or the pool has fewer
/// places left than asked ([`read`]'s rule for `lost`, on the same rows); it commits without
/// waiting for the disk, as the refusals' group commit does.
fn sql(
    visitor: &str,
    jti: &str,
    key: &str,
    show: &str,
    check: Check<'_>,
    now_ms: i64,
    record: Option<&str>,
) -> (String, db::Binds) {
    let mut sql = "SELECT 'k' AS t, request_hash AS a, CAST(status AS TEXT) AS b, body AS c \
                   FROM idempotency WHERE visitor_id = $2 AND key = $3"
        .to_owned();
    let mut b = db::Binds::default();
    b.push(now_ms);
    b.push(visitor);
    b.push(key);
    if check == Check::Key {
        return (sql, b);
    }
    b.push(jti);
    b.push(show);
    sql.push_str(&format!(
        " UNION ALL SELECT 'c', '', CAST((SELECT COUNT(*) FROM hold_slots \
         WHERE ((scope = '{jti_scope}' AND owner = $4) OR (scope = '{visitor_scope}' AND owner = $2)) \
         AND live_until > $1) + (SELECT COUNT(*) FROM admissions_ended WHERE jti = $4) AS TEXT), ''",
        jti_scope = caps::JTI,
        visitor_scope = caps::VISITOR,
    ));
    match check {
        Check::Key => {}
        Check::Seats(seats) => {
            let params: Vec<String> = seats.iter().map(|s| b.push(s.as_str())).collect();
            sql.push_str(&format!(
                " UNION ALL SELECT 's', seat_id, {effective}, '' FROM seats \
                 WHERE show_id = $5 AND seat_id IN ({params})",
                effective = holds::EFFECTIVE,
                params = params.join(", ")
            ));
        }
        Check::Pool(pool, _) => {
            let pool = b.push(pool);
            // Places left as the transaction counts them: capacity and oversell, less the
            // taken places net of returns, plus the lapsed holds' places it would reclaim.
            sql.push_str(&format!(
                " UNION ALL SELECT 'p', p.pool_id, CAST(p.capacity + p.oversell - {taken} \
                 + COALESCE((SELECT SUM(hp.quantity) FROM hold_pools hp WHERE {lapsed}), 0) AS TEXT), \
                 CAST(p.price_cents AS TEXT) || ',' || CAST(p.capacity AS TEXT) || ',' \
                 || CAST(p.oversell AS TEXT) FROM pools p WHERE p.show_id = $5 AND p.pool_id = {pool}",
                taken = pools::TAKEN,
                lapsed = pools::lapsed("p.show_id", "p.pool_id", "$1"),
            ));
        }
    }
    let short = match check {
        Check::Key => return (sql, b),
        Check::Seats(seats) => format!(
            "(SELECT COUNT(*) FROM q WHERE t = 's') = {n} \
             AND EXISTS (SELECT 1 FROM q WHERE t = 's' AND b <> 'free')",
            n = b.push(i64::try_from(seats.len()).unwrap_or(i64::MAX)),
        ),
        // CASE: the cast only of the pool's row (`b` is a status or a body on the others).
        Check::Pool(_, quantity) => format!(
            "EXISTS (SELECT 1 FROM q WHERE (CASE WHEN t = 'p' THEN CAST(b AS BIGINT) END) < {n})",
            n = b.push(i64::from(quantity)),
        ),
    };
    let Some(hash) = record else {
        return (sql, b);
    };
    let sql = format!(
        "WITH q (t, a, b, c) AS MATERIALIZED ({sql}), \
         r AS (INSERT INTO idempotency (visitor_id, key, request_hash, status, body, created_at) \
         SELECT $2, $3, {hash}, {refused}, '', $1 \
         WHERE NOT EXISTS (SELECT 1 FROM q WHERE t = 'k') \
         AND EXISTS (SELECT 1 FROM q WHERE t = 'c' AND b = '0') AND {short} \
         ON CONFLICT (visitor_id, key) DO NOTHING RETURNING 1) \
         SELECT t, a, b, c FROM q \
         UNION ALL SELECT 'r', '', set_config('synchronous_commit', 'off', true), '' FROM r",
        hash = b.push(hash),
        refused = b.push(claim::REFUSED),
    );
    (sql, b)
}

/// A pool's entry of [`pools::availability`] from the read's `p` row: its id, its places left
/// (text) and "price,capacity,oversell"; `None` when a number does not parse.
fn pool_entry(id: String, left: &str, rest: &str) -> Option<Value> {
    let n: Vec<i64> = rest
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    let [price, cap, over] = n[..] else {
        return None;
    };
    let left: i64 = left.parse().ok()?;
    // `pool_json` computes the places left from its parts: taken = cap + over - left.
    Some(pools::pool_json(id, price, cap, over, cap + over - left, 0))
}
