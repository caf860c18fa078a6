//! Seat-map snapshots per show, kept up to date incrementally from the seats' change feed
//! (issue 13 item 6: fans must not wait on the booking core's read side). The map is a hint —
//! the hold's guarded update decides (seed 002: "trusting the cached map makes it worse").
//!
//! - **Change feed.** Every change of a seat's status, hold or deadline is stamped by a trigger
//!   (so no write path can forget it): on PostgreSQL with the writing transaction's id, in a row
//!   of the append-only log `seat_changes` (not on the seat row, so that a hold is a HOT update:
//!   migration `20261205020000_seat_feed_log`); on SQLite in the seat's `change_seq`, the next
//!   number of one counter. A snapshot keeps a cursor and reads only the seats stamped at or
//!   after it ([`poll`]); on PostgreSQL the next cursor is the oldest transaction still running
//!   at the read's snapshot (`pg_snapshot_xmin`), so a change committed later by any node is
//!   read by a later poll. The log is pruned after [`FEED_KEPT_MS`] ([`prune_feed`]); a
//!   snapshot not polled for [`FEED_TRUSTED`] is read whole again instead (PostgreSQL only:
//!   SQLite's feed is never pruned). Each changed seat's row is applied to the snapshot (not a
//!   rebuild); pools (a few rows per show) are re-read with each poll.
//! - **Polls** run at most every [`POLL_INTERVAL`] of real time per show and process, or at once
//!   after a seat write in this process ([`touch`]), so a fan reading after its own hold sees it
//!   (with its token, also while another request polls: [`SeatMaps::wrote`]),
//!   one at a time per show and at least [`MIN_POLL_GAP`] apart; while one runs (or waits out
//!   the gap), others are answered from the current snapshot if its last poll is younger than
//!   [`MAX_STALE`].
//! - **Time-based expiry.** A seat's effective status is computed at render time with the
//!   request's `now` (the injected clock): a hold past its deadline shows free with no write and
//!   no poll. The views are rendered again when `now` passes the earliest deadline in them.
//! - **Rendering** is per section: only the sections with a changed (or lapsed) seat are
//!   serialised again; the overview is rebuilt from per-section counts; the whole map only
//!   when asked for.
//!
//! Every answer says how old its snapshot is ([`Served::age`]: real time since the poll it
//! reflects); the router sends it as `Seat-Map-Age-Ms` and the booking page shows it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use serde_json::{json, Value};

use crate::db::{self, Backend, Db};

/// Real time between two polls of the change feed for one show (250 ms): a change made by
/// another node shows on this node's map within it (plus the poll's own time).
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Real time from one poll of a show's feed to the next at least (20 ms), however often this
/// process writes seats. In the seed rehearsal every hold touched the version, so a poll
/// started as soon as the last one ended, three statements and a rendering of the changed
/// sections each: the pools' read (once per poll, and in pool holds) ran 56,849 times in one
/// run, 31,758 with this gap, the feed itself 9,098 times (about 35 a second in the rush). Only
/// the reader that polls waits out the rest of the gap; the others get the young snapshot, or,
/// when they wrote since it was polled ([`SeatMaps::wrote`]), wait for that poll.
pub const MIN_POLL_GAP: Duration = Duration::from_millis(20);
/// While another request polls a show's feed, the current snapshot is served if its last poll
/// is younger than this (2 s).
pub const MAX_STALE: Duration = Duration::from_secs(2);

/// How long PostgreSQL's change log keeps a row (10 minutes of the database's clock), see
/// [`prune_feed`].
pub const FEED_KEPT_MS: i64 = 10 * 60_000;
/// On PostgreSQL, a snapshot whose last poll is older than this (5 minutes) is read whole again
/// rather than from the change log, which may have been pruned past its cursor (SQLite's feed
/// is never pruned). The margin to [`FEED_KEPT_MS`] covers a transaction that wrote a seat
/// before the poll and committed after it (its log row is stamped at its write), for
/// transactions shorter than 5 minutes.
pub const FEED_TRUSTED: Duration = Duration::from_secs(5 * 60);

static VERSION: AtomicU64 = AtomicU64::new(0);

/// Marks every snapshot of this process due for a poll: call at each write to `seats`, `pools`
/// or `hold_pools`.
pub fn touch() {
    VERSION.fetch_add(1, Ordering::Release);
}

