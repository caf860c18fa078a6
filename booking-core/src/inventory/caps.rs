//! Caps on holds (seed 001 "Caps and Abuse"), enforced inside the claiming transaction: "a cap
//! counted with SELECT count(*) and then an insert is a race". Each cap is a set of slot rows
//! `(scope, owner, slot)`; a hold takes a slot with one conditional upsert that succeeds only
//! when the slot is new or its previous hold is no longer live (`live_until <= now`; release
//! and payment set it to 0). On PostgreSQL a concurrent taker of the same slot waits on the
//! primary key and then re-checks the committed row, so two holds never share a slot.
//!
//! Scopes: `jti` (one live hold per admission, DESIGN "Door") and `visitor` (at most
//! `max_holds_per_visitor` live holds per admission `sub`). The per-admission rate limit on
//! hold creation is an in-process token bucket ([`RateLimiter`]).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::db::Tx;

/// Scope of the one-live-hold-per-admission cap.
pub const JTI: &str = crate::outbox::notify::ADMISSION_SCOPE;
/// Scope of the per-visitor cap.
pub const VISITOR: &str = "visitor";

/// A new hold's cap slots: its admission's and its visitor's, until `live_until` (epoch ms).
#[derive(Debug, Clone, Copy)]
pub struct HoldSlots<'a> {
    /// The admission (`jti`): one live hold per admission.
    pub jti: &'a str,
    /// The visitor (`sub`): at most the cap of live holds; also the `Idempotency-Key`'s owner.
    pub visitor: &'a str,
    /// The request's `Idempotency-Key`: slot 0 is taken only when the key is this
    /// transaction's (see [`first_slots_sql`]).
    pub key: &'a str,
    /// The hold that takes the slots.
    pub hold_id: &'a str,
    /// Until when, epoch ms.
    pub live_until: i64,
}

