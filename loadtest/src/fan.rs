//! One synthetic fan's journey, over HTTP only: join before opening, follow the status document,
//! claim admission when the cursor reaches the queue number, hold 1–4 adjacent seats, best
//! available seats or pool places (`picks`; retrying on 409 with the fresh map), then pay,
//! cancel or walk away.

use crate::calls::{call, call_uncapped, jwt_claims, retry_after};
use crate::model::{FanOutcome, SharedDoc, Target};
use crate::stats::Stats;
use rand::seq::SliceRandom;
use rand::Rng;
use reqwest::{Client, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Fetches the status document every `every` and publishes it to the fans until `stop`.
pub fn spawn_status_poller(
    client: Client,
    stats: Arc<Stats>,
    url: String,
    every: Duration,
    started: Instant,
) -> (
    tokio::sync::watch::Receiver<SharedDoc>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::watch::channel(SharedDoc::default());
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let asked_ms = started.elapsed().as_millis() as u64;
            let doc = match call_uncapped(&stats, "status", client.get(&url)).await {
                Ok((s, body, _)) if s.is_success() => body,
                _ => Value::Null,
            };
            let next = SharedDoc {
                asked_ms,
                doc: Arc::new(doc),
            };
            if tx.send(next).is_err() {
                return; // every fan is done
            }
        }
    });
    (rx, task)
}

/// Runs one fan: join, wait, claim, hold, then pay/cancel/walk away.
pub async fn run_fan(
    client: Client,
    target: Arc<Target>,
    stats: Arc<Stats>,
    started: Instant,
    joined: Option<Arc<tokio::sync::Barrier>>,
    deadline: Instant,
    late_by: Option<Duration>,
) -> FanOutcome {
    let mut out = FanOutcome {
        behaviour: target.mix.pick(target.pay_share, target.cancel_share),
        late_arrival: late_by.is_some(),
        ..Default::default()
    };
    if let Some(d) = late_by {
        tokio::time::sleep(d).await;
    }
    let wr = &target.waiting_room;
    let ev = &target.event;
    let join_url = format!("{wr}/api/events/{ev}/join");
    let mut token = None;
    for _ in 0..5 {
        match call(&client, &stats, "join", client.post(&join_url)).await {
            Ok((s, body, _)) if s.is_success() => {
                token = body["join_token"].as_str().map(str::to_owned);
                if let Some(t) = &token {
                    crate::seen::join(t, body["queue_number"].as_u64());
                }
                out.joined_at_ms = Some(started.elapsed().as_millis() as u64);
                out.prequeued = body["queue_number"].is_null();
                break;
            }
            Ok((s, _, h)) if s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error() => {
                tokio::time::sleep(retry_after(&h)).await;
            }
            _ => break,
        }
    }
    if let Some(b) = joined {
        b.wait().await;
    }
    let Some(token) = token else {
        out.gave_up = Some("join failed".into());
        return out;
    };
    let waited = wait_for_turn(
        &client,
        &target,
        &stats,
        &token,
        (deadline, started),
        &mut out.wait_shown,
    )
    .await;
    let number = match waited {
        Ok((n, window)) => {
            out.turn_window_ms = window;
            n
        }
        Err(e) => {
            out.gave_up = Some(e.to_string());
            return out;
        }
    };
    out.queue_number = Some(number);
    let claim_url = format!("{wr}/api/events/{ev}/admission");
    let mut last_beat: Option<Instant> = None;
    let admission = loop {
        let req = client.post(&claim_url).bearer_auth(&token);
        let mut pause = Duration::from_millis(target.poll_ms);
        match call(&client, &stats, "claim", req).await {
            Ok((s, body, _)) if s.is_success() => break body,
            Ok((s, _, h)) if s == StatusCode::TOO_MANY_REQUESTS || s.is_server_error() => {
                pause = retry_after(&h);
            }
            Ok((s, body, _))
                if s == StatusCode::CONFLICT
                    && body["type"].as_str().is_some_and(|t| {
                        t.ends_with("event-sold_out") || t.ends_with("event-closed")
                    }) =>
            {
                // The sale ended while this fan waited for its claim: nothing left to claim.
                out.gave_up = Some(format!("claim: {}", body["type"].as_str().unwrap_or("")));
                return out;
            }
            Ok((s, body, _)) if s == StatusCode::CONFLICT => {
                // Not (yet) our turn, e.g. skipped as silent: say we are here, then retry.
                let doc = serde_json::json!({"ready_window": u64::MAX, "heartbeat_interval_ms": 0,
                                             "cursor": body["cursor"].as_u64().unwrap_or(0)});
                heartbeat_if_near(
                    &client,
                    &target,
                    &stats,
                    &token,
                    &doc,
                    number,
                    &mut last_beat,
                )
                .await;
            }
            Ok((s, _, _)) => {
                out.gave_up = Some(format!("claim answered {s}"));
                return out;
            }
            Err(_) => {}
        }
        if Instant::now() > deadline {
            out.gave_up = Some("claim: deadline".into());
            return out;
        }
        tokio::time::sleep(pause).await;
    };
    let Some(adm) = admission["admission_token"].as_str().map(str::to_owned) else {
        out.gave_up = Some("claim without token".into());
        return out;
    };
    out.admitted_at_ms = Some(started.elapsed().as_millis() as u64);
    if let Some(c) = jwt_claims(&adm) {
        out.admission = Some((
            c["iat"].as_i64().unwrap_or(0),
            c["exp"].as_i64().unwrap_or(0),
        ));
        crate::seen::admission(&token, &c);
    }
    book(&client, &target, &stats, &adm, &mut out).await;
    out
}

