//! SQLite's writer thread (issue 13: holds at the speed of the database). Through sqlx every
//! statement, `BEGIN` and `COMMIT` of a SQLite transaction is a message to sqlx's worker
//! thread and back (sqlx-sqlite 0.8 runs each connection on a thread of its own); on a hot
//! show the `perf` profile of that thread was a quarter context switches and a few percent
//! SQLite (ARCHITECTURE.md, "Bench"). Here one thread owns a connection of its own
//! (rusqlite, the same libsqlite3 as sqlx) and runs the hot path's writes as plain calls:
//! a fan's hold of seats or pool places, a fan's release, a refused key
//! (the inventory's `fast` module, above this layer).
//!
//! Group commit: the thread takes every job waiting (up to [`MAX_BATCH`]), runs them one after
//! another in ONE transaction (`BEGIN IMMEDIATE` … `COMMIT`), each under a savepoint of its
//! own, so a job that fails or gives up ([`Step::Undo`]) leaves nothing and the others are
//! unaffected; it answers every job only once the `COMMIT` succeeded (a failed commit answers
//! each job an error: nothing of it was stored). A job is therefore a transaction of its own
//! in everything a caller can see.
//!
//! One writer at a time: the database's other writes still go through sqlx's one writer
//! connection (`db::connect`). Before each batch the thread takes that connection from its
//! pool and keeps it until the commit (the "gate"), so the two never wait on SQLite's file
//! lock (whose busy handler sleeps 1–100 ms between tries) and queue fairly instead (the pool's
//! waiters are served in order). A task holding the sqlx writer must never wait on this
//! thread (it would wait on itself); the hot path's jobs are submitted with no transaction
//! open.
//!
//! Only for a SQLite file (an in-memory database is one connection's own); PostgreSQL keeps
//! its pool, where each connection is a socket and a statement's cost is the server's.
//!
//! Layer: db (imports nothing above it).

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, ToSql};
use tokio::sync::oneshot;

use super::{Binds, Db, Val};

/// Jobs run in one transaction at most.
pub const MAX_BATCH: usize = 128;

/// What a job decided: keep what it wrote (released into the batch's transaction) or undo it
/// (rolled back to its savepoint); either way its value is the answer, sent after the commit.
#[derive(Debug)]
pub enum Step<T> {
    /// Keep the job's writes.
    Keep(T),
    /// Undo the job's writes; the value is still the answer.
    Undo(T),
}

/// The writer thread's front: [`Writer::run`] hands it a job and awaits the answer.
#[derive(Debug)]
pub struct Writer {
    jobs: mpsc::Sender<Box<dyn Task>>,
    counts: Arc<Counts>,
}

/// The writer's figures (for tests and the bench).
#[derive(Debug, Default)]
struct Counts {
    /// Jobs handed over and not answered yet.
    pending: AtomicUsize,
    /// Batches committed.
    batches: AtomicU64,
}

/// A job in the queue, type-erased.
trait Task: Send {
    /// Runs the job under its savepoint in the batch's transaction; returns what to send
    /// once the batch's outcome is known.
    fn run(self: Box<Self>, conn: &Connection) -> Box<dyn Reply>;
    /// The batch could not run (the gate or `BEGIN` failed): answers `why`.
    fn fail(self: Box<Self>, why: &Failure);
}

/// A job's answer waiting for the commit.
trait Reply: Send {
    /// Sends the answer, or `why` when the batch did not commit.
    fn send(self: Box<Self>, committed: Result<(), &Failure>);
}

/// Why a batch stored nothing.
#[derive(Debug, Clone)]
struct Failure {
    what: String,
    /// Nothing was stored and a retry may succeed (busy, I/O, closed): 503, not 500.
    retry: bool,
}

impl Failure {
    fn of_sqlite(context: &str, e: &rusqlite::Error) -> Self {
        Failure {
            what: format!("{context}: {e}"),
            retry: retryable(e),
        }
    }

