//! Throw-away servers for tests: each starts on a free loopback port with its own temporary data
//! directory and is stopped (killed) when dropped. Never assumes a default port is free.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound then released; tiny race accepted for test servers).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

/// Runs `cmd` to its end, like [`Command::output`], but never longer than `limit`: a process
/// still running then is killed and the test fails with what it printed. A test that expects a
/// process to refuse to start must not hang the whole run when it starts after all.
///
/// Panics: the command cannot be spawned, or it outlives `limit`.
pub fn output_within(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command");
    // Readers drain both pipes meanwhile, so a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(25));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match status {
        Some(status) => std::process::Output {
            status,
            stdout,
            stderr,
        },
        None => panic!(
            "{cmd:?} was still running after {limit:?}; it printed:\n{}\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        ),
    }
}

/// Waits for `child` to exit, like [`Child::wait`], but never longer than `limit`: a child
/// still running then is killed and the test fails (a stop that hangs is a failure, not a
/// hung test run).
///
/// Panics: `limit` passes first.
pub fn wait_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process {} was still running after {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Reads `pipe` (a child's stdout or stderr) line by line until a line contains `needle` and
/// returns everything read so far; a thread keeps draining the pipe afterwards, so the child
/// never blocks on a full pipe nor fails on a closed one.
///
/// Panics: the pipe ends, or `limit` passes, before such a line (with what was read).
pub fn read_until_line(pipe: impl Read + Send + 'static, needle: &str, limit: Duration) -> String {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            // The receiver is gone once the needle was seen: keep draining regardless.
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + limit;
    let mut read = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                read.push_str(&line);
                read.push('\n');
                if line.contains(needle) {
                    return read;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                panic!("no line with {needle:?} within {limit:?}; read:\n{read}")
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                panic!("the output ended before a line with {needle:?}; read:\n{read}")
            }
        }
    }
}

/// A `redis-server` child process on a free port, data in a temp dir; no persistence unless
/// started with [`RedisServer::start_persistent`].
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    dir: PathBuf,
    persistent: bool,
    extra: Vec<String>,
}

fn spawn_redis(
    port: u16,
    dir: &std::path::Path,
    persistent: bool,
    extra: &[String],
) -> std::io::Result<Child> {
    let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    let aof: &[&str] = if persistent {
        &["--appendonly", "yes", "--appendfsync", "always"]
    } else {
        &["--appendonly", "no"]
    };
    Command::new(&bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--protected-mode", "no"])
        .args(aof)
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

impl RedisServer {
    /// Starts `redis-server` (from `$REDIS_SERVER` or `PATH`) and waits until it answers `PING`.
    /// Panics with a clear message when the binary is missing: tests that need Redis must not
    /// silently pass without it.
    pub fn start() -> Self {
        Self::start_with(false, &[])
    }

    /// Like [`RedisServer::start`] with extra `redis-server` arguments, for example
    /// `["--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"]` (case W14).
    pub fn start_with_args(extra: &[&str]) -> Self {
        Self::start_with(false, extra)
    }

    /// The server's process id (tests pause it with SIGSTOP to hold requests in flight).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Like [`RedisServer::start`] with an append-only file fsynced on every write, so data
    /// survives [`RedisServer::stop`] + [`RedisServer::restart`] (outage tests).
    pub fn start_persistent() -> Self {
        Self::start_with(true, &[])
    }

    /// Starts on a free port, and on another (up to 5) when this server exits before answering:
    /// its port was taken between [`free_port`] and its bind by a server another test started
    /// at that moment (whose `PONG` must not pass for this one's).
    fn start_with(persistent: bool, extra: &[&str]) -> Self {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        for _ in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("redis-test-{port}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("create redis temp dir");
            let child = spawn_redis(port, &dir, persistent, &extra).unwrap_or_else(|e| {
                panic!("cannot start redis-server (install Debian's redis-server): {e}")
            });
            let mut server = Self {
                child,
                port,
                dir,
                persistent,
                extra: extra.clone(),
            };
            if server.wait_ready(Duration::from_secs(10)) {
                return server;
            }
        }
        panic!("redis-server: each of 5 free ports was taken before it could bind");
    }

    /// `redis://127.0.0.1:{port}/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (for outage tests). [`RedisServer::restart`] brings it back on the same port.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port (data is gone unless started persistent).
    pub fn restart(&mut self) {
        self.stop();
        self.child = spawn_redis(self.port, &self.dir, self.persistent, &self.extra)
            .expect("restart redis-server");
        assert!(
            self.wait_ready(Duration::from_secs(10)),
            "redis-server exited on restart: port {} taken meanwhile?",
            self.port
        );
    }

    /// Waits until this server (its process id in `INFO server`) answers: true; false when it
    /// exited first. Panics when it neither answers nor exits within `limit`.
    fn wait_ready(&mut self, limit: Duration) -> bool {
        let ours = format!("process_id:{}", self.child.id());
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if server_info(self.port).is_some_and(|info| info.lines().any(|l| l.trim() == ours)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not answer INFO", self.port);
    }
}

/// `INFO server` of whatever Redis answers on `port`, when one does.
fn server_info(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    // A bulk string: `$LEN\r\n` then LEN bytes and `\r\n`.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        s.read_exact(&mut byte).ok()?;
        head.push(byte[0]);
    }
    let len: usize = std::str::from_utf8(head.strip_prefix(b"$")?)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).ok()?;
    String::from_utf8(body).ok()
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub mod postgres;
pub use postgres::PostgresServer;
pub mod moto;
pub use moto::MotoServer;
pub mod redis_cluster;
pub use redis_cluster::RedisCluster;
pub mod cluster_up;
pub use cluster_up::ClusterUp;
