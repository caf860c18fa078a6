//! How a fan asks for places: its own seat pick from the map (the default), "best available N
//! together" in a section, or N places in a general-admission pool. The shares come from
//! `rush --best-available-share` and `--pool-share`; a fan whose kind has nothing left takes
//! what is (seats, then a pool). Also the back office's pool figures for the checks: a pool
//! booking has no seats; the checks count it here and leave it out of the seat bookings.

use crate::model::{Kind, Target};
use rand::Rng;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// One hold request's ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// These seats.
    Seats(Vec<String>),
    /// The best `quantity` free seats of `section`, side by side unless `allow_split`.
    Best {
        /// Section name.
        section: String,
        /// Seats wanted.
        quantity: usize,
        /// Whether the seats may be apart.
        allow_split: bool,
    },
    /// `quantity` places of `pool`.
    Pool {
        /// Pool id.
        pool: String,
        /// Places wanted.
        quantity: usize,
    },
    /// A seat pick with an interval resource added: one mixed order (`rush --interval-share`).
    WithInterval(Box<Pick>, crate::intervals::Slot),
}

impl Pick {
    /// The hold request body (API.md `POST /api/shows/{show}/holds`).
    pub fn body(&self) -> Value {
        match self {
            Pick::Seats(s) => json!({ "seats": s }),
            Pick::Best {
                section,
                quantity,
                allow_split,
            } => json!({"best_available": {"section": section, "quantity": quantity,
                                           "allow_split": allow_split}}),
            Pick::Pool { pool, quantity } => json!({"pool": pool, "quantity": quantity}),
            Pick::WithInterval(seats, slot) => {
                let mut body = seats.body();
                slot.add_to(&mut body);
                body
            }
        }
    }

    /// This pick with `slot` added when it is a seat pick (named or best available); a pool
    /// pick stays as it is (the checks count a pool booking's places from its amount).
    pub fn with_interval(self, slot: Option<&crate::intervals::Slot>) -> Pick {
        match (self, slot) {
            (p @ (Pick::Seats(_) | Pick::Best { .. }), Some(s)) => {
                Pick::WithInterval(Box::new(p), s.clone())
            }
            (p, _) => p,
        }
    }

    /// The seats named in the request (empty for best available and pools: the answer names them).
    pub fn seats(&self) -> Vec<String> {
        match self {
            Pick::Seats(s) => s.clone(),
            Pick::WithInterval(p, _) => p.seats(),
            _ => Vec::new(),
        }
    }
}

/// A seat-map or overview answer as a fan reads it, borrowed from the answer's bytes
/// (`GET /api/shows/{show}/seats?section=` carries `seats`, the overview
/// `GET /api/shows/{show}/sections` carries `sections`; both carry `pools`). Typed and borrowed
/// rather than a `serde_json::Value`: in the seed rehearsal the load generator spent about a
/// third of the machine's CPU reading 125 kB section maps into trees of owned maps, CPU the
/// services it measures then lacked.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Map<'a> {
    #[serde(borrow, default)]
    seats: Vec<MapSeat<'a>>,
    #[serde(borrow, default)]
    sections: Option<Vec<MapSection<'a>>>,
    #[serde(borrow, default)]
    pools: Vec<MapPool<'a>>,
}

#[derive(Debug, serde::Deserialize)]
struct MapSeat<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    section: Cow<'a, str>,
    /// A number in the generated venues, a name ("AA") in some venue files.
    row: Value,
    number: u64,
    #[serde(borrow)]
    status: Cow<'a, str>,
}

#[derive(Debug, serde::Deserialize)]
struct MapSection<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(default)]
    available: u64,
    #[serde(default)]
    held: u64,
}

#[derive(Debug, serde::Deserialize)]
struct MapPool<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(default)]
    available: u64,
}

impl<'a> Map<'a> {
    /// Reads an answer's body; `None` when it is not a map (an error page, a cut-off body, not
    /// UTF-8). The body is checked as UTF-8 once, then read as text: read as bytes,
    /// `serde_json` checks every borrowed string again, one call per seat field.
    pub fn parse(body: &'a [u8]) -> Option<Self> {
        serde_json::from_str(std::str::from_utf8(body).ok()?).ok()
    }

