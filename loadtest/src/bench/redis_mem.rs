//! Redis memory per queued fan: `INFO memory` `used_memory` before and after joining N visitors
//! to a fresh open event, through the waiting room's real store code
//! (`waiting_room::store::redis::RedisStore::join`, the same Lua join script the HTTP join
//! runs), called from many concurrent tasks over one multiplexed connection (so the commands
//! pipeline). The event's keys are deleted afterwards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use waiting_room::domain::{EventId, EventMeta, EventState, VisitorId};
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;

/// The memory figure.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemFigure {
    /// Visitors joined.
    pub fans: u64,
    /// `used_memory` before the joins, bytes.
    pub used_before: u64,
    /// `used_memory` after the joins, bytes.
    pub used_after: u64,
    /// (after − before) / fans, bytes per queued (numbered) fan.
    pub bytes_per_fan: f64,
    /// Store joins per second while filling (Lua join script through `RedisStore::join`).
    pub store_joins_per_sec: f64,
    /// How it was measured.
    pub method: String,
}

async fn used_memory(con: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<u64> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(con).await?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("INFO memory without used_memory"))
}

/// Joins `fans` visitors to a fresh open event on the Redis at `url` with `concurrency` tasks
/// and measures the memory they take.
pub async fn measure(url: &str, fans: u64, concurrency: usize) -> anyhow::Result<MemFigure> {
    let store = RedisStore::connect(url, Duration::from_secs(10)).await?;
    let mut con = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let id = format!("memfans-{:08x}", rand::random::<u32>());
    let ev = EventId::parse(&id).ok_or_else(|| anyhow::anyhow!("bad event id {id}"))?;
    let now_s = time::OffsetDateTime::now_utc().unix_timestamp();
    let meta = EventMeta {
        id: ev.clone(),
        state: EventState::Prequeue,
        opens_at: now_s,
        admit_rate: 1.0,
        max_active: 1,
        admission_ttl_secs: 600,
        booking_url: "http://127.0.0.1:1".into(),
        pow_bits: 0,
        stock_wait: 0,
        time_zone: "UTC".into(),
    };
    store.create_event(&meta).await?;
    store.begin_open(&ev).await?;
    while store.open_chunk(&ev, 10_000).await? > 0 {}
    // A first join creates the event's hashes, so `before` measures per-fan growth only.
    store
        .join(&ev, &VisitorId::random(), now_s * 1000, 120_000)
        .await?;
    let used_before = used_memory(&mut con).await?;
    let left = Arc::new(AtomicU64::new(fans));
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (store, ev, left) = (store.clone(), ev.clone(), left.clone());
        tasks.spawn(async move {
            while left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                let now_ms = time::OffsetDateTime::now_utc().unix_timestamp() * 1000;
                store
                    .join(&ev, &VisitorId::random(), now_ms, 120_000)
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    let secs = t.elapsed().as_secs_f64();
    let used_after = used_memory(&mut con).await?;
    cleanup(&mut con, &id).await?;
    Ok(MemFigure {
        fans,
        used_before,
        used_after,
        bytes_per_fan: used_after.saturating_sub(used_before) as f64 / fans.max(1) as f64,
        store_joins_per_sec: fans as f64 / secs.max(1e-9),
        method: format!(
            "INFO memory used_memory before/after {fans} joins to a fresh open event through \
             waiting_room::store::redis::RedisStore::join (the HTTP join's Lua script), \
             {concurrency} concurrent tasks on one multiplexed connection; keys deleted after"
        ),
    })
}

/// Deletes every key of the throw-away event (`wr:{id}:*`) and its entry in `wr:events`.
async fn cleanup(con: &mut redis::aio::MultiplexedConnection, id: &str) -> anyhow::Result<()> {
    let pattern = format!("wr:{{{id}}}:*");
    let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(con).await?;
    for k in keys {
        let _: () = redis::cmd("UNLINK").arg(&k).query_async(con).await?;
    }
    let _: () = redis::cmd("SREM")
        .arg("wr:events")
        .arg(id)
        .query_async(con)
        .await?;
    Ok(())
}
