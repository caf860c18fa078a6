//! HTTP surface (API.md "Waiting room"): shared state, the router factory and small response
//! helpers. Per-fan answers are `private, no-store`; only the status document, JWKS and static
//! files are `public`; nothing sets a cookie.

pub mod access;
pub mod admin;
pub mod broadcast;
pub mod conditional;
pub mod draw;
pub mod error;
pub mod fan;
pub mod internal;
pub mod lanes;
pub mod leave;
pub mod mode;
pub mod openapi;
pub mod opening;
pub mod phases;
pub mod public;
pub mod report;
pub mod shadow;
pub mod transitions;

use crate::config::Config;
use crate::domain::{EventId, Figures, VisitorId};
use crate::ratelimit::Limits;
use crate::signer::AdmissionSigner;
use crate::status::{
    Intervals, LatchedPublisher, PublishRules, StatusBoard, StatusDoc, StatusPublisher,
};
use crate::store::QueueStore;
use crate::tokens::{JoinKeys, TokenError};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use sale_common::{Problem, SharedClock};
use std::sync::Arc;
use std::time::Duration;

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
    /// Published status documents (this node's snapshot, served at `/status/{event}.json`).
    pub status: Arc<StatusBoard>,
    /// Builds status documents from the store and writes them to the configured sinks.
    pub publisher: Arc<dyn StatusPublisher>,
    /// Per-client-IP limiters of the fan endpoints.
    pub limits: Limits,
    /// Proof-of-work challenges of joins.
    pub pow: crate::pow::Pow,
    /// `Cache-Control` of the status document ([`crate::status::cache_control`]), built
    /// once.
    pub status_cache_control: HeaderValue,
    /// The quiet lane's node state: rules cache, proof-of-work failures, shadow id tag.
    pub screen: crate::screen::Screen,
    /// Verifier of signed identity tokens (`identity_token_key`), if configured.
    pub identity: Option<crate::identity::IdentityVerifier>,
    /// Per event: admission-token lifetime (s) and booking URL, read from the store once.
    constants: std::sync::RwLock<std::collections::HashMap<EventId, EventConstants>>,
    /// Per event, its complete draw publication as JSON (immutable once the pre-queue is
    /// numbered; `draw.rs`).
    pub draws: std::sync::RwLock<std::collections::HashMap<EventId, axum::body::Bytes>>,
    /// Held while a complete draw publication is built, so concurrent first requests wait for
    /// one build instead of each reading the whole list.
    pub draw_build: tokio::sync::Mutex<()>,
    /// Access codes' hashing key and brute-force limiter (issue 14 item 1, `http/access.rs`).
    pub access: access::AccessGate,
}

/// What never changes after an event is created (`create_event` is `NX`; no API edits these).
#[derive(Debug, Clone)]
pub struct EventConstants {
    /// Admission-token lifetime, **seconds**.
    pub admission_ttl_secs: u64,
    /// Booking core base URL handed to admitted fans.
    pub booking_url: Arc<str>,
}

impl AppState {
    /// Builds the state: loads (or generates) the signing key, validates the config, creates
    /// the configured events in `store` unless they exist, and publishes status documents to
    /// the configured sinks (`status_dir`, `s3_bucket`).
    pub async fn new(
        config: Config,
        store: Arc<dyn QueueStore>,
        clock: SharedClock,
    ) -> anyhow::Result<Self> {
        let sinks = crate::status::sinks_from_config(&config).await;
        Self::with_publisher(config, store, clock, |store, board, rules| {
            Arc::new(LatchedPublisher::new(store, board, sinks, rules))
        })
        .await
    }

