//! The connection of the Redis backend: one server through `ConnectionManager` (it reconnects,
//! DEPENDENCIES.md) or a Redis Cluster through the `redis` crate's `ClusterConnection` (it follows
//! `MOVED`/`ASK`, refreshes the slot map and reconnects to nodes). `Conn` implements
//! `ConnectionLike`, so every command, pipeline and script runs on either. Both carry response
//! and connection timeouts: past them a call fails and the request gets 503. The single server's
//! calls pass through a circuit breaker (`breaker.rs`): once it stops answering, calls fail at
//! once instead of each waiting out the timeout.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::breaker::{unanswered, Admit, Breaker};

/// One server or a cluster; cheap to clone (both are handles over shared connections).
#[derive(Clone)]
pub(super) enum Conn {
    /// One server, its breaker and the command timeout.
    Single(ConnectionManager, Arc<Breaker>, Duration),
    Cluster(ClusterConnection),
}

/// One call the breaker let through; dropped unfinished (the request's own store bound ran out
/// first, or its client left), it still tells the breaker: a probe as failed, a normal call as
/// failed once it had waited at least half the timeout (the server was not answering).
struct Attempt {
    breaker: Arc<Breaker>,
    admitted: Admit,
    started: Instant,
    timeout: Duration,
    done: bool,
}

impl Attempt {
    fn finish<T>(mut self, r: &redis::RedisResult<T>) {
        self.done = true;
        let failed = r.as_ref().is_err_and(unanswered);
        self.breaker.record(self.admitted, failed, Instant::now());
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.done {
            let waited = self.started.elapsed() >= self.timeout / 2;
            if self.admitted == Admit::Probe || waited {
                self.breaker.record(self.admitted, true, Instant::now());
            }
        }
    }
}

/// The error of a call the open breaker refused (an I/O error: the store answers 503).
fn refused() -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::IoError,
        "queue store not answering",
        "circuit breaker open: retrying in the background".to_owned(),
    ))
}

/// Runs `call` on `manager` through `breaker`.
fn guarded<'a, T: Send + 'a>(
    breaker: &Arc<Breaker>,
    timeout: Duration,
    call: RedisFuture<'a, T>,
) -> RedisFuture<'a, T> {
    let now = Instant::now();
    let admitted = breaker.admit(now);
    if admitted == Admit::Refused {
        return Box::pin(async { Err(refused()) });
    }
    let attempt = Attempt {
        breaker: breaker.clone(),
        admitted,
        started: now,
        timeout,
        done: false,
    };
    Box::pin(async move {
        let r = call.await;
        attempt.finish(&r);
        r
    })
}

impl Conn {
    /// One server at `url`. After a drop the manager reconnects in the background (attempts
    /// ≤ 500 ms apart) while requests fail fast.
    pub(super) async fn single(url: &str, timeout: Duration) -> redis::RedisResult<Self> {
        let client = redis::Client::open(url)?;
        let cfg = ConnectionManagerConfig::new()
            .set_response_timeout(timeout)
            .set_connection_timeout(timeout)
            .set_number_of_retries(2)
            // redis-rs hands `factor` to backon as a multiplier on a 1 s minimum: the default
            // (100) makes the second reconnect attempt wait a minute. Reconnect every ≤ 500 ms
            // instead, so service resumes promptly when Redis comes back.
            .set_factor(2)
            .set_max_delay(500);
        Ok(Self::Single(
            ConnectionManager::new_with_config(client, cfg).await?,
            Arc::new(Breaker::default()),
            timeout,
        ))
    }

    /// A Redis Cluster reached through any of `urls` (the client discovers the other nodes).
    /// Redirects (`MOVED`, `ASK`, `TRYAGAIN`) and topology changes are retried inside the
    /// client, a few times with short waits (a failover's election takes ~1–2 node timeouts;
    /// calls that outlast the retries fail and the request gets 503).
    pub(super) async fn cluster(urls: &[String], timeout: Duration) -> redis::RedisResult<Self> {
        let client = ClusterClientBuilder::new(urls.to_vec())
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(5)
            .min_retry_wait(50)
            .max_retry_wait(500)
            .build()?;
        Ok(Self::Cluster(client.get_async_connection().await?))
    }

    /// `INFO <section>` from every master (one server: from it), as (node, text) pairs.
    pub(super) async fn info_of_masters(
        &mut self,
        section: &str,
    ) -> redis::RedisResult<Vec<(String, String)>> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg(section);
        match self {
            Conn::Single(..) => Ok(vec![(String::new(), cmd.query_async(self).await?)]),
            Conn::Cluster(c) => {
                let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                let v = c.route_command(&cmd, all).await?;
                let by_node: std::collections::HashMap<String, String> =
                    redis::from_redis_value(&v)?;
                Ok(by_node.into_iter().collect())
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c, b, t) => guarded(b, *t, c.req_packed_command(cmd)),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c, b, t) => guarded(b, *t, c.req_packed_commands(cmd, offset, count)),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c, ..) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
