//! Signed invitations (issue 14 item 2): the promoter's own system signs a JWT per fan with a
//! key the operator registered for the event — an Ed25519 public key (`EdDSA`) or an HMAC secret
//! (`HS256`, at least 32 bytes). Claims: `sub` = the fan's unique key (1..=256 characters),
//! `aud` = the event id, `exp` (epoch seconds, required, checked against the injected clock with
//! no leeway), optional `tier`. The visitor id is derived from `sub` (`JoinKeys::identity_visitor`
//! of `"invitation:" + sub`), so one key holds one place however often the invitation is used.

use crate::domain::EventId;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};

/// Request header carrying an invitation.
pub const INVITATION_HEADER: &str = "x-invitation";

/// Shortest HMAC secret accepted, bytes.
pub const HMAC_MIN_LEN: usize = 32;

/// The promoter key of an event, as registered (and stored) — JSON
/// `{"alg": "EdDSA", "public_key_pem": …}` or `{"alg": "HS256", "secret": …}`.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "alg", deny_unknown_fields)]
pub enum PromoterKey {
    /// Ed25519 public key, SPKI PEM.
    EdDSA {
        /// `-----BEGIN PUBLIC KEY-----…`
        public_key_pem: String,
    },
    /// Shared HMAC-SHA256 secret.
    HS256 {
        /// At least [`HMAC_MIN_LEN`] bytes.
        secret: String,
    },
}

impl std::fmt::Debug for PromoterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.alg_name())
    }
}

/// Why an invitation was refused; [`InvitationError::kind`] is the problem kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvitationError {
    /// Not a JWT, wrong algorithm, bad signature, missing or bad claims.
    Invalid,
    /// Past `exp`.
    Expired,
    /// `aud` names another event.
    OtherEvent,
}

impl InvitationError {
    /// Problem kind and metric reason.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Invalid => "invitation-invalid",
            Self::Expired => "invitation-expired",
            Self::OtherEvent => "invitation-other-event",
        }
    }
}

/// A verified invitation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invitation {
    /// The fan's unique key.
    pub sub: String,
    /// Tier, when the invitation carries a valid one.
    pub tier: Option<String>,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
    #[serde(default)]
    tier: Option<String>,
}

impl PromoterKey {
    fn alg_name(&self) -> &'static str {
        match self {
            Self::EdDSA { .. } => "EdDSA",
            Self::HS256 { .. } => "HS256",
        }
    }

    /// The key as the audit shows it: algorithm and the first 16 hex digits of its SHA-256.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let material = match self {
            Self::EdDSA { public_key_pem } => public_key_pem.as_bytes(),
            Self::HS256 { secret } => secret.as_bytes(),
        };
        let h = hex::encode(sha2::Sha256::digest(material));
        format!("{} {}", self.alg_name(), &h[..16])
    }

    /// The decoding key and algorithm, or why the key is unusable.
    pub fn decoding(&self) -> Result<(DecodingKey, Algorithm), String> {
        match self {
            Self::EdDSA { public_key_pem } => DecodingKey::from_ed_pem(public_key_pem.as_bytes())
                .map(|k| (k, Algorithm::EdDSA))
                .map_err(|_| "public_key_pem: an Ed25519 public key in PEM".to_owned()),
            Self::HS256 { secret } if secret.len() >= HMAC_MIN_LEN => Ok((
                DecodingKey::from_secret(secret.as_bytes()),
                Algorithm::HS256,
            )),
            Self::HS256 { .. } => Err(format!("secret: at least {HMAC_MIN_LEN} bytes")),
        }
    }

    /// Verifies `token` for `event` at `now` (epoch **seconds**).
    pub fn verify(
        &self,
        token: &str,
        event: &EventId,
        now: i64,
    ) -> Result<Invitation, InvitationError> {
        let (key, alg) = self.decoding().map_err(|_| InvitationError::Invalid)?;
        let mut v = Validation::new(alg);
        v.validate_exp = false;
        v.validate_nbf = false;
        v.leeway = 0;
        v.set_audience(&[event.as_str()]);
        v.set_required_spec_claims(&["exp", "sub", "aud"]);
        let c = decode::<Claims>(token.trim(), &key, &v)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidAudience => InvitationError::OtherEvent,
                _ => InvitationError::Invalid,
            })?
            .claims;
        if c.exp <= now {
            return Err(InvitationError::Expired);
        }
        let sub = c.sub.trim();
        if sub.is_empty() || sub.len() > 256 || sub.chars().any(char::is_control) {
            return Err(InvitationError::Invalid);
        }
        if c.tier.as_deref().is_some_and(|t| !super::valid_tier(t)) {
            return Err(InvitationError::Invalid);
        }
        Ok(Invitation {
            sub: sub.to_owned(),
            tier: c.tier,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{encode, EncodingKey, Header};
    use serde_json::json;

    const SECRET: &str = "promoter-secret-0123456789-0123456789";

    fn hs(claims: serde_json::Value) -> String {
        let key = EncodingKey::from_secret(SECRET.as_bytes());
        encode(&Header::new(Algorithm::HS256), &claims, &key).expect("sign")
    }

    #[test]
    fn an_invitation_names_its_event_and_expires() {
        let key = PromoterKey::HS256 {
            secret: SECRET.into(),
        };
        let ev = EventId::parse("demo").unwrap();
        let ok = hs(json!({"sub": "fan-1", "aud": "demo", "exp": 1000, "tier": "vip"}));
        let inv = key.verify(&ok, &ev, 999).expect("valid");
        assert_eq!(
            (inv.sub.as_str(), inv.tier.as_deref()),
            ("fan-1", Some("vip"))
        );
        assert_eq!(key.verify(&ok, &ev, 1000), Err(InvitationError::Expired));
        let other = hs(json!({"sub": "fan-1", "aud": "other", "exp": 1000}));
        assert_eq!(key.verify(&other, &ev, 1), Err(InvitationError::OtherEvent));
        let forged = PromoterKey::HS256 {
            secret: "x".repeat(40),
        };
        assert_eq!(forged.verify(&ok, &ev, 1), Err(InvitationError::Invalid));
        assert!(PromoterKey::HS256 {
            secret: "short".into()
        }
        .decoding()
        .is_err());
    }
}
