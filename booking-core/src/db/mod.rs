//! The booking database: connection, schema, idempotent venue seeding, and the audit writer.
//!
//! SQLite runs on a pool of exactly one connection: every write transaction is serialised by
//! the pool itself, so concurrent holds queue for the connection instead of failing with
//! `SQLITE_BUSY` (case B04), and `sqlite::memory:` stays one database. Never hold a transaction
//! across a gateway call, and never acquire a second connection while holding one.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::config::ShowConfig;

/// The pool type used throughout.
pub type Db = SqlitePool;
/// A transaction on [`Db`].
pub type Tx<'a> = Transaction<'a, Sqlite>;

const SCHEMA: &str = include_str!("schema.sql");

/// Opens the database (creating a file if needed) and applies the schema.
pub async fn connect(url: &str) -> anyhow::Result<Db> {
    anyhow::ensure!(
        url.starts_with("sqlite:"),
        "only sqlite: database URLs are supported for now (got {})",
        url.split(':').next().unwrap_or("")
    );
    let mut opts = SqliteConnectOptions::from_str(url)?
        .create_if_missing(true)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(true);
    if !url.contains(":memory:") {
        opts = opts.journal_mode(SqliteJournalMode::Wal);
    }
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .min_connections(1)
        .idle_timeout(None)
        .max_lifetime(None)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await?;
    sqlx::raw_sql(SCHEMA).execute(&pool).await?;
    Ok(pool)
}

/// Inserts the show and its seats unless already present (idempotent on restart).
pub async fn seed_show(db: &Db, show: &ShowConfig) -> anyhow::Result<()> {
    let mut tx = db.begin().await?;
    sqlx::query("INSERT INTO shows (id, name) VALUES (?, ?) ON CONFLICT (id) DO NOTHING")
        .bind(&show.id)
        .bind(&show.name)
        .execute(&mut *tx)
        .await?;
    for sec in &show.venue.sections {
        for row in 1..=show.venue.rows {
            for n in 1..=show.venue.seats_per_row {
                sqlx::query(
                    "INSERT INTO seats (show_id, seat_id, section, seat_row, number, price_cents, status) \
                     VALUES (?, ?, ?, ?, ?, ?, 'free') ON CONFLICT (show_id, seat_id) DO NOTHING",
                )
                .bind(&show.id)
                .bind(format!("{}-{row}-{n}", sec.name))
                .bind(&sec.name)
                .bind(i64::from(row))
                .bind(i64::from(n))
                .bind(sec.price_cents)
                .execute(&mut *tx)
                .await?;
            }
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Who changed a hold (DESIGN "Audit").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// A fan through the API.
    Api,
    /// The browser return from checkout.
    Callback,
    /// The reconciler loop.
    Reconciler,
}

impl Actor {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Api => "api",
            Actor::Callback => "callback",
            Actor::Reconciler => "reconciler",
        }
    }
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
    sqlx::query(
        "INSERT INTO audit (at, show_id, hold_id, action, actor, reason) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(at_ms)
    .bind(show_id)
    .bind(hold_id)
    .bind(action)
    .bind(actor.as_str())
    .bind(reason)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