    /// Like [`AppState::new`] with the status publisher made by `make` from the store, this
    /// node's board and the configured rules (tests inject sinks and pauses).
    pub async fn with_publisher(
        config: Config,
        store: Arc<dyn QueueStore>,
        clock: SharedClock,
        make: impl FnOnce(
            Arc<dyn QueueStore>,
            Arc<StatusBoard>,
            PublishRules,
        ) -> Arc<dyn StatusPublisher>,
    ) -> anyhow::Result<Self> {
        config.validate()?;
        // Install the metrics recorder before anything is counted.
        if crate::telemetry::handle().is_none() {
            tracing::warn!("another metrics recorder is installed: /metrics answers 503");
        }
        let signer = match &config.signing_key_dir {
            Some(dir) => {
                let set = crate::keys::load(dir, clock.now_secs())?;
                AdmissionSigner::from_set(&set, &config.issuer, &config.audience)?
            }
            None => AdmissionSigner::new(
                config.signing_key_pem.as_ref().map(|s| s.expose()),
                &config.issuer,
                &config.audience,
            )?,
        }
        .with_nbf_back(config.max_clock_skew_secs)
        .with_gate_audiences(&config.gate_audiences);
        let previous: Vec<&[u8]> = config
            .join_hmac_previous_keys
            .iter()
            .map(|k| k.expose().as_bytes())
            .collect();
        let join_keys =
            JoinKeys::with_previous(config.join_hmac_key.expose().as_bytes(), &previous);
        let config_key = config.join_hmac_key.expose().to_owned();
        let visitor_of: crate::ratelimit::VisitorOf = {
            let (keys, clock) = (join_keys.clone(), clock.clone());
            Arc::new(move |headers: &HeaderMap, event: &str| {
                let token = headers
                    .get(header::AUTHORIZATION)?
                    .to_str()
                    .ok()?
                    .strip_prefix("Bearer ")?;
                let event = EventId::parse(event)?;
                let visitor = keys.verify(token.trim(), &event, clock.now_secs()).ok()?;
                Some(visitor.as_str().to_owned())
            })
        };
        let limits = Limits::new(
            config.trusted_proxies.clone(),
            (config.join_rate_per_sec, config.join_burst),
            (config.fan_rate_per_sec, config.fan_burst),
            visitor_of,
        )?;
        for e in &config.events {
            store.create_event(&e.meta()).await?;
        }
        let status = Arc::new(StatusBoard::default());
        let rules = PublishRules {
            intervals: intervals_of(&config),
            silence_ms: config.silence_grace_ms,
            throttle_ms: config.status_throttle_ms,
        };
        let publisher = make(store.clone(), status.clone(), rules);
        let identity = config
            .identity_token_key
            .as_ref()
            .map(|k| crate::identity::IdentityVerifier::new(k.expose().as_bytes()));
        let status_cache_control =
            HeaderValue::from_str(&crate::status::cache_control(config.status_max_age_secs))?;
        let screen = crate::screen::Screen::new(
            config_key.as_bytes(),
            config.shadow_after_pow_failures,
            config.pow_failure_window_secs,
        );
        let access = access::AccessGate::new(config.join_hmac_key.expose().as_bytes());
        let state = Self(Arc::new(Inner {
            store,
            clock,
            config,
            join_keys,
            signer,
            status,
            publisher,
            limits,
            pow: crate::pow::Pow::new(config_key.as_bytes()),
            screen,
            status_cache_control,
            identity,
            constants: Default::default(),
            draws: Default::default(),
            draw_build: Default::default(),
            access,
        }));
        for e in state.0.config.events.clone() {
            state.refresh_status(&e.id).await;
        }
        Ok(state)
    }

    /// Re-reads the signing-key directory (when configured) and swaps the key set in; a read or
    /// probe failure is logged and the previous keys stay.
    pub fn reload_keys(&self) {
        let Some(dir) = &self.0.config.signing_key_dir else {
            return;
        };
        let now = self.0.clock.now_secs();
        let result = crate::keys::load(dir, now).and_then(|set| self.0.signer.replace(&set));
        if let Err(e) = result {
            tracing::error!(dir = %dir.display(), error = %e, "signing keys not reloaded");
        }
    }