/// Polls the status document until the cursor reaches this fan; returns the queue number.
/// Like the waiting page, a fan within the document's `ready_window` of the cursor sends a
/// heartbeat every `heartbeat_interval_ms`, so its place is not skipped as abandoned. Records
/// in `shown` the wait range the page would show: the first one the fan sees, then one at each
/// whole minute after it.
async fn wait_for_turn(
    client: &Client,
    target: &Target,
    stats: &Arc<Stats>,
    token: &str,
    (deadline, started): (Instant, Instant),
    shown: &mut Vec<crate::model::ShownWait>,
) -> anyhow::Result<(u64, Option<(u64, u64)>)> {
    let wr = &target.waiting_room;
    let ev = &target.event;
    let mut number: Option<u64> = None;
    let mut below_ms: Option<u64> = None;
    let mut last_beat: Option<Instant> = None;
    loop {
        if Instant::now() > deadline {
            anyhow::bail!("waiting: deadline");
        }
        let (asked_ms, doc) = match &target.shared_status {
            Some(rx) => {
                let d = rx.borrow().clone();
                (d.asked_ms, d.doc)
            }
            None => {
                let asked_ms = started.elapsed().as_millis() as u64;
                let st = call(
                    client,
                    stats,
                    "status",
                    client.get(format!("{wr}/status/{ev}.json")),
                )
                .await;
                let doc = match st {
                    Ok((s, body, _)) if s.is_success() => body,
                    _ => Value::Null,
                };
                (asked_ms, Arc::new(doc))
            }
        };
        let doc = &*doc;
        let state = doc["state"].as_str().unwrap_or("");
        let mut cursor = doc["cursor"].as_u64().unwrap_or(0);
        if state == "open" && number.is_none() {
            let req = client
                .get(format!("{wr}/api/events/{ev}/position"))
                .bearer_auth(token);
            if let Ok((s, body, _)) = call(client, stats, "position", req).await {
                if s.is_success() {
                    number = body["queue_number"].as_u64();
                    if let Some(n) = number {
                        crate::seen::number(token, n);
                    }
                    // The page takes the larger of the two cursors.
                    cursor = cursor.max(body["cursor"].as_u64().unwrap_or(0));
                }
            }
        }
        if let Some(n) = number {
            if n <= cursor {
                let seen_ms = started.elapsed().as_millis() as u64;
                return Ok((n, below_ms.map(|lo| (lo, seen_ms))));
            }
            below_ms = Some(asked_ms);
            note_range(shown, doc, n - cursor, started.elapsed().as_millis() as u64);
            // Sent without waiting for the answer, as the page does (wait.js `heartbeat`): a
            // heartbeat queued behind the load generator's shared in-flight cap must not keep
            // the fan from reading the status document (the seed rehearsal saw turns a median
            // 44 s late when it did).
            if let Some(url) = heartbeat_due(target, doc, n, &mut last_beat) {
                let (c, s, req) = (client.clone(), stats.clone(), client.post(url));
                let req = req.bearer_auth(token);
                tokio::spawn(async move { call(&c, &s, "heartbeat", req).await });
            }
        }
        if state == "closed" || state == "sold_out" {
            anyhow::bail!("event {state}");
        }
        let jitter = rand::thread_rng().gen_range(0..=target.poll_ms / 4);
        tokio::time::sleep(Duration::from_millis(target.poll_ms + jitter)).await;
    }
}

