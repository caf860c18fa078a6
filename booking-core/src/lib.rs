//! Booking core: the admission-token door, seats, guarded holds, payments through an untrusted
//! gateway, the reconciler, bookings, outbox and audit (DESIGN "Booking core").
//!
//! Must not touch: the waiting room's store (it only reads the waiting room's public JWKS).
//! Invariants: a seat is sold at most once (guarded updates in one transaction); only the
//! reconciler releases a hold after a payment attempt; the callback's `status` is never trusted.
//!
//! Layers, bottom to top (ARCHITECTURE.md "Booking core layers"; `tests/layers.rs` checks that
//! a top-level module imports only modules of lower layers): `error`, `telemetry`, `venue` →
//! `config` → `db` → `door`, `gateway` → `outbox` → `inventory` → `state` → `payments` →
//! `http`; this file wires them into [`serve`].

// Bottom: no imports from the crate.
pub mod error;
pub mod load;
pub mod telemetry;
pub mod venue;
// Typed configuration, then the database.
pub mod config;
pub mod db;
// The two outside services: the waiting room's keys, the payment gateway.
pub mod door;
pub mod gateway;
// Messages written in a transaction, sent after.
pub mod outbox;
// Seats, pools, holds, caps, seat maps, hold queue, waitlist.
pub mod inventory;
// The service state handlers and loops share.
pub mod state;
// Payment flow, confirm, webhook, reconciler.
pub mod payments;
// The HTTP surface.
pub mod http;

use std::future::Future;
use std::time::Duration;

pub use config::{Channel, Config, PoolSpec, Section, ShowConfig, Venue};
pub use http::router;
pub use outbox::Outbox;
pub use payments::reconciler::{Outcome, Reconciler};
pub use state::AppState;
pub use venue::{ResourceKind, Window};

/// Serves the booking core on an already-bound listener until `shutdown` resolves (API.md).
///
/// Before serving, the door's token settings are compared with the waiting room's published
/// policy ([`door::policy`]); a difference is an error (the process does not start).
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    check_policy(&config).await?;
    let state = AppState::build(config).await?;
    serve_state(listener, state, shutdown).await
}

/// The start-up policy check (DECISIONS: "the door refuses to start when its own configuration
/// disagrees"). An unreachable waiting room is logged, not fatal: deploy order must not matter.
pub async fn check_policy(config: &Config) -> anyhow::Result<()> {
    let ours = door::policy::Policy {
        issuer: config.issuer.clone(),
        audience: config.audience.clone(),
        max_clock_skew_secs: config.max_clock_skew_secs,
        door_exp_leeway_secs: config.leeway_secs,
    };
    match door::policy::check(&config.jwks_url, &ours, Duration::from_secs(5)).await? {
        door::policy::Check::Agrees => tracing::info!("token policy agrees with the waiting room"),
        door::policy::Check::Unreachable(why) => {
            tracing::warn!(%why, "waiting room's token policy not readable; starting anyway")
        }
    }
    Ok(())
}

/// Like [`serve`] with prepared state (tests inject keys into `state.verifier`).
pub async fn serve_state(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let outbox_stop = stop_rx.clone();
    let mut reconciler = None;
    let mut loops = Vec::new();
    if state.config.reconcile_interval_secs > 0 {
        let every = Duration::from_secs(state.config.reconcile_interval_secs);
        reconciler = Some(tokio::spawn(
            Reconciler::new(state.clone()).run(every, stop_rx),
        ));
    }
    if state.config.outbox_interval_ms > 0 {
        let every = Duration::from_millis(state.config.outbox_interval_ms);
        loops.push(tokio::spawn(
            state.outbox().stopping(outbox_stop.clone()).run(every),
        ));
    }
    if db::is_sqlite_file(&state.config.database_url) {
        loops.push(tokio::spawn(db::checkpoint::run(
            state.reads.clone(),
            db::checkpoint::EVERY,
        )));
    }
    if state.config.statistics_interval_ms > 0 && db::backend(&state.db) == db::Backend::Postgres {
        let every = Duration::from_millis(state.config.statistics_interval_ms);
        loops.push(tokio::spawn(db::statistics::run(state.db.clone(), every)));
    }
    if state.config.jwks_refresh_secs > 0 {
        let every = Duration::from_secs(state.config.jwks_refresh_secs);
        for v in std::iter::once(&state.verifier).chain(state.gates.values()) {
            loops.push(tokio::spawn(door::refresh_loop(v.clone(), every)));
        }
    }
    tracing::info!(addr = ?listener.local_addr().ok(), "booking-core listening");
    let drain = Duration::from_secs(state.config.drain_secs);
    let lame_duck = Duration::from_millis(state.config.lame_duck_ms);
    let last = state.clone();
    let stopping = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let result =
        sale_common::shutdown::serve_draining(listener, router(state), stopping, lame_duck, drain)
            .await;
    let stopped = std::time::Instant::now();
    tracing::info!("connections drained; stopping the background work");
    // The reconciler finishes its step and gives its lease back (case W13); the outbox worker,
    // the JWKS refresher, the WAL checkpointer and the statistics keeper hold nothing.
    if let Some(r) = reconciler {
        if tokio::time::timeout(drain, r).await.is_err() {
            tracing::warn!(
                drain_ms = drain.as_millis() as u64,
                "the reconciler did not stop within the drain time; its lease lapses by itself"
            );
        }
    }
    for h in loops {
        h.abort();
    }
    // Flush what the outbox can (emails, session ends, refunds) before exiting: one more step,
    // bounded by the drain deadline; what is left is sent by the next process.
    if last.config.outbox_interval_ms > 0 {
        let now = last.clock.now_ms();
        let outbox = last.outbox().stopping(outbox_stop);
        match tokio::time::timeout(drain, outbox.step(now)).await {
            Ok(Err(e)) => tracing::warn!(error = %e, "last outbox step before exit failed"),
            Err(_) => tracing::warn!(
                drain_ms = drain.as_millis() as u64,
                "last outbox step before exit cut at the drain time; the next process sends the rest"
            ),
            Ok(Ok(_)) => {}
        }
    }
    tracing::info!(
        after_drain_ms = stopped.elapsed().as_millis() as u64,
        "stopped"
    );
    result?;
    Ok(())
}
