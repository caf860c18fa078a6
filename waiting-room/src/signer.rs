//! The admission-token signer: one active Ed25519 key signs, and the JWKS publishes every key a
//! verifier may meet — the active one, the next one (published before it ever signs) and
//! retired ones until their last token has expired (see [`crate::keys`]). The key set is swapped
//! whole when the key directory is re-read; a failed read keeps the previous set.
//!
//! **Signing cost.** Tokens are signed here with the cached `ed25519_dalek::SigningKey` and a
//! header encoded once per key (JWS compact serialisation, RFC 7515 §7.1). jsonwebtoken 10's
//! `rust_crypto` backend re-parses the PKCS#8 key on every `encode`, which derives the public key
//! (one more base-point multiplication) and so doubles the cost: ~19k tokens/s per core measured
//! (DEPENDENCIES.md) against ~2× that here. Verification (probe, tests, the booking core) still
//! goes through jsonwebtoken, so every token is checked by an independent implementation at
//! start-up.

use crate::domain::{Admission, EventId};
use crate::keys::KeySet;
use crate::tokens::{AdmissionClaims, Audience};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::{Signer, SigningKey};
use jsonwebtoken::Validation;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Header};
use std::sync::{Arc, RwLock};

struct Active {
    kid: String,
    key: SigningKey,
    /// `base64url(header JSON)` with this key's `kid`, computed once.
    header_b64: String,
    public_raw: [u8; 32],
}

struct Ring {
    active: Active,
    /// Every published public key (active first), raw 32 bytes, with its kid.
    published: Vec<(String, [u8; 32])>,
}

/// Signs admission tokens with the active key and serves the JWKS of all published keys.
pub struct AdmissionSigner {
    ring: RwLock<Arc<Ring>>,
    issuer: String,
    audience: String,
    /// The edge gate's audiences, after `audience` in every token's `aud`.
    gate_audiences: Vec<String>,
    /// `nbf = iat - nbf_back_secs` (the configured `max_clock_skew_secs`, case W11).
    nbf_back_secs: i64,
}

fn active(key: &SigningKey) -> anyhow::Result<Active> {
    // Round-trip through PKCS#8 so a key that cannot be encoded fails here, at start-up.
    let der = key
        .to_pkcs8_der()
        .map_err(|e| anyhow::anyhow!("signing key to PKCS#8: {e}"))?;
    let key = SigningKey::from_pkcs8_der(der.as_bytes())
        .map_err(|e| anyhow::anyhow!("signing key from PKCS#8: {e}"))?;
    let public_raw = key.verifying_key().to_bytes();
    let kid = jwk_thumbprint(&public_raw);
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(kid.clone());
    let header_b64 = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&h)?);
    Ok(Active {
        kid,
        key,
        header_b64,
        public_raw,
    })
}

fn ring(set: &KeySet) -> anyhow::Result<Ring> {
    let active = active(&set.active)?;
    let mut published = vec![(active.kid.clone(), active.public_raw)];
    for k in &set.published {
        let raw = k.to_bytes();
        let kid = jwk_thumbprint(&raw);
        if !published.iter().any(|(p, _)| *p == kid) {
            published.push((kid, raw));
        }
    }
    Ok(Ring { active, published })
}

impl AdmissionSigner {
    /// From a PKCS#8 PEM private key, or a freshly generated key when `pem` is `None`. Signs
    /// and verifies a probe token so a key-encoding mistake fails here, at start-up (case W02).
    pub fn new(pem: Option<&str>, issuer: &str, audience: &str) -> anyhow::Result<Self> {
        let key = match pem {
            Some(p) => SigningKey::from_pkcs8_pem(p)
                .map_err(|e| anyhow::anyhow!("signing_key_pem: {e}"))?,
            None => SigningKey::generate(&mut rand::rngs::OsRng),
        };
        Self::from_set(
            &KeySet {
                active: key,
                published: Vec::new(),
            },
            issuer,
            audience,
        )
    }

    /// From a key directory's set (active key signs, all published keys in the JWKS).
    pub fn from_set(set: &KeySet, issuer: &str, audience: &str) -> anyhow::Result<Self> {
        let signer = Self {
            ring: RwLock::new(Arc::new(ring(set)?)),
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            gate_audiences: Vec::new(),
            nbf_back_secs: 0,
        };
        signer.probe()?;
        Ok(signer)
    }

