//! The verifiable pre-queue draw (issue 15 item 1; DECISIONS.md "Waiting room and cluster": "the
//! pre-queue order is a rank by HMAC(seed, visitor id) … checkable by anyone once the seed is
//! published"). Pure rules only, shared by both stores, the HTTP publication and
//! `waiting-room verify-draw`; no store, no framework.
//!
//! - Each event has a secret **seed** of 32 random bytes, created with the event and kept in the
//!   store (so every node agrees). Before opening only its **commitment** `hex(SHA-256(seed))`
//!   is published.
//! - A visitor's **public id** is `hex(SHA-256(visitor id))`: the published list holds no
//!   visitor id, and a fan who knows their id finds their own entry.
//! - A pre-queued visitor's **rank** is the first 52 bits of `HMAC-SHA256(seed, public id as
//!   ASCII hex)`, read big-endian (52 bits: exact as a Redis sorted-set score). Pre-queued fans
//!   get numbers in ascending (rank, public id) order.
//! - At opening the seed, the list of public ids in number order and the list's hash
//!   `hex(SHA-256(each id followed by "\n"))` are published; [`verify`] recomputes every
//!   position from them.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// Name of the rule set, published with every draw so a verifier knows what it recomputes.
pub const ALGORITHM: &str =
    "rank = first 52 bits of HMAC-SHA256(seed, public id); order by (rank, public id); \
     public id = hex SHA-256(visitor id); commitment = hex SHA-256(seed); \
     visitors_hash = hex SHA-256(public ids in number order, each followed by \\n)";

/// Bits of the HMAC kept in a rank (a Redis score is a double: exact up to 2^53).
pub const RANK_BITS: u32 = 52;

/// An event's secret draw seed, 32 bytes. `Debug` hides it: it is secret until opening.
#[derive(Clone, PartialEq, Eq)]
pub struct DrawSeed([u8; 32]);

impl fmt::Debug for DrawSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DrawSeed(..)")
    }
}

impl DrawSeed {
    /// A fresh seed from the thread-local CSPRNG (ChaCha12 reseeded from the OS).
    pub fn random() -> Self {
        Self(rand::random())
    }

    /// Parses 64 hex digits; `None` otherwise.
    pub fn from_hex(s: &str) -> Option<Self> {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b).ok()?;
        Some(Self(b))
    }

    /// The seed as 64 lowercase hex digits (what the store keeps and opening publishes).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The commitment published before opening: `hex(SHA-256(seed bytes))`.
    pub fn commitment(&self) -> String {
        hex::encode(Sha256::digest(self.0))
    }

    /// The rank of the visitor whose public id is `public_id` (first [`RANK_BITS`] bits of
    /// `HMAC-SHA256(seed, public_id)`, big-endian).
    pub fn rank(&self, public_id: &str) -> u64 {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key");
        mac.update(public_id.as_bytes());
        let out = mac.finalize().into_bytes();
        let mut first = [0u8; 8];
        first.copy_from_slice(&out[..8]);
        u64::from_be_bytes(first) >> (64 - RANK_BITS)
    }

    /// A pre-queue entry for `visitor`: its rank and the sorted-set member `"{public id}:
    /// {visitor}"` (members of one score sort by public id, the tie-break).
    pub fn entry(&self, visitor: &str) -> (u64, String) {
        let p = public_id(visitor);
        (self.rank(&p), format!("{p}:{visitor}"))
    }
}

/// The visitor from a pre-queue member built by [`DrawSeed::entry`].
pub fn visitor_of_entry(member: &str) -> &str {
    member.split_once(':').map_or(member, |(_, v)| v)
}

/// A visitor's public id: `hex(SHA-256(visitor id))`, 64 lowercase hex digits.
pub fn public_id(visitor: &str) -> String {
    hex::encode(Sha256::digest(visitor.as_bytes()))
}

