//! Admin API input checks: value ranges and unknown fields (422), state transitions (409, no
//! audit entry), `X-Operator` (400), problem+json for every error, and static-file caching.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use sale_common::{ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::domain::{EventId, EventState};
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const ADMIN: &str = "demo-admin-token";

struct App {
    router: Router,
    store: Arc<dyn QueueStore>,
}

async fn app_with(static_dir: Option<std::path::PathBuf>) -> App {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock);
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let mut cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    cfg.static_dir = static_dir;
    let state = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
    let router = router(state).layer(MockConnectInfo(peer));
    App { router, store }
}

async fn app() -> App {
    app_with(None).await
}

async fn send(
    app: &App,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, HeaderMap, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = match body {
        Some(b) => {
            req = req.header(header::CONTENT_TYPE, "application/json");
            Body::from(b.to_string())
        }
        None => Body::empty(),
    };
    let resp = app
        .router
        .clone()
        .oneshot(req.body(body).expect("req"))
        .await
        .expect("call");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, body)
}

/// An admin call with the admin token.
async fn admin(app: &App, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
    let auth = format!("Bearer {ADMIN}");
    let (s, _, b) = send(app, method, uri, &[("authorization", &auth)], body).await;
    (s, b)
}

fn is_problem(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .is_some_and(|v| v == "application/problem+json")
}

fn valid_create() -> Value {
    json!({"id": "gamma", "opens_at": T0 + 600, "admit_rate": 10.0, "max_active": 50,
        "admission_ttl_secs": 600, "booking_url": "https://booking.example/"})
}

async fn audit_len(app: &App, event: &str) -> usize {
    let id = EventId::parse(event).expect("id");
    app.store.audit(&id, 1000).await.expect("audit").len()
}

#[tokio::test]
async fn admin_create_refuses_out_of_range_values() {
    let app = app().await;
    let cases: Vec<(&str, Value)> = vec![
        ("admission_ttl_secs", json!(u64::MAX)),
        ("admission_ttl_secs", json!(0)),
        ("admission_ttl_secs", json!(86_401)),
        ("max_active", json!(0)),
        ("admit_rate", json!(1_000_001.0)),
        ("admit_rate", json!(0.0)),
        ("opens_at", json!(T0 + 400 * 86_400)),
        ("opens_at", json!(T0 - 400 * 86_400)),
        ("booking_url", json!("javascript:alert(1)")),
        ("booking_url", json!("/relative/path")),
        ("booking_url", json!("ftp://booking.example/")),
    ];
    for (field, value) in cases {
        let mut body = valid_create();
        body[field] = value.clone();
        let (s, p) = admin(&app, "POST", "/admin/events", Some(body)).await;
        assert_eq!(
            (s, p["type"].as_str()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("/problems/invalid-body")
            ),
            "{field} = {value}"
        );
    }
    let (s, _) = admin(&app, "GET", "/admin/events/gamma", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "nothing was created");
    let mut edge = valid_create();
    edge["admission_ttl_secs"] = json!(86_400);
    edge["max_active"] = json!(1);
    edge["admit_rate"] = json!(1_000_000.0);
    let (s, f) = admin(&app, "POST", "/admin/events", Some(edge)).await;
    assert_eq!(
        (s, f["state"].as_str()),
        (StatusCode::CREATED, Some("prequeue"))
    );
}

