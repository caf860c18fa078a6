//! The booking database: connection (SQLite embedded default, PostgreSQL in production, both
//! through sqlx's `Any` driver with `$N` placeholders that both understand), migrations per
//! backend, idempotent venue seeding, fixed-order row locks, leases, and the audit writer.
//!
//! SQLite runs on a pool of exactly one connection: every write transaction is serialised by
//! the pool itself, so concurrent holds queue for the connection instead of failing with
//! `SQLITE_BUSY` (case B04), and `sqlite::memory:` stays one database. On a SQLite file the hot
//! path's writes run on [`writer`]'s thread, which holds that one connection while it writes (so
//! writes are still one at a time), and its reads on the calling thread ([`local`]). PostgreSQL runs a real
//! pool at READ COMMITTED; guarded updates are preceded by `SELECT … ORDER BY seat_id FOR UPDATE`
//! so multi-seat claims never deadlock (case B05). Never hold a transaction across a gateway call.
//!
//! Layer: above `config` (the shows to seed; [`Backend`] is defined there); knows no seats rules,
//! holds or payments beyond seeding and the shared writers (locks, leases, audit).

pub mod checkpoint;
pub mod dedicated;
pub mod lease;
pub mod local;
pub mod outage;
pub mod single;
pub mod statistics;
pub mod writer;

use std::sync::Arc;
use std::time::Duration;

use sqlx::any::AnyPoolOptions;
use sqlx::{Any, AnyPool, Executor, Transaction};

pub use crate::config::Backend;
use crate::config::ShowConfig;

/// The pool type used throughout.
pub type Db = AnyPool;
/// A transaction on [`Db`].
pub type Tx<'a> = Transaction<'a, Any>;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The backend behind an open pool.
pub fn backend(db: &Db) -> Backend {
    if db
        .connect_options()
        .database_url
        .scheme()
        .starts_with("postgres")
    {
        Backend::Postgres
    } else {
        Backend::Sqlite
    }
}

/// Opens the database (creating a SQLite file if needed) and runs the backend's migrations.
/// Safe to call from many processes at once: sqlx takes a migration lock on PostgreSQL.
pub async fn connect(url: &str) -> anyhow::Result<Db> {
    sqlx::any::install_default_drivers();
    let pool = match Backend::of_url(url)? {
        Backend::Sqlite => {
            if let Some(file) = single::sqlite_file(url) {
                single::openable(url, &file)?;
                single::lock_beside(&file)?;
            }
            let wal = is_sqlite_file(url);
            AnyPoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                // In process, a SQLite connection cannot hang up: no ping before each use, one
                // trip to the writer's thread fewer per transaction while every other writer
                // waits (sqlx still pings it on its return; see [`ping_if_idle`]).
                .test_before_acquire(false)
                .acquire_timeout(Duration::from_secs(10))
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        conn.execute(sqlite_writer_pragmas(wal).as_str()).await?;
                        Ok(())
                    })
                })
                .connect(url)
                .await?
        }
        Backend::Postgres => pg_pool(PG_POOL).connect(url).await.map_err(|e| {
            // sqlx says only "pool timed out while waiting for an open connection" when the
            // server refuses or does not answer (a newcomer review): name where it looked.
            let at = pg_where(url);
            match e {
                sqlx::Error::PoolTimedOut => anyhow::anyhow!(
                    "cannot connect to PostgreSQL at {at} within 5 s: is it running and accepting \
                     connections there? (database_url)"
                ),
                e => anyhow::anyhow!("cannot connect to PostgreSQL at {at}: {e}"),
            }
        })?,
    };
    match backend(&pool) {
        Backend::Sqlite => SQLITE_MIGRATIONS.run(&pool).await?,
        Backend::Postgres => POSTGRES_MIGRATIONS.run(&pool).await?,
    }
    Ok(pool)
}

