//! A cached, already-serialised seat map per show (issue 7: under a rush every fan reloads the
//! map, and re-reading 1,000+ rows per request queued behind the holds). The map is a hint —
//! the hold's guarded update decides (seed 002: "trusting the cached map makes it worse") — so a
//! snapshot is served while all of these hold:
//!
//! - no seat or pool write happened in this process since it was built ([`touch`] bumps a
//!   process-wide version at every guarded update, release, sale, extension and pool change);
//! - the request's `now` (the injected clock, epoch ms) is not before the snapshot's and not
//!   past the earliest deadline of a live hold in it (a lapse changes the effective status);
//! - it is younger than [`MAX_AGE`] of real time (bounds what other processes' writes hide).
//!
//! Rebuilds are single-flight per show: a burst of misses reads the database once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::db::Db;

/// Real-time age after which a snapshot is rebuilt even without a local write (250 ms).
pub const MAX_AGE: Duration = Duration::from_millis(250);

static VERSION: AtomicU64 = AtomicU64::new(0);

/// Marks every snapshot stale: call at each write to `seats`, `pools` or `hold_pools`.
pub fn touch() {
    VERSION.fetch_add(1, Ordering::Release);
}

#[derive(Debug)]
struct Snapshot {
    version: u64,
    built_ms: i64,
    valid_until_ms: i64,
    built: Instant,
    body: Bytes,
}

impl Snapshot {
    fn fresh(&self, version: u64, now_ms: i64) -> bool {
        self.version == version
            && now_ms >= self.built_ms
            && now_ms < self.valid_until_ms
            && self.built.elapsed() < MAX_AGE
    }
}

/// Snapshots and their rebuild locks, per show.
#[derive(Debug, Default)]
pub struct SeatMaps {
    shows: Mutex<HashMap<String, Arc<Slot>>>,
}

#[derive(Debug, Default)]
struct Slot {
    snap: Mutex<Option<Arc<Snapshot>>>,
    rebuild: tokio::sync::Mutex<()>,
}

impl SeatMaps {
    fn slot(&self, show: &str) -> Arc<Slot> {
        let mut m = self.shows.lock().expect("seat map slots");
        m.entry(show.to_owned()).or_default().clone()
    }

    /// The JSON body of `GET /api/shows/{show}/seats` at `now_ms` (epoch ms).
    pub async fn get(&self, db: &Db, show: &str, now_ms: i64) -> sqlx::Result<Bytes> {
        let slot = self.slot(show);
        let cached = |v| {
            slot.snap
                .lock()
                .expect("seat map")
                .as_ref()
                .filter(|s| s.fresh(v, now_ms))
                .map(|s| s.body.clone())
        };
        if let Some(b) = cached(VERSION.load(Ordering::Acquire)) {
            return Ok(b);
        }
        let _only_one = slot.rebuild.lock().await;
        let version = VERSION.load(Ordering::Acquire);
        if let Some(b) = cached(version) {
            return Ok(b);
        }
        let built = Instant::now();
        let map = crate::holds::seat_map(db, show, now_ms).await?;
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(expires_at) FROM holds WHERE show_id = $1 AND status = 'HELD' AND expires_at > $2",
        )
        .bind(show)
        .bind(now_ms)
        .fetch_one(db)
        .await?;
        let body = Bytes::from(serde_json::to_vec(&map).unwrap_or_default());
        *slot.snap.lock().expect("seat map") = Some(Arc::new(Snapshot {
            version,
            built_ms: now_ms,
            valid_until_ms: next.unwrap_or(i64::MAX),
            built,
            body: body.clone(),
        }));
        Ok(body)
    }
}