    fn to_sqlx(&self) -> sqlx::Error {
        if self.retry {
            sqlx::Error::Io(std::io::Error::other(self.what.clone()))
        } else {
            sqlx::Error::Protocol(self.what.clone())
        }
    }
}

/// SQLite result codes after which nothing was stored and a retry may succeed.
fn retryable(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::*;
    matches!(
        e.sqlite_error_code(),
        Some(DatabaseBusy | DatabaseLocked | SystemIoFailure | DiskFull | CannotOpen)
    )
}

/// A job's error as sqlx's (the handlers' [`crate::error::ApiError::Db`]).
pub fn to_sqlx(e: rusqlite::Error) -> sqlx::Error {
    Failure::of_sqlite("sqlite writer", &e).to_sqlx()
}

struct Job<T, F> {
    f: F,
    answer: oneshot::Sender<sqlx::Result<T>>,
}

impl<T, F> Task for Job<T, F>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> rusqlite::Result<Step<T>> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> Box<dyn Reply> {
        let Job { f, answer } = *self;
        let value = savepoint(conn, f).map_err(to_sqlx);
        Box::new(Answer { answer, value })
    }

    fn fail(self: Box<Self>, why: &Failure) {
        let _ = self.answer.send(Err(why.to_sqlx()));
    }
}

struct Answer<T> {
    answer: oneshot::Sender<sqlx::Result<T>>,
    value: sqlx::Result<T>,
}

impl<T: Send> Reply for Answer<T> {
    fn send(self: Box<Self>, committed: Result<(), &Failure>) {
        let value = match committed {
            Ok(()) => self.value,
            Err(why) => Err(why.to_sqlx()),
        };
        // The caller may have gone (its request was cancelled): nothing to tell.
        let _ = self.answer.send(value);
    }
}

/// Runs `f` under a savepoint: released on [`Step::Keep`], rolled back on [`Step::Undo`] or an
/// error (the error is then the job's answer; the batch goes on).
fn savepoint<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<Step<T>>,
) -> rusqlite::Result<T> {
    exec(conn, "SAVEPOINT job")?;
    match f(conn) {
        Ok(Step::Keep(v)) => {
            exec(conn, "RELEASE job")?;
            Ok(v)
        }
        Ok(Step::Undo(v)) => {
            undo(conn)?;
            Ok(v)
        }
        Err(e) => {
            undo(conn)?;
            Err(e)
        }
    }
}

/// Undoes what the running job wrote so far and goes on inside its savepoint (a job that
/// lost writes what its loss leaves instead: a hold's refused key).
pub fn rollback_to_start(conn: &Connection) -> rusqlite::Result<()> {
    exec(conn, "ROLLBACK TO job")
}

fn undo(conn: &Connection) -> rusqlite::Result<()> {
    exec(conn, "ROLLBACK TO job")?;
    exec(conn, "RELEASE job")
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

impl Writer {
    /// Opens the writer's own connection to the SQLite file `file` (already migrated by
    /// `db::connect`, which also set WAL mode) with the writer's pragmas
    /// ([`super::sqlite_writer_pragmas`]), and starts its thread; `gate` is sqlx's writer pool
    /// (one connection), taken for each batch. Must be called inside a tokio runtime (the
    /// thread awaits the gate on it). The thread ends when the last [`Writer`] is dropped.
    ///
    /// Errors: the file cannot be opened or a pragma fails.
    pub fn open(file: &Path, gate: Db) -> anyhow::Result<Self> {
        let conn = Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.execute_batch(&super::sqlite_writer_pragmas(true))?;
        conn.set_prepared_statement_cache_capacity(256);
        let (jobs, inbox) = mpsc::channel::<Box<dyn Task>>();
        let rt = tokio::runtime::Handle::current();
        let counts = Arc::new(Counts::default());
        let kept = counts.clone();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || serve(conn, inbox, gate, rt, &kept))?;
        Ok(Self { jobs, counts })
    }

    /// Jobs handed to [`Writer::run`] whose callers have not been answered yet (queued, or in
    /// the batch being applied).
    pub fn pending(&self) -> usize {
        self.counts.pending.load(Ordering::Relaxed)
    }

    /// Batches committed so far.
    pub fn batches(&self) -> u64 {
        self.counts.batches.load(Ordering::Relaxed)
    }

    /// Runs `f` on the writer thread in a transaction shared with the other jobs waiting
    /// (see the module), and answers once that transaction committed: `f`'s value when it
    /// kept or undid its writes, its error (as `sqlx::Error`) when it failed (its writes
    /// undone), or the batch's failure (nothing stored: `sqlx::Error::Io` when a retry may
    /// succeed, answered 503) when the commit failed.
    pub async fn run<T, F>(&self, f: F) -> sqlx::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<Step<T>> + Send + 'static,
    {
        let (answer, rx) = oneshot::channel();
        self.counts.pending.fetch_add(1, Ordering::Relaxed);
        let out = match self.jobs.send(Box::new(Job { f, answer })) {
            Ok(()) => rx.await.unwrap_or(Err(sqlx::Error::PoolClosed)),
            Err(_) => Err(sqlx::Error::PoolClosed),
        };
        self.counts.pending.fetch_sub(1, Ordering::Relaxed);
        out
    }
}