/// The hash of a published list: `hex(SHA-256(id₁ "\n" id₂ "\n" …))`.
pub fn visitors_hash(public_ids: &[String]) -> String {
    let mut h = Sha256::new();
    for p in public_ids {
        h.update(p.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// What the store knows of an event's draw.
#[derive(Debug, Clone)]
pub struct Draw {
    /// The secret seed.
    pub seed: DrawSeed,
    /// The event's state now.
    pub state: crate::domain::EventState,
    /// Once opening began: the first number the pre-queue got and how many fans it held
    /// (numbers `first ..= first + count - 1`).
    pub numbered: Option<(u64, u64)>,
}

/// The draw as published at `GET /api/events/{event}/draw` (API.md "Verifiable draw"):
/// before opening only `commitment`; once the pre-queue is numbered also `seed`,
/// `first_number`, `visitors` (public ids, in number order) and `visitors_hash`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Publication {
    /// Event id.
    pub event: String,
    /// The rules a verifier recomputes ([`ALGORITHM`]).
    pub algorithm: String,
    /// `hex(SHA-256(seed))`, published from the event's creation on.
    pub commitment: String,
    /// The seed, 64 hex digits; absent until the pre-queue is numbered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Queue number of the first entry of `visitors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_number: Option<u64>,
    /// `hex(SHA-256)` of `visitors`, each followed by `\n`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visitors_hash: Option<String>,
    /// Public ids of the pre-queued fans in queue-number order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visitors: Option<Vec<String>>,
}

/// Why a published draw does not check out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// No seed or list yet (before opening).
    #[error("the draw is not published yet (only the commitment is)")]
    NotPublished,
    /// The seed is not 64 hex digits.
    #[error("the seed is not 64 hex digits")]
    BadSeed,
    /// `SHA-256(seed)` differs from the commitment.
    #[error("SHA-256(seed) = {found} but the commitment is {committed}")]
    Commitment {
        /// Published commitment.
        committed: String,
        /// Hash of the published seed.
        found: String,
    },
    /// The list's hash differs from `visitors_hash`.
    #[error("the list hashes to {found} but visitors_hash is {published}")]
    VisitorsHash {
        /// Published hash.
        published: String,
        /// Hash of the published list.
        found: String,
    },
    /// A public id is listed twice.
    #[error("public id {0} is listed twice")]
    Duplicate(String),
    /// An entry is not a public id (64 lowercase hex characters, a SHA-256).
    #[error("entry {0:?} is not a public id (64 hex characters)")]
    BadId(String),
    /// `first_number` plus the list's length does not fit a queue number.
    #[error("first_number {0} leaves no room for the list's numbers")]
    BadFirstNumber(u64),
    /// A position is not the one the seed gives.
    #[error("number {number}: the seed gives {expected}, the list says {listed}")]
    Position {
        /// Queue number.
        number: u64,
        /// Public id the recomputed order puts there.
        expected: String,
        /// Public id the list puts there.
        listed: String,
    },
}

/// Recomputes every pre-queue position of `p`: checks the commitment and the list's hash,
/// that no public id is listed twice, then that the list is in (rank, public id) order. Returns `(queue number, public id)` in
/// number order, or the first mismatch.
pub fn verify(p: &Publication) -> Result<Vec<(u64, String)>, Mismatch> {
    let (Some(seed_hex), Some(list), Some(hash), Some(first)) =
        (&p.seed, &p.visitors, &p.visitors_hash, p.first_number)
    else {
        return Err(Mismatch::NotPublished);
    };
    let seed = DrawSeed::from_hex(seed_hex).ok_or(Mismatch::BadSeed)?;
    if seed.commitment() != p.commitment.to_ascii_lowercase() {
        return Err(Mismatch::Commitment {
            committed: p.commitment.clone(),
            found: seed.commitment(),
        });
    }
    let found = visitors_hash(list);
    if found != hash.to_ascii_lowercase() {
        return Err(Mismatch::VisitorsHash {
            published: hash.clone(),
            found,
        });
    }
    let is_id =
        |id: &str| id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if let Some(bad) = list.iter().find(|id| !is_id(id)) {
        return Err(Mismatch::BadId(bad.clone()));
    }
    if first.checked_add(list.len() as u64).is_none() {
        return Err(Mismatch::BadFirstNumber(first));
    }
    let mut order: Vec<(u64, &String)> = list.iter().map(|id| (seed.rank(id), id)).collect();
    order.sort();
    if let Some(w) = order.windows(2).find(|w| w[0].1 == w[1].1) {
        return Err(Mismatch::Duplicate(w[0].1.clone()));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, ((_, expected), listed)) in order.iter().zip(list).enumerate() {
        let number = first + i as u64;
        if *expected != listed {
            return Err(Mismatch::Position {
                number,
                expected: (*expected).clone(),
                listed: listed.clone(),
            });
        }
        out.push((number, listed.clone()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_fit_a_redis_score_and_depend_on_the_seed() {
        let (a, b) = (DrawSeed([1; 32]), DrawSeed([2; 32]));
        let p = public_id("visitor");
        assert!(a.rank(&p) < 1 << RANK_BITS);
        assert_ne!(a.rank(&p), b.rank(&p));
        assert_eq!(visitor_of_entry(&a.entry("v-1").1), "v-1");
        assert_eq!(DrawSeed::from_hex(&a.to_hex()), Some(a));
    }

    /// A published draw of `ids` (already in draw order) from number `first`.
    fn published(seed: &DrawSeed, ids: Vec<String>, first: u64) -> Publication {
        let mut ids = ids;
        ids.sort_by_key(|id| (seed.rank(id), id.clone()));
        Publication {
            event: "e".into(),
            algorithm: ALGORITHM.into(),
            commitment: seed.commitment(),
            seed: Some(seed.to_hex()),
            first_number: Some(first),
            visitors_hash: Some(visitors_hash(&ids)),
            visitors: Some(ids),
        }
    }

    #[test]
    fn malformed_entries_and_an_overflowing_first_number_are_mismatches() {
        let seed = DrawSeed([7; 32]);
        let ids: Vec<String> = (0..3).map(|i| public_id(&format!("v{i}"))).collect();
        assert_eq!(
            verify(&published(&seed, ids.clone(), 1)).map(|v| v.len()),
            Ok(3)
        );
        let mut bad = ids.clone();
        bad.push("not-hex".into());
        let p = published(&seed, bad, 1);
        assert_eq!(verify(&p), Err(Mismatch::BadId("not-hex".into())));
        assert_eq!(
            verify(&published(&seed, ids, u64::MAX)),
            Err(Mismatch::BadFirstNumber(u64::MAX))
        );
    }
}