/// The page size of a SQLite database this service creates, bytes (1 KiB; SQLite's default is
/// 4 KiB). A hold inserts into several B-trees keyed by random ids (the idempotency key's
/// visitor, the cap slots' owners, the ended admissions' `jti`), so each job of the writer's
/// group commit dirties a few leaf pages of its own, and the commit appends every dirty page
/// whole to the write-ahead log: `perf` showed the writer's thread spending 40 % of its time in
/// `pwrite` to the log, and the writer busy for 117 µs a job. With 1 KiB pages the same
/// changes write a quarter of the bytes. Measured with `loadtest bench --duration 5` on a
/// 2-vCPU machine, four runs alternating with the 4 KiB build: hot-show seat holds 2,944,
/// 4,090, 4,016, 3,246 → 5,722, 5,630, 4,498, 5,117 requests/s (201s 869–1,202 → 1,315–1,679
/// a second), pool holds 3,818–4,596 → 5,397–6,656; 512-byte pages measured the same as
/// 1 KiB (5,553 and 5,831 seat holds/s), with deeper trees and more overflow pages for the
/// stored answers, so 1 KiB. Set before the first write, as the first pragma: a database
/// keeps the page size it was created with (in WAL mode SQLite cannot change it; converting
/// an existing file takes `PRAGMA journal_mode = DELETE; PRAGMA page_size = 1024; VACUUM;`
/// with the service stopped, README "Running the services one by one").
pub const SQLITE_PAGE_BYTES: u32 = 1024;

/// The pragmas of a SQLite connection that writes (sqlx's writer and [`writer`]'s thread):
/// the page size of a database it creates ([`SQLITE_PAGE_BYTES`]; no effect on an existing
/// one), a 5 s busy timeout and foreign keys; on a file (`wal`), WAL with `synchronous =
/// NORMAL` (a commit is an append to the log, fsynced at checkpoints; a power cut may lose the
/// last commits, never corrupt) and a checkpoint only past the backstop ([`checkpoint::run`]
/// does it from a reader, off the holds' path).
pub fn sqlite_writer_pragmas(wal: bool) -> String {
    let mut pragmas = format!(
        "PRAGMA page_size = {SQLITE_PAGE_BYTES}; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;"
    );
    if wal {
        pragmas.push_str(&format!(
            " PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA wal_autocheckpoint = {}; PRAGMA journal_size_limit = {};",
            checkpoint::BACKSTOP_PAGES,
            checkpoint::LOG_FILE_LIMIT_BYTES
        ));
    }
    pragmas
}

/// A pooled connection idle this long is pinged before it is handed out ([`ping_if_idle`]).
pub const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// The pools' check before handing out an idle connection: a ping only when it sat idle for
/// [`PING_AFTER_IDLE`] or more. sqlx 0.8 pings every connection when it is returned to the pool
/// and, by default (`test_before_acquire`), again before every use: two round trips per
/// transaction beside its own, on a hot show one of them on SQLite's single writer while every
/// other writer waits (bench: `loadtest bench`, ARCHITECTURE.md "Bench"). A connection in steady
/// use was checked moments ago by the ping on its return; one idle longer may have been cut (a
/// PostgreSQL restart or failover) and is pinged, and discarded by the pool if the ping fails.
/// The pattern of sqlx's own `PoolOptions::before_acquire` documentation.
pub fn ping_if_idle(
    conn: &mut sqlx::AnyConnection,
    meta: sqlx::pool::PoolConnectionMetadata,
) -> futures::future::BoxFuture<'_, sqlx::Result<bool>> {
    Box::pin(async move {
        if meta.idle_for >= PING_AFTER_IDLE {
            sqlx::Connection::ping(conn).await?;
        }
        Ok(true)
    })
}

/// PostgreSQL connections per process: sized for a 2-core machine, where more connections
/// than about 4 × cores only add lock waits and context switches on a hot show (issue 7).
pub const PG_POOL: u32 = 10;

/// PostgreSQL connections per process for fans' checkout steps, on their thread
/// (`AppState::on_checkout`): reading the hold, paying, the gateway's callback and webhook,
/// cancelling. As many as the requests' pool: with 4 (then still on the shared runtime) the
/// steps queued for them in the seed rehearsal (r28: 61 s from hold to PAID against 33–37 s).
pub const PG_CHECKOUT_POOL: u32 = 10;

