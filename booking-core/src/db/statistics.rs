//! Planner statistics that keep up with a sale's growing tables (PostgreSQL; issue 13: holds at
//! the speed of the database).
//!
//! Every PostgreSQL connection of the booking core plans a prepared statement once and keeps
//! that plan (`plan_cache_mode = force_generic_plan`, [`super::PG_SESSION`]), until the
//! statistics of a table it reads change (an `ANALYZE` invalidates the plans that use the
//! table). A sale starts with its `holds`, `hold_slots`, `idempotency` and `audit` tables
//! empty and grows them by thousands of rows a second, while autovacuum analyses a table
//! only at its next wake-up (`autovacuum_naptime`, a minute by default) after 50 rows plus a
//! tenth of it changed (postgresql.org/docs/15/routine-vacuuming.html, "Updating Planner
//! Statistics"). So a plan made while `holds` had a few dozen rows kept reading the whole
//! table: the fans' releases (`inventory::onetrip::release_own_many_sql`) locked their holds
//! by a sequential scan of `holds` and updated them through the index of every `HELD` hold.
//! In the bench's hot-show phase (`loadtest bench --database postgres://…`) `holds` was read
//! 13.3 million rows by sequential scans (`pg_stat_user_tables.seq_tup_read`), a release's
//! statement 0.5 ms at 5,600 rows and growing with the table, where a lookup by primary key
//! costs a few buffers.
//!
//! [`run`] looks every second (`Config::statistics_interval_ms`) at each table of the schema and analyses one whose live rows
//! (`pg_stat_user_tables.n_live_tup`, the statistics system's running count) have grown or
//! shrunk by [`FACTOR`] since the planner's last count (`pg_class.reltuples`), from
//! [`MIN_ROWS`] rows on ([`due`]): log₂ of a table's growth from 50 rows `ANALYZE`s over a
//! sale (about 9 for the seed rehearsal's 17,000 holds, 12 for a bench run's 136,000), so a
//! cached plan is never made on a table more than twice smaller or larger than it is. An
//! `ANALYZE` reads a sample of at most 30,000 rows: 69–212 ms each for the rehearsal's tables
//! after its rush, 89–235 ms for the bench's (`\timing` in psql, the machine idle), one
//! backend's time a few dozen times per sale. A step with nothing due is one read of the
//! catalogue. Tables that do not grow (`seats`, `pools`: analysed when
//! seeded, `db::seed_show`) are left to autovacuum. Several nodes share the work: a step runs
//! only on the node that takes the advisory lock [`LOCK_KEY`], so two never analyse the same
//! table at once.
//!
//! Layer: part of `db`; knows no table beyond PostgreSQL's catalogue.

use std::time::Duration;

use sqlx::Executor;

use super::Db;

/// Growth (or shrinkage) of a table's live rows against the planner's count that makes it due
/// for `ANALYZE` ([`due`]).
pub const FACTOR: f64 = 2.0;

/// Live rows under which a table is never due: a plan over a table this small costs little
/// whatever it does (autovacuum's own threshold, `autovacuum_analyze_threshold`, is 50).
pub const MIN_ROWS: i64 = 50;

/// The key of the transaction-level advisory lock (`pg_try_advisory_xact_lock`) a step holds,
/// so that one node at a time analyses.
pub const LOCK_KEY: i64 = 0x6263_5f73_7461_7473; // "bc_stats"

/// How long an `ANALYZE` waits for a table's lock (held by a migration or a `VACUUM FULL`)
/// before the step leaves that table to its next tick, milliseconds.
pub const LOCK_WAIT_MS: u64 = 100;

/// Whether a table with `live` rows by the statistics system, whose planner statistics count
/// `planned` rows (`pg_class.reltuples`: `-1` for a table never analysed), is due for
/// `ANALYZE`: at least [`MIN_ROWS`] live rows, and never analysed, or [`FACTOR`] times more or
/// fewer live rows than planned.
pub fn due(planned: f64, live: i64) -> bool {
    if live < MIN_ROWS {
        return false;
    }
    let live = live as f64;
    planned < 0.0 || live > planned * FACTOR || live * FACTOR < planned
}

