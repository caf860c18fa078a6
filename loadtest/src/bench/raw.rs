//! The database's own ceiling for the hold figures (DECISIONS "Booking core"): raw
//! guarded-update-plus-insert transactions, measured in the same bench run on the same store
//! with no HTTP, no idempotency, caps or audit. Each transaction is one guarded counter update
//! on one of 100 hot rows (`… WHERE id = $1 AND taken + 1 <= capacity`), one insert, a commit.
//! PostgreSQL: [`PG_CLIENTS`] concurrent clients on the bench database (scratch tables, dropped
//! after). SQLite: one writer (SQLite has one) on a fresh file beside the bench's, in WAL mode
//! with `synchronous = NORMAL` as the booking core runs it.
//!
//! The same transaction runs through sqlx's `Any` driver (what the booking core uses) and
//! through the typed pool of the store (`PgPool` or `SqlitePool`), in alternating rounds so
//! that the machine's load falls on both alike: their ratio is what `Any` costs on the hot path
//! (DECISIONS: "decide typed pools versus sqlx `Any` first").

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::{Any, Executor, Pool};

/// Concurrent clients on PostgreSQL.
pub const PG_CLIENTS: usize = 16;
/// Hot rows the transactions update.
const ROWS: i64 = 100;
/// Alternating rounds per driver (each a half of `duration` / `ROUNDS`).
const ROUNDS: u32 = 2;

/// The guarded update, the insert and the commit on the begun transaction `$tx` (any driver).
macro_rules! one_txn {
    ($tx:expr, $id:expr, $c:expr) => {{
        let mut tx = $tx;
        let n = sqlx::query(
            "UPDATE bench_raw_rows SET taken = taken + 1 WHERE id = $1 AND taken + 1 <= capacity",
        )
        .bind($id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query("INSERT INTO bench_raw_holds (row_id, client, at) VALUES ($1, $2, $3)")
            .bind($id)
            .bind($c)
            .bind(n as i64)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok::<_, sqlx::Error>(())
    }};
}

/// Raw transactions per second on the bench's database.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RawFigure {
    /// Committed transactions per second through the typed pool (the database's raw rate:
    /// what the hold figures are divided by).
    pub tps: f64,
    /// The same transactions per second through sqlx's `Any` driver.
    pub any_tps: f64,
    /// `any_tps / tps`: below 1, `Any` costs that much of the raw rate.
    pub any_over_typed: f64,
    /// Concurrent clients.
    pub clients: usize,
    /// What was measured.
    pub method: String,
}

