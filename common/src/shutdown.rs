//! Stopping is normal (DESIGN "Scale and operations", case W13): every binary stops on SIGTERM
//! (what systemd and orchestrators send) as on SIGINT, and every server drains within a bound.
//!
//! [`signal`] resolves on the first SIGTERM or SIGINT. [`serve_draining`] runs an axum server
//! until its shutdown future resolves, then stops in two steps:
//!
//! 1. **Lame duck** ([`DEFAULT_LAME_DUCK_MS`]): the node still accepts and answers everything,
//!    but `GET /readyz` answers `503 stopping` (a balancer's readiness check takes the node out)
//!    and every HTTP/1 response carries `Connection: close`, so each keep-alive client learns
//!    from an answer, not from a closed socket, that its connection ends. Without it, hyper's
//!    graceful shutdown closes idle keep-alive connections at once, and a request a client wrote
//!    on one just before (HTTP/1.1 leaves that race to clients, RFC 9112 §9.3.1) was dropped:
//!    the newcomer review saw 8 to 10 of about 4,000 requests of a 16-client hammer unanswered.
//! 2. **Drain**: it stops accepting (first taking every connection the kernel has already
//!    queued on the listening socket: closing a socket with a backlog resets those, and their
//!    clients had sent their requests; the newcomer review saw 1 to 11 of about 4,000
//!    new-connection requests reset when they reached the node within a few milliseconds of
//!    the lame duck's end, [`Draining`]), lets requests in flight finish (hyper answers them with
//!    `Connection: close` and closes idle keep-alive connections), and gives up on whatever is
//!    still open after the drain deadline: a client that sent half a request head cannot keep a
//!    stopping process alive (axum's `with_graceful_shutdown` alone waits forever).

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode, Version};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;

/// Default drain deadline, **seconds** (issue 11: 10 s): longer than any request the services
/// answer (store calls are bounded at 2 s, gateway calls at 5 s), far below systemd's 90 s stop
/// timeout.
pub const DEFAULT_DRAIN_SECS: u64 = 10;

/// Default lame-duck time, **milliseconds**: how long a stopping node keeps answering (with
/// `Connection: close`, `/readyz` 503) before it stops accepting. One second covers every
/// keep-alive client that sends at least once a second and a balancer that checks readiness
/// at least once a second; behind a slower balancer (Kubernetes endpoints, a cloud LB's
/// health check interval) set it above that interval.
pub const DEFAULT_LAME_DUCK_MS: u64 = 1_000;

/// `Retry-After` of the lame duck's `/readyz` 503, **seconds**.
const STOPPING_RETRY_AFTER_SECS: u64 = 1;

/// Resolves on the first SIGTERM or SIGINT (Ctrl-C). On non-Unix targets, Ctrl-C only.
///
/// Both handlers are installed when `signal()` is **called**, not when the future is first
/// polled: the caller calls it before serving, so a signal that arrives once the server answers
/// is always caught. (Installed at the first poll, inside the task axum spawns for the shutdown
/// future, a SIGINT sent right after the first `/healthz` answer could still find the default
/// disposition and kill the process: case W13's half-sent-request test saw it once on a busy
/// machine, exit by signal instead of 0.) Must be called within a tokio runtime.
#[cfg(unix)]
pub fn signal() -> impl Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM: draining"),
                    _ = int.recv() => tracing::info!("SIGINT: draining"),
                }
            }
            (term, int) => {
                let e = term.err().or(int.err());
                tracing::warn!(error = ?e, "cannot listen for SIGTERM or SIGINT; Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
}

/// Resolves on Ctrl-C (non-Unix targets).
#[cfg(not(unix))]
pub fn signal() -> impl Future<Output = ()> + Send + 'static {
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Serves `app` on `listener` (with the peer address as `ConnectInfo<SocketAddr>`) until
/// `shutdown` resolves; then answers as a lame duck for `lame_duck` (see the module docs:
/// `Connection: close` on every HTTP/1 answer, `GET /readyz` 503 `stopping`, still accepting),
/// then stops accepting and drains for at most `drain`: requests in flight are answered, idle
/// connections closed; connections still open at the deadline are abandoned (the caller then
/// returns and the process exits). Returns once drained or at the deadline, so a stop takes at
/// most `lame_duck + drain`.
///
/// Errors: only an error of the listener itself.
pub async fn serve_draining(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    lame_duck: Duration,
    drain: Duration,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let stopping = Arc::new(AtomicBool::new(false));
    let app = app.layer(axum::middleware::from_fn_with_state(
        stopping.clone(),
        lame_duck_answers,
    ));
    let (listener, closing, closed) = Draining::new(listener)?;
    // `tap_io` only so that `ConnectInfo<SocketAddr>` comes with a listener of our own.
    let server = axum::serve(
        listener.tap_io(|_| {}),
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        let _ = closed.await;
        tokio::time::sleep(FIRST_BYTES_GRACE).await;
    })
    .into_future();
    let stop = async move {
        shutdown.await;
        stopping.store(true, Ordering::SeqCst);
        if !lame_duck.is_zero() {
            tracing::info!(
                lame_duck_ms = lame_duck.as_millis() as u64,
                "lame duck: answering with Connection: close, /readyz 503"
            );
            tokio::time::sleep(lame_duck).await;
        }
        let _ = closing.send(true);
    };
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return result,
        () = stop => {}
    }
    match tokio::time::timeout(drain, &mut server).await {
        Ok(result) => result,
        Err(_) => {
            metrics::counter!("drain_deadline_reached_total").increment(1);
            tracing::warn!(
                drain_ms = drain.as_millis() as u64,
                "connections still open at the drain deadline; closing them"
            );
            Ok(())
        }
    }
}

