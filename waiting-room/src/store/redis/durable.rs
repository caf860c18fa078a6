//! Writes that survive a failover (issue 11 item 5). Redis replicates asynchronously: a master
//! that dies can take its last acknowledged writes with it, and the replica that takes over
//! hands the same queue numbers out again. So a join (a new number), a claim (an admission) and
//! the opening chunks are answered only once `min_replicas` replicas have them: after the script
//! the store sends `WAIT min_replicas timeout_ms` to the event's master. A write the replicas did
//! not confirm in time is answered 503 (the fan retries; nobody holds a token for a place that
//! may vanish), so after any failover every number a fan was told is on the new master: no number
//! is held by two visitors and no visitor is admitted twice.
//!
//! **Group commit.** `WAIT` blocks the connection it is sent on, and one connection carries every
//! request of this process. So writes do not wait one by one: each write that returned takes a
//! ticket; one leader at a time sends `WAIT`, which covers every write that had returned before
//! it was sent (Redis runs one connection's commands in order and `WAIT` waits for the client's
//! last write offset); its answer settles all those tickets at once. Under load one `WAIT` covers
//! a whole batch of joins.
//!
//! Limit: if the connection to the master is replaced between a write and its `WAIT` (a
//! reconnect), that `WAIT` cannot see the write and may confirm it; a reconnect is itself a
//! sign of trouble, and the window is one round trip.

use super::conn::Conn;
use crate::domain::EventId;
use crate::store::{StoreError, StoreResult};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How many replicas must confirm a join, claim or opening chunk, and for how long to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// Replicas that must have the write (0: answer at once, no failover guarantee).
    pub min_replicas: u32,
    /// The longest `WAIT`, **milliseconds**; past it the write is answered 503.
    pub timeout_ms: u64,
}

impl Durability {
    /// No waiting (a single server without replicas, or tests of the unguarded race).
    pub const OFF: Self = Self {
        min_replicas: 0,
        timeout_ms: 0,
    };
}

/// Tickets settled so far: every ticket `<= acked` is replicated; every ticket `<= failed` (and
/// not `<= acked`) was not confirmed in time.
#[derive(Debug, Clone, Copy, Default)]
struct Settled {
    acked: u64,
    failed: u64,
}

#[derive(Debug)]
struct Group {
    /// Tickets handed out (writes that returned).
    written: AtomicU64,
    settled: watch::Sender<Settled>,
    leader: tokio::sync::Mutex<()>,
}

/// Group-committed replication waits, one group per event slot (its master).
#[derive(Debug)]
pub(super) struct Acks {
    cfg: Durability,
    groups: Mutex<HashMap<u16, Arc<Group>>>,
}

/// The cluster slot of an event's keys (CRC16/XMODEM of the `{event}` hash tag, mod 16384).
fn slot_of(event: &EventId) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(event.as_str().as_bytes()) % 16384
}

impl Acks {
    pub(super) fn new(cfg: Durability) -> Self {
        Self {
            cfg,
            groups: Mutex::default(),
        }
    }

    pub(super) fn config(&self) -> Durability {
        self.cfg
    }

    fn group(&self, slot: u16) -> Arc<Group> {
        let mut g = self.groups.lock().unwrap_or_else(|p| p.into_inner());
        g.entry(slot)
            .or_insert_with(|| {
                Arc::new(Group {
                    written: AtomicU64::new(0),
                    settled: watch::channel(Settled::default()).0,
                    leader: tokio::sync::Mutex::new(()),
                })
            })
            .clone()
    }

    /// Called right after a write for `event` returned: resolves once `min_replicas` replicas
    /// have it. Errors: `Unavailable` when they did not confirm within `timeout_ms` (or the
    /// `WAIT` failed): the caller answers 503 and must not hand out what it wrote.
    pub(super) async fn replicated(&self, conn: &Conn, event: &EventId) -> StoreResult<()> {
        if self.cfg.min_replicas == 0 {
            return Ok(());
        }
        let slot = slot_of(event);
        let g = self.group(slot);
        let ticket = g.written.fetch_add(1, Ordering::SeqCst) + 1;
        let mut rx = g.settled.subscribe();
        let limit = Duration::from_millis(self.cfg.timeout_ms.saturating_mul(4).max(1000));
        let started = tokio::time::Instant::now();
        loop {
            let s = *rx.borrow_and_update();
            if s.acked >= ticket {
                return Ok(());
            }
            if s.failed >= ticket {
                return Err(not_replicated(self.cfg));
            }
            if let Ok(_lead) = g.leader.try_lock() {
                let s = *g.settled.borrow();
                if s.acked >= ticket {
                    return Ok(());
                }
                let target = g.written.load(Ordering::SeqCst);
                let confirmed = self.wait(conn, slot).await;
                g.settled.send_modify(|s| match confirmed {
                    Ok(n) if n >= i64::from(self.cfg.min_replicas) => s.acked = s.acked.max(target),
                    _ => s.failed = s.failed.max(target),
                });
                if !confirmed.is_ok_and(|n| n >= i64::from(self.cfg.min_replicas)) {
                    metrics::counter!("wr_store_not_replicated_total").increment(1);
                }
                continue;
            }
            let left = limit.saturating_sub(started.elapsed());
            if left.is_zero() || tokio::time::timeout(left, rx.changed()).await.is_err() {
                return Err(not_replicated(self.cfg));
            }
        }
    }

    /// `WAIT min_replicas timeout_ms` on the master of `slot` (one server: on it).
    async fn wait(&self, conn: &Conn, slot: u16) -> redis::RedisResult<i64> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(self.cfg.min_replicas).arg(self.cfg.timeout_ms);
        let mut conn = conn.clone();
        match &mut conn {
            Conn::Single(..) => cmd.query_async(&mut conn).await,
            Conn::Cluster(c) => {
                let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::new(slot, SlotAddr::Master),
                ));
                let v = c.route_command(&cmd, route).await?;
                redis::from_redis_value(&v)
            }
        }
    }
}

fn not_replicated(cfg: Durability) -> StoreError {
    StoreError::Unavailable(format!(
        "the write was not confirmed by {} replica(s) within {} ms",
        cfg.min_replicas, cfg.timeout_ms
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_hash_tag() {
        // `CLUSTER KEYSLOT wr:{demo}:meta` = `CLUSTER KEYSLOT demo` = 903 on a real server.
        assert_eq!(slot_of(&EventId::parse("demo").expect("id")), 903);
    }
}
