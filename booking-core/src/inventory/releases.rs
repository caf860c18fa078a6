//! Fans' releases applied together on SQLite (issue 13: holds at the speed of the database).
//!
//! A fan's release (`DELETE /api/holds/{hold}`) is one guarded status update and one call for
//! everything it frees ([`holds::release_in`]), but as a transaction of its own it also costs a
//! `BEGIN IMMEDIATE`, a `COMMIT` and sqlx's ping of the connection on its return: on SQLite's
//! one writer connection every one of those is a round trip to sqlx's worker thread while every
//! hold waits for the writer. Measured with `loadtest bench` on a 2-vCPU machine, releases were
//! most of the writer's time in the hold-queue phases (each 201 is released before that fan's
//! next hold), and a hold queue's batch waited about 9 ms for the writer.
//!
//! [`Releases::release`] hands a release to one worker task per process, which takes every
//! release waiting (up to [`MAX_BATCH`]) and applies them in ONE transaction, one after another
//! through the same [`holds::release_in`] (group commit), then answers each caller. A release
//! whose guard fails writes nothing, so the others of its batch are unaffected; a caller still
//! answers only after its release is committed. If the batch fails (an error in any release, or
//! the commit), the transaction is rolled back whole and each caller releases alone, as before.
//!
//! PostgreSQL keeps one transaction per release: its pool has many connections, and one
//! transaction locking the seats of many holds could deadlock with holds that lock seats in
//! seat order (case B05).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::db::{self, Actor, Backend, Db};
use crate::inventory::holds::{self, Ended};
use crate::inventory::hotq;

/// Releases applied in one transaction at most.
pub const MAX_BATCH: usize = 128;
/// Releases waiting before callers wait too (back-pressure).
pub const QUEUE_DEPTH: usize = 4096;

/// A fan's release of a hold.
#[derive(Debug, Clone)]
pub struct Release {
    /// The hold.
    pub hold_id: String,
    /// The hold's `payment_id` as the caller read it (`""`: none); the release's guard
    /// requires it unchanged, so a payment started meanwhile is never left on a released hold.
    pub payment: String,
    /// The audit row's reason.
    pub reason: String,
    /// When, epoch ms.
    pub now_ms: i64,
}

/// One release and, once its batch is committed, whether it released (`None`: the batch
/// failed).
#[derive(Debug)]
struct Job {
    release: Release,
    done: oneshot::Sender<Option<bool>>,
}

/// The worker's inbox (started on first use, restarted if it stopped).
#[derive(Debug, Default)]
pub struct Releases {
    inbox: Mutex<Option<mpsc::Sender<Job>>>,
    batches: Arc<AtomicU64>,
    pending: AtomicUsize,
}

impl Releases {
    /// Releases `r` on `db` (SQLite: in a batch with whatever other releases are waiting;
    /// PostgreSQL: alone) and returns once it is committed: true when the hold was released,
    /// false when its guard failed (not `HELD`, or its payment changed) and nothing was
    /// written. Errors: the database's, from releasing alone after a batch failed.
    pub async fn release(&self, db: &Db, r: Release) -> sqlx::Result<bool> {
        if db::backend(db) == Backend::Postgres {
            return alone(db, &r).await;
        }
        let tx = hotq::inbox(&self.inbox, QUEUE_DEPTH, |rx| {
            tokio::spawn(run(db.clone(), rx, self.batches.clone()));
        });
        let batched = hotq::hand_over(&tx, &self.pending, |done| Job {
            release: r.clone(),
            done,
        })
        .await;
        match batched {
            Some(released) => Ok(released),
            None => alone(db, &r).await,
        }
    }

    /// Releases handed to [`Releases::release`] whose callers have not been answered yet
    /// (queued, or in the batch being applied).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Batches committed so far (each one transaction), since this process started.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }
}

/// `r` in a transaction of its own: committed when released, rolled back otherwise.
pub async fn alone(db: &Db, r: &Release) -> sqlx::Result<bool> {
    let mut tx = db::begin_hold(db).await?;
    let released = one(&mut tx, db::backend(db) == Backend::Postgres, r).await?;
    if released {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(released)
}

/// `r` inside the caller's transaction.
async fn one(tx: &mut db::Tx<'_>, pg: bool, r: &Release) -> sqlx::Result<bool> {
    holds::release_in(
        tx,
        pg,
        &r.hold_id,
        Some(&r.payment),
        Actor::Api,
        Ended::Released,
        &r.reason,
        r.now_ms,
    )
    .await
}

/// The worker: waits for a release, takes every other waiting one, applies them together.
async fn run(db: Db, mut rx: mpsc::Receiver<Job>, batches: Arc<AtomicU64>) {
    while let Some(batch) = hotq::next_batch(&mut rx, MAX_BATCH).await {
        metrics::histogram!("bc_release_batch_size").record(batch.len() as f64);
        let released: Vec<Option<bool>> = match apply(&db, &batch).await {
            Ok(released) => {
                batches.fetch_add(1, Ordering::Relaxed);
                released.into_iter().map(Some).collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, releases = batch.len(), "release batch failed; each alone");
                vec![None; batch.len()]
            }
        };
        for (job, released) in batch.into_iter().zip(released) {
            let _ = job.done.send(released);
        }
    }
}

/// One transaction for the whole batch (SQLite: no row locks to order).
async fn apply(db: &Db, batch: &[Job]) -> sqlx::Result<Vec<bool>> {
    let mut tx = db::begin_hold(db).await?;
    let mut released = Vec::with_capacity(batch.len());
    for job in batch {
        released.push(one(&mut tx, false, &job.release).await?);
    }
    tx.commit().await?;
    Ok(released)
}
