//! SQLite takes one process (case B11): two `booking-core` processes writing one SQLite file
//! turn a burst of holds into `database is locked` errors. The first process to open a SQLite
//! file takes an exclusive `flock` on `{file}.lock` beside it and keeps it until it exits (the
//! kernel releases it then, also on a crash); a second process refuses to start with a message
//! that points to PostgreSQL for several nodes. Within one process the lock is shared, so a
//! restart in place or a second pool on the same file keeps working.
//!
//! Layer: db (imports nothing from the crate).

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The locks this process holds, by lock-file path (never released before exit).
fn held() -> &'static Mutex<HashMap<PathBuf, Arc<File>>> {
    static HELD: OnceLock<Mutex<HashMap<PathBuf, Arc<File>>>> = OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// The database file of a SQLite URL (`sqlite://path?…`, `sqlite:path?…`); `None` for an
/// in-memory database.
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty() && !path.contains(":memory:")).then(|| PathBuf::from(path))
}

/// Takes (or reuses, within this process) the lock beside `db_file`.
///
/// Errors: another process holds it (the message names the file and PostgreSQL), or the lock
/// file cannot be created.
pub fn lock_beside(db_file: &Path) -> anyhow::Result<()> {
    let mut name = db_file.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let key = std::path::absolute(&lock_path).unwrap_or_else(|_| lock_path.clone());
    let mut held = held().lock().unwrap_or_else(|e| e.into_inner());
    if held.contains_key(&key) {
        return Ok(());
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| anyhow::anyhow!("cannot create the lock file {}: {e}", lock_path.display()))?;
    match file.try_lock() {
        Ok(()) => {
            held.insert(key, Arc::new(file));
            Ok(())
        }
        Err(TryLockError::WouldBlock) => anyhow::bail!(
            "the SQLite database {} is in use by another booking-core process (it holds {}). \
             SQLite takes one process; to run several booking-core nodes, use PostgreSQL \
             (database_url = postgres://…)",
            db_file.display(),
            lock_path.display()
        ),
        Err(TryLockError::Error(e)) => {
            anyhow::bail!("cannot lock {}: {e}", lock_path.display())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_their_file() {
        assert_eq!(
            sqlite_file("sqlite://sale.db?mode=rwc"),
            Some(PathBuf::from("sale.db"))
        );
        assert_eq!(
            sqlite_file("sqlite:/tmp/x/booking.db"),
            Some(PathBuf::from("/tmp/x/booking.db"))
        );
        assert_eq!(sqlite_file("sqlite::memory:"), None);
        assert_eq!(sqlite_file("postgres://u@h/db"), None);
    }
}
