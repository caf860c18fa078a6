//! One synthetic fan's journey, over HTTP only: join before opening, follow the status document,
//! claim admission when the cursor reaches the queue number, hold 1–4 adjacent seats, best
//! available seats or pool places (`picks`; retrying on 409 with the fresh map), then pay,
//! cancel or walk away.

use crate::stats::Stats;
use rand::seq::SliceRandom;
use rand::Rng;
use reqwest::{Client, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the fans go and who they are.
#[derive(Debug, Clone)]
pub struct Target {
    /// Waiting room base URL.
    pub waiting_room: String,
    /// Booking core base URL.
    pub booking: String,
    /// Event id at the waiting room; also the show id at the booking core.
    pub event: String,
    /// How often a fan polls the status document while waiting, milliseconds.
    pub poll_ms: u64,
    /// Share of fans who pay (0..=1); `cancel_share` cancel; the rest walk away.
    pub pay_share: f64,
    /// Share of fans who cancel on the checkout page.
    pub cancel_share: f64,
    /// Behaviour mix (hold styles, slow and late payers, patience when sold out).
    pub mix: crate::behaviour::Mix,
    /// Shares of fans holding by best available and in a pool (the rest pick seats).
    pub picks: crate::picks::Shares,
    /// The status document as one shared poller last fetched it (`rush --shared-status`), the
    /// way a CDN answers every fan with one copy; `None`: each fan fetches its own.
    pub shared_status: Option<tokio::sync::watch::Receiver<SharedDoc>>,
}

/// The last status document the shared poller fetched, and when it asked (ms since start).
#[derive(Debug, Clone, Default)]
pub struct SharedDoc {
    /// When the poller sent the request, ms since the run started.
    pub asked_ms: u64,
    /// The document (`Null` before the first answer or after a failed fetch).
    pub doc: Arc<Value>,
}

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
            let doc = match call(&client, &stats, "status", client.get(&url)).await {
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

/// What one fan ended with.
#[derive(Debug, Default, Clone)]
pub struct FanOutcome {
    /// The queue number the fan was given.
    pub queue_number: Option<u64>,
    /// Admission token's `iat` and `exp` (Unix seconds) when admitted.
    pub admission: Option<(i64, i64)>,
    /// Wall time (ms since the run started) when admission was granted.
    pub admitted_at_ms: Option<u64>,
    /// The hold id and its seats, if a hold succeeded.
    pub hold: Option<(String, Vec<String>)>,
    /// Whether the fan's hold ended PAID (confirmed by reading it back).
    pub paid: bool,
    /// Whether the fan cancelled and the hold was released.
    pub cancelled: bool,
    /// 409s met while holding.
    pub conflicts: u32,
    /// A description of why the journey stopped early, if it did.
    pub gave_up: Option<String>,
    /// The behaviour this fan was drawn.
    pub behaviour: crate::behaviour::Behaviour,
    /// Wall time (ms since the run started) when the join answered.
    pub joined_at_ms: Option<u64>,
    /// Joined after the sale opened (a late arrival).
    pub late_arrival: bool,
    /// The join answer carried no queue number: the fan really joined the pre-queue (a fan
    /// meant to join early can arrive after opening on a loaded machine).
    pub prequeued: bool,
    /// When the fan saw its turn come (ms since start): after the last status document that
    /// showed the cursor below its number, and before the first that showed it reached.
    pub turn_window_ms: Option<(u64, u64)>,
    /// Wall time (ms since start) when the fan read its hold back PAID.
    pub paid_at_ms: Option<u64>,
    /// A same-key retry was sent; and whether its answers named different holds.
    pub idempotent_checked: bool,
    /// Two answers to one `Idempotency-Key` disagreed.
    pub idempotency_mismatch: bool,
    /// Tabs that won a hold at once with one admission token (several-tab fans).
    pub tabs_won: Option<usize>,
}

/// Times a fan waits in all for one call answered 503 + `Retry-After` before it takes the 503.
const RETRY_LATER_FOR: Duration = Duration::from_secs(60);

/// A timed HTTP call that records latency and status under `endpoint`. A 503 with
/// `Retry-After` (the server's "come back later": a store failing over, a database restarting,
/// a node draining) is waited out and sent again, as the fans' pages do, for up to a minute;
/// each such answer is recorded apart from the server errors.
pub async fn call(
    client: &Client,
    stats: &Stats,
    endpoint: &'static str,
    req: reqwest::RequestBuilder,
) -> anyhow::Result<(StatusCode, Value, reqwest::header::HeaderMap)> {
    let _ = client;
    let give_up = Instant::now() + RETRY_LATER_FOR;
    let mut req = req;
    loop {
        let again = req.try_clone();
        let permit = permit(endpoint).await;
        let t = Instant::now();
        let res = req.send().await;
        match res {
            Ok(r) => {
                let status = r.status();
                let headers = r.headers().clone();
                let bytes = r.bytes().await.unwrap_or_default();
                let later = status == StatusCode::SERVICE_UNAVAILABLE
                    && headers.contains_key(reqwest::header::RETRY_AFTER);
                stats.record_answer(endpoint, t.elapsed(), Some(status.as_u16()), later);
                drop(permit);
                if let (true, Some(next)) = (later, again) {
                    let pause = retry_after(&headers);
                    if Instant::now() + pause < give_up {
                        tokio::time::sleep(pause).await;
                        req = next;
                        continue;
                    }
                }
                let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                return Ok((status, json, headers));
            }
            Err(e) => {
                let kind = crate::stats::transport_kind(&e);
                stats.record_transport_error(endpoint, t.elapsed(), kind);
                return Err(e.into());
            }
        }
    }
}

/// Decodes a JWT's claims without verifying (the fan only reads `iat`/`exp` for the checks).
pub fn jwt_claims(token: &str) -> Option<Value> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
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
                    crate::chaos::seen::join(t, body["queue_number"].as_u64());
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
    let number = match wait_for_turn(&client, &target, &stats, &token, deadline, started).await {
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
        crate::chaos::seen::admission(&token, &c);
    }
    book(&client, &target, &stats, &adm, &mut out).await;
    out
}

/// Polls the status document until the cursor reaches this fan; returns the queue number.
/// Like the waiting page, a fan within the document's `ready_window` of the cursor sends a
/// heartbeat every `heartbeat_interval_ms`, so its place is not skipped as abandoned.
async fn wait_for_turn(
    client: &Client,
    target: &Target,
    stats: &Stats,
    token: &str,
    deadline: Instant,
    started: Instant,
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
        let cursor = doc["cursor"].as_u64().unwrap_or(0);
        if state == "open" && number.is_none() {
            let req = client
                .get(format!("{wr}/api/events/{ev}/position"))
                .bearer_auth(token);
            if let Ok((s, body, _)) = call(client, stats, "position", req).await {
                if s.is_success() {
                    number = body["queue_number"].as_u64();
                    if let Some(n) = number {
                        crate::chaos::seen::number(token, n);
                    }
                }
            }
        }
        if let Some(n) = number {
            if n <= cursor {
                let seen_ms = started.elapsed().as_millis() as u64;
                return Ok((n, below_ms.map(|lo| (lo, seen_ms))));
            }
            below_ms = Some(asked_ms);
            heartbeat_if_near(client, target, stats, token, doc, n, &mut last_beat).await;
        }
        if state == "closed" || state == "sold_out" {
            anyhow::bail!("event {state}");
        }
        let jitter = rand::thread_rng().gen_range(0..=target.poll_ms / 4);
        tokio::time::sleep(Duration::from_millis(target.poll_ms + jitter)).await;
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
    let (Some(window), Some(every)) = (
        doc["ready_window"].as_u64(),
        doc["heartbeat_interval_ms"].as_u64(),
    ) else {
        return;
    };
    let cursor = doc["cursor"].as_u64().unwrap_or(0);
    if number.saturating_sub(cursor) > window {
        return;
    }
    if last.is_some_and(|t| t.elapsed() < Duration::from_millis(every)) {
        return;
    }
    *last = Some(Instant::now());
    let url = format!(
        "{}/api/events/{}/heartbeat",
        target.waiting_room, target.event
    );
    let _ = call(
        client,
        stats,
        "heartbeat",
        client.post(url).bearer_auth(token),
    )
    .await;
}

/// Seconds to wait from a 429/503 `Retry-After` header (default 1 s, at most 30 s).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Duration {
    let secs = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(secs.clamp(1, 30))
}