/// PostgreSQL connections per process for fans' hold requests, on their thread
/// (`AppState::on_holds`): the read before a hold, a hold in one round trip or in a
/// transaction, a refusal's availability read (a queued show's holds are applied by its hold
/// queue's worker, with connections of its own).
pub const PG_HOLDS_POOL: u32 = 8;

/// PostgreSQL connections per process for the gateway's access token ([`connect_tokens`]).
pub const PG_TOKEN_POOL: u32 = 2;

/// PostgreSQL connections per process for the seat maps' polls of their change feed
/// ([`connect_feed`]). Polls run one at a time per show, so two serve a hot show and a second
/// one without either waiting for the other.
pub const PG_FEED_POOL: u32 = 2;

/// SQLite reader connections of [`connect_reads`].
pub const SQLITE_READERS: u32 = 4;

/// Whether `url` names a SQLite file (not `:memory:`, not PostgreSQL): the database runs in WAL
/// mode with [`SQLITE_READERS`] readers beside the writer, and [`checkpoint::run`] keeps its log
/// short.
pub fn is_sqlite_file(url: &str) -> bool {
    matches!(Backend::of_url(url), Ok(Backend::Sqlite)) && !url.contains(":memory:")
}

/// A pool for reads that may be a little behind a concurrent write (seat maps, a hold's view):
/// on a SQLite file, [`SQLITE_READERS`] `query_only` connections that read the WAL beside the one
/// writer instead of queueing for it; on PostgreSQL or in-memory SQLite, `writer` itself.
pub async fn connect_reads(url: &str, writer: &Db) -> anyhow::Result<Db> {
    if !is_sqlite_file(url) {
        return Ok(writer.clone());
    }
    Ok(AnyPoolOptions::new()
        .max_connections(SQLITE_READERS)
        .min_connections(1)
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_secs(10))
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("PRAGMA busy_timeout = 5000; PRAGMA query_only = ON;")
                    .await?;
                Ok(())
            })
        })
        .connect(url)
        .await?)
}

/// The pool the seat-map snapshots poll their change feed with (`AppState::feed`, issue 13
/// item 6: fans must not wait on the booking core's read side). On PostgreSQL a pool of its
/// own, [`PG_FEED_POOL`] connections: on the shared pool ([`PG_POOL`] connections) a poll
/// waited for a connection behind every hold queued for one, and the reader that started it
/// waited with it. The seed rehearsal's seat-map p99 was 2.29 s and its sections' 1.41 s, for
/// snapshots served from memory; with this pool, 1.69 s and 1.14 s (one run each; what is left
/// is the machine's CPU, which the waiting room's own endpoints show too). On SQLite, `reads`
/// itself (the readers never queue behind the writer).
pub async fn connect_feed(url: &str, reads: &Db) -> anyhow::Result<Db> {
    if Backend::of_url(url)? != Backend::Postgres {
        return Ok(reads.clone());
    }
    Ok(pg_pool(PG_FEED_POOL).connect(url).await?)
}

/// The pool of the gateway's access token (`gateway::TokenStore`, read and stored at a
/// payment's first call): on PostgreSQL a pool of its own, [`PG_TOKEN_POOL`] connections,
/// opened lazily, so a payment never waits for its token behind the rush's hold requests on
/// the shared pool ([`PG_POOL`]); on SQLite, `db` itself (one writer).
pub fn connect_tokens(url: &str, db: &Db) -> anyhow::Result<Db> {
    if Backend::of_url(url)? != Backend::Postgres {
        return Ok(db.clone());
    }
    Ok(sibling_pool(db, PG_TOKEN_POOL))
}

/// A pool of `max` connections to the PostgreSQL server and database of `db`, with
/// [`pg_pool`]'s options, opened lazily (its first use connects, so making it never fails): for
/// a worker on a thread and runtime of its own ([`dedicated::spawn`]), whose connections are
/// then driven by that runtime rather than by the shared one. Call it inside the runtime that
/// will use it (the pool's upkeep task starts there).
pub fn sibling_pool(db: &Db, max: u32) -> Db {
    sibling_pool_with(db, max, Arc::from(""))
}

