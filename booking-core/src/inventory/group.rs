//! Group commit for a per-process worker (issue 13): callers hand their item to one worker
//! (on PostgreSQL on a thread of its own, [`crate::db::dedicated`]), which takes every item waiting (up to [`Work::MAX`]) and applies them in one call of
//! [`Work::apply`] (one statement or one transaction), then answers each caller. Used by the
//! refused keys ([`crate::inventory::refusals`]) and fans' releases
//! ([`crate::inventory::releases`]). A caller is answered only after its batch is committed; if
//! the batch fails, every caller of it gets `None` and does its own work alone, unless the
//! database did not answer: then every caller gets that error at once (a 503), as the hold
//! queue's callers do (newcomer review: with PostgreSQL hung, a fan's release waited out the
//! batch's 5 s acquire timeout, then 5 s more alone, 10–15 s in all).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use crate::db::writer::Writer;
use crate::db::Db;
use crate::inventory::hotq;

/// What one kind of group commit applies.
pub trait Work: Send + Sync + 'static {
    /// What a caller hands over.
    type Item: Send + Sync + 'static;
    /// What each caller is answered once its batch is committed.
    type Answer: Send + 'static;
    /// The histogram of batch sizes (`bc_…_batch_size`, items per batch).
    const METRIC: &'static str;
    /// Items applied in one batch at most.
    const MAX: usize;
    /// Applies a batch in one commit; one answer per item, in order.
    fn apply<'a>(
        db: &'a Db,
        items: &'a [&'a Self::Item],
    ) -> BoxFuture<'a, sqlx::Result<Vec<Self::Answer>>>;
}

/// Items waiting before callers wait too (back-pressure).
pub const QUEUE_DEPTH: usize = 4096;

/// How a batch ended for one of its items.
enum Ended<A> {
    /// Committed: the item's answer.
    Done(A),
    /// The batch failed: the caller works alone.
    Failed,
    /// The database did not answer (`error::is_unreachable`): the caller answers that.
    Unreachable(sqlx::Error),
}

/// One item and where its answer goes.
struct Job<W: Work> {
    item: W::Item,
    done: oneshot::Sender<Ended<W::Answer>>,
}

/// The worker's inbox (started on first use, restarted if it stopped) and its figures.
pub struct Group<W: Work> {
    inbox: Mutex<Option<mpsc::Sender<Job<W>>>>,
    batches: Arc<AtomicU64>,
    pending: AtomicUsize,
    /// SQL the worker's connections run once (`""`: none), [`Group::with_session`].
    session: Arc<str>,
}

impl<W: Work> Default for Group<W> {
    fn default() -> Self {
        Self::with_session("")
    }
}

impl<W: Work> std::fmt::Debug for Group<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("work", &W::METRIC)
            .field("batches", &self.batches())
            .field("pending", &self.pending())
            .finish()
    }
}

impl<W: Work> Group<W> {
    /// A group commit whose worker's connections (PostgreSQL) run `session` once each: a
    /// [`crate::db::lock_wait_session`], so a batch waits for a row another transaction keeps
    /// locked at most that long, then fails and its callers work alone.
    pub fn with_session(session: &str) -> Self {
        Self {
            inbox: Mutex::new(None),
            batches: Arc::default(),
            pending: AtomicUsize::new(0),
            session: Arc::from(session),
        }
    }

    /// Hands `item` to the worker on `db` and waits until its batch is committed: its answer,
    /// or `None` when the batch failed or the worker is gone (the caller then works alone).
    /// Errors: the database did not answer the batch (`error::is_unreachable`; the caller
    /// answers 503 at once rather than wait again alone).
    pub async fn submit(&self, db: &Db, item: W::Item) -> sqlx::Result<Option<W::Answer>> {
        let tx = inbox(&self.inbox, QUEUE_DEPTH, |rx| {
            let batches = self.batches.clone();
            crate::db::dedicated::spawn_with(
                db,
                W::METRIC,
                crate::db::dedicated::CONNECTIONS,
                self.session.clone(),
                move |db| run::<W>(db, rx, batches),
            );
        });
        let (done, answer) = oneshot::channel();
        self.pending.fetch_add(1, Ordering::Relaxed);
        let out = match tx.send(Job { item, done }).await {
            Ok(()) => answer.await.unwrap_or(Ended::Failed),
            Err(_) => Ended::Failed,
        };
        self.pending.fetch_sub(1, Ordering::Relaxed);
        match out {
            Ended::Done(a) => Ok(Some(a)),
            Ended::Failed => Ok(None),
            Ended::Unreachable(e) => Err(e),
        }
    }

    /// Items handed to [`Group::submit`] whose callers have not been answered yet (queued, or
    /// in the batch being applied).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Relaxed)
    }

    /// Batches committed so far, since this process started.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }
}