/// The thread: a batch per wake-up, until every [`Writer`] is gone.
fn serve(
    conn: Connection,
    inbox: mpsc::Receiver<Box<dyn Task>>,
    gate: Db,
    rt: tokio::runtime::Handle,
    counts: &Counts,
) {
    while let Ok(first) = inbox.recv() {
        let mut batch = vec![first];
        // sqlx's writer connection, kept until the commit: the database's other writers wait
        // in its pool's queue, not on the file lock. Dropped (returned to its pool) inside the
        // runtime: sqlx returns it from a task. Taken before the batch is gathered, so every
        // job that queued while it was busy joins this batch.
        let held = rt.block_on(gate.acquire());
        while batch.len() < MAX_BATCH {
            match inbox.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        metrics::histogram!("bc_writer_batch_size").record(batch.len() as f64);
        let held = match held {
            Ok(c) => c,
            Err(e) => {
                let why = Failure {
                    what: format!("sqlite writer: the writer connection: {e}"),
                    retry: true,
                };
                batch.into_iter().for_each(|job| job.fail(&why));
                continue;
            }
        };
        let started = Instant::now();
        if let Err(e) = exec(&conn, "BEGIN IMMEDIATE") {
            let why = Failure::of_sqlite("sqlite writer: BEGIN", &e);
            batch.into_iter().for_each(|job| job.fail(&why));
        } else {
            let replies: Vec<Box<dyn Reply>> = batch
                .into_iter()
                .filter_map(|job| run_guarded(&conn, job))
                .collect();
            match exec(&conn, "COMMIT") {
                Ok(()) => {
                    counts.batches.fetch_add(1, Ordering::Relaxed);
                    replies.into_iter().for_each(|r| r.send(Ok(())));
                }
                Err(e) => {
                    let why = Failure::of_sqlite("sqlite writer: COMMIT", &e);
                    tracing::error!(error = %why.what, "sqlite writer: batch not committed");
                    // Nothing of the batch may stay: the transaction may still be open.
                    let _ = conn.execute_batch("ROLLBACK");
                    replies.into_iter().for_each(|r| r.send(Err(&why)));
                }
            }
        }
        metrics::histogram!("bc_writer_batch_seconds").record(started.elapsed().as_secs_f64());
        let _entered = rt.enter();
        drop(held);
    }
}

/// Runs `job`; a job that panicked (a bug) is undone and its caller's answer dropped (the
/// caller sees the writer as gone for that request), and the thread goes on.
fn run_guarded(conn: &Connection, job: Box<dyn Task>) -> Option<Box<dyn Reply>> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(conn))) {
        Ok(reply) => Some(reply),
        Err(_) => {
            tracing::error!("sqlite writer: a job panicked; its writes are undone");
            let _ = undo(conn);
            None
        }
    }
}

impl ToSql for Val {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Val::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Val::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
        })
    }
}

