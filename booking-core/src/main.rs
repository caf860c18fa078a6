//! Thin binary: the JSON configuration file and `BOOKING_*` overrides → [`booking_core::Config`]
//! (every value checked before the port is bound), telemetry, serve until SIGTERM or SIGINT
//! (then drain: case W13).

/// mimalloc rather than glibc malloc: many small short-lived allocations per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::PathBuf;

use booking_core::Config;
use clap::Parser;

/// Booking core. Configuration: a JSON file (`booking-core/config.example.json`) with
/// environment overrides `BOOKING_<KEY>` (nested keys joined by `__`), secrets also from files
/// (`<key>_file`, `BOOKING_<KEY>_FILE`); booking-core/README.md "Configuration".
#[derive(Debug, Parser)]
struct Args {
    /// JSON configuration file; without it, the configuration comes from `BOOKING_*` only.
    #[arg(long, env = "BOOKING_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8081", env = "BOOKING_LISTEN")]
    listen: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let a = Args::parse();
    // Variables that are not Unicode cannot be configuration; they are left out, not a panic.
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    let config = Config::load(a.config.as_deref(), env)?;
    let listener = tokio::net::TcpListener::bind(&a.listen).await?;
    // "booking-core listening" is logged once the database is migrated and requests are served.
    booking_core::serve(listener, config, sale_common::shutdown::signal()).await
}
