//! Refused keys recorded together (issue 13: holds at the speed of the database). A hold
//! refused before its transaction (the read before the hold saw the seats taken, or a cap said
//! no) still stores its `Idempotency-Key` with the request's hash before the 409 is answered,
//! so the key cannot be reused for another request ([`claim::record_refusal`]). On a hot show
//! most requests are refused that way: in the bench's seat-hold phase about three of four,
//! each its own one-row commit on the database's writer (SQLite's only connection, queued
//! behind the holds; on PostgreSQL a synchronous commit each).
//!
//! [`Refusals::record`] hands the row to one worker task per process
//! ([`group`](crate::inventory::group)), which takes every row waiting (up to [`MAX_BATCH`]) and stores them in one `INSERT` (one commit: group commit),
//! then answers each caller. A caller still answers its 409 only after its row is committed,
//! so nothing changes for the fan or a retry. If the batch's insert fails, each caller
//! records its own row alone ([`claim::record_refusal`]) and answers that error, as before.
//!
//! [`claim::record_refusal`]: crate::inventory::claim::record_refusal

use futures::future::BoxFuture;

use crate::db::Db;
use crate::inventory::claim::{self, Refused};
use crate::inventory::fast;
use crate::inventory::group::{OrWriter, Work};

/// Rows stored in one statement at most.
pub const MAX_BATCH: usize = 256;

/// The refusals' group commit: refused rows stored in one `INSERT`; each answer is whether
/// the key's stored row is that row's ([`claim::record_refused_rows`]).
#[derive(Debug)]
pub struct Store;

impl Work for Store {
    type Item = Refused;
    type Answer = bool;
    const METRIC: &'static str = "bc_refusal_batch_size";
    const MAX: usize = MAX_BATCH;
    fn apply<'a>(db: &'a Db, rows: &'a [&'a Refused]) -> BoxFuture<'a, sqlx::Result<Vec<bool>>> {
        Box::pin(claim::record_refused_rows(db, rows))
    }
}

/// Refused keys stored in batches: on SQLite's writer thread when there is one (its group
/// commit, [`crate::db::writer`]), else by this module's worker (started on first use).
pub type Refusals = OrWriter<Store>;

impl OrWriter<Store> {
    /// Stores `row` on `db` in a batch with whatever other refusals are waiting; returns once
    /// it is committed: true when the key's stored row is this request's, false when another
    /// request (another body) stored the key first, whose answer is 422
    /// ([`claim::key_reused`]). Errors: the database's: the batch's when it did not answer (no
    /// second wait alone), else from storing the row alone after the
    /// batch failed (or the writer's, for its batch).
    pub async fn record(&self, db: &Db, row: Refused) -> sqlx::Result<bool> {
        if let Some(w) = &self.writer {
            return fast::refuse(w, row).await;
        }
        if let Some(ours) = self.batches.submit(db, row.clone()).await? {
            return Ok(ours);
        }
        claim::record_refusal(db, &row.visitor, &row.key, &row.hash, row.now_ms).await
    }
}
