//! Store outage against a real Redis (DESIGN.md "When the store fails"): Redis is killed for
//! ~5 s mid-sale. Every join, claim, position and heartbeat answers 503 with `Retry-After`
//! within a bounded time (measured per request: a bound, not a sleep), the status document and
//! JWKS keep answering from memory, admitted fans' tokens verify offline, and once Redis is back
//! (append-only file, same port) the same app serves again: nobody lost a place or got a second
//! admission.

use jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
use reqwest::{Client, StatusCode};
use sale_common::testsupport::RedisServer;
use serde_json::Value;
use std::time::{Duration, Instant};
use waiting_room::config::StoreConfig;
use waiting_room::tokens::AdmissionClaims;
use waiting_room::Config;

/// The most any answer may take during the outage.
const BOUND: Duration = Duration::from_secs(3);

struct Fan {
    token: String,
    number: u64,
}

async fn send(
    c: &Client,
    method: &str,
    url: &str,
    token: Option<&str>,
) -> (StatusCode, Value, Option<String>, Duration) {
    let start = Instant::now();
    let mut req = c.request(method.parse().expect("method"), url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("the server answers");
    let retry = r
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let status = r.status();
    let body = r.json().await.unwrap_or(Value::Null);
    (status, body, retry, start.elapsed())
}

/// Polls `f` until it returns `Some`, at most `limit` (the admitter runs on real time here).
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    mut f: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A waiting room serving the demo event (opening a second ago) from `redis_url`, each store
/// call bounded by `store_timeout_ms`; `tweak` sets anything else.
struct Node {
    base: String,
    c: Client,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Node {
    async fn start(
        redis_url: String,
        store_timeout_ms: u64,
        tweak: impl FnOnce(&mut Config),
    ) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("time")
            .as_secs() as i64;
        let mut cfg = Config::demo("demo", now - 1, "http://127.0.0.1:8081");
        cfg.store = StoreConfig::Redis { url: redis_url };
        cfg.store_timeout_ms = store_timeout_ms;
        tweak(&mut cfg);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(waiting_room::serve(listener, cfg, async {
            let _ = stopped.await;
        }));
        let c = Client::builder()
            .timeout(Duration::from_secs(20))
            .build()
            .expect("client");
        Self {
            base,
            c,
            stop,
            server,
        }
    }

    /// The node's `/metrics` text.
    async fn metrics(&self) -> String {
        let r = self.c.get(format!("{}/metrics", self.base)).send().await;
        r.expect("metrics").text().await.expect("text")
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.server.await.expect("task").expect("serve returns");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_outage_answers_503_and_recovers() {
    let mut redis = RedisServer::start_persistent();
    let node = Node::start(redis.url(), 500, |cfg| cfg.events[0].admit_rate = 2.0).await;
    let (base, c) = (&node.base, &node.c);
    let (join, claim) = (
        format!("{base}/api/events/demo/join"),
        format!("{base}/api/events/demo/admission"),
    );
    let status = format!("{base}/status/demo.json");
    eventually(Duration::from_secs(10), || async {
        let (_, doc, _, _) = send(c, "GET", &status, None).await;
        (doc["state"] == "open").then_some(())
    })
    .await;
    let mut fans = Vec::new();
    for _ in 0..10 {
        let (s, j, _, _) = send(c, "POST", &join, None).await;
        assert_eq!(s, StatusCode::OK, "{j}");
        let number = j["queue_number"].as_u64().expect("open: numbered");
        fans.push(Fan {
            token: j["join_token"].as_str().expect("token").to_owned(),
            number,
        });
    }
    let admission = eventually(Duration::from_secs(10), || async {
        let (s, a, _, _) = send(c, "POST", &claim, Some(&fans[0].token)).await;
        (s == StatusCode::OK).then_some(a)
    })
    .await;
    let token = admission["admission_token"]
        .as_str()
        .expect("token")
        .to_owned();

    redis.stop();
    let outage = Instant::now();
    let mut answered = 0;
    while outage.elapsed() < Duration::from_secs(5) {
        for (method, url, t) in [
            ("POST", join.clone(), None),
            ("POST", claim.clone(), Some(fans[1].token.as_str())),
            (
                "GET",
                format!("{base}/api/events/demo/position"),
                Some(fans[2].token.as_str()),
            ),
            (
                "POST",
                format!("{base}/api/events/demo/heartbeat"),
                Some(fans[3].token.as_str()),
            ),
        ] {
            let (s, body, retry, took) = send(c, method, &url, t).await;
            assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{method} {url}: {body}");
            assert!(retry.is_some(), "503 carries Retry-After");
            assert!(took < BOUND, "{method} {url} took {took:?}");
            answered += 1;
        }
    }
    assert!(answered >= 4);
    let (s, doc, _, took) = send(c, "GET", &format!("{base}/status/demo.json"), None).await;
    assert_eq!(
        (s, doc["event"].as_str()),
        (StatusCode::OK, Some("demo")),
        "served from memory"
    );
    assert!(took < BOUND);
    let (s, jwks, _, _) = send(c, "GET", &format!("{base}/.well-known/jwks.json"), None).await;
    assert_eq!(s, StatusCode::OK);
    let x = jwks["keys"][0]["x"].as_str().expect("x");
    let key = DecodingKey::from_ed_components(x).expect("key");
    let mut v = Validation::new(Algorithm::EdDSA);
    v.set_audience(&["booking-core"]);
    v.set_issuer(&["waiting-room"]);
    v.leeway = 5;
    let claims = decode::<AdmissionClaims>(&token, &key, &v)
        .expect("verifies offline")
        .claims;
    assert_eq!(claims.event, "demo");

    redis.restart();
    let rejoined = eventually(Duration::from_secs(15), || async {
        let (s, j, _, _) = send(c, "POST", &join, None).await;
        (s == StatusCode::OK).then_some(j)
    })
    .await;
    assert!(rejoined["queue_number"].as_u64().expect("n") > fans.last().expect("fan").number);
    let (s, again, _, _) = send(c, "POST", &claim, Some(&fans[0].token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        again["admission_token"].as_str(),
        Some(token.as_str()),
        "no second admission"
    );
    for f in &fans[1..] {
        let (s, p, _, _) = send(
            c,
            "GET",
            &format!("{base}/api/events/demo/position"),
            Some(&f.token),
        )
        .await;
        assert_eq!(
            (s, p["queue_number"].as_u64()),
            (StatusCode::OK, Some(f.number)),
            "place kept"
        );
    }
    let text = node.metrics().await;
    assert!(
        text.contains("wr_store_errors_total{op=\"request\"}"),
        "{text}"
    );
    assert!(text.contains("wr_unavailable_total{route=\"/api/events/{event}/join\"}"));
    node.stop().await;
}

fn signal(sig: &str, pid: u32) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// A hung Redis (SIGSTOP: connections stay open, nothing answers) with a long store bound
/// (3 s): the first calls wait out the bound, then the circuit breaker answers 503 with
/// `Retry-After` at once (well under the bound, counted in `wr_store_breaker_refused_total`)
/// while one probe at a time waits on the server; once Redis answers again (SIGCONT) a probe
/// closes the breaker and the fan's place is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_redis_gets_503_at_once_from_the_breaker_and_serves_again() {
    let redis = RedisServer::start();
    let timeout = Duration::from_secs(3);
    let node = Node::start(redis.url(), timeout.as_millis() as u64, |_| {}).await;
    let (base, c) = (&node.base, &node.c);
    let position = format!("{base}/api/events/demo/position");
    // Numbered once the admitter has opened the sale (a join before that is pre-queued).
    let joined = eventually(Duration::from_secs(10), || async {
        let (s, j, _, _) = send(c, "POST", &format!("{base}/api/events/demo/join"), None).await;
        (s == StatusCode::OK && j["queue_number"].is_u64()).then_some(j)
    })
    .await;
    let token = joined["join_token"].as_str().expect("token").to_owned();
    let number = joined["queue_number"].as_u64().expect("numbered");

    signal("-STOP", redis.pid());
    // Fans polling while the server hangs: these wait out the bound.
    let first: Vec<_> = (0..4)
        .map(|_| {
            let (c, url, t) = (c.clone(), position.clone(), token.clone());
            tokio::spawn(async move { send(&c, "GET", &url, Some(&t)).await })
        })
        .collect();
    for f in first {
        let (s, body, retry, _) = f.await.expect("task");
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(retry.is_some());
    }
    // The breaker is open: the next ones are answered without waiting on the server.
    for _ in 0..5 {
        let (s, body, retry, took) = send(c, "GET", &position, Some(&token)).await;
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(retry.is_some(), "503 carries Retry-After");
        assert_eq!(body["status"], 503, "problem+json: {body}");
        assert!(
            took < timeout / 3,
            "answered in {took:?}: it must not wait out the {timeout:?} bound"
        );
    }
    let text = node.metrics().await;
    let refused = text
        .lines()
        .find(|l| l.starts_with("wr_store_breaker_refused_total"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
    assert!(refused.is_some_and(|n| n >= 5.0), "{text}");

    signal("-CONT", redis.pid());
    let back = eventually(Duration::from_secs(15), || async {
        let (s, p, _, _) = send(c, "GET", &position, Some(&token)).await;
        (s == StatusCode::OK).then_some(p)
    })
    .await;
    assert_eq!(back["queue_number"].as_u64(), Some(number), "place kept");
    node.stop().await;
}

/// Redis restarted without its data (no append-only file): the event's line is gone. Before,
/// every node stayed ready and its fans got 404 "no such event" with nothing said; now
/// `/readyz` answers 503 naming the event and saying its line is lost (so a balancer takes the
/// node out and an operator restores Redis), and `wr_store_events_missing` counts it; the
/// fans get 503 with `Retry-After` (come back), not 404 (the sale does not exist).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_empty_turns_readyz_503_naming_the_lost_line() {
    let mut redis = RedisServer::start();
    let node = Node::start(redis.url(), 1000, |_| {}).await;
    let (base, c) = (&node.base, &node.c);
    let ready = format!("{base}/readyz");
    eventually(Duration::from_secs(10), || async {
        let (s, _, _, _) = send(c, "POST", &format!("{base}/api/events/demo/join"), None).await;
        (s == StatusCode::OK).then_some(())
    })
    .await;
    let (s, body, _, _) = send(c, "GET", &ready, None).await;
    assert_eq!(s, StatusCode::OK, "{body}");

    redis.restart();
    let detail = eventually(Duration::from_secs(15), || async {
        let (s, body, retry, _) = send(c, "GET", &ready, None).await;
        let detail = body["detail"].as_str().unwrap_or_default().to_owned();
        (s == StatusCode::SERVICE_UNAVAILABLE && retry.is_some() && detail.contains("lost"))
            .then_some(detail)
    })
    .await;
    assert!(detail.contains("demo"), "{detail}");
    // A fan is not told the sale does not exist: 503 with Retry-After, not 404.
    let (s, body, retry, _) = send(c, "POST", &format!("{base}/api/events/demo/join"), None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(retry.is_some(), "{body}");
    let (s, body, _, _) = send(c, "GET", &format!("{base}/api/events/nope/about"), None).await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "an event never seen is still 404: {body}"
    );
    let text = node.metrics().await;
    assert!(
        text.lines().any(|l| l == "wr_store_events_missing 1"),
        "{text}"
    );
    node.stop().await;
}
