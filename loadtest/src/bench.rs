//! `loadtest bench`: every speed figure of issue 7 in one run, same client, same machine —
//! the waiting room's `/healthz` (the ceiling), join, status document, heartbeat, admission
//! claim, the booking door's admission-token check (`GET /api/me`), holds on one hot show, and
//! Redis memory per queued fan. Each is requests/s, a ratio to the ceiling, p50 and p99.
//!
//! The stack is spawned in this process (per-IP limits lifted). Phases feed each other: the
//! join phase's join tokens drive the heartbeat and claim phases; the claims' admission tokens
//! drive the door and hold phases.

mod admissions;
mod dbpath;
mod gen;
mod hotq;
mod phases;
mod raw;
mod redis_mem;
mod report;

use gen::Measured;
use std::path::PathBuf;
use std::time::Duration;

/// `bench` flags.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Worker threads of each spawned service's own runtime (0: they share the load
    /// generator's; default: one per CPU, as their own processes would have).
    #[arg(long)]
    pub service_threads: Option<usize>,
    /// Queue store: a Redis URL (default: in memory). Also where Redis memory is measured.
    #[arg(long)]
    pub redis: Option<String>,
    /// Booking database (`postgres://…` or `sqlite:…`; default: a fresh SQLite file).
    #[arg(long)]
    pub database: Option<String>,
    /// Where to write the figures as JSON.
    #[arg(long)]
    pub json: PathBuf,
    /// Measured seconds per figure (after a warm-up of a quarter of it, at most 1 s).
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Concurrent closed-loop connections.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Visitors joined for the Redis memory figure (a temporary redis-server without --redis).
    #[arg(long, default_value_t = 1_000_000)]
    pub memory_fans: u64,
    /// Seats of the hot block every hold aims at.
    #[arg(long, default_value_t = 100)]
    pub hot_seats: usize,
    /// Seats per hold request on the hot show.
    #[arg(long, default_value_t = 2)]
    pub seats_per_hold: usize,
}

/// Everything one bench run measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchReport {
    /// `memory` or `redis`.
    pub queue_store: String,
    /// `sqlite` or `postgres`.
    pub database: String,
    /// Logical CPUs of this machine (client and servers share them).
    pub cpus: usize,
    /// Closed-loop connections.
    pub connections: usize,
    /// Measured seconds per figure.
    pub duration_secs: u64,
    /// The HTTP figures, ceiling first.
    pub figures: Vec<Figure>,
    /// Redis memory per queued fan.
    pub redis_memory: Option<redis_mem::MemFigure>,
    /// The database's raw guarded-update-plus-insert transaction rate (the hold figures'
    /// ceiling, DECISIONS "Booking core").
    pub raw_db: Option<raw::RawFigure>,
    /// Figures not measured, with the reason.
    pub skipped: Vec<String>,
}

/// One HTTP figure and its ratio to the ceiling.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figure {
    /// What was measured, with the generator's counts.
    #[serde(flatten)]
    pub m: Measured,
    /// `rps` / the ceiling's `rps`.
    pub ratio: f64,
    /// How the figure was produced.
    pub note: String,
}

