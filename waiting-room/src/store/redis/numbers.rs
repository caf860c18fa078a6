//! The scripts that read or write the number buckets (`byn:{k div 100}`, number → visitor):
//! join, open_chunk and advance. A script may touch only keys its caller declared in `KEYS`
//! (Redis Cluster checks declared keys for the slot's owner and its migration state; a key a
//! script derives itself can sit on the other side of a half-migrated slot). So the caller
//! works out which buckets a call can touch and declares them; the script stops at the first
//! number whose bucket is not declared (`byn` in `lib.lua` answers nil):
//!
//! - **join** declares the buckets of the next numbers after `hint`, the next number this
//!   process expects for the event (from its last join reply): at least two hundred, and two
//!   per join of this process in flight (256 concurrent joins move the counter past a fixed
//!   window before the last of them runs). A join that would hand out a number outside them
//!   writes nothing and answers `retry` with the number it needs; the caller moves `hint`
//!   there, doubles the span (other nodes' joins are not counted) and calls again (at most
//!   [`JOIN_ATTEMPTS`] times). Retries are rare and a join stays one round trip.
//! - **open_chunk** reads `shuffle_next` first and declares the buckets of the next `max`
//!   numbers; a chunk that finds `shuffle_next` moved stops early and the opener calls again.
//! - **advance** reads `cursor`, `counter` and `edge` first and declares the buckets of the
//!   scan (`cursor+1 ..= cursor+scan_limit`) and of the ready-window fill (`edge+1 ..=
//!   edge+scan_limit`): at most `2 × (scan_limit/100 + 1)` keys. If the cursor overtakes
//!   the edge by more than that, the window fill resumes at the next tick.

use super::parse::{bad, err, key, opt_number, state_of};
use super::RedisStore;
use crate::domain::{AdvanceParams, EventId, JoinOutcome, VisitorId};
use crate::store::{Advance, StoreError, StoreResult};
use std::collections::BTreeSet;

/// Numbers per bucket (must match `byn` in `lib.lua`).
pub(super) const BUCKET: u64 = 100;

/// A join whose hint was stale retries with the number the script asked for; more than this
/// many misses means hundreds of joins land between two calls: answer 503 rather than spin.
pub(super) const JOIN_ATTEMPTS: usize = 4;

