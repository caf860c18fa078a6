//! The status document's latches on Redis (API.md "Status document", seed 000 "The live status
//! document"): a throttle latch `SET wr:{event}:status:throttle 1 NX PX throttle_ms` (one
//! periodic publish per interval across every process) and a transition latch hash
//! `wr:{event}:status:latch` (`status_latch.lua`: exactly one publish per state generation).

use super::parse::{err, key};
use super::RedisStore;
use crate::domain::EventId;
use crate::store::StoreResult;

/// The status-publish throttle latch of an event, inside the event's hash slot.
pub fn status_throttle_key(event: &EventId) -> String {
    key(event, "status:throttle")
}

/// The status document's transition latch hash of an event, inside the event's hash slot.
pub fn status_latch_key(event: &EventId) -> String {
    key(event, "status:latch")
}

impl RedisStore {
    /// `SET … NX PX throttle_ms` (at least 1 ms); `true` when this caller took the window.
    pub(super) async fn throttle_latch(
        &self,
        event: &EventId,
        throttle_ms: u64,
    ) -> StoreResult<bool> {
        let r: Option<String> = redis::cmd("SET")
            .arg(status_throttle_key(event))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(throttle_ms.max(1))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(r.is_some())
    }

    /// Runs `status_latch.lua`: `true` when `gen` is newer than every latched generation.
    pub(super) async fn transition_latch(
        &self,
        event: &EventId,
        state: &str,
        gen: u64,
    ) -> StoreResult<bool> {
        let won: i64 = self
            .scripts
            .status_latch
            .key(status_latch_key(event))
            .arg(state)
            .arg(gen)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(won == 1)
    }
}
