//! The local CDN: nginx with `proxy_cache`, configured by `infra/nginx/cdn.conf.template` and
//! started through `infra/cdn-start`, in front of the waiting room. Used by `up --cdn`, by the
//! edge tests and by the load test. The same process handling starts the edge gate
//! ([`Cdn::start_gate`], `infra/gate-start`). The child process is stopped when [`Cdn`] is
//! dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running local nginx: the CDN, or the edge gate ([`Cdn::start_gate`]).
#[derive(Debug)]
pub struct Cdn {
    child: Child,
    /// `http://127.0.0.1:PORT` of the CDN.
    pub url: String,
    _prefix: tempfile::TempDir,
}

/// `infra/` of this checkout.
pub fn infra_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("infra")
}

/// Whether `127.0.0.1:{port}` can be listened on now. nginx started on a taken port exits at
/// once, and whatever answers there is another server: found by a newcomer, `up --cdn` on a
/// port a Python server held printed that server's URL as the fans' entry point.
///
/// # Errors
/// The port is taken (or not ours to bind), with the cause.
pub fn port_free(port: u16) -> anyhow::Result<()> {
    std::net::TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .map_err(|e| anyhow::anyhow!("port {port} cannot be listened on: {e}"))
}

impl Cdn {
    /// Starts nginx on `127.0.0.1:{port}` (0 = a free port) in front of `origin` (`host:port`),
    /// with its config, cache and logs in a fresh temporary directory. Waits until it answers.
    ///
    /// # Errors
    /// When nginx is missing (install Debian's `nginx`) or does not answer within 10 s.
    pub fn start(port: u16, origin: &str) -> anyhow::Result<Self> {
        Self::start_with_status(port, origin, None)
    }

    /// Like [`Cdn::start`]; with `status_s3 = Some(url)` (`http://HOST:PORT/BUCKET/PREFIX/`,
    /// path-style) `/status/{event}.json` is fetched from that S3 URL instead of the origin
    /// (`infra/cdn-start --status-s3`).
    ///
    /// # Errors
    /// As [`Cdn::start`].
    pub fn start_with_status(
        port: u16,
        origin: &str,
        status_s3: Option<&str>,
    ) -> anyhow::Result<Self> {
        Self::start_with(port, origin, status_s3, true)
    }

    /// Like [`Cdn::start_with_status`]; `revalidate = false` renders `proxy_cache_revalidate
    /// off` (`cdn-start --no-revalidate`): an expired copy is fetched whole again. Only for
    /// measuring what conditional requests save (`loadtest revalidate`).
    ///
    /// # Errors
    /// As [`Cdn::start`].
    pub fn start_with(
        port: u16,
        origin: &str,
        status_s3: Option<&str>,
        revalidate: bool,
    ) -> anyhow::Result<Self> {
        let mut opts = Vec::new();
        if let Some(url) = status_s3 {
            opts.extend(["--status-s3", url]);
        }
        if !revalidate {
            opts.push("--no-revalidate");
        }
        Self::launch("cdn-start", &opts, port, &[origin])
    }

    /// Starts the edge gate (`infra/gate-start`) on `127.0.0.1:{port}` (0 = a free port) in
    /// front of `origin` (`host:port`): every request needs a valid admission token for
    /// `audience`, checked by the booking core at `verifier` (`host:port`); visitors without
    /// one are sent to `waiting_room` (a URL), API calls (`/api/…`) get 403 problem+json.
    ///
    /// # Errors
    /// As [`Cdn::start`].
    pub fn start_gate(
        port: u16,
        origin: &str,
        verifier: &str,
        audience: &str,
        waiting_room: &str,
    ) -> anyhow::Result<Self> {
        Self::launch(
            "gate-start",
            &[],
            port,
            &[origin, verifier, audience, waiting_room],
        )
    }

