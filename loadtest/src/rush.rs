//! `loadtest rush`: N fans join before opening, wait their turn, claim admission, hold seats
//! and pay, cancel or walk away; then every invariant check is printed PASS/FAIL.

use crate::checks::{self, BackOffice};
use crate::fan;
use crate::model::{Check, FanOutcome, Target};
use crate::stats::Stats;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `rush` flags. Every figure has a default sized for a laptop run.
#[derive(Debug, clap::Args)]
pub struct RushArgs {
    /// Start the services in this process on random ports (embedded defaults, or `--redis`).
    #[arg(long)]
    spawn: bool,
    /// Worker threads of each spawned service's own runtime (with `--spawn`; 0: they share
    /// the fans' runtime; default: one per CPU, as their own processes would have).
    #[arg(long)]
    service_threads: Option<usize>,
    /// Nice value of the fans' runtime threads (−20 … 19; 0: leave it): fans' browsers run on
    /// machines of their own, so the generator should not queue behind the services and the
    /// database it measures (`crate::lateness`). Raising a priority needs root or
    /// `CAP_SYS_NICE`; without, the run goes on at 0 and says so.
    #[arg(
        long,
        default_value_t = crate::lateness::GENERATOR_NICE,
        allow_hyphen_values = true,
        value_parser = clap::value_parser!(i32).range(-20..=19)
    )]
    pub generator_nice: i32,
    /// Number of synthetic fans.
    #[arg(long, default_value_t = 1000)]
    fans: usize,
    /// Seats in the show's venue (with `--spawn`).
    #[arg(long, default_value_t = 600)]
    seats: u32,
    /// Places in a general-admission pool `FLOOR` of the spawned show (0: none).
    #[arg(long, default_value_t = 0)]
    pool_places: u32,
    /// Venue file for the spawned show instead of `--seats` (e.g. infra/venues/arena-20k.json).
    #[arg(long)]
    venue: Option<std::path::PathBuf>,
    /// Share of fans who hold "best available N together" in a section.
    #[arg(long, default_value_t = 0.0)]
    best_available_share: f64,
    /// Share of fans who hold places in a general-admission pool.
    #[arg(long, default_value_t = 0.0)]
    pool_share: f64,
    /// Share of fans who add an interval resource (a random kind of the venue's `resources`,
    /// a free interval of one or two slots) to their seats in one all-or-nothing hold; needs a
    /// venue with resources (e.g. `--venue infra/venues/club-240-resources.json`).
    #[arg(long, default_value_t = 0.0)]
    interval_share: f64,
    /// Queue store for the spawned waiting room: a Redis URL (default: in memory).
    #[arg(long)]
    redis: Option<String>,
    /// Admissions per second (with `--spawn`).
    #[arg(long, default_value_t = 400.0)]
    admit_rate: f64,
    /// Live admitted sessions at most (with `--spawn`).
    #[arg(long, default_value_t = 500)]
    max_active: u64,
    /// Admission token lifetime, seconds (with `--spawn`).
    #[arg(long, default_value_t = 20)]
    admission_ttl: u64,
    /// Seconds from start until the sale opens (with `--spawn`; default: enough to join everyone).
    #[arg(long)]
    opens_in: Option<u64>,
    /// A cluster started by `infra/cluster/up --dir DIR`: the fans go through its CDN and its
    /// booking-core balancer, the admin token and the gateway come from `DIR/state.json`. The
    /// event is `--event`, else the first of `up --show`'s shows (created in the waiting room
    /// now, opening in `--opens-in` s, with `--admit-rate`, `--max-active`, `--admission-ttl`),
    /// else `up`'s own event while it is still in its pre-queue.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["spawn", "waiting_room", "booking"])]
    cluster: Option<std::path::PathBuf>,
    /// With `--cluster`: play a chaos schedule during the rush (`builtin`, or a JSON file of
    /// `{"at_secs", "action"}` steps; see `loadtest/src/chaos.rs`) and add the chaos checks.
    #[arg(long, value_name = "FILE|builtin", requires = "cluster")]
    chaos: Option<String>,
    /// Waiting room URL (without `--spawn`).
    #[arg(long)]
    waiting_room: Option<String>,
    /// Booking core URL (without `--spawn`).
    #[arg(long)]
    booking: Option<String>,
    /// Admin bearer token of both services (without `--spawn`).
    #[arg(long, env = "SALE_ADMIN_TOKEN")]
    admin_token: Option<String>,
    /// Event id (= show id).
    #[arg(long, default_value = "rush")]
    event: String,
    /// `--event` was given on the command line (set from the matches).
    #[arg(skip)]
    event_given: bool,
    /// `max_active` of the targeted event (without `--spawn`, for the check).
    #[arg(long)]
    expect_max_active: Option<u64>,
    /// Status-document poll interval per waiting fan, milliseconds.
    #[arg(long, default_value_t = 1000)]
    poll_ms: u64,
    /// Share of fans who pay.
    #[arg(long, default_value_t = 0.7)]
    pay_share: f64,
    /// Share of fans who cancel at checkout.
    #[arg(long, default_value_t = 0.15)]
    cancel_share: f64,
    /// HTTP calls in flight at most.
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// Give up on the run after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// Fans read the status document from one shared poller (every `--poll-ms` ÷ 4), as a CDN
    /// answers them all with one copy, instead of each fetching its own (`true`/`false`).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    shared_status: bool,
    /// The show's holds go through the booking core's per-show hold queue (with `--spawn`;
    /// `true`/`false`).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    hold_queue: bool,
    /// The stock rule on the spawned event (its closed loop with the rate pinned at
    /// `--admit-rate`, read every second): the line waits while nothing can be held but seats
    /// sit in live holds; adds the check that no fan was let in to such an empty map.
    #[arg(long, requires = "spawn")]
    stock_rule: bool,
    /// Adds that check (and its stock reads) without switching the rule on: the control run
    /// that shows fans let in to an empty map.
    #[arg(long)]
    check_stock: bool,
    /// No progress bar (CI logs).
    #[arg(long)]
    quiet: bool,
    /// Booking database for the spawned stack (`postgres://…` or `sqlite:…`; default: a fresh
    /// SQLite file).
    #[arg(long)]
    database: Option<String>,
    /// Gateway simulator: share of executes that fail (with `--spawn`).
    #[arg(long, default_value_t = 0.0)]
    fail_rate: f64,
    /// Gateway simulator: share of Pay clicks that end cancelled (with `--spawn`).
    #[arg(long, default_value_t = 0.0)]
    cancel_rate: f64,
    /// Gateway simulator: share of executes that time out (completed, answered late).
    #[arg(long, default_value_t = 0.0)]
    timeout_rate: f64,
    /// Gateway simulator: share of webhooks delivered twice.
    #[arg(long, default_value_t = 0.0)]
    duplicate_webhook_rate: f64,
    /// Rehearsal flags: profile, behaviour mix, late arrivals, report folder.
    #[command(flatten)]
    rehearsal: crate::rehearsal::RehearsalArgs,
}

