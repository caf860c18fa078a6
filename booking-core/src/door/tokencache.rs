//! The door's cache of verified admission tokens (issue 7: "door checks ≥ 50,000/s by caching a
//! verified token until its expiry"). Keyed by the SHA-256 of the token, so the cache holds no
//! bearer secret; only tokens whose signature, `iss` and `aud` verified are inserted, and every
//! hit re-checks `exp`/`nbf` against the injected clock and the `event` binding, exactly like a
//! full verification. An entry is useless after the token's `exp` + leeway and is dropped then.
//!
//! Bounded: at most [`TokenCache::MAX_ENTRIES`] entries; when full, expired entries are purged
//! and, if that frees nothing, the whole map is cleared (a miss only costs one signature check).
//! Each entry remembers the `kid` that signed it: when a key leaves the JWKS, the door evicts
//! its tokens ([`TokenCache::evict_kids`]) so they are refused from then on (case W09).

use std::collections::HashMap;
use std::sync::RwLock;

use sha2::{Digest, Sha256};

use super::Admission;

/// SHA-256 of a token.
pub type TokenHash = [u8; 32];

/// Verified tokens by hash.
#[derive(Debug, Default)]
pub struct TokenCache {
    map: RwLock<HashMap<TokenHash, (String, Admission)>>,
}

impl TokenCache {
    /// Entries kept at most (≈ 250 bytes each: about 50 MB when full).
    pub const MAX_ENTRIES: usize = 200_000;

    /// The hash a token is cached under.
    pub fn hash(token: &str) -> TokenHash {
        Sha256::digest(token.as_bytes()).into()
    }

    /// The cached claims of `hash`, if any (the caller re-checks time and event).
    pub fn get(&self, hash: &TokenHash) -> Option<Admission> {
        self.map.read().ok()?.get(hash).map(|(_, a)| a.clone())
    }

    /// Caches claims verified with key `kid`; `now_s` (epoch s) and `leeway_s` decide which
    /// entries are dead when the map is full.
    pub fn insert(&self, hash: TokenHash, kid: String, adm: Admission, now_s: i64, leeway_s: i64) {
        let Ok(mut map) = self.map.write() else {
            return;
        };
        if map.len() >= Self::MAX_ENTRIES {
            map.retain(|_, (_, a)| a.exp.saturating_add(leeway_s) >= now_s);
            if map.len() >= Self::MAX_ENTRIES {
                map.clear();
            }
        }
        map.insert(hash, (kid, adm));
    }

    /// Drops every token signed by one of `kids`; returns how many.
    pub fn evict_kids(&self, kids: &[String]) -> usize {
        let Ok(mut map) = self.map.write() else {
            return 0;
        };
        let before = map.len();
        map.retain(|_, (kid, _)| !kids.contains(kid));
        before - map.len()
    }

    /// Entries currently cached.
    pub fn len(&self) -> usize {
        self.map.read().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adm(exp: i64) -> Admission {
        Admission {
            iss: "i".into(),
            aud: "a".into(),
            sub: "s".into(),
            event: "e".into(),
            jti: "j".into(),
            iat: 0,
            nbf: 0,
            exp,
            tier: None,
        }
    }

    #[test]
    fn full_cache_drops_expired_entries_first() {
        let c = TokenCache::default();
        for i in 0..TokenCache::MAX_ENTRIES {
            let exp = if i % 2 == 0 { 10 } else { 1_000 };
            c.insert(TokenCache::hash(&i.to_string()), "k".into(), adm(exp), 0, 5);
        }
        assert_eq!(c.len(), TokenCache::MAX_ENTRIES);
        c.insert(TokenCache::hash("new"), "k".into(), adm(1_000), 100, 5);
        assert_eq!(c.len(), TokenCache::MAX_ENTRIES / 2 + 1);
        assert!(c.get(&TokenCache::hash("new")).is_some());
        assert!(c.get(&TokenCache::hash("0")).is_none());
    }
}
