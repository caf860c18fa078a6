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

/// One hold asking for a slot of its `owner` (an admission `jti` or a visitor) until
/// `live_until` (epoch ms).
#[derive(Debug, Clone, Copy)]
pub struct SlotAsk<'a> {
    /// The slot's owner in its scope.
    pub owner: &'a str,
    /// The hold that takes the slot.
    pub hold_id: &'a str,
    /// Until when, epoch ms.
    pub live_until: i64,
}

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
    let ask = SlotAsk {
        owner,
        hold_id,
        live_until,
    };
    Ok(take_slots(tx, scope, &[ask], cap, now_ms).await?[0])
}

/// [`take_slot`] for many holds at once (the hold queue's batch; owners distinct): slot 0 for
/// every ask in one statement, then slot 1 for the asks still without one, and so on up to
/// `cap`. Per ask, whether it got a slot.
pub async fn take_slots(
    tx: &mut Tx<'_>,
    scope: &str,
    asks: &[SlotAsk<'_>],
    cap: u32,
    now_ms: i64,
) -> sqlx::Result<Vec<bool>> {
    let mut got = vec![false; asks.len()];
    for slot in 0..i64::from(cap) {
        let want: Vec<usize> = (0..asks.len()).filter(|i| !got[*i]).collect();
        if want.is_empty() {
            break;
        }
        let rows: Vec<SlotAsk<'_>> = want.iter().map(|i| asks[*i]).collect();
        let taken = upsert_slots(tx, scope, slot, &rows, "", now_ms).await?;
        for i in want {
            got[i] = taken.iter().any(|o| o == asks[i].owner);
        }
    }
    Ok(got)
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
    let ask = SlotAsk {
        owner: jti,
        hold_id,
        live_until,
    };
    Ok(take_admission_slots(tx, &[ask], now_ms).await?[0])
}

/// [`take_admission_slot`] for many holds in one statement (owners = distinct `jti`s).
pub async fn take_admission_slots(
    tx: &mut Tx<'_>,
    asks: &[SlotAsk<'_>],
    now_ms: i64,
) -> sqlx::Result<Vec<bool>> {
    let ended = "AND NOT EXISTS (SELECT 1 FROM admissions_ended e WHERE e.jti = w.owner)";
    let taken = upsert_slots(tx, JTI, 0, asks, ended, now_ms).await?;
    Ok(asks
        .iter()
        .map(|a| taken.iter().any(|o| o == a.owner))
        .collect())
}

/// Inserts slot `slot` of `(scope, owner)` for every ask (rows filtered by `and_where`), or
/// takes it over where its hold is no longer live at `now_ms`. The owners that got the slot.
async fn upsert_slots(
    tx: &mut Tx<'_>,
    scope: &str,
    slot: i64,
    asks: &[SlotAsk<'_>],
    and_where: &str,
    now_ms: i64,
) -> sqlx::Result<Vec<String>> {
    if asks.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = crate::db::Binds::default();
    let (scope, slot, now) = (b.push(scope.to_owned()), b.push(slot), b.push(now_ms));
    let rows: Vec<String> = asks
        .iter()
        .map(|a| {
            format!(
                "SELECT {scope} AS scope, {} AS owner, {slot} AS slot, {} AS hold_id, {} AS live_until",
                b.push(a.owner.to_owned()),
                b.push(a.hold_id.to_owned()),
                b.push(a.live_until)
            )
        })
        .collect();
    // `WHERE true`: SQLite needs a WHERE before an upsert's ON CONFLICT after a SELECT.
    let sql = format!(
        "INSERT INTO hold_slots (scope, owner, slot, hold_id, live_until) \
         SELECT scope, owner, slot, hold_id, live_until FROM ({}) AS w WHERE true {and_where} \
         ON CONFLICT (scope, owner, slot) DO UPDATE SET hold_id = excluded.hold_id, \
         live_until = excluded.live_until WHERE hold_slots.live_until <= {now} RETURNING owner",
        rows.join(" UNION ALL ")
    );
    sqlx::query_scalar_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await
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
