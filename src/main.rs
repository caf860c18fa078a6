//! `ticket-sale up`: the whole sale on a laptop. Starts the three services in one process on the
//! embedded defaults (in-memory queue, SQLite), creates a demo event that opens one minute later,
//! and prints one URL per service and where to read its secrets (never a secret it chose itself).

/// mimalloc rather than glibc malloc: many small short-lived allocations per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use ticket_sale::stack::{self, StackOptions};

#[derive(Debug, Parser)]
#[command(
    name = "ticket-sale",
    about = "Run a complete 10:00 ticket sale locally"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Starts the waiting room, the booking core and the gateway simulator, and a demo event.
    Up(UpArgs),
}

#[derive(Debug, clap::Args)]
struct UpArgs {
    /// Queue store: a Redis URL (default: in memory).
    #[arg(long)]
    redis: Option<String>,
    /// Booking database URL (default: a SQLite file `sale.db` in the current directory).
    #[arg(long, default_value = "sqlite://sale.db?mode=rwc")]
    database: String,
    /// Directory the waiting room's signing key and join-token key are kept in, created on the
    /// first start (mode 0700, files 0600), so fans' join and admission tokens stay valid across
    /// a restart with `--redis` (and the admission tokens with the in-memory queue too).
    #[arg(long, default_value = "sale.keys")]
    keys_dir: std::path::PathBuf,
    /// Waiting room listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    waiting_room: SocketAddr,
    /// Booking core listen address.
    #[arg(long, default_value = "127.0.0.1:8081")]
    booking: SocketAddr,
    /// Gateway simulator listen address.
    #[arg(long, default_value = "127.0.0.1:8082")]
    gateway: SocketAddr,
    /// Seconds until the demo event opens (at most one year: the admin API's bound on
    /// `opens_at`, API.md "Events").
    #[arg(long, default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(0..=waiting_room::http::admin::OPENS_AT_SPAN_SECS as u64))]
    opens_in: u64,
    /// Admissions per second for the demo event.
    #[arg(long, default_value_t = 5.0)]
    admit_rate: f64,
    /// Live admitted sessions at most for the demo event.
    #[arg(long, default_value_t = 100)]
    max_active: u64,
    /// Seats in the demo venue, at least: 5 sections (one per 1,500 seats above 7,500, at most
    /// 26) of whole rows of 20, so `--seats 5` gives 100 (one row in each section).
    #[arg(long, default_value_t = 600)]
    seats: u32,
    /// Places in a general-admission pool `FLOOR` of the demo show (0: none).
    #[arg(long, default_value_t = 0)]
    pool_places: u32,
    /// Venue file (JSON, booking-core/README.md) for the demo show instead of `--seats`,
    /// e.g. infra/venues/arena-20k.json.
    #[arg(long)]
    venue: Option<std::path::PathBuf>,
    /// Put the local CDN (nginx with proxy_cache, `infra/`) in front of the waiting room on
    /// this port; fans then start at the CDN's URL.
    #[arg(long)]
    cdn: Option<u16>,
    /// Directory the waiting room writes status documents to (default: a temporary one).
    #[arg(long)]
    status_dir: Option<std::path::PathBuf>,
    /// Also publish status documents to this S3 bucket; endpoint, region and credentials come
    /// from the standard AWS environment (`AWS_ENDPOINT_URL` for a local moto_server, …).
    #[arg(long)]
    s3_bucket: Option<String>,
    /// Key prefix of the S3 status objects.
    #[arg(long, default_value = "status/")]
    s3_prefix: String,
    /// With `--cdn` and `--s3-bucket`: the CDN serves `/status/` from S3 at this base URL
    /// (e.g. `http://127.0.0.1:5000`, path-style) instead of from the waiting room.
    #[arg(long, requires_all = ["cdn", "s3_bucket"])]
    cdn_status_from_s3: Option<String>,
    /// Admin bearer token for both services, at least 16 characters (default: a random one,
    /// written to a file whose path is printed).
    #[arg(long, env = "SALE_ADMIN_TOKEN")]
    admin_token: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let Command::Up(a) = Cli::parse().command;
    let mut opts = StackOptions::local_random_ports();
    opts.waiting_room_addr = a.waiting_room;
    opts.booking_addr = a.booking;
    opts.gateway_addr = a.gateway;
    opts.redis_url = a.redis;
    opts.database_url = a.database;
    opts.keys_dir = Some(a.keys_dir);
    opts.seats = a.seats;
    opts.pool_places = a.pool_places;
    opts.venue = a.venue;
    opts.status_dir = a.status_dir;
    opts.s3_bucket = a.s3_bucket.clone();
    opts.s3_prefix = a.s3_prefix.clone();
    let token_given = a.admin_token.is_some();
    if let Some(t) = a.admin_token {
        opts.admin_token = t;
    }
    opts.event = stack::DemoEvent {
        id: "demo".into(),
        opens_in_secs: a.opens_in,
        admit_rate: a.admit_rate,
        max_active: a.max_active,
        admission_ttl_secs: 600,
    };
    // Listening from here: a SIGTERM or Ctrl-C during start-up stops the sale right after it
    // has started (and its nginx with it), instead of killing this process and leaving nginx.
    let stop = sale_common::shutdown::signal();
    if let Some(port) = a.cdn {
        // Before anything starts (the other ports are checked by `stack::start`).
        ticket_sale::cdn::port_free(port).map_err(|e| {
            anyhow::anyhow!("binding the CDN on 127.0.0.1:{port} (choose another with --cdn): {e}")
        })?;
    }
    let s = stack::start(opts).await?;
    let cdn = match a.cdn {
        Some(port) => {
            let status_s3 = match (&a.cdn_status_from_s3, &a.s3_bucket) {
                (Some(base), Some(bucket)) => Some(format!(
                    "{}/{bucket}/{}",
                    base.trim_end_matches('/'),
                    a.s3_prefix
                )),
                _ => None,
            };
            Some(ticket_sale::cdn::Cdn::start_with_status(
                port,
                s.waiting_room_url.trim_start_matches("http://"),
                status_s3.as_deref(),
            )?)
        }
        None => None,
    };
    if let Some(c) = &cdn {
        println!("CDN (fans start here):          {}/?event=demo", c.url);
    }
    println!(
        "waiting room (fans start here): {}/?event=demo",
        s.waiting_room_url
    );
    println!(
        "status document:                {}/status/demo.json (files in {})",
        s.waiting_room_url,
        s.status_dir.display()
    );
    if let Some(b) = &a.s3_bucket {
        println!(
            "status document on S3:          s3://{b}/{}demo.json",
            a.s3_prefix
        );
    }
    println!("booking core:                   {}", s.booking_url);
    println!(
        "emails (confirmations, refunds): {} ({{kind}}-{{booking or hold id}}.eml, shared by every run)",
        s.mail_dir.display()
    );
    println!("payment gateway simulator:      {}", s.gateway_url);
    // Secrets the user did not choose are never printed, only where to read them.
    if token_given {
        println!(
            "admin token:                    the one given (--admin-token or SALE_ADMIN_TOKEN)"
        );
    } else {
        println!(
            "admin token:                    in {} (random for this run)",
            s.admin_token_file.display()
        );
    }
    println!(
        "webhook secret:                 in {} (the gateway's Gateway-Signature key, API.md; random for this run)",
        s.webhook_secret_file.display()
    );
    println!(
        "service token:                  in {} (the waiting room's /internal API, API.md; random for this run)",
        s.service_token_file.display()
    );
    println!(
        "the demo sale opens in {} s; press Ctrl-C to stop",
        a.opens_in
    );
    stop.await;
    // The edge drains first (its requests in flight still reach the running services), then
    // the services drain (case W13).
    if let Some(cdn) = cdn {
        let _ = tokio::task::spawn_blocking(move || drop(cdn)).await;
    }
    s.shutdown().await;
    Ok(())
}
