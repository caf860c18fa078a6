//! The invariant checks printed at the end of a rush, each PASS or FAIL. They compare what the
//! fans saw with what the booking core's back office reports (HTTP only, never the database).

pub use crate::model::Check;
use crate::model::FanOutcome;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// Largest number of admissions live at one instant, from the tokens' `[iat, exp)` intervals
/// (Unix seconds). Sweep line over interval ends; an end at `t` is processed before a start at `t`.
pub fn max_live(admissions: &[(i64, i64)]) -> usize {
    let mut edges: Vec<(i64, i32)> = Vec::with_capacity(admissions.len() * 2);
    for &(iat, exp) in admissions {
        edges.push((iat, 1));
        edges.push((exp, -1));
    }
    edges.sort();
    let (mut live, mut max) = (0i64, 0i64);
    for (_, d) in edges {
        live += i64::from(d);
        max = max.max(live);
    }
    usize::try_from(max).unwrap_or(0)
}

/// Inputs from the back office at the end of the run.
#[derive(Debug)]
pub struct BackOffice {
    /// `GET /admin/shows/{show}/stats`.
    pub stats: Value,
    /// `GET /admin/shows/{show}/bookings`.
    pub bookings: Vec<Value>,
    /// `GET /api/shows/{show}/seats` (`available`).
    pub seatmap_available: u64,
    /// Pool holds, places and counters (pool bookings have no seats: not in `bookings`).
    pub pools: crate::picks::PoolOffice,
    /// `GET /admin/shows/{show}/resources/claims`: the interval claims that block, per resource.
    pub claims: Value,
    /// The waiting room's admin figures at the end (`GET /admin/events/{event}`), with
    /// `max_active_seen`: the most live sessions it ever held, measured in the same atomic step
    /// as each admission.
    pub waiting_room: Value,
}