/// The tables of the connection's schema that are [`due`] and that its role may analyse
/// (PostgreSQL 15: owned by a role it belongs to, or in a database it owns; superusers all):
/// another role's table is skipped by `ANALYZE` with a WARNING notice, not an error, and would
/// stay due (and warn) every step.
async fn due_tables<'c>(conn: impl sqlx::AnyExecutor<'c>) -> sqlx::Result<Vec<String>> {
    let tables: Vec<(String, f64, i64)> = sqlx::query_as(
        "SELECT CAST(s.relname AS TEXT), CAST(c.reltuples AS DOUBLE PRECISION), s.n_live_tup \
         FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid \
         WHERE s.schemaname = current_schema() \
         AND (pg_has_role(c.relowner, 'USAGE') OR pg_has_role((SELECT d.datdba \
         FROM pg_database d WHERE d.datname = current_database()), 'USAGE')) \
         ORDER BY s.relname",
    )
    .fetch_all(conn)
    .await?;
    Ok(tables
        .into_iter()
        .filter(|(_, planned, live)| due(*planned, *live))
        .map(|(table, _, _)| table)
        .collect())
}

/// One step: the tables [`due_tables`] names, each analysed; returns their names (empty when
/// none was due or another node holds [`LOCK_KEY`]). With nothing due it is one read of the
/// catalogue; else, under the lock, the tables are read again (another node may have just
/// analysed them). A table whose lock stays taken past [`LOCK_WAIT_MS`] is left out (tried
/// again next step). `Err`: the database's (not PostgreSQL, no connection).
pub async fn step(db: &Db) -> sqlx::Result<Vec<String>> {
    if due_tables(db).await?.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = db.begin().await?;
    let (mine,): (bool,) = sqlx::query_as("SELECT pg_try_advisory_xact_lock($1)")
        .bind(LOCK_KEY)
        .fetch_one(&mut *tx)
        .await?;
    if !mine {
        return Ok(Vec::new());
    }
    tx.execute(format!("SET LOCAL lock_timeout = '{LOCK_WAIT_MS}ms'").as_str())
        .await?;
    let mut analysed = Vec::new();
    for table in due_tables(&mut *tx).await? {
        // A savepoint per table: a lock wait past the limit undoes that table's ANALYZE only.
        let mut sp = sqlx::Acquire::begin(&mut *tx).await?;
        let quoted = format!("ANALYZE \"{}\"", table.replace('"', "\"\""));
        match sp.execute(quoted.as_str()).await {
            Ok(_) => {
                sp.commit().await?;
                analysed.push(table);
            }
            Err(e) if crate::error::lock_waited(&e) => {
                sp.rollback().await?;
                tracing::debug!(%table, "ANALYZE waited past its lock limit; next step");
            }
            Err(e) => return Err(e),
        }
    }
    tx.commit().await?;
    Ok(analysed)
}

/// [`step`] every `every` until aborted (the booking core's `serve` runs it on PostgreSQL and
/// aborts it at shutdown). A failed step is tried again at the next tick; the first failure of
/// a run of them is logged as a warning (a role without the right to analyse would otherwise
/// warn every tick), the others at debug.
pub async fn run(db: Db, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tick.tick().await;
        match step(&db).await {
            Ok(analysed) => {
                if failing {
                    tracing::info!("refreshing planner statistics works again");
                }
                failing = false;
                if !analysed.is_empty() {
                    tracing::debug!(?analysed, "planner statistics refreshed");
                }
            }
            Err(e) if failing => {
                tracing::debug!(error = %e, "refreshing planner statistics failed")
            }
            Err(e) => {
                failing = true;
                tracing::warn!(error = %e, "refreshing planner statistics failed; autovacuum alone keeps them until it works");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_due_when_it_doubles_or_halves_from_fifty_rows_on() {
        assert!(!due(-1.0, MIN_ROWS - 1), "small tables are left alone");
        assert!(due(-1.0, MIN_ROWS), "never analysed");
        assert!(due(0.0, MIN_ROWS), "analysed empty");
        assert!(!due(100.0, 200), "twice: not yet");
        assert!(due(100.0, 201));
        assert!(!due(1000.0, 500));
        assert!(due(1000.0, 499), "a table cleaned up");
    }
}
