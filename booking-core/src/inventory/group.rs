//! Group commit for a per-process worker (issue 13): callers hand their item to one worker
//! (on PostgreSQL on a thread of its own, [`crate::db::dedicated`]), which takes every item waiting (up to [`Work::MAX`]) and applies them in one call of
//! [`Work::apply`] (one statement or one transaction), then answers each caller. Used by the
//! refused keys ([`crate::inventory::refusals`]) and fans' releases on SQLite
//! ([`crate::inventory::releases`]). A caller is answered only after its batch is committed; if
//! the batch fails, every caller of it gets `None` and does its own work alone.

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

/// One item and where its answer goes (`None`: the batch failed).
struct Job<W: Work> {
    item: W::Item,
    done: oneshot::Sender<Option<W::Answer>>,
}

/// The worker's inbox (started on first use, restarted if it stopped) and its figures.
pub struct Group<W: Work> {
    inbox: Mutex<Option<mpsc::Sender<Job<W>>>>,
    batches: Arc<AtomicU64>,
    pending: AtomicUsize,
}

impl<W: Work> Default for Group<W> {
    fn default() -> Self {
        Self {
            inbox: Mutex::new(None),
            batches: Arc::default(),
            pending: AtomicUsize::new(0),
        }
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
    /// Hands `item` to the worker on `db` and waits until its batch is committed: its answer,
    /// or `None` when the batch failed or the worker is gone (the caller then works alone).
    pub async fn submit(&self, db: &Db, item: W::Item) -> Option<W::Answer> {
        let tx = inbox(&self.inbox, QUEUE_DEPTH, |rx| {
            let batches = self.batches.clone();
            crate::db::dedicated::spawn(
                db,
                W::METRIC,
                crate::db::dedicated::CONNECTIONS,
                move |db| run::<W>(db, rx, batches),
            );
        });
        let (done, answer) = oneshot::channel();
        self.pending.fetch_add(1, Ordering::Relaxed);
        let out = match tx.send(Job { item, done }).await {
            Ok(()) => answer.await.ok().flatten(),
            Err(_) => None,
        };
        self.pending.fetch_sub(1, Ordering::Relaxed);
        out
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
        let answers: Vec<Option<W::Answer>> = match W::apply(&db, &items).await {
            Ok(answers) => {
                batches.fetch_add(1, Ordering::Relaxed);
                answers.into_iter().map(Some).collect()
            }
            Err(e) => {
                tracing::warn!(error = %e, work = W::METRIC, items = items.len(), "batch failed; each caller alone");
                batch.iter().map(|_| None).collect()
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
