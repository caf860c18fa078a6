//! The door: every booking call needs an admission token signed by the waiting room (DESIGN
//! "Booking core / Door"). EdDSA only, `iss`, `aud` (a string, or an array that contains ours:
//! RFC 7519 §4.1.3), the `event` claim bound to the show, and time against the injected clock:
//! refused on or after `exp` and before `nbf` (RFC 7519 §4.1.4/4.1.5), with the configured leeway
//! (0 by default). Clock skew between services is absorbed by the waiting room, which sets
//! `nbf = iat - max_clock_skew_secs` and frees the capacity slot only at
//! `exp + max_clock_skew_secs` (case W11, W10; DECISIONS "Tokens, capacity and clocks").
//!
//! Keys come from the waiting room's JWKS: fetched on first need, on an unknown `kid` (at most
//! once per cooldown) and on a schedule ([`Verifier::refresh_now`], every `jwks_refresh_secs`).
//! Each successful fetch *replaces* the key set: a key that left the JWKS is dropped, and every
//! cached token it signed is evicted, so its tokens are refused from then on (case W09). A failed
//! fetch keeps the last good set (stale-if-error) and says so in `bc_jwks_stale_seconds`.
//! [`keys`] loads the waiting room's key in every encoding; [`tokencache`] keeps verified tokens
//! until they expire; [`policy`] checks this door's settings against the waiting room's.
//!
//! Layer: imports nothing from the crate outside `door/`; `inventory`, `state` and `http` use
//! [`Admission`] and [`Verifier`].

pub mod keys;
pub mod policy;
pub mod tokencache;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use sale_common::SharedClock;
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, RwLock};

/// The claims of an admission token (API.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Admission {
    /// Issuer, must be the configured one.
    pub iss: String,
    /// Audience: the token's `aud`, which must be or contain the configured one (several
    /// audiences are kept space-separated).
    #[serde(deserialize_with = "one_or_many")]
    pub aud: String,
    /// Visitor id chosen by the waiting room.
    pub sub: String,
    /// Event id = show id.
    pub event: String,
    /// Token id; one live hold per jti.
    pub jti: String,
    /// Issued at, epoch s.
    pub iat: i64,
    /// Not before, epoch s.
    pub nbf: i64,
    /// Expiry, epoch s.
    pub exp: i64,
    /// The fan's tier from its access code or invitation (issue 14 item 3), if any: tier-only
    /// sections (`Tier::restricted`) are held only with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// `aud` as a string or an array of strings (RFC 7519 §4.1.3), kept space-separated.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Aud {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Aud::deserialize(d)? {
        Aud::One(s) => s,
        Aud::Many(v) => v.join(" "),
    })
}

/// A fixed, client-safe text for a token error: never jsonwebtoken's or base64's own text
/// (which can echo the input or name library internals).
pub fn jwt_detail(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidSignature => "bad signature",
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::MissingAlgorithm => {
            "unsupported algorithm"
        }
        K::InvalidIssuer => "wrong issuer",
        K::InvalidAudience => "wrong audience",
        K::MissingRequiredClaim(_) => "missing required claim",
        K::ExpiredSignature | K::ImmatureSignature => "expired or not yet valid",
        _ => "malformed token",
    }
    .to_owned()
}

/// Why a token was refused. Never shown in detail to the fan beyond the category.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DoorError {
    /// No token in header or cookie.
    #[error("no admission token")]
    Missing,
    /// Malformed, wrong algorithm, unknown key, bad signature, wrong iss/aud.
    #[error("invalid admission token: {0}")]
    Invalid(String),
    /// At or past `exp` (+leeway) or before `nbf` (−leeway).
    #[error("admission token expired or not yet valid")]
    Expired,
    /// `event` is not this show.
    #[error("admission token is for another event")]
    WrongEvent,
}