/// [`sibling_pool`] whose connections also run `session` (SQL, `""` for none) once each,
/// after [`PG_SESSION`]: the hold requests' pool sets [`lock_wait_session`].
pub fn sibling_pool_with(db: &Db, max: u32, session: Arc<str>) -> Db {
    pg_pool_with(max, session).connect_lazy_with((*db.connect_options()).clone())
}

/// Where a PostgreSQL URL points, for an error: `host:port/database`, never the password.
fn pg_where(url: &str) -> String {
    use std::str::FromStr;
    match sqlx::postgres::PgConnectOptions::from_str(url) {
        Ok(o) => format!(
            "{}:{}/{}",
            o.get_host(),
            o.get_port(),
            o.get_database().unwrap_or_default()
        ),
        Err(_) => "the configured database_url".to_owned(),
    }
}

/// The options of a PostgreSQL pool of `max` connections: a 5 s acquire timeout (then 503),
/// a ping only before reusing a connection idle for a while ([`ping_if_idle`]), generic plans
/// for prepared statements and no JIT compiling ([`PG_SESSION`]).
fn pg_pool(max: u32) -> AnyPoolOptions {
    pg_pool_with(max, Arc::from(""))
}

/// [`pg_pool`] whose connections also run `session` once each (`""`: nothing more).
fn pg_pool_with(max: u32, session: Arc<str>) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max)
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false)
        .before_acquire(ping_if_idle)
        .after_connect(move |conn, _| {
            let session = session.clone();
            Box::pin(async move {
                conn.execute(PG_SESSION).await?;
                if !session.is_empty() {
                    conn.execute(&*session).await?;
                }
                Ok(())
            })
        })
}

/// What a pool's connections set once for their session to bound lock waits: `lock_timeout`
/// = `wait_ms` (0: no limit, `lock_timeout = 0`, over [`PG_SESSION`]'s [`MAIN_LOCK_WAIT_MS`]). The hold requests' pool ([`PG_HOLDS_POOL`],
/// `AppState::on_holds`) and the hold queue's workers use `Config::hold_lock_wait_ms` (default
/// 1000), the checkout's pool (`AppState::on_checkout`) `Config::checkout_lock_wait_ms`
/// (default 2000). A statement waits for another transaction's locks (a hold's seats, its
/// caps' and keys' rows, a hold's own row) at most that long, then fails with SQLSTATE 55P03,
/// which is answered `503` + `Retry-After: 1` with the transaction rolled back
/// (`error::ApiError`), and its connection goes back to the pool. Without it, a transaction
/// that held seat locks for 25 s (a newcomer review) left every connection of the pool waiting
/// behind it: every other hold of the node waited out the pool's 5 s acquire timeout, and
/// those timeouts tripped the outage gate. A hold's own lock waits last milliseconds (another
/// hold's statement, a batch of the hold queue); 1 s is far above them.
pub fn lock_wait_session(wait_ms: u64) -> String {
    format!("SET lock_timeout = '{wait_ms}ms'")
}

/// What every PostgreSQL connection of the booking core sets once, for its session:
///
/// - `plan_cache_mode = force_generic_plan`. sqlx prepares each statement once per connection;
///   PostgreSQL plans its first five executions with their values and afterwards plans afresh
///   whenever a plan for those values looks cheaper than the generic one, which for this
///   service's statements (lookups by key, ranges by an index) it did at most calls of several
///   of them: in a seed rehearsal 15.8 s of PostgreSQL's 107 s of statement time was planning
///   (`pg_stat_statements.track_planning`), 0.05–1 ms a call, for plans no better than the
///   generic ones. With it: 7.1 s. (It was the hold transactions' alone, `begin_hold`, for
///   fear of the pools' lapsed-hold read, which a generic plan once drove the wrong way
///   round; that read is now a scalar subquery per row that no plan can turn round,
///   `inventory::pools`.)
/// - `jit = off`. A generic plan's cost is estimated without the values, and one above
///   `jit_above_cost` (100,000) is compiled at every execution: the seat map's change feed,
///   estimated at 16,845 log rows for the one it reads, cost 1.9 ms a poll, 5–6 ms of it
///   compiling (0.25 ms without; `EXPLAIN ANALYZE`). No statement of this service runs long
///   enough for compiling to pay (PostgreSQL's documentation: JIT is for long-running,
///   CPU-bound analytical queries).
///
/// - `lock_timeout = 10000ms` ([`MAIN_LOCK_WAIT_MS`]): a statement that waits longer for another
///   transaction's lock fails with SQLSTATE 55P03, answered `503` + `Retry-After: 1`
///   (`error::lock_wait`), before the outage gate's request limit (`outage::REQUEST_WITHIN`,
///   15 s) takes the wait for an outage and turns the whole node away (a newcomer review held
///   `LOCK TABLE` in psql: an operator's cancel and the bookings list waited 15 s and tripped the
///   gate with PostgreSQL up). The hold requests' and the checkout's pools set their shorter
///   waits after this ([`lock_wait_session`]); the statistics keeper sets its own per step.
///
/// One statement (`set_config`, session-wide), sent by the pool's `after_connect`.
pub const PG_SESSION: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false), \
     set_config('jit', 'off', false), set_config('lock_timeout', '10000ms', false)";

