//! The chaos rehearsal, CI-sized (issue 11, item 8): starts `infra/cluster/up` (Redis Cluster,
//! PostgreSQL, the gateway, 3 waiting-room and 2 booking-core nodes behind nginx) from the
//! binaries `cargo test` built, then runs `loadtest rush --cluster DIR --profile ci --chaos
//! builtin` against it: while 300 fans queue, hold and pay, every waiting-room and booking-core
//! node is restarted one at a time, PostgreSQL restarts, the node holding the admitter lock is
//! killed with kill -9 and a Redis master too. Every check must print PASS, the existing ones and
//! the chaos ones (nothing dropped by the rolling restart, takeover within 2 × the lock TTL, no
//! number held twice and nobody admitted twice after the failover, server errors below 0.01%).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `target/debug`, where `cargo test` left every binary (loadtest's own among them).
fn bin_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_BIN_EXE_loadtest"))
        .parent()
        .expect("target/debug")
        .to_path_buf();
    for bin in ["waiting-room", "booking-core", "gateway-sim"] {
        assert!(
            dir.join(bin).exists(),
            "{} missing: `cargo test --workspace` builds it (or `cargo build --workspace --bins`)",
            dir.join(bin).display()
        );
    }
    dir
}

fn infra(script: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../infra/cluster")
        .join(script)
}

/// The running `up`; stopped with SIGTERM when dropped (also on a failed assertion).
struct Up {
    child: Child,
    dir: PathBuf,
}

impl Up {
    fn start(tmp: &Path, venue: &Path, store: &str) -> Self {
        let dir = tmp.join("cluster");
        let child = Command::new(infra("up"))
            .arg("--dir")
            .arg(&dir)
            .arg("--bin-dir")
            .arg(bin_dir())
            .arg("--venue")
            .arg(venue)
            .args(["--store", store, "--opens-in", "3600", "--show", "chaos"])
            // The CI profile's lifetimes (`--spawn` sets them itself) and no hold-rate limit
            // for 300 fans behind one address.
            .args(["--hold-ttl", "20", "--payment-session", "15"])
            .args(["--hold-rate-per-min", "100000"])
            .stdout(std::fs::File::create(tmp.join("up.out")).expect("up.out"))
            .stderr(std::fs::File::create(tmp.join("up.err")).expect("up.err"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start infra/cluster/up");
        Self { child, dir }
    }

    fn output(&self) -> String {
        let tmp = self.dir.parent().expect("tmp");
        let read = |f: &str| std::fs::read_to_string(tmp.join(f)).unwrap_or_default();
        format!("{}{}", read("up.out"), read("up.err"))
    }

    /// Waits until `state.json` is written (every node answers).
    fn wait_ready(&mut self, limit: Duration) {
        let start = Instant::now();
        while !self.dir.join("state.json").exists() {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!(
                    "up exited with {status} before it was ready:\n{}",
                    self.output()
                );
            }
            assert!(
                start.elapsed() < limit,
                "up not ready within {limit:?}:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(60) {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = Command::new(infra("ctl"))
                .arg(&self.dir)
                .arg("down")
                .status();
        }
    }
}

/// 100 seats in two sections (the CI profile's size).
const VENUE: &str = r#"{"name": "Chaos 100", "rows": 5, "seats_per_row": 10,
  "sections": [{"name": "A", "price_cents": 4500}, {"name": "B", "price_cents": 3500}]}"#;

fn chaos_rehearsal(store: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let venue = tmp.path().join("venue.json");
    std::fs::write(&venue, VENUE).expect("venue");
    let mut up = Up::start(tmp.path(), &venue, store);
    up.wait_ready(Duration::from_secs(150));
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["rush", "--cluster"])
        .arg(&up.dir)
        .args(["--profile", "ci", "--chaos", "builtin", "--no-report"])
        .output()
        .expect("run loadtest rush");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "loadtest rush --chaos failed ({}):\n{stdout}\n{stderr}\n{}",
        out.status,
        up.output()
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL "))
        .collect();
    for l in &lines {
        assert!(l.starts_with("PASS "), "{l}\n\n{stdout}");
    }
    for name in [
        "zero seats sold twice",
        "server errors below 0.01%",
        "every chaos step ran",
        "no fan request dropped by a rolling restart",
        "admitter takeover after kill -9 within 2 × the lock TTL",
        "after the Redis failover, no number held twice and no one admitted twice",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(name)),
            "check {name:?} printed:\n{stdout}"
        );
    }
    assert!(lines.len() >= 15, "every check printed:\n{stdout}");
}

#[test]
fn chaos_rehearsal_on_the_cluster_passes_every_check() {
    chaos_rehearsal("single");
}
