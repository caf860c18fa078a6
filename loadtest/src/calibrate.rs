//! `loadtest calibrate`: ramps hold requests on one hot show (open loop, rate × `--factor`
//! every `--step-secs`) until p99 passes `--p99-ms` or server errors appear, then prints the
//! sustainable holds per second, the recommended admit rate (holds/s ÷ hold requests per
//! admitted fan) and `max_active` (admit rate × mean session seconds), with the arithmetic;
//! `--apply` sets both on the event through `PATCH /admin/events/{event}`.
//!
//! Holds need admission tokens, so the show is measured on a stack spawned in this process
//! (admission at a high rate); `--apply` targets `--waiting-room` (a running event) when given,
//! else the spawned one.

use futures::StreamExt;
use hdrhistogram::Histogram;
use rand::seq::SliceRandom;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `calibrate` flags.
#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Booking database of the spawned stack (default: a fresh SQLite file).
    #[arg(long)]
    database: Option<String>,
    /// p99 target for a hold, milliseconds.
    #[arg(long, default_value_t = 250.0)]
    p99_ms: f64,
    /// First step, hold requests per second.
    #[arg(long, default_value_t = 50.0)]
    start_rate: f64,
    /// Each step's rate is the previous × this.
    #[arg(long, default_value_t = 1.5)]
    factor: f64,
    /// Seconds per step.
    #[arg(long, default_value_t = 3)]
    step_secs: u64,
    /// Seats of the hot block every hold aims at.
    #[arg(long, default_value_t = 100)]
    hot_seats: usize,
    /// Hold requests an admitted fan sends on average (holds + retries after 409).
    #[arg(long, default_value_t = 1.5)]
    holds_per_fan: f64,
    /// Mean session, seconds (admission to payment or walking away; seeds: ~60 s).
    #[arg(long, default_value_t = 60.0)]
    session_secs: f64,
    /// Admission tokens to hold with (fans). A hold that was made is released, which ends its
    /// admission's booking rights, so each made hold spends one token; a refused one does not.
    #[arg(long, default_value_t = 20_000)]
    fans: usize,
    /// Set the recommended admit rate and max_active on the event.
    #[arg(long)]
    apply: bool,
    /// Waiting room of the running event to apply to (default: the spawned stack).
    #[arg(long)]
    waiting_room: Option<String>,
    /// Admin token of that waiting room.
    #[arg(long, env = "SALE_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// Event to apply to.
    #[arg(long, default_value = "calibrate")]
    event: String,
}

/// One ramp step's figures.
#[derive(Debug, Clone, Copy)]
struct Step {
    offered: f64,
    achieved: f64,
    /// Answers that made a hold (201), per second.
    held: f64,
    p99_ms: f64,
    errors: u64,
}

/// Runs the calibration; `Ok(true)` when a sustainable rate was found.
pub async fn run(a: CalibrateArgs) -> anyhow::Result<bool> {
    let mut opts = ticket_sale::stack::StackOptions::local_random_ports();
    opts.database_url = a.database.clone().unwrap_or_default();
    opts.seats = 2000;
    (opts.join_rate_per_sec, opts.join_burst) = (1_000_000_000, 1_000_000_000);
    (opts.fan_rate_per_sec, opts.fan_burst) = (1_000_000_000, 1_000_000_000);
    // Each benchmark worker holds again and again with one admission token.
    opts.hold_rate_per_min = 1_000_000_000;
    opts.event = ticket_sale::stack::DemoEvent {
        id: "calibrate".into(),
        opens_in_secs: 0,
        admit_rate: 100_000.0,
        max_active: 100_000_000,
        admission_ttl_secs: 3600,
    };
    let stack = ticket_sale::stack::start(opts).await?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let tokens = admissions(&client, &stack.waiting_room_url, a.fans).await?;
    let hot =
        crate::picks::hot_block(&client, &stack.booking_url, "calibrate", 0, a.hot_seats).await?;
    println!(
        "calibrate: {} admission tokens, {}-seat hot block, p99 target {} ms",
        tokens.len(),
        hot.len(),
        a.p99_ms
    );
    let free = Arc::new(Mutex::new(tokens));
    let (hot, bc) = (Arc::new(hot), stack.booking_url.clone());
    let mut rate = a.start_rate;
    let mut best: Option<Step> = None;
    loop {
        let s = step(&client, &bc, &free, &hot, rate, a.step_secs).await;
        let ok = s.p99_ms <= a.p99_ms && s.errors == 0 && s.achieved >= 0.9 * s.offered;
        println!(
            "  offered {:>7.0}/s  achieved {:>7.0}/s ({:>6.0} held/s)  p99 {:>8.1} ms  errors {}  {}",
            s.offered,
            s.achieved,
            s.held,
            s.p99_ms,
            s.errors,
            if ok { "ok" } else { "limit" }
        );
        if !ok {
            break;
        }
        best = Some(s);
        rate *= a.factor;
    }
    let Some(b) = best else {
        println!("no step met the target (first step {:.0}/s)", a.start_rate);
        stack.shutdown().await;
        return Ok(false);
    };
    let admit = b.achieved / a.holds_per_fan;
    let max_active = (admit * a.session_secs).ceil() as u64;
    println!(
        "sustainable holds/s: {:.0} (p99 {:.1} ms)",
        b.achieved, b.p99_ms
    );
    println!(
        "recommended admit rate: {:.0} holds/s ÷ {} hold requests per fan = {admit:.1} fans/s",
        b.achieved, a.holds_per_fan
    );
    println!(
        "recommended max_active: {admit:.1} fans/s × {} s mean session = {max_active}",
        a.session_secs
    );
    if a.apply {
        let (wr, token) = match &a.waiting_room {
            Some(u) => (u.clone(), a.admin_token.clone().unwrap_or_default()),
            None => (stack.waiting_room_url.clone(), stack.admin_token.clone()),
        };
        let event = if a.waiting_room.is_some() {
            a.event.as_str()
        } else {
            "calibrate"
        };
        let r = client
            .patch(format!("{wr}/admin/events/{event}"))
            .bearer_auth(token)
            .header("X-Operator", "loadtest-calibrate")
            .json(&serde_json::json!({"admit_rate": admit, "max_active": max_active}))
            .send()
            .await?;
        let status = r.status();
        let body: serde_json::Value = r.json().await.unwrap_or_default();
        println!(
            "applied to {wr} event {event}: {status}, admit_rate {} max_active {}",
            body["admit_rate"], body["max_active"]
        );
        anyhow::ensure!(status.is_success(), "PATCH answered {status}");
    }
    stack.shutdown().await;
    Ok(true)
}