/// A rendered answer and its entity tag: a 64-bit hash of the bytes, made once when they are
/// rendered. Equal bytes have equal tags on every node running the same build (the hash is
/// `std`'s `DefaultHasher` with its fixed keys, which a new Rust release may change: then a
/// fan's revalidation across the upgrade gets the whole answer once). The router sends it as a
/// strong `ETag` and answers a matching `If-None-Match` with `304` (RFC 9110 §13.1.2): in the
/// seed rehearsal 97 % of the fans' map reads were the bytes of the last answer for their URL.
#[derive(Debug, Clone)]
pub struct Tagged {
    /// The JSON answer.
    pub body: Bytes,
    /// The hash of `body`.
    pub tag: u64,
}

impl Tagged {
    fn new(body: Bytes) -> Self {
        use std::hash::Hasher;
        let mut h = std::hash::DefaultHasher::new();
        h.write(&body);
        Self {
            tag: h.finish(),
            body,
        }
    }
}

/// The three views of one snapshot. Sections and the overview are what fans read under a rush,
/// so they are serialised when the snapshot changes; the whole map only when first asked for.
#[derive(Debug, Clone)]
pub struct Views {
    whole_src: Arc<Whole>,
    whole: Arc<std::sync::OnceLock<Tagged>>,
    /// Each section's map, by section name (`?section=`).
    pub sections: Arc<BTreeMap<String, Tagged>>,
    /// The overview (`GET /api/shows/{show}/sections`).
    pub overview: Tagged,
}

impl Views {
    /// The whole map (`GET /api/shows/{show}/seats`), joined once per snapshot from the
    /// sections' serialised seat arrays (no seat is serialised again for it).
    pub fn whole(&self) -> Tagged {
        self.whole
            .get_or_init(|| Tagged::new(self.whole_src.join()))
            .clone()
    }
}

/// What the whole map is made of: the sections' seat arrays (JSON text, in section order, the
/// order of the map's seats) and the figures around them.
#[derive(Debug)]
struct Whole {
    show: String,
    capacity: usize,
    available: usize,
    pools: Value,
    arrays: Vec<Bytes>,
}

impl Whole {
    /// `{"available","capacity","pools","seats","show"}`, keys in the order `serde_json` writes
    /// a map's (sorted), the seats the concatenation of the sections' arrays.
    fn join(&self) -> Bytes {
        let inner: Vec<&[u8]> = self
            .arrays
            .iter()
            .map(|a| a.get(1..a.len().saturating_sub(1)).unwrap_or_default())
            .filter(|a| !a.is_empty())
            .collect();
        let mut out = Vec::with_capacity(inner.iter().map(|a| a.len() + 1).sum::<usize>() + 256);
        out.extend_from_slice(
            format!(
                "{{\"available\":{},\"capacity\":{},\"pools\":{},\"seats\":[",
                self.available, self.capacity, self.pools
            )
            .as_bytes(),
        );
        out.extend_from_slice(&inner.join(&b","[..]));
        out.extend_from_slice(
            format!("],\"show\":{}}}", Value::from(self.show.as_str())).as_bytes(),
        );
        Bytes::from(out)
    }
}

/// What comes before and after a section's seat array in its answer (keys sorted, as
/// `serde_json` writes a map): `{"available":…,"capacity":…,"pools":…,"seats":` and
/// `,"section":…,"show":…}`.
fn section_frame(show: &str, name: &str, c: &Counts, pools: &Value) -> (String, String) {
    let head = format!(
        "{{\"available\":{},\"capacity\":{},\"pools\":{pools},\"seats\":",
        c.available, c.capacity
    );
    let tail = format!(
        ",\"section\":{},\"show\":{}}}",
        Value::from(name),
        Value::from(show)
    );
    (head, tail)
}

/// What a read gets: the views and how old they are.
#[derive(Debug, Clone)]
pub struct Served {
    /// The snapshot's views.
    pub views: Views,
    /// Real time since the poll this snapshot reflects (the map's age shown to the fan).
    pub age: Duration,
    /// The poll this request needed failed or took over [`POLL_WITHIN`]: the views are the
    /// last snapshot's, as old as `age` says.
    pub stale: bool,
    /// That poll found the database unreachable (`crate::error::is_unreachable`): the caller
    /// trips the outage gate (`db::outage`). A poll that was only slow does not.
    pub unreachable: bool,
}

/// A seat's stored status (`seats.status`, whose CHECK allows these three). Kept as an enum:
/// every poll's render compares the statuses of every seat of the show (lapsed holds, the
/// next deadline, the sections' counts), which as strings was a `memcmp` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Free,
    Held,
    Sold,
}

impl Status {
    /// The stored text's status; anything else reads as sold (never offered), which the
    /// table's CHECK rules out.
    fn of(s: &str) -> Self {
        match s {
            "free" => Status::Free,
            "held" => Status::Held,
            _ => Status::Sold,
        }
    }

