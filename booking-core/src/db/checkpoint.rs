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
//! from its first frame (the file keeps its size and is reused). Under steady commits that
//! never happens (frames arrive while the passive checkpoint copies), so a step finding the log
//! past [`TRUNCATE_AT_FRAMES`] follows with a `TRUNCATE` checkpoint, which briefly holds the
//! writer back and empties the file: the log stays under about one [`EVERY`] of commits plus
//! [`TRUNCATE_AT_FRAMES`] (in the bench about 300 MiB at its peak, measured with 4 KiB pages).
//! Checkpointing every 100 ms gained nothing over the default (1,485 and 1,272 seat holds/s):
//! the fsyncs themselves slowed the writer's appends to the log; once a second they are few
//! enough.
//!
//! Durability: as before, a commit is in the log when it returns (`synchronous = NORMAL`) and
//! survives a crash of this process; a power cut or an OS crash can lose the commits since the
//! last checkpoint's fsync, now at most about [`EVERY`] of them (before, the last commits under
//! 1,000 pages: fewer under load, minutes of them at a quiet moment). Never a torn database.
//!
//! Layer: part of `db`; knows no tables.

use std::time::Duration;

use super::Db;

/// The writer's own auto-checkpoint threshold, pages of the log (about 100 MiB at the 1 KiB
/// pages of a database this service creates, [`super::SQLITE_PAGE_BYTES`]; 400 MiB at an older
/// file's 4 KiB): reached only if [`run`] is not running or falls this far behind.
pub const BACKSTOP_PAGES: u32 = 100_000;

/// How often [`run`] checkpoints.
pub const EVERY: Duration = Duration::from_millis(1000);

/// Frames of the log past which a step follows its passive checkpoint with a `TRUNCATE` one
/// (about 10 MiB at 1 KiB pages, 40 MiB at 4 KiB): under steady commits a passive checkpoint
/// never finds the log wholly copied (frames arrive while it copies), so the writer never starts
/// the log over and the file grew to the backstop (a newcomer measured 412 MB at 150 holds/s).
pub const TRUNCATE_AT_FRAMES: i64 = 10_000;

/// The largest log file the writer leaves after it starts the log over on its own (at the
/// backstop), bytes: `PRAGMA journal_size_limit`.
pub const LOG_FILE_LIMIT_BYTES: i64 = 64 * 1024 * 1024;

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

/// One step of [`run`] on a connection of `reads` (a reader: `query_only` allows a checkpoint,
/// which changes no content): a passive checkpoint, then, when the log has
/// `truncate_at_frames` or more, a `TRUNCATE` checkpoint. That one waits (the connection's
/// busy timeout) for the writer's transaction in progress to end and holds the next one back
/// while it copies the few frames the passive pass left and empties the log file, so the
/// writer waits a few milliseconds about once per [`EVERY`] under load, not in every
/// thousand-page commit. Returns the last checkpoint's report. Errors: the database's.
pub async fn step(reads: &Db, truncate_at_frames: i64) -> sqlx::Result<Checkpoint> {
    let passive = checkpoint(reads, "PASSIVE").await?;
    let last = if passive.log_frames >= truncate_at_frames {
        checkpoint(reads, "TRUNCATE").await?
    } else {
        passive
    };
    metrics::gauge!("bc_sqlite_wal_frames").set(last.log_frames as f64);
    Ok(last)
}

/// `PRAGMA wal_checkpoint(mode)`.
async fn checkpoint(reads: &Db, mode: &str) -> sqlx::Result<Checkpoint> {
    let (busy, log, done): (i64, i64, i64) =
        sqlx::query_as(&format!("PRAGMA wal_checkpoint({mode})"))
            .fetch_one(reads)
            .await?;
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
        if let Err(e) = step(&reads, TRUNCATE_AT_FRAMES).await {
            tracing::warn!(error = %e, "WAL checkpoint failed; the writer checkpoints past the backstop");
        }
    }
}