/// Picks `n` adjacent free seats in a random row that has them, from a seat-map answer.
pub fn pick_seats(map: &Value, n: usize) -> Option<Vec<String>> {
    let seats = map["seats"].as_array()?;
    type Rows = std::collections::BTreeMap<(String, String), Vec<(u64, String, bool)>>;
    let mut rows: Rows = Default::default();
    for s in seats {
        let key = (
            s["section"].as_str()?.to_owned(),
            s["row"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| s["row"].to_string()),
        );
        let free = s["status"].as_str() == Some("free");
        rows.entry(key).or_default().push((
            s["number"].as_u64()?,
            s["id"].as_str()?.to_owned(),
            free,
        ));
    }
    let mut blocks = Vec::new();
    for row in rows.values_mut() {
        row.sort();
        for w in row.windows(n) {
            if w.iter().all(|s| s.2) {
                blocks.push(w.iter().map(|s| s.1.clone()).collect::<Vec<_>>());
            }
        }
    }
    // Fans crowd towards the front: pick among the first blocks more often (realistic conflicts).
    let mut rng = rand::thread_rng();
    let front = blocks.len().min(40);
    if front == 0 {
        return None;
    }
    let i = if rng.gen_bool(0.7) {
        rng.gen_range(0..front)
    } else {
        rng.gen_range(0..blocks.len())
    };
    blocks.get(i).cloned()
}