/// Between closing the listener and the graceful shutdown, **milliseconds**: the connections
/// accepted last read their first bytes. hyper-util's HTTP/1-or-2 connection
/// (`server::conn::auto`, which axum serves with) cancels a connection still reading its first
/// bytes (`ReadVersion`) when told to shut down gracefully, so a request whose connection was
/// accepted a moment before the shutdown was dropped unanswered (`RemoteDisconnected`); the
/// newcomer review's hammer, re-run with the queue emptied, still lost 3 to 5 that way. 100 ms
/// was not always enough on a loaded machine: `.ci/run` beside a newcomer's build lost 1 of
/// 4,404 (`stop::sigterm_under_a_new_connection_hammer_answers_every_request_sent`), a client
/// whose first bytes came later than that after its connect; 250 ms adds 0.15 s to a stop.
pub const FIRST_BYTES_GRACE: Duration = Duration::from_millis(250);

/// The listening socket of [`serve_draining`]: accepts like a `TcpListener` until `closing`
/// turns true; then hands over, one `accept` at a time, the connections the kernel has
/// already queued (their handshakes completed, their requests perhaps sent: closing the socket
/// would reset them), closes the socket once none is left, and then resolves `closed` (the
/// server's graceful shutdown). A connection that arrives after that is refused, which a
/// client can tell from a reset of a request it sent.
pub struct Draining {
    state: Accepting,
    addr: SocketAddr,
    closing: tokio::sync::watch::Receiver<bool>,
    /// Whether `closing`'s sender is still there to turn it.
    watching: bool,
    closed: Option<tokio::sync::oneshot::Sender<()>>,
}

enum Accepting {
    Open(tokio::net::TcpListener),
    /// Closing: the socket as a non-blocking std listener, read until `WouldBlock`.
    Emptying(std::net::TcpListener),
    Closed,
}

impl Draining {
    /// The listener, the switch that starts closing it (send `true`) and what resolves once
    /// it is closed.
    ///
    /// # Errors
    /// The socket's address cannot be read.
    pub fn new(
        listener: tokio::net::TcpListener,
    ) -> std::io::Result<(
        Self,
        tokio::sync::watch::Sender<bool>,
        tokio::sync::oneshot::Receiver<()>,
    )> {
        let (closing_tx, closing) = tokio::sync::watch::channel(false);
        let (closed_tx, closed) = tokio::sync::oneshot::channel();
        let addr = listener.local_addr()?;
        let me = Self {
            state: Accepting::Open(listener),
            addr,
            closing,
            watching: true,
            closed: Some(closed_tx),
        };
        Ok((me, closing_tx, closed))
    }

