//! Payment-gateway simulator: a real HTTP server with create, execute, query, a checkout page a
//! fan can click in a browser, and global fault injection (API.md, "Payment-gateway simulator").
//!
//! Owns only its in-memory payments. Must not touch: the booking database or the waiting room.
//! It is deliberately *untrusted* from the booking core's point of view: redirects can be forged,
//! executes can time out, and the only truth is what `GET /v1/payments/{id}` answers.

pub mod checkout;
pub mod config;
pub mod faults;
pub mod payments;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

pub use config::Config;
pub use faults::{FaultRng, Faults};
pub use payments::{Payment, PaymentStatus, Store};

/// Shared server state: the payment store, faults, and the config.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Validated configuration.
    pub config: Arc<Config>,
    /// In-memory payments.
    pub store: Arc<Store>,
}

impl AppState {
    /// Builds state from a validated config.
    pub fn new(config: Config) -> Self {
        let store = Arc::new(Store::new(
            config.clock.clone(),
            FaultRng::new(config.seed),
            config.secret.clone(),
        ));
        Self {
            config: Arc::new(config),
            store,
        }
    }
}

/// The HTTP routes (API.md table "Payment-gateway simulator").
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/payments", post(payments::create))
        .route("/v1/payments/{payment}", get(payments::query))
        .route("/v1/payments/{payment}/execute", post(payments::execute))
        .route(
            "/v1/faults",
            post(faults::set_faults).get(faults::get_faults),
        )
        .route("/checkout/{payment}", get(checkout::page))
        .route("/checkout/{payment}/pay", post(checkout::pay))
        .route("/checkout/{payment}/cancel", post(checkout::cancel))
        .with_state(state)
}

/// Serves the simulator on an already-bound listener until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    let state = AppState::new(config);
    tracing::info!(addr = ?listener.local_addr().ok(), "gateway-sim listening");
    axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;
    Ok(())
}
