//! Loading the waiting room's Ed25519 public key from every encoding it can arrive in (case W02):
//! PEM SubjectPublicKeyInfo, DER SubjectPublicKeyInfo, raw 32 bytes, and a JWKS entry's `x`.
//!
//! Every path parses the key with ed25519-dalek first and hands jsonwebtoken only the raw 32
//! bytes, because `DecodingKey::from_ed_der` silently takes the first 32 bytes of whatever it is
//! given (jsonwebtoken issue 362): a DER key through the raw path would otherwise turn into
//! "invalid signature" for every fan. Here it fails loudly at load time.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::pkcs8::DecodePublicKey;
use ed25519_dalek::VerifyingKey;
use jsonwebtoken::DecodingKey;
use serde::Deserialize;

/// Why a key could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Raw path got something that is not exactly 32 bytes (e.g. 44-byte DER SPKI).
    #[error("raw Ed25519 public key must be exactly 32 bytes, got {0} (DER SPKI? use from_der)")]
    RawLength(usize),
    /// The bytes are not a valid Ed25519 point / SPKI structure.
    #[error("invalid Ed25519 public key: {0}")]
    Invalid(String),
    /// A JWKS entry that is not `kty: OKP, crv: Ed25519`.
    #[error("JWKS key {kid:?} is not an Ed25519 OKP key")]
    NotEd25519 {
        /// Key id of the refused entry.
        kid: String,
    },
}

fn to_decoding(vk: &VerifyingKey) -> DecodingKey {
    DecodingKey::from_ed_der(vk.as_bytes())
}

/// Raw 32-byte public key. Anything else (notably 44-byte DER SPKI) is refused loudly.
pub fn from_raw(bytes: &[u8]) -> Result<DecodingKey, KeyError> {
    let arr: &[u8; 32] = bytes
        .try_into()
        .map_err(|_| KeyError::RawLength(bytes.len()))?;
    let vk = VerifyingKey::from_bytes(arr).map_err(|e| KeyError::Invalid(e.to_string()))?;
    Ok(to_decoding(&vk))
}

/// DER-encoded SubjectPublicKeyInfo (44 bytes for Ed25519).
pub fn from_der(der: &[u8]) -> Result<DecodingKey, KeyError> {
    let vk =
        VerifyingKey::from_public_key_der(der).map_err(|e| KeyError::Invalid(e.to_string()))?;
    Ok(to_decoding(&vk))
}

/// PEM (`-----BEGIN PUBLIC KEY-----`) SubjectPublicKeyInfo.
pub fn from_pem(pem: &str) -> Result<DecodingKey, KeyError> {
    let vk =
        VerifyingKey::from_public_key_pem(pem).map_err(|e| KeyError::Invalid(e.to_string()))?;
    Ok(to_decoding(&vk))
}

/// A JWKS entry's `x` (base64url, no padding, of the raw 32 bytes).
pub fn from_jwk_x(x: &str) -> Result<DecodingKey, KeyError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(x.trim_end_matches('='))
        .map_err(|e| KeyError::Invalid(format!("x is not base64url: {e}")))?;
    from_raw(&bytes)
}

/// One JWKS entry as served by the waiting room (API.md).
#[derive(Debug, Clone, Deserialize)]
pub struct Jwk {
    /// Must be `OKP`.
    pub kty: String,
    /// Must be `Ed25519`.
    #[serde(default)]
    pub crv: String,
    /// Base64url raw public key.
    #[serde(default)]
    pub x: String,
    /// Key id.
    #[serde(default)]
    pub kid: String,
    /// `EdDSA` when present.
    #[serde(default)]
    pub alg: Option<String>,
}

/// A JWKS document.
#[derive(Debug, Clone, Deserialize)]
pub struct Jwks {
    /// The keys.
    pub keys: Vec<Jwk>,
}

/// Loads one JWKS entry; refuses anything but an Ed25519 OKP key with `alg` absent or `EdDSA`.
pub fn from_jwk(jwk: &Jwk) -> Result<DecodingKey, KeyError> {
    let ok =
        jwk.kty == "OKP" && jwk.crv == "Ed25519" && jwk.alg.as_deref().is_none_or(|a| a == "EdDSA");
    if !ok {
        return Err(KeyError::NotEd25519 {
            kid: jwk.kid.clone(),
        });
    }
    from_jwk_x(&jwk.x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::pkcs8::EncodePublicKey;

    #[test]
    fn der_through_raw_path_fails_loudly() {
        let vk = ed25519_dalek::SigningKey::from_bytes(&[3u8; 32]).verifying_key();
        let der = vk.to_public_key_der().unwrap();
        let Err(err) = from_raw(der.as_bytes()) else {
            panic!("must refuse DER")
        };
        assert!(matches!(err, KeyError::RawLength(44)), "{err}");
        assert!(from_der(der.as_bytes()).is_ok());
    }

    #[test]
    fn short_key_is_refused_not_panicking() {
        assert!(matches!(from_raw(&[1, 2, 3]), Err(KeyError::RawLength(3))));
        assert!(from_jwk_x("AAAA").is_err());
    }
}
