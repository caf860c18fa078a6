//! SQLite WAL checkpoints off the writer's path (issue 13: holds at the speed of the database).
//!
//! By default the connection whose `COMMIT` takes the write-ahead log past 1,000 pages runs the
//! checkpoint itself, in that commit: it copies the log's pages into the database file and
//! fsyncs both, while every other hold queues for the one writer (sqlite.org/c3ref/
//! wal_autocheckpoint.html: "automatically checkpoint after committing a transaction if there
//! are N or more frames"). A hot show's hold writes about 20 pages, so under the bench's load
//! (`loadtest bench`, embedded SQLite on this machine's disk, about 75,000 frames a second)
//! that was dozens of checkpoints a second inside holds' commits: the same run on tmpfs, where
//! an fsync is free, held 1,892 seat-hold requests/s against 1,391.
//!
//! So the writer's own threshold is raised to [`BACKSTOP_PAGES`] (it checkpoints only if this
//! loop stops or falls that far behind), and [`run`] checkpoints every [`EVERY`] from one of
//! the reader connections instead, as sqlite.org/wal.html ("Automatic Checkpoint") suggests:
//! "turn off the automatic checkpoints and run checkpoints during idle moments or in a separate
//! thread". A `PASSIVE` checkpoint takes no writer lock: commits go on while it copies and
//! fsyncs, and it copies only frames no open read still needs, so readers are never blocked
//! either. Once the log is wholly copied, the writer's next transaction starts the log over
//! from its first frame (the file keeps its size and is reused), so the log stays near what one
//! [`EVERY`] of commits writes (in the bench about 300 MiB). Checkpointing every 100 ms gained
//! nothing over the default (1,485 and 1,272 seat holds/s): the fsyncs themselves slowed the
//! writer's appends to the log; once a second they are few enough.
//!
//! Durability: as before, a commit is in the log when it returns (`synchronous = NORMAL`) and
//! survives a crash of this process; a power cut or an OS crash can lose the commits since the
//! last checkpoint's fsync, now at most about [`EVERY`] of them (before, the last commits under
//! 1,000 pages: fewer under load, minutes of them at a quiet moment). Never a torn database.
//!
//! Layer: part of `db`; knows no tables.

use std::time::Duration;

use super::Db;

/// The writer's own auto-checkpoint threshold, pages of the log (4 KiB each by default, so
/// about 400 MiB): reached only if [`run`] is not running or falls this far behind.
pub const BACKSTOP_PAGES: u32 = 100_000;

/// How often [`run`] checkpoints.
pub const EVERY: Duration = Duration::from_millis(1000);

/// What one `PRAGMA wal_checkpoint(PASSIVE)` reported (sqlite.org/pragma.html#pragma_wal_checkpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// Whether the checkpoint could not run at all (another checkpoint held its lock).
    pub busy: bool,
    /// Frames in the log when it ran (0 right after the writer restarted the log).
    pub log_frames: i64,
    /// Frames of the log copied into the database file so far (this run and earlier ones).
    pub checkpointed_frames: i64,
}

impl Checkpoint {
    /// Whether every frame of the log is in the database file (the writer's next transaction
    /// starts the log over).
    pub fn complete(&self) -> bool {
        !self.busy && self.checkpointed_frames >= self.log_frames
    }
}

/// One passive checkpoint on a connection of `reads` (a reader: `query_only` allows a
/// checkpoint, which changes no content). Errors: the database's, unchanged.
pub async fn step(reads: &Db) -> sqlx::Result<Checkpoint> {
    let (busy, log, done): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(reads)
        .await?;
    metrics::gauge!("bc_sqlite_wal_frames").set(log as f64);
    Ok(Checkpoint {
        busy: busy != 0,
        log_frames: log,
        checkpointed_frames: done,
    })
}

/// Checkpoints every `every` until aborted (the booking core's `serve` runs it for a SQLite
/// file and aborts it at shutdown; closing the last connection checkpoints once more). A
/// failed step is logged and tried again at the next tick.
pub async fn run(reads: Db, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if let Err(e) = step(&reads).await {
            tracing::warn!(error = %e, "WAL checkpoint failed; the writer checkpoints past the backstop");
        }
    }
}
