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
//! Rebuilds are single-flight per show. While one is in flight, other requests are answered with
//! the current snapshot if it is younger than [`MAX_STALE`]; a request that finds none usable
//! waits, and then takes the snapshot built after it arrived instead of rebuilding
//! again (under a rush every hold bumps the version, so re-checking the version would make each
//! waiter in line read the whole show once more).
//!
//! One snapshot serves three views, each serialised once per rebuild: the whole map, one
//! section's seats (`?section=`) and the section overview (`GET /api/shows/{show}/sections`), so
//! a 20,000-seat venue is not sent whole to every fan (issue 7's seed rehearsal).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;

use crate::db::Db;

/// Real-time age after which a snapshot is rebuilt even without a local write (250 ms).
pub const MAX_AGE: Duration = Duration::from_millis(250);
/// While another request rebuilds a show's map, a snapshot finished less than this ago is
/// served as it is (2 s; a request with no rebuild in flight always gets a fresh map, so a fan
/// reading after its own write sees it).
pub const MAX_STALE: Duration = Duration::from_secs(2);

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
    /// When its rebuild finished (real time).
    done: Instant,
    /// The three views of this snapshot.
    views: Views,
}

/// One seat-map snapshot serialised three ways. The overview and the sections are what fans read
/// under a rush, so they are serialised at the rebuild; the whole map only when first asked for.
#[derive(Debug, Clone)]
pub struct Views {
    map: Arc<serde_json::Value>,
    whole: Arc<std::sync::OnceLock<Bytes>>,
    /// Each section's map, by section name (`?section=`).
    pub sections: Arc<BTreeMap<String, Bytes>>,
    /// The overview (`GET /api/shows/{show}/sections`).
    pub overview: Bytes,
}

impl Views {
    /// The whole map (`GET /api/shows/{show}/seats`), serialised once per snapshot.
    pub fn whole(&self) -> Bytes {
        self.whole
            .get_or_init(|| Bytes::from(serde_json::to_vec(&*self.map).unwrap_or_default()))
            .clone()
    }

    /// Builds the views of a map shaped like [`crate::inventory::holds::seat_map`]'s answer.
    pub fn of(map: serde_json::Value) -> Self {
        use serde_json::{json, Value};
        let show = &map["show"];
        let pools = &map["pools"];
        let mut by_section: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
        for seat in map["seats"].as_array().into_iter().flatten() {
            let sec = seat["section"].as_str().unwrap_or_default().to_owned();
            by_section.entry(sec).or_default().push(seat);
        }
        let free = |seats: &[&Value]| seats.iter().filter(|s| s["status"] == "free").count();
        let sections = by_section
            .iter()
            .map(|(name, seats)| {
                let body = json!({"show": show, "section": name, "capacity": seats.len(),
                                  "available": free(seats), "seats": seats, "pools": pools});
                (
                    name.clone(),
                    Bytes::from(serde_json::to_vec(&body).unwrap_or_default()),
                )
            })
            .collect();
        let overview: Vec<Value> = by_section
            .iter()
            .map(|(name, seats)| {
                let prices = seats.iter().filter_map(|s| s["price_cents"].as_i64());
                let (lo, hi) = prices.fold((i64::MAX, i64::MIN), |(l, h), p| (l.min(p), h.max(p)));
                let held = seats.iter().filter(|s| s["status"] == "held").count();
                json!({"id": name, "capacity": seats.len(), "available": free(seats),
                       "held": held, "price_cents_min": lo, "price_cents_max": hi})
            })
            .collect();
        let overview = json!({"show": show, "capacity": map["capacity"],
                              "available": map["available"], "sections": overview, "pools": pools});
        let overview = Bytes::from(serde_json::to_vec(&overview).unwrap_or_default());
        Self {
            map: Arc::new(map),
            whole: Arc::default(),
            sections: Arc::new(sections),
            overview,
        }
    }
}

impl Snapshot {
    fn fresh(&self, version: u64, now_ms: i64) -> bool {
        self.version == version
            && now_ms >= self.built_ms
            && now_ms < self.valid_until_ms
            && self.built.elapsed() < MAX_AGE
    }

    /// Young enough to answer with while a rebuild is in flight.
    fn usable_stale(&self, now_ms: i64) -> bool {
        now_ms >= self.built_ms && now_ms < self.valid_until_ms && self.done.elapsed() < MAX_STALE
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

    /// The views of the seat map of `show` at `now_ms` (epoch ms).
    pub async fn get(&self, db: &Db, show: &str, now_ms: i64) -> sqlx::Result<Views> {
        let arrived = Instant::now();
        let slot = self.slot(show);
        let current = || slot.snap.lock().expect("seat map").clone();
        if let Some(s) = current().filter(|s| s.fresh(VERSION.load(Ordering::Acquire), now_ms)) {
            return Ok(s.views.clone());
        }
        // Someone is rebuilding: under a rush, answer with the current snapshot if it is young
        // (a hint, never a decision) rather than queueing every reader behind the rebuild.
        let (_only_one, waited) = match slot.rebuild.try_lock() {
            Ok(g) => (g, false),
            Err(_) => {
                if let Some(s) = current().filter(|s| s.usable_stale(now_ms)) {
                    return Ok(s.views.clone());
                }
                (slot.rebuild.lock().await, true)
            }
        };
        let version = VERSION.load(Ordering::Acquire);
        // Still fresh, or built after this request arrived, or just finished by the rebuild
        // this request waited for (young enough to serve, as above).
        if let Some(s) = current().filter(|s| {
            s.fresh(version, now_ms)
                || (s.built >= arrived && now_ms >= s.built_ms && now_ms < s.valid_until_ms)
                || (waited && s.usable_stale(now_ms))
        }) {
            return Ok(s.views.clone());
        }
        let built = Instant::now();
        let map = crate::inventory::holds::seat_map(db, show, now_ms).await?;
        let next: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(expires_at) FROM holds WHERE show_id = $1 AND status = 'HELD' AND expires_at > $2",
        )
        .bind(show)
        .bind(now_ms)
        .fetch_one(db)
        .await?;
        let views = Views::of(map);
        *slot.snap.lock().expect("seat map") = Some(Arc::new(Snapshot {
            version,
            built_ms: now_ms,
            valid_until_ms: next.unwrap_or(i64::MAX),
            built,
            done: Instant::now(),
            views: views.clone(),
        }));
        Ok(views)
    }
}