/// Joins and claims `n` fans (the event admits at a high rate).
async fn admissions(c: &reqwest::Client, wr: &str, n: usize) -> anyhow::Result<Vec<String>> {
    let ev = "calibrate";
    let joins = futures::stream::iter(0..n)
        .map(|_| async move {
            let r = c
                .post(format!("{wr}/api/events/{ev}/join"))
                .send()
                .await
                .ok()?;
            let v: serde_json::Value = r.json().await.ok()?;
            v["join_token"].as_str().map(String::from)
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let joins: Vec<String> = joins.into_iter().flatten().collect();
    let t = Instant::now();
    let claims = futures::stream::iter(joins)
        .map(|j| async move {
            loop {
                let r = c
                    .post(format!("{wr}/api/events/{ev}/admission"))
                    .bearer_auth(&j)
                    .send()
                    .await?;
                if r.status().is_success() {
                    let v: serde_json::Value = r.json().await?;
                    return anyhow::Ok(v["admission_token"].as_str().map(String::from));
                }
                anyhow::ensure!(t.elapsed() < Duration::from_secs(60), "admission too slow");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let mut out = Vec::new();
    for c in claims {
        out.extend(c?);
    }
    Ok(out)
}

/// One open-loop step at `rate` holds/s for `secs`: each request takes a free admission
/// token, holds 1–2 hot seats, and gives a 201's token back after releasing the hold (untimed).
async fn step(
    c: &reqwest::Client,
    bc: &str,
    free: &Arc<Mutex<Vec<String>>>,
    hot: &Arc<Vec<String>>,
    rate: f64,
    secs: u64,
) -> Step {
    let hist = Arc::new(Mutex::new(
        Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("histogram"),
    ));
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let held = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    while Instant::now() < end {
        tick.tick().await;
        let Some(tok) = free.lock().expect("tokens").pop() else {
            errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed); // the client ran out of fans
            continue;
        };
        let (c, bc, free, hot, hist, errors, held) = (
            c.clone(),
            bc.to_owned(),
            free.clone(),
            hot.clone(),
            hist.clone(),
            errors.clone(),
            held.clone(),
        );
        tasks.spawn(async move {
            let k = 1 + rand::random::<usize>() % 2;
            let seats: Vec<&String> = hot.choose_multiple(&mut rand::thread_rng(), k).collect();
            let t = Instant::now();
            let r = c
                .post(format!("{bc}/api/shows/calibrate/holds"))
                .bearer_auth(&tok)
                .header(
                    "Idempotency-Key",
                    format!("{:032x}", rand::random::<u128>()),
                )
                .json(&serde_json::json!({ "seats": seats }))
                .send()
                .await;
            let took = t.elapsed().as_micros() as u64;
            let _ = hist.lock().expect("hist").record(took.clamp(1, 60_000_000));
            match r {
                Ok(r) if r.status().as_u16() == 201 => {
                    held.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let v: serde_json::Value = r.json().await.unwrap_or_default();
                    if let Some(h) = v["hold_id"].as_str() {
                        let _ = c
                            .delete(format!("{bc}/api/holds/{h}"))
                            .bearer_auth(&tok)
                            .send()
                            .await;
                    }
                    // Released: this admission may not hold again (409 admission-ended).
                    return;
                }
                Ok(r) if r.status().is_server_error() => {
                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(_) => {
                    errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            free.lock().expect("tokens").push(tok);
        });
    }
    let started_wait = Instant::now();
    while tasks.join_next().await.is_some() {}
    let wall = secs as f64 + started_wait.elapsed().as_secs_f64();
    let h = hist.lock().expect("hist");
    Step {
        offered: rate,
        achieved: h.len() as f64 / wall,
        held: held.load(std::sync::atomic::Ordering::Relaxed) as f64 / wall,
        p99_ms: h.value_at_quantile(0.99) as f64 / 1000.0,
        errors: errors.load(std::sync::atomic::Ordering::Relaxed),
    }
}