    /// The bound on each store call.
    pub fn store_timeout(&self) -> Duration {
        Duration::from_millis(self.0.config.store_timeout_ms)
    }

    /// Reads `event`'s live figures within the store bound (`None`: unknown event).
    pub async fn figures(&self, event: &EventId) -> Result<Option<Figures>, Problem> {
        let now_ms = self.0.clock.now_ms();
        let silence = self.0.config.silence_grace_ms;
        error::bounded(
            self.store_timeout(),
            self.0.store.figures(event, now_ms, silence),
        )
        .await
    }

    /// `event`'s [`EventConstants`]: one store read per event and process, then from memory
    /// (the claim path then costs one store call, not two). 404 for an unknown event.
    pub async fn event_constants(&self, event: &EventId) -> Result<EventConstants, Problem> {
        if let Some(c) = self
            .0
            .constants
            .read()
            .ok()
            .and_then(|m| m.get(event).cloned())
        {
            return Ok(c);
        }
        let meta = error::bounded(self.store_timeout(), self.0.store.event(event))
            .await?
            .ok_or_else(|| Problem::not_found("no such event"))?;
        let c = EventConstants {
            admission_ttl_secs: meta.admission_ttl_secs,
            booking_url: meta.booking_url.into(),
        };
        if let Ok(mut m) = self.0.constants.write() {
            m.insert(event.clone(), c.clone());
        }
        Ok(c)
    }

    /// The intervals advertised to fans.
    pub fn intervals(&self) -> Intervals {
        intervals_of(&self.0.config)
    }

    /// Builds and publishes `event`'s status document from figures just read.
    pub fn publish(&self, f: &Figures) -> StatusDoc {
        let doc = self
            .0
            .status
            .build(f, self.intervals(), self.0.clock.now_ms());
        crate::telemetry::record_figures(f, doc.derived());
        self.0.status.publish(f.meta.id.clone(), doc.clone());
        doc
    }

    /// One status-publisher step for `event` (build whole from the store, refresh the board,
    /// write to the sinks when a latch allows); failures keep the old documents.
    pub async fn refresh_status(&self, event: &EventId) -> Option<StatusDoc> {
        let now_ms = self.0.clock.now_ms();
        let step = self.0.publisher.publish(event, now_ms);
        match tokio::time::timeout(self.store_timeout() * 3, step).await {
            Ok(Ok(p)) => p.doc,
            Ok(Err(e)) => {
                crate::telemetry::store_error("status");
                tracing::warn!(event = %event, error = %e, "status document not rebuilt");
                None
            }
            Err(_) => {
                crate::telemetry::store_error("status");
                None
            }
        }
    }

    /// Verifies the `Authorization: Bearer` join token, before any store call. `Ok(None)` when
    /// the header is absent; 401 `invalid-join-token` when it is sent more than once (a request
    /// carries one set of credentials, RFC 9110 §11.6.2: the first was used, whatever a proxy
    /// in front had checked).
    pub fn join_identity(
        &self,
        headers: &HeaderMap,
        event: &EventId,
    ) -> Result<Option<VisitorId>, Problem> {
        let mut auth = headers.get_all(header::AUTHORIZATION).iter();
        let Some(value) = auth.next() else {
            return Ok(None);
        };
        if auth.next().is_some() {
            crate::telemetry::rejected_token("join", "malformed");
            return Err(Problem::unauthorized(
                "invalid-join-token",
                "more than one Authorization header",
            ));
        }
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                crate::telemetry::rejected_token("join", "malformed");
                Problem::unauthorized("invalid-join-token", "expected a Bearer token")
            })?;
        let now = self.0.clock.now_secs();
        let r = self.0.join_keys.verify(token.trim(), event, now);
        if let Err(e) = &r {
            crate::telemetry::rejected_token("join", e.reason());
        }
        match r {
            Ok(v) => Ok(Some(v)),
            Err(e @ TokenError::Expired) => {
                Err(Problem::unauthorized("join-token-expired", e.to_string()))
            }
            Err(e) => Err(Problem::unauthorized("invalid-join-token", e.to_string())),
        }
    }
}

