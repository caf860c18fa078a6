//! The operator's broadcast message over real HTTP (issue 14 item 3), on the memory and the
//! Redis store: set by `PUT /admin/events/{event}/broadcast`, it is in the very next poll of the
//! public status document (a new `version` and `ETag`, so a CDN revalidating its copy gets the
//! new one, not a 304), cleared by `DELETE`, both in the audit trail; bad input is a specific
//! 422 problem and costs no store write.

use reqwest::{Client, Method, StatusCode};
use sale_common::{ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use waiting_room::broadcast::BROADCAST_MAX_CHARS;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const ADMIN: &str = "demo-admin-token";

struct Room {
    base: String,
    http: Client,
}

/// The waiting room on a real socket with event `demo`.
async fn room(store: Arc<dyn QueueStore>) -> Room {
    let shared: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let st = AppState::new(cfg, store, shared).await.expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(st).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Room {
        base: format!("http://{addr}"),
        http: Client::new(),
    }
}

impl Room {
    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(ADMIN)
            .header("x-operator", "ops-anna");
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let r = rb.send().await.expect("send");
        let status = r.status();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// One poll of the status document, revalidating `etag` like a CDN or the page's
    /// `cache: "no-cache"`: (status code, ETag, body).
    async fn poll(&self, etag: Option<&str>) -> (StatusCode, String, Value) {
        let mut rb = self.http.get(format!("{}/status/demo.json", self.base));
        if let Some(tag) = etag {
            rb = rb.header("if-none-match", tag);
        }
        let r = rb.send().await.expect("send");
        let status = r.status();
        let tag = r.headers()["etag"].to_str().expect("etag").to_owned();
        (status, tag, r.json().await.unwrap_or(Value::Null))
    }

    async fn audit_actions(&self) -> Vec<(String, Value, Value)> {
        let (status, b) = self
            .admin(Method::GET, "/admin/events/demo/audit", None)
            .await;
        assert_eq!(status, 200, "{b}");
        b.as_array()
            .expect("entries")
            .iter()
            .filter(|e| {
                e["action"]
                    .as_str()
                    .is_some_and(|a| a.contains("broadcast"))
            })
            .map(|e| {
                assert_eq!(e["operator"], "ops-anna");
                (
                    e["action"].as_str().unwrap_or("").to_owned(),
                    e["old"].clone(),
                    e["new"].clone(),
                )
            })
            .collect()
    }
}

async fn broadcast_reaches_fans_on(store: Arc<dyn QueueStore>) {
    let room = room(store).await;
    let (status, etag, doc) = room.poll(None).await;
    assert_eq!(
        (status, doc["broadcast"].clone()),
        (StatusCode::OK, Value::Null)
    );
    assert_eq!(room.poll(Some(&etag)).await.0, StatusCode::NOT_MODIFIED);

    let message = json!({"en": "Doors open at 19:00. <b>No</b> bags.", "fr": "Ouverture des portes à 19 h. Pas de sacs."});
    let (status, b) = room
        .admin(Method::PUT, "/admin/events/demo/broadcast", Some(message))
        .await;
    assert_eq!(status, 200, "{b}");

    // The very next poll, revalidating the copy it holds, gets the message: a new document.
    let (status, etag2, doc2) = room.poll(Some(&etag)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a revalidation must not keep the old copy"
    );
    assert_ne!(etag2, etag);
    assert!(doc2["version"].as_u64() > doc["version"].as_u64(), "{doc2}");
    assert_eq!(
        doc2["broadcast"]["en"],
        "Doors open at 19:00. <b>No</b> bags."
    );
    assert_eq!(
        doc2["broadcast"]["fr"],
        "Ouverture des portes à 19 h. Pas de sacs."
    );
    assert_eq!(doc2["broadcast"]["set_at"], T0);

    // Cleared: gone from the next poll.
    let (status, b) = room
        .admin(Method::DELETE, "/admin/events/demo/broadcast", None)
        .await;
    assert_eq!(
        (status, b["broadcast"].clone()),
        (StatusCode::OK, Value::Null),
        "{b}"
    );
    let (status, _, doc3) = room.poll(Some(&etag2)).await;
    assert_eq!(
        (status, doc3["broadcast"].clone()),
        (StatusCode::OK, Value::Null)
    );
    // Clearing again changes nothing and leaves no entry.
    let (status, _) = room
        .admin(Method::DELETE, "/admin/events/demo/broadcast", None)
        .await;
    assert_eq!(status, 200);

    let actions = room.audit_actions().await;
    let names: Vec<&str> = actions.iter().map(|a| a.0.as_str()).collect();
    assert_eq!(names, ["set_broadcast", "clear_broadcast"]);
    assert_eq!(
        (actions[0].1.clone(), actions[0].2["fr"].clone()),
        (Value::Null, doc2["broadcast"]["fr"].clone())
    );
    assert_eq!(
        (actions[1].1["en"].clone(), actions[1].2.clone()),
        (doc2["broadcast"]["en"].clone(), Value::Null)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_message_reaches_waiting_fans_within_one_poll() {
    broadcast_reaches_fans_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_message_reaches_waiting_fans_within_one_poll_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("connect to redis");
    broadcast_reaches_fans_on(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_bad_input_is_a_specific_problem() {
    let room = room(Arc::new(MemoryStore::new())).await;
    let path = "/admin/events/demo/broadcast";
    let cases = [
        (json!({}), 422, "/problems/broadcast-empty"),
        (
            json!({"en": "  ", "fr": ""}),
            422,
            "/problems/broadcast-empty",
        ),
        (
            json!({"en": "x".repeat(BROADCAST_MAX_CHARS + 1)}),
            422,
            "/problems/broadcast-too-long",
        ),
        (
            json!({"fr": "bip\u{7}"}),
            422,
            "/problems/broadcast-control-characters",
        ),
    ];
    for (body, code, kind) in cases {
        let (status, b) = room.admin(Method::PUT, path, Some(body.clone())).await;
        assert_eq!(
            (status.as_u16(), b["type"].as_str()),
            (code, Some(kind)),
            "{body}: {b}"
        );
    }
    // Another language, or not a string: the body is refused whole (422, problem+json).
    for body in [json!({"de": "Hallo"}), json!({"en": 5})] {
        let (status, b) = room.admin(Method::PUT, path, Some(body.clone())).await;
        assert_eq!(status, 422, "{body}: {b}");
        assert!(b["type"].as_str().is_some(), "{b}");
    }
    let (status, b) = room
        .admin(
            Method::PUT,
            "/admin/events/nope/broadcast",
            Some(json!({"en": "hi"})),
        )
        .await;
    assert_eq!(status, 404, "{b}");
    let r = room
        .http
        .put(format!("{}{path}", room.base))
        .json(&json!({"en": "hi"}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    assert!(
        room.audit_actions().await.is_empty(),
        "refused input leaves no entry"
    );
    assert_eq!(room.poll(None).await.2["broadcast"], Value::Null);
}
