//! Interval resources in the rush (issue 17): a fan who adds one to its order (`rush
//! --interval-share`) picks a kind from the venue (`GET /api/shows/{show}/venue`), then a free
//! interval of a random resource from the booking core's free runs
//! (`GET /api/shows/{show}/resources/{kind}`), held in the same all-or-nothing hold as its seats;
//! and the check that no two claims of one resource overlap, buffer included, on the back
//! office's list (`GET /admin/shows/{show}/resources/claims`, read from the database).

use crate::calls::call;
use crate::model::Target;
use crate::stats::Stats;
use rand::Rng;
use reqwest::Client;
use serde_json::{json, Value};

/// An interval of a named resource, `[start, end)` in epoch ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// Resource name.
    pub resource: String,
    /// First instant, epoch ms.
    pub start: i64,
    /// First instant after it, epoch ms.
    pub end: i64,
}

impl Slot {
    /// Adds this interval to a hold body (API.md "One order, several kinds").
    pub fn add_to(&self, body: &mut Value) {
        body["resource"] = json!(self.resource);
        body["start"] = json!(self.start);
        body["end"] = json!(self.end);
    }
}

/// A random interval-resource kind of the show's venue, `None` when it has none.
pub async fn choose_kind(client: &Client, stats: &Stats, t: &Target) -> Option<String> {
    let url = format!("{}/api/shows/{}/venue", t.booking, t.event);
    let (s, venue, _) = call(client, stats, "venue", client.get(url)).await.ok()?;
    if !s.is_success() {
        return None;
    }
    let kinds: Vec<&str> = venue["resources"]
        .as_array()?
        .iter()
        .filter_map(|k| k["kind"].as_str())
        .collect();
    if kinds.is_empty() {
        return None;
    }
    Some(kinds[rand::thread_rng().gen_range(0..kinds.len())].to_owned())
}

/// A free interval of `kind` now, `None` when nothing is free.
pub async fn free_slot(client: &Client, stats: &Stats, t: &Target, kind: &str) -> Option<Slot> {
    let url = format!("{}/api/shows/{}/resources/{kind}", t.booking, t.event);
    let (s, free, _) = call(client, stats, "resources", client.get(url))
        .await
        .ok()?;
    s.is_success().then(|| pick(&free)).flatten()
}