mod profile;

/// Fills the figures the command line left unset from `--profile`.
pub fn apply_profile(args: &mut RushArgs, m: &clap::ArgMatches) {
    args.event_given = matches!(
        m.value_source("event"),
        Some(clap::parser::ValueSource::CommandLine)
    );
    profile::apply(args, m);
}

/// What `prepare` sets up: the spawned stack or the cluster, where the fans go, the admin
/// token, the event's `max_active`, the gateway, and the seconds until the sale opens.
struct Prepared {
    stack: Option<ticket_sale::stack::Stack>,
    cluster: Option<std::sync::Arc<crate::cluster::Cluster>>,
    target: Target,
    admin_token: String,
    max_active: u64,
    gateway: Option<String>,
    opens_in: u64,
}

/// The stock rule's closed-loop interval with `--stock-rule`, seconds.
const STOCK_RULE_INTERVAL_SECS: u64 = 1;

/// Runs the rush; `Ok(true)` when every check passed.
pub async fn run(args: RushArgs) -> anyhow::Result<bool> {
    let started = Instant::now();
    let Prepared {
        stack,
        cluster,
        target,
        admin_token,
        max_active,
        gateway,
        opens_in,
    } = prepare(&args).await?;
    let schedule = match &args.chaos {
        Some(spec) => Some(crate::chaos::load(spec, opens_in)?),
        None => None,
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(args.concurrency)
        .timeout(Duration::from_secs(30))
        .build()?;
    crate::calls::set_concurrency(args.concurrency);
    let stats = Arc::new(Stats::default());
    crate::timeline::start(started);
    let probe = crate::lateness::spawn();
    let mut target = target;
    let poller = args.shared_status.then(|| {
        let (rx, task) = fan::spawn_status_poller(
            client.clone(),
            stats.clone(),
            format!("{}/status/{}.json", target.waiting_room, target.event),
            Duration::from_millis((args.poll_ms / 4).max(50)),
            started,
        );
        target.shared_status = Some(rx);
        task
    });
    let target = Arc::new(target);
    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.fans as u64)
    };
    bar.set_style(ProgressStyle::with_template(
        "{elapsed} [{bar:40}] {pos}/{len} fans done {msg}",
    )?);
    let sampler = crate::timeline::Sampler::spawn(
        client.clone(),
        &target.waiting_room,
        &target.event,
        &admin_token,
        Duration::from_secs(1),
    );
    let stock = (args.stock_rule || args.check_stock).then(|| {
        crate::stock::Poller::spawn(
            client.clone(),
            &target.booking,
            &target.event,
            &admin_token,
            Duration::from_millis(100),
            started,
        )
    });
    let late = late_starts(&client, &target, &args).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(args.fans - late.len()));
    let deadline = started + Duration::from_secs(args.timeout);
    let chaos_ctx = cluster.clone().map(|c| crate::chaos::Ctx {
        cluster: c,
        client: client.clone(),
        stats: stats.clone(),
        event: target.event.clone(),
        started,
    });
    let chaos = match (&chaos_ctx, schedule) {
        (Some(ctx), Some(steps)) => Some(crate::chaos::spawn(ctx.clone(), steps)),
        _ => None,
    };
    let mut tasks = tokio::task::JoinSet::new();
    for i in fan::shuffled(args.fans) {
        let late_by = late.get(i).copied();
        let (c, t, s, b, bar) = (
            client.clone(),
            target.clone(),
            stats.clone(),
            (late_by.is_none()).then(|| barrier.clone()),
            bar.clone(),
        );
        tasks.spawn(async move {
            let out = fan::run_fan(c, t, s, started, b, deadline, late_by).await;
            bar.inc(1);
            out
        });
    }
    let mut fans: Vec<FanOutcome> = Vec::with_capacity(args.fans);
    while let Some(r) = tasks.join_next().await {
        fans.push(r?);
    }
    bar.finish();
    if let Some(p) = poller {
        p.abort();
    }
    let stock_reads = match stock {
        Some(p) => Some(p.finish().await),
        None => None,
    };
    let wall = started.elapsed();
    let (parsed, reused, not_modified) = crate::picks::Maps::shared().counts();
    println!(
        "seat maps and overviews read by the fans: {} answers, {parsed} parsed, {reused} the \
         same bytes as the last one parsed for their URL (picks::Maps), {not_modified} answered \
         304 to the fan's own copy (picks::Kept)",
        parsed + reused + not_modified
    );
    // The schedule may outlast the fans: let it finish before anything is read back.
    let chaos_report = match chaos {
        Some(task) => {
            println!("fans done after {:.1} s", started.elapsed().as_secs_f64());
            let mut report = task.await?;
            println!(
                "chaos schedule done after {:.1} s",
                started.elapsed().as_secs_f64()
            );
            if let (false, Some(ctx)) = (report.failover.is_empty(), &chaos_ctx) {
                let p = crate::chaos::probe(ctx).await;
                report.failover.push(("at the end of the run".into(), p));
            }
            Some(report)
        }
        None => None,
    };
    let office = back_office(&client, &target, &admin_token).await?;
    let hold_busy = print_figures(&fans, &stats, wall);
    match crate::lateness::priority() {
        Some(Ok(nice)) => println!(
            "the fans' runtime threads ran at nice {nice} (--generator-nice), the services' and \
             the database's at their own"
        ),
        Some(Err(why)) => println!(
            "the fans' runtime threads ran at the services' priority ({why}: needs root or \
             CAP_SYS_NICE): the latencies include the generator's own queueing"
        ),
        None => {}
    }
    if let Some(l) = probe.finish(hold_busy.as_ref().map(|b| (b.from_ms, b.to_ms))) {
        println!(
            "the load generator's own lateness during the rush: a {} ms timer of the fans' \
             runtime woke p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms late ({} wake-ups); every \
             latency above includes such waits (crate::lateness)",
            crate::lateness::TICK.as_millis(),
            l.p50_ms,
            l.p99_ms,
            l.max_ms,
            l.samples
        );
    }
    let mut results = checks::run(&fans, max_active, &office, stats.totals());
    results.extend(money_checks(&client, &target, &admin_token, gateway.as_deref()).await?);
    sold_out_told(&client, &target, &office.stats).await;
    let samples = sampler.finish().await;
    results.extend(crate::rehearsal::checks(&fans, &samples, &office.stats));
    let cursor: Vec<(u64, u64)> = samples.iter().map(|x| (x.t_ms, x.cursor)).collect();
    let estimate = crate::wait_range::summarize(&fans, &cursor);
    println!("{}", estimate.line());
    let enforced = args.rehearsal.profile == Some(crate::rehearsal::Profile::Seed);
    results.extend(crate::wait_range::checks(&estimate, enforced));
    if let Some(reads) = &stock_reads {
        // The rule's reaction time: one loop interval, two admitter ticks, one stock read;
        // plus the age of the status document through which a fan sees its turn (at most one
        // periodic publish old: a fan can first read a cursor below it after the admitter has
        // passed it). Without it a fan admitted just inside the reaction time could be counted
        // as let in after it (CI saw one 1.3 s into a window against 1,300 ms).
        let wr = waiting_room::Config::demo("stock", 0, "");
        let reaction_ms =
            STOCK_RULE_INTERVAL_SECS * 1000 + 2 * wr.tick_ms + 100 + wr.status_throttle_ms;
        results.push(crate::stock::check(&fans, reads, reaction_ms));
    }
    if let (Some(report), Some(c)) = (&chaos_report, &cluster) {
        crash_apart(&mut results, &stats, crate::chaos::crash_errors(report));
        results.extend(crate::chaos::checks(report, &c.store));
    }
    let report_dir = args.rehearsal.report_dir();
    let timeline = crate::rehearsal::timeline(&fans, samples);
    let mut all = true;
    for c in &results {
        println!(
            "{} {}: {}",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.detail
        );
        all &= c.pass;
    }
    if let Some(dir) = report_dir {
        let mut figures = headline(&fans, wall, hold_busy);
        figures["wait_estimate"] = estimate.figures();
        // The generator's windows: with the machine saturated, an endpoint's latency is the
        // calls in flight over the calls answered a second (Little's law), so a latency figure
        // is read beside the window it was measured at.
        figures["calls_in_flight_at_most"] = serde_json::json!({
            "queue_and_holds": args.concurrency,
            "checkout": crate::calls::checkout_permits(args.concurrency),
        });
        crate::report::write(&dir, &figures, &stats.rows(wall), &results, &timeline)?;
        std::fs::write(
            dir.join("wait_samples.csv"),
            crate::wait_range::samples_csv(&fans),
        )?;
        println!("report: {}", dir.display());
    }
    if let Some(stack) = stack {
        stack.shutdown().await;
    }
    Ok(all)
}

