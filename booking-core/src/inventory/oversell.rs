//! Overbooking as a written policy (issue 17 item 5, seed 001 "Overbooking Is a Policy"): a
//! pool's oversell allowance is stored beside the policy that justifies it (measured no-show
//! rate and its sample, who is moved first when everyone shows up, what each is offered),
//! versioned per pool (a new policy supersedes the current one; the old rows stay), and the
//! list of what is oversold: pools whose active bookings exceed the physical capacity, with the
//! bookings to move in the policy's order.
//!
//! Only pools have an allowance: seats and interval resources live in other tables and their
//! guards (`seats.status`, the exclusion constraint) have no allowance to raise.

use serde_json::{json, Value};
use sqlx::AnyConnection;

use crate::db::{self, Actor, Db};
use crate::outbox::notify;

/// Who is moved first when everyone shows up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveOrder {
    /// The most recent bookings are moved first (the seed's airline model: last in, first moved).
    LatestFirst,
    /// The oldest bookings are moved first.
    EarliestFirst,
}

impl MoveOrder {
    /// Stored and JSON name.
    pub fn as_str(self) -> &'static str {
        match self {
            MoveOrder::LatestFirst => "latest-booking-first",
            MoveOrder::EarliestFirst => "earliest-booking-first",
        }
    }

    fn parse(s: &str) -> Self {
        if s == "earliest-booking-first" {
            MoveOrder::EarliestFirst
        } else {
            MoveOrder::LatestFirst
        }
    }
}

/// The written part of a policy (required for an allowance above 0).
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// Measured share of bookings that do not show, 0..=1.
    pub no_show_rate: f64,
    /// What it was measured on (1 to 200 characters), e.g. "spring tour 2026, 12 shows".
    pub sample: String,
    /// Who is moved first.
    pub move_order: MoveOrder,
    /// What an affected fan is offered, as JSON objects with a `kind` (validated at the edge).
    pub offers: Vec<Value>,
}

/// Why a policy is refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// An allowance above 0 with no written policy.
    PolicyRequired,
    /// The allowance exceeds `floor(capacity × no_show_rate)`.
    AboveBound {
        /// The largest allowance the rate justifies, units.
        bound: i64,
    },
    /// A field out of range (the text says which).
    Invalid(String),
}

/// The largest allowance a no-show rate justifies on `capacity` units:
/// `floor(capacity × rate)` (seed 001: the allowance comes from measured no-shows).
pub fn bound(capacity: i64, no_show_rate: f64) -> i64 {
    (capacity as f64 * no_show_rate + 1e-9).floor() as i64
}

/// Checks `allowance` against `written` on a pool of `capacity` units.
pub fn check(allowance: i64, capacity: i64, written: Option<&Written>) -> Result<(), Refusal> {
    let Some(w) = written else {
        return match allowance {
            0 => Ok(()),
            _ => Err(Refusal::PolicyRequired),
        };
    };
    if !(0.0..=1.0).contains(&w.no_show_rate) {
        return Err(Refusal::Invalid("no_show_rate: a share from 0 to 1".into()));
    }
    let sample = w.sample.trim();
    if sample.is_empty() || sample.len() > 200 || sample.chars().any(char::is_control) {
        return Err(Refusal::Invalid(
            "sample: 1 to 200 characters, no control character".into(),
        ));
    }
    if w.offers.is_empty() {
        return Err(Refusal::Invalid("offers: at least one".into()));
    }
    let b = bound(capacity, w.no_show_rate);
    if allowance > b {
        return Err(Refusal::AboveBound { bound: b });
    }
    Ok(())
}

/// The pool's physical capacity, `None` when `show` has no such pool.
pub async fn capacity(db: &Db, show: &str, pool: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar("SELECT capacity FROM pools WHERE show_id = $1 AND pool_id = $2")
        .bind(show)
        .bind(pool)
        .fetch_optional(db)
        .await
}

