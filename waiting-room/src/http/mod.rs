//! HTTP surface (API.md "Waiting room"): shared state, the router factory and small response
//! helpers. Per-fan answers are `private, no-store`; only the status document, JWKS and static
//! files are `public`; nothing sets a cookie.

pub mod admin;
pub mod error;
pub mod fan;
pub mod public;

use crate::config::Config;
use crate::domain::{EventId, VisitorId};
use crate::ratelimit::TrustedProxyKey;
use crate::status::{StatusBoard, StatusDoc};
use crate::store::QueueStore;
use crate::tokens::{AdmissionSigner, JoinKeys, TokenError};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sale_common::{Problem, SharedClock};
use std::sync::Arc;
use std::time::Duration;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;

/// Everything a handler needs; cheap to clone.
#[derive(Clone)]
pub struct AppState(pub Arc<Inner>);

/// The shared parts of [`AppState`].
pub struct Inner {
    /// The queue store.
    pub store: Arc<dyn QueueStore>,
    /// Time source (tests pass a `ManualClock`).
    pub clock: SharedClock,
    /// Validated configuration.
    pub config: Config,
    /// Join-token keys.
    pub join_keys: JoinKeys,
    /// Admission-token signer and JWKS.
    pub signer: AdmissionSigner,
    /// Published status documents.
    pub status: StatusBoard,
}

impl AppState {
    /// Builds the state: loads (or generates) the signing key, validates the config, creates
    /// the configured events in `store` unless they exist.
    pub async fn new(
        config: Config,
        store: Arc<dyn QueueStore>,
        clock: SharedClock,
    ) -> anyhow::Result<Self> {
        config.validate()?;
        let signer = AdmissionSigner::new(
            config.signing_key_pem.as_ref().map(|s| s.expose()),
            &config.issuer,
            &config.audience,
        )?;
        let join_keys = JoinKeys::new(config.join_hmac_key.expose().as_bytes());
        for e in &config.events {
            store.create_event(&e.meta()).await?;
        }
        let state = Self(Arc::new(Inner {
            store,
            clock,
            config,
            join_keys,
            signer,
            status: StatusBoard::default(),
        }));
        for e in state.0.config.events.clone() {
            state.refresh_status(&e.id).await;
        }
        Ok(state)
    }

    /// The bound on each store call.
    pub fn store_timeout(&self) -> Duration {
        Duration::from_millis(self.0.config.store_timeout_ms)
    }

    /// Rebuilds `event`'s status document from the store; failures keep the old document.
    pub async fn refresh_status(&self, event: &EventId) -> Option<StatusDoc> {
        let now = self.0.clock.now_secs();
        let read = self.0.store.figures(event, now);
        let f = tokio::time::timeout(self.store_timeout(), read)
            .await
            .ok()?
            .ok()??;
        let doc = StatusDoc::build(&f, self.0.config.poll_interval_ms, now);
        self.0.status.publish(event.clone(), doc.clone());
        Some(doc)
    }

    /// Verifies the `Authorization: Bearer` join token, before any store call. `Ok(None)` when
    /// the header is absent.
    pub fn join_identity(
        &self,
        headers: &HeaderMap,
        event: &EventId,
    ) -> Result<Option<VisitorId>, Problem> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Ok(None);
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Problem::unauthorized("invalid-join-token", "expected a Bearer token")
            })?;
        let now = self.0.clock.now_secs();
        match self.0.join_keys.verify(token.trim(), event, now) {
            Ok(v) => Ok(Some(v)),
            Err(e @ TokenError::Expired) => {
                Err(Problem::unauthorized("join-token-expired", e.to_string()))
            }
            Err(e) => Err(Problem::unauthorized("invalid-join-token", e.to_string())),
        }
    }
}

/// Parses the `{event}` path segment; an invalid id cannot exist, so it is a 404.
pub fn parse_event(raw: &str) -> Result<EventId, Problem> {
    EventId::parse(raw).ok_or_else(|| Problem::not_found(format!("no event {raw:?}")))
}

/// A JSON answer for one fan: `Cache-Control: private, no-store`.
pub fn private_json(status: StatusCode, body: serde_json::Value) -> Response {
    let mut r = (status, Json(body)).into_response();
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    r
}

/// A public, cacheable JSON answer with `max-age` in seconds.
pub fn public_json(body: serde_json::Value, max_age_secs: u64) -> Response {
    let mut r = Json(body).into_response();
    let cc = format!("public, max-age={max_age_secs}");
    if let Ok(v) = HeaderValue::from_str(&cc) {
        r.headers_mut().insert(header::CACHE_CONTROL, v);
    }
    r
}

/// The whole router. Joins are rate-limited per client IP; serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()` (tests: `MockConnectInfo`).
pub fn router(state: AppState) -> Router {
    let cfg = &state.0.config;
    let period = Duration::from_nanos(1_000_000_000 / cfg.join_rate_per_sec.max(1));
    let governor = GovernorConfigBuilder::default()
        .period(period)
        .burst_size(cfg.join_burst)
        .key_extractor(TrustedProxyKey::new(cfg.trusted_proxies.clone()))
        .finish()
        .map(Arc::new);
    let mut join = Router::new().route("/api/events/{event}/join", post(fan::join));
    if let Some(g) = governor {
        join = join.layer(GovernorLayer::new(g).error_handler(|e| {
            match e {
                tower_governor::GovernorError::TooManyRequests { wait_time, .. } => Problem::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate-limited",
                    "Too many joins",
                )
                .retry_after(wait_time.max(1))
                .into_response(),
                _ => Problem::bad_request("cannot identify the client").into_response(),
            }
        }));
    }
    let app = Router::new()
        .merge(join)
        .route("/healthz", get(public::healthz))
        .route("/readyz", get(public::readyz))
        .route("/api/events/{event}/position", get(fan::position))
        .route("/api/events/{event}/admission", post(fan::admission))
        .route("/status/{file}", get(public::status))
        .route("/.well-known/jwks.json", get(public::jwks))
        .merge(admin::routes(state.clone()));
    let app = match &cfg.static_dir {
        Some(dir) => app.fallback_service(tower_http::services::ServeDir::new(dir)),
        None => app.fallback(|| async { Problem::not_found("no such page") }),
    };
    app.with_state(state)
}
