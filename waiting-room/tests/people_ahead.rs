//! "People ahead" exact over real HTTP (issue 18 item 5; DECISIONS.md "People ahead"): a fan's
//! `GET …/position` answers `ahead` = number − cursor − 1 minus the places between whose fans
//! left the line (`POST …/leave`), on the memory and the Redis store. The page's old formula
//! (number − cursor − 1 from the same answer) stays one too high once a place ahead is
//! vacated; the admitter then skips the vacated place without an invitation.

use reqwest::Client;
use sale_common::{Clock, ManualClock, SharedClock};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use waiting_room::admitter::Admitter;
use waiting_room::domain::EventId;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;

struct Room {
    base: String,
    http: Client,
    clock: Arc<ManualClock>,
    admitter: Admitter,
}

/// The waiting room on a real socket, event `demo` open, admitting 2 places a second when
/// stepped by hand.
async fn room(store: Arc<dyn QueueStore>) -> Room {
    let clock = Arc::new(ManualClock::new(T0 * 1000));
    let shared: SharedClock = clock.clone();
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    cfg.events[0].admit_rate = 2.0;
    let st = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(st).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut admitter = Admitter::new(store, EventId::parse("demo").expect("id"), 100, 60);
    admitter.step(clock.now_ms()).await.expect("open");
    Room {
        base: format!("http://{addr}/api/events/demo"),
        http: Client::new(),
        clock,
        admitter,
    }
}

impl Room {
    async fn call(&self, method: reqwest::Method, tail: &str, token: Option<&str>) -> (u16, Value) {
        let mut rb = self.http.request(method, format!("{}/{tail}", self.base));
        if let Some(t) = token {
            rb = rb.bearer_auth(t);
        }
        let r = rb.send().await.expect("send");
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// A new fan: (join token, queue number).
    async fn join(&self) -> (String, u64) {
        let (status, b) = self.call(reqwest::Method::POST, "join", None).await;
        assert_eq!(status, 200, "{b}");
        let token = b["join_token"].as_str().expect("token").to_owned();
        (token, b["queue_number"].as_u64().expect("numbered"))
    }

    async fn position(&self, token: &str) -> Value {
        let (status, b) = self
            .call(reqwest::Method::GET, "position", Some(token))
            .await;
        assert_eq!(status, 200, "{b}");
        b
    }

    async fn leave(&self, token: Option<&str>) -> (u16, Value) {
        self.call(reqwest::Method::POST, "leave", token).await
    }
}

/// What the page computed before the server counted vacated places.
fn old_formula(p: &Value) -> u64 {
    let (n, cursor) = (p["queue_number"].as_u64(), p["cursor"].as_u64());
    n.expect("number")
        .saturating_sub(cursor.expect("cursor") + 1)
}

async fn people_ahead_excludes_vacated_places_on(store: Arc<dyn QueueStore>) {
    let mut room = room(store).await;
    let mut fans = Vec::new();
    for i in 1..=4 {
        let (token, n) = room.join().await;
        assert_eq!(n, i);
        fans.push(token);
    }
    let p = room.position(&fans[3]).await;
    assert_eq!((p["ahead"].as_u64(), old_formula(&p)), (Some(3), 3));

    // Fan 2 gives up: fan 4 has two people ahead at once; the old formula still says three.
    let (status, b) = room.leave(Some(&fans[1])).await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(
        (b["left"].as_str(), b["queue_number"].as_u64()),
        (Some("place"), Some(2))
    );
    let p = room.position(&fans[3]).await;
    assert_eq!(old_formula(&p), 3, "the formula counts the empty place");
    assert_eq!(
        p["ahead"].as_u64(),
        Some(2),
        "the empty place is not a person: {p}"
    );
    let p = room.position(&fans[1]).await;
    assert_eq!(
        (p["queue_number"].clone(), p["ahead"].clone()),
        (Value::Null, Value::Null)
    );

    // Leaving twice, or without a token, is a specific 4xx problem.
    let (status, b) = room.leave(Some(&fans[1])).await;
    assert_eq!(
        (status, b["type"].as_str()),
        (409, Some("/problems/not-waiting"))
    );
    assert_eq!(room.leave(None).await.0, 401);

    // The admitter invites fans 1 and 3 and skips the vacated place 2 (a bounded number of
    // one-second steps at 2 places/s: the first step after opening starts the rate).
    let mut p = room.position(&fans[3]).await;
    for _ in 0..10 {
        if p["cursor"].as_u64() >= Some(3) {
            break;
        }
        room.clock.advance_ms(1000);
        room.admitter.step(room.clock.now_ms()).await.expect("step");
        p = room.position(&fans[3]).await;
    }
    assert_eq!(
        (p["cursor"].as_u64(), p["ahead"].as_u64()),
        (Some(3), Some(0)),
        "{p}"
    );
    let (status, b) = room.leave(Some(&fans[2])).await;
    assert_eq!(
        (status, b["type"].as_str()),
        (409, Some("/problems/not-waiting"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_ahead_excludes_vacated_places() {
    people_ahead_excludes_vacated_places_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_ahead_excludes_vacated_places_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("connect to redis");
    people_ahead_excludes_vacated_places_on(Arc::new(store)).await;
}
