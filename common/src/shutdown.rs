//! Stopping is normal (DESIGN "Scale and operations", case W13): every binary stops on SIGTERM
//! (what systemd and orchestrators send) as on SIGINT, and every server drains within a bound.
//!
//! [`signal`] resolves on the first SIGTERM or SIGINT. [`serve_draining`] runs an axum server
//! until its shutdown future resolves, then stops accepting, lets requests in flight finish
//! (hyper answers them with `Connection: close` and closes idle keep-alive connections), and gives
//! up on whatever is still open after the drain deadline: a client that sent half a request head
//! cannot keep a stopping process alive (axum's `with_graceful_shutdown` alone waits forever).

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::time::Duration;

/// Default drain deadline, **seconds** (issue 11: 10 s): longer than any request the services
/// answer (store calls are bounded at 2 s, gateway calls at 5 s), far below systemd's 90 s stop
/// timeout.
pub const DEFAULT_DRAIN_SECS: u64 = 10;

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
/// `shutdown` resolves, then drains for at most `drain`: requests in flight are answered,
/// idle connections closed; connections still open at the deadline are abandoned (the caller
/// then returns and the process exits). Returns once drained or at the deadline.
///
/// Errors: only an error of the listener itself.
pub async fn serve_draining(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain: Duration,
) -> std::io::Result<()> {
    let (stopping_tx, stopping_rx) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stopping_tx.send(());
    })
    .into_future();
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return result,
        _ = stopping_rx => {}
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