async fn book(client: &Client, target: &Target, stats: &Stats, adm: &str, out: &mut FanOutcome) {
    let bc = &target.booking;
    let ev = &target.event;
    let want = rand::thread_rng().gen_range(1..=4usize);
    let kind = target.picks.draw();
    let patience = Instant::now() + Duration::from_secs(target.mix.sold_out_patience_secs);
    let mut attempt = 0;
    // A fan who waited for a lapsed seat to come back does not walk away from it: it pays.
    let mut waited = false;
    while attempt < 4 {
        attempt += 1;
        // The overview first (small), then only the chosen section's seats: a fan never holds
        // a whole 20,000-seat map, and no map stays alive across the hold and payment below.
        let overview = match call(
            client,
            stats,
            "sections",
            client.get(format!("{bc}/api/shows/{ev}/sections")),
        )
        .await
        {
            Ok((s, body, _)) if s.is_success() => body,
            _ => continue,
        };
        // A party that cannot sit together shrinks rather than leaving (and after two 409s,
        // takes any single seat).
        let n = if attempt > 2 { 1 } else { want };
        let section = match kind {
            crate::picks::Kind::Seats => crate::picks::section_to_open(&overview),
            _ => None,
        };
        let section_map = match section {
            Some(sec) => match call(
                client,
                stats,
                "seatmap",
                client.get(format!("{bc}/api/shows/{ev}/seats?section={sec}")),
            )
            .await
            {
                Ok((s, body, _)) if s.is_success() => Some(body),
                _ => continue,
            },
            None => None,
        };
        let map = section_map.as_ref().unwrap_or(&overview);
        let Some(pick) = crate::picks::choose(map, kind, n, attempt) else {
            let held = crate::picks::any_held(&overview);
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
        let alternatives: Vec<_> = (0..4)
            .filter_map(|_| crate::picks::choose(map, kind, n, attempt))
            .collect();
        drop((section_map, overview));
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
                if waited {
                    out.behaviour.checkout = crate::behaviour::Checkout::Pay;
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

static LIMIT: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
static CHECKOUT_LIMIT: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();

/// Caps HTTP calls in flight across all fans (set once, before the fans start): `n` for the
/// queue and the hold, and a separate `n / 4` (at least 16) for the checkout steps, so fans
/// paying for a hold never wait behind thousands of others still fighting for seats (each real
/// fan has a browser of its own; only the load generator shares its sockets).
pub fn set_concurrency(n: usize) {
    let _ = LIMIT.set(tokio::sync::Semaphore::new(n.max(1)));
    let _ = CHECKOUT_LIMIT.set(tokio::sync::Semaphore::new((n / 4).max(16)));
}

async fn permit(endpoint: &str) -> Option<tokio::sync::SemaphorePermit<'static>> {
    let pool = match endpoint {
        "pay" | "checkout" | "callback" | "hold_read" | "release" => &CHECKOUT_LIMIT,
        _ => &LIMIT,
    };
    match pool.get() {
        Some(s) => s.acquire().await.ok(),
        None => None,
    }
}