/// Verifies admission tokens; keys cached per `kid`.
#[derive(Debug)]
pub struct Verifier {
    jwks_url: Option<String>,
    http: reqwest::Client,
    keys: RwLock<HashMap<String, DecodingKey>>,
    last_fetch: Mutex<Option<Instant>>,
    /// When the JWKS last answered (stale-if-error age).
    last_good: std::sync::Mutex<Option<Instant>>,
    /// When this verifier was made (a JWKS that never answered is stale from then).
    created: Instant,
    cooldown: Duration,
    validation: Validation,
    leeway: i64,
    clock: SharedClock,
    cache: tokencache::TokenCache,
}

impl Verifier {
    /// A verifier that loads keys from `jwks_url` on first need.
    pub fn new(
        jwks_url: Option<String>,
        issuer: &str,
        audience: &str,
        leeway_secs: u64,
        cooldown: Duration,
        clock: SharedClock,
    ) -> Self {
        let mut v = Validation::new(Algorithm::EdDSA);
        v.algorithms = vec![Algorithm::EdDSA];
        v.leeway = leeway_secs;
        v.set_issuer(&[issuer]);
        v.set_audience(&[audience]);
        // exp/nbf are checked below against the injected clock, not the system clock.
        v.validate_exp = false;
        v.validate_nbf = false;
        v.required_spec_claims = ["iss", "aud", "sub", "exp", "nbf"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Self {
            jwks_url,
            http,
            keys: RwLock::new(HashMap::new()),
            last_fetch: Mutex::new(None),
            last_good: std::sync::Mutex::new(None),
            created: Instant::now(),
            cooldown,
            validation: v,
            leeway: i64::try_from(leeway_secs).unwrap_or(i64::MAX),
            clock,
            cache: tokencache::TokenCache::default(),
        }
    }

    /// Adds a key directly (tests, or a pinned key from configuration).
    pub async fn insert_key(&self, kid: impl Into<String>, key: DecodingKey) {
        self.keys.write().await.insert(kid.into(), key);
    }

    /// Verifies `token` for `show` (or for any show when `None`), returning its claims. A token
    /// whose signature verified before is taken from the cache (no signature check); time and
    /// event are checked on every call either way.
    pub async fn verify(&self, token: &str, show: Option<&str>) -> Result<Admission, DoorError> {
        let hash = tokencache::TokenCache::hash(token);
        let c = match self.cache.get(&hash) {
            Some(c) => c,
            None => {
                let (kid, c) = self.verify_signature(token).await?;
                self.cache
                    .insert(hash, kid, c.clone(), self.clock.now_secs(), self.leeway);
                c
            }
        };
        let now = self.clock.now_secs();
        // RFC 7519 §4.1.4: not accepted on or after `exp`; §4.1.5: not before `nbf`.
        if now >= c.exp.saturating_add(self.leeway) || now < c.nbf.saturating_sub(self.leeway) {
            return Err(DoorError::Expired);
        }
        if let Some(show) = show {
            if c.event != show {
                return Err(DoorError::WrongEvent);
            }
        }
        Ok(c)
    }

    /// Like [`verify`](Self::verify) for any show, except that a token at or past its `exp` is
    /// still accepted, with `true` beside it: a fan's hold outlives the admission that made it
    /// (DECISIONS "Tokens, capacity and clocks": paying needs a live hold, not a live admission).
    /// Key, signature, `iss`, `aud` and `nbf` are checked as always, so a revoked key's tokens
    /// stay refused; the caller limits an expired token to the holds made with its `jti`.
    pub async fn verify_for_hold(&self, token: &str) -> Result<(Admission, bool), DoorError> {
        let hash = tokencache::TokenCache::hash(token);
        let c = match self.cache.get(&hash) {
            Some(c) => c,
            None => self.verify_signature(token).await?.1,
        };
        let now = self.clock.now_secs();
        if now < c.nbf.saturating_sub(self.leeway) {
            return Err(DoorError::Expired);
        }
        let expired = now >= c.exp.saturating_add(self.leeway);
        Ok((c, expired))
    }

    /// Tokens whose signature is cached (metrics, tests).
    pub fn cached_tokens(&self) -> usize {
        self.cache.len()
    }

    /// Header, algorithm, key and signature, `iss` and `aud`: everything but time and event.
    async fn verify_signature(&self, token: &str) -> Result<(String, Admission), DoorError> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| DoorError::Invalid(jwt_detail(&e)))?;
        // The header's algorithm is never trusted to pick the verifier (case W01).
        if header.alg != Algorithm::EdDSA {
            return Err(DoorError::Invalid("unsupported algorithm".into()));
        }
        let kid = header
            .kid
            .ok_or_else(|| DoorError::Invalid("malformed token".into()))?;
        let key = self.key(&kid).await?;
        let data = jsonwebtoken::decode::<Admission>(token, &key, &self.validation)
            .map_err(|e| DoorError::Invalid(jwt_detail(&e)))?;
        Ok((kid, data.claims))
    }

    async fn key(&self, kid: &str) -> Result<DecodingKey, DoorError> {
        if let Some(k) = self.keys.read().await.get(kid) {
            return Ok(k.clone());
        }
        self.refresh().await;
        self.keys
            .read()
            .await
            .get(kid)
            .cloned()
            .ok_or_else(|| DoorError::Invalid("unknown signing key".into()))
    }

    /// Re-fetches the JWKS for an unknown `kid`, unless it was fetched less than `cooldown` ago.
    async fn refresh(&self) {
        let mut last = self.last_fetch.lock().await;
        if last.is_some_and(|t| t.elapsed() < self.cooldown) {
            return;
        }
        *last = Some(Instant::now());
        let _ = self.replace_keys().await;
    }

    /// The scheduled refresh (every `jwks_refresh_secs`, and once at start): fetches the JWKS
    /// and replaces the key set. Returns the `kid`s dropped because they left the JWKS; their
    /// cached tokens are evicted, so they are refused from now on (case W09).
    ///
    /// Errors: the JWKS did not answer or answered nonsense; the last good set stays in use
    /// (stale-if-error), `bc_jwks_stale_seconds` grows, and past [`STALE_ALERT`] the alert
    /// gauge `bc_jwks_stale_alert` is 1.
    pub async fn refresh_now(&self) -> anyhow::Result<Vec<String>> {
        // Held across the fetch: an unknown-kid refresh meanwhile waits for this one's keys.
        let mut last = self.last_fetch.lock().await;
        *last = Some(Instant::now());
        self.replace_keys().await
    }

    async fn replace_keys(&self) -> anyhow::Result<Vec<String>> {
        let Some(url) = &self.jwks_url else {
            return Ok(Vec::new());
        };
        let found = match self.fetch(url).await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "JWKS fetch failed: keeping the last good key set");
                self.report_staleness();
                return Err(e);
            }
        };
        let mut keys = self.keys.write().await;
        let dropped: Vec<String> = keys
            .keys()
            .filter(|kid| !found.iter().any(|(k, _)| k == *kid))
            .cloned()
            .collect();
        *keys = found.into_iter().collect();
        drop(keys);
        if !dropped.is_empty() {
            let evicted = self.cache.evict_kids(&dropped);
            metrics::counter!("bc_jwks_keys_dropped_total").increment(dropped.len() as u64);
            tracing::warn!(
                ?dropped,
                evicted,
                "signing keys left the JWKS: their tokens are refused"
            );
        }
        if let Ok(mut g) = self.last_good.lock() {
            *g = Some(Instant::now());
        }
        self.report_staleness();
        Ok(dropped)
    }

    /// Seconds since the JWKS last answered (`None`: never).
    pub fn stale_for(&self) -> Option<Duration> {
        self.last_good.lock().ok()?.map(|t| t.elapsed())
    }

    fn report_staleness(&self) {
        // Never answered: stale since this verifier was made, not forever (a booking core
        // started while the waiting room is down is not 10 minutes late at once).
        let (age, ever) = match self.stale_for() {
            Some(d) => (d.as_secs_f64(), true),
            None => (self.created.elapsed().as_secs_f64(), false),
        };
        metrics::gauge!("bc_jwks_stale_seconds").set(if ever { age } else { -1.0 });
        let alert = age >= STALE_ALERT.as_secs_f64();
        metrics::gauge!("bc_jwks_stale_alert").set(if alert { 1.0 } else { 0.0 });
        if alert && ever {
            tracing::error!(
                stale_secs = age,
                "the waiting room's JWKS has not answered for 10 minutes: keys cannot be revoked"
            );
        } else if alert {
            tracing::error!(
                since_start_secs = age,
                "the waiting room's JWKS has never answered since start (10 minutes): no admission token can be verified"
            );
        } else if !ever {
            tracing::warn!("the waiting room's JWKS has not answered yet; admission tokens cannot be verified until it does");
        }
    }

    async fn fetch(&self, url: &str) -> anyhow::Result<Vec<(String, DecodingKey)>> {
        let jwks: keys::Jwks = self
            .http
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let mut out = Vec::new();
        for jwk in &jwks.keys {
            match keys::from_jwk(jwk) {
                Ok(k) => out.push((jwk.kid.clone(), k)),
                Err(e) => tracing::warn!(error = %e, "JWKS entry skipped"),
            }
        }
        Ok(out)
    }
}

