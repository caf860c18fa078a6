//! Thin binary: flags → [`booking_core::Config`], telemetry, serve until SIGTERM or SIGINT
//! (then drain: case W13).

/// mimalloc rather than glibc malloc: many small short-lived allocations per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;

use booking_core::{Config, ShowConfig, Venue};
use clap::Parser;
use sale_common::Secret;

/// Booking core.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081", env = "BOOKING_LISTEN")]
    listen: String,
    /// Database URL (`sqlite::memory:` or `sqlite://path?mode=rwc`).
    #[arg(
        long,
        default_value = "sqlite://booking.db?mode=rwc",
        env = "BOOKING_DATABASE_URL"
    )]
    database_url: String,
    /// Waiting room JWKS URL.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080/.well-known/jwks.json",
        env = "BOOKING_JWKS_URL"
    )]
    jwks_url: String,
    /// Waiting room base URL (for 401 answers).
    #[arg(
        long,
        default_value = "http://127.0.0.1:8080",
        env = "BOOKING_WAITING_ROOM_URL"
    )]
    waiting_room_url: String,
    /// Payment gateway base URL.
    #[arg(
        long,
        default_value = "http://127.0.0.1:8082",
        env = "BOOKING_GATEWAY_URL"
    )]
    gateway_url: String,
    /// Gateway HMAC secret (no default).
    #[arg(long, env = "BOOKING_GATEWAY_SECRET")]
    gateway_secret: Secret,
    /// Admin bearer token (no default).
    #[arg(long, env = "BOOKING_ADMIN_TOKEN")]
    admin_token: Secret,
    /// Public base URL (default http://{listen}).
    #[arg(long, env = "BOOKING_PUBLIC_URL")]
    public_url: Option<String>,
    /// Show ids (= event ids), comma separated; each gets the demo venue or `--venue`.
    #[arg(long, default_value = "demo", value_delimiter = ',')]
    shows: Vec<String>,
    /// Venue file (JSON, booking-core/README.md) for every show, e.g. infra/venues/arena-20k.json.
    #[arg(long, env = "BOOKING_VENUE")]
    venue: Option<PathBuf>,
    /// Bearer token of the waiting room's internal API (same as its `service_token`).
    #[arg(long, env = "BOOKING_SERVICE_TOKEN")]
    service_token: Option<Secret>,
    /// Static pages directory.
    #[arg(long, env = "BOOKING_STATIC_DIR")]
    static_dir: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let a = Args::parse();
    let venue = match &a.venue {
        Some(p) => Venue::load(p)?,
        None => Venue::demo(),
    };
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    let public = a
        .public_url
        .unwrap_or_else(|| format!("http://{}", a.listen));
    let mut c = Config::demo("demo", a.jwks_url, a.gateway_url, a.gateway_secret, public);
    c.database_url = a.database_url;
    c.waiting_room_url = a.waiting_room_url;
    c.admin_token = a.admin_token;
    c.static_dir = a.static_dir;
    c.service_token = a.service_token;
    c.shows = a
        .shows
        .iter()
        .map(|id| ShowConfig {
            id: id.clone(),
            name: id.clone(),
            venue: venue.clone(),
        })
        .collect();
    booking_core::serve(listener, c, sale_common::shutdown::signal()).await
}