    /// Runs the start script `infra/{script}` with `OPTS… LISTEN_PORT ARGS… PREFIX_DIR`, the
    /// prefix a fresh temporary directory, and waits until this nginx listens. `port` 0 means a
    /// free port, and another one (up to 5) when the port was taken between [`free_port`]
    /// (`sale_common::testsupport`) and nginx's bind, by a server another test started at that
    /// moment: CI saw the CDN's first request answered 404 by another test's waiting room.
    fn launch(script: &str, opts: &[&str], port: u16, args: &[&str]) -> anyhow::Result<Self> {
        if port != 0 {
            port_free(port)?;
            return Self::launch_on(script, opts, port, args).map_err(Launch::into_error);
        }
        let mut taken = Vec::new();
        for _ in 0..5 {
            let port = sale_common::testsupport::free_port();
            match Self::launch_on(script, opts, port, args) {
                Ok(cdn) => return Ok(cdn),
                Err(Launch::PortTaken) => taken.push(port),
                Err(Launch::Failed(e)) => return Err(e),
            }
        }
        anyhow::bail!("nginx ({script}): ports {taken:?} were each taken before nginx bound them")
    }

    /// One start on `port`. Ready when the master has written its pid file (nginx writes it
    /// after binding its listening sockets) and the port accepts: a connection alone could be
    /// another server's.
    fn launch_on(script: &str, opts: &[&str], port: u16, args: &[&str]) -> Result<Self, Launch> {
        let prefix = tempfile::tempdir().map_err(|e| Launch::Failed(e.into()))?;
        let path = infra_dir().join(script);
        let child = Command::new(&path)
            .args(opts)
            .arg(port.to_string())
            .args(args)
            .arg(prefix.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                Launch::Failed(anyhow::anyhow!(
                    "cannot start {} (is nginx installed?): {e}",
                    path.display()
                ))
            })?;
        let mut cdn = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _prefix: prefix,
        };
        let pid_file = cdn._prefix.path().join("nginx.pid");
        let ours = cdn.child.id().to_string();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = cdn.child.try_wait() {
                let log = std::fs::read_to_string(cdn._prefix.path().join("error.log"))
                    .unwrap_or_default();
                if log.contains("Address already in use") {
                    return Err(Launch::PortTaken);
                }
                return Err(Launch::Failed(anyhow::anyhow!(
                    "nginx exited with {status}: {log}"
                )));
            }
            let written = std::fs::read_to_string(&pid_file).is_ok_and(|pid| pid.trim() == ours);
            if written && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(cdn);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        cdn.stop();
        Err(Launch::Failed(anyhow::anyhow!(
            "nginx did not listen on port {port} within 10 s"
        )))
    }

    /// Stops nginx gracefully (case W13): SIGQUIT to the master (`cdn-start` `exec`s into it),
    /// which stops accepting, lets requests in flight finish and closes idle keep-alive
    /// connections; SIGTERM (fast shutdown) if it is still running after [`Cdn::DRAIN`];
    /// SIGKILL after 5 s more. A SIGKILL first would orphan the workers, which keep the port.
    pub fn stop(&mut self) {
        for (signal, wait) in [("-QUIT", Self::DRAIN), ("-TERM", Duration::from_secs(5))] {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            let _ = Command::new("kill")
                .args([signal, &self.child.id().to_string()])
                .status();
            let start = Instant::now();
            while start.elapsed() < wait {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// How long a graceful stop may wait for requests in flight.
    pub const DRAIN: Duration = Duration::from_secs(sale_common::shutdown::DEFAULT_DRAIN_SECS);

    /// The nginx master's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// Why one start of nginx did not give a listening CDN.
enum Launch {
    /// The port was taken before nginx bound it: try another.
    PortTaken,
    /// Anything else, with its cause.
    Failed(anyhow::Error),
}

impl Launch {
    fn into_error(self) -> anyhow::Error {
        match self {
            Self::PortTaken => anyhow::anyhow!("the port was taken before nginx bound it"),
            Self::Failed(e) => e,
        }
    }
}

impl Drop for Cdn {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flake CI saw: a port another server took between `free_port` and nginx's bind
    /// answered the test's requests. A connection alone must not count as this nginx listening.
    #[test]
    fn a_port_another_server_holds_is_not_taken_for_the_cdn() {
        let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = other.local_addr().expect("addr").port();
        match Cdn::launch_on("cdn-start", &[], port, &["127.0.0.1:1"]) {
            Err(Launch::PortTaken) => {}
            Err(Launch::Failed(e)) => panic!("not seen as a taken port: {e}"),
            Ok(cdn) => panic!("another server's port was taken for the CDN: {}", cdn.url),
        }
        // With port 0 a start finds a port of its own.
        let cdn = Cdn::start(0, "127.0.0.1:1").expect("nginx starts");
        assert_ne!(cdn.url, format!("http://127.0.0.1:{port}"));
    }
}