/// The worker: waits for an item, takes every other waiting one, applies them together.
async fn run<W: Work>(db: Db, mut rx: mpsc::Receiver<Job<W>>, batches: Arc<AtomicU64>) {
    while let Some(batch) = hotq::next_batch(&mut rx, W::MAX).await {
        metrics::histogram!(W::METRIC).record(batch.len() as f64);
        let items: Vec<&W::Item> = batch.iter().map(|j| &j.item).collect();
        let answers: Vec<Ended<W::Answer>> = match W::apply(&db, &items).await {
            Ok(answers) => {
                batches.fetch_add(1, Ordering::Relaxed);
                answers.into_iter().map(Ended::Done).collect()
            }
            Err(e) if crate::error::is_unreachable(&e) => {
                tracing::warn!(error = %e, work = W::METRIC, items = items.len(), "batch: the database did not answer");
                batch
                    .iter()
                    .map(|_| Ended::Unreachable(hotq::same_failure(&e)))
                    .collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, work = W::METRIC, items = items.len(), "batch failed; each caller alone");
                batch.iter().map(|_| Ended::Failed).collect()
            }
        };
        for (job, answer) in batch.into_iter().zip(answers) {
            let _ = job.done.send(answer);
        }
    }
}

/// The inbox of a per-process worker kept in `slot`: its sender, or, when no worker runs (first
/// use, or the last one stopped), a new channel of `depth` whose receiver `start` hands to a
/// newly spawned worker.
fn inbox<T>(
    slot: &Mutex<Option<mpsc::Sender<T>>>,
    depth: usize,
    start: impl FnOnce(mpsc::Receiver<T>),
) -> mpsc::Sender<T> {
    let mut inbox = slot.lock().expect("worker inbox");
    match inbox.as_ref().filter(|t| !t.is_closed()) {
        Some(t) => t.clone(),
        None => {
            let (t, rx) = mpsc::channel(depth);
            start(rx);
            *inbox = Some(t.clone());
            t
        }
    }
}

/// A group commit that runs on SQLite's writer thread instead when there is one
/// ([`crate::db::writer`], itself a group commit of every job waiting): the refusals and the
/// fans' releases. Its figures are the writer's then.
#[derive(Debug)]
pub struct OrWriter<W: Work> {
    /// This module's worker, used without a writer.
    pub batches: Group<W>,
    /// The writer, on a SQLite file.
    pub writer: Option<Arc<Writer>>,
}

impl<W: Work> OrWriter<W> {
    /// Work applied on `writer` when given, else in [`Group`]'s batches.
    pub fn new(writer: Option<Arc<Writer>>) -> Self {
        Self {
            batches: Group::default(),
            writer,
        }
    }

    /// Items handed over and not answered yet (on the writer: every job of the writer's).
    pub fn pending(&self) -> usize {
        self.writer
            .as_ref()
            .map_or_else(|| self.batches.pending(), |w| w.pending())
    }

    /// Batches committed so far (on the writer: every batch of the writer's).
    pub fn batches(&self) -> u64 {
        self.writer
            .as_ref()
            .map_or_else(|| self.batches.batches(), |w| w.batches())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch that always fails: the database not answering (`UNREACHABLE`), or otherwise.
    struct Failing<const UNREACHABLE: bool>;

    static CALLS: AtomicUsize = AtomicUsize::new(0);

    impl<const UNREACHABLE: bool> Work for Failing<UNREACHABLE> {
        type Item = u32;
        type Answer = u32;
        const METRIC: &'static str = "bc_test_batch_size";
        const MAX: usize = 8;
        fn apply<'a>(_: &'a Db, _: &'a [&'a u32]) -> BoxFuture<'a, sqlx::Result<Vec<u32>>> {
            CALLS.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                Err(if UNREACHABLE {
                    sqlx::Error::PoolTimedOut
                } else {
                    sqlx::Error::Protocol("a batch that fails".into())
                })
            })
        }
    }

    /// Newcomer review: with PostgreSQL hung, a fan's release waited out its batch's acquire
    /// timeout, then again alone. A batch the database did not answer hands its callers that
    /// error (they answer 503 at once); any other failure hands them `None` (each works
    /// alone, as before).
    #[tokio::test]
    async fn a_batch_the_database_did_not_answer_is_an_error_not_a_retry() {
        let db = crate::db::connect("sqlite::memory:").await.unwrap();
        let hung: Group<Failing<true>> = Group::default();
        let answer = hung.submit(&db, 1).await;
        assert!(
            matches!(answer, Err(sqlx::Error::PoolTimedOut)),
            "{answer:?}"
        );
        let failed: Group<Failing<false>> = Group::default();
        assert!(matches!(failed.submit(&db, 2).await, Ok(None)));
        assert_eq!(CALLS.load(Ordering::Relaxed), 2);
    }
}
