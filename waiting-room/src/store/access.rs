//! The access codes' storage (issue 14 item 1; `crate::access`), a trait of its own that both
//! backends implement; [`super::QueueStore::access`] hands it out (a store without it keeps
//! every event open). Every change is one atomic step: one critical section in memory, one Lua
//! script on Redis under the event's `{event}` hash tag (keys `access` hash: `mode`, `key` = the
//! promoter key's JSON, `codes`
//! hash code hash → `"uses expires_ms tier"`, `codeu:{hash}` set of the visitors who joined
//! with the code, `revoked` hash visitor → code hash, `tiers` hash visitor → tier). Refusals (`unknown`, `used up`,
//! `expired`) write nothing.

use super::StoreResult;
use crate::access::{AccessMode, CodeRecord, Spend};
use crate::domain::{EventId, VisitorId};
use async_trait::async_trait;

/// Access codes of events. `NotFound` for an unknown event.
#[async_trait]
pub trait AccessStore: Send + Sync {
    /// The event's access mode ([`AccessMode::Open`] until set).
    async fn access_mode(&self, event: &EventId) -> StoreResult<AccessMode>;
    /// Sets the access mode; returns the one before.
    async fn set_access_mode(&self, event: &EventId, mode: AccessMode) -> StoreResult<AccessMode>;
    /// Stores codes whose hash is not stored yet (`HSETNX`); returns how many were new.
    async fn put_codes(&self, event: &EventId, codes: &[CodeRecord]) -> StoreResult<u64>;
    /// One atomic step: refuses an unknown, expired (`now_ms` epoch ms ≥ expiry) or used-up
    /// code writing nothing; else takes one use and records `visitor` against the code.
    async fn spend_code(
        &self,
        event: &EventId,
        hash: &str,
        visitor: &VisitorId,
        now_ms: i64,
    ) -> StoreResult<Spend>;
    /// Gives back the use `visitor` took (its join did not happen).
    async fn refund_code(
        &self,
        event: &EventId,
        hash: &str,
        visitor: &VisitorId,
    ) -> StoreResult<()>;
    /// Deletes the codes of `hashes` in one step and marks every visitor who joined with one
    /// of them revoked; returns (codes deleted, those visitors).
    async fn revoke_codes(
        &self,
        event: &EventId,
        hashes: &[String],
    ) -> StoreResult<(u64, Vec<VisitorId>)>;
    /// Whether `visitor`'s code was revoked.
    async fn revoked(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<bool>;
    /// Registers the event's promoter key (JSON of `access::invitation::PromoterKey`).
    async fn set_promoter_key(&self, event: &EventId, key_json: &str) -> StoreResult<()>;
    /// Records the tier of `visitor`'s code or invitation (issue 14 item 3).
    async fn set_tier(&self, event: &EventId, visitor: &VisitorId, tier: &str) -> StoreResult<()>;
    /// The tier recorded for `visitor`, if any.
    async fn tier(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Option<String>>;
    /// The event's promoter key JSON, if registered.
    async fn promoter_key(&self, event: &EventId) -> StoreResult<Option<String>>;
}
