//! Booking core: the admission-token door, seats, guarded holds, payments through an untrusted
//! gateway, the reconciler, bookings, outbox and audit (DESIGN "Booking core").
//!
//! Must not touch: the waiting room's store (it only reads the waiting room's public JWKS).
//! Invariants: a seat is sold at most once (guarded updates in one transaction); only the
//! reconciler releases a hold after a payment attempt; the callback's `status` is never trusted.

pub mod best;
pub mod caps;
pub mod claim;
pub mod config;
pub mod confirm;
pub mod db;
pub mod door;
pub mod error;
pub mod gateway;
pub mod holds;
pub mod hotq;
pub mod http;
pub mod keys;
pub mod ladder;
pub mod late;
pub mod mail;
pub mod notify;
pub mod outbox;
pub mod payments;
pub mod pools;
pub mod reconciler;
pub mod seatmap;
pub mod telemetry;
pub mod tokencache;
pub mod venue;
pub mod waitlist;
pub mod webhook;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sale_common::SharedClock;

pub use config::{Channel, Config, PoolSpec, Section, ShowConfig, Venue};
pub use http::router;
pub use outbox::Outbox;
pub use reconciler::{Outcome, Reconciler};

/// Shared service state.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Validated configuration.
    pub config: Arc<Config>,
    /// The booking database.
    pub db: db::Db,
    /// Admission-token verifier.
    pub verifier: Arc<door::Verifier>,
    /// Payment gateway client.
    pub gateway: gateway::Gateway,
    /// Time source (`config.clock`).
    pub clock: SharedClock,
    /// Per-admission rate limit on hold creation (in this process).
    pub limiter: Arc<caps::RateLimiter>,
    /// Reads that may trail a concurrent write by one commit (seat maps, hold views): extra
    /// SQLite reader connections, or `db` itself ([`db::connect_reads`]).
    pub reads: db::Db,
    /// Cached seat maps ([`seatmap`]).
    pub seatmaps: Arc<seatmap::SeatMaps>,
    /// The per-show hold queues of the hottest shows ([`hotq`]).
    pub hold_queues: Arc<hotq::HoldQueues>,
}

impl AppState {
    /// Validates `config`, opens and migrates the database, seeds the shows (idempotent).
    /// Spawns nothing: [`serve`] starts the reconciler and outbox loops.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        config.validate()?;
        telemetry::init();
        let db = db::connect(&config.database_url).await?;
        let reads = db::connect_reads(&config.database_url, &db).await?;
        for show in &config.shows {
            db::seed_show(&db, show).await?;
        }
        let verifier = door::Verifier::new(
            Some(config.jwks_url.clone()),
            &config.issuer,
            &config.audience,
            config.leeway_secs,
            Duration::from_secs(config.jwks_refresh_cooldown_secs),
            config.clock.clone(),
        );
        let tokens = Arc::new(gateway::TokenStore::new(
            db.clone(),
            config.clock.clone(),
            &config.gateway_url,
            &config.gateway_client_id,
            config.gateway_client_secret.clone(),
        ));
        let gateway = gateway::Gateway::new(&config.gateway_url, config.gateway_timeout, tokens);
        let hold_queues = Arc::new(hotq::HoldQueues::new(&config.queued_shows));
        Ok(Self {
            clock: config.clock.clone(),
            config: Arc::new(config),
            db,
            verifier: Arc::new(verifier),
            gateway,
            limiter: Arc::new(caps::RateLimiter::default()),
            reads,
            seatmaps: Arc::default(),
            hold_queues,
        })
    }
}

/// Serves the booking core on an already-bound listener until `shutdown` resolves (API.md).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let state = AppState::build(config).await?;
    serve_state(listener, state, shutdown).await
}

/// Like [`serve`] with prepared state (tests inject keys into `state.verifier`).
pub async fn serve_state(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut loops = Vec::new();
    if state.config.reconcile_interval_secs > 0 {
        let every = Duration::from_secs(state.config.reconcile_interval_secs);
        loops.push(tokio::spawn(Reconciler::new(state.clone()).run(every)));
    }
    if state.config.outbox_interval_ms > 0 {
        let every = Duration::from_millis(state.config.outbox_interval_ms);
        loops.push(tokio::spawn(Outbox::new(state.clone()).run(every)));
    }
    tracing::info!(addr = ?listener.local_addr().ok(), "booking-core listening");
    let result = axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await;
    for h in loops {
        h.abort();
    }
    result?;
    Ok(())
}