/// Measures for `duration` per driver (after a quarter-second warm-up per round) on `database`
/// (`None`: SQLite).
pub async fn measure(database: Option<&str>, duration: Duration) -> anyhow::Result<RawFigure> {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir()?;
    let (url, clients, pg) = match database.filter(|u| u.starts_with("postgres")) {
        Some(u) => (u.to_owned(), PG_CLIENTS, true),
        None => (
            format!("sqlite://{}?mode=rwc", dir.path().join("raw.db").display()),
            1,
            false,
        ),
    };
    let n = clients as u32;
    let any: Pool<Any> = if pg {
        sqlx::any::AnyPoolOptions::new()
            .max_connections(n)
            .connect(&url)
            .await?
    } else {
        sqlx::any::AnyPoolOptions::new()
            .max_connections(n)
            .after_connect(|c, _| {
                Box::pin(async move { c.execute(SQLITE_PRAGMAS).await.map(drop) })
            })
            .connect(&url)
            .await?
    };
    setup(&any).await?;
    let typed = if pg {
        Typed::Pg(
            sqlx::postgres::PgPoolOptions::new()
                .max_connections(n)
                .connect(&url)
                .await?,
        )
    } else {
        Typed::Sqlite(
            sqlx::sqlite::SqlitePoolOptions::new()
                .max_connections(n)
                .after_connect(|c, _| {
                    Box::pin(async move { c.execute(SQLITE_PRAGMAS).await.map(drop) })
                })
                .connect(&url)
                .await?,
        )
    };
    let round = duration / ROUNDS;
    let (mut any_done, mut typed_done) = (0, 0);
    for _ in 0..ROUNDS {
        let a = any.clone();
        any_done += run_clients(clients, round, move |id, c| {
            let any = a.clone();
            async move {
                let tx = if pg {
                    any.begin().await?
                } else {
                    any.begin_with("BEGIN IMMEDIATE").await?
                };
                one_txn!(tx, id, c)
            }
        })
        .await?;
        typed_done += match &typed {
            Typed::Pg(p) => {
                let p = p.clone();
                run_clients(clients, round, move |id, c| {
                    let p = p.clone();
                    async move { one_txn!(p.begin().await?, id, c) }
                })
                .await?
            }
            Typed::Sqlite(p) => {
                let p = p.clone();
                run_clients(clients, round, move |id, c| {
                    let p = p.clone();
                    async move { one_txn!(p.begin_with("BEGIN IMMEDIATE").await?, id, c) }
                })
                .await?
            }
        };
    }
    let secs = (round * ROUNDS).as_secs_f64();
    let (any_tps, tps) = (any_done as f64 / secs, typed_done as f64 / secs);
    for sql in ["DROP TABLE bench_raw_holds", "DROP TABLE bench_raw_rows"] {
        let _ = sqlx::query(sql).execute(&any).await;
    }
    any.close().await;
    match typed {
        Typed::Pg(p) => p.close().await,
        Typed::Sqlite(p) => p.close().await,
    }
    Ok(RawFigure {
        tps,
        any_tps,
        any_over_typed: any_tps / tps.max(1e-9),
        clients,
        method: format!(
            "{clients} client(s), each transaction: one guarded UPDATE of 1 of {ROWS} hot rows + one INSERT + COMMIT{}; \
             typed {} and sqlx Any in {ROUNDS} alternating rounds each",
            if pg { " (PostgreSQL, bench database)" } else { " (SQLite WAL, synchronous=NORMAL, BEGIN IMMEDIATE, fresh file)" },
            if pg { "PgPool" } else { "SqlitePool" },
        ),
    })
}

/// The store's typed pool.
enum Typed {
    Pg(sqlx::PgPool),
    Sqlite(sqlx::SqlitePool),
}

/// WAL and `synchronous = NORMAL`, as the booking core runs SQLite.
const SQLITE_PRAGMAS: &str =
    "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;";

/// Fresh scratch tables with [`ROWS`] hot rows.
async fn setup(db: &Pool<Any>) -> sqlx::Result<()> {
    for sql in [
        "DROP TABLE IF EXISTS bench_raw_holds",
        "DROP TABLE IF EXISTS bench_raw_rows",
        "CREATE TABLE bench_raw_rows (id BIGINT PRIMARY KEY, taken BIGINT NOT NULL, capacity BIGINT NOT NULL)",
        "CREATE TABLE bench_raw_holds (row_id BIGINT NOT NULL, client BIGINT NOT NULL, at BIGINT NOT NULL)",
    ] {
        sqlx::query(sql).execute(db).await?;
    }
    for id in 0..ROWS {
        sqlx::query("INSERT INTO bench_raw_rows (id, taken, capacity) VALUES ($1, 0, 1000000000)")
            .bind(id)
            .execute(db)
            .await?;
    }
    Ok(())
}

/// `clients` tasks each running `txn(row, client)` in a loop for a quarter-second warm-up plus
/// `duration`; the transactions committed after the warm-up.
async fn run_clients<F, Fut>(clients: usize, duration: Duration, txn: F) -> anyhow::Result<u64>
where
    F: Fn(i64, i64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), sqlx::Error>> + Send + 'static,
{
    let (txn, done) = (Arc::new(txn), Arc::new(AtomicU64::new(0)));
    let warmup = Duration::from_millis(250);
    let start = Instant::now();
    let end = start + warmup + duration;
    let workers: Vec<_> = (0..clients as i64)
        .map(|c| {
            let (txn, done) = (txn.clone(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let id = rand::thread_rng().gen_range(0..ROWS);
                    if txn(id, c).await.is_ok() && start.elapsed() >= warmup {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await?;
    }
    Ok(done.load(Ordering::Relaxed))
}
