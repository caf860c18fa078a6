//! The waiting room: a virtual queue in front of the booking core. It owns the queue (join
//! tokens, pre-queue draw, cursor, admissions), the admission-token keys and JWKS, the status
//! document and the admin API (DESIGN.md "Waiting room"; HTTP contract in API.md).
//!
//! Must not touch: the booking database (the booking core verifies admission tokens offline).
//!
//! Entry points: [`serve`] (what the binary and the launcher call), [`serve_with_clock`] (tests
//! pass a `ManualClock`), [`router`] for in-process `oneshot` tests, [`AppState::new`].

pub mod access;
pub mod admitter;
pub mod broadcast;
pub mod closedloop;
pub mod config;
pub mod domain;
pub mod draw;
pub mod http;
pub mod identity;
pub mod keys;
pub mod lanes;
pub mod mode;
pub mod phases;
pub mod pow;
pub mod ratelimit;
pub mod rates;
pub mod report;
pub mod screen;
pub mod signer;
pub mod status;
pub mod store;
pub mod telemetry;
pub mod tokens;

pub use config::{Config, EventConfig, StoreConfig};
pub use http::{router, AppState};

use admitter::Admitter;
use domain::EventId;
use sale_common::{SharedClock, SystemClock};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use store::{memory::MemoryStore, redis::RedisStore, QueueStore};
use tokio::sync::watch;

/// Opens the configured store: in-memory, one Redis server or a Redis Cluster (fails fast when
/// Redis is not reachable or a master may evict keys).
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn QueueStore>> {
    // The recorder first: the store's breaker sets its gauge when it is made.
    let _ = telemetry::handle();
    let timeout = Duration::from_millis(config.store_timeout_ms);
    Ok(match &config.store {
        StoreConfig::Memory => Arc::new(MemoryStore::new()),
        StoreConfig::Redis { url } => Arc::new(
            RedisStore::connect(url, timeout)
                .await?
                .with_durability(config.durability()),
        ),
        StoreConfig::RedisCluster { urls } => Arc::new(
            RedisStore::connect_cluster(urls, timeout)
                .await?
                .with_durability(config.durability()),
        ),
    })
}

/// Serves the waiting room on `listener` with the system clock until `shutdown` resolves
/// (API.md "Library entry points").
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_with_clock(listener, config, Arc::new(SystemClock), shutdown).await
}

/// Like [`serve`] with an injected clock (tests: `Arc::new(ManualClock::new(..))`).
pub async fn serve_with_clock(
    listener: tokio::net::TcpListener,
    config: Config,
    clock: SharedClock,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    let store = open_store(&config).await?;
    let state = AppState::new(config, store, clock).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let loop_task = tokio::spawn(run_admitters(state.clone(), stop_rx.clone()));
    let service_token = state
        .0
        .config
        .service_token
        .as_ref()
        .map(|t| t.expose().to_owned());
    let closed_loops = tokio::spawn(closedloop::run(
        state.0.store.clone(),
        state.0.config.closed_loops(),
        service_token.clone(),
        state.0.clock.clone(),
        stop_rx.clone(),
    ));
    let reports = tokio::spawn(report::run(
        state.0.store.clone(),
        state.0.config.report_load_urls(),
        service_token,
        state.0.config.silence_grace_ms,
        Duration::from_secs(state.0.config.report_sample_secs),
        state.0.clock.clone(),
        stop_rx,
    ));
    let drain = Duration::from_secs(state.0.config.drain_secs);
    let lame_duck = Duration::from_millis(state.0.config.lame_duck_ms);
    let stopping = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let result =
        sale_common::shutdown::serve_draining(listener, router(state), stopping, lame_duck, drain)
            .await;
    // The admitter loop releases its owner-token locks before it returns (case W13).
    let _ = loop_task.await;
    let _ = closed_loops.await;
    let _ = reports.await;
    Ok(result?)
}

/// How often the loop forgets idle rate-limit keys, runs metrics upkeep and re-reads the key
/// directory.
pub const HOUSEKEEPING: Duration = Duration::from_secs(5);

/// The admitter loop: every `tick_ms`, for every event, hold (or take) the event's owner-token
/// lock and run one [`Admitter::step`] when it is ours; every node republishes its status
/// documents each tick. One task serves all events so events created through the admin API
/// are picked up without a restart. Locks are released on shutdown.
pub async fn run_admitters(state: AppState, mut stop: watch::Receiver<bool>) {
    let cfg = &state.0.config;
    let tick = Duration::from_millis(cfg.tick_ms);
    let lock_ttl_ms = (cfg.tick_ms * 30).max(3000);
    // Which node runs each event's admitter, for operators and the chaos rehearsal (`loadtest
    // rush --chaos` kills the holder with kill -9 and times the takeover against this TTL).
    metrics::gauge!("wr_admitter_lock_ttl_seconds").set(lock_ttl_ms as f64 / 1000.0);
    let owner = uuid::Uuid::new_v4().to_string();
    let store = state.0.store.clone();
    let limit = state.store_timeout();
    let mut admitters: HashMap<EventId, (Admitter, bool)> = HashMap::new();
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_housekeeping = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => break,
        }
        if last_housekeeping.elapsed() >= HOUSEKEEPING {
            last_housekeeping = std::time::Instant::now();
            let keys = state.0.limits.retain_recent();
            state.0.access.limiter.retain_recent();
            metrics::gauge!("wr_rate_limit_keys").set(keys as f64);
            telemetry::upkeep();
            state.reload_keys();
        }
        let Ok(Ok(events)) = tokio::time::timeout(limit, store.list_events()).await else {
            continue;
        };
        for event in events {
            let key = store::redis::admitter_lock_key(&event);
            let (adm, held) = admitters.entry(event.clone()).or_insert_with(|| {
                let a = Admitter::new(
                    store.clone(),
                    event.clone(),
                    cfg.tick_ms,
                    cfg.invite_grace_secs,
                )
                .with_rules(cfg.liveness_rules());
                (a, false)
            });
            let lock = async {
                if *held {
                    store.renew_lock(&key, &owner, lock_ttl_ms).await
                } else {
                    store.try_lock(&key, &owner, lock_ttl_ms).await
                }
            };
            *held = matches!(tokio::time::timeout(limit, lock).await, Ok(Ok(true)));
            metrics::gauge!("wr_admitter_lock_held", "event" => event.to_string()).set(if *held {
                1.0
            } else {
                0.0
            });
            if *held {
                let now_ms = state.0.clock.now_ms();
                match tokio::time::timeout(limit * 4, adm.step(now_ms)).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        telemetry::store_error("admitter");
                        tracing::warn!(event = %event, error = %e, "admitter step failed");
                    }
                    Err(_) => telemetry::store_error("admitter"),
                }
            }
            state.refresh_status(&event).await;
        }
    }
    for (event, (_, held)) in admitters {
        if held {
            let key = store::redis::admitter_lock_key(&event);
            let _ = store.release_lock(&key, &owner).await;
            metrics::gauge!("wr_admitter_lock_held", "event" => event.to_string()).set(0.0);
        }
    }
}
