//! The operator console (`static/console.html`) is a plain public file: it carries no secret and
//! reaches the admin API only with the token the operator types in.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{Request, StatusCode};
use sale_common::{ManualClock, SharedClock};
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::store::memory::MemoryStore;
use waiting_room::{router, AppState, Config};

#[tokio::test]
async fn console_page_is_served_without_secrets() {
    let clock: SharedClock = Arc::new(ManualClock::new(1_764_500_000_000));
    let mut cfg = Config::demo("demo", 1_764_500_000, "http://127.0.0.1:8081");
    cfg.static_dir = Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../static"));
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), clock)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    let app = router(st).layer(MockConnectInfo(peer));
    // The page and every module it loads (`static/console/*.js`, one per panel), as served.
    let mut page = String::new();
    for path in [
        "/console.html",
        "/console/main.js",
        "/console/api.js",
        "/console/figures.js",
        "/console/broadcast.js",
        "/console/mode.js",
        "/console/phases.js",
        "/console/knobs.js",
        "/console/actions.js",
        "/console/errors.js",
        "/console/audit.js",
        "/console/rules.js",
    ] {
        let req = Request::get(path).body(Body::empty()).expect("req");
        let r = app.clone().oneshot(req).await.expect("call");
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let want = if path.ends_with(".html") {
            "text/html"
        } else {
            "text/javascript"
        };
        let ct = r.headers()["content-type"].to_str().expect("ct").to_owned();
        assert!(ct.starts_with(want), "{path}: {ct}");
        let body = axum::body::to_bytes(r.into_body(), 1 << 20)
            .await
            .expect("body");
        page.push_str(std::str::from_utf8(&body).expect("utf8"));
    }
    for needle in [
        "/admin/events/",
        "X-Operator",
        "/audit?limit=",
        "sessionStorage",
        "pow_difficulty",
        "/rules",
        "/shadow",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    assert!(!page.contains("demo-admin-token"), "no secret in the page");
}

#[tokio::test]
async fn openapi_describes_every_route_the_router_serves() {
    let clock: SharedClock = Arc::new(ManualClock::new(1_764_500_000_000));
    let cfg = Config::demo("demo", 1_764_500_000, "http://127.0.0.1:8081");
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), clock)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    let app = router(st).layer(MockConnectInfo(peer));
    let get = Request::get("/openapi.json")
        .body(Body::empty())
        .expect("req");
    let r = app.clone().oneshot(get).await.expect("call");
    assert_eq!(r.status(), StatusCode::OK);
    let body = axum::body::to_bytes(r.into_body(), 1 << 22)
        .await
        .expect("body");
    let doc: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert!(doc["openapi"].as_str().expect("version").starts_with("3."));
    for s in ["join_token", "admin_token", "service_token"] {
        assert!(doc["components"]["securitySchemes"][s].is_object(), "{s}");
    }
    assert!(doc["components"]["schemas"]["StatusDoc"]["properties"]["wait"].is_object());
    // A create's opening: Unix seconds or text (a local time read in `time_zone`).
    assert!(
        doc["components"]["schemas"]["OpensAt"]["oneOf"].is_array(),
        "{}",
        doc["components"]["schemas"]["OpensAt"]
    );
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 17, "{}", paths.len());
    for (path, ops) in paths {
        let uri = path
            .replace("{event}", "demo")
            .replace("{file}", "demo.json")
            .replace("{rule}", "r00000000")
            .replace("{visitor}", "00000000-0000-4000-8000-000000000000");
        for method in ops.as_object().expect("ops").keys() {
            let req = Request::builder()
                .method(method.to_uppercase().as_str())
                .uri(&uri)
                .body(Body::empty())
                .expect("req");
            let r = app.clone().oneshot(req).await.expect("call");
            let s = r.status();
            let b = axum::body::to_bytes(r.into_body(), 1 << 22)
                .await
                .expect("body");
            let unrouted =
                s == StatusCode::NOT_FOUND && String::from_utf8_lossy(&b).contains("no such page");
            assert!(
                s != StatusCode::METHOD_NOT_ALLOWED && !unrouted,
                "{method} {path}: {s}"
            );
        }
    }
}