    /// The status as a JSON string, quotes included.
    fn json(self) -> &'static [u8] {
        match self {
            Status::Free => b"\"free\"",
            Status::Held => b"\"held\"",
            Status::Sold => b"\"sold\"",
        }
    }
}

/// One seat as the snapshot keeps it.
#[derive(Debug, Clone)]
struct Seat {
    id: String,
    section: String,
    price_cents: i64,
    status: Status,
    expires: Option<i64>,
    /// The seat's JSON up to its status's value, `{"id":…,"number":…,"price_cents":…,"row":…,
    /// "section":…,"status":` (keys sorted, as `serde_json` writes a map): the part of a
    /// rendering that never changes, serialised once when the show is loaded. A rush re-renders
    /// a section of 1,400 seats at every poll that changed one of them; building each seat as a
    /// `serde_json::Value` map (six owned keys) cost more than everything else in the poll.
    head: Box<str>,
}

impl Seat {
    /// A seat loaded from the database, its [`Seat::head`] serialised.
    fn new((id, section, row, number, price_cents, status, expires): SeatRow) -> Self {
        let head = format!(
            "{{\"id\":{},\"number\":{number},\"price_cents\":{price_cents},\"row\":{row},\
             \"section\":{},\"status\":",
            Value::from(id.as_str()),
            Value::from(section.as_str()),
        );
        Seat {
            id,
            section,
            price_cents,
            status: Status::of(&status),
            expires,
            head: head.into_boxed_str(),
        }
    }

    /// Status at `now_ms`: a hold past its deadline counts as free.
    fn effective(&self, now_ms: i64) -> Status {
        match self.expires {
            Some(e) if self.status == Status::Held && e <= now_ms => Status::Free,
            _ => self.status,
        }
    }

    /// Appends the seat's JSON object with `status` to `out`: [`Seat::head`], then the status.
    fn write_json(&self, status: Status, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(status.json());
        out.push(b'}');
    }
}

/// Per-section figures of the overview.
#[derive(Debug, Clone, Default)]
struct Counts {
    capacity: usize,
    available: usize,
    held: usize,
    min: i64,
    max: i64,
}

/// A show's snapshot: the seats, the feed's cursor and the rendered views.
#[derive(Debug)]
struct Live {
    show: String,
    seats: Vec<Seat>,
    index: HashMap<String, usize>,
    by_section: BTreeMap<String, Vec<usize>>,
    cursor: i64,
    pools: Value,
    /// The earliest deadline of a live pool hold at the last poll (epoch ms): the pools'
    /// availability changes then, so the next read polls.
    pools_valid_until_ms: i64,
    /// When the read of the last poll began (real time), and the local write version then.
    polled: Instant,
    version: u64,
    sections: BTreeMap<String, Tagged>,
    /// Each section's seat array as JSON text (what the whole map is joined from).
    arrays: BTreeMap<String, Bytes>,
    counts: BTreeMap<String, Counts>,
    views: Option<Views>,
    /// The `now` the views were rendered at, and the earliest deadline after it.
    render_ms: i64,
    valid_until_ms: i64,
}

impl Live {
    fn due(&self, version: u64, now_ms: i64) -> bool {
        self.version != version
            || self.polled.elapsed() >= POLL_INTERVAL
            || now_ms >= self.pools_valid_until_ms
    }

    fn renders(&self, now_ms: i64) -> bool {
        self.views.is_some() && now_ms >= self.render_ms && now_ms < self.valid_until_ms
    }

    /// The views as of the last poll, rendered at `now_ms` (holds lapsed since show free),
    /// marked `stale`: what a reader gets while the database does not answer.
    fn stale(&mut self, now_ms: i64) -> Option<Served> {
        if self.views.is_some() && !self.renders(now_ms) {
            self.render(None, now_ms);
        }
        self.served().map(|s| Served { stale: true, ..s })
    }

    fn served(&self) -> Option<Served> {
        self.views.clone().map(|views| Served {
            views,
            age: self.polled.elapsed(),
            stale: false,
            unreachable: false,
        })
    }

    /// Applies changed seat rows; the sections they are in.
    fn apply(&mut self, rows: Vec<(String, String, Option<i64>)>) -> BTreeSet<String> {
        let mut dirty = BTreeSet::new();
        for (id, status, expires) in rows {
            if let Some(&i) = self.index.get(&id) {
                let status = Status::of(&status);
                let s = &mut self.seats[i];
                if s.status != status || s.expires != expires {
                    (s.status, s.expires) = (status, expires);
                    dirty.insert(s.section.clone());
                }
            }
        }
        dirty
    }

