//! Thin binary (STYLE.md rule 1): `serve` reads the config and runs the library; `admin` calls
//! the admin API and prints its JSON answer.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "waiting-room",
    about = "Virtual queue in front of the booking core"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the waiting room.
    Serve {
        /// JSON configuration file.
        #[arg(long)]
        config: PathBuf,
        /// Listen address, e.g. 127.0.0.1:8080.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
    },
    /// Operator commands against a running waiting room.
    Admin {
        /// Base URL of the waiting room.
        #[arg(long)]
        url: String,
        /// Admin bearer token.
        #[arg(long, env = "WAITING_ROOM_ADMIN_TOKEN")]
        token: String,
        /// Event id.
        #[arg(long)]
        event: String,
        #[command(subcommand)]
        action: Action,
    },
}

#[derive(Subcommand)]
enum Action {
    /// Print the live figures.
    Figures,
    /// Set the admit rate (admissions per second).
    SetRate { rate: f64 },
    /// Set the most concurrent admitted sessions.
    SetMaxActive { max_active: u64 },
    /// Hold the cursor.
    Pause,
    /// Move the cursor again.
    Resume,
    /// Open now (shuffle the pre-queue).
    Open,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().cmd {
        Cmd::Serve { config, listen } => {
            let config = waiting_room::Config::from_file(&config)?;
            config.validate()?;
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            tracing::info!(addr = %listener.local_addr()?, "waiting room listening");
            let shutdown = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            waiting_room::serve(listener, config, shutdown).await
        }
        Cmd::Admin {
            url,
            token,
            event,
            action,
        } => admin(&url, &token, &event, action).await,
    }
}

async fn admin(url: &str, token: &str, event: &str, action: Action) -> anyhow::Result<()> {
    let base = format!("{}/admin/events/{event}", url.trim_end_matches('/'));
    let client = reqwest::Client::new();
    let req = match action {
        Action::Figures => client.get(&base),
        Action::SetRate { rate } => client
            .patch(&base)
            .json(&serde_json::json!({"admit_rate": rate})),
        Action::SetMaxActive { max_active } => client
            .patch(&base)
            .json(&serde_json::json!({"max_active": max_active})),
        Action::Pause => client.post(format!("{base}/pause")),
        Action::Resume => client.post(format!("{base}/resume")),
        Action::Open => client.post(format!("{base}/open")),
    };
    let resp = req.bearer_auth(token).send().await?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
    println!("{}", serde_json::to_string_pretty(&body)?);
    anyhow::ensure!(status.is_success(), "admin call failed: {status}");
    Ok(())
}
