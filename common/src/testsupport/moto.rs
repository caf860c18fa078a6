//! A throw-away S3-compatible server for tests: the server mode of PyPI's `moto` package
//! (`moto_server -H 127.0.0.1 -p PORT`; `pip install "moto[server]"`, done by
//! `scripts/install-test-deps`) on a free loopback port, killed when dropped. It keeps
//! everything in memory; any access key is accepted. Speaks enough of the S3 API for
//! `aws-sdk-s3` with a path-style endpoint (DEPENDENCIES.md), including conditional PUTs
//! (`If-Match`, `If-None-Match: *`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

/// A running `moto_server`.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl MotoServer {
    /// Starts `moto_server` (from `$MOTO_SERVER` or `PATH`) and waits until it answers HTTP.
    /// Panics with a clear message when it is missing or does not answer within 30 s: tests
    /// that need S3 must not silently pass without it.
    pub fn start() -> Self {
        let bin = std::env::var("MOTO_SERVER").unwrap_or_else(|_| "moto_server".into());
        let port = free_port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {bin} (pip install \"moto[server]\"; scripts/install-test-deps): {e}")
            });
        let mut server = Self { child, port };
        server.wait_ready(Duration::from_secs(30));
        server
    }

    /// `http://127.0.0.1:{port}` (the S3 endpoint URL).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&mut self, limit: Duration) {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("moto_server exited before answering: {status}");
            }
            if answers_http(self.port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("moto_server on port {} did not answer HTTP", self.port);
    }
}

/// Whether something on `port` answers an HTTP request with an HTTP status line.
fn answers_http(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(1000)));
    let req = b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    let mut head = [0u8; 5];
    s.write_all(req).is_ok() && s.read_exact(&mut head).is_ok() && &head == b"HTTP/"
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