    /// This map with every borrowed string copied: a map that outlives its answer's bytes
    /// ([`Maps`]).
    fn into_owned(self) -> Map<'static> {
        let own = |c: Cow<'a, str>| Cow::Owned(c.into_owned());
        Map {
            seats: self
                .seats
                .into_iter()
                .map(|s| MapSeat {
                    id: own(s.id),
                    section: own(s.section),
                    row: s.row,
                    number: s.number,
                    status: own(s.status),
                })
                .collect(),
            sections: self.sections.map(|secs| {
                secs.into_iter()
                    .map(|s| MapSection {
                        id: own(s.id),
                        available: s.available,
                        held: s.held,
                    })
                    .collect()
            }),
            pools: self
                .pools
                .into_iter()
                .map(|p| MapPool {
                    id: own(p.id),
                    available: p.available,
                })
                .collect(),
        }
    }

    /// Free seats per section: the overview's `available`, else counted from the seats.
    fn free_by_section(&self) -> BTreeMap<&str, usize> {
        let mut out = BTreeMap::new();
        if let Some(secs) = &self.sections {
            for s in secs.iter().filter(|s| s.available > 0) {
                out.insert(
                    s.id.as_ref(),
                    usize::try_from(s.available).unwrap_or(usize::MAX),
                );
            }
            return out;
        }
        for s in self.seats.iter().filter(|s| s.status == "free") {
            *out.entry(s.section.as_ref()).or_default() += 1;
        }
        out
    }

    /// The section a seat-picking fan opens from the overview: the first section with a free
    /// seat half the time (fans crowd towards the front), else any section with a free seat;
    /// `None` when no section has one.
    pub fn section_to_open(&self) -> Option<String> {
        let open: Vec<&str> = self.free_by_section().into_keys().collect();
        let mut rng = rand::thread_rng();
        if open.is_empty() {
            None
        } else if rng.gen_bool(0.5) {
            Some(open[0].to_owned())
        } else {
            Some(open[rng.gen_range(0..open.len())].to_owned())
        }
    }

    /// Whether the overview shows held seats (they may lapse and be sold again).
    pub fn any_held(&self) -> bool {
        self.sections
            .as_ref()
            .is_some_and(|a| a.iter().any(|s| s.held > 0))
    }

    /// The fan's ways to pick from this map; the seats' rows are read once for every pick.
    pub fn choices(&self) -> Choices<'_, 'a> {
        Choices {
            map: self,
            rows: Rows::of(self),
        }
    }
}

/// The maps the fans read, each parsed once per distinct answer: the last answer of each URL
/// kept with its parsed map, and an answer byte for byte the same as the kept one (the booking
/// core serves one serialised body per snapshot and section, `booking-core` `seatmap::Views`)
/// reuses that map instead of parsing it again. Each fan still fetches every map it reads (the
/// services' work is unchanged) and picks from exactly what it was sent; only the load
/// generator's own repeated parsing goes. In the seed rehearsal (`rush --profile seed`) the
/// generator's runtime took two thirds of the process's CPU samples (the services' runtime a
/// quarter), mostly `serde_json` reading 125 kB section maps: 40,000 fans with one browser each
/// are played by two CPUs that the services being measured share.
#[derive(Debug, Default)]
pub struct Maps {
    last: std::sync::Mutex<std::collections::HashMap<String, Arc<ReadMap>>>,
    parsed: AtomicU64,
    reused: AtomicU64,
    not_modified: AtomicU64,
}

/// A map answer's bytes and the map read from them.
#[derive(Debug)]
pub struct ReadMap {
    body: bytes::Bytes,
    map: Map<'static>,
}

impl ReadMap {
    /// The map.
    pub fn map(&self) -> &Map<'static> {
        &self.map
    }
}

