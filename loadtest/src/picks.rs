//! How a fan asks for places: its own seat pick from the map (the default), "best available N
//! together" in a section, or N places in a general-admission pool. The shares come from
//! `rush --best-available-share` and `--pool-share`; a fan whose kind has nothing left takes
//! what is (seats, then a pool). Also the back office's pool figures for the checks: a pool
//! booking has no seats; the checks count it here and leave it out of the seat bookings.

use crate::model::{Kind, Target};
use rand::Rng;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

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

/// Free seats per section in a seat-map answer, or in the section overview
/// (`GET /api/shows/{show}/sections`, whose `sections` carry `available`).
fn free_by_section(map: &Value) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    if let Some(secs) = map["sections"].as_array() {
        for s in secs {
            if let (Some(id), Some(a)) = (s["id"].as_str(), s["available"].as_u64()) {
                if a > 0 {
                    out.insert(id.to_owned(), usize::try_from(a).unwrap_or(usize::MAX));
                }
            }
        }
        return out;
    }
    for s in map["seats"].as_array().into_iter().flatten() {
        if s["status"] == "free" {
            if let Some(sec) = s["section"].as_str() {
                *out.entry(sec.to_owned()).or_default() += 1;
            }
        }
    }
    out
}

fn seat_pick(map: &Value, n: usize) -> Option<Pick> {
    let rows = Rows::of(map)?;
    (1..=n).rev().find_map(|k| rows.pick(k)).map(Pick::Seats)
}

fn best_pick(map: &Value, n: usize, attempt: u32) -> Option<Pick> {
    let free = free_by_section(map);
    let roomy: Vec<&String> = free
        .iter()
        .filter(|(_, &f)| f >= n)
        .map(|(s, _)| s)
        .collect();
    let mut rng = rand::thread_rng();
    let (section, quantity) = if roomy.is_empty() {
        let (s, f) = free.iter().max_by_key(|(_, &f)| f)?;
        (s.clone(), n.min(*f))
    } else {
        // Like seat pickers, fans crowd towards the first (dearest, nearest) sections.
        let i = if rng.gen_bool(0.6) {
            0
        } else {
            rng.gen_range(0..roomy.len())
        };
        (roomy[i].clone(), n)
    };
    Some(Pick::Best {
        section,
        quantity,
        allow_split: attempt > 1,
    })
}

fn pool_pick(map: &Value, n: usize) -> Option<Pick> {
    let open: Vec<(&str, u64)> = map["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["id"].as_str()?, p["available"].as_u64()?)))
        .filter(|(_, a)| *a > 0)
        .collect();
    if open.is_empty() {
        return None;
    }
    let (pool, left) = open[rand::thread_rng().gen_range(0..open.len())];
    Some(Pick::Pool {
        pool: pool.to_owned(),
        quantity: n.min(usize::try_from(left).unwrap_or(n)),
    })
}

/// The section a seat-picking fan opens from the overview: the first section with a free seat
/// half the time (fans crowd towards the front), else any section with a free seat; `None` when
/// no section has one.
pub fn section_to_open(overview: &Value) -> Option<String> {
    let open: Vec<String> = free_by_section(overview).into_keys().collect();
    let mut rng = rand::thread_rng();
    if open.is_empty() {
        None
    } else if rng.gen_bool(0.5) {
        Some(open[0].clone())
    } else {
        Some(open[rng.gen_range(0..open.len())].clone())
    }
}

/// Whether the overview shows held seats (they may lapse and be sold again).
pub fn any_held(overview: &Value) -> bool {
    overview["sections"]
        .as_array()
        .is_some_and(|a| a.iter().any(|s| s["held"].as_u64().unwrap_or(0) > 0))
}

/// What a fan of `kind` asks for (`n` places, attempt from 1), from a seat-map answer; `None`
/// when nothing is left anywhere.
pub fn choose(map: &Value, kind: Kind, n: usize, attempt: u32) -> Option<Pick> {
    let first = match kind {
        Kind::Seats => seat_pick(map, n),
        Kind::Best => best_pick(map, n, attempt),
        Kind::Pool => pool_pick(map, n),
    };
    first
        .or_else(|| seat_pick(map, n))
        .or_else(|| pool_pick(map, n))
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
/// and tried for several party sizes: the seed rehearsal's fans spent most of the load
/// generator's CPU re-reading 1,400-seat sections into owned maps for every size tried).
struct Rows<'a> {
    /// Per row, in map order: (number, id, free), sorted by number.
    rows: Vec<Vec<(u64, &'a str, bool)>>,
}

impl<'a> Rows<'a> {
    fn of(map: &'a Value) -> Option<Self> {
        let seats = map["seats"].as_array()?;
        let mut at: std::collections::HashMap<(&'a str, String), usize> = Default::default();
        let mut rows: Vec<Vec<(u64, &'a str, bool)>> = Vec::new();
        for s in seats {
            let Value::Object(o) = s else { return None };
            let section = o.get("section")?.as_str()?;
            let row = match o.get("row")? {
                Value::String(r) => r.clone(),
                other => other.to_string(),
            };
            let free = o.get("status").and_then(Value::as_str) == Some("free");
            let seat = (o.get("number")?.as_u64()?, o.get("id")?.as_str()?, free);
            let i = *at.entry((section, row)).or_insert_with(|| {
                rows.push(Vec::new());
                rows.len() - 1
            });
            rows[i].push(seat);
        }
        for r in &mut rows {
            r.sort_unstable();
        }
        Some(Self { rows })
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

    #[test]
    fn each_kind_asks_its_way_and_falls_back() {
        let m = map();
        assert_eq!(
            choose(&m, Kind::Pool, 4, 1),
            Some(Pick::Pool {
                pool: "FLOOR".into(),
                quantity: 3
            })
        );
        assert_eq!(
            choose(&m, Kind::Seats, 2, 1),
            Some(Pick::Seats(vec!["A-1-1".into()]))
        );
        let best = choose(&m, Kind::Best, 2, 1).unwrap();
        assert_eq!(best.body()["best_available"]["quantity"], 1);
        assert_eq!(best.body()["best_available"]["section"], "A");
        let none_left =
            json!({"seats": [], "pools": [{"id": "FLOOR", "available": 0, "capacity": 5}]});
        assert_eq!(choose(&none_left, Kind::Best, 1, 1), None);
        let only_pool = json!({"seats": [], "pools": [{"id": "FLOOR", "available": 2}]});
        assert!(matches!(
            choose(&only_pool, Kind::Seats, 1, 1),
            Some(Pick::Pool { .. })
        ));
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
