//! Join tokens (HS256, verified only here) and admission tokens (EdDSA, verified offline by the
//! booking core through the JWKS). Algorithms are pinned on every verify and leeway is explicit
//! (DEPENDENCIES.md: jsonwebtoken's default leeway is 60 s). Expiry is checked against the
//! injected clock, not jsonwebtoken's wall clock (STYLE.md rule 5).

use crate::domain::{EventId, VisitorId};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Clock skew tolerated on join-token `iat`/`exp`, **seconds**.
pub const JOIN_LEEWAY_SECS: i64 = 5;

/// Claims of a join token (API.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JoinClaims {
    /// Visitor id (server-chosen).
    pub sub: String,
    /// Event id.
    pub event: String,
    /// Issued at, epoch seconds.
    pub iat: i64,
    /// Expires at, epoch seconds.
    pub exp: i64,
}

/// `aud` of an admission token: one audience (a string), or several (an array, RFC 7519
/// §4.1.3) when the edge gate guards other origins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// The booking core alone.
    One(String),
    /// The booking core first, then each guarded origin's audience.
    Many(Vec<String>),
}

impl Audience {
    /// `primary` alone, or with `others` after it.
    pub fn of(primary: &str, others: &[String]) -> Self {
        if others.is_empty() {
            Self::One(primary.to_owned())
        } else {
            Self::Many(
                std::iter::once(primary.to_owned())
                    .chain(others.iter().cloned())
                    .collect(),
            )
        }
    }

    /// The first audience (the booking core's).
    pub fn primary(&self) -> &str {
        match self {
            Self::One(a) => a,
            Self::Many(v) => v.first().map(String::as_str).unwrap_or_default(),
        }
    }

    /// Whether `aud` is one of them.
    pub fn contains(&self, aud: &str) -> bool {
        match self {
            Self::One(a) => a == aud,
            Self::Many(v) => v.iter().any(|a| a == aud),
        }
    }
}

/// Claims of an admission token (API.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdmissionClaims {
    /// Issuer (`waiting-room`).
    pub iss: String,
    /// Audience: `booking-core`, or an array of it and the edge gate's audiences.
    pub aud: Audience,
    /// Visitor id.
    pub sub: String,
    /// Event id.
    pub event: String,
    /// Token id (stored: a second claim re-signs the same claims).
    pub jti: String,
    /// Issued at, epoch seconds.
    pub iat: i64,
    /// Not before, epoch seconds.
    pub nbf: i64,
    /// Expires at, epoch seconds.
    pub exp: i64,
    /// The fan's tier from its access code or invitation (issue 14 item 3), absent otherwise;
    /// the booking core offers tier-only sections to fans whose token names the tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

/// Why a join token was refused (always a 401, decided before any store call).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not a well-formed HS256 JWT with the expected claims.
    #[error("invalid join token")]
    Invalid,
    /// Well-formed, but the signature or key id is not ours.
    #[error("invalid join token")]
    Forged,
    /// Past `exp` (or issued in the future).
    #[error("join token expired")]
    Expired,
    /// Valid, but for another event.
    #[error("join token is for another event")]
    WrongEvent,
}

fn fingerprint(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(&Sha256::digest(bytes)[..12])
}

/// HS256 keys of join tokens, each with a `kid` derived from the key. The current key signs;
/// previous keys still verify (rotation: configure the new key, keep the old one in
/// `join_hmac_previous_keys` until its last join token has expired).
#[derive(Clone)]
pub struct JoinKeys {
    kid: String,
    enc: EncodingKey,
    /// Every key that verifies, current first.
    dec: Vec<(String, DecodingKey)>,
    secret: Vec<u8>,
}

impl TokenError {
    /// Metric label of the reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Invalid => "malformed",
            Self::Forged => "forged",
            Self::Expired => "expired",
            Self::WrongEvent => "wrong_event",
        }
    }
}

impl JoinKeys {
    /// From the shared HMAC secret.
    pub fn new(secret: &[u8]) -> Self {
        Self::with_previous(secret, &[])
    }

    /// From the current secret (signs and verifies) and previous ones (verify only).
    pub fn with_previous(secret: &[u8], previous: &[&[u8]]) -> Self {
        let kid = |s: &[u8]| format!("j-{}", fingerprint(s));
        let dec = std::iter::once(secret)
            .chain(previous.iter().copied())
            .map(|s| (kid(s), DecodingKey::from_secret(s)))
            .collect();
        Self {
            kid: kid(secret),
            enc: EncodingKey::from_secret(secret),
            dec,
            secret: secret.to_vec(),
        }
    }

    /// The visitor id of a verified upstream identity: a UUID (v4 layout) from
    /// HMAC-SHA256(join secret, event ‖ identity), so one identity is one visitor per event and
    /// nobody without the secret can predict another identity's id.
    pub fn identity_visitor(&self, event: &EventId, identity: &str) -> VisitorId {
        use hmac::{Hmac, Mac};
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.secret)
            .expect("HMAC takes keys of any length");
        mac.update(b"identity\0");
        mac.update(event.as_str().as_bytes());
        mac.update(b"\0");
        mac.update(identity.as_bytes());
        let out = mac.finalize().into_bytes();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&out[..16]);
        let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
        VisitorId::from_verified(id.to_string())
    }

    /// Signs a join token for `visitor` at `now` (epoch s) valid `ttl_secs` seconds.
    pub fn issue(&self, event: &EventId, visitor: &VisitorId, now: i64, ttl_secs: u64) -> String {
        let mut h = Header::new(Algorithm::HS256);
        h.kid = Some(self.kid.clone());
        let c = JoinClaims {
            sub: visitor.as_str().to_owned(),
            event: event.as_str().to_owned(),
            iat: now,
            exp: now + ttl_secs as i64,
        };
        encode(&h, &c, &self.enc).unwrap_or_default()
    }

    /// Verifies a join token: HS256 only, one of our `kid`s, this event, not expired at `now`
    /// (epoch s).
    pub fn verify(&self, token: &str, event: &EventId, now: i64) -> Result<VisitorId, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Invalid)?;
        let kid = header.kid.as_deref().ok_or(TokenError::Forged)?;
        let (_, key) = self
            .dec
            .iter()
            .find(|(k, _)| k == kid)
            .ok_or(TokenError::Forged)?;
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.validate_aud = false;
        v.leeway = 0;
        v.required_spec_claims.clear();
        let data = decode::<JoinClaims>(token, key, &v).map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::Forged,
            _ => TokenError::Invalid,
        })?;
        let c = data.claims;
        if c.exp + JOIN_LEEWAY_SECS <= now || c.iat - JOIN_LEEWAY_SECS > now {
            return Err(TokenError::Expired);
        }
        if c.event != event.as_str() {
            return Err(TokenError::WrongEvent);
        }
        if uuid::Uuid::parse_str(&c.sub).is_err() {
            return Err(TokenError::Invalid);
        }
        Ok(VisitorId::from_verified(c.sub))
    }
}

/// A fresh admission-token id.
pub fn new_jti() -> String {
    uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .to_string()
}