/// The SQL of slot 0 of every hold's admission ([`JTI`], only while the admission's session has
/// not ended: `admissions_ended`) and visitor ([`VISITOR`]), one upsert binding into `b`,
/// `RETURNING {returning}` (columns of the slot rows taken, e.g. `scope, owner`). Only for holds whose key this transaction
/// took: `key_taken` is a SQL condition on `w.kv` (the key's visitor) and `w.kk` (the key),
/// for example an `EXISTS` over the key statement's `RETURNING` when both run in one
/// data-modifying CTE (PostgreSQL). A slot is new, or taken over when its hold is no longer
/// live at `now_ms`. The claiming transaction sends it with the key's statement
/// ([`crate::inventory::claim::prepare_many`]): one round trip for key and caps.
pub fn first_slots_sql(
    b: &mut crate::db::Binds,
    holds: &[HoldSlots<'_>],
    now_ms: i64,
    key_taken: &str,
    returning: &str,
) -> Option<String> {
    let rows: Vec<(&str, &str, &HoldSlots<'_>)> = holds
        .iter()
        .flat_map(|h| [(JTI, h.jti, h), (VISITOR, h.visitor, h)])
        .collect();
    upsert_sql(b, 0, &rows, now_ms, key_taken, returning)
}

/// Per hold, (admission slot taken, visitor slot taken) from the `(scope, owner)` pairs an
/// upsert of [`first_slots_sql`] returned.
pub fn slots_got(holds: &[HoldSlots<'_>], taken: &[(String, String)]) -> Vec<(bool, bool)> {
    let got = |scope: &str, owner: &str| taken.iter().any(|(s, o)| s == scope && o == owner);
    holds
        .iter()
        .map(|h| (got(JTI, h.jti), got(VISITOR, h.visitor)))
        .collect()
}

/// After slot 0 ([`first_slots_sql`]): for the holds that got their admission's slot but not
/// the visitor's slot 0 (`got[i] == (true, false)`), slot 1, 2, … of the visitor up to `cap`
/// (one statement each, all those holds at once; none when every visitor had slot 0 free).
/// Updates `got`; the caller refuses a hold that lacks either slot and rolls back what was
/// written. Admissions and visitors must be distinct within one call (the hold queue's batch
/// defers a second request of either).
pub async fn take_later_slots(
    tx: &mut Tx<'_>,
    holds: &[HoldSlots<'_>],
    got: &mut [(bool, bool)],
    cap: u32,
    now_ms: i64,
) -> sqlx::Result<()> {
    for slot in 1..i64::from(cap) {
        let want: Vec<usize> = (0..holds.len())
            .filter(|i| got[*i] == (true, false))
            .collect();
        if want.is_empty() {
            break;
        }
        let rows: Vec<(&str, &str, &HoldSlots<'_>)> = want
            .iter()
            .map(|i| (VISITOR, holds[*i].visitor, &holds[*i]))
            .collect();
        let mut b = crate::db::Binds::default();
        let Some(sql) = upsert_sql(&mut b, slot, &rows, now_ms, "1 = 1", "scope, owner") else {
            break;
        };
        let taken: Vec<(String, String)> = sqlx::query_as_with(&sql, b.args())
            .fetch_all(&mut **tx)
            .await?;
        for i in want {
            got[i].1 = taken.iter().any(|(_, o)| o == holds[i].visitor);
        }
    }
    Ok(())
}

/// The upsert of slot `slot` of `(scope, owner)` for every row `(scope, owner, hold)` where
/// `key_taken` holds, a [`JTI`] row only while its admission has not ended, taking the slot
/// over where its hold is no longer live at `now_ms`; `RETURNING {returning}`.
fn upsert_sql(
    b: &mut crate::db::Binds,
    slot: i64,
    rows: &[(&str, &str, &HoldSlots<'_>)],
    now_ms: i64,
    key_taken: &str,
    returning: &str,
) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let (slot, now, jti) = (b.push(slot), b.push(now_ms), b.push(JTI.to_owned()));
    let values: Vec<String> = rows
        .iter()
        .map(|(scope, owner, h)| {
            format!(
                "({}, {}, {slot}, {}, {}, {}, {})",
                b.push((*scope).to_owned()),
                b.push((*owner).to_owned()),
                b.push(h.hold_id.to_owned()),
                b.push(h.live_until),
                b.push(h.visitor.to_owned()),
                b.push(h.key.to_owned())
            )
        })
        .collect();
    let names = [
        "scope",
        "owner",
        "slot",
        "hold_id",
        "live_until",
        "kv",
        "kk",
    ];
    // The WHERE also keeps SQLite's parser from reading the upsert's ON as a join's. The ended
    // admissions are counted per row, an index probe each: as `NOT EXISTS`, PostgreSQL hashed
    // the whole table (40,000 rows by a sale's end) for each batch's 256 rows (5 of its 9 ms).
    Some(format!(
        "INSERT INTO hold_slots (scope, owner, slot, hold_id, live_until) \
         SELECT scope, owner, slot, hold_id, live_until FROM ({}) AS w \
         WHERE ({key_taken}) AND (w.scope <> {jti} OR (SELECT COUNT(*) FROM admissions_ended e WHERE e.jti = w.owner) = 0) \
         ON CONFLICT (scope, owner, slot) DO UPDATE SET hold_id = excluded.hold_id, \
         live_until = excluded.live_until WHERE hold_slots.live_until <= {now} RETURNING {returning}",
        crate::db::values_as(&names, &values)
    ))
}

/// The SQL of [`free_slots`] with `hold` the hold id's placeholder.
pub fn free_slots_sql(hold: &str) -> String {
    format!("UPDATE hold_slots SET live_until = 0 WHERE hold_id = {hold}")
}

/// [`free_slots_sql`] for a hold whose end also ends its admission's session when `ends` (SQL)
/// holds: the admission's slot is then closed ([`crate::outbox::notify::SLOT_CLOSED`]), not
/// freed, in the same statement.
pub fn free_slots_ending_sql(hold: &str, ends: &str) -> String {
    format!(
        "UPDATE hold_slots SET live_until = CASE WHEN scope = '{JTI}' AND {ends} THEN {} ELSE 0 END \
         WHERE hold_id = {hold}",
        crate::outbox::notify::SLOT_CLOSED
    )
}

/// Frees every slot `hold_id` holds (its hold was released or paid).
pub async fn free_slots(tx: &mut Tx<'_>, hold_id: &str) -> sqlx::Result<()> {
    sqlx::query(&free_slots_sql("$1"))
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Moves the slots of an extended hold to its new deadline (a slot already taken over by
/// another hold is not touched: its `hold_id` differs).
pub async fn extend_slots(tx: &mut Tx<'_>, hold_id: &str, until_ms: i64) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE hold_slots SET live_until = $1 WHERE hold_id = $2 AND live_until <> 0 \
         AND live_until <> $3",
    )
    .bind(until_ms)
    .bind(hold_id)
    .bind(crate::outbox::notify::SLOT_CLOSED)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Token buckets per admission `jti`: `per_min` creations a minute, burst `per_min`. Memory
/// is bounded: past [`RateLimiter::MAX_KEYS`] keys, full buckets are dropped first.
#[derive(Debug, Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, (f64, i64)>>,
}

impl RateLimiter {
    /// Most keys kept before pruning.
    pub const MAX_KEYS: usize = 100_000;

    /// Takes one token for `key` at `now_ms`; `Err(retry_after_secs)` when empty.
    pub fn check(&self, key: &str, per_min: u32, now_ms: i64) -> Result<(), u64> {
        if per_min == 0 {
            return Ok(());
        }
        let cap = f64::from(per_min);
        let per_ms = cap / 60_000.0;
        let mut map = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX_KEYS && !map.contains_key(key) {
            map.retain(|_, (t, at)| *t + (now_ms - *at) as f64 * per_ms < cap);
        }
        let (tokens, at) = map.entry(key.to_owned()).or_insert((cap, now_ms));
        let refilled = (*tokens + (now_ms - *at).max(0) as f64 * per_ms).min(cap);
        if refilled < 1.0 {
            let wait_ms = (1.0 - refilled) / per_ms;
            return Err((wait_ms / 1000.0).ceil().max(1.0) as u64);
        }
        *tokens = refilled - 1.0;
        *at = now_ms;
        Ok(())
    }

    /// Returns the token a request took for `key` when it turned out to be a replay of an
    /// earlier identical request (a replay never counts against the limit).
    pub fn give_back(&self, key: &str, per_min: u32) {
        let mut map = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((tokens, _)) = map.get_mut(key) {
            *tokens = (*tokens + 1.0).min(f64::from(per_min));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{first_slots_sql, HoldSlots, RateLimiter};

    /// The hold queue's batch takes slot 0 of every hold's admission and visitor in one
    /// statement: its rows are one `VALUES` list, so the statement has as many `SELECT`s for
    /// 128 holds as for one (a `UNION ALL` of one `SELECT` per row took PostgreSQL 39 ms to plan
    /// at 128 holds: `crate::db::values_as`).
    #[test]
    fn a_batch_of_slots_is_one_values_list_whatever_its_size() {
        let selects = |n: usize| {
            let ids: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            let holds: Vec<HoldSlots<'_>> = ids
                .iter()
                .map(|id| HoldSlots {
                    jti: id,
                    visitor: id,
                    key: id,
                    hold_id: id,
                    live_until: 1,
                })
                .collect();
            let mut b = crate::db::Binds::default();
            let sql = first_slots_sql(&mut b, &holds, 0, "1 = 1", "scope").expect("rows");
            assert_eq!(b.values().len(), 3 + 6 * 2 * n, "every row's values bound");
            sql.matches("SELECT").count()
        };
        assert_eq!(selects(128), selects(1));
        assert_eq!(selects(1), 3);
    }

    #[test]
    fn bucket_allows_burst_then_refills_at_rate() {
        let r = RateLimiter::default();
        for _ in 0..3 {
            assert!(r.check("j", 3, 0).is_ok());
        }
        assert_eq!(r.check("j", 3, 0), Err(20));
        assert!(r.check("j", 3, 20_000).is_ok());
        assert!(r.check("other", 3, 0).is_ok());
    }
}
