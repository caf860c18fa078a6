//! Status publishing (API.md "Status document"; seed 000, "The live status document"): built
//! whole from the store, transitions published at once and exactly once, one periodic publish
//! per throttle interval across publishers, a freed seat reopening a sold-out event, and the
//! directory sink. Time is a `ManualClock`; publishers are stepped by hand. The racing
//! publishers are in `status_race.rs`.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{header, Request};
use sale_common::{ManualClock, SharedClock};
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::domain::{EventId, EventState};
use waiting_room::status::{
    Decision, DirSink, LatchedPublisher, PublishRules, StatusPublisher, StatusSink,
};
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const THROTTLE: u64 = 1000;

fn ev() -> EventId {
    EventId::parse("demo").expect("id")
}

/// A store with the demo event, created through an `AppState` (no sinks).
async fn store_with_event() -> Arc<dyn QueueStore> {
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    AppState::new(cfg, store.clone(), clock)
        .await
        .expect("state");
    store
}

/// A publisher (own board, like another process) writing to `dir`.
fn publisher(store: &Arc<dyn QueueStore>, dir: &std::path::Path) -> LatchedPublisher {
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let rules = PublishRules {
        intervals: waiting_room::status::Intervals {
            poll_ms: cfg.poll_interval_ms,
            heartbeat_ms: cfg.heartbeat_interval_ms,
            ready_window: cfg.ready_window_min,
        },
        silence_ms: cfg.silence_grace_ms,
        throttle_ms: THROTTLE,
    };
    let sink: Arc<dyn StatusSink> = Arc::new(DirSink::new(dir));
    LatchedPublisher::new(store.clone(), Default::default(), vec![sink], rules)
}

fn file_doc(dir: &std::path::Path) -> serde_json::Value {
    let bytes = std::fs::read(dir.join("demo.json")).expect("status file");
    serde_json::from_slice(&bytes).expect("json")
}

async fn set(store: &Arc<dyn QueueStore>, from: &[EventState], to: EventState) {
    store.transition(&ev(), from, to).await.expect("transition");
}

#[tokio::test]
async fn a_transition_is_published_at_once_and_exactly_once_across_publishers() {
    let store = store_with_event().await;
    let dir = tempfile::tempdir().expect("dir");
    let (a, b) = (publisher(&store, dir.path()), publisher(&store, dir.path()));
    let now = T0 * 1000;
    // The first sight of the event (prequeue) is a transition: written at once.
    assert_eq!(
        a.publish(&ev(), now).await.expect("a").decision,
        Decision::Transition
    );
    assert_eq!(file_doc(dir.path())["state"], "prequeue");
    // The same generation again: no second transition; the throttle window opens once.
    assert_eq!(
        b.publish(&ev(), now).await.expect("b").decision,
        Decision::Throttle
    );
    assert_eq!(
        a.publish(&ev(), now + 1).await.expect("a").decision,
        Decision::LatchSkip
    );
    // Pause inside the throttle window: published at once, by exactly one of the two.
    set(&store, &[EventState::Prequeue], EventState::Paused).await;
    let e = ev();
    let (ra, rb) = tokio::join!(a.publish(&e, now + 2), b.publish(&e, now + 2));
    let decisions = [ra.expect("a").decision, rb.expect("b").decision];
    let transitions = decisions
        .iter()
        .filter(|d| **d == Decision::Transition)
        .count();
    assert_eq!(transitions, 1, "{decisions:?}");
    assert!(decisions.contains(&Decision::LatchSkip), "{decisions:?}");
    let doc = file_doc(dir.path());
    assert_eq!(doc["state"], "paused");
    // Resume, then close: each one transition.
    for (from, to, want) in [
        (EventState::Paused, EventState::Open, "open"),
        (EventState::Open, EventState::Closed, "closed"),
    ] {
        set(&store, &[from], to).await;
        let p = b.publish(&ev(), now + 3).await.expect("publish");
        assert_eq!(
            (p.decision, file_doc(dir.path())["state"].clone()),
            (Decision::Transition, want.into())
        );
        let again = a.publish(&ev(), now + 3).await.expect("again");
        assert_eq!(again.decision, Decision::LatchSkip);
    }
    assert!(file_doc(dir.path())["version"].as_u64() > doc["version"].as_u64());
}