    /// Sections with a hold whose deadline falls in `(render_ms, now_ms]`.
    fn lapsed(&self, now_ms: i64) -> BTreeSet<String> {
        self.seats
            .iter()
            .filter(|s| s.status == Status::Held)
            .filter(|s| matches!(s.expires, Some(e) if e > self.render_ms && e <= now_ms))
            .map(|s| s.section.clone())
            .collect()
    }

    /// Serialises the `dirty` sections again (all when `None`), then the overview, at `now_ms`.
    fn render(&mut self, dirty: Option<&BTreeSet<String>>, now_ms: i64) {
        for (name, idx) in &self.by_section {
            if dirty.is_some_and(|d| !d.contains(name)) && self.sections.contains_key(name) {
                continue;
            }
            // The section's figures first (they come first in its answer), then the answer
            // written once into one buffer, the seat array a slice of it.
            let mut c = Counts {
                capacity: idx.len(),
                min: i64::MAX,
                max: i64::MIN,
                ..Counts::default()
            };
            for seat in idx.iter().map(|i| &self.seats[*i]) {
                match seat.effective(now_ms) {
                    Status::Free => c.available += 1,
                    Status::Held => c.held += 1,
                    Status::Sold => {}
                }
                (c.min, c.max) = (c.min.min(seat.price_cents), c.max.max(seat.price_cents));
            }
            let (head, tail) = section_frame(&self.show, name, &c, &self.pools);
            let mut body = Vec::with_capacity(head.len() + idx.len() * 96 + tail.len() + 2);
            body.extend_from_slice(head.as_bytes());
            let start = body.len();
            body.push(b'[');
            for (n, i) in idx.iter().enumerate() {
                let seat = &self.seats[*i];
                if n > 0 {
                    body.push(b',');
                }
                seat.write_json(seat.effective(now_ms), &mut body);
            }
            body.push(b']');
            let end = body.len();
            body.extend_from_slice(tail.as_bytes());
            let body = Bytes::from(body);
            let array = body.slice(start..end);
            self.sections.insert(name.clone(), Tagged::new(body));
            self.arrays.insert(name.clone(), array);
            self.counts.insert(name.clone(), c);
        }
        let capacity = self.seats.len();
        let available: usize = self.counts.values().map(|c| c.available).sum();
        let overview: Vec<Value> = self
            .counts
            .iter()
            .map(|(name, c)| {
                json!({"id": name, "capacity": c.capacity, "available": c.available,
                       "held": c.held, "price_cents_min": c.min, "price_cents_max": c.max})
            })
            .collect();
        let overview = json!({"show": self.show, "capacity": capacity, "available": available,
                              "sections": overview, "pools": self.pools});
        let whole = Whole {
            show: self.show.clone(),
            capacity,
            available,
            pools: self.pools.clone(),
            arrays: self.arrays.values().cloned().collect(),
        };
        self.views = Some(Views {
            whole_src: Arc::new(whole),
            whole: Arc::default(),
            sections: Arc::new(self.sections.clone()),
            overview: Tagged::new(Bytes::from(
                serde_json::to_vec(&overview).unwrap_or_default(),
            )),
        });
        self.render_ms = now_ms;
        self.valid_until_ms = self
            .seats
            .iter()
            .filter(|s| s.status == Status::Held)
            .filter_map(|s| s.expires.filter(|e| *e > now_ms))
            .min()
            .unwrap_or(i64::MAX);
    }
}

/// Snapshots and their poll locks, per show.
#[derive(Debug, Default)]
pub struct SeatMaps {
    shows: Mutex<HashMap<String, Arc<Slot>>>,
    /// When each fan (by a hash of its admission token) last wrote seats through this process
    /// ([`SeatMaps::wrote`]): its next read gets no snapshot polled before that.
    writes: Mutex<Writes>,
    loads: AtomicU64,
    polls: AtomicU64,
    seats_polled: AtomicU64,
}

/// What a [`SeatMaps`] has read from the database so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCounts {
    /// Whole-show reads (a show's first read on this node).
    pub loads: u64,
    /// Reads of the change feed.
    pub polls: u64,
    /// Changed seat rows those polls read.
    pub seats_polled: u64,
}

#[derive(Debug, Default)]
struct Slot {
    live: Mutex<Option<Live>>,
    refresh: tokio::sync::Mutex<()>,
    /// When the last poll or load failed: for [`RETRY_AFTER_FAILURE`] after it, readers get
    /// the last snapshot (or the error) at once instead of each polling a database that did
    /// not answer, one after another behind `refresh` (a newcomer review: ten concurrent
    /// seat-map reads with PostgreSQL stopped answered 5, 10, … 50 s).
    failed: Mutex<Option<Instant>>,
    /// The views last served from a poll, and when that poll began: what readers get while a
    /// poll is in flight (the poller has the snapshot itself out of `live`) or the database
    /// does not answer.
    last: Mutex<Option<(Views, Instant)>>,
}