/// From a free-intervals answer: a random resource with a free run, one or two slots at a
/// random grid position of a random run (fans want the same evening: conflicts are real).
pub fn pick(free: &Value) -> Option<Slot> {
    let slot_ms = free["slot_minutes"].as_i64()? * 60_000;
    let runs: Vec<(&str, i64, i64)> = free["resources"]
        .as_array()?
        .iter()
        .flat_map(|r| {
            let name = r["resource"].as_str().unwrap_or_default();
            r["free"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(move |f| Some((name, f["start"].as_i64()?, f["end"].as_i64()?)))
        })
        .filter(|(_, s, e)| e - s >= slot_ms)
        .collect();
    if runs.is_empty() || slot_ms <= 0 {
        return None;
    }
    let mut rng = rand::thread_rng();
    let (resource, start, end) = runs[rng.gen_range(0..runs.len())];
    let slots = (end - start) / slot_ms;
    let len = rng.gen_range(1..=slots.min(2));
    let at = start + rng.gen_range(0..=slots - len) * slot_ms;
    Some(Slot {
        resource: resource.to_owned(),
        start: at,
        end: at + len * slot_ms,
    })
}

/// Figures of the back office's claim list and every pair of claims of one resource whose
/// blocked ranges `[start, until)` (`until` = end + buffer) overlap, as "resource: hold a /
/// hold b". Every listed claim blocks (live, or lapsed and not yet cleared), so every one is
/// compared: a stricter check than live claims alone.
#[derive(Debug, Default)]
pub struct Overlaps {
    /// Claims listed.
    pub claims: usize,
    /// Of them, live.
    pub live: usize,
    /// Of them, paid.
    pub paid: usize,
    /// Resources with a claim.
    pub resources: usize,
    /// The overlapping pairs.
    pub pairs: Vec<String>,
}

/// Overlap detection over `GET /admin/shows/{show}/resources/claims`: per resource, claims in
/// start order, each compared with the furthest-reaching one before it (a sweep line: two
/// ranges overlap when the later one starts before the earlier one's `until`; touching ends
/// do not overlap, ranges being closed-open).
pub fn overlaps(list: &Value) -> Overlaps {
    let mut out = Overlaps::default();
    for r in list["resources"].as_array().into_iter().flatten() {
        let name = r["resource"].as_str().unwrap_or("?");
        let mut claims: Vec<(i64, i64, &str)> = Vec::new();
        for c in r["claims"].as_array().into_iter().flatten() {
            out.claims += 1;
            out.live += usize::from(c["live"] == true);
            out.paid += usize::from(c["status"] == "PAID");
            let (Some(s), Some(u)) = (c["start"].as_i64(), c["until"].as_i64()) else {
                out.pairs
                    .push(format!("{name}: a claim without start or until"));
                continue;
            };
            claims.push((s, u, c["hold_id"].as_str().unwrap_or("?")));
        }
        out.resources += usize::from(!claims.is_empty());
        claims.sort();
        let mut reach: Option<(i64, &str)> = None;
        for (s, u, hold) in claims {
            if let Some((until, prev)) = reach {
                if s < until {
                    out.pairs.push(format!("{name}: {prev} / {hold}"));
                }
            }
            if reach.is_none_or(|(until, _)| u > until) {
                reach = Some((u, hold));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(hold: &str, start: i64, end: i64, buffer: i64) -> Value {
        json!({"hold_id": hold, "status": "PAID", "start": start, "end": end,
               "until": end + buffer, "live": true})
    }

    #[test]
    fn an_overlapping_pair_is_found_and_back_to_back_is_not() {
        let list = json!({"resources": [
            {"resource": "P1", "claims": [claim("a", 0, 60, 0), claim("b", 60, 120, 0)]},
            {"resource": "P2", "claims": [claim("c", 0, 60, 0), claim("d", 30, 90, 0)]},
            // Only the buffer overlaps: still an overlap (the buffer is part of the range).
            {"resource": "P3", "claims": [claim("e", 0, 60, 15), claim("f", 60, 90, 0)]},
            // A long claim overlapping a later one past a short one in between.
            {"resource": "P4", "claims": [claim("g", 0, 300, 0), claim("h", 60, 90, 0),
                                          claim("i", 200, 240, 0)]},
        ]});
        let o = overlaps(&list);
        assert_eq!(
            o.pairs,
            vec!["P2: c / d", "P3: e / f", "P4: g / h", "P4: g / i"]
        );
        assert_eq!((o.claims, o.resources, o.paid), (9, 4, 9));
        let apart = json!({"resources": [
            {"resource": "P1", "claims": [claim("a", 0, 60, 0), claim("b", 60, 120, 0)]},
            {"resource": "P2", "claims": [claim("c", 0, 60, 0)]},
        ]});
        assert!(overlaps(&apart).pairs.is_empty());
    }

    #[test]
    fn a_pick_lies_inside_a_free_run_on_the_grid() {
        let free = json!({"slot_minutes": 30, "resources": [
            {"resource": "P1", "free": []},
            {"resource": "P2", "free": [{"start": 0, "end": 5_400_000}]},
        ]});
        for _ in 0..50 {
            let s = pick(&free).unwrap();
            assert_eq!(s.resource, "P2");
            assert!(
                s.start >= 0 && s.end <= 5_400_000 && s.start < s.end,
                "{s:?}"
            );
            assert_eq!(s.start % 1_800_000, 0);
            assert!(s.end - s.start <= 3_600_000);
        }
        let none = json!({"slot_minutes": 30, "resources": [{"resource": "P1", "free": []}]});
        assert_eq!(pick(&none), None);
    }
}