/// The longest a statement of the shared pool waits for another transaction's lock, ms
/// ([`PG_SESSION`]): under the outage gate's request limit (`outage::REQUEST_WITHIN`).
pub const MAIN_LOCK_WAIT_MS: u64 = 10_000;
const _: () = assert!(MAIN_LOCK_WAIT_MS < outage::REQUEST_WITHIN.as_millis() as u64);

/// Begins a transaction that will write. On SQLite it begins as a writer (`BEGIN IMMEDIATE`):
/// the write lock is taken before the first read, so a transaction that read a snapshot never
/// has to upgrade it into a write lock (in WAL mode an upgrade after another connection's commit
/// fails at once with `SQLITE_BUSY_SNAPSHOT`, whatever the busy timeout); a second writer
/// waits for the lock at `BEGIN` instead. On PostgreSQL, a plain `BEGIN`.
pub async fn begin_write(db: &Db) -> sqlx::Result<Tx<'static>> {
    match backend(db) {
        Backend::Sqlite => db.begin_with("BEGIN IMMEDIATE").await,
        Backend::Postgres => db.begin().await,
    }
}

/// Begins a transaction that writes a fan's hold or its release (the hold path's `create`,
/// the hold queue's batch, `release_by_fan`): [`begin_write`], and on PostgreSQL with
/// `synchronous_commit = off` for this transaction only (`SET LOCAL`, sent with the `BEGIN` in
/// one round trip). Its commit answers before its WAL is on disk; the WAL writer flushes it
/// within 3 × `wal_writer_delay` (600 ms by default; PostgreSQL manual, "Asynchronous
/// Commit"). A PostgreSQL crash in that window can lose the last holds and releases whole
/// (atomic: the hold, its key's stored answer, caps, audit and notices together), never
/// half of one and never a payment: every step that moves money commits synchronously, and a
/// synchronous commit flushes all WAL before it, so the hold is durable before the gateway
/// hears of a payment for it (paying stores the `pending:` claim first), and the
/// outbox worker's claim of its due rows commits before any email or waiting-room notice
/// leaves, so nothing is told of a hold or release a crash could still lose. Visibility
/// is not delayed: the guarded update still decides every seat. Seed 000: "Every durable write
/// that can happen after the response should happen after the response". SQLite in WAL mode
/// with `synchronous = NORMAL` already commits without a sync: the same as [`begin_write`].
///
/// Its statements run on generic plans, as every statement of the booking core's PostgreSQL
/// sessions ([`PG_SESSION`]; it was set here for the hold's transaction alone until the
/// twelfth session).
pub async fn begin_hold(db: &Db) -> sqlx::Result<Tx<'static>> {
    match backend(db) {
        Backend::Sqlite => db.begin_with("BEGIN IMMEDIATE").await,
        Backend::Postgres => {
            db.begin_with("BEGIN; SET LOCAL synchronous_commit = off")
                .await
        }
    }
}

