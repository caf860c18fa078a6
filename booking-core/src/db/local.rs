//! Reads of a SQLite file on the calling thread (issue 13: holds at the speed of the
//! database). The hot path's reads (the read before a hold, a lost hold's fresh availability)
//! went to sqlx's reader connections, each read a message to a reader's worker thread and back:
//! with the writer on its own thread ([`super::writer`]), those reader threads were a quarter
//! of the samples of a `perf` profile of the bench's hold phase.
//!
//! Here each thread that reads (a tokio worker) keeps a `query_only` connection of its own to
//! the file, opened on first use, and runs the read as a plain call. In WAL mode a reader never
//! waits for the writer (it reads the last commit's snapshot), so the call is a few index probes
//! on pages in memory: tens of microseconds, less than the two thread switches it saves. The
//! rare wait (a checkpoint restarting the log) is bounded by the busy timeout, as for sqlx's
//! readers.
//!
//! Layer: db (imports nothing above it).

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::writer;

/// Reads of one SQLite file on the calling thread.
#[derive(Debug, Clone)]
pub struct LocalReads {
    file: PathBuf,
}

thread_local! {
    /// This thread's read connections, by file.
    static READERS: RefCell<Vec<(PathBuf, Connection)>> = const { RefCell::new(Vec::new()) };
}

impl LocalReads {
    /// Reads of `file` (a SQLite database already opened and migrated by `db::connect`).
    pub fn new(file: &Path) -> Self {
        Self {
            file: file.to_owned(),
        }
    }

    /// Runs `f` on this thread's read connection to the file (opened on first use: read-write
    /// flags with `PRAGMA query_only`, as sqlx's readers, so WAL's shared memory is usable).
    /// Errors: the connection's, as `sqlx::Error` (see [`writer::to_sqlx`]); `f` must not call
    /// [`LocalReads::read`] itself.
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> sqlx::Result<T> {
        READERS
            .with(|readers| {
                let mut readers = readers.borrow_mut();
                let at = match readers.iter().position(|(p, _)| *p == self.file) {
                    Some(at) => at,
                    None => {
                        readers.push((self.file.clone(), open(&self.file)?));
                        readers.len() - 1
                    }
                };
                f(&readers[at].1)
            })
            .map_err(writer::to_sqlx)
    }

    /// [`writer::rows`] on this thread's read connection.
    pub fn rows<T>(
        &self,
        sql: &str,
        b: &super::Binds,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> sqlx::Result<Vec<T>> {
        self.read(|conn| writer::rows(conn, sql, b, row))
    }
}

fn open(file: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA query_only = ON;")?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}
