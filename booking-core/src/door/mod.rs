//! The door: every booking call needs an admission token signed by the waiting room (DESIGN
//! "Booking core / Door"). EdDSA only, `iss`, `aud`, `exp`/`nbf` against the injected clock with
//! an explicit small leeway, and the `event` claim bound to the show. Keys come from the waiting
//! room's JWKS, fetched lazily, cached, and refreshed on an unknown `kid` at most once per cooldown.
//! [`keys`] loads the waiting room's key in every encoding; [`tokencache`] keeps verified tokens
//! until they expire.
//!
//! Layer: imports nothing from the crate outside `door/`; `inventory`, `state` and `http` use
//! [`Admission`] and [`Verifier`].

pub mod keys;
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
    /// Audience, must be the configured one.
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
    /// Past `exp` (+leeway) or before `nbf` (−leeway).
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
                let c = self.verify_signature(token).await?;
                self.cache
                    .insert(hash, c.clone(), self.clock.now_secs(), self.leeway);
                c
            }
        };
        let now = self.clock.now_secs();
        if now > c.exp.saturating_add(self.leeway) || now < c.nbf.saturating_sub(self.leeway) {
            return Err(DoorError::Expired);
        }
        if let Some(show) = show {
            if c.event != show {
                return Err(DoorError::WrongEvent);
            }
        }
        Ok(c)
    }

    /// Tokens whose signature is cached (metrics, tests).
    pub fn cached_tokens(&self) -> usize {
        self.cache.len()
    }

    /// Header, algorithm, key and signature, `iss` and `aud`: everything but time and event.
    async fn verify_signature(&self, token: &str) -> Result<Admission, DoorError> {
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
        Ok(data.claims)
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

    /// Re-fetches the JWKS unless it was fetched less than `cooldown` ago. Errors are logged;
    /// keys already cached stay (retired keys remain valid until their tokens expire).
    async fn refresh(&self) {
        let Some(url) = &self.jwks_url else { return };
        let mut last = self.last_fetch.lock().await;
        if last.is_some_and(|t| t.elapsed() < self.cooldown) {
            return;
        }
        *last = Some(Instant::now());
        match self.fetch(url).await {
            Ok(found) => {
                let mut keys = self.keys.write().await;
                for (kid, k) in found {
                    keys.insert(kid, k);
                }
            }
            Err(e) => tracing::warn!(error = %e, "JWKS fetch failed"),
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

/// Shared verifier handle.
pub type SharedVerifier = Arc<Verifier>;

/// The admission token of a request: `Authorization: Bearer` first, else the `admission` cookie.
pub fn token_from_headers(headers: &axum::http::HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        if let Some(t) = v.strip_prefix("Bearer ") {
            return Some(t.trim().to_owned());
        }
    }
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == "admission")
        .map(|(_, v)| v.to_owned())
}
