//! Signed identity tokens (issue 3: "one queue place per identity" from a header set by a
//! trusted upstream **or** a signed identity token). A login service that shares
//! `identity_token_key` with the waiting room signs `X-Identity-Token: <JWT>`: HS256 only,
//! `aud` = [`IDENTITY_AUDIENCE`], `sub` = the identity (1..=256 characters), `exp` required,
//! checked against the injected clock with [`IDENTITY_LEEWAY_SECS`] of skew. Unlike the
//! identity header, the token is honoured from any peer: its signature is the proof. The visitor
//! id is then derived from `sub` exactly as for the header (`JoinKeys::identity_visitor`), so
//! both paths give the same identity the same single place.

use crate::tokens::TokenError;
use jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// Request header carrying the identity token.
pub const IDENTITY_TOKEN_HEADER: &str = "x-identity-token";
/// The `aud` an identity token must name.
pub const IDENTITY_AUDIENCE: &str = "waiting-room";
/// Clock skew tolerated on `exp` and `iat`, **seconds**.
pub const IDENTITY_LEEWAY_SECS: i64 = 5;
/// Longest accepted identity (`sub`), characters.
pub const MAX_IDENTITY_LEN: usize = 256;

#[derive(Debug, Deserialize)]
struct IdentityClaims {
    sub: String,
    exp: i64,
    #[serde(default)]
    iat: Option<i64>,
}

/// Verifies identity tokens with one shared HS256 key.
pub struct IdentityVerifier {
    key: DecodingKey,
}

impl std::fmt::Debug for IdentityVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdentityVerifier")
    }
}

impl IdentityVerifier {
    /// From the shared secret (`identity_token_key`, at least 32 bytes: `Config::validate`).
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: DecodingKey::from_secret(secret),
        }
    }

    /// The verified identity of `token` at `now` (epoch **seconds**): HS256 signature, `aud`,
    /// not expired, not issued in the future, `sub` of 1..=256 visible characters.
    pub fn verify(&self, token: &str, now: i64) -> Result<String, TokenError> {
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.leeway = 0;
        v.set_audience(&[IDENTITY_AUDIENCE]);
        v.set_required_spec_claims(&["exp", "sub", "aud"]);
        let c = decode::<IdentityClaims>(token.trim(), &self.key, &v)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidSignature => TokenError::Forged,
                _ => TokenError::Invalid,
            })?
            .claims;
        if c.exp + IDENTITY_LEEWAY_SECS <= now
            || c.iat.is_some_and(|iat| iat - IDENTITY_LEEWAY_SECS > now)
        {
            return Err(TokenError::Expired);
        }
        let sub = c.sub.trim();
        if sub.is_empty() || sub.len() > MAX_IDENTITY_LEN || sub.chars().any(char::is_control) {
            return Err(TokenError::Invalid);
        }
        Ok(sub.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};

    const KEY: &[u8] = b"identity-key-0123456789-0123456789";

    fn token(key: &[u8], alg: Algorithm, claims: serde_json::Value) -> String {
        encode(&Header::new(alg), &claims, &EncodingKey::from_secret(key)).expect("sign")
    }

    #[test]
    fn accepts_only_signed_unexpired_tokens_for_this_audience() {
        let v = IdentityVerifier::new(KEY);
        let ok = serde_json::json!({"sub": "alice", "aud": "waiting-room", "exp": 1000});
        assert_eq!(
            v.verify(&token(KEY, Algorithm::HS256, ok.clone()), 900)
                .ok(),
            Some("alice".into())
        );
        assert!(matches!(
            v.verify(&token(KEY, Algorithm::HS256, ok.clone()), 1005),
            Err(TokenError::Expired)
        ));
        let other = b"another-key-0123456789-0123456789-xx";
        assert!(matches!(
            v.verify(&token(other, Algorithm::HS256, ok.clone()), 900),
            Err(TokenError::Forged)
        ));
        assert!(
            v.verify(&token(KEY, Algorithm::HS512, ok), 900).is_err(),
            "algorithm pinned"
        );
        let aud = serde_json::json!({"sub": "alice", "aud": "booking-core", "exp": 1000});
        assert!(v.verify(&token(KEY, Algorithm::HS256, aud), 900).is_err());
        let no_exp = serde_json::json!({"sub": "alice", "aud": "waiting-room"});
        assert!(v
            .verify(&token(KEY, Algorithm::HS256, no_exp), 900)
            .is_err());
        let empty = serde_json::json!({"sub": " ", "aud": "waiting-room", "exp": 1000});
        assert!(v.verify(&token(KEY, Algorithm::HS256, empty), 900).is_err());
    }
}