#[tokio::test]
async fn periodic_publishes_are_throttled_to_one_per_interval_across_publishers() {
    let store = store_with_event().await;
    let dir = tempfile::tempdir().expect("dir");
    let pubs: Vec<_> = (0..3).map(|_| publisher(&store, dir.path())).collect();
    let start = T0 * 1000;
    pubs[0].publish(&ev(), start).await.expect("first"); // the creation transition
    let mut writes = 0;
    let mut skips = 0;
    // 10 s of 100 ms ticks on each of 3 publishers: 300 steps.
    for tick in 0..100 {
        let now = start + tick * 100;
        for p in &pubs {
            match p.publish(&ev(), now).await.expect("step").decision {
                Decision::Throttle => writes += 1,
                Decision::LatchSkip => skips += 1,
                d => panic!("unexpected {d:?}"),
            }
        }
    }
    // One write per started 1 s window: [0,1000), [1000,2000), … → 10.
    assert_eq!((writes, skips), (10, 290));
}

#[tokio::test]
async fn a_freed_seat_reopens_a_sold_out_event_and_sold_out_publishes_again() {
    let store = store_with_event().await;
    let dir = tempfile::tempdir().expect("dir");
    let p = publisher(&store, dir.path());
    let now = T0 * 1000;
    p.publish(&ev(), now).await.expect("created");
    set(&store, &[EventState::Prequeue], EventState::Open).await;
    assert_eq!(
        p.publish(&ev(), now).await.expect("open").decision,
        Decision::Transition
    );
    set(&store, &[EventState::Open], EventState::SoldOut).await;
    assert_eq!(
        p.publish(&ev(), now).await.expect("so").decision,
        Decision::Transition
    );
    let doc = file_doc(dir.path());
    assert_eq!(
        (doc["state"].as_str(), doc["sold_out"].as_bool()),
        (Some("sold_out"), Some(true))
    );
    // Sold out stays latched: no second transition publish.
    assert_ne!(
        p.publish(&ev(), now).await.expect("again").decision,
        Decision::Transition
    );
    // A seat is freed: the latch of sold out is cleared, the reopened state goes out at once.
    set(&store, &[EventState::SoldOut], EventState::Open).await;
    assert_eq!(
        p.publish(&ev(), now).await.expect("reopen").decision,
        Decision::Transition
    );
    assert_eq!(file_doc(dir.path())["state"], "open");
    set(&store, &[EventState::Open], EventState::SoldOut).await;
    assert_eq!(
        p.publish(&ev(), now).await.expect("so2").decision,
        Decision::Transition
    );
    assert_eq!(file_doc(dir.path())["state"], "sold_out");
}

#[tokio::test]
async fn the_status_dir_is_served_with_cache_headers_and_counted_in_metrics() {
    let dir = tempfile::tempdir().expect("dir");
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let clock = ManualClock::new(T0 * 1000);
    let mut cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    cfg.status_dir = Some(dir.path().to_path_buf());
    cfg.status_max_age_secs = 3;
    let st = AppState::new(cfg, store.clone(), Arc::new(clock.clone()))
        .await
        .expect("state");
    // Published at start (the creation transition), atomically: no temp file left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(names, vec!["demo.json".to_owned()]);
    // The operator sells out: the handler's step publishes at once.
    set(&store, &[EventState::Prequeue], EventState::SoldOut).await;
    st.refresh_status(&ev()).await.expect("doc");
    st.refresh_status(&ev()).await.expect("doc"); // throttle window taken
    st.refresh_status(&ev()).await.expect("doc"); // latch skip
    let file = file_doc(dir.path());
    assert_eq!(file["state"], "sold_out");
    let peer: std::net::SocketAddr = "127.0.0.1:40000".parse().expect("addr");
    let app = router(st.clone()).layer(MockConnectInfo(peer));
    let resp = app
        .clone()
        .oneshot(
            Request::get("/status/demo.json")
                .body(Body::empty())
                .expect("req"),
        )
        .await
        .expect("call");
    assert_eq!(
        resp.headers()[header::CACHE_CONTROL],
        "public, max-age=3, stale-while-revalidate=1"
    );
    assert!(resp.headers().get(header::SET_COOKIE).is_none());
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    let served: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(
        (served["state"].clone(), served["version"].clone()),
        (file["state"].clone(), file["version"].clone())
    );
    let resp = app
        .oneshot(Request::get("/metrics").body(Body::empty()).expect("req"))
        .await
        .expect("metrics");
    let text = String::from_utf8(
        axum::body::to_bytes(resp.into_body(), 1 << 22)
            .await
            .expect("b")
            .to_vec(),
    )
    .expect("utf8");
    for want in [
        "wr_status_publishes_total{event=\"demo\",reason=\"transition\"}",
        "wr_status_publishes_total{event=\"demo\",reason=\"throttle\"}",
        "wr_status_latch_skips_total{event=\"demo\"}",
    ] {
        assert!(text.contains(want), "{want} missing from /metrics");
    }
}
