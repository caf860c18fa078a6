//! `/metrics` in Prometheus text format carries the figures an operator watches: joins, live
//! queue length, cursor, admissions per second, active sessions, skipped places, rejected
//! tokens by reason and request latency histograms.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{Request, StatusCode};
use sale_common::{Clock, ManualClock, SharedClock};
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::admitter::Admitter;
use waiting_room::domain::EventId;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;

#[tokio::test]
async fn metrics_expose_the_operator_figures() {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let st = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    let app = router(st.clone()).layer(MockConnectInfo(peer));
    let demo = EventId::parse("demo").expect("id");
    let mut adm = Admitter::new(store, demo.clone(), 100, 60);
    adm.step(clock.now_ms()).await.expect("open");
    let req = |m: &str, u: &str, auth: Option<&str>| {
        let mut b = Request::builder().method(m).uri(u);
        if let Some(a) = auth {
            b = b.header("authorization", format!("Bearer {a}"));
        }
        b.body(Body::empty()).expect("req")
    };
    for _ in 0..3 {
        let r = app
            .clone()
            .oneshot(req("POST", "/api/events/demo/join", None))
            .await
            .expect("join");
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = app
        .clone()
        .oneshot(req("GET", "/api/events/demo/position", Some("x.y.z")))
        .await
        .expect("call");
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    clock.advance_ms(100);
    adm.step(clock.now_ms()).await.expect("step");
    st.refresh_status(&demo).await.expect("doc");

    let r = app
        .clone()
        .oneshot(req("GET", "/metrics", None))
        .await
        .expect("metrics");
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers()["content-type"]
        .to_str()
        .expect("ct")
        .starts_with("text/plain"));
    let body = axum::body::to_bytes(r.into_body(), 1 << 22)
        .await
        .expect("body");
    let text = String::from_utf8(body.to_vec()).expect("utf8");
    for needle in [
        "wr_joins_total{event=\"demo\"} 3",
        "wr_cursor{event=\"demo\"} 3",
        "wr_queue_length_live{event=\"demo\"} 0",
        "wr_active_sessions{event=\"demo\"} 3",
        "wr_admitted_per_sec{event=\"demo\"}",
        "wr_skipped_places_total{event=\"demo\"} 0",
        "wr_rejected_tokens_total{kind=\"join\",reason=\"malformed\"}",
        "wr_request_seconds_bucket{route=\"/api/events/{event}/join\",method=\"POST\",le=",
        "wr_requests_total{route=\"/api/events/{event}/position\",class=\"client_error\"}",
    ] {
        assert!(text.contains(needle), "missing {needle} in\n{text}");
    }
    // This host's view of time, for comparing services' clocks (case W11).
    let clock: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("wr_clock_unix_seconds "))
        .and_then(|v| v.parse().ok())
        .expect("wr_clock_unix_seconds");
    let now = sale_common::clock::unix_now_secs_f64();
    assert!((now - clock).abs() < 5.0, "clock {clock} vs {now}");
}
