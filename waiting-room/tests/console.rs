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
    let req = Request::get("/console.html")
        .body(Body::empty())
        .expect("req");
    let r = app.oneshot(req).await.expect("call");
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .expect("ct")
        .starts_with("text/html"));
    let body = axum::body::to_bytes(r.into_body(), 1 << 20)
        .await
        .expect("body");
    let page = String::from_utf8(body.to_vec()).expect("utf8");
    for needle in [
        "/admin/events/",
        "X-Operator",
        "/audit?limit=",
        "sessionStorage",
        "pow_difficulty",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
    assert!(!page.contains("demo-admin-token"), "no secret in the page");
}
