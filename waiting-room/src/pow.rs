//! Optional proof-of-work on join (the operator sets the difficulty live; 0 = off). Stateless
//! challenges: `{event}.{exp}.{nonce}.{mac}` with an HMAC (join key) over the first three parts,
//! so issuing one costs no store call. A join sends the challenge and a solution; it passes
//! when SHA-256(`challenge` ‖ `:` ‖ `solution`) starts with `difficulty` zero bits. Each
//! challenge is accepted once per node by a bounded in-memory replay cache (no store call), and
//! once across every node by the join handler, which spends it in the store (`SET NX PX` until
//! its expiry) after this check passed.
//! Expected client cost: 2^difficulty hashes (see API.md for measured rates).

use crate::domain::EventId;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use subtle::ConstantTimeEq;

/// Lifetime of a challenge, **seconds**.
pub const CHALLENGE_TTL_SECS: i64 = 120;
/// Highest difficulty an operator may set, bits (2^28 hashes is minutes in a browser).
pub const MAX_BITS: u32 = 28;
/// Most spent challenges remembered per node.
pub const REPLAY_CAP: usize = 1_000_000;

/// Why a proof was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PowError {
    /// No challenge/solution sent.
    #[error("proof of work required")]
    Missing,
    /// Not our challenge, for another event, expired, or the hash misses the difficulty.
    #[error("proof of work invalid")]
    Invalid,
    /// This challenge was spent already.
    #[error("challenge already used")]
    Replayed,
}

impl PowError {
    /// Metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Invalid => "invalid",
            Self::Replayed => "replayed",
        }
    }
}

/// Challenge issuer and verifier of one node.
pub struct Pow {
    key: Vec<u8>,
    spent: Mutex<HashMap<String, i64>>,
}

fn mac(key: &[u8], body: &str) -> String {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(b"pow\0");
    m.update(body.as_bytes());
    URL_SAFE_NO_PAD.encode(m.finalize().into_bytes())
}

/// Leading zero bits of SHA-256(`challenge:solution`).
pub fn zero_bits(challenge: &str, solution: &str) -> u32 {
    let h = Sha256::new()
        .chain_update(challenge.as_bytes())
        .chain_update(b":")
        .chain_update(solution.as_bytes())
        .finalize();
    let mut bits = 0;
    for b in h {
        if b == 0 {
            bits += 8;
        } else {
            return bits + b.leading_zeros();
        }
    }
    bits
}

/// Finds a solution by counting up in decimal (what the waiting page's worker does); returns
/// it with the number of hashes tried.
pub fn solve(challenge: &str, bits: u32) -> (String, u64) {
    let mut n: u64 = 0;
    loop {
        let s = n.to_string();
        n += 1;
        if zero_bits(challenge, &s) >= bits {
            return (s, n);
        }
    }
}

impl Pow {
    /// Keyed with the join HMAC secret.
    pub fn new(key: &[u8]) -> Self {
        Self {
            key: key.to_vec(),
            spent: Mutex::new(HashMap::new()),
        }
    }

    /// A fresh challenge for `event` at `now` (epoch s); returns it with its expiry (epoch s).
    pub fn issue(&self, event: &EventId, now: i64) -> (String, i64) {
        let exp = now + CHALLENGE_TTL_SECS;
        let nonce = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 12]>());
        let body = format!("{event}.{exp}.{nonce}");
        let tag = mac(&self.key, &body);
        (format!("{body}.{tag}"), exp)
    }

    /// Checks a proof for `event` at `now` against `bits`, then spends the challenge on this
    /// node; returns the challenge's expiry (epoch **seconds**).
    pub fn verify(
        &self,
        event: &EventId,
        now: i64,
        bits: u32,
        proof: Option<(&str, &str)>,
    ) -> Result<i64, PowError> {
        let (challenge, solution) = proof.ok_or(PowError::Missing)?;
        let (body, tag) = challenge.rsplit_once('.').ok_or(PowError::Invalid)?;
        let expected = mac(&self.key, body);
        if !bool::from(expected.as_bytes().ct_eq(tag.as_bytes())) {
            return Err(PowError::Invalid);
        }
        let mut parts = body.split('.');
        let (Some(ev), Some(exp)) = (parts.next(), parts.next()) else {
            return Err(PowError::Invalid);
        };
        let exp: i64 = exp.parse().map_err(|_| PowError::Invalid)?;
        if ev != event.as_str() || exp <= now || solution.len() > 32 {
            return Err(PowError::Invalid);
        }
        if zero_bits(challenge, solution) < bits {
            return Err(PowError::Invalid);
        }
        let mut spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        if spent.len() >= REPLAY_CAP {
            spent.retain(|_, e| *e > now);
        }
        if spent.len() >= REPLAY_CAP || spent.insert(challenge.to_owned(), exp).is_some() {
            return Err(PowError::Replayed);
        }
        Ok(exp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solved_challenge_passes_once_and_tampering_fails() {
        let pow = Pow::new(b"k");
        let ev = EventId::parse("demo").expect("id");
        let (c, _) = pow.issue(&ev, 1000);
        let (s, tries) = solve(&c, 8);
        assert!(tries >= 1 && zero_bits(&c, &s) >= 8);
        assert_eq!(pow.verify(&ev, 1000, 8, None), Err(PowError::Missing));
        let other = EventId::parse("other").expect("id");
        assert_eq!(
            pow.verify(&other, 1000, 8, Some((&c, &s))),
            Err(PowError::Invalid)
        );
        assert_eq!(
            pow.verify(&ev, 1000 + CHALLENGE_TTL_SECS, 8, Some((&c, &s))),
            Err(PowError::Invalid),
            "expired"
        );
        let forged = format!("x{c}");
        assert_eq!(
            pow.verify(&ev, 1000, 8, Some((&forged, &s))),
            Err(PowError::Invalid)
        );
        let wrong = (0..)
            .map(|n: u32| n.to_string())
            .find(|x| zero_bits(&c, x) < 8)
            .expect("a non-solution");
        assert_eq!(
            pow.verify(&ev, 1000, 8, Some((&c, &wrong))),
            Err(PowError::Invalid)
        );
        assert_eq!(
            pow.verify(&ev, 1000, 8, Some((&c, &s))),
            Ok(1000 + CHALLENGE_TTL_SECS)
        );
        assert_eq!(
            pow.verify(&ev, 1000, 8, Some((&c, &s))),
            Err(PowError::Replayed)
        );
    }
}
