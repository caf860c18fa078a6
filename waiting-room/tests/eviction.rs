//! Case W14: Redis is the queue, not a cache (DESIGN "Scale and operations"). A Redis that may
//! evict refuses to start the waiting room with a message naming the setting; a policy changed
//! at run time turns `/readyz` to 503; at the memory cap (`noeviction`) only new places are
//! refused (503 + Retry-After, `wr_store_full_total`), while positions, heartbeats, claims,
//! figures and the admitter keep working.

use reqwest::{Client, StatusCode};
use sale_common::testsupport::RedisServer;
use serde_json::Value;
use std::time::{Duration, Instant};
use waiting_room::config::StoreConfig;
use waiting_room::store::redis::RedisStore;
use waiting_room::Config;

async fn redis_cmd(url: &str, args: &[&str]) -> String {
    let client = redis::Client::open(url).expect("client");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let v: redis::Value = cmd.query_async(&mut c).await.expect("redis command");
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn case_w14_an_evicting_redis_is_refused_at_start() {
    for policy in ["allkeys-lru", "volatile-ttl", "allkeys-random"] {
        let redis =
            RedisServer::start_with_args(&["--maxmemory", "64mb", "--maxmemory-policy", policy]);
        let e = RedisStore::connect(&redis.url(), Duration::from_secs(2))
            .await
            .expect_err("an evicting Redis must be refused");
        let msg = e.to_string();
        assert!(
            msg.contains("maxmemory-policy") && msg.contains(policy) && msg.contains("noeviction"),
            "the message names the setting: {msg}"
        );
    }
    let ok = RedisServer::start_with_args(&["--maxmemory-policy", "noeviction"]);
    RedisStore::connect(&ok.url(), Duration::from_secs(2))
        .await
        .expect("noeviction is accepted");
}

async fn send(c: &Client, method: &str, url: &str, token: Option<&str>) -> (StatusCode, Value) {
    let mut req = c.request(method.parse().expect("method"), url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.expect("the server answers");
    let status = r.status();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        assert!(
            r.headers().get("retry-after").is_some(),
            "503 carries Retry-After"
        );
    }
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_w14_at_the_memory_cap_only_new_places_are_refused() {
    let redis = RedisServer::start_with_args(&["--maxmemory-policy", "noeviction"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs() as i64;
    let mut cfg = Config::demo("demo", now - 1, "http://127.0.0.1:8081");
    cfg.store = StoreConfig::Redis { url: redis.url() };
    cfg.events[0].admit_rate = 1000.0;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(waiting_room::serve(listener, cfg, async {
        let _ = stopped.await;
    }));
    let c = Client::new();
    let join = format!("{base}/api/events/demo/join");
    // Join only once the event is open: fans pre-queued while the test waited would be invited
    // by the admitter after the memory is measured below, and their invitations and silence
    // clocks could fill the headroom before the first join is tried.
    let start = Instant::now();
    loop {
        let f: Value = c
            .get(format!("{base}/admin/events/demo"))
            .bearer_auth("demo-admin-token")
            .send()
            .await
            .expect("figures")
            .json()
            .await
            .unwrap_or(Value::Null);
        if f["internal_state"] == "open" {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "the event opens");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, j) = send(&c, "POST", &join, None).await;
    assert_eq!(s, StatusCode::OK, "{j}");
    assert!(j["queue_number"].as_u64().is_some(), "numbered: {j}");
    let first = j["join_token"].as_str().expect("token").to_owned();
    // The cap: just above what Redis uses now, so a few hundred more joins fill it.
    let info = redis_cmd(&redis.url(), &["INFO", "memory"]).await;
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    let cap = (used + 64 * 1024).to_string();
    redis_cmd(&redis.url(), &["CONFIG", "SET", "maxmemory", &cap]).await;
    let mut joined = 0;
    let refused = loop {
        let (s, body) = send(&c, "POST", &join, None).await;
        match s {
            StatusCode::OK => joined += 1,
            StatusCode::SERVICE_UNAVAILABLE => break body,
            other => panic!("join answered {other}: {body}"),
        }
        assert!(joined < 100_000, "the cap was never reached");
    };
    assert!(joined > 0, "joins worked below the cap");
    assert_eq!(refused["status"], 503, "{refused}");
    // Reads and in-place updates keep working at the cap.
    let pos = format!("{base}/api/events/demo/position");
    let (s, p) = send(&c, "GET", &pos, Some(&first)).await;
    assert_eq!(s, StatusCode::OK, "position at the cap: {p}");
    let (s, h) = send(
        &c,
        "POST",
        &format!("{base}/api/events/demo/heartbeat"),
        Some(&first),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "heartbeat at the cap: {h}");
    let (s, a) = send(
        &c,
        "POST",
        &format!("{base}/api/events/demo/admission"),
        Some(&first),
    )
    .await;
    assert!(
        s == StatusCode::OK || s == StatusCode::CONFLICT,
        "claim at the cap: {s} {a}"
    );
    let figures = c
        .get(format!("{base}/admin/events/demo"))
        .bearer_auth("demo-admin-token")
        .send()
        .await
        .expect("figures");
    assert_eq!(figures.status(), StatusCode::OK, "figures at the cap");
    let metrics = c
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("wr_store_full_total"), "an alert says why");
    let ready = c
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::OK);

    // An operator switches the policy at run time: not ready any more, and it says why.
    redis_cmd(
        &redis.url(),
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    )
    .await;
    let ready = c
        .get(format!("{base}/readyz"))
        .send()
        .await
        .expect("readyz");
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    let metrics = c
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("wr_store_eviction_policy_ok 0"),
        "the metric shows the policy"
    );
    let _ = stop.send(());
    server.await.expect("task").expect("serve");
}
