//! `infra/cluster/up` for tests: the whole cluster (Redis Cluster, PostgreSQL, the gateway,
//! waiting-room and booking-core nodes behind nginx) started from the binaries `cargo test`
//! built, its output kept beside its state directory, and stopped with SIGTERM when dropped
//! (`ctl down` if `up` does not stop within a minute).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `infra/cluster/NAME` (`up`, `ctl`).
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../infra/cluster")
        .join(name)
}

/// The directory of `exe` (a binary in `target/debug`) after checking that the services'
/// binaries are there too.
pub fn bin_dir_of(exe: &Path) -> PathBuf {
    let dir = exe.parent().expect("target/debug").to_path_buf();
    for bin in ["waiting-room", "booking-core", "gateway-sim"] {
        assert!(
            dir.join(bin).exists(),
            "{} missing: `cargo test --workspace` builds it (or `cargo build --workspace --bins`)",
            dir.join(bin).display()
        );
    }
    dir
}

/// A running `infra/cluster/up`.
#[derive(Debug)]
pub struct ClusterUp {
    /// The `up` process.
    pub child: Child,
    dir: PathBuf,
    logs: PathBuf,
}

impl ClusterUp {
    /// Starts `up --dir {parent}/cluster --bin-dir BIN_DIR ARGS…`; its output goes to
    /// `{parent}/up.out` and `{parent}/up.err`.
    pub fn start(parent: &Path, bin_dir: &Path, args: &[&str]) -> Self {
        let dir = parent.join("cluster");
        let file = |n: &str| std::fs::File::create(parent.join(n)).expect("up output file");
        let child = Command::new(script("up"))
            .arg("--dir")
            .arg(&dir)
            .arg("--bin-dir")
            .arg(bin_dir)
            .args(args)
            .stdout(file("up.out"))
            .stderr(file("up.err"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start infra/cluster/up");
        Self {
            child,
            dir,
            logs: parent.to_path_buf(),
        }
    }

    /// The state directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// What `up` printed so far.
    pub fn output(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.logs.join(f)).unwrap_or_default();
        format!("{}{}", read("up.out"), read("up.err"))
    }

    /// Waits for `state.json` (written once every node answers) and returns it.
    pub fn state(&mut self, limit: Duration) -> serde_json::Value {
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(self.dir.join("state.json")) {
                return serde_json::from_str(&text).expect("state.json parses");
            }
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

    /// Every pid file: (node, pid).
    pub fn pids(&self) -> Vec<(String, u32)> {
        std::fs::read_dir(self.dir.join("pids"))
            .expect("pids/")
            .flatten()
            .filter_map(|e| {
                let name = e
                    .file_name()
                    .to_string_lossy()
                    .trim_end_matches(".pid")
                    .to_owned();
                let pid = std::fs::read_to_string(e.path())
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                Some((name, pid))
            })
            .collect()
    }

    /// SIGTERM to `up`; its exit status once it stopped, `None` if it still runs after `limit`.
    pub fn terminate(&mut self, limit: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(s)) = self.child.try_wait() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for ClusterUp {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None))
            && self.terminate(Duration::from_secs(60)).is_none()
        {
            let _ = Command::new(script("ctl"))
                .arg(&self.dir)
                .arg("down")
                .status();
        }
    }
}