/// Adds the range the page shows now when it is the first the fan sees, or the first read at
/// or after the next whole minute since that one.
fn note_range(shown: &mut Vec<crate::model::ShownWait>, doc: &Value, to_go: u64, now_ms: u64) {
    let minute = match shown.first() {
        None => 0,
        Some(first) => {
            let due = shown.last().map_or(0, |l| l.minute) + 1;
            if now_ms < first.at_ms + u64::from(due) * 60_000 {
                return;
            }
            due
        }
    };
    if let Some(w) = crate::wait_range::shown(doc, to_go, now_ms, minute) {
        shown.push(w);
    }
}

/// Sends a heartbeat when the fan is within the ready window and the interval has passed.
async fn heartbeat_if_near(
    client: &Client,
    target: &Target,
    stats: &Stats,
    token: &str,
    doc: &Value,
    number: u64,
    last: &mut Option<Instant>,
) {
    if let Some(url) = heartbeat_due(target, doc, number, last) {
        let req = client.post(url).bearer_auth(token);
        let _ = call(client, stats, "heartbeat", req).await;
    }
}

/// The heartbeat URL when one is due (within the ready window, the interval passed); marks it
/// sent.
fn heartbeat_due(
    target: &Target,
    doc: &Value,
    number: u64,
    last: &mut Option<Instant>,
) -> Option<String> {
    let window = doc["ready_window"].as_u64()?;
    let every = doc["heartbeat_interval_ms"].as_u64()?;
    let cursor = doc["cursor"].as_u64().unwrap_or(0);
    if number.saturating_sub(cursor) > window
        || last.is_some_and(|t| t.elapsed() < Duration::from_millis(every))
    {
        return None;
    }
    *last = Some(Instant::now());
    Some(format!(
        "{}/api/events/{}/heartbeat",
        target.waiting_room, target.event
    ))
}