/// The condition "this seat is not sold" as both stores' planners match their partial index
/// `seats_unsold` (a string literal, for `concat!`): PostgreSQL's index covers `NOT sold`, a
/// stored generated column (migration `20261205020000_seat_feed_log`: so a hold, which leaves
/// it false, is a HOT update), SQLite's covers `status <> 'sold'` (where `sold` is a virtual
/// column). Each planner uses its index only when the query names its condition as written,
/// so every statement that counts or finds unsold seats names both.
macro_rules! unsold_seat {
    () => {
        "status <> 'sold' AND NOT sold"
    };
}
pub(crate) use unsold_seat;

/// `$first, $first+1, …` for `n` values (IN lists).
pub fn params(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rows built at run time as ONE subquery, `SELECT column1 AS a, column2 AS b, … FROM (VALUES
/// (…), (…)) AS v`, its columns named `names` (each of `rows` a parenthesised tuple of as many
/// values). Both stores name a `VALUES` list's columns `column1`, `column2`, …, and neither caps
/// its rows (SQLite caps a compound `SELECT` at 500 terms). Not `SELECT … UNION ALL SELECT …`:
/// PostgreSQL plans each branch of a union as a subquery of its own, and a hold-queue batch's
/// cap slots (256 rows for 128 holds) took 39 ms to plan that way, 2.3 ms as one `VALUES`
/// (`EXPLAIN (SUMMARY ON)` on this machine; `pg_stat_statements` in the seed rehearsal: 9.0 s
/// of planning for the batch's key-and-slot statement, in the queue's worker).
pub fn values_as(names: &[&str], rows: &[String]) -> String {
    let cols: Vec<String> = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("column{} AS {n}", i + 1))
        .collect();
    format!(
        "SELECT {} FROM (VALUES {}) AS v",
        cols.join(", "),
        rows.join(", ")
    )
}

/// Parameters of a statement built at run time (multi-row `VALUES`, a batch's rows): each
/// [`Binds::push`] binds a value and returns its placeholder (`$1`, `$2`, …), so the SQL text and
/// the bound values cannot drift apart. The values are kept as [`Val`]s, so the same statement
/// runs through sqlx ([`Binds::args`]) or on SQLite's writer thread ([`writer`]).
#[derive(Default, Clone)]
pub struct Binds {
    vals: Vec<Val>,
}

/// A bound value: the kinds the booking core binds (integers and text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// An integer (epoch ms, cents, counts, statuses).
    Int(i64),
    /// Text (ids, keys, JSON bodies).
    Text(String),
}

impl From<i64> for Val {
    fn from(v: i64) -> Self {
        Val::Int(v)
    }
}

impl From<String> for Val {
    fn from(v: String) -> Self {
        Val::Text(v)
    }
}

impl From<&str> for Val {
    fn from(v: &str) -> Self {
        Val::Text(v.to_owned())
    }
}

impl std::fmt::Debug for Binds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binds")
            .field("n", &self.vals.len())
            .finish()
    }
}

impl Binds {
    /// Binds `v` and returns its placeholder.
    pub fn push(&mut self, v: impl Into<Val>) -> String {
        self.vals.push(v.into());
        format!("${}", self.vals.len())
    }

    /// The bound values in placeholder order (`$1` first).
    pub fn values(&self) -> &[Val] {
        &self.vals
    }

    /// The bound values, for `sqlx::query_with` and friends.
    pub fn args(self) -> sqlx::any::AnyArguments<'static> {
        let mut args = sqlx::any::AnyArguments::default();
        for v in self.vals {
            // Encoding a string or an integer into `Any` cannot fail.
            let _ = match v {
                Val::Int(i) => sqlx::Arguments::add(&mut args, i),
                Val::Text(t) => sqlx::Arguments::add(&mut args, t),
            };
        }
        args
    }
}

/// On PostgreSQL, locks the given seats in seat-id order (`SELECT … ORDER BY seat_id FOR
/// UPDATE`) so that concurrent multi-seat updates queue instead of deadlocking. SQLite already
/// serialises writers, so this is a no-op there.
pub async fn lock_seats(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    seats: &[String],
) -> sqlx::Result<()> {
    if !pg || seats.is_empty() {
        return Ok(());
    }
    let sql = format!(
        "SELECT seat_id FROM seats WHERE show_id = $1 AND seat_id IN ({}) ORDER BY seat_id FOR UPDATE",
        params(2, seats.len())
    );
    let mut q = sqlx::query_scalar::<_, String>(&sql).bind(show);
    for s in seats {
        q = q.bind(s);
    }
    q.fetch_all(&mut **tx).await?;
    Ok(())
}

