//! The operator's tools of issue 14 over real HTTP, on the memory and the Redis store: queue
//! modes (item 2: `always_on`, `pass_through`, `maintenance`, switched by `PUT …/mode`,
//! audited) and the broadcast message (item 3): set by `PUT /admin/events/{event}/broadcast`, it is in the very next poll of the
//! public status document (a new `version` and `ETag`, so a CDN revalidating its copy gets the
//! new one, not a 304), cleared by `DELETE`, both in the audit trail; bad input is a specific
//! 422 problem and costs no store write.

use reqwest::{Client, Method, StatusCode};
use sale_common::Clock;
use sale_common::{ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use waiting_room::admitter::{Admitter, Outcome};
use waiting_room::broadcast::BROADCAST_MAX_CHARS;
use waiting_room::domain::EventId;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const ADMIN: &str = "demo-admin-token";

struct Room {
    base: String,
    http: Client,
    clock: Arc<ManualClock>,
    admitter: Admitter,
}

/// The waiting room on a real socket with event `demo`.
async fn room(store: Arc<dyn QueueStore>) -> Room {
    let clock = Arc::new(ManualClock::new(T0 * 1000));
    let shared: SharedClock = clock.clone();
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
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
        base: format!("http://{addr}"),
        http: Client::new(),
        clock,
        admitter,
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

    /// A new fan: (join token, queue number).
    async fn join(&self) -> (String, u64) {
        let r = self
            .http
            .post(format!("{}/api/events/demo/join", self.base))
            .send()
            .await
            .expect("join");
        assert_eq!(r.status(), 200);
        let b: Value = r.json().await.expect("json");
        let n = b["queue_number"].as_u64().expect("numbered");
        (b["join_token"].as_str().expect("token").to_owned(), n)
    }

    /// Claims the admission: (status, problem type or `admitted`).
    async fn claim(&self, token: &str) -> (u16, String) {
        let r = self
            .http
            .post(format!("{}/api/events/demo/admission", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("claim");
        let status = r.status().as_u16();
        let b: Value = r.json().await.unwrap_or(Value::Null);
        let what = if b["admission_token"].is_string() {
            "admitted".to_owned()
        } else {
            b["type"].as_str().unwrap_or("?").to_owned()
        };
        (status, what)
    }

    async fn set_mode(&self, mode: &str) -> Value {
        let (status, b) = self
            .admin(
                Method::PUT,
                "/admin/events/demo/mode",
                Some(json!({"mode": mode})),
            )
            .await;
        assert_eq!(status, 200, "{b}");
        assert_eq!(b["mode"], mode);
        b
    }

    async fn knobs(&self, body: Value) -> Value {
        let (status, b) = self
            .admin(Method::PATCH, "/admin/events/demo", Some(body))
            .await;
        assert_eq!(status, 200, "{b}");
        b
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
                    .is_some_and(|a| a.contains("broadcast") || a == "set_mode")
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

const ADMITTED: (u16, &str) = (200, "admitted");
const NOT_YET: (u16, &str) = (409, "/problems/not-your-turn");

fn is(got: &(u16, String), want: (u16, &str)) -> bool {
    got.0 == want.0 && got.1 == want.1
}

async fn always_on_on(store: Arc<dyn QueueStore>) {
    let mut room = room(store).await;
    // Scheduled (the default): a fan who joins waits for the admitter, however empty the line.
    let (t0, _) = room.join().await;
    assert!(is(&room.claim(&t0).await, NOT_YET));
    room.clock.advance_ms(1000);
    room.admitter.step(room.clock.now_ms()).await.expect("step");
    assert!(is(&room.claim(&t0).await, ADMITTED));

    // Always on at 0.5 fans/s: the next fan goes straight through, the one right after queues.
    room.knobs(json!({"admit_rate": 0.5, "max_active": 100}))
        .await;
    room.set_mode("always_on").await;
    let started = std::time::Instant::now();
    let (t1, _) = room.join().await;
    assert!(
        is(&room.claim(&t1).await, ADMITTED),
        "below the rate: straight through"
    );
    let (t2, _) = room.join().await;
    let c2 = room.claim(&t2).await;
    assert!(is(&c2, NOT_YET), "above the rate: queued, {c2:?}");
    // Once the rate allows another fan (2 s), the next join lets the head of the line (fan 2)
    // in, not the newcomer: polled with a deadline, one join every 200 ms.
    let mut newcomers = Vec::new();
    loop {
        assert!(started.elapsed().as_secs() < 15, "fan 2 never let in");
        let (t, _) = room.join().await;
        newcomers.push(t);
        if is(&room.claim(&t2).await, ADMITTED) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        started.elapsed().as_millis() >= 2000,
        "two straight-throughs within one 1/rate window ({:?})",
        started.elapsed()
    );
    assert!(is(&room.claim(&newcomers[0]).await, NOT_YET));

    // max_active full: nobody goes straight through, whatever the rate.
    let (status, f) = room.admin(Method::GET, "/admin/events/demo", None).await;
    assert_eq!(status, 200);
    let active = f["active"].as_u64().expect("active");
    room.knobs(json!({"admit_rate": 1000.0, "max_active": active}))
        .await;
    let (_late, _) = room.join().await;
    assert!(
        is(&room.claim(&newcomers[0]).await, NOT_YET),
        "max_active is full"
    );
    let modes: Vec<Value> = room
        .audit_actions()
        .await
        .into_iter()
        .map(|a| a.2)
        .collect();
    assert_eq!(modes, [json!("always_on")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_on_lets_fans_straight_through_below_the_rate_and_queues_above_it() {
    always_on_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_on_lets_fans_straight_through_below_the_rate_and_queues_above_it_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("connect to redis");
    always_on_on(Arc::new(store)).await;
}

async fn pass_through_on(store: Arc<dyn QueueStore>) {
    let room = room(store).await;
    room.knobs(json!({"admit_rate": 0.1, "max_active": 1}))
        .await;
    room.set_mode("pass_through").await;
    for i in 1..=5 {
        let (t, n) = room.join().await;
        assert_eq!(n, i);
        let c = room.claim(&t).await;
        assert!(is(&c, ADMITTED), "fan {i}: {c:?}");
    }
    let (status, f) = room.admin(Method::GET, "/admin/events/demo", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            f["last_number"].as_u64(),
            f["admitted_total"].as_u64(),
            f["active"].as_u64()
        ),
        (Some(5), Some(5), Some(5)),
        "everyone counted, past max_active: {f}"
    );
    let (_, _, doc) = room.poll(None).await;
    assert_eq!(doc["mode"], "pass_through");
    // Counted in the metrics (a counter shared by every test of this process: at least ours).
    let text = room
        .http
        .get(format!("{}/metrics", room.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let through: f64 = text
        .lines()
        .find(|l| l.starts_with("wr_straight_through_total{") && l.contains("pass_through"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    assert!(through >= 5.0, "wr_straight_through_total: {through}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_through_admits_everyone_and_counts_them() {
    pass_through_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_through_admits_everyone_and_counts_them_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("connect to redis");
    pass_through_on(Arc::new(store)).await;
}

async fn maintenance_on(store: Arc<dyn QueueStore>) {
    let mut room = room(store).await;
    let message = json!({"en": "Back in ten minutes.", "fr": "De retour dans dix minutes."});
    let (status, _) = room
        .admin(Method::PUT, "/admin/events/demo/broadcast", Some(message))
        .await;
    assert_eq!(status, 200);
    room.set_mode("maintenance").await;
    let (_, etag, doc) = room.poll(None).await;
    assert_eq!(
        (doc["mode"].as_str(), doc["broadcast"]["fr"].as_str()),
        (Some("maintenance"), Some("De retour dans dix minutes."))
    );

    // Joins are kept; nobody is let in, by the admitter or by a claim.
    let (t, n) = room.join().await;
    assert_eq!(n, 1);
    for _ in 0..3 {
        room.clock.advance_ms(1000);
        let out = room.admitter.step(room.clock.now_ms()).await.expect("step");
        assert_eq!(out, Outcome::Maintenance);
    }
    let r = room
        .http
        .post(format!("{}/api/events/demo/admission", room.base))
        .bearer_auth(&t)
        .send()
        .await
        .expect("claim");
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "5");
    let b: Value = r.json().await.expect("problem");
    assert_eq!(b["type"], "/problems/maintenance");

    // Back to the scheduled sale: the fan kept the place and is let in at the next ticks.
    room.set_mode("scheduled").await;
    let (status, _, doc) = room.poll(Some(&etag)).await;
    assert_eq!(
        (status, doc["mode"].as_str()),
        (StatusCode::OK, Some("scheduled"))
    );
    for _ in 0..3 {
        room.clock.advance_ms(1000);
        room.admitter.step(room.clock.now_ms()).await.expect("step");
    }
    assert!(is(&room.claim(&t).await, ADMITTED));
    let modes: Vec<(Value, Value)> = room
        .audit_actions()
        .await
        .into_iter()
        .filter(|a| a.0 == "set_mode")
        .map(|a| (a.1, a.2))
        .collect();
    assert_eq!(
        modes,
        [
            (json!("scheduled"), json!("maintenance")),
            (json!("maintenance"), json!("scheduled"))
        ]
    );
    // An unknown mode is a specific 422.
    let (status, b) = room
        .admin(
            Method::PUT,
            "/admin/events/demo/mode",
            Some(json!({"mode": "open"})),
        )
        .await;
    assert_eq!(
        (status.as_u16(), b["type"].as_str()),
        (422, Some("/problems/invalid-mode"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_holds_everyone_with_the_message() {
    maintenance_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_holds_everyone_with_the_message_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("connect to redis");
    maintenance_on(Arc::new(store)).await;
}

/// The event's internal state from the admin figures.
async fn state_of(room: &Room, event: &str) -> String {
    let (status, f) = room
        .admin(Method::GET, &format!("/admin/events/{event}"), None)
        .await;
    assert_eq!(status, 200, "{f}");
    f["internal_state"].as_str().unwrap_or("?").to_owned()
}

async fn phases_on(store: Arc<dyn QueueStore>) {
    let room = room(store.clone()).await;
    let create =
        json!({"id": "sched", "opens_at": T0 + 600, "admit_rate": 10.0, "max_active": 100});
    let (status, b) = room
        .admin(Method::POST, "/admin/events", Some(create))
        .await;
    assert_eq!(status, 201, "{b}");
    let phases =
        json!({"prequeue_opens_at": T0 + 2, "sale_opens_at": T0 + 4, "sale_ends_at": T0 + 6});
    let (status, b) = room
        .admin(
            Method::PUT,
            "/admin/events/sched/phases",
            Some(phases.clone()),
        )
        .await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(
        (b["phases"].clone(), b["opens_at"].as_i64()),
        (phases, Some(T0 + 4))
    );
    assert_eq!(
        state_of(&room, "sched").await,
        "closed",
        "no joins before the pre-queue"
    );

    // Two nodes' admitters step every 500 ms of the test clock; the state is polled with a
    // deadline of 20 s (test clock) and each switch noted with the time it was seen.
    let id = EventId::parse("sched").expect("id");
    let mut nodes = [
        Admitter::new(store.clone(), id.clone(), 100, 60),
        Admitter::new(store.clone(), id, 100, 60),
    ];
    let mut seen = vec![("closed".to_owned(), T0 * 1000)];
    let mut joined = None;
    while room.clock.now_ms() < (T0 + 20) * 1000 && seen.len() < 4 {
        room.clock.advance_ms(500);
        for a in nodes.iter_mut() {
            a.step(room.clock.now_ms()).await.expect("step");
        }
        let state = state_of(&room, "sched").await;
        if state == "prequeue" && joined.is_none() {
            let r = room
                .http
                .post(format!("{}/api/events/sched/join", room.base))
                .send()
                .await
                .expect("join");
            let b: Value = r.json().await.expect("json");
            joined = Some(b["join_token"].as_str().expect("token").to_owned());
        }
        if seen.last().map(|s| s.0.as_str()) != Some(state.as_str()) {
            seen.push((state, room.clock.now_ms()));
        }
    }
    let states: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(states, ["closed", "prequeue", "open", "closed"], "{seen:?}");
    for (i, at) in [(1, T0 + 2), (2, T0 + 4), (3, T0 + 6)] {
        let t = seen[i].1;
        assert!(
            t >= at * 1000 && t <= at * 1000 + 500,
            "{} at {t}, due {at}",
            seen[i].0
        );
    }

    // The fan who joined the pre-queue was numbered at the opening.
    let r = room
        .http
        .get(format!("{}/api/events/sched/position", room.base))
        .bearer_auth(joined.expect("joined the pre-queue"))
        .send()
        .await
        .expect("position");
    let p: Value = r.json().await.expect("json");
    assert_eq!(p["queue_number"], 1, "{p}");

    // Each switch audited once, as operator `schedule`, though two admitters stepped.
    let (status, trail) = room
        .admin(Method::GET, "/admin/events/sched/audit", None)
        .await;
    assert_eq!(status, 200);
    let by_schedule: Vec<(String, String, String)> = trail
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["operator"] == "schedule")
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("").to_owned();
            (s("action"), s("old"), s("new"))
        })
        .collect();
    let want = [
        ("prequeue_opens", "closed", "prequeue"),
        ("sale_opens", "prequeue", "open"),
        ("sale_ends", "open", "closed"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(by_schedule, want);

    // Bad schedules are a specific 422.
    let bad = json!({"prequeue_opens_at": T0 + 5, "sale_opens_at": T0 + 4});
    let (status, b) = room
        .admin(Method::PUT, "/admin/events/sched/phases", Some(bad))
        .await;
    assert_eq!(
        (status.as_u16(), b["type"].as_str()),
        (422, Some("/problems/invalid-phases"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_phases_switch_the_state_by_themselves() {
    phases_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_phases_switch_the_state_by_themselves_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("connect to redis");
    phases_on(Arc::new(store)).await;
}

/// Runs `waiting-room admin … <args>` against the room; the exit status.
async fn cli(room: &Room, args: &[&str]) -> bool {
    let mut all: Vec<String> = ["admin", "--url", &room.base, "--token", ADMIN]
        .iter()
        .map(|s| s.to_string())
        .collect();
    all.extend(["--operator", "ops-cli", "--event", "demo"].map(String::from));
    all.extend(args.iter().map(|s| s.to_string()));
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_waiting-room"))
            .args(&all)
            .output()
            .expect("run the admin CLI")
            .status
            .success()
    })
    .await
    .expect("join")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_cli_switches_modes_broadcasts_and_schedules() {
    let room = room(Arc::new(MemoryStore::new())).await;
    let sale = (T0 + 60).to_string();
    assert!(cli(&room, &["set-mode", "maintenance"]).await);
    assert!(cli(&room, &["broadcast", "--fr", "De retour bientôt."]).await);
    assert_eq!(
        room.poll(None).await.2["broadcast"]["fr"],
        "De retour bientôt."
    );
    assert!(cli(&room, &["clear-broadcast"]).await);
    assert!(cli(&room, &["phases", "--sale-opens-at", &sale]).await);
    assert!(cli(&room, &["clear-phases"]).await);
    assert!(
        !cli(&room, &["set-mode", "open"]).await,
        "an unknown mode fails"
    );
    let (status, trail) = room
        .admin(Method::GET, "/admin/events/demo/audit", None)
        .await;
    assert_eq!(status, 200);
    let actions: Vec<&str> = trail
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["operator"] == "ops-cli")
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        [
            "set_mode",
            "set_broadcast",
            "clear_broadcast",
            "set_phases",
            "clear_phases"
        ]
    );
}
