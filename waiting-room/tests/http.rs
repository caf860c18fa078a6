//! Router tests through `oneshot` (axum `examples/testing`), time driven by a `ManualClock`
//! and the admitter stepped by hand; plus one real-socket test of `serve`.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use sale_common::{Clock, ManualClock, SharedClock};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::admitter::{Admitter, Outcome};
use waiting_room::domain::EventId;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;

struct App {
    router: Router,
    clock: ManualClock,
    store: Arc<dyn QueueStore>,
    state: AppState,
}

async fn app(opens_at: i64) -> App {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let cfg = Config::demo("demo", opens_at, "http://127.0.0.1:8081");
    let state = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
    let router = router(state.clone()).layer(MockConnectInfo(peer));
    App {
        router,
        clock,
        store,
        state,
    }
}

async fn call(
    app: &App,
    method: &str,
    uri: &str,
    bearer: Option<&str>,
) -> (StatusCode, axum::http::HeaderMap, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = bearer {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let resp = app
        .router
        .clone()
        .oneshot(req.body(Body::empty()).expect("req"))
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

fn demo() -> EventId {
    EventId::parse("demo").expect("id")
}

#[tokio::test]
async fn join_position_admission_after_the_admitter_moves_the_cursor() {
    let app = app(T0).await;
    let mut admitter = Admitter::new(app.store.clone(), demo(), 100, 60);
    assert_eq!(
        admitter.step(app.clock.now_ms()).await.expect("step"),
        Outcome::Opened { prequeued: 0 }
    );

    let (s, h, j) = call(&app, "POST", "/api/events/demo/join", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h[header::CACHE_CONTROL], "private, no-store");
    assert_eq!(j["queue_number"], 1);
    let token = j["join_token"].as_str().expect("token").to_owned();

    let (s, _, again) = call(&app, "POST", "/api/events/demo/join", Some(&token)).await;
    assert_eq!(
        (s, &again["queue_number"], &again["visitor_id"]),
        (StatusCode::OK, &j["queue_number"], &j["visitor_id"])
    );

    let (s, _, early) = call(&app, "POST", "/api/events/demo/admission", Some(&token)).await;
    assert_eq!(s, StatusCode::CONFLICT);
    assert_eq!(
        (early["type"].as_str(), &early["cursor"]),
        (Some("/problems/not-your-turn"), &Value::from(0))
    );

    app.clock.advance_ms(1000);
    let out = admitter.step(app.clock.now_ms()).await.expect("step");
    assert!(
        matches!(out, Outcome::Advanced { cursor: 1, .. }),
        "{out:?}"
    );

    let (s, _, p) = call(&app, "GET", "/api/events/demo/position", Some(&token)).await;
    assert_eq!(
        (s, &p["cursor"], &p["admitted"]),
        (StatusCode::OK, &Value::from(1), &Value::from(false))
    );

    let (s, h, a) = call(&app, "POST", "/api/events/demo/admission", Some(&token)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h[header::CACHE_CONTROL], "private, no-store");
    let adm = a["admission_token"].as_str().expect("token");
    let claims = app.state.0.signer.verify(adm).expect("verifies");
    assert_eq!(
        (
            claims.iss.as_str(),
            claims.aud.primary(),
            claims.event.as_str()
        ),
        ("waiting-room", "booking-core", "demo")
    );
    assert_eq!(claims.sub, j["visitor_id"].as_str().expect("id"));
    assert_eq!(a["booking_url"], "http://127.0.0.1:8081");
    let (_, _, a2) = call(&app, "POST", "/api/events/demo/admission", Some(&token)).await;
    assert_eq!(
        a2["admission_token"], a["admission_token"],
        "claiming again returns the same token"
    );

    // Once it has expired unused, claiming again says so instead of handing back a dead token
    // (the booking core would refuse it and send the fan here again, in a loop).
    let exp = a["expires_at"].as_i64().expect("expires_at");
    app.clock.set_ms(exp * 1000);
    let (s, _, gone) = call(&app, "POST", "/api/events/demo/admission", Some(&token)).await;
    assert_eq!(s, StatusCode::GONE, "{gone}");
    assert_eq!(gone["type"], "/problems/admission-expired");
    assert_eq!(gone["expired_at"], exp);
    // A join without the old token is a new visitor with a new place.
    let (s, _, fresh) = call(&app, "POST", "/api/events/demo/join", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_ne!(fresh["visitor_id"], j["visitor_id"]);
}

#[tokio::test]
async fn status_document_is_public_and_cookie_free() {
    let app = app(T0 + 60).await;
    let (s, h, doc) = call(&app, "GET", "/status/demo.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        h[header::CACHE_CONTROL],
        "public, max-age=1, stale-while-revalidate=1"
    );
    assert!(h.get(header::SET_COOKIE).is_none());
    assert_eq!(
        (doc["event"].as_str(), doc["state"].as_str()),
        (Some("demo"), Some("prequeue"))
    );
    for k in [
        "opens_at",
        "cursor",
        "queue_length",
        "admit_rate",
        "max_active",
        "active",
        "sold_out",
        "poll_interval_ms",
        "booking_url",
        "updated_at",
    ] {
        assert!(doc.get(k).is_some(), "missing {k}");
    }
    let (s, h, _) = call(&app, "GET", "/status/nope.json", None).await;
    assert_eq!(
        (s, h[header::CONTENT_TYPE].to_str().ok()),
        (StatusCode::NOT_FOUND, Some("application/problem+json"))
    );
}

#[tokio::test]
async fn forged_or_expired_join_tokens_get_401() {
    let app = app(T0).await;
    let (_, _, j) = call(&app, "POST", "/api/events/demo/join", None).await;
    let token = j["join_token"].as_str().expect("token").to_owned();
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    for bad in [forged.as_str(), "not-a-jwt", ""] {
        let (s, h, _) = call(&app, "GET", "/api/events/demo/position", Some(bad)).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "token {bad:?}");
        assert_eq!(h[header::CONTENT_TYPE], "application/problem+json");
        let (s, _, _) = call(&app, "POST", "/api/events/demo/join", Some(bad)).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED);
    }
    let (s, _, _) = call(&app, "GET", "/api/events/demo/position", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    app.clock.advance_ms(2 * 86_400 * 1000);
    let (s, _, p) = call(&app, "GET", "/api/events/demo/position", Some(&token)).await;
    assert_eq!(
        (s, p["type"].as_str()),
        (
            StatusCode::UNAUTHORIZED,
            Some("/problems/join-token-expired")
        )
    );
}

/// Two `Authorization` headers are refused even when the first is the fan's own good token.
#[tokio::test]
async fn two_authorization_headers_get_401() {
    let app = app(T0).await;
    let (_, _, j) = call(&app, "POST", "/api/events/demo/join", None).await;
    let token = j["join_token"].as_str().expect("token").to_owned();
    let (s, _, _) = call(&app, "GET", "/api/events/demo/position", Some(&token)).await;
    assert_eq!(s, StatusCode::OK);
    let req = Request::builder()
        .method("GET")
        .uri("/api/events/demo/position")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .header(header::AUTHORIZATION, "Bearer someone-else")
        .body(Body::empty())
        .expect("req");
    let resp = app.router.clone().oneshot(req).await.expect("call");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    let p: Value = serde_json::from_slice(&bytes).expect("problem");
    assert_eq!(p["type"], "/problems/invalid-join-token");
    assert_eq!(p["detail"], "more than one Authorization header");
}

#[tokio::test]
async fn jwks_has_one_okp_ed25519_key() {
    let app = app(T0).await;
    let (s, h, j) = call(&app, "GET", "/.well-known/jwks.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h[header::CACHE_CONTROL], "public, max-age=60");
    let k = &j["keys"][0];
    assert_eq!(
        (
            k["kty"].as_str(),
            k["crv"].as_str(),
            k["alg"].as_str(),
            k["use"].as_str()
        ),
        (Some("OKP"), Some("Ed25519"), Some("EdDSA"), Some("sig"))
    );
    assert_eq!(k["kid"].as_str(), Some(app.state.0.signer.kid().as_str()));
    use base64::Engine;
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(k["x"].as_str().expect("x"))
        .expect("b64url");
    assert_eq!(
        x,
        app.state.0.signer.public_raw().to_vec(),
        "x is the raw 32-byte key"
    );
}

#[tokio::test]
async fn admin_api_requires_the_admin_token() {
    let app = app(T0 + 3600).await;
    let (s, _, _) = call(&app, "GET", "/admin/events/demo", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _, _) = call(
        &app,
        "POST",
        "/admin/events/demo/open",
        Some("wrong-token-wrong-token"),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _, f) = call(
        &app,
        "POST",
        "/admin/events/demo/open",
        Some("demo-admin-token"),
    )
    .await;
    assert_eq!((s, f["state"].as_str()), (StatusCode::OK, Some("open")));
    let (s, _, f) = call(
        &app,
        "POST",
        "/admin/events/demo/pause",
        Some("demo-admin-token"),
    )
    .await;
    assert_eq!((s, f["state"].as_str()), (StatusCode::OK, Some("paused")));
    assert!(f.get("admitted_total").is_some() && f.get("max_active_seen").is_some());
    let (s, _, _) = call(&app, "GET", "/admin/events/nope", Some("demo-admin-token")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn admitter_carries_fractions_and_holds_when_paused() {
    let app = app(T0).await;
    app.store
        .set_knobs(&demo(), Some(2.5), None)
        .await
        .expect("knobs");
    let mut adm = Admitter::new(app.store.clone(), demo(), 100, 60);
    adm.step(app.clock.now_ms()).await.expect("open");
    for _ in 0..20 {
        call(&app, "POST", "/api/events/demo/join", None).await;
    }
    let mut cursor = 0;
    for _ in 0..20 {
        app.clock.advance_ms(100);
        if let Outcome::Advanced { cursor: c, .. } =
            adm.step(app.clock.now_ms()).await.expect("step")
        {
            cursor = c;
        }
    }
    assert_eq!(
        cursor, 5,
        "2.5/s for 2 s, fractions carried between 100 ms ticks"
    );
    app.store
        .transition(
            &demo(),
            &[waiting_room::domain::EventState::Open],
            waiting_room::domain::EventState::Paused,
        )
        .await
        .expect("pause");
    app.clock.advance_ms(5000);
    assert!(matches!(
        adm.step(app.clock.now_ms()).await.expect("step"),
        Outcome::Held(_)
    ));
}

#[tokio::test]
async fn serve_answers_on_a_real_socket_and_stops() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let server = tokio::spawn(waiting_room::serve(listener, cfg, async {
        let _ = rx.await;
    }));
    let client = reqwest::Client::new();
    let r = client
        .post(format!("http://{addr}/api/events/demo/join"))
        .send()
        .await
        .expect("join");
    assert_eq!(r.status(), 200);
    let r = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(r.text().await.expect("text"), "ok");
    let _ = tx.send(());
    server.await.expect("task").expect("serve returns cleanly");
}

#[tokio::test]
async fn case_w03_spoofed_forwarded_for_shares_the_peer_bucket() {
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    cfg.join_rate_per_sec = 1;
    cfg.join_burst = 5;
    let state = AppState::new(cfg, Arc::new(MemoryStore::new()), clock)
        .await
        .expect("state");
    let peer: SocketAddr = "203.0.113.7:5555".parse().expect("addr");
    let app = router(state).layer(MockConnectInfo(peer));
    let mut limited = 0;
    for i in 0..20 {
        let req = Request::post("/api/events/demo/join")
            .header("x-forwarded-for", format!("10.9.8.{i}"))
            .body(Body::empty())
            .expect("req");
        let resp = app.clone().oneshot(req).await.expect("call");
        if resp.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(resp.headers().get(header::RETRY_AFTER).is_some());
            limited += 1;
        }
    }
    assert_eq!(
        limited, 15,
        "one key for the peer: throttled after the burst of 5"
    );
}

/// Newcomer review: a path parameter that is not UTF-8 (`%FF`) was answered by axum's
/// `400 text/plain` "Invalid URL: Invalid UTF-8 in `event`", not problem+json as API.md says
/// every error body is (the booking core answered it as a problem already). Now the waiting
/// room's answers pass the same safety net (`sale_common::problem::problems_only`).
#[tokio::test]
async fn a_path_that_is_not_utf8_is_a_problem() {
    let a = app(T0).await;
    for (method, uri) in [
        ("POST", "/api/events/%FF/join"),
        ("GET", "/status/%FF.json"),
        ("GET", "/api/events/%FF/position"),
    ] {
        let (status, headers, body) = call(&a, method, uri, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{method} {uri}: {body}");
        assert_eq!(
            headers[header::CONTENT_TYPE],
            "application/problem+json",
            "{method} {uri}"
        );
        assert_eq!(body["status"], 400, "{body}");
    }
}