/// Runs the benchmark; `Ok(true)` when every figure was measured with answers.
pub async fn run(args: BenchArgs) -> anyhow::Result<bool> {
    let duration = Duration::from_secs(args.duration.max(1));
    let warmup = (duration / 4).min(Duration::from_secs(1));
    let mut opts = ticket_sale::stack::StackOptions::local_random_ports();
    opts.redis_url = args.redis.clone();
    opts.database_url = args.database.clone().unwrap_or_default();
    opts.service_threads = crate::service_threads(args.service_threads);
    opts.seats = 2000;
    // The hot pool: big enough that no phase runs it out (its holds are kept, not released).
    opts.pool_places = 1_000_000;
    (opts.join_rate_per_sec, opts.join_burst) = (1_000_000_000, 1_000_000_000);
    (opts.fan_rate_per_sec, opts.fan_burst) = (1_000_000_000, 1_000_000_000);
    // Each benchmark worker holds again and again with one admission token.
    opts.hold_rate_per_min = 1_000_000_000;
    opts.event = ticket_sale::stack::DemoEvent {
        id: "bench".into(),
        opens_in_secs: 0,
        admit_rate: 1.0,
        max_active: 100_000_000,
        admission_ttl_secs: 3600,
    };
    if let Some(url) = args
        .database
        .as_deref()
        .filter(|u| u.starts_with("postgres"))
    {
        // A database kept from an earlier run still has that run's last holds (live for an
        // hour): they would hold most of the hot block and every figure would measure 409s.
        dbpath::release_leftovers(url, "bench").await?;
    }
    let stack = ticket_sale::stack::start(opts).await?;
    println!(
        "bench: waiting room {} ({}), booking {} ({}), {} connections, {} s per figure",
        stack.waiting_room_url,
        if args.redis.is_some() {
            "Redis"
        } else {
            "in memory"
        },
        stack.booking_url,
        db_kind(&args.database),
        args.connections,
        duration.as_secs()
    );
    let ctx = phases::Ctx::new(&stack, &args, warmup, duration)?;
    let result = phases::all(&ctx).await;
    stack.shutdown().await;
    let (mut measured, mut skipped) = result?;
    println!(
        "measuring the hold path below HTTP (no door), concurrent transactions and hold queue…"
    );
    match dbpath::measure(args.database.as_deref(), args.connections, warmup, duration).await {
        Ok(figures) => measured.extend(figures),
        Err(e) => skipped.push(format!("hold path below HTTP: {e:#}")),
    }
    let ceiling = measured
        .first()
        .map(|(m, _)| m.rps)
        .unwrap_or(0.0)
        .max(1e-9);
    let figures: Vec<Figure> = measured
        .into_iter()
        .map(|(m, note)| Figure {
            ratio: m.rps / ceiling,
            m,
            note,
        })
        .collect();
    println!("measuring the database's raw guarded-update-plus-insert transactions…");
    let raw_db = match raw::measure(args.database.as_deref(), duration).await {
        Ok(r) => Some(r),
        Err(e) => {
            skipped.push(format!("raw database transactions: {e:#}"));
            None
        }
    };
    let redis_memory = match memory(&args).await {
        Ok(m) => Some(m),
        Err(e) => {
            skipped.push(format!("Redis memory per fan: {e:#}"));
            None
        }
    };
    let report = BenchReport {
        queue_store: if args.redis.is_some() {
            "redis"
        } else {
            "memory"
        }
        .into(),
        database: db_kind(&args.database).into(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        connections: args.connections,
        duration_secs: duration.as_secs(),
        figures,
        redis_memory,
        raw_db,
        skipped,
    };
    println!("{}", report::table(&report));
    if let Some(dir) = args.json.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&args.json, serde_json::to_vec_pretty(&report)?)?;
    println!("wrote {}", args.json.display());
    let complete = report
        .figures
        .iter()
        .all(|f| f.m.rps > 0.0 && f.m.errors == 0)
        && report.redis_memory.is_some();
    Ok(complete)
}

fn db_kind(url: &Option<String>) -> &'static str {
    match url.as_deref() {
        Some(u) if u.starts_with("postgres") => "postgres",
        _ => "sqlite",
    }
}

/// Redis memory per fan on `--redis`, or on a temporary `redis-server`.
async fn memory(args: &BenchArgs) -> anyhow::Result<redis_mem::MemFigure> {
    println!(
        "measuring Redis memory for {} queued fans…",
        args.memory_fans
    );
    let temp;
    let url = match &args.redis {
        Some(u) => u.clone(),
        None => {
            anyhow::ensure!(
                std::process::Command::new("redis-server")
                    .arg("--version")
                    .output()
                    .is_ok(),
                "no --redis and no redis-server on PATH"
            );
            temp = sale_common::testsupport::RedisServer::start();
            temp.url()
        }
    };
    redis_mem::measure(&url, args.memory_fans, 256).await
}
