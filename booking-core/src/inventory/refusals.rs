//! Refused keys recorded together (issue 13: holds at the speed of the database). A hold
//! refused before its transaction (the read before the hold saw the seats taken, or a cap said
//! no) still stores its `Idempotency-Key` with the request's hash before the 409 is answered,
//! so the key cannot be reused for another request ([`claim::record_refusal`]). On a hot show
//! most requests are refused that way: in the bench's seat-hold phase about three of four,
//! each its own one-row commit on the database's writer (SQLite's only connection, queued
//! behind the holds; on PostgreSQL a synchronous commit each).
//!
//! [`Refusals::record`] hands the row to one worker task per process, which takes every row
//! waiting (up to [`MAX_BATCH`]) and stores them in one `INSERT` (one commit: group commit),
//! then answers each caller. A caller still answers its 409 only after its row is committed,
//! so nothing changes for the fan or a retry. If the batch's insert fails, each caller
//! records its own row alone ([`claim::record_refusal`]) and answers that error, as before.
//!
//! [`claim::record_refusal`]: crate::inventory::claim::record_refusal

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::db::Db;
use crate::inventory::claim::{self, Refused};
use crate::inventory::hotq;

/// Rows stored in one statement at most.
pub const MAX_BATCH: usize = 256;
/// Rows waiting before callers wait too (back-pressure).
pub const QUEUE_DEPTH: usize = 4096;

/// One row to store and, once its batch is stored, whether the key's row is this one's
/// (`None`: the batch failed).
#[derive(Debug)]
struct Job {
    row: Refused,
    done: oneshot::Sender<Option<bool>>,
}

/// The worker's inbox (started on first use, restarted if it stopped).
#[derive(Debug, Default)]
pub struct Refusals {
    inbox: Mutex<Option<mpsc::Sender<Job>>>,
    batches: Arc<AtomicU64>,
    pending: AtomicUsize,
}

impl Refusals {
    /// Stores `row` on `db` in a batch with whatever other refusals are waiting; returns once
    /// it is committed: true when the key's stored row is this request's, false when another
    /// request (another body) stored the key first, whose answer is 422
    /// ([`claim::key_reused`]). Errors: the database's, from storing the row alone after the
    /// batch failed.
    pub async fn record(&self, db: &Db, row: Refused) -> sqlx::Result<bool> {
        let tx = hotq::inbox(&self.inbox, QUEUE_DEPTH, |rx| {
            tokio::spawn(run(db.clone(), rx, self.batches.clone()));
        });
        let batched = hotq::hand_over(&tx, &self.pending, |done| Job {
            row: row.clone(),
            done,
        })
        .await;
        if let Some(ours) = batched {
            return Ok(ours);
        }
        claim::record_refusal(db, &row.visitor, &row.key, &row.hash, row.now_ms).await
    }

    /// Rows handed to [`Refusals::record`] whose callers have not been answered yet (queued,
    /// or in the batch being stored).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Batches stored so far (each one `INSERT`, one commit), since this process started.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }
}

/// The worker: waits for a row, takes every other waiting one, stores them in one statement.
async fn run(db: Db, mut rx: mpsc::Receiver<Job>, batches: Arc<AtomicU64>) {
    while let Some(batch) = hotq::next_batch(&mut rx, MAX_BATCH).await {
        metrics::histogram!("bc_refusal_batch_size").record(batch.len() as f64);
        let rows: Vec<&Refused> = batch.iter().map(|j| &j.row).collect();
        let ours = match claim::record_refused_rows(&db, &rows).await {
            Ok(ours) => {
                batches.fetch_add(1, Ordering::Relaxed);
                ours.into_iter().map(Some).collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, rows = rows.len(), "refusal batch failed; each row alone");
                vec![None; batch.len()]
            }
        };
        for (job, ours) in batch.into_iter().zip(ours) {
            let _ = job.done.send(ours);
        }
    }
}