/// With a chaos schedule: the server-error check counts the errors answered while a process was
/// killed with -9 apart (a crash loses what it was serving), and says how many.
fn crash_apart(results: &mut [Check], stats: &Stats, crash: u64) {
    let t = stats.totals();
    let Some(c) = results
        .iter_mut()
        .find(|c| c.name.starts_with("server errors below"))
    else {
        return;
    };
    let outside = t.server_errors.saturating_sub(crash);
    c.pass = outside == 0 || (t.calls > 0 && (outside as f64) < 0.0001 * t.calls as f64);
    c.detail = format!(
        "{outside} of {} calls outside the kill -9 window ({crash} answered while a process was \
         killed with -9: a crash loses what it was serving; the fans retried); {}",
        t.calls, c.detail
    );
}

/// When every seat is sold, waits (at most 30 s, the booking core's outbox retrying through
/// restarts) until the waiting room says `sold_out`, so the sampler records it: the last seat
/// may sell as the last fan leaves, and the notice is sent at least once, not at once.
async fn sold_out_told(client: &reqwest::Client, target: &Target, stats: &serde_json::Value) {
    let capacity = stats["capacity"].as_u64().unwrap_or(0);
    if capacity == 0 || stats["sold"].as_u64().unwrap_or(0) < capacity {
        return;
    }
    let url = format!("{}/status/{}.json", target.waiting_room, target.event);
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        let state = match client.get(&url).send().await {
            Ok(r) => r.json::<serde_json::Value>().await.unwrap_or_default()["state"].clone(),
            Err(_) => serde_json::Value::Null,
        };
        if state == "sold_out" {
            // One more sample interval, so the sampler sees it too.
            tokio::time::sleep(Duration::from_millis(1100)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Sets the gateway simulator's fault rates from the flags.
async fn set_faults(args: &RushArgs, gateway: &str) -> anyhow::Result<()> {
    let faults = serde_json::json!({"fail_rate": args.fail_rate, "cancel_rate": args.cancel_rate,
        "execute_timeout_rate": args.timeout_rate, "duplicate_webhook_rate": args.duplicate_webhook_rate});
    reqwest::Client::new()
        .post(format!("{gateway}/v1/faults"))
        .json(&faults)
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

async fn prepare(args: &RushArgs) -> anyhow::Result<Prepared> {
    let target_of = |wr: String, bc: String, event: String| Target {
        waiting_room: wr,
        booking: bc,
        event,
        poll_ms: args.poll_ms,
        pay_share: args.pay_share,
        cancel_share: args.cancel_share,
        mix: args.rehearsal.mix(),
        picks: crate::model::Shares {
            best_available: args.best_available_share,
            pool: args.pool_share,
            interval: args.interval_share,
        },
        shared_status: None,
    };
    let target = |wr: String, bc: String| target_of(wr, bc, args.event.clone());
    let default_opens_in = args.opens_in.unwrap_or(2 + args.fans as u64 / 1500);
    if let Some(dir) = &args.cluster {
        let c = crate::cluster::Cluster::load(dir)?;
        let event = if args.event_given {
            args.event.clone()
        } else {
            c.shows.first().cloned().unwrap_or_else(|| c.event.clone())
        };
        let client = reqwest::Client::new();
        let new = crate::cluster::NewEvent {
            opens_in: default_opens_in,
            admit_rate: args.admit_rate,
            max_active: args.max_active,
            admission_ttl: args.admission_ttl,
        };
        let (max_active, opens_at) =
            crate::cluster::prepare_event(&client, &c, &event, new).await?;
        set_faults(args, &c.gateway).await?;
        crate::cluster::wait_for_status(&client, &c, &event).await?;
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let opens_in = (opens_at - now).max(0) as u64;
        println!(
            "cluster {}: fans through the CDN {}  booking {}  gateway {}  event {event} (store {}, sale opens in {opens_in} s)",
            c.dir.display(),
            c.cdn,
            c.booking,
            c.gateway,
            c.store
        );
        return Ok(Prepared {
            stack: None,
            target: target_of(c.cdn.clone(), c.booking.clone(), event),
            admin_token: c.admin_token.clone(),
            max_active,
            gateway: Some(c.gateway.clone()),
            cluster: Some(std::sync::Arc::new(c)),
            opens_in,
        });
    }
    if args.spawn {
        let opens_in = default_opens_in;
        let mut opts = ticket_sale::stack::StackOptions::local_random_ports();
        opts.redis_url = args.redis.clone();
        opts.seats = args.seats;
        opts.pool_places = args.pool_places;
        opts.hold_queue = args.hold_queue;
        opts.service_threads = crate::service_threads(args.service_threads);
        opts.venue = args.venue.clone();
        // Every synthetic fan shares 127.0.0.1: lift the per-IP limits for this run.
        opts.join_rate_per_sec = 1_000_000;
        opts.join_burst = 1_000_000;
        opts.fan_rate_per_sec = 1_000_000;
        opts.fan_burst = 1_000_000;
        opts.hold_rate_per_min = 1_000_000;
        opts.event = ticket_sale::stack::DemoEvent {
            id: args.event.clone(),
            opens_in_secs: opens_in,
            admit_rate: args.admit_rate,
            max_active: args.max_active,
            admission_ttl_secs: args.admission_ttl,
        };
        opts.database_url = args.database.clone().unwrap_or_default();
        if let Some(t) = args.rehearsal.hold_ttl {
            opts.hold_ttl_secs = t;
        }
        if let Some(t) = args.rehearsal.payment_session {
            opts.payment_session_secs = t;
        }
        if args.stock_rule {
            opts.closed_loop = Some(serde_json::from_value(serde_json::json!({
                "min_rate": args.admit_rate, "max_rate": args.admit_rate,
                "interval_secs": STOCK_RULE_INTERVAL_SECS
            }))?);
        }
        let stack = ticket_sale::stack::start(opts).await?;
        // A Redis that already holds this event (an earlier run) would make this run a
        // continuation: no pre-queue, no shuffle, stale figures. Refuse it.
        let doc: serde_json::Value = reqwest::Client::new()
            .get(format!(
                "{}/status/{}.json",
                stack.waiting_room_url, args.event
            ))
            .send()
            .await?
            .json()
            .await?;
        if doc["state"] != "prequeue" {
            stack.shutdown().await;
            anyhow::bail!(
                "event {:?} is already {} at its first status read: either this store holds it from an \
                 earlier run (use a fresh Redis or another --event), or the services took longer \
                 than --opens-in to start (give it more)",
                args.event,
                doc["state"]
            );
        }
        set_faults(args, &stack.gateway_url).await?;
        println!(
            "spawned: waiting room {}  booking {}  gateway {}  (sale opens in {opens_in} s)",
            stack.waiting_room_url, stack.booking_url, stack.gateway_url
        );
        let t = target(stack.waiting_room_url.clone(), stack.booking_url.clone());
        let token = stack.admin_token.clone();
        return Ok(Prepared {
            admin_token: token,
            target: t,
            max_active: args.max_active,
            gateway: Some(stack.gateway_url.clone()),
            stack: Some(stack),
            cluster: None,
            opens_in,
        });
    }
    let (Some(wr), Some(bc)) = (args.waiting_room.clone(), args.booking.clone()) else {
        anyhow::bail!("give --spawn, --cluster DIR, or --waiting-room URL and --booking URL");
    };
    let token = args
        .admin_token
        .clone()
        .ok_or_else(|| anyhow::anyhow!("--admin-token is required without --spawn"))?;
    let max_active = args
        .expect_max_active
        .ok_or_else(|| anyhow::anyhow!("--expect-max-active is required without --spawn"))?;
    Ok(Prepared {
        stack: None,
        cluster: None,
        target: target(wr, bc),
        admin_token: token,
        max_active,
        gateway: None,
        opens_in: 0,
    })
}

async fn back_office(
    client: &reqwest::Client,
    t: &Target,
    token: &str,
) -> anyhow::Result<BackOffice> {
    let get = |path: String| {
        let client = client.clone();
        let token = token.to_owned();
        async move {
            let r = client
                .get(path)
                .bearer_auth(token)
                .send()
                .await?
                .error_for_status()?;
            anyhow::Ok(r.json::<serde_json::Value>().await?)
        }
    };
    // Holds keep lapsing after the fans are gone (a lapsed hold counts free in both reads), so
    // the counts and the map are taken between two equal reads of the counts: a lapse or a
    // late write between them shows as a difference, and the reads are taken again.
    let stats_url = format!("{}/admin/shows/{}/stats", t.booking, t.event);
    let mut tries = 0;
    let (stats, map) = loop {
        tries += 1;
        let before = get(stats_url.clone()).await?;
        let map = get(format!("{}/api/shows/{}/seats", t.booking, t.event)).await?;
        let after = get(stats_url.clone()).await?;
        if before == after || tries == 10 {
            break (after, map);
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let bookings = get(format!("{}/admin/shows/{}/bookings", t.booking, t.event)).await?;
    let waiting_room = get(format!("{}/admin/events/{}", t.waiting_room, t.event)).await?;
    let bookings = match bookings {
        serde_json::Value::Array(v) => v,
        other => other["bookings"].as_array().cloned().unwrap_or_default(),
    };
    // Pool bookings are listed too (with `pool`); the checks count them from the pool figures.
    let bookings = bookings
        .into_iter()
        .filter(|b| b.get("pool").is_none())
        .collect();
    Ok(BackOffice {
        stats,
        bookings,
        seatmap_available: map["available"].as_u64().unwrap_or(u64::MAX),
        pools: crate::picks::pool_office(client, t, token, &map).await?,
        claims: get(format!(
            "{}/admin/shows/{}/resources/claims",
            t.booking, t.event
        ))
        .await?,
        waiting_room,
    })
}

/// After the outbox drained (at most 60 s): "every completed payment has exactly one booking or
/// one refund" (from the simulator's payment list, with `--spawn`) and "emails sent = bookings".
async fn money_checks(
    client: &reqwest::Client,
    t: &Target,
    token: &str,
    gateway: Option<&str>,
) -> anyhow::Result<Vec<Check>> {
    let get = |url: String, auth: bool| {
        let req = if auth {
            client.get(url).bearer_auth(token)
        } else {
            client.get(url)
        };
        async move {
            anyhow::Ok(
                req.send()
                    .await?
                    .error_for_status()?
                    .json::<serde_json::Value>()
                    .await?,
            )
        }
    };
    let mut outbox = serde_json::Value::Null;
    for _ in 0..120 {
        outbox = get(
            format!("{}/admin/shows/{}/outbox", t.booking, t.event),
            true,
        )
        .await?;
        if outbox["emails_pending"].as_u64() == Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let bookings = get(
        format!("{}/admin/shows/{}/bookings", t.booking, t.event),
        true,
    )
    .await?;
    let mut booked: std::collections::HashSet<String> = bookings
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["hold_id"].as_str().map(str::to_owned))
        .collect();
    booked.extend(crate::picks::paid_pool_holds(client, t, token).await?);
    let payments = match gateway {
        Some(g) => Some(get(format!("{g}/v1/sim/payments"), false).await?),
        None => None,
    };
    Ok(checks::money(&booked, &outbox, payments.as_ref()))
}

fn span_rate(mut times_ms: Vec<u64>) -> (usize, f64) {
    times_ms.sort_unstable();
    let n = times_ms.len();
    let span = match (times_ms.first(), times_ms.last()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1000.0,
        _ => 0.0,
    };
    (
        n,
        if span > 0.0 {
            n as f64 / span
        } else {
            n as f64
        },
    )
}

/// Prints the run's figures; answers the hold calls' busy span ([`crate::timeline::busy_rate`],
/// read here: the report's timeline takes the recorded calls afterwards).
fn print_figures(
    fans: &[FanOutcome],
    stats: &Stats,
    wall: Duration,
) -> Option<crate::timeline::Busy> {
    let (admitted, adm_rate) = span_rate(fans.iter().filter_map(|f| f.admitted_at_ms).collect());
    let holds = fans.iter().filter(|f| f.hold.is_some()).count();
    let paid = fans.iter().filter(|f| f.paid).count();
    let cancelled = fans.iter().filter(|f| f.cancelled).count();
    let conflicts: u32 = fans.iter().map(|f| f.conflicts).sum();
    let sold_out = fans
        .iter()
        .filter(|f| f.gave_up.as_deref() == Some("sold out"))
        .count();
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for f in fans.iter().filter_map(|f| f.gave_up.as_ref()) {
        *reasons.entry(f.clone()).or_default() += 1;
    }
    println!("\n== rush figures ({:.1} s wall) ==", wall.as_secs_f64());
    println!("fans {}  admitted {admitted} ({adm_rate:.0}/s measured)  holds {holds}  paid {paid}  cancelled {cancelled}  409s {conflicts}  found sold out {sold_out}", fans.len());
    for (r, n) in &reasons {
        println!("  stopped early: {r} × {n}");
    }
    println!("{}", stats.table(wall));
    let busy = crate::timeline::busy_rate("hold");
    if let Some(b) = busy {
        println!(
            "hold calls during the rush: {:.1}/s ({} calls sent between {:.1} s and {:.1} s, \
             the 1st to the 99th percentile of their sending times; the table divides by the wall)",
            b.per_sec,
            b.calls,
            b.from_ms as f64 / 1000.0,
            b.to_ms as f64 / 1000.0
        );
    }
    busy
}

/// Late arrivals: the first `late_share × fans` fan indices (fans are started in a shuffled
/// order) join after the sale opens, spread uniformly over `late_window` seconds. The opening
/// time comes from the status document.
async fn late_starts(client: &reqwest::Client, t: &Target, args: &RushArgs) -> Vec<Duration> {
    let n = ((args.fans as f64) * args.rehearsal.late_share.clamp(0.0, 0.9)) as usize;
    if n == 0 {
        return Vec::new();
    }
    let doc: serde_json::Value = match client
        .get(format!("{}/status/{}.json", t.waiting_room, t.event))
        .send()
        .await
    {
        Ok(r) => r.json().await.unwrap_or_default(),
        Err(_) => serde_json::Value::Null,
    };
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let opens_in = (doc["opens_at"].as_i64().unwrap_or(now) - now).max(0) as u64;
    let window_ms = args.rehearsal.late_window.max(1) * 1000;
    (0..n)
        .map(|_| {
            let extra = rand::random::<u64>() % window_ms;
            Duration::from_millis(opens_in * 1000 + 500 + extra)
        })
        .collect()
}

/// The run's headline figures for the report.
fn headline(
    fans: &[FanOutcome],
    wall: Duration,
    hold_busy: Option<crate::timeline::Busy>,
) -> serde_json::Value {
    let count = |f: &dyn Fn(&FanOutcome) -> bool| fans.iter().filter(|x| f(x)).count();
    let mut behaviours = std::collections::BTreeMap::<String, usize>::new();
    for f in fans {
        *behaviours
            .entry(format!("{:?}/{:?}", f.behaviour.hold, f.behaviour.checkout))
            .or_default() += 1;
    }
    serde_json::json!({
        "wall_secs": wall.as_secs_f64(),
        "fans": fans.len(),
        "late_arrivals": count(&|f| f.late_arrival),
        "admitted": count(&|f| f.admitted_at_ms.is_some()),
        "holds": count(&|f| f.hold.is_some()),
        "paid": count(&|f| f.paid),
        "cancelled": count(&|f| f.cancelled),
        "conflicts_409": fans.iter().map(|f| u64::from(f.conflicts)).sum::<u64>(),
        "found_sold_out": count(&|f| f.gave_up.as_deref() == Some("sold out")),
        "behaviours": behaviours,
        "hold_calls_per_sec_during_rush": hold_busy.map(|b| b.per_sec),
        "hold_to_paid_secs": hold_to_paid(fans),
    })
}

/// Seconds from a fan's 201 to its hold read back PAID, over the fans who press Pay at once
/// (`Checkout::Pay`; the slow and late payers wait on purpose): `{"fans","p50","p99"}`, `null`
/// when none paid. Four calls for the fan, each of which also waits for one of the load
/// generator's checkout permits ([`crate::calls::checkout_permits`]), a wait the calls' own
/// latencies leave out: this figure has it. Against the hold's and the payment's lifetimes
/// (the seed profile's 60 and 45 s) it says how close the payments ran to their deadlines.
pub fn hold_to_paid(fans: &[FanOutcome]) -> Option<serde_json::Value> {
    let mut secs: Vec<f64> = fans
        .iter()
        .filter(|f| f.behaviour.checkout == crate::model::Checkout::Pay)
        .filter_map(|f| Some(f.paid_at_ms?.saturating_sub(f.held_at_ms?) as f64 / 1000.0))
        .collect();
    if secs.is_empty() {
        return None;
    }
    secs.sort_by(f64::total_cmp);
    let at = |q: f64| secs[((secs.len() - 1) as f64 * q).round() as usize];
    Some(serde_json::json!({"fans": secs.len(), "p50": at(0.5), "p99": at(0.99)}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Behaviour, Checkout};

    fn fan(checkout: Checkout, held: Option<u64>, paid: Option<u64>) -> FanOutcome {
        FanOutcome {
            behaviour: Behaviour {
                checkout,
                ..Behaviour::default()
            },
            held_at_ms: held,
            paid_at_ms: paid,
            ..FanOutcome::default()
        }
    }

    /// Only fans who press Pay at once count (a slow payer waits on purpose), and only those
    /// who read their hold back PAID.
    #[test]
    fn hold_to_paid_counts_prompt_payers_who_paid() {
        let fans = [
            fan(Checkout::Pay, Some(1_000), Some(3_000)),
            fan(Checkout::Pay, Some(1_000), Some(41_000)),
            fan(Checkout::Pay, Some(5_000), Some(6_000)),
            fan(Checkout::Pay, Some(5_000), None),
            fan(Checkout::PaySlowly, Some(0), Some(90_000)),
        ];
        let got = hold_to_paid(&fans).expect("three paid");
        assert_eq!(got["fans"], 3);
        assert_eq!(got["p50"], 2.0);
        assert_eq!(got["p99"], 40.0);
        assert_eq!(hold_to_paid(&fans[3..]), None);
    }
}