#[tokio::test]
async fn admin_patch_refuses_out_of_range_values() {
    let app = app().await;
    for body in [
        json!({"max_active": 0}),
        json!({"admit_rate": 2_000_000.0}),
        json!({"admit_rate": -1.0}),
    ] {
        let (s, _) = admin(&app, "PATCH", "/admin/events/demo", Some(body.clone())).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    assert_eq!(audit_len(&app, "demo").await, 0, "nothing audited");
    let (s, f) = admin(
        &app,
        "PATCH",
        "/admin/events/demo",
        Some(json!({"max_active": 1})),
    )
    .await;
    assert_eq!((s, &f["max_active_seen"].is_u64()), (StatusCode::OK, &true));
}

#[tokio::test]
async fn admin_refuses_unknown_fields() {
    let app = app().await;
    let (s, p) = admin(
        &app,
        "PATCH",
        "/admin/events/demo",
        Some(json!({"max_actve": 5})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        p["detail"].as_str().unwrap_or("").contains("max_actve"),
        "{p}"
    );
    let mut body = valid_create();
    body["colour"] = json!("red");
    let (s, _) = admin(&app, "POST", "/admin/events", Some(body)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(audit_len(&app, "demo").await, 0);
}

#[tokio::test]
async fn admin_invalid_transitions_are_409_and_not_audited() {
    let app = app().await;
    let demo = EventId::parse("demo").expect("id");
    // Pre-queued: pause and resume are not allowed.
    for action in ["pause", "resume"] {
        let (s, p) = admin(&app, "POST", &format!("/admin/events/demo/{action}"), None).await;
        assert_eq!(s, StatusCode::CONFLICT, "{action}");
        assert_eq!(p["type"], "/problems/invalid-transition");
        assert_eq!(p["from"], "prequeue");
    }
    assert_eq!(audit_len(&app, "demo").await, 0);

    // The valid path: open, pause, resume, close.
    for (action, state) in [
        ("open", "open"),
        ("pause", "paused"),
        ("resume", "open"),
        ("close", "closed"),
    ] {
        let (s, f) = admin(&app, "POST", &format!("/admin/events/demo/{action}"), None).await;
        assert_eq!(
            (s, f["internal_state"].as_str()),
            (StatusCode::OK, Some(state))
        );
    }
    // Four actions, and opening also records the draw's publication (`draw_published`).
    assert_eq!(audit_len(&app, "demo").await, 5);

    // Closed: open, resume, pause, close are refused; sold-out is allowed.
    for (action, to) in [
        ("open", "open"),
        ("resume", "open"),
        ("pause", "paused"),
        ("close", "closed"),
    ] {
        let (s, p) = admin(&app, "POST", &format!("/admin/events/demo/{action}"), None).await;
        assert_eq!(
            (s, p["from"].as_str(), p["to"].as_str()),
            (StatusCode::CONFLICT, Some("closed"), Some(to)),
            "{action}"
        );
    }
    assert_eq!(audit_len(&app, "demo").await, 5, "refusals are not audited");
    let (s, _) = admin(&app, "POST", "/admin/events/demo/sold-out", None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, p) = admin(&app, "POST", "/admin/events/demo/open", None).await;
    assert_eq!(
        (s, p["from"].as_str()),
        (StatusCode::CONFLICT, Some("sold_out"))
    );
    let (s, _) = admin(&app, "POST", "/admin/events/demo/sold-out", None).await;
    assert_eq!(s, StatusCode::CONFLICT, "already sold out");
    assert_eq!(audit_len(&app, "demo").await, 6);
    let meta = app.store.event(&demo).await.expect("read").expect("event");
    assert_eq!(meta.state, EventState::SoldOut);
}

#[tokio::test]
async fn admin_x_operator_must_be_visible_ascii() {
    let app = app().await;
    let auth = format!("Bearer {ADMIN}");
    let long = "a".repeat(65);
    for bad in ["", "bob smith", long.as_str()] {
        let (s, h, p) = send(
            &app,
            "PATCH",
            "/admin/events/demo",
            &[("authorization", &auth), ("x-operator", bad)],
            Some(json!({"max_active": 3})),
        )
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad:?}");
        assert!(is_problem(&h));
        assert_eq!(p["type"], "/problems/invalid-operator");
    }
    let (s, _, _) = send(
        &app,
        "POST",
        "/admin/events/demo/open",
        &[("authorization", &auth), ("x-operator", "bob smith")],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(audit_len(&app, "demo").await, 0);
    let (s, _, _) = send(
        &app,
        "PATCH",
        "/admin/events/demo",
        &[("authorization", &auth), ("x-operator", "alice")],
        Some(json!({"max_active": 3})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = admin(
        &app,
        "PATCH",
        "/admin/events/demo",
        Some(json!({"max_active": 4})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let demo = EventId::parse("demo").expect("id");
    let who: Vec<String> = app
        .store
        .audit(&demo, 10)
        .await
        .expect("audit")
        .into_iter()
        .map(|e| e.operator)
        .collect();
    assert_eq!(who, ["alice", "unnamed"]);
}

#[tokio::test]
async fn every_error_is_problem_json() {
    let app = app().await;
    let (s, h, p) = send(&app, "GET", "/no/such/page", &[], None).await;
    assert_eq!((s, is_problem(&h)), (StatusCode::NOT_FOUND, true));
    assert_eq!(p["status"], 404);
    let (s, h, _) = send(&app, "DELETE", "/healthz", &[], None).await;
    assert_eq!((s, is_problem(&h)), (StatusCode::METHOD_NOT_ALLOWED, true));
    let auth = format!("Bearer {ADMIN}");
    let (s, h, _) = send(
        &app,
        "DELETE",
        "/admin/events/demo",
        &[("authorization", &auth)],
        None,
    )
    .await;
    assert_eq!((s, is_problem(&h)), (StatusCode::METHOD_NOT_ALLOWED, true));
    let (s, h, p) = send(
        &app,
        "GET",
        "/admin/events/demo/audit?limit=abc",
        &[("authorization", &auth)],
        None,
    )
    .await;
    assert_eq!((s, is_problem(&h)), (StatusCode::BAD_REQUEST, true));
    assert_eq!(p["type"], "/problems/invalid-query");
    let long = "x".repeat(5000);
    let (s, h, p) = send(
        &app,
        "GET",
        &format!("/admin/events/{long}"),
        &[("authorization", &auth)],
        None,
    )
    .await;
    assert_eq!((s, is_problem(&h)), (StatusCode::NOT_FOUND, true));
    let detail = p["detail"].as_str().expect("detail");
    assert!(
        detail.chars().count() < 120,
        "echo bounded: {}",
        detail.len()
    );
    let mut body = valid_create();
    body[long.as_str()] = json!(1);
    let (s, p) = admin(&app, "POST", "/admin/events", Some(body)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let detail = p["detail"].as_str().expect("detail");
    assert!(
        detail.chars().count() <= 101,
        "echo bounded: {}",
        detail.len()
    );
}

#[tokio::test]
async fn static_files_are_public_for_a_minute() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("index.html"), "<h1>queue</h1>").expect("write");
    let app = app_with(Some(dir.path().to_path_buf())).await;
    let (s, h, _) = send(&app, "GET", "/index.html", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h[header::CACHE_CONTROL], "public, max-age=60");
    let (s, h, p) = send(&app, "GET", "/missing.html", &[], None).await;
    assert_eq!((s, is_problem(&h)), (StatusCode::NOT_FOUND, true));
    assert_eq!(p["status"], 404);
    assert_eq!(h[header::CACHE_CONTROL], "no-store");
    let (s, h, _) = send(&app, "POST", "/api/events/demo/join", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h[header::CACHE_CONTROL], "private, no-store");
    let (s, h, _) = send(&app, "PUT", "/api/events/demo/join", &[], None).await;
    assert_eq!((s, is_problem(&h)), (StatusCode::METHOD_NOT_ALLOWED, true));
}

/// `POST /admin/events` with `opens_at` as a local time in Europe/London; the answer's
/// status, problem type and body.
async fn create_at(app: &App, id: &str, opens_at: &str) -> (StatusCode, Value) {
    let mut body = valid_create();
    body["id"] = json!(id);
    body["opens_at"] = json!(opens_at);
    body["time_zone"] = json!("Europe/London");
    admin(app, "POST", "/admin/events", Some(body)).await
}

/// Issue 17 item 4: 2026-03-29 in London, the clocks go from 01:00 GMT to 02:00 BST, so
/// 01:30 never happens: refused naming the gap, nothing created; 00:59 and 02:00 are a minute
/// apart.
#[tokio::test]
async fn dst_gap_local_time_is_refused() {
    let app = app().await;
    let (s, p) = create_at(&app, "gap", "2026-03-29T01:30").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["type"], "/problems/nonexistent-local-time", "{p}");
    let detail = p["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("gap") && detail.contains("Europe/London"),
        "{detail}"
    );
    let (s, _) = admin(&app, "GET", "/admin/events/gap", None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "nothing was created");
    let (s, a) = create_at(&app, "before", "2026-03-29T00:59").await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let (s, b) = create_at(&app, "after", "2026-03-29T02:00").await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(
        b["opens_at"].as_i64().unwrap() - a["opens_at"].as_i64().unwrap(),
        60
    );
}

/// Issue 17 item 4: 2026-10-25 in London, 01:00–02:00 happens twice: 01:30 alone is refused
/// with both candidate offsets; with +01:00 (BST, the first) and +00:00 (GMT, the second) it
/// is accepted, an hour apart.
#[tokio::test]
async fn dst_overlap_local_time_needs_an_offset() {
    let app = app().await;
    let (s, p) = create_at(&app, "fold", "2026-10-25T01:30").await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["type"], "/problems/ambiguous-local-time", "{p}");
    assert_eq!(p["candidate_offsets"], json!(["+01:00", "+00:00"]), "{p}");
    let (s, first) = create_at(&app, "first", "2026-10-25T01:30+01:00").await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let (s, second) = create_at(&app, "second", "2026-10-25T01:30+00:00").await;
    assert_eq!(s, StatusCode::CREATED, "{second}");
    let (a, b) = (
        first["opens_at"].as_i64().unwrap(),
        second["opens_at"].as_i64().unwrap(),
    );
    assert_eq!(a, 1_792_888_200, "2026-10-25T00:30:00Z");
    assert_eq!(b - a, 3600);
    assert_eq!(
        first["time_zone"], "Europe/London",
        "the event keeps its own zone: {first}"
    );
    let mut bad = valid_create();
    bad["time_zone"] = json!("Mars/Olympus");
    bad["opens_at"] = json!("2026-10-25T19:00");
    let (s, p) = admin(&app, "POST", "/admin/events", Some(bad)).await;
    assert_eq!(
        (s, p["type"].as_str()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("/problems/invalid-time-zone")
        )
    );
}

/// Newcomer review: serde reads a derived struct from a JSON array by position, and a `null`
/// member as left out, so `PATCH [5.0]` set the admit rate and `{"admit_rate": null}` was a
/// silent no-op. Every JSON body is read by `sale_common::body`: an array, or `null` for a
/// member that may only be left out, is `422 invalid-body`, nothing changed or audited. A body
/// over the limit is `413 payload-too-large`, as in the booking core (it was `invalid-body`).
#[tokio::test]
async fn admin_bodies_are_objects_and_null_is_not_left_out() {
    let app = app().await;
    let (_, before) = admin(&app, "GET", "/admin/events/demo", None).await;
    assert!(
        before["admit_rate"].is_number() && before["max_active"].is_number(),
        "{before}"
    );
    let refused = [
        json!([5.0, null, null]),
        json!({"admit_rate": null}),
        json!({"max_active": null, "admit_rate": 5.0}),
        json!({"pow_difficulty": null}),
    ];
    for body in refused {
        let (s, p) = admin(&app, "PATCH", "/admin/events/demo", Some(body.clone())).await;
        assert_eq!(
            (s, p["type"].as_str()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("/problems/invalid-body")
            ),
            "{body}: {p}"
        );
    }
    let array = Value::Array(
        valid_create()
            .as_object()
            .unwrap()
            .values()
            .cloned()
            .collect(),
    );
    let (s, p) = admin(&app, "POST", "/admin/events", Some(array)).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let huge = json!({"admit_rate": 5.0, "pad": "x".repeat(3 << 20)});
    let (s, p) = admin(&app, "PATCH", "/admin/events/demo", Some(huge)).await;
    assert_eq!(
        (s, p["type"].as_str()),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("/problems/payload-too-large")
        ),
        "{p}"
    );
    assert_eq!(audit_len(&app, "demo").await, 0, "nothing audited");
    let (_, after) = admin(&app, "GET", "/admin/events/demo", None).await;
    assert_eq!(after["admit_rate"], before["admit_rate"]);
    assert_eq!(after["max_active"], before["max_active"]);
    let (s, _) = admin(
        &app,
        "PATCH",
        "/admin/events/demo",
        Some(json!({"admit_rate": 5.0})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(audit_len(&app, "demo").await, 1);
}
