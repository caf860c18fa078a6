//! Several events at once (separate queues, knobs, status documents and figures) and join-key
//! rotation (previous keys still verify, the current key signs).

mod oneshot;
use oneshot::call;

use axum::extract::connect_info::MockConnectInfo;
use axum::http::StatusCode;
use axum::Router;
use sale_common::{Clock, ManualClock, Secret, SharedClock};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use waiting_room::admitter::Admitter;
use waiting_room::domain::{EventId, VisitorId};
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::QueueStore;
use waiting_room::tokens::JoinKeys;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const OLD_KEY: &str = "old-join-hmac-key-0123456789-0123456789";

async fn setup(cfg: Config) -> (Router, AppState, ManualClock, Arc<dyn QueueStore>) {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let st = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    (
        router(st.clone()).layer(MockConnectInfo(peer)),
        st,
        clock,
        store,
    )
}

#[tokio::test]
async fn several_events_run_side_by_side() {
    let (app, st, clock, store) = setup(Config::demo("alpha", T0, "http://127.0.0.1:8081")).await;
    let admin = [
        ("authorization", "Bearer demo-admin-token"),
        ("x-operator", "dan"),
    ];
    let create = json!({"id": "beta", "opens_at": T0, "admit_rate": 1.0, "max_active": 3});
    let (s, _) = call(&app, "POST", "/admin/events", &admin, Some(create)).await;
    assert_eq!(s, StatusCode::CREATED);
    let mut admitters: Vec<Admitter> = ["alpha", "beta"]
        .iter()
        .map(|e| Admitter::new(store.clone(), EventId::parse(e).expect("id"), 100, 60))
        .collect();
    for a in &mut admitters {
        a.step(clock.now_ms()).await.expect("open");
    }
    for (event, n) in [("alpha", 5), ("beta", 2)] {
        for k in 1..=n {
            let (_, j) = call(
                &app,
                "POST",
                &format!("/api/events/{event}/join"),
                &[],
                None,
            )
            .await;
            assert_eq!(j["queue_number"], k, "{event} numbers on its own");
        }
    }
    let (_, a) = call(&app, "POST", "/api/events/alpha/join", &[], None).await;
    let token = format!("Bearer {}", a["join_token"].as_str().expect("t"));
    let (s, _) = call(
        &app,
        "GET",
        "/api/events/beta/position",
        &[("authorization", &token)],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "a join token is for one event");
    call(&app, "POST", "/admin/events/beta/pause", &admin, None).await;
    for _ in 0..20 {
        clock.advance_ms(100);
        for a in &mut admitters {
            a.step(clock.now_ms()).await.expect("step");
        }
    }
    for e in ["alpha", "beta"] {
        st.refresh_status(&EventId::parse(e).expect("id")).await;
    }
    let (_, da) = call(&app, "GET", "/status/alpha.json", &[], None).await;
    let (_, db) = call(&app, "GET", "/status/beta.json", &[], None).await;
    assert_eq!(
        (da["state"].as_str(), db["state"].as_str()),
        (Some("open"), Some("paused"))
    );
    assert_eq!(
        (da["cursor"].as_u64(), db["cursor"].as_u64()),
        (Some(6), Some(0))
    );
    assert_eq!(
        (da["max_active"].as_u64(), db["max_active"].as_u64()),
        (Some(500), Some(3))
    );
    let (_, list) = call(&app, "GET", "/admin/events", &admin, None).await;
    assert_eq!(list.as_array().map(Vec::len), Some(2));
    let (_, audit) = call(&app, "GET", "/admin/events/alpha/audit", &admin, None).await;
    let actions: Vec<&str> = audit
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["draw_published"],
        "alpha's opening only: beta's changes are not alpha's"
    );
}

#[tokio::test]
async fn join_tokens_of_a_previous_key_still_verify_after_rotation() {
    let demo = EventId::parse("demo").expect("id");
    let old = JoinKeys::new(OLD_KEY.as_bytes()).issue(&demo, &VisitorId::random(), T0, 600);
    let hb = "/api/events/demo/heartbeat";
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let (app, ..) = setup(cfg.clone()).await;
    let (s, _) = call(
        &app,
        "POST",
        hb,
        &[("authorization", &format!("Bearer {old}"))],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "unknown key");
    cfg.join_hmac_previous_keys = vec![Secret::new(OLD_KEY)];
    let (app, st, ..) = setup(cfg).await;
    let (s, h) = call(
        &app,
        "POST",
        hb,
        &[("authorization", &format!("Bearer {old}"))],
        None,
    )
    .await;
    assert_eq!(
        (s, h["place"].as_str()),
        (StatusCode::OK, Some("unnumbered"))
    );
    let fresh = st.0.join_keys.issue(&demo, &VisitorId::random(), T0, 600);
    let kid = |t: &str| jsonwebtoken::decode_header(t).expect("h").kid.expect("kid");
    assert_ne!(kid(&fresh), kid(&old), "the current key signs");
}