impl Slot {
    /// The last views served, marked `stale` when `stale` (age: since their poll).
    fn last_served(&self, stale: bool) -> Option<Served> {
        let g = self.last.lock().expect("seat map last views");
        g.as_ref().map(|(views, polled)| Served {
            views: views.clone(),
            age: polled.elapsed(),
            stale,
            unreachable: false,
        })
    }
}

/// Longest a poll or load of the change feed may take before its readers get the last
/// snapshot instead (a hung database would hold them, and every reader queued behind them,
/// until it answers: a newcomer review measured 58 s).
pub const POLL_WITHIN: Duration = Duration::from_secs(3);

/// How long after a failed poll the readers of a show do not poll again (see `Slot::failed`).
pub const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

impl SeatMaps {
    /// What this node's snapshots have read so far (the incremental feed at work: one load
    /// per show, then only changed seats).
    pub fn read_counts(&self) -> ReadCounts {
        ReadCounts {
            loads: self.loads.load(Ordering::Relaxed),
            polls: self.polls.load(Ordering::Relaxed),
            seats_polled: self.seats_polled.load(Ordering::Relaxed),
        }
    }

    /// The last snapshot of `show`, without asking the database (the outage gate is down):
    /// rendered at `now_ms`, `stale` set; `None` when this node has none.
    pub fn last(&self, show: &str, now_ms: i64) -> Option<Served> {
        let slot = self.slot(show);
        let rendered = {
            let mut live = slot.live.lock().expect("seat map");
            live.as_mut().and_then(|l| l.stale(now_ms))
        };
        rendered.or_else(|| slot.last_served(true))
    }

    /// Notes that the fan reading with `reader` (its admission token, as sent) has just written
    /// seats (a hold or a release answered 2xx): its next read of any map is served from a poll
    /// begun after now, even while another request polls (the others get the young snapshot).
    /// A newcomer review found a fan's own hold missing from its next read in 34 of 100 tries
    /// with 50 other readers: it was served the snapshot of a poll begun before its write.
    /// Notes live in two generations of [`MAX_STALE`] each (no snapshot older is served young):
    /// the older one is dropped whole when the newer one is that old, so a note costs one insert
    /// (pruning a map of every fan's note at each write halved `loadtest bench`'s pool holds).
    pub fn wrote(&self, reader: &str) {
        let mut w = self.writes.lock().expect("seat map writes");
        if w.since.elapsed() >= MAX_STALE {
            w.before = std::mem::take(&mut w.now);
            w.since = Instant::now();
        }
        w.now.insert(reader_key(reader), Instant::now());
    }

    /// When `reader` last wrote ([`SeatMaps::wrote`]), if it did lately.
    fn written_at(&self, reader: Option<&str>) -> Option<Instant> {
        let key = reader_key(reader?);
        let w = self.writes.lock().expect("seat map writes");
        w.now.get(&key).or_else(|| w.before.get(&key)).copied()
    }

    /// Whether this node's last served snapshot of `show` counted fewer than `quantity`
    /// places left in `pool` (no poll, no render; false without a snapshot or such a pool).
    /// A hint for the read before a pool hold ([`crate::inventory::preread::Check::Pool`]),
    /// which then decides from the database: a snapshot saying "enough" sends the hold on
    /// without that read (a hold lapsed since the poll only adds places).
    pub fn pool_short(&self, show: &str, pool: &str, quantity: u32) -> bool {
        let slot = match self.shows.lock().expect("seat map slots").get(show) {
            Some(slot) => slot.clone(),
            None => return false,
        };
        let last = slot.last.lock().expect("seat map last views");
        let Some((views, _)) = last.as_ref() else {
            return false;
        };
        let pools = views.whole_src.pools.as_array();
        pools
            .and_then(|ps| ps.iter().find(|p| p["id"] == pool))
            .and_then(|p| p["available"].as_i64())
            .is_some_and(|left| left < i64::from(quantity))
    }

    fn slot(&self, show: &str) -> Arc<Slot> {
        let mut m = self.shows.lock().expect("seat map slots");
        m.entry(show.to_owned()).or_default().clone()
    }