/// Stores a new policy version and the allowance in one transaction (the previous version is
/// superseded, kept), audited `oversell-set`, with the waiting room's `reopen` or `sold-out`
/// report queued when the new allowance changes whether anything is left to sell.
///
/// The same policy set again by the same operator (a retried or doubled click: allowance,
/// written policy and operator all equal to the current version's) writes nothing and answers
/// the current version: ten identical calls at once make one version, not ten (newcomer
/// review, 2026-12-02). Concurrent calls queue on the pool row, so each reads the version the
/// one before it committed.
///
/// Returns `(version, set_at)`: the policy's version and when it was set, epoch ms.
pub async fn set(
    db: &Db,
    show: &str,
    pool: &str,
    allowance: i64,
    written: Option<&Written>,
    who: &str,
    now_ms: i64,
) -> sqlx::Result<(i64, i64)> {
    crate::inventory::seatmap::touch();
    let mut tx = db::begin_write(db).await?;
    let capacity: i64 = sqlx::query_scalar(
        "UPDATE pools SET oversell = $1, oversell_set_by = $2, oversell_set_at = $3 WHERE show_id = $4 AND pool_id = $5 \
         RETURNING capacity",
    )
    .bind(allowance).bind(who).bind(now_ms).bind(show).bind(pool)
    .fetch_one(&mut *tx)
    .await?;
    // Read after the pool row is ours: a statement of its own, so that on PostgreSQL (read
    // committed) it sees the version a concurrent call committed while this one waited.
    let current: Option<PolicyRow> = sqlx::query_as(&format!(
        "{POLICY_COLUMNS} WHERE show_id = $1 AND pool_id = $2 ORDER BY version DESC LIMIT 1"
    ))
    .bind(show)
    .bind(pool)
    .fetch_optional(&mut *tx)
    .await?;
    let offers = written.map_or_else(
        || "[]".to_owned(),
        |w| Value::from(w.offers.clone()).to_string(),
    );
    let rate = written.map(|w| w.no_show_rate);
    let sample = written.map(|w| w.sample.trim().to_owned());
    let order = written.map(|w| w.move_order.as_str().to_owned());
    let version = current.as_ref().map_or(0, |c| c.0);
    if let Some((v, a, _, r, sa, mo, o, op, at, _)) = current {
        if (a, &r, &sa, &mo, &o, op.as_str()) == (allowance, &rate, &sample, &order, &offers, who) {
            tx.rollback().await?;
            return Ok((v, at));
        }
    }
    sqlx::query("UPDATE oversell_policies SET superseded_at = $1 WHERE show_id = $2 AND pool_id = $3 AND superseded_at IS NULL")
        .bind(now_ms).bind(show).bind(pool)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO oversell_policies (show_id, pool_id, version, allowance, capacity, no_show_rate, sample, move_order, offers, operator, set_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(show).bind(pool).bind(version + 1).bind(allowance).bind(capacity)
    .bind(rate)
    .bind(sample)
    .bind(order)
    .bind(offers).bind(who).bind(now_ms)
    .execute(&mut *tx)
    .await?;
    let why = match written {
        Some(w) => format!(
            "pool {pool}: oversell {allowance} (policy v{}) set by {who}: no-show rate {} on {}, {}",
            version + 1, w.no_show_rate, w.sample.trim(), w.move_order.as_str()
        ),
        None => format!("pool {pool}: oversell {allowance} (policy v{}) set by {who}", version + 1),
    };
    sqlx::query("INSERT INTO audit (at, show_id, hold_id, seat_id, action, actor, reason) VALUES ($1, $2, NULL, $3, 'oversell-set', $4, $5)")
        .bind(now_ms).bind(show).bind(pool).bind(Actor::Operator.as_str()).bind(why)
        .execute(&mut *tx)
        .await?;
    // Places added to a sold-out show reopen the waiting room (seed 000: "a freed seat reopens
    // the level"); an allowance lowered to what is booked sells the show out. Each is a no-op
    // unless it changes what the waiting room was last told.
    notify::reopen_if_freed(&mut tx, show, now_ms).await?;
    notify::sold_out_if_done(&mut tx, show, now_ms).await?;
    tx.commit().await?;
    Ok((version + 1, now_ms))
}

type PolicyRow = (
    i64,
    i64,
    i64,
    Option<f64>,
    Option<String>,
    Option<String>,
    String,
    String,
    i64,
    Option<i64>,
);

const POLICY_COLUMNS: &str = "SELECT version, allowance, capacity, no_show_rate, sample, move_order, offers, operator, set_at, superseded_at FROM oversell_policies";

fn policy_json(r: PolicyRow) -> Value {
    let (version, allowance, capacity, rate, sample, order, offers, who, at, gone) = r;
    json!({"version": version, "allowance": allowance, "capacity": capacity, "no_show_rate": rate,
        "sample": sample, "move_order": order,
        "offers": serde_json::from_str::<Value>(&offers).unwrap_or_default(),
        "operator": who, "set_at": at, "superseded_at": gone})
}

/// Every policy version of a pool, newest first, as JSON
/// `{version, allowance, capacity, no_show_rate, sample, move_order, offers, operator, set_at (ms), superseded_at}`.
pub async fn history(db: &Db, show: &str, pool: &str) -> sqlx::Result<Vec<Value>> {
    let rows: Vec<PolicyRow> = sqlx::query_as(&format!(
        "{POLICY_COLUMNS} WHERE show_id = $1 AND pool_id = $2 ORDER BY version DESC"
    ))
    .bind(show)
    .bind(pool)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(policy_json).collect())
}

/// The latest written policy version of a pool (the newest with a move order), its row.
pub async fn written(
    conn: &mut AnyConnection,
    show: &str,
    pool: &str,
) -> sqlx::Result<Option<PolicyRow>> {
    sqlx::query_as(&format!(
        "{POLICY_COLUMNS} WHERE show_id = $1 AND pool_id = $2 AND move_order IS NOT NULL ORDER BY version DESC LIMIT 1"
    ))
    .bind(show)
    .bind(pool)
    .fetch_optional(conn)
    .await
}