/// Runs `sql` with `b`'s values and returns every row of every statement, each decoded by
/// `row`. `sql` is one statement or several joined by `"; "`, as this crate's builders write
/// them for SQLite (every value is bound, never written into the text, so `"; "` never occurs
/// inside one); each statement binds its own placeholders (`$N`, the N-th value of `b`), as
/// sqlx does. Statements are prepared once and cached by their text.
pub fn rows<T>(
    conn: &Connection,
    sql: &str,
    b: &Binds,
    mut row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut out = Vec::new();
    for one in sql.split("; ").filter(|s| !s.trim().is_empty()) {
        let mut stmt = conn.prepare_cached(one)?;
        for i in 1..=stmt.parameter_count() {
            let n = stmt
                .parameter_name(i)
                .and_then(|name| name.strip_prefix('$'))
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| (1..=b.values().len()).contains(n))
                .ok_or(rusqlite::Error::InvalidParameterCount(i, b.values().len()))?;
            stmt.raw_bind_parameter(i, &b.values()[n - 1])?;
        }
        let mut rows = stmt.raw_query();
        while let Some(r) = rows.next()? {
            out.push(row(r)?);
        }
    }
    Ok(out)
}

/// [`rows`] for statements whose rows are not wanted.
pub fn execute(conn: &Connection, sql: &str, b: &Binds) -> rusqlite::Result<()> {
    rows(conn, sql, b, |_| Ok(())).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One batch, three jobs: the kept job's row commits, the undone job's and the failed
    /// job's rows do not, and each caller gets its own answer (the failed one its error).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_undone_or_failed_leaves_nothing_and_the_others_commit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.db");
        let db = crate::db::connect(&format!("sqlite://{}?mode=rwc", file.display()))
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (v INTEGER PRIMARY KEY)")
            .execute(&db)
            .await
            .unwrap();
        let w = Writer::open(&file, db.clone()).unwrap();
        // The gate held: the three jobs queue and run in one batch once it is free.
        let gate = db.acquire().await.unwrap();
        let insert = |v: i64| move |c: &Connection| c.execute("INSERT INTO t (v) VALUES (?1)", [v]);
        let kept = w.run(move |c| insert(1)(c).map(|_| Step::Keep("kept")));
        let undone = w.run(move |c| insert(2)(c).map(|_| Step::Undo("undone")));
        let failed = w.run(move |c| {
            insert(3)(c)?;
            // The primary key refuses a second 3: the job's error, its first 3 undone.
            insert(3)(c).map(|_| Step::Keep("never"))
        });
        let release = async {
            while w.pending() < 3 {
                tokio::task::yield_now().await;
            }
            drop(gate);
        };
        let before = w.batches();
        let (kept, undone, failed, ()) = tokio::join!(kept, undone, failed, release);
        assert_eq!(kept.unwrap(), "kept");
        assert_eq!(undone.unwrap(), "undone");
        assert!(failed.is_err(), "the failed job's error is its answer");
        assert_eq!(w.batches() - before, 1, "one commit for the three jobs");
        let rows: Vec<i64> = sqlx::query_scalar("SELECT v FROM t ORDER BY v")
            .fetch_all(&db)
            .await
            .unwrap();
        assert_eq!(rows, [1], "only the kept job's row");
    }

    /// `rows` binds each statement's own `$N` placeholders from the shared values, as sqlx
    /// does for a multi-statement call, and returns every statement's rows.
    #[test]
    fn statements_bind_their_own_placeholders() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (a TEXT, n INTEGER)")
            .unwrap();
        let mut b = Binds::default();
        let (x, one, y) = (b.push("x"), b.push(1_i64), b.push("y"));
        let sql = format!(
            "INSERT INTO t VALUES ({x}, {one}) RETURNING a; INSERT INTO t VALUES ({y}, {one}) RETURNING a"
        );
        let got: Vec<String> = rows(&conn, &sql, &b, |r| r.get(0)).unwrap();
        assert_eq!(got, ["x", "y"]);
        let n: i64 = conn
            .query_row("SELECT SUM(n) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
    }
}
