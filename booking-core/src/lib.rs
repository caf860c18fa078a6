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
use std::net::SocketAddr;
use std::time::Duration;

pub use config::{Channel, Config, PoolSpec, Section, ShowConfig, Venue};
pub use http::router;
pub use outbox::Outbox;
pub use payments::reconciler::{Outcome, Reconciler};
pub use state::AppState;

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
        loops.push(tokio::spawn(state.outbox().run(every)));
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