    /// The views of the seat map of `show` at `now_ms` (epoch ms) and their age; `reader` is
    /// the fan's admission token when it sent one (read-your-writes, [`SeatMaps::wrote`]).
    pub async fn get(
        &self,
        db: &Db,
        show: &str,
        now_ms: i64,
        reader: Option<&str>,
    ) -> sqlx::Result<Served> {
        let arrived = Instant::now();
        let wrote = self.written_at(reader);
        let slot = self.slot(show);
        let version = VERSION.load(Ordering::Acquire);
        let current = || {
            let g = slot.live.lock().expect("seat map");
            g.as_ref()
                .filter(|l| l.renders(now_ms) && !l.due(version, now_ms))
                .and_then(Live::served)
        };
        if let Some(s) = current() {
            return Ok(s);
        }
        let _only_one = match slot.refresh.try_lock() {
            Ok(g) => g,
            Err(_) => {
                // Someone polls: answer with the current snapshot if young (a hint, never a
                // decision; a hold lapsed since its rendering may still show held) rather than
                // queueing every reader behind the poll; but never to a fan who wrote after
                // that snapshot's poll began (it waits for the poll, which then sees it).
                let young = slot
                    .last_served(false)
                    .filter(|s| s.age < MAX_STALE && wrote.is_none_or(|w| s.age < w.elapsed()));
                if let Some(s) = young {
                    return Ok(s);
                }
                slot.refresh.lock().await
            }
        };
        let recently_failed = slot
            .failed
            .lock()
            .expect("seat map failure")
            .is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILURE);
        if recently_failed {
            let live = slot.live.lock().expect("seat map").take();
            return stale(&slot, live, sqlx::Error::PoolTimedOut, now_ms, None);
        }
        let version = VERSION.load(Ordering::Acquire);
        let live = slot.live.lock().expect("seat map").take();
        // SQLite's feed is the seats' own `change_seq`, never pruned: any cursor stays good.
        let trusted =
            |l: &Live| l.polled.elapsed() < FEED_TRUSTED || db::backend(db) == Backend::Sqlite;
        let mut live = match live {
            Some(l) if trusted(&l) => l,
            old => {
                self.loads.fetch_add(1, Ordering::Relaxed);
                match within(load(db, show, version)).await {
                    Ok(l) => l,
                    Err((e, down)) => return stale(&slot, old, e, now_ms, Some(down)),
                }
            }
        };
        let mut dirty = if live.views.is_none() {
            None
        } else {
            Some(BTreeSet::new())
        };
        // A poll that began after this request arrived (while it waited for the lock) saw every
        // write committed before it: readers queued behind one poll share it (no convoy of
        // polls while holds keep touching the version).
        let shared = live.polled >= arrived;
        if (live.due(version, now_ms) && !shared) || dirty.is_none() {
            let mut version = version;
            // At most one poll per MIN_POLL_GAP: this poller waits out the rest of it (readers
            // meanwhile get the young snapshot, as during a poll, unless they wrote since),
            // and its poll then sees every write made until it starts. Only a reader that
            // polls waits: one that a poll begun after its arrival served does not.
            if let Some(wait) = dirty
                .as_ref()
                .and_then(|_| MIN_POLL_GAP.checked_sub(live.polled.elapsed()))
            {
                tokio::time::sleep(wait).await;
                version = VERSION.load(Ordering::Acquire);
            }
            self.polls.fetch_add(1, Ordering::Relaxed);
            let polled = within(poll(db, &mut live, version, now_ms)).await;
            match polled {
                Ok((rows, changed)) => {
                    *slot.failed.lock().expect("seat map failure") = None;
                    self.seats_polled.fetch_add(rows, Ordering::Relaxed);
                    if let Some(d) = dirty.as_mut() {
                        d.extend(changed);
                    }
                }
                Err((e, down)) => return stale(&slot, Some(live), e, now_ms, Some(down)),
            }
        }
        if let Some(d) = dirty.as_mut() {
            if now_ms < live.render_ms {
                // The clock went back: render every section at this `now`.
                dirty = None;
            } else {
                d.extend(live.lapsed(now_ms));
            }
        }
        let rerender = dirty.as_ref().is_none_or(|d| !d.is_empty()) || !live.renders(now_ms);
        if rerender {
            live.render(dirty.as_ref(), now_ms);
        }
        let served = live.served();
        if let Some(s) = &served {
            *slot.last.lock().expect("seat map last views") = Some((s.views.clone(), live.polled));
        }
        *slot.live.lock().expect("seat map") = Some(live);
        served.ok_or_else(|| sqlx::Error::Protocol("seat map not rendered".into()))
    }
}

/// Fans' notes of their writes ([`SeatMaps::wrote`]): since `since`, in `now`; before, in
/// `before` (one generation, dropped whole).
#[derive(Debug)]
struct Writes {
    since: Instant,
    now: HashMap<u64, Instant>,
    before: HashMap<u64, Instant>,
}

impl Default for Writes {
    fn default() -> Self {
        Self {
            since: Instant::now(),
            now: HashMap::new(),
            before: HashMap::new(),
        }
    }
}

