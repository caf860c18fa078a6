//! The database's own ceiling for the hold figures (DECISIONS "Booking core"): raw
//! guarded-update-plus-insert transactions, measured in the same bench run on the same store
//! with no HTTP, no idempotency, caps or audit. Each transaction is one guarded counter update
//! on one of 100 hot rows (`… WHERE id = $1 AND taken + 1 <= capacity`), one insert, a commit.
//! PostgreSQL: [`PG_CLIENTS`] concurrent clients on the bench database (scratch tables, dropped
//! after). SQLite: one writer (SQLite has one) on a fresh file beside the bench's, in WAL mode
//! with `synchronous = NORMAL` as the booking core runs it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::{Any, Pool};

/// Concurrent clients on PostgreSQL.
pub const PG_CLIENTS: usize = 16;
/// Hot rows the transactions update.
const ROWS: i64 = 100;

/// Raw transactions per second on the bench's database.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RawFigure {
    /// Committed transactions per second.
    pub tps: f64,
    /// Concurrent clients.
    pub clients: usize,
    /// What was measured.
    pub method: String,
}

/// Measures for `duration` (after a quarter-second warm-up) on `database` (`None`: SQLite).
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
    let mut opts = sqlx::any::AnyPoolOptions::new().max_connections(clients as u32);
    if !pg {
        opts = opts.after_connect(|conn, _| {
            Box::pin(async move {
                use sqlx::Executor;
                conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;")
                    .await?;
                Ok(())
            })
        });
    }
    let db: Pool<Any> = opts.connect(&url).await?;
    for sql in [
        "DROP TABLE IF EXISTS bench_raw_holds",
        "DROP TABLE IF EXISTS bench_raw_rows",
        "CREATE TABLE bench_raw_rows (id BIGINT PRIMARY KEY, taken BIGINT NOT NULL, capacity BIGINT NOT NULL)",
        "CREATE TABLE bench_raw_holds (row_id BIGINT NOT NULL, client BIGINT NOT NULL, at BIGINT NOT NULL)",
    ] {
        sqlx::query(sql).execute(&db).await?;
    }
    for id in 0..ROWS {
        sqlx::query("INSERT INTO bench_raw_rows (id, taken, capacity) VALUES ($1, 0, 1000000000)")
            .bind(id)
            .execute(&db)
            .await?;
    }
    let done = Arc::new(AtomicU64::new(0));
    let warmup = Duration::from_millis(250);
    let start = Instant::now();
    let end = start + warmup + duration;
    let workers: Vec<_> = (0..clients)
        .map(|c| {
            let (db, done) = (db.clone(), done.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let id = rand::thread_rng().gen_range(0..ROWS);
                    let one = async {
                        let mut tx = if pg {
                            db.begin().await?
                        } else {
                            db.begin_with("BEGIN IMMEDIATE").await?
                        };
                        let n = sqlx::query(
                            "UPDATE bench_raw_rows SET taken = taken + 1 WHERE id = $1 AND taken + 1 <= capacity",
                        )
                        .bind(id)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                        sqlx::query("INSERT INTO bench_raw_holds (row_id, client, at) VALUES ($1, $2, $3)")
                            .bind(id)
                            .bind(c as i64)
                            .bind(n as i64)
                            .execute(&mut *tx)
                            .await?;
                        tx.commit().await?;
                        Ok::<_, sqlx::Error>(())
                    };
                    if one.await.is_ok() && start.elapsed() >= warmup {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.await?;
    }
    let tps = done.load(Ordering::Relaxed) as f64 / duration.as_secs_f64();
    for sql in ["DROP TABLE bench_raw_holds", "DROP TABLE bench_raw_rows"] {
        let _ = sqlx::query(sql).execute(&db).await;
    }
    db.close().await;
    Ok(RawFigure {
        tps,
        clients,
        method: format!(
            "{clients} client(s), each transaction: one guarded UPDATE of 1 of {ROWS} hot rows + one INSERT + COMMIT{}",
            if pg { " (PostgreSQL, bench database)" } else { " (SQLite WAL, synchronous=NORMAL, BEGIN IMMEDIATE, fresh file)" }
        ),
    })
}
