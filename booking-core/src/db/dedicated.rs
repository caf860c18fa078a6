//! Serial workers on a thread of their own (issue 13, the seed rehearsal): the hold queue's
//! worker (`inventory::hotq`) and the group commits (`inventory::group`) each
//! answer every caller of a batch only after a run of round trips to the database, one after
//! another. As tasks of the shared runtime, each round trip's answer waited behind every ready
//! request task before the worker ran again: on a 2-CPU machine carrying the database, both
//! services and the fans, a hold-queue batch of about 30 requests took 0.25–0.5 s while the
//! database sat `idle in transaction` waiting for the next statement (`pg_stat_activity`), and
//! the refused keys' group commit gathered 158 rows a batch. On a thread of its own, with a
//! runtime of its own, a worker runs as soon as its answer arrives (the operating system
//! shares the CPUs between threads, not tasks): batches of a few ms.

use std::future::Future;

use crate::db::{self, Backend, Db};

/// Connections of a worker's own pool on PostgreSQL (one transaction at a time; the second
/// stands by while the first reconnects).
pub const CONNECTIONS: u32 = 2;

/// Runs `work` with a pool of its own: on PostgreSQL a thread named `name` with a
/// single-threaded runtime and [`db::sibling_pool`] of `connections` (the pool is closed when
/// `work` ends, and the thread with it); on SQLite, a task of the shared runtime on `db`
/// itself (an in-memory database is one connection, which another pool would not share, and a
/// SQLite file has its writer's thread already). If the thread or its runtime cannot start,
/// `work` is dropped unrun: a worker whose inbox it owned sees it closed, and its callers work
/// alone, as they do when a worker stops.
pub fn spawn<F, Fut>(db: &Db, name: &str, connections: u32, work: F)
where
    F: FnOnce(Db) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    spawn_with(db, name, connections, std::sync::Arc::from(""), work);
}

/// [`spawn`] whose pool's connections also run `session` (SQL, `""` for none) once each
/// ([`db::sibling_pool_with`]).
pub fn spawn_with<F, Fut>(
    db: &Db,
    name: &str,
    connections: u32,
    session: std::sync::Arc<str>,
    work: F,
) where
    F: FnOnce(Db) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    if db::backend(db) != Backend::Postgres {
        tokio::spawn(work(db.clone()));
        return;
    }
    let db = db.clone();
    let started = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!(error = %e, "a worker's runtime did not start; its callers work alone");
                    return;
                }
            };
            rt.block_on(async move {
                let own = db::sibling_pool_with(&db, connections, session);
                drop(db);
                work(own.clone()).await;
                own.close().await;
            });
        });
    if let Err(e) = started {
        tracing::error!(error = %e, name, "a worker's thread did not start; its callers work alone");
    }
}

/// Work handed to a [`Runner`]: given the runner's pool, the future to run there.
type Job = Box<dyn FnOnce(Db) -> futures::future::BoxFuture<'static, ()> + Send>;

/// Request work run on a thread of its own with a pool of its own (started on first use by
/// [`spawn`]; on SQLite, inline): each piece of work is a task of that thread's runtime, so
/// between its round trips it waits only behind the other work of the runner, not behind
/// every ready request of the shared runtime. Used for fans' checkout steps
/// (`AppState::on_checkout`).
#[derive(Debug)]
pub struct Runner {
    name: &'static str,
    connections: u32,
    /// SQL each of the pool's connections runs once (`""`: nothing beyond `db::PG_SESSION`).
    session: std::sync::Arc<str>,
    inbox: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<Job>>>,
}

impl Runner {
    /// A runner named `name` (its thread's name) with a pool of `connections`.
    pub fn new(name: &'static str, connections: u32) -> Self {
        Self::with_session(name, connections, String::new())
    }

    /// [`Runner::new`] whose connections also run `session` once each (on PostgreSQL).
    pub fn with_session(name: &'static str, connections: u32, session: String) -> Self {
        Self {
            name,
            connections,
            session: session.into(),
            inbox: std::sync::Mutex::new(None),
        }
    }

    /// Runs `work` on the runner's thread with its pool (on SQLite: here, with `db`) and
    /// returns its output; `None` when the runner's thread is gone or `work` panicked there.
    pub async fn run<T, F, Fut>(&self, db: &Db, work: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(Db) -> Fut + Send + 'static,
        Fut: Future<Output = T> + Send + 'static,
    {
        if db::backend(db) != Backend::Postgres {
            return Some(work(db.clone()).await);
        }
        let (done, answer) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |pool| {
            Box::pin(async move {
                let _ = done.send(work(pool).await);
            })
        });
        let inbox = {
            let mut slot = self.inbox.lock().expect("runner inbox");
            match slot.as_ref().filter(|t| !t.is_closed()) {
                Some(t) => t.clone(),
                None => {
                    let (t, mut rx) = tokio::sync::mpsc::unbounded_channel::<Job>();
                    spawn_with(
                        db,
                        self.name,
                        self.connections,
                        self.session.clone(),
                        move |pool| async move {
                            while let Some(job) = rx.recv().await {
                                tokio::spawn(job(pool.clone()));
                            }
                        },
                    );
                    *slot = Some(t.clone());
                    t
                }
            }
        };
        inbox.send(job).ok()?;
        answer.await.ok()
    }
}