/// The key a reader's writes are noted under: a hash of its token as sent (never verified here:
/// a forged one only makes its own reads wait for a poll).
fn reader_key(reader: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    reader.hash(&mut h);
    h.finish()
}

/// A poll or load within [`POLL_WITHIN`]; `Err((error, unreachable))`, a slow one as a pool
/// timeout that is not taken as the database being unreachable.
async fn within<T>(
    f: impl std::future::Future<Output = sqlx::Result<T>>,
) -> Result<T, (sqlx::Error, bool)> {
    match tokio::time::timeout(POLL_WITHIN, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            let down = crate::error::is_unreachable(&e);
            Err((e, down))
        }
        Err(_) => {
            tracing::warn!(within = ?POLL_WITHIN, "seat-map poll too slow; serving the last snapshot");
            Err((sqlx::Error::PoolTimedOut, false))
        }
    }
}

/// After a failed poll or load (`e`; `fresh`: this request's own failure, and whether it found
/// the database unreachable, which marks the show's slot failed now, see `Slot::failed`):
/// keeps `live` and serves its views as they were at the last poll (rendered at `now_ms`, so
/// holds lapsed since show free; else the last views served), `stale` set, the age growing;
/// or `e` when this node has no snapshot.
fn stale(
    slot: &Slot,
    mut live: Option<Live>,
    e: sqlx::Error,
    now_ms: i64,
    fresh: Option<bool>,
) -> sqlx::Result<Served> {
    if fresh.is_some() {
        *slot.failed.lock().expect("seat map failure") = Some(Instant::now());
    }
    let served = live.as_mut().and_then(|l| l.stale(now_ms));
    *slot.live.lock().expect("seat map") = live;
    let served = served.or_else(|| slot.last_served(true)).ok_or(e)?;
    Ok(Served {
        unreachable: fresh.unwrap_or(false),
        ..served
    })
}

/// A seat as [`load`] reads it: `(seat_id, section, seat_row, number, price_cents, status,
/// hold_expires_at ms)`.
type SeatRow = (String, String, i64, i64, i64, String, Option<i64>);

/// A change-feed row: `(next cursor, seat_id, status, hold_expires_at ms)`, the seat columns
/// `None` when nothing changed since the cursor (the `LEFT JOIN` found no seat).
type ChangeRow = (i64, Option<String>, Option<String>, Option<i64>);

/// Reads every seat of `show` once (a node's first read of the show), with the feed's cursor.
async fn load(db: &Db, show: &str, version: u64) -> sqlx::Result<Live> {
    let cursor = cursor_now(db).await?;
    let rows: Vec<SeatRow> = sqlx::query_as(
        "SELECT seat_id, section, seat_row, number, price_cents, status, hold_expires_at FROM seats \
         WHERE show_id = $1 ORDER BY section, seat_row, number",
    )
    .bind(show)
    .fetch_all(db)
    .await?;
    let seats: Vec<Seat> = rows.into_iter().map(Seat::new).collect();
    let index = seats
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.clone(), i))
        .collect();
    let mut by_section: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, s) in seats.iter().enumerate() {
        by_section.entry(s.section.clone()).or_default().push(i);
    }
    Ok(Live {
        show: show.to_owned(),
        seats,
        index,
        by_section,
        cursor,
        pools: Value::Array(Vec::new()),
        pools_valid_until_ms: 0,
        polled: Instant::now(),
        version,
        sections: BTreeMap::new(),
        arrays: BTreeMap::new(),
        counts: BTreeMap::new(),
        views: None,
        render_ms: 0,
        valid_until_ms: 0,
    })
}

/// The cursor a read taken now may continue from: PostgreSQL, the oldest transaction still
/// running (`pg_snapshot_xmin`); SQLite, the counter's next number.
async fn cursor_now(db: &Db) -> sqlx::Result<i64> {
    sqlx::query_scalar(cursor_sql(db::backend(db)))
        .fetch_one(db)
        .await
}

/// A query of one row, one column `next`: the cursor (see [`cursor_now`]).
fn cursor_sql(b: Backend) -> &'static str {
    match b {
        Backend::Postgres => {
            "SELECT CAST(CAST(pg_snapshot_xmin(pg_current_snapshot()) AS TEXT) AS BIGINT) AS next"
        }
        Backend::Sqlite => "SELECT seq + 1 AS next FROM seat_change_counter WHERE id = 1",
    }
}