/// One join in flight, counted in the store's `joins_in_flight` until dropped; `.0` is how
/// many were in flight when it entered.
struct InFlight<'a>(u64, &'a std::sync::atomic::AtomicU64);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a std::sync::atomic::AtomicU64) -> Self {
        let before = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(before, counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.1.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The bucket key of bucket `b` (numbers `b*100 ..= b*100+99`).
pub(super) fn bucket_key(event: &EventId, b: u64) -> String {
    format!("{}:{b}", key(event, "byn"))
}

/// Bucket indices covering numbers `lo..=hi` (none when `hi < lo`).
pub(super) fn buckets(lo: u64, hi: u64) -> impl Iterator<Item = u64> {
    let lo = lo.max(1);
    (lo / BUCKET..=hi / BUCKET).filter(move |_| hi >= lo)
}

fn int(v: Option<String>) -> u64 {
    v.and_then(|s| s.parse().ok()).unwrap_or(0)
}

impl RedisStore {
    fn join_hint(&self, event: &EventId) -> u64 {
        let hints = self.hints.lock().unwrap_or_else(|p| p.into_inner());
        hints.get(event.as_str()).copied().unwrap_or(1)
    }

    fn raise_hint(&self, event: &EventId, next: u64) {
        let mut hints = self.hints.lock().unwrap_or_else(|p| p.into_inner());
        let h = hints.entry(event.as_str().to_owned()).or_insert(next);
        *h = (*h).max(next);
    }

    pub(super) async fn join_fan(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_ms: u64,
    ) -> StoreResult<JoinOutcome> {
        let mut hint = self.join_hint(event);
        // The draw rank a pre-queue join is stored under (unused once the event is open).
        let (rank, member) = self.seed(event).await?.entry(visitor.as_str());
        // Joins in flight in this process move the counter while this one travels: declare
        // enough buckets to cover them (two per in-flight join, at least two buckets), and
        // twice as many after each retry (other nodes' joins are not counted here).
        let in_flight = InFlight::enter(&self.joins_in_flight);
        let mut span = (2 * BUCKET).max(2 * in_flight.0 + BUCKET);
        for _ in 0..JOIN_ATTEMPTS {
            let r: Vec<String> = self
                .scripts
                .join
                .on(event, &["meta", "num", "pre", "hb", "gone", "back"])
                .keys(buckets(hint, hint + span - 1).map(|b| bucket_key(event, b)))
                .arg(visitor.as_str())
                .arg(now_ms)
                .arg(rejoin_ms)
                .arg(rank)
                .arg(&member)
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(err)?;
            match r.as_slice() {
                [s, _] if s == "missing" => return Err(self.missing(event)),
                [s, n] if s == "retry" => {
                    hint = n.parse().map_err(|_| bad(n))?;
                    self.raise_hint(event, hint);
                    span *= 2;
                }
                [s, n] => {
                    let queue_number = opt_number(n)?;
                    if let Some(q) = queue_number {
                        self.raise_hint(event, q + 1);
                    }
                    return Ok(JoinOutcome {
                        queue_number,
                        state: state_of(s)?,
                    });
                }
                _ => return Err(bad("join")),
            }
        }
        Err(StoreError::Unavailable(
            "join: the queue moved past every declared number bucket".into(),
        ))
    }

    pub(super) async fn number_chunk(&self, event: &EventId, max: u64) -> StoreResult<u64> {
        let next: Option<String> = redis::cmd("HGET")
            .arg(key(event, "meta"))
            .arg("shuffle_next")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let first = int(next) + 1;
        self.scripts
            .open_chunk
            .on(event, &["meta", "pre", "num"])
            .keys(buckets(first, first + max.max(1) - 1).map(|b| bucket_key(event, b)))
            .arg(max)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)
    }

    /// The buckets one advance can touch, from the event's `cursor`, `counter` and `edge`.
    async fn advance_buckets(&self, event: &EventId, p: &AdvanceParams) -> StoreResult<Vec<u64>> {
        let m: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(key(event, "meta"))
            .arg("cursor")
            .arg("counter")
            .arg("edge")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let mut m = m.into_iter().map(int);
        let (cursor, counter, edge) = (
            m.next().unwrap_or(0),
            m.next().unwrap_or(0),
            m.next().unwrap_or(0),
        );
        let limit = p.liveness.scan_limit.max(1);
        let scan_to = counter.min(cursor + limit);
        let from = edge.max(cursor);
        let window_to = counter
            .min(from + limit)
            .min(cursor + limit + p.liveness.ready_window);
        let set: BTreeSet<u64> = buckets(cursor + 1, scan_to)
            .chain(buckets(from + 1, window_to))
            .collect();
        Ok(set.into_iter().collect())
    }

    pub(super) async fn advance(&self, event: &EventId, p: &AdvanceParams) -> StoreResult<Advance> {
        let declared = self.advance_buckets(event, p).await?;
        let (cursor, moved, skipped, returned): (i64, i64, i64, i64) = self
            .scripts
            .advance
            .on(event, &["meta", "live", "hb", "gone", "back", "num", "vac"])
            .keys(declared.into_iter().map(|b| bucket_key(event, b)))
            .arg(p.n)
            .arg(p.max_active)
            .arg(p.now_ms)
            .arg(p.invite_grace_secs)
            .arg(p.liveness.silence_ms)
            .arg(p.liveness.ready_window)
            .arg(p.liveness.scan_limit)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if cursor < 0 {
            return Err(self.missing(event));
        }
        Ok(Advance {
            cursor: cursor as u64,
            moved: moved as u64,
            skipped: skipped as u64,
            returned: returned as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::buckets;

    #[test]
    fn buckets_cover_the_range_and_nothing_for_an_empty_one() {
        assert_eq!(buckets(1, 100).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(buckets(101, 250).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(buckets(5, 4).count(), 0);
        assert_eq!(buckets(0, 0).count(), 0, "number 0 is never handed out");
    }
}