impl Maps {
    /// The process's one cache (every fan of a run, every run's URLs apart).
    pub fn shared() -> &'static Maps {
        static MAPS: std::sync::OnceLock<Maps> = std::sync::OnceLock::new();
        MAPS.get_or_init(Maps::default)
    }

    /// The map of `body`, the answer of `url`: the kept one when `body` equals the last
    /// answer kept for `url`, else parsed ([`Map::parse`]) and kept. `None` when `body` is not
    /// a map.
    pub fn read(&self, url: &str, body: bytes::Bytes) -> Option<Arc<ReadMap>> {
        let kept = self.lock().get(url).cloned();
        if let Some(k) = kept.filter(|k| k.body == body) {
            self.reused.fetch_add(1, Ordering::Relaxed);
            return Some(k);
        }
        let map = Map::parse(&body)?.into_owned();
        self.parsed.fetch_add(1, Ordering::Relaxed);
        let read = Arc::new(ReadMap { body, map });
        self.lock().insert(url.to_owned(), read.clone());
        Some(read)
    }

    /// `(parsed, reused, not_modified)`: answers read, answers that were the same bytes as the
    /// kept one, and `304`s answered to a fan's own copy ([`Kept`]).
    pub fn counts(&self) -> (u64, u64, u64) {
        (
            self.parsed.load(Ordering::Relaxed),
            self.reused.load(Ordering::Relaxed),
            self.not_modified.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Arc<ReadMap>>> {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One fan's copies of the maps it read, by URL, with their `ETag`s: its browser's HTTP cache.
/// The booking core answers the seat map and its overview `Cache-Control: no-cache` with an
/// `ETag`, so a browser asks again each time with `If-None-Match` and shows its copy on `304`;
/// so does the fan here. A copy is kept weakly: while the map is alive in the process (the
/// latest answer of its URL, [`Maps`], or another fan's) the fan revalidates it; once dropped
/// the fan asks without a tag and gets the whole map, as a browser whose cache let it go. So
/// the generator never sends fewer full reads than browsers would, and its memory stays what
/// the maps being read take, not one parsed 125 kB section per waiting fan.
#[derive(Debug, Default)]
pub struct Kept {
    /// URL → (`ETag`, the map). The tag is copied out of the answer: a `HeaderValue` parsed by
    /// the client is a slice of its connection's read buffer and kept that buffer (the 125 kB
    /// map and more) alive: 40,000 fans' tags used up the machine's 24 GB.
    by_url: std::collections::HashMap<String, (String, Weak<ReadMap>)>,
}

impl Kept {
    /// `GET url` as `endpoint`, revalidating this fan's copy: the map, from the answer or from
    /// the copy on `304`; `None` on an error or a non-map answer. The copy is not held while
    /// the request waits for its turn among the calls in flight: it is looked up again on
    /// `304`, and asked for whole once more if it went meanwhile.
    pub async fn get(
        &mut self,
        stats: &crate::stats::Stats,
        endpoint: &'static str,
        client: &reqwest::Client,
        url: &str,
    ) -> Option<Arc<ReadMap>> {
        let mut req = client.get(url);
        let tag = self
            .by_url
            .get(url)
            .filter(|(_, map)| map.strong_count() > 0)
            .map(|(tag, _)| tag.clone());
        if let Some(tag) = tag {
            req = req.header(reqwest::header::IF_NONE_MATCH, tag);
        }
        let (status, body, headers) = crate::calls::call_bytes(stats, endpoint, req).await.ok()?;
        if status == reqwest::StatusCode::NOT_MODIFIED {
            Maps::shared().not_modified.fetch_add(1, Ordering::Relaxed);
            if let Some(map) = self.by_url.get(url).and_then(|(_, m)| m.upgrade()) {
                return Some(map);
            }
            self.by_url.remove(url);
            let again = crate::calls::call_bytes(stats, endpoint, client.get(url)).await;
            return match again.ok()? {
                (s, body, headers) if s.is_success() => self.keep(url, body, &headers),
                _ => None,
            };
        }
        if !status.is_success() {
            return None;
        }
        self.keep(url, body, &headers)
    }

    /// Reads a `200`'s map ([`Maps::read`]) and keeps a weak copy of it under its `ETag`.
    fn keep(
        &mut self,
        url: &str,
        body: bytes::Bytes,
        headers: &reqwest::header::HeaderMap,
    ) -> Option<Arc<ReadMap>> {
        let read = Maps::shared().read(url, body)?;
        match headers.get(reqwest::header::ETAG) {
            Some(tag) if tag.to_str().is_ok() => {
                let tag = tag.to_str().unwrap_or_default().to_owned();
                self.by_url
                    .insert(url.to_owned(), (tag, Arc::downgrade(&read)));
            }
            _ => {
                self.by_url.remove(url);
            }
        }
        Some(read)
    }
}

/// One map made ready for several picks (a fan's first choice and its alternatives).
pub struct Choices<'m, 'a> {
    map: &'m Map<'a>,
    rows: Rows<'m>,
}

impl Choices<'_, '_> {
    /// What a fan of `kind` asks for (`n` places, attempt from 1); `None` when nothing is
    /// left anywhere. A kind with nothing left falls back to seats, then to a pool.
    pub fn choose(&self, kind: Kind, n: usize, attempt: u32) -> Option<Pick> {
        let first = match kind {
            Kind::Seats => self.seat_pick(n),
            Kind::Best => self.best_pick(n, attempt),
            Kind::Pool => self.pool_pick(n),
        };
        first
            .or_else(|| self.seat_pick(n))
            .or_else(|| self.pool_pick(n))
    }

    fn seat_pick(&self, n: usize) -> Option<Pick> {
        (1..=n)
            .rev()
            .find_map(|k| self.rows.pick(k))
            .map(Pick::Seats)
    }

    fn best_pick(&self, n: usize, attempt: u32) -> Option<Pick> {
        let free = self.map.free_by_section();
        let roomy: Vec<&str> = free
            .iter()
            .filter(|(_, &f)| f >= n)
            .map(|(s, _)| *s)
            .collect();
        let mut rng = rand::thread_rng();
        let (section, quantity) = if roomy.is_empty() {
            let (s, f) = free.iter().max_by_key(|(_, &f)| f)?;
            (s.to_string(), n.min(*f))
        } else {
            // Like seat pickers, fans crowd towards the first (dearest, nearest) sections.
            let i = if rng.gen_bool(0.6) {
                0
            } else {
                rng.gen_range(0..roomy.len())
            };
            (roomy[i].to_owned(), n)
        };
        Some(Pick::Best {
            section,
            quantity,
            allow_split: attempt > 1,
        })
    }

    fn pool_pick(&self, n: usize) -> Option<Pick> {
        let open: Vec<&MapPool> = self.map.pools.iter().filter(|p| p.available > 0).collect();
        if open.is_empty() {
            return None;
        }
        let p = open[rand::thread_rng().gen_range(0..open.len())];
        Some(Pick::Pool {
            pool: p.id.to_string(),
            quantity: n.min(usize::try_from(p.available).unwrap_or(n)),
        })
    }
}

/// Seat ids `skip..skip + take` of a show's map, in map order (section, row, number): the hot
/// block that `bench` and `calibrate` aim every hold at.
pub async fn hot_block(
    client: &reqwest::Client,
    booking: &str,
    show: &str,
    skip: usize,
    take: usize,
) -> anyhow::Result<Vec<String>> {
    let map: Value = client
        .get(format!("{booking}/api/shows/{show}/seats"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(map["seats"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(String::from))
        .skip(skip)
        .take(take)
        .collect())
}

/// Pool figures from the back office at the end of the run.
#[derive(Debug, Default, Clone)]
pub struct PoolOffice {
    /// PAID holds without seats (pool holds): each has a booking (made in the same transaction).
    pub paid_holds: HashSet<String>,
    /// Places in those holds (`amount_cents` / the pool's price).
    pub paid_places: u64,
    /// Sum of the pools' `capacity + oversell`.
    pub capacity: u64,
    /// Sum of the pools' `available` in the seat map.
    pub map_available: u64,
    /// Sum of the pools' `taken` counters (drift endpoint).
    pub taken: u64,
    /// Pools whose counter drifts from its rows.
    pub drifting: u64,
}

async fn get(client: &reqwest::Client, url: String, token: &str) -> anyhow::Result<Value> {
    Ok(client
        .get(url)
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?
        .json::<Value>()
        .await?)
}

/// Every PAID hold of the show, through the paged admin listing.
async fn paid_holds(
    client: &reqwest::Client,
    t: &Target,
    token: &str,
) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for page in 0.. {
        let url = format!(
            "{}/admin/shows/{}/holds?status=PAID&limit=500&offset={}",
            t.booking,
            t.event,
            page * 500
        );
        let body = get(client, url, token).await?;
        let holds = body["holds"].as_array().cloned().unwrap_or_default();
        let n = holds.len();
        out.extend(holds);
        if n < 500 {
            break;
        }
    }
    Ok(out)
}

/// Hold ids of the PAID pool holds (holds without seats): bookings the seat list leaves out.
pub async fn paid_pool_holds(
    client: &reqwest::Client,
    t: &Target,
    token: &str,
) -> anyhow::Result<HashSet<String>> {
    Ok(paid_holds(client, t, token)
        .await?
        .iter()
        .filter(|h| h["seats"].as_array().is_none_or(Vec::is_empty))
        .filter_map(|h| h["hold_id"].as_str().map(str::to_owned))
        .collect())
}

/// The pool figures: PAID pool holds and their places, the seat map's pools (`map`) and the
/// drift endpoint's counters. Places are `amount_cents` / price, which needs one price for
/// every pool (the spawned stack and the venue files have one pool).
pub async fn pool_office(
    client: &reqwest::Client,
    t: &Target,
    token: &str,
    map: &Value,
) -> anyhow::Result<PoolOffice> {
    let pools = map["pools"].as_array().cloned().unwrap_or_default();
    let mut office = PoolOffice::default();
    if pools.is_empty() {
        return Ok(office);
    }
    for p in &pools {
        office.capacity +=
            p["capacity"].as_u64().unwrap_or(0) + p["oversell"].as_u64().unwrap_or(0);
        office.map_available += p["available"].as_u64().unwrap_or(u64::MAX / 4);
    }
    let price = pools
        .iter()
        .filter_map(|p| p["price_cents"].as_u64())
        .min()
        .unwrap_or(1)
        .max(1);
    for h in paid_holds(client, t, token).await? {
        if h["seats"].as_array().is_none_or(Vec::is_empty) {
            office.paid_places += h["amount_cents"].as_u64().unwrap_or(0).div_ceil(price);
            if let Some(id) = h["hold_id"].as_str() {
                office.paid_holds.insert(id.to_owned());
            }
        }
    }
    let drift = get(
        client,
        format!("{}/admin/shows/{}/pools/drift", t.booking, t.event),
        token,
    )
    .await?;
    office.drifting = drift["drifting"].as_u64().unwrap_or(u64::MAX);
    office.taken = drift["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p["taken"].as_u64().unwrap_or(u64::MAX / 4))
        .sum();
    Ok(office)
}

/// A seat-map answer's seats by row, borrowed from the parsed answer (built once per answer
/// and tried for several party sizes and alternatives: the seed rehearsal's fans spent most of
/// the load generator's CPU re-reading 1,400-seat sections for every size and alternative).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum RowKey<'m> {
    Number(i64),
    Name(&'m str),
}

struct Rows<'m> {
    /// Per row, in map order: (number, id, free), sorted by number.
    rows: Vec<Vec<(u64, &'m str, bool)>>,
}

impl<'m> Rows<'m> {
    fn of(map: &'m Map<'_>) -> Self {
        let mut at: std::collections::HashMap<(&str, RowKey), usize> = Default::default();
        let mut rows: Vec<Vec<(u64, &'m str, bool)>> = Vec::new();
        let mut last: Option<((&str, RowKey), usize)> = None;
        for s in &map.seats {
            let row = match &s.row {
                Value::Number(n) => RowKey::Number(n.as_i64().unwrap_or(i64::MIN)),
                Value::String(r) => RowKey::Name(r.as_str()),
                _ => RowKey::Number(i64::MIN),
            };
            let seat = (s.number, s.id.as_ref(), s.status == "free");
            let key = (s.section.as_ref(), row);
            // The service sends its seats by section and row, so a seat is nearly always in
            // the row of the seat before it: no hashing then (SipHash over every seat of a
            // 1,400-seat section was a tenth of the fans' CPU in the seed rehearsal).
            let i = match last {
                Some((k, i)) if k == key => i,
                _ => *at.entry(key).or_insert_with(|| {
                    rows.push(Vec::new());
                    rows.len() - 1
                }),
            };
            last = Some((key, i));
            rows[i].push(seat);
        }
        for r in &mut rows {
            r.sort_unstable();
        }
        Self { rows }
    }

    /// `n` adjacent free seats: among the first 40 blocks (in map order) 70 % of the time
    /// (fans crowd towards the front: realistic conflicts), else any block.
    fn pick(&self, n: usize) -> Option<Vec<String>> {
        if n == 0 {
            return None;
        }
        let blocks = || {
            self.rows
                .iter()
                .flat_map(move |row| row.windows(n).filter(|w| w.iter().all(|s| s.2)))
        };
        let total = blocks().count();
        let front = total.min(40);
        if front == 0 {
            return None;
        }
        let mut rng = rand::thread_rng();
        let i = if rng.gen_bool(0.7) {
            rng.gen_range(0..front)
        } else {
            rng.gen_range(0..total)
        };
        blocks()
            .nth(i)
            .map(|w| w.iter().map(|s| s.1.to_owned()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Shares;

    fn map() -> Value {
        json!({"seats": [
            {"id": "A-1-1", "section": "A", "row": 1, "number": 1, "status": "free"},
            {"id": "A-1-2", "section": "A", "row": 1, "number": 2, "status": "sold"},
        ], "pools": [{"id": "FLOOR", "price_cents": 6500, "capacity": 5, "oversell": 0, "available": 3}]})
    }

    fn choose(map: &Value, kind: Kind, n: usize) -> Option<Pick> {
        let bytes = serde_json::to_vec(map).unwrap();
        let map = Map::parse(&bytes).expect("a map");
        map.choices().choose(kind, n, 1)
    }

    /// An answer the same bytes as the last one kept for its URL is not parsed again; a changed
    /// answer is, and the fan picks from what it was sent (the seat sold in between is not
    /// picked); another URL keeps its own; a body that is not a map is no map.
    #[test]
    fn a_map_is_parsed_once_per_distinct_answer() {
        let maps = Maps::default();
        let first = bytes::Bytes::from(serde_json::to_vec(&map()).unwrap());
        let a = maps.read("u", first.clone()).expect("a map");
        let b = maps.read("u", first.clone()).expect("a map");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(maps.counts(), (1, 1, 0));
        let mut sold = map();
        sold["seats"][0]["status"] = json!("sold");
        let changed = bytes::Bytes::from(serde_json::to_vec(&sold).unwrap());
        let c = maps.read("u", changed).expect("a map");
        assert!(!Arc::ptr_eq(&a, &c));
        // No seat free in the changed answer: the fan falls back to the pool.
        assert_eq!(
            c.map().choices().choose(Kind::Seats, 1, 1),
            Some(Pick::Pool {
                pool: "FLOOR".into(),
                quantity: 1
            })
        );
        assert_eq!(
            a.map().choices().choose(Kind::Seats, 1, 1),
            Some(Pick::Seats(vec!["A-1-1".into()]))
        );
        let other = maps.read("v", first).expect("a map");
        assert!(!Arc::ptr_eq(&a, &other));
        assert_eq!(maps.counts(), (3, 1, 0));
        assert!(maps
            .read("u", bytes::Bytes::from_static(b"<html>"))
            .is_none());
        assert_eq!(maps.counts(), (3, 1, 0));
    }

    #[test]
    fn each_kind_asks_its_way_and_falls_back() {
        let m = map();
        assert_eq!(
            choose(&m, Kind::Pool, 4),
            Some(Pick::Pool {
                pool: "FLOOR".into(),
                quantity: 3
            })
        );
        assert_eq!(
            choose(&m, Kind::Seats, 2),
            Some(Pick::Seats(vec!["A-1-1".into()]))
        );
        let best = choose(&m, Kind::Best, 2).unwrap();
        assert_eq!(best.body()["best_available"]["quantity"], 1);
        assert_eq!(best.body()["best_available"]["section"], "A");
        let none_left =
            json!({"seats": [], "pools": [{"id": "FLOOR", "available": 0, "capacity": 5}]});
        assert_eq!(choose(&none_left, Kind::Best, 1), None);
        let only_pool = json!({"seats": [], "pools": [{"id": "FLOOR", "available": 2}]});
        assert!(matches!(
            choose(&only_pool, Kind::Seats, 1),
            Some(Pick::Pool { .. })
        ));
    }

    #[test]
    fn adjacent_seats_are_found_in_named_and_numbered_rows_with_escaped_ids() {
        // Row names ("AA") and numbers; an id with an escape is read (not borrowed) whole.
        let m = json!({"seats": [
            {"id": "B-AA-2", "section": "B", "row": "AA", "number": 2, "status": "free"},
            {"id": "B-AA-1", "section": "B", "row": "AA", "number": 1, "status": "free"},
            {"id": "B-7-1", "section": "B", "row": 7, "number": 1, "status": "free"},
            {"id": "B-7-2", "section": "B", "row": 7, "number": 2, "status": "sold"},
        ]});
        assert_eq!(
            choose(&m, Kind::Seats, 2),
            Some(Pick::Seats(vec!["B-AA-1".into(), "B-AA-2".into()]))
        );
        let escaped = json!({"seats": [
            {"id": "B-\"1", "section": "B", "row": 7, "number": 1, "status": "free"}]});
        assert_eq!(
            choose(&escaped, Kind::Seats, 1),
            Some(Pick::Seats(vec!["B-\"1".into()]))
        );
    }

    #[test]
    fn a_row_met_again_after_another_is_still_one_row() {
        // Seats out of the service's order: row 1, row 2, row 1 again, then a row 1 of
        // another section; the pair in A's row 1 is found, C's seat stays apart.
        let m = json!({"seats": [
            {"id": "A-1-1", "section": "A", "row": 1, "number": 1, "status": "free"},
            {"id": "A-2-1", "section": "A", "row": 2, "number": 1, "status": "sold"},
            {"id": "A-1-2", "section": "A", "row": 1, "number": 2, "status": "free"},
            {"id": "C-1-3", "section": "C", "row": 1, "number": 3, "status": "free"},
        ]});
        assert_eq!(
            choose(&m, Kind::Seats, 2),
            Some(Pick::Seats(vec!["A-1-1".into(), "A-1-2".into()]))
        );
        assert!(Map::parse(b"{\"seats\": [], \"x\": \"\xff\"}").is_none());
    }

    #[test]
    fn the_overview_names_open_sections_and_held_seats() {
        let body = serde_json::to_vec(&json!({"sections": [
            {"id": "A", "available": 0, "held": 3},
            {"id": "B", "available": 0, "held": 0}], "pools": []}))
        .unwrap();
        let overview = Map::parse(&body).unwrap();
        assert_eq!(overview.section_to_open(), None);
        assert!(overview.any_held());
        assert!(Map::parse(b"<html>").is_none());
    }

    #[test]
    fn shares_draw_every_kind() {
        let all_pool = Shares {
            best_available: 0.0,
            pool: 1.0,
            interval: 0.0,
        };
        assert_eq!(all_pool.draw(), Kind::Pool);
        assert_eq!(Shares::default().draw(), Kind::Seats);
    }
}