/// How long the door may run on a stale key set before it raises the alert (DECISIONS: "keeps
/// its last good set and raises an alert after 10 minutes").
pub const STALE_ALERT: Duration = Duration::from_secs(600);

/// Runs [`Verifier::refresh_now`] every `every` (the configured `jwks_refresh_secs`) until
/// the task is aborted. The worst case from a key leaving the JWKS to its tokens being refused
/// is `every` plus one fetch (bounded at 5 s) plus the waiting room's own key-directory re-read
/// (5 s): 70 s with the defaults.
pub async fn refresh_loop(verifier: SharedVerifier, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let _ = verifier.refresh_now().await;
    }
}

/// Shared verifier handle.
pub type SharedVerifier = Arc<Verifier>;

/// The admission token of a request: `Authorization: Bearer` first, else the `admission` cookie.
/// Errors as [`token_from_headers_or_cookie`].
pub fn token_from_headers(headers: &axum::http::HeaderMap) -> Result<String, DoorError> {
    token_from_headers_or_cookie(headers, "admission")
}

/// `Authorization: Bearer` first, else the cookie named `cookie` (the edge gate's
/// `gate_admission` on a guarded origin). Errors: [`DoorError::Missing`] without either;
/// [`DoorError::Invalid`] for more than one `Authorization` header, whichever would win (a
/// request carries one set of credentials, RFC 9110 §11.6.2; a proxy that checked the other
/// one would have let through a token nobody checked: newcomer review, the first was used).
pub fn token_from_headers_or_cookie(
    headers: &axum::http::HeaderMap,
    cookie: &str,
) -> Result<String, DoorError> {
    let mut auth = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    let first = auth.next();
    if auth.next().is_some() {
        return Err(DoorError::Invalid(
            "more than one Authorization header".into(),
        ));
    }
    if let Some(v) = first.and_then(|v| v.to_str().ok()) {
        // The scheme is case-insensitive (RFC 9110 §11.1): `Bearer`, `bearer`, `BEARER`.
        if let Some((scheme, t)) = v.split_once(' ') {
            if scheme.eq_ignore_ascii_case("bearer") {
                return Ok(t.trim().to_owned());
            }
        }
    }
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == cookie)
        .map(|(_, v)| v.to_owned())
        .ok_or(DoorError::Missing)
}