/// Deletes PostgreSQL's change-log rows older than [`FEED_KEPT_MS`] (by the database's clock,
/// as they were stamped) and returns how many; SQLite keeps its feed on the seat rows: 0. The
/// reconciler calls it at each step.
pub async fn prune_feed(db: &Db) -> sqlx::Result<u64> {
    if db::backend(db) != Backend::Postgres {
        return Ok(0);
    }
    Ok(sqlx::query(
        "DELETE FROM seat_changes \
         WHERE at_ms < CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT) - $1",
    )
    .bind(FEED_KEPT_MS)
    .execute(db)
    .await?
    .rows_affected())
}

/// One read of the change feed: the seats stamped at or after the cursor (with the next cursor
/// from the same snapshot, one statement) and the pools; applied to `live`. The changed
/// sections (all of them when the pools changed), after the number of seat rows read.
async fn poll(
    db: &Db,
    live: &mut Live,
    version: u64,
    now_ms: i64,
) -> sqlx::Result<(u64, BTreeSet<String>)> {
    let started = Instant::now();
    let backend = db::backend(db);
    let changed = match backend {
        // The log's seats first, each then read by the seats' primary key (`LIMIT 1` keeps the
        // lateral read per seat: a generic plan, which cannot see how few rows are past the
        // cursor, otherwise joins the show's every seat). No `DISTINCT`: its generic plan is
        // a hash aggregate sized for a third of the log (`EXPLAIN`), where a seat logged twice
        // costs one more key read; duplicates are dropped below. (The 1.3–1.9 ms a poll that
        // generic plans first cost was JIT compiling, `db::PG_SESSION`, not this.)
        Backend::Postgres => {
            "(SELECT s.seat_id, s.status, s.hold_expires_at FROM \
             (SELECT seat_id FROM seat_changes WHERE show_id = $1 AND change_seq >= $2) ch \
             CROSS JOIN LATERAL (SELECT seat_id, status, hold_expires_at FROM seats \
             WHERE show_id = $1 AND seat_id = ch.seat_id LIMIT 1) s)"
        }
        Backend::Sqlite => {
            "(SELECT seat_id, status, hold_expires_at FROM seats WHERE show_id = $1 AND change_seq >= $2)"
        }
    };
    let sql = format!(
        "WITH c AS ({}) SELECT c.next, s.seat_id, s.status, s.hold_expires_at FROM c \
         LEFT JOIN {changed} s ON TRUE",
        cursor_sql(backend)
    );
    let rows: Vec<ChangeRow> = sqlx::query_as(&sql)
        .bind(&live.show)
        .bind(live.cursor)
        .fetch_all(db)
        .await?;
    // The pools, then per pool one statement for its lapsed places and its next lapse: a hold
    // lapsing after `now_ms` makes the snapshot due then (`Live::due`).
    let (pools, next_lapse) =
        crate::inventory::pools::availability_until(db, &live.show, now_ms).await?;
    let pools = Value::Array(pools);
    live.pools_valid_until_ms = next_lapse.unwrap_or(i64::MAX);
    if let Some((next, ..)) = rows.first() {
        live.cursor = *next;
    }
    let mut changed: Vec<(String, String, Option<i64>)> = rows
        .into_iter()
        .filter_map(|(_, id, st, e)| Some((id?, st?, e)))
        .collect();
    // One snapshot's reads of a seat are alike: keep one.
    changed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    changed.dedup_by(|a, b| a.0 == b.0);
    let read = changed.len() as u64;
    let mut dirty = live.apply(changed);
    if pools != live.pools {
        live.pools = pools;
        dirty.extend(live.by_section.keys().cloned());
    }
    (live.polled, live.version) = (started, version);
    Ok((read, dirty))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seat's pre-serialised JSON reads exactly as `serde_json` writes the same object
    /// (sorted keys, escaped names), free or held, and a lapsed hold reads free.
    #[test]
    fn a_seats_json_is_serde_jsons_own() {
        let row = |status: &str, expires| {
            (
                "Bühne \"A\"-1\u{202e}".to_owned(),
                "Bühne \"A\"".to_owned(),
                -3,
                12,
                4_500,
                status.to_owned(),
                expires,
            )
        };
        for (status, expires, now, shown) in [
            ("free", None, 10, "free"),
            ("held", Some(20), 10, "held"),
            ("held", Some(20), 20, "free"),
            ("sold", None, 10, "sold"),
        ] {
            let seat = Seat::new(row(status, expires));
            let mut out = Vec::new();
            seat.write_json(seat.effective(now), &mut out);
            let want = serde_json::to_vec(&json!({
                "id": seat.id, "section": seat.section, "row": -3, "number": 12,
                "price_cents": 4_500, "status": shown,
            }))
            .expect("json");
            assert_eq!(String::from_utf8(out), String::from_utf8(want));
        }
    }
}