/// Runs every check. `totals`: calls, server errors (5xx and transport errors, by kind) and,
/// apart from them, answers 503 + `Retry-After` (the server's "come back later", which fans obey).
pub fn run(
    fans: &[FanOutcome],
    max_active: u64,
    office: &BackOffice,
    totals: crate::stats::Totals,
) -> Vec<Check> {
    let mut out = Vec::new();
    // The waiting room ends a session early when the booking core reports it done (paid,
    // released, left), so the tokens' [iat, exp) intervals only bound live sessions from above;
    // the truth is the store's own peak, `max_active_seen`.
    let adm: Vec<(i64, i64)> = fans.iter().filter_map(|f| f.admission).collect();
    let bound = max_live(&adm);
    let seen = office.waiting_room["max_active_seen"].as_u64();
    out.push(Check {
        name: "live admissions never above max_active",
        pass: seen.is_some_and(|m| m <= max_active),
        detail: format!(
            "peak live sessions {} (waiting room's max_active_seen), max_active {max_active}; \
             token lifetimes alone would allow {bound} (from {} tokens)",
            seen.map_or("unknown".into(), |m| m.to_string()),
            adm.len()
        ),
    });

    let mut seat_owner: HashMap<String, String> = HashMap::new();
    let mut twice = Vec::new();
    for b in &office.bookings {
        let hold = b["hold_id"].as_str().unwrap_or_default().to_owned();
        for s in b["seats"].as_array().into_iter().flatten() {
            let seat = s.as_str().unwrap_or_default().to_owned();
            if let Some(prev) = seat_owner.insert(seat.clone(), hold.clone()) {
                twice.push(format!("{seat} ({prev}, {hold})"));
            }
        }
    }
    let db_twice = office.stats["seats_sold_twice"]
        .as_u64()
        .unwrap_or(u64::MAX);
    out.push(Check {
        name: "zero seats sold twice",
        pass: twice.is_empty() && db_twice == 0,
        detail: format!(
            "{} in bookings list, {db_twice} by the database",
            twice.len()
        ),
    });

    let booked: HashMap<&str, HashSet<&str>> = office
        .bookings
        .iter()
        .map(|b| {
            let seats = b["seats"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            (b["hold_id"].as_str().unwrap_or_default(), seats)
        })
        .collect();
    let paid: Vec<&(String, Vec<String>)> = fans
        .iter()
        .filter(|f| f.paid)
        .filter_map(|f| f.hold.as_ref())
        .collect();
    let missing = paid
        .iter()
        .filter(|(h, seats)| {
            if seats.is_empty() {
                // A pool hold: booked when the back office lists it PAID (same transaction).
                return !office.pools.paid_holds.contains(h);
            }
            booked
                .get(h.as_str())
                .is_none_or(|b| seats.iter().any(|s| !b.contains(s.as_str())))
        })
        .count();
    out.push(Check {
        name: "every PAID hold's seats booked",
        pass: missing == 0 && !paid.is_empty(),
        detail: format!(
            "{} paid holds seen by fans, {missing} without their booked seats, {} bookings",
            paid.len(),
            office.bookings.len()
        ),
    });

    let s = &office.stats;
    let (cap, free, held, sold) = (
        s["capacity"].as_u64().unwrap_or(0),
        s["free"].as_u64().unwrap_or(0),
        s["held"].as_u64().unwrap_or(0),
        s["sold"].as_u64().unwrap_or(0),
    );
    let sold_in_bookings = seat_owner.len() as u64;
    // Pools: `stats` counts seats only. Every booking is a seat booking or a PAID pool hold;
    // the counters match their rows, and neither the places sold nor the places sold plus the
    // seat map's available places exceed capacity + oversell.
    let p = &office.pools;
    let all_bookings = office.bookings.len() as u64 + p.paid_holds.len() as u64;
    let db_bookings = s["bookings"].as_u64().unwrap_or(u64::MAX);
    let pools_ok = db_bookings == all_bookings
        && p.drifting == 0
        && p.taken <= p.capacity
        && p.paid_places + p.map_available <= p.capacity;
    out.push(Check {
        name: "availability equals the database's count",
        pass: office.seatmap_available == free
            && cap == free + held + sold
            && sold == sold_in_bookings
            && pools_ok,
        detail: format!(
            "seat map available {}, database free {free} held {held} sold {sold} of {cap}; booked seats {sold_in_bookings}; \
             pool places sold {} + available {} of {} (taken {}, {} drifting); bookings {db_bookings} = {} seat + {} pool",
            office.seatmap_available, p.paid_places, p.map_available, p.capacity, p.taken, p.drifting,
            office.bookings.len(), p.paid_holds.len()
        ),
    });

    let o = crate::intervals::overlaps(&office.claims);
    out.push(Check {
        name: "no overlapping live claims on any resource",
        pass: o.pairs.is_empty(),
        detail: format!(
            "{} claims blocking ({} live, {} paid) on {} resources, read from the database; \
             {} overlapping pairs (buffer included) {:?}",
            o.claims,
            o.live,
            o.paid,
            o.resources,
            o.pairs.len(),
            o.pairs.iter().take(5).collect::<Vec<_>>()
        ),
    });

    let (calls, errors, retry_later) = (totals.calls, totals.server_errors, totals.retry_later);
    let ratio = if calls == 0 {
        0.0
    } else {
        errors as f64 / calls as f64
    };
    out.push(Check {
        name: "server errors below 0.01% (503 + Retry-After, which fans retry, apart)",
        pass: ratio < 0.0001,
        detail: format!(
            "{errors} of {calls} calls ({:.4}%){}; {retry_later} answers 503 + Retry-After, retried",
            ratio * 100.0,
            if totals.breakdown.is_empty() {
                String::new()
            } else {
                format!(": {}", totals.breakdown)
            }
        ),
    });
    out
}

/// Money checks: every payment the gateway completed (or completed then refunded) has exactly
/// one booking or one refund, never both, never neither; confirmation emails sent = bookings.
/// `payments` is the simulator's list (`None` without `--spawn`: that check is skipped).
pub fn money(booked: &HashSet<String>, outbox: &Value, payments: Option<&Value>) -> Vec<Check> {
    let mut out = Vec::new();
    if let Some(p) = payments {
        let (mut taken, mut bad) = (0usize, Vec::new());
        for pay in p.as_array().into_iter().flatten() {
            let status = pay["status"].as_str().unwrap_or("");
            if status != "completed" && status != "refunded" {
                continue;
            }
            taken += 1;
            let hold = pay["reference"].as_str().unwrap_or_default();
            if booked.contains(hold) == (status == "refunded") {
                bad.push(format!("{hold} ({status})"));
            }
        }
        let refunded = p
            .as_array()
            .into_iter()
            .flatten()
            .filter(|x| x["status"] == "refunded")
            .count();
        out.push(Check {
            name: "every completed payment has exactly one booking or one refund",
            pass: bad.is_empty(),
            detail: format!(
                "{taken} payments took money, {refunded} refunded, {} wrong {:?}",
                bad.len(),
                bad.iter().take(5).collect::<Vec<_>>()
            ),
        });
    } else {
        out.push(Check {
            name: "every completed payment has exactly one booking or one refund",
            pass: true,
            detail: "skipped: needs --spawn".into(),
        });
    }
    let sent = outbox["emails_sent"].as_u64().unwrap_or(u64::MAX);
    out.push(Check {
        name: "emails sent = bookings",
        pass: sent == booked.len() as u64 && outbox["emails_pending"].as_u64() == Some(0),
        detail: format!(
            "{sent} emails sent, {} bookings, {} messages pending",
            booked.len(),
            outbox["emails_pending"]
        ),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_live_counts_overlaps_and_touching_ends() {
        assert_eq!(max_live(&[]), 0);
        assert_eq!(max_live(&[(0, 10), (5, 15), (9, 20)]), 3);
        // An admission ending at 10 and one starting at 10 never overlap.
        assert_eq!(max_live(&[(0, 10), (10, 20)]), 1);
    }

    #[test]
    fn a_seat_in_two_bookings_fails() {
        let office = BackOffice {
            stats: serde_json::json!({"capacity": 2, "free": 0, "held": 0, "sold": 2, "seats_sold_twice": 0}),
            bookings: vec![
                serde_json::json!({"hold_id": "h1", "seats": ["A-1-1"]}),
                serde_json::json!({"hold_id": "h2", "seats": ["A-1-1"]}),
            ],
            seatmap_available: 0,
            pools: Default::default(),
            claims: serde_json::json!({"resources": []}),
            waiting_room: serde_json::json!({"max_active_seen": 3}),
        };
        let totals = crate::stats::Totals {
            calls: 10,
            ..Default::default()
        };
        let checks = run(&[], 10, &office, totals);
        let twice = checks
            .iter()
            .find(|c| c.name == "zero seats sold twice")
            .unwrap();
        assert!(!twice.pass);
    }
}
