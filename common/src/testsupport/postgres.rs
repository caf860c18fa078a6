//! A throw-away PostgreSQL server for tests: `initdb` into a temporary directory, `postgres` on a
//! free loopback port (socket in the same directory, `fsync=off`), trust authentication for the
//! `postgres` role, one database per test via [`PostgresServer::create_database`].
//!
//! PostgreSQL refuses to run as root, and CI runs as root: when the effective uid is 0 the data
//! directory is chowned to the `postgres` OS user and `initdb`/`postgres` run through
//! `runuser -u postgres --`. Binaries come from `$PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package), else `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::free_port;

/// A running `postgres` (under a small shell watchdog that stops it when the test process ends,
/// so a server shared through [`PostgresServer::shared`] never outlives its test binary).
#[derive(Debug)]
pub struct PostgresServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
    child: Child,
}

static SHARED: OnceLock<PostgresServer> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// Directory of the PostgreSQL server binaries (see the module docs).
pub fn pg_bin() -> PathBuf {
    if let Ok(p) = std::env::var("PG_BIN") {
        return PathBuf::from(p);
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b).unwrap_or_default()
}

fn euid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn command(bin: &Path, as_postgres: bool, program: &str) -> Command {
    let exe = bin.join(program);
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

impl PostgresServer {
    /// Initialises a cluster and starts it; waits until `pg_isready` answers. Panics with a clear
    /// message when PostgreSQL is missing (install Debian's `postgresql`): tests that need it must
    /// not silently pass without it.
    pub fn start() -> Self {
        let bin = pg_bin();
        let as_postgres = euid_is_root();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("pg-test-{port}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create postgres temp dir");
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            assert!(ok, "chown {} to the postgres user failed", dir.display());
        }
        let data = dir.join("data");
        let out = command(&bin, as_postgres, "initdb")
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run initdb from {} (install Debian's postgresql): {e}",
                    bin.display()
                )
            });
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let postgres = bin.join("postgres");
        // The watchdog runs as the same user as postgres (a root shell could not signal through
        // runuser): start postgres, then stop it once the test process is gone.
        let script = format!(
            "{pg} -D {data} -p {port} -k {dir} -c listen_addresses=127.0.0.1 \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
             -c max_connections=300 -c shared_buffers=64MB >{dir}/log 2>&1 & PG=$!; \
             while [ -d /proc/{parent} ] && kill -0 $PG 2>/dev/null; do sleep 0.5; done; \
             kill -INT $PG 2>/dev/null; wait $PG; rm -rf {dir}",
            pg = postgres.display(),
            data = data.display(),
            dir = dir.display(),
            parent = std::process::id(),
        );
        let mut sh = if as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "sh", "-c", &script]);
            c
        } else {
            let mut c = Command::new("sh");
            c.args(["-c", &script]);
            c
        };
        let child = sh
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sh for postgres");
        let server = Self {
            port,
            dir,
            bin,
            as_postgres,
            child,
        };
        server.wait_ready(Duration::from_secs(30));
        server
    }

    /// One server per test binary, started on first use and stopped when the process exits.
    pub fn shared() -> &'static PostgresServer {
        SHARED.get_or_init(Self::start)
    }

    /// Freezes the server (`SIGSTOP` to the postmaster and every process it started): a hung
    /// server, which accepts TCP connections and answers nothing. [`PostgresServer::thaw`]
    /// wakes it.
    pub fn freeze(&self) {
        self.signal("STOP");
    }

    /// Wakes a server [`PostgresServer::freeze`] froze (`SIGCONT`).
    pub fn thaw(&self) {
        self.signal("CONT");
    }

    fn signal(&self, sig: &str) {
        let pidfile = self.dir.join("data").join("postmaster.pid");
        // No pid file: the server is not running (nothing to signal).
        let Ok(text) = std::fs::read_to_string(&pidfile) else {
            return;
        };
        let Some(pid) = text.lines().next().map(|l| l.trim().to_owned()) else {
            return;
        };
        let sig = format!("-{sig}");
        // The postmaster's children (backends, writer, WAL writer), then the postmaster.
        let _ = Command::new("pkill").args([&sig, "-P", &pid]).status();
        let _ = Command::new("kill").args([&sig, &pid]).status();
    }

    /// `postgres://postgres@127.0.0.1:{port}/{db}`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a fresh, uniquely named database (`t_{pid}_{n}`) and returns its URL, so tests
    /// sharing one server never see each other's rows.
    pub fn create_database(&self) -> String {
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::SeqCst)
        );
        self.psql(&format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs one SQL command through `psql` on the `postgres` database; panics on failure.
    pub fn psql(&self, sql: &str) {
        self.psql_in("postgres", sql);
    }

    /// Runs `sql` (one or more statements, `BEGIN`/`COMMIT` allowed) through `psql` on the
    /// database `db` (a name, or a URL from [`PostgresServer::create_database`]); panics on
    /// failure. Blocks until psql exits: a test that slows the booking core with a lock or
    /// `pg_sleep` runs it on a thread of its own.
    pub fn psql_in(&self, db: &str, sql: &str) {
        let db = db.rsplit('/').next().unwrap_or(db);
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["-d", db, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn wait_ready(&self, limit: Duration) {
        let start = Instant::now();
        while start.elapsed() < limit {
            let ok = Command::new(self.bin.join("pg_isready"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        panic!(
            "postgres on port {} did not become ready:\n{log}",
            self.port
        );
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // A server a failed test left frozen would never stop (pg_ctl waits on it).
        self.thaw();
        let _ = command(&self.bin, self.as_postgres, "pg_ctl")
            .args(["stop", "-m", "immediate", "-D"])
            .arg(self.dir.join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}