    /// The next connection; pending for ever once the socket is closed.
    async fn next(&mut self) -> (tokio::net::TcpStream, SocketAddr) {
        loop {
            match &mut self.state {
                Accepting::Open(l) if !*self.closing.borrow() => {
                    tokio::select! {
                        r = l.accept() => match r {
                            Ok(conn) => return conn,
                            Err(e) => accept_error(e).await,
                        },
                        // Turned (looked at again above), or its sender gone: then
                        // accept on, unwatched.
                        changed = self.closing.changed(), if self.watching => {
                            self.watching = changed.is_ok();
                        }
                    }
                }
                Accepting::Open(_) => {
                    let Accepting::Open(l) = std::mem::replace(&mut self.state, Accepting::Closed)
                    else {
                        unreachable!("matched Open")
                    };
                    match l.into_std() {
                        Ok(std) => self.state = Accepting::Emptying(std),
                        Err(e) => tracing::warn!(error = %e, "listener: cannot empty its queue"),
                    }
                }
                Accepting::Emptying(l) => match l.accept() {
                    Ok((stream, peer)) => {
                        let conn = stream
                            .set_nonblocking(true)
                            .and_then(|()| tokio::net::TcpStream::from_std(stream));
                        match conn {
                            Ok(conn) => return (conn, peer),
                            Err(e) => tracing::debug!(error = %e, "queued connection lost"),
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        self.state = Accepting::Closed;
                    }
                    Err(e) => accept_error(e).await,
                },
                Accepting::Closed => {
                    if let Some(closed) = self.closed.take() {
                        let _ = closed.send(());
                    }
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

/// As axum's own listener: a failed connection is skipped, anything else (out of file
/// descriptors) logged and waited out for a second.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept error");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

impl axum::serve::Listener for Draining {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    fn accept(&mut self) -> impl Future<Output = (Self::Io, Self::Addr)> + Send {
        self.next()
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}

/// The lame duck's middleware: nothing until the node is stopping; then `GET /readyz` is
/// `503 stopping` (with `Retry-After`) and every other answer gets `Connection: close` on
/// HTTP/1.0 and 1.1 (HTTP/2 has no such header: its connections end with GOAWAY, which hyper
/// sends itself at the drain).
async fn lame_duck_answers(
    State(stopping): State<Arc<AtomicBool>>,
    req: Request,
    next: Next,
) -> Response {
    if !stopping.load(Ordering::SeqCst) {
        return next.run(req).await;
    }
    let http1 = matches!(req.version(), Version::HTTP_10 | Version::HTTP_11);
    let mut res = if req.method() == Method::GET && req.uri().path() == "/readyz" {
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, "stopping", "Stopping")
            .detail("this node is stopping; send new requests to another")
            .retry_after(STOPPING_RETRY_AFTER_SECS)
            .into_response()
    } else {
        next.run(req).await
    };
    if http1 {
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;

    /// Connections the kernel has queued when the listener starts closing (handshakes done,
    /// requests sent, not yet accepted) are handed over in order, not reset with the socket;
    /// once none is left the socket closes, `closed` resolves and a new client is refused.
    /// (Fails without: dropping the listener reset the three clients.)
    #[tokio::test]
    async fn connections_queued_when_the_listener_closes_are_handed_over_not_reset() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (mut draining, closing, mut closed) = Draining::new(l).unwrap();
        let mut clients = Vec::new();
        for i in 0..3 {
            let mut c = std::net::TcpStream::connect(addr).expect("queued by the kernel");
            c.write_all(format!("request {i}").as_bytes()).unwrap();
            clients.push(c);
        }
        closing.send(true).unwrap();
        for i in 0..3 {
            let (mut conn, _) = tokio::time::timeout(Duration::from_secs(5), draining.next())
                .await
                .expect("a queued connection");
            let mut got = [0u8; 9];
            conn.read_exact(&mut got).await.expect("its request");
            assert_eq!(got, *format!("request {i}").as_bytes());
        }
        assert!(
            closed.try_recv().is_err(),
            "not closed while connections queue"
        );
        let more = tokio::time::timeout(Duration::from_millis(200), draining.next()).await;
        assert!(more.is_err(), "no fourth connection");
        closed.try_recv().expect("closed once emptied");
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "a client after it is refused"
        );
    }
}