/// One active booking of an oversold pool.
type BookingRow = (
    String,
    String,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    Option<i64>,
);

/// The pools of `show` (or only `only`) whose active bookings exceed their physical capacity:
/// `{pool, capacity, oversell, booked, excess, policy_version, move_order, offers, bookings}`
/// where `bookings` lists, in the policy's order, the bookings settled by a compensation
/// (`resolution` set) and the ones still to move (`to_move: true`) until the excess is covered.
pub async fn oversold(
    conn: &mut AnyConnection,
    show: &str,
    only: Option<&str>,
) -> sqlx::Result<Vec<Value>> {
    let pools: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT p.pool_id, p.capacity, p.oversell, CAST(SUM(hp.quantity) AS BIGINT) FROM pools p \
         JOIN hold_pools hp ON hp.show_id = p.show_id AND hp.pool_id = p.pool_id AND hp.counted = 1 \
         JOIN bookings b ON b.hold_id = hp.hold_id AND b.status = 'active' \
         WHERE p.show_id = $1 AND ($2 = '' OR p.pool_id = $2) GROUP BY p.pool_id, p.capacity, p.oversell \
         HAVING SUM(hp.quantity) > p.capacity ORDER BY p.pool_id",
    )
    .bind(show)
    .bind(only.unwrap_or(""))
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(pools.len());
    for (pool, capacity, over, booked) in pools {
        let policy = written(conn, show, &pool).await?;
        let order = MoveOrder::parse(policy.as_ref().and_then(|p| p.5.as_deref()).unwrap_or(""));
        let dir = if order == MoveOrder::LatestFirst {
            "DESC"
        } else {
            "ASC"
        };
        let rows: Vec<BookingRow> = sqlx::query_as(&format!(
            "SELECT b.id, b.hold_id, b.visitor_id, hp.quantity, h.amount_cents, b.created_at, \
             r.action, r.operator, r.policy_version, r.to_pool, r.amount_cents \
             FROM bookings b JOIN hold_pools hp ON hp.hold_id = b.hold_id JOIN holds h ON h.id = b.hold_id \
             LEFT JOIN oversell_resolutions r ON r.booking_id = b.id \
             WHERE b.show_id = $1 AND hp.pool_id = $2 AND hp.counted = 1 AND b.status = 'active' \
             ORDER BY b.created_at {dir}, b.id {dir}"
        ))
        .bind(show)
        .bind(&pool)
        .fetch_all(&mut *conn)
        .await?;
        let settled: i64 = rows.iter().filter(|r| r.6.is_some()).map(|r| r.3).sum();
        let mut left = booked - capacity - settled;
        let mut bookings = Vec::new();
        for (id, hold, visitor, qty, amount, at, action, who, version, to_pool, comp) in rows {
            let to_move = action.is_none() && left > 0;
            if !to_move && action.is_none() {
                continue;
            }
            if to_move {
                left -= qty;
            }
            let resolution = action.map(|a| {
                json!({"action": a, "operator": who, "policy_version": version,
                "to_pool": to_pool, "amount_cents": comp})
            });
            bookings.push(json!({"booking_id": id, "hold_id": hold, "visitor_id": visitor, "quantity": qty,
                "amount_cents": amount, "booked_at": at, "to_move": to_move, "resolution": resolution}));
        }
        let version = policy.as_ref().map_or(0, |p| p.0);
        let offers = policy
            .map(policy_json)
            .map_or(json!([]), |p| p["offers"].clone());
        out.push(
            json!({"pool": pool, "capacity": capacity, "oversell": over, "booked": booked,
            "excess": booked - capacity, "policy_version": version, "move_order": order.as_str(),
            "offers": offers, "bookings": bookings}),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(rate: f64) -> Written {
        Written {
            no_show_rate: rate,
            sample: "spring tour".into(),
            move_order: MoveOrder::LatestFirst,
            offers: vec![json!({"kind": "refund"})],
        }
    }

    #[test]
    fn the_bound_is_capacity_times_the_no_show_rate() {
        assert_eq!(bound(10, 0.2), 2);
        assert_eq!(bound(41_000, 0.07), 2_870);
        assert_eq!(check(2, 10, Some(&w(0.2))), Ok(()));
        assert_eq!(
            check(3, 10, Some(&w(0.2))),
            Err(Refusal::AboveBound { bound: 2 })
        );
        assert_eq!(check(1, 10, None), Err(Refusal::PolicyRequired));
        assert_eq!(check(0, 10, None), Ok(()));
        assert!(matches!(
            check(0, 10, Some(&w(1.5))),
            Err(Refusal::Invalid(_))
        ));
    }
}