    fn probe(&self) -> anyhow::Result<()> {
        let event = EventId::parse("probe").expect("valid id");
        let a = Admission {
            jti: "probe".into(),
            iat: 0,
            exp: i64::MAX / 2,
        };
        let token = self.sign(&self.claims(&event, "probe", &a))?;
        self.verify(&token).map(|_| ())
    }

    fn current(&self) -> Arc<Ring> {
        match self.ring.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Swaps in a new key set (after the key directory changed); verified with a probe first,
    /// so a broken set never replaces a working one.
    pub fn replace(&self, set: &KeySet) -> anyhow::Result<()> {
        let new = Arc::new(ring(set)?);
        let old = std::mem::replace(
            &mut *self.ring.write().map_err(|_| anyhow::anyhow!("lock"))?,
            new,
        );
        if let Err(e) = self.probe() {
            *self.ring.write().map_err(|_| anyhow::anyhow!("lock"))? = old;
            return Err(e);
        }
        Ok(())
    }

    /// The key id of the signing key: the RFC 7638 JWK thumbprint of its public key.
    pub fn kid(&self) -> String {
        self.current().active.kid.clone()
    }

    /// The raw 32-byte public key of the signing key.
    pub fn public_raw(&self) -> [u8; 32] {
        self.current().active.public_raw
    }

    /// The key ids in the JWKS, signing key first.
    pub fn published_kids(&self) -> Vec<String> {
        self.current()
            .published
            .iter()
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Sets `nbf` this many **seconds** before `iat` (the configured `max_clock_skew_secs`), so
    /// a booking door whose clock is behind by up to that much accepts a fresh token (case W11;
    /// DECISIONS: skew is tolerated on the start of a token only, the door checks `exp` exactly).
    pub fn with_nbf_back(mut self, secs: u64) -> Self {
        self.nbf_back_secs = secs as i64;
        self
    }

    /// Adds the edge gate's audiences (the configured `gate_audiences`) to every token's `aud`.
    pub fn with_gate_audiences(mut self, audiences: &[String]) -> Self {
        self.gate_audiences = audiences.to_vec();
        self
    }

    /// The admission claims of a stored admission.
    pub fn claims(&self, event: &EventId, visitor: &str, a: &Admission) -> AdmissionClaims {
        AdmissionClaims {
            iss: self.issuer.clone(),
            aud: Audience::of(&self.audience, &self.gate_audiences),
            sub: visitor.to_owned(),
            event: event.as_str().to_owned(),
            jti: a.jti.clone(),
            iat: a.iat,
            nbf: a.iat - self.nbf_back_secs,
            exp: a.exp,
            tier: None,
        }
    }

    /// Signs with the active key (Ed25519 is deterministic: same claims and key, same token).
    pub fn sign(&self, claims: &AdmissionClaims) -> anyhow::Result<String> {
        let ring = self.current();
        let a = &ring.active;
        let payload = serde_json::to_vec(claims)?;
        let mut token = String::with_capacity(a.header_b64.len() + payload.len() * 4 / 3 + 90);
        token.push_str(&a.header_b64);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(&payload, &mut token);
        let signature = a.key.sign(token.as_bytes());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature.to_bytes(), &mut token);
        Ok(token)
    }

    /// Verifies signature (with the published key named by `kid`), algorithm (EdDSA only),
    /// `iss` and `aud`; `exp`/`nbf` are the verifier's business with its own clock. Used for the
    /// start-up probe and tests.
    pub fn verify(&self, token: &str) -> anyhow::Result<AdmissionClaims> {
        let kid = decode_header(token)?.kid.unwrap_or_default();
        let ring = self.current();
        let raw = ring
            .published
            .iter()
            .find(|(k, _)| *k == kid)
            .map(|(_, r)| *r)
            .ok_or_else(|| anyhow::anyhow!("unknown kid"))?;
        let mut v = Validation::new(Algorithm::EdDSA);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.leeway = 0;
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.required_spec_claims.clear();
        Ok(decode::<AdmissionClaims>(token, &DecodingKey::from_ed_der(&raw), &v)?.claims)
    }

    /// The JWKS document (`/.well-known/jwks.json`): every published key, signing key first.
    pub fn jwks(&self) -> serde_json::Value {
        let keys: Vec<serde_json::Value> = self
            .current()
            .published
            .iter()
            .map(|(kid, raw)| {
                serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": URL_SAFE_NO_PAD.encode(raw),
                    "kid": kid, "alg": "EdDSA", "use": "sig"})
            })
            .collect();
        serde_json::json!({ "keys": keys })
    }
}

pub use crate::keys::jwk_thumbprint;
