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

/// Refuses a SQLite URL whose file cannot be opened as asked, before SQLite's own bare
/// "unable to open database file" (newcomer reviews ran `--database sqlite:/path/sale.db`, and a
/// directory's path): the path is a directory; the directory the file would be in does not
/// exist; or the file is missing and the URL does not ask to create it (SQLite, and sqlx's URL,
/// create a file only with `mode=rwc`; a mistyped path must not start a sale on an empty
/// database).
///
/// Errors: a message naming the path and what to do.
pub fn openable(url: &str, db_file: &Path) -> anyhow::Result<()> {
    if db_file.is_dir() {
        anyhow::bail!(
            "the SQLite database {} is a directory; name a file in it (sqlite://{}/booking.db?mode=rwc)",
            db_file.display(),
            db_file.display()
        );
    }
    if db_file.exists() {
        return Ok(());
    }
    let dir = match db_file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "the SQLite database {} cannot be created: the directory {} does not exist \
             (create it first, or name a file in an existing directory)",
            db_file.display(),
            dir.display()
        );
    }
    let creates = url
        .split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|p| p == "mode=rwc"));
    if !creates {
        anyhow::bail!(
            "the SQLite database {} does not exist; to create it, add ?mode=rwc to the URL \
             (sqlite://{}?mode=rwc)",
            db_file.display(),
            db_file.display()
        );
    }
    Ok(())
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

    #[test]
    fn a_missing_sqlite_file_is_refused_with_the_url_that_creates_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("sale.db");
        let url = format!("sqlite:{}", file.display());
        let e = openable(&url, &file).expect_err("missing file without mode=rwc");
        assert!(e.to_string().contains("?mode=rwc"), "{e}");
        assert!(
            !e.to_string().contains("  "),
            "one space between words: {e}"
        );
        openable(&format!("{url}?mode=rwc"), &file).expect("mode=rwc creates it");
        let nowhere = dir.path().join("no-such-dir").join("sale.db");
        let e = openable(
            &format!("sqlite://{}?mode=rwc", nowhere.display()),
            &nowhere,
        )
        .expect_err("no directory");
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = openable(&format!("sqlite:{}", nowhere.display()), &nowhere)
            .expect_err("no directory, no mode=rwc");
        assert!(e.to_string().contains("no-such-dir does not exist"), "{e}");
        let e = openable(&format!("sqlite:{}", dir.path().display()), dir.path())
            .expect_err("a directory");
        assert!(e.to_string().contains("is a directory"), "{e}");
        assert!(
            !e.to_string().contains("  "),
            "one space between words: {e}"
        );
        std::fs::write(&file, b"").expect("touch");
        openable(&url, &file).expect("an existing file opens without mode=rwc");
    }

    #[tokio::test]
    async fn connecting_to_a_refusing_postgresql_names_where_it_looked() {
        // Port 1: nothing listens there; the pool gives up after its 5 s.
        let e = crate::db::connect("postgres://sale:secret@127.0.0.1:1/booking")
            .await
            .expect_err("nothing listens on port 1");
        let said = e.to_string();
        assert!(said.contains("127.0.0.1:1/booking"), "{said}");
        assert!(!said.contains("secret"), "no password in the error: {said}");
    }

    #[tokio::test]
    async fn connecting_to_a_missing_sqlite_file_says_how_to_create_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("sale.db");
        let e = crate::db::connect(&format!("sqlite:{}", file.display()))
            .await
            .expect_err("missing file without mode=rwc");
        assert!(e.to_string().contains("?mode=rwc"), "{e}");
        assert!(!file.exists(), "nothing created");
    }
}
