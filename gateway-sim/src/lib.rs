//! Payment-gateway simulator: a real HTTP server with create, execute, query, void and refunds
//! (partial, by amount, idempotent by key), a checkout page a fan can click in a browser, a
//! console endpoint that refunds or disputes a payment outside the shop, access tokens from a rate-limited grant endpoint,
//! signed webhooks, and fault injection per payment or global (API.md, "Payment-gateway
//! simulator").
//!
//! Owns only its in-memory payments. Must not touch: the booking database or the waiting room.
//! It is deliberately *untrusted* from the booking core's point of view: redirects can be forged,
//! executes can time out, webhooks can be duplicated, reordered or lost, and the only truth is
//! what `GET /v1/payments/{id}` answers.

pub mod auth;
pub mod checkout;
pub mod config;
pub mod console;
pub mod faults;
pub mod payments;
pub mod store;
pub mod webhooks;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post};
use axum::Router;

pub use config::Config;
pub use faults::{FaultRng, Faults};
pub use store::{Payment, PaymentStatus, Store};

/// Shared server state: the payment store, tokens, and the config.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Validated configuration.
    pub config: Arc<Config>,
    /// In-memory payments.
    pub store: Arc<Store>,
    /// Access tokens and grant history.
    pub auth: Arc<auth::Auth>,
}

impl AppState {
    /// Builds state from a validated config.
    pub fn new(config: Config) -> Self {
        let store = Arc::new(Store::new(
            config.clock.clone(),
            FaultRng::new(config.seed),
            config.secret.clone(),
            config.late_success_delay_secs,
        ));
        let auth = Arc::new(auth::Auth::new(&config));
        Self {
            config: Arc::new(config),
            store,
            auth,
        }
    }
}

/// The HTTP routes (API.md table "Payment-gateway simulator").
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/v1/oauth/token", post(auth::grant))
        .route("/v1/oauth/grants", get(auth::grants))
        .route("/v1/payments", post(payments::create))
        .route("/v1/payments/{payment}", get(payments::query))
        .route("/v1/payments/{payment}/execute", post(payments::execute))
        .route("/v1/payments/{payment}/void", post(payments::void))
        .route("/v1/payments/{payment}/refund", post(payments::refund))
        .route("/v1/sim/payments", get(payments::list))
        .route("/v1/sim/payments/{payment}/refund", post(console::refund))
        .route("/v1/sim/payments/{payment}/dispute", post(console::dispute))
        .route(
            "/v1/faults",
            post(faults::set_faults).get(faults::get_faults),
        )
        .route(
            "/v1/faults/payments/{payment}",
            post(faults::set_payment_faults),
        )
        .route("/checkout/{payment}", get(checkout::page))
        .route("/checkout/{payment}/pay", post(checkout::pay))
        .route("/checkout/{payment}/cancel", post(checkout::cancel))
        .with_state(state)
}

/// Serves the simulator on an already-bound listener until `shutdown` resolves; the webhook
/// dispatcher runs alongside.
pub async fn serve(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    config.validate()?;
    let state = AppState::new(config);
    let dispatcher = tokio::spawn(webhooks::dispatch_loop(state.clone()));
    tracing::info!(addr = ?listener.local_addr().ok(), "gateway-sim listening");
    let drain = Duration::from_secs(sale_common::shutdown::DEFAULT_DRAIN_SECS);
    // No lame duck: the simulator stands in for a remote gateway in tests, stopped and started
    // often; its callers retry a refused connection like any gateway call.
    let res = sale_common::shutdown::serve_draining(
        listener,
        router(state),
        shutdown,
        Duration::ZERO,
        drain,
    )
    .await;
    dispatcher.abort();
    res?;
    Ok(())
}
