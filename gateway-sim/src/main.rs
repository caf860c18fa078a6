//! Thin binary: parse flags, start telemetry, serve the gateway simulator until Ctrl-C.

/// mimalloc rather than glibc malloc: many small short-lived allocations per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use sale_common::Secret;

/// Payment-gateway simulator.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8082", env = "GATEWAY_LISTEN")]
    listen: String,
    /// HMAC secret for per-payment signatures (no default).
    #[arg(long, env = "GATEWAY_SECRET")]
    secret: Secret,
    /// Public base URL for checkout links (default: http://{listen}).
    #[arg(long, env = "GATEWAY_PUBLIC_URL")]
    public_url: Option<String>,
    /// Seed for fault-injection randomness.
    #[arg(long)]
    seed: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let listener = tokio::net::TcpListener::bind(&args.listen).await?;
    let addr = listener.local_addr()?;
    let public = args.public_url.unwrap_or_else(|| format!("http://{addr}"));
    let mut config = gateway_sim::Config::demo(public, args.secret);
    config.seed = args.seed;
    gateway_sim::serve(listener, config, sale_common::shutdown::signal()).await
}
