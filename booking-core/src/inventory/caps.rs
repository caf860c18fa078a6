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
pub const JTI: &str = "jti";
/// Scope of the per-visitor cap.
pub const VISITOR: &str = "visitor";

/// The upsert of a slot row (`$1`–`$5`: scope, owner, slot, hold, live until): a slot whose
/// hold is no longer live at `$6` (now) is taken over.
const ON_FREE_SLOT: &str =
    "ON CONFLICT (scope, owner, slot) DO UPDATE SET hold_id = excluded.hold_id, \
     live_until = excluded.live_until WHERE hold_slots.live_until <= $6";

/// Takes one of the `cap` slots of `(scope, owner)` for `hold_id` until `live_until` (epoch
/// ms). False when every slot belongs to a live hold: the caller refuses the hold.
pub async fn take_slot(
    tx: &mut Tx<'_>,
    scope: &str,
    owner: &str,
    cap: u32,
    hold_id: &str,
    live_until: i64,
    now_ms: i64,
) -> sqlx::Result<bool> {
    for slot in 0..i64::from(cap) {
        let row = (scope, owner, slot, hold_id, live_until);
        if upsert_slot(tx, "VALUES ($1, $2, $3, $4, $5)", row, now_ms).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The one slot of the one-live-hold-per-admission cap ([`JTI`]) for `hold_id`, taken only
/// while the admission's session has not ended (`admissions_ended`): the cap and the
/// ended-admission check in one statement. False when the admission ended or its slot belongs
/// to a live hold (the caller tells which apart, on this refusal path only).
pub async fn take_admission_slot(
    tx: &mut Tx<'_>,
    jti: &str,
    hold_id: &str,
    live_until: i64,
    now_ms: i64,
) -> sqlx::Result<bool> {
    let source = "SELECT $1, $2, $3, $4, $5 \
                  WHERE NOT EXISTS (SELECT 1 FROM admissions_ended WHERE jti = $2)";
    upsert_slot(tx, source, (JTI, jti, 0, hold_id, live_until), now_ms).await
}

/// Inserts the slot row `(scope, owner, slot, hold, live until)` given by `source` (the `$1`–`$5`
/// values, or a `SELECT` of them), or takes over the slot when its hold is no longer live at
/// `now_ms`. True when the slot is this hold's.
async fn upsert_slot(
    tx: &mut Tx<'_>,
    source: &str,
    (scope, owner, slot, hold_id, live_until): (&str, &str, i64, &str, i64),
    now_ms: i64,
) -> sqlx::Result<bool> {
    let n = sqlx::query(&format!(
        "INSERT INTO hold_slots (scope, owner, slot, hold_id, live_until) {source} {ON_FREE_SLOT}"
    ))
    .bind(scope)
    .bind(owner)
    .bind(slot)
    .bind(hold_id)
    .bind(live_until)
    .bind(now_ms)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Frees every slot `hold_id` holds (its hold was released or paid).
pub async fn free_slots(tx: &mut Tx<'_>, hold_id: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE hold_slots SET live_until = 0 WHERE hold_id = $1")
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Moves the slots of an extended hold to its new deadline (a slot already taken over by
/// another hold is not touched: its `hold_id` differs).
pub async fn extend_slots(tx: &mut Tx<'_>, hold_id: &str, until_ms: i64) -> sqlx::Result<()> {
    sqlx::query("UPDATE hold_slots SET live_until = $1 WHERE hold_id = $2 AND live_until <> 0")
        .bind(until_ms)
        .bind(hold_id)
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
    use super::RateLimiter;

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