async fn book(client: &Client, target: &Target, stats: &Stats, adm: &str, out: &mut FanOutcome) {
    let bc = &target.booking;
    let ev = &target.event;
    let want = rand::thread_rng().gen_range(1..=4usize);
    let kind = target.picks.draw();
    // A fan who adds an interval resource (parking, a meet-and-greet slot) to its seats.
    let interval_kind = if target.picks.wants_interval() {
        crate::intervals::choose_kind(client, stats, target).await
    } else {
        None
    };
    let patience = Instant::now() + Duration::from_secs(target.mix.sold_out_patience_secs);
    let mut attempt = 0;
    // A fan who waited for a lapsed seat to come back does not walk away from it: it pays.
    let mut waited = false;
    // The fan's browser cache of the maps it read (revalidated with `If-None-Match`).
    let mut kept = crate::picks::Kept::default();
    while attempt < 4 {
        attempt += 1;
        // The overview first (small), then only the chosen section's seats: a fan never holds
        // a whole 20,000-seat map, and no map stays alive across the hold and payment below.
        let overview_url = format!("{bc}/api/shows/{ev}/sections");
        let Some(overview_read) = kept.get(stats, "sections", client, &overview_url).await else {
            continue;
        };
        let overview = overview_read.map();
        // A party that cannot sit together shrinks rather than leaving (and after two 409s,
        // takes any single seat).
        let n = if attempt > 2 { 1 } else { want };
        let section = match kind {
            crate::model::Kind::Seats => overview.section_to_open(),
            _ => None,
        };
        let section_map = match section {
            Some(sec) => {
                let url = format!("{bc}/api/shows/{ev}/seats?section={sec}");
                match kept.get(stats, "seatmap", client, &url).await {
                    Some(m) => Some(m),
                    None => continue,
                }
            }
            None => None,
        };
        let choices = section_map.as_ref().map_or(overview, |m| m.map()).choices();
        let picked = choices.choose(kind, n, attempt);
        let alternatives: Vec<_> = match picked {
            Some(_) => (0..4)
                .filter_map(|_| choices.choose(kind, n, attempt))
                .collect(),
            None => Vec::new(),
        };
        let held = overview.any_held();
        // No map stays alive across the pause, the hold and the payment below (`kept` holds
        // its copies weakly).
        drop(choices);
        drop((section_map, overview_read));
        let Some(pick) = picked else {
            if Instant::now() < patience && held {
                // Held seats lapse and are sold again: look again a little later (every 2-5 s,
                // so thousands of patient fans do not flood the overview).
                attempt -= 1;
                waited = true;
                let pause = rand::thread_rng().gen_range(2_000..=5_000);
                tokio::time::sleep(Duration::from_millis(pause)).await;
                continue;
            }
            out.gave_up = Some("sold out".into());
            return;
        };
        let slot = match &interval_kind {
            Some(k) => crate::intervals::free_slot(client, stats, target, k).await,
            None => None,
        };
        let pick = pick.with_interval(slot.as_ref());
        let alternatives: Vec<_> = alternatives
            .into_iter()
            .map(|p| p.with_interval(slot.as_ref()))
            .collect();
        let sent =
            crate::behaviour::send_hold(client, stats, target, adm, &pick, &alternatives, out)
                .await;
        match sent {
            Ok((s, body)) if s == StatusCode::CREATED || s == StatusCode::OK => {
                let hold = body["hold_id"].as_str().unwrap_or_default().to_owned();
                let held: Vec<String> = body["seats"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_else(|| pick.seats());
                out.hold = Some((hold.clone(), held));
                out.held_at_ms = Some(crate::timeline::now_ms());
                if waited {
                    out.behaviour.checkout = crate::model::Checkout::Pay;
                }
                let deadline = body["payment_expires_at"].as_i64();
                finish(client, target, stats, adm, &hold, deadline, out).await;
                return;
            }
            Ok((s, _)) if s == StatusCode::CONFLICT => {
                out.conflicts += 1;
                if Instant::now() < patience {
                    attempt = attempt.min(2); // keep retrying, a single seat from now on
                }
            }
            Ok((s, body)) => {
                let kind = body["type"].as_str().unwrap_or("");
                out.gave_up = Some(format!("hold answered {s} {kind}"));
                return;
            }
            Err(e) => {
                out.gave_up = Some(format!("hold: {e}"));
                return;
            }
        }
    }
    out.gave_up = Some("no seats after retries".into());
}

async fn finish(
    client: &Client,
    target: &Target,
    stats: &Stats,
    adm: &str,
    hold: &str,
    payment_expires_at: Option<i64>,
    out: &mut FanOutcome,
) {
    let bc = &target.booking;
    let Some(choice) = crate::behaviour::button(out.behaviour) else {
        return; // walks away: the hold lapses on its own
    };
    let req = client
        .post(format!("{bc}/api/holds/{hold}/pay"))
        .bearer_auth(adm);
    let Ok((s, body, _)) = call(client, stats, "pay", req).await else {
        return;
    };
    if !s.is_success() {
        return;
    }
    let Some(checkout) = body["checkout_url"].as_str() else {
        return;
    };
    crate::behaviour::before_pay(out.behaviour, payment_expires_at).await;
    // The fan presses Pay or Cancel on the gateway's page: a form POST answered with a redirect.
    let button = format!("{}/{}", checkout.trim_end_matches('/'), choice);
    let Ok((s, _, headers)) = call(client, stats, "checkout", client.post(&button)).await else {
        return;
    };
    let Some(loc) = headers
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
    else {
        let _ = s;
        return;
    };
    let _ = call(client, stats, "callback", client.get(loc)).await;
    if choice == "cancel" {
        let req = client
            .delete(format!("{bc}/api/holds/{hold}"))
            .bearer_auth(adm);
        if let Ok((s, _, _)) = call(client, stats, "release", req).await {
            out.cancelled = s.is_success();
        }
        return;
    }
    let req = client
        .get(format!("{bc}/api/holds/{hold}"))
        .bearer_auth(adm);
    if let Ok((s, body, _)) = call(client, stats, "hold_read", req).await {
        out.paid = s.is_success() && body["status"] == "PAID";
        if out.paid {
            out.paid_at_ms = Some(crate::timeline::now_ms());
        }
    }
}

/// Shuffles fans' start order so joins interleave like real arrivals.
pub fn shuffled(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    v.shuffle(&mut rand::thread_rng());
    v
}