/// [`lock_seats`] for every seat of hold `hold_id` in `show`, chosen by the hold in the same
/// statement (no read of the hold's seats first): the same seat-id order, so it queues behind,
/// and never deadlocks with, a claim or release of the same seats. A no-op on SQLite.
pub async fn lock_seats_of_hold(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold_id: &str,
) -> sqlx::Result<()> {
    if !pg {
        return Ok(());
    }
    sqlx::query(
        "SELECT seat_id FROM seats WHERE show_id = $1 \
         AND seat_id IN (SELECT seat_id FROM hold_seats WHERE hold_id = $2) \
         ORDER BY seat_id FOR UPDATE",
    )
    .bind(show)
    .bind(hold_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Inserts the show, its seats and pools unless already present (idempotent on restart, and
/// cheap when ten processes start at once on one database). Seats go in batches of
/// [`SEED_BATCH`] rows per statement (a 20,000-seat venue seeds in about a second).
pub async fn seed_show(db: &Db, show: &ShowConfig) -> anyhow::Result<()> {
    let have: i64 = sqlx::query_scalar(
        "SELECT (SELECT COUNT(*) FROM seats WHERE show_id = $1) + (SELECT COUNT(*) FROM pools WHERE show_id = $1)",
    )
    .bind(&show.id)
    .fetch_one(db)
    .await?;
    let want = show.venue.seat_count() + show.venue.pools.len() as u64;
    if u64::try_from(have).unwrap_or(0) >= want {
        return Ok(());
    }
    let mut tx = begin_write(db).await?;
    sqlx::query("INSERT INTO shows (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
        .bind(&show.id)
        .bind(&show.name)
        .execute(&mut *tx)
        .await?;
    for chunk in show.venue.seats().chunks(SEED_BATCH) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let b = 2 + i * 5;
                format!(
                    "($1, ${}, ${}, ${}, ${}, ${}, 'free')",
                    b,
                    b + 1,
                    b + 2,
                    b + 3,
                    b + 4
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO seats (show_id, seat_id, section, seat_row, number, price_cents, status) \
             VALUES {} ON CONFLICT (show_id, seat_id) DO NOTHING",
            values.join(", ")
        );
        let mut q = sqlx::query(&sql).bind(&show.id);
        for s in chunk {
            q = q
                .bind(&s.id)
                .bind(&s.section)
                .bind(i64::from(s.row))
                .bind(i64::from(s.number))
                .bind(s.price_cents);
        }
        q.execute(&mut *tx).await?;
    }
    for p in &show.venue.pools {
        sqlx::query(
            "INSERT INTO pools (show_id, pool_id, price_cents, capacity) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (show_id, pool_id) DO NOTHING",
        )
        .bind(&show.id)
        .bind(&p.id)
        .bind(p.price_cents)
        .bind(i64::from(p.capacity))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    if backend(db) == Backend::Postgres {
        // Statistics for the rows just written, before the first hold plans against them.
        // Autovacuum analyses them within a minute or so: in the seed rehearsal, until it did,
        // PostgreSQL reused a generic plan of the hold queue's guarded update that expected 51
        // seats in the show (18,917 there) and joined every seat with every asked seat (4.5
        // million comparisons, 1.1 s a batch, `auto_explain`); the queue fell 5 s behind at
        // the opening and caught up at once when autovacuum's ANALYZE ran.
        sqlx::query("ANALYZE seats, pools").execute(db).await?;
    }
    Ok(())
}

/// Seat rows per seeding INSERT (5 parameters each, well under SQLite's limit).
pub const SEED_BATCH: usize = 500;

/// Who changed a hold (DESIGN "Audit").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// A fan through the API.
    Api,
    /// The browser return from checkout.
    Callback,
    /// The gateway's signed webhook.
    Webhook,
    /// The reconciler loop.
    Reconciler,
    /// The outbox worker or a back-office operator.
    Operator,
}

impl Actor {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Api => "api",
            Actor::Callback => "callback",
            Actor::Webhook => "webhook",
            Actor::Reconciler => "reconciler",
            Actor::Operator => "operator",
        }
    }
}

/// The SQL of one audit row, its values bound in `b` (for [`write_all`]); written only when
/// `condition` (a SQL condition) holds, when given.
#[allow(clippy::too_many_arguments)]
pub fn audit_sql(
    b: &mut Binds,
    at_ms: &str,
    show_id: &str,
    hold_id: &str,
    action: &str,
    actor: Actor,
    reason: &str,
    condition: Option<&str>,
) -> String {
    let row = format!(
        "{at_ms}, {show_id}, {hold_id}, {}, {}, {}",
        b.push(action.to_owned()),
        b.push(actor.as_str()),
        b.push(reason.to_owned())
    );
    let head = "INSERT INTO audit (at, show_id, hold_id, action, actor, reason)";
    match condition {
        None => format!("{head} VALUES ({row})"),
        Some(c) => format!("{head} SELECT {row} WHERE {c}"),
    }
}

/// Runs data-modifying `statements` (placeholders bound in `b`) in ONE call, in order of
/// meaning but not of execution: on PostgreSQL one statement, every statement but the last a
/// data-modifying CTE (`WITH w0 AS (…), w1 AS (…) <last>`; PostgreSQL runs each such CTE to
/// completion whether or not the last statement reads it, all on one snapshot, so the
/// statements must touch different rows), after `ctes` (`name AS (…)`, e.g. a `FOR UPDATE`
/// lock the statements join); on SQLite the statements joined by `;` in one call to the
/// connection's worker (`ctes` must then be empty). Issue 13: a release in a few round trips.
pub async fn write_all(
    tx: &mut Tx<'_>,
    pg: bool,
    b: Binds,
    ctes: Vec<String>,
    mut statements: Vec<String>,
) -> sqlx::Result<()> {
    let Some(last) = statements.pop() else {
        return Ok(());
    };
    let sql = if pg {
        let mut with = ctes;
        with.extend(data_ctes(&statements));
        if with.is_empty() {
            last
        } else {
            format!("WITH {} {last}", with.join(", "))
        }
    } else {
        debug_assert!(ctes.is_empty(), "SQLite takes no lock CTE");
        statements.push(last);
        statements.join("; ")
    };
    sqlx::query_with(&sql, b.args()).execute(&mut **tx).await?;
    Ok(())
}

/// Data-modifying `statements` as the CTEs of one PostgreSQL statement (`w0 AS (…)`, `w1 AS
/// (…)`, …), as [`write_all`] sends them (PostgreSQL runs each to completion whether or not the
/// main statement reads it, all on one snapshot).
pub fn data_ctes(statements: &[String]) -> impl Iterator<Item = String> + '_ {
    statements
        .iter()
        .enumerate()
        .map(|(i, s)| format!("w{i} AS ({s})"))
}

/// One audit row, written inside the caller's transaction.
pub async fn audit(
    tx: &mut Tx<'_>,
    at_ms: i64,
    show_id: &str,
    hold_id: &str,
    action: &str,
    actor: Actor,
    reason: &str,
) -> sqlx::Result<()> {
    let mut b = Binds::default();
    let (at, show, hold) = (
        b.push(at_ms),
        b.push(show_id.to_owned()),
        b.push(hold_id.to_owned()),
    );
    let sql = audit_sql(&mut b, &at, &show, &hold, action, actor, reason, None);
    sqlx::query_with(&sql, b.args()).execute(&mut **tx).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_session_waits_for_locks_at_most_the_main_wait() {
        assert!(
            PG_SESSION.contains(&format!(
                "set_config('lock_timeout', '{MAIN_LOCK_WAIT_MS}ms'"
            )),
            "{PG_SESSION}"
        );
        assert_eq!(
            lock_wait_session(0),
            "SET lock_timeout = '0ms'",
            "0: no limit"
        );
    }
}