/// The intervals advertised to fans by `c`.
fn intervals_of(c: &Config) -> Intervals {
    Intervals {
        poll_ms: c.poll_interval_ms,
        heartbeat_ms: c.heartbeat_interval_ms,
        ready_window: c.ready_window_min,
    }
}

/// Parses the `{event}` path segment; an invalid id cannot exist, so it is a 404.
pub fn parse_event(raw: &str) -> Result<EventId, Problem> {
    EventId::parse(raw)
        .ok_or_else(|| Problem::not_found(format!("no event {:?}", error::clip(raw))))
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

/// The whole router. Joins, heartbeats and claims are rate-limited per client IP; serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()` (tests: `MockConnectInfo`).
pub fn router(state: AppState) -> Router {
    let cfg = &state.0.config;
    let l = &state.0.limits;
    let join = Router::new()
        .route("/api/events/{event}/join", post(fan::join))
        .layer(Limits::layer(&l.join, "join"));
    let heartbeat = Router::new()
        .route("/api/events/{event}/heartbeat", post(fan::heartbeat))
        .layer(Limits::layer(&l.heartbeat, "heartbeat"));
    let leave = Router::new()
        .route("/api/events/{event}/leave", post(leave::leave))
        .layer(Limits::layer(&l.heartbeat, "leave"));
    let claim = Router::new()
        .route("/api/events/{event}/admission", post(fan::admission))
        .layer(Limits::layer(&l.claim, "admission"));
    let app = Router::new()
        .merge(join)
        .merge(heartbeat)
        .merge(leave)
        .merge(claim)
        .route("/healthz", get(public::healthz))
        .route("/readyz", get(public::readyz))
        .route("/metrics", get(crate::telemetry::metrics))
        .route("/openapi.json", get(openapi::openapi))
        .route("/api/events/{event}/position", get(fan::position))
        .route("/api/events/{event}/pow", get(fan::pow_challenge))
        .route("/api/events/{event}/draw", get(draw::draw))
        .route("/api/events/{event}/about", get(public::about))
        .route("/status/{file}", get(public::status))
        .route("/.well-known/jwks.json", get(public::jwks))
        .route(
            "/.well-known/admission-policy.json",
            get(public::admission_policy),
        )
        .merge(admin::routes(state.clone()))
        .merge(lanes::routes(state.clone()))
        .merge(access::routes(state.clone()))
        .merge(internal::routes(state.clone()));
    let app = app.method_not_allowed_fallback(|| async {
        Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
            "Method not allowed",
        )
    });
    let app = match &cfg.static_dir {
        // Static files are public for a minute; a missing file is a 404 problem.
        Some(dir) => app.fallback_service(
            tower::ServiceBuilder::new()
                .layer(
                    tower_http::set_header::SetResponseHeaderLayer::if_not_present(
                        header::CACHE_CONTROL,
                        HeaderValue::from_static("public, max-age=60"),
                    ),
                )
                .map_response(conditional::static_etag)
                .layer(axum::middleware::from_fn(sale_common::files::names_fit))
                .service(
                    tower_http::services::ServeDir::new(dir)
                        .call_fallback_on_method_not_allowed(true)
                        .fallback(axum::handler::HandlerWithoutStateExt::into_service(
                            || async { Problem::not_found("no such page") },
                        )),
                ),
        ),
        None => app.fallback(|| async { Problem::not_found("no such page") }),
    };
    app.layer(axum::middleware::from_fn_with_state(
        conditional::CONFIG,
        sale_common::conditional::not_modified,
    ))
    .layer(axum::middleware::map_response(
        sale_common::problem::problems_only,
    ))
    .layer(axum::middleware::from_fn(crate::telemetry::track))
    .with_state(state)
}
