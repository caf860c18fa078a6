//! Router tests of liveness, session end, the status document's measured figures, rate changes,
//! pause and the operator audit trail. Time is a `ManualClock`; the admitter is stepped by hand.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use sale_common::{Clock, ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::admitter::{Admitter, LivenessRules, Outcome};
use waiting_room::domain::{EventId, VisitorId};
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const ADMIN: &str = "demo-admin-token";
const SERVICE: &str = "demo-service-token";

struct App {
    router: Router,
    clock: ManualClock,
    store: Arc<dyn QueueStore>,
    state: AppState,
}

async fn app() -> App {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let state = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
    App {
        router: router(state.clone()).layer(MockConnectInfo(peer)),
        clock,
        store,
        state,
    }
}

async fn call(
    app: &App,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
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
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

fn demo() -> EventId {
    EventId::parse("demo").expect("id")
}

fn admitter(app: &App, silence_ms: u64) -> Admitter {
    let rules = LivenessRules {
        silence_ms,
        ..LivenessRules::default()
    };
    Admitter::new(app.store.clone(), demo(), 100, 60).with_rules(rules)
}

async fn tick(app: &App, adm: &mut Admitter, ms: i64) -> u64 {
    let mut invited = 0;
    for _ in 0..ms / 100 {
        app.clock.advance_ms(100);
        if let Outcome::Advanced {
            moved, returned, ..
        } = adm.step(app.clock.now_ms()).await.expect("step")
        {
            invited += moved + returned;
        }
    }
    app.state.refresh_status(&demo()).await;
    invited
}

async fn join(app: &App) -> (String, Value) {
    let (s, j) = call(app, "POST", "/api/events/demo/join", &[], None).await;
    assert_eq!(s, StatusCode::OK);
    (bearer(j["join_token"].as_str().expect("token")), j)
}

#[tokio::test]
async fn heartbeat_status_document_and_session_end() {
    let app = app().await;
    let mut adm = admitter(&app, 30_000);
    adm.step(app.clock.now_ms()).await.expect("open");
    app.store
        .set_knobs(&demo(), Some(1.0), Some(1))
        .await
        .expect("knobs");
    let (t1, _) = join(&app).await;
    let (t2, _) = join(&app).await;
    tick(&app, &mut adm, 500).await;
    let hb = "/api/events/demo/heartbeat";
    let (s, h) = call(&app, "POST", hb, &[("authorization", &t2)], None).await;
    assert_eq!((s, h["place"].as_str()), (StatusCode::OK, Some("ready")));
    assert_eq!(h["heartbeat_interval_ms"], 10_000);
    let (s, _) = call(
        &app,
        "POST",
        hb,
        &[("authorization", "Bearer forged")],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = call(&app, "POST", hb, &[], None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    tick(&app, &mut adm, 2000).await;
    let (s, a) = call(
        &app,
        "POST",
        "/api/events/demo/admission",
        &[("authorization", &t1)],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let jti = app
        .state
        .0
        .signer
        .verify(a["admission_token"].as_str().expect("t"))
        .expect("ok")
        .jti;
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    for k in [
        "poll_interval_ms",
        "heartbeat_interval_ms",
        "ready_window",
        "admitted_per_sec",
    ] {
        assert!(doc[k].is_number(), "{k} in {doc}");
    }
    assert_eq!(doc["wait"]["basis"], "configured", "{doc}");
    assert_eq!(doc["active"], 1);

    let end = "/internal/events/demo/sessions/end";
    let svc = bearer(SERVICE);
    let (s, _) = call(
        &app,
        "POST",
        end,
        &[("authorization", "Bearer wrong-token-0123456789")],
        Some(json!({"jti": jti})),
    )
    .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, _) = call(
        &app,
        "POST",
        end,
        &[("authorization", &svc)],
        Some(json!({})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, r) = call(
        &app,
        "POST",
        end,
        &[("authorization", &svc)],
        Some(json!({"jti": jti})),
    )
    .await;
    assert_eq!((s, r["ended"].as_bool()), (StatusCode::OK, Some(true)));
    let (s, r) = call(
        &app,
        "POST",
        end,
        &[("authorization", &svc)],
        Some(json!({"jti": jti})),
    )
    .await;
    assert_eq!(
        (s, r["already_ended"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    let other = json!({"visitor_id": VisitorId::random().as_str()});
    let (s, _) = call(&app, "POST", end, &[("authorization", &svc)], Some(other)).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    assert_eq!(doc["active"], 0, "the ended session no longer counts");

    // With history the wait estimate is measured.
    tick(&app, &mut adm, 15_000).await;
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    assert_eq!(doc["wait"]["basis"], "measured", "{doc}");
}

#[tokio::test]
async fn rate_lowered_mid_sale_next_minute_stays_within_new_rate() {
    let app = app().await;
    let mut adm = admitter(&app, 3_600_000);
    adm.step(app.clock.now_ms()).await.expect("open");
    app.store
        .set_knobs(&demo(), Some(50.0), Some(1_000_000))
        .await
        .expect("knobs");
    for _ in 0..2000 {
        app.store
            .join(&demo(), &VisitorId::random(), app.clock.now_ms(), 0)
            .await
            .expect("join");
    }
    let before = tick(&app, &mut adm, 10_000).await;
    assert!((495..=500).contains(&before), "50/s for 10 s: {before}");
    let patch = json!({"admit_rate": 5.0});
    let h = [
        ("authorization", bearer(ADMIN)),
        ("x-operator", "alice".to_owned()),
    ];
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (s, _) = call(&app, "PATCH", "/admin/events/demo", &h, Some(patch)).await;
    assert_eq!(s, StatusCode::OK);
    let burst = adm.burst(5.0);
    let after = tick(&app, &mut adm, 60_000).await;
    assert!(
        after as f64 <= 5.0 * 60.0 + burst,
        "{after} > 300 + {burst}"
    );
    assert!(after >= 299, "the new rate is used, not a stall: {after}");
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    let measured = doc["wait"]["places_per_sec"].as_f64().expect("rate");
    assert!((measured - 5.0).abs() < 0.5, "measured {measured}");
}

#[tokio::test]
async fn pause_stops_admissions_within_one_tick_and_everything_is_audited() {
    let app = app().await;
    let mut adm = admitter(&app, 3_600_000);
    adm.step(app.clock.now_ms()).await.expect("open");
    for _ in 0..100 {
        app.store
            .join(&demo(), &VisitorId::random(), app.clock.now_ms(), 0)
            .await
            .expect("join");
    }
    assert!(tick(&app, &mut adm, 500).await > 0);
    let admin = bearer(ADMIN);
    let h = [("authorization", admin.as_str()), ("x-operator", "bob")];
    let (s, f) = call(&app, "POST", "/admin/events/demo/pause", &h, None).await;
    assert_eq!((s, f["state"].as_str()), (StatusCode::OK, Some("paused")));
    assert_eq!(
        tick(&app, &mut adm, 100).await,
        0,
        "the next tick admits nobody"
    );
    assert_eq!(tick(&app, &mut adm, 5000).await, 0);
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    assert_eq!(
        (doc["state"].as_str(), doc["wait"]["basis"].as_str()),
        (Some("paused"), Some("held"))
    );
    call(&app, "POST", "/admin/events/demo/resume", &h, None).await;
    assert!(
        tick(&app, &mut adm, 200).await > 0,
        "resumed: the cursor moves again"
    );
    let (s, _) = call(
        &app,
        "PATCH",
        "/admin/events/demo",
        &h,
        Some(json!({"max_active": 7})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let svc = bearer(SERVICE);
    let (s, r) = call(
        &app,
        "POST",
        "/internal/events/demo/sold-out",
        &[("authorization", &svc)],
        None,
    )
    .await;
    assert_eq!((s, r["state"].as_str()), (StatusCode::OK, Some("sold_out")));
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    assert_eq!(doc["sold_out"], true, "published at once");
    let (s, _) = call(
        &app,
        "POST",
        "/internal/events/demo/sold-out",
        &[("authorization", &admin)],
        None,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::UNAUTHORIZED,
        "the admin token is not the service token"
    );

    let (s, log) = call(&app, "GET", "/admin/events/demo/audit", &h, None).await;
    assert_eq!(s, StatusCode::OK);
    let log = log.as_array().expect("array");
    // The admitter's opening recorded the draw's publication first (issue 15 item 1).
    assert_eq!(log[0]["action"], "draw_published");
    assert_eq!(log[0]["operator"], "service");
    let rows: Vec<(String, String, Value, Value)> = log[1..]
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().expect("str").to_owned();
            assert!(e["at"].as_i64().expect("at") >= T0);
            (
                s("operator"),
                s("action"),
                e["old"].clone(),
                e["new"].clone(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "bob".into(),
                "paused".into(),
                json!("open"),
                json!("paused")
            ),
            (
                "bob".into(),
                "resume".into(),
                json!("paused"),
                json!("open")
            ),
            ("bob".into(), "set_max_active".into(), json!(500), json!(7)),
            (
                "service".into(),
                "sold_out".into(),
                json!("open"),
                json!("sold_out")
            ),
        ]
    );
    let (s, _) = call(&app, "GET", "/admin/events/demo/audit", &[], None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}

/// A loaded node's admitter ticks late (every 500 ms instead of every 100 ms): each late tick
/// keeps what its elapsed time earned, so the cursor still moves at the admit rate. With the
/// bucket capped at two ticks, 50/s for 10 s admitted 200 (10 per late tick), and the wait
/// estimate, which promises the rate, was wrong for every fan (seed rehearsal, issue 18 item 5).
#[tokio::test]
async fn late_ticks_still_admit_at_the_admit_rate() {
    let app = app().await;
    let mut adm = admitter(&app, 3_600_000);
    adm.step(app.clock.now_ms()).await.expect("open");
    app.store
        .set_knobs(&demo(), Some(50.0), Some(1_000_000))
        .await
        .expect("knobs");
    for _ in 0..1000 {
        app.store
            .join(&demo(), &VisitorId::random(), app.clock.now_ms(), 0)
            .await
            .expect("join");
    }
    adm.step(app.clock.now_ms()).await.expect("first tick");
    let mut invited = 0;
    for _ in 0..20 {
        app.clock.advance_ms(500);
        if let Outcome::Advanced {
            moved, returned, ..
        } = adm.step(app.clock.now_ms()).await.expect("step")
        {
            invited += moved + returned;
        }
    }
    assert!(
        (495..=500).contains(&invited),
        "50/s for 10 s in late ticks: {invited}"
    );
    // Never more than one second's worth at once, however late the tick.
    app.clock.advance_ms(10_000);
    match adm.step(app.clock.now_ms()).await.expect("very late tick") {
        Outcome::Advanced {
            moved, returned, ..
        } => {
            assert!(
                moved + returned <= 50,
                "one second's worth at most: {}",
                moved + returned
            )
        }
        other => panic!("{other:?}"),
    }
}

async fn active(app: &App) -> Value {
    call(app, "GET", "/status/demo.json", &[], None).await.1["active"].clone()
}

/// `sessions/end-batch` (the booking core's outbox sends one per event and poll): each jti
/// counted once as ended, already ended or unknown, the slots freed at once, never a 404 (an
/// unknown event's jtis are unknown, so the booking core reads a 404 as a waiting room without
/// the route), and a body outside 1..=256 jtis of 1..=128 characters a 422.
#[tokio::test]
async fn sessions_end_in_one_batch_call() {
    let app = app().await;
    let mut adm = admitter(&app, 30_000);
    adm.step(app.clock.now_ms()).await.expect("open");
    app.store
        .set_knobs(&demo(), Some(100.0), Some(10))
        .await
        .expect("knobs");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        tokens.push(join(&app).await.0);
    }
    tick(&app, &mut adm, 1000).await;
    let mut jtis = Vec::new();
    for t in &tokens {
        let claim = "/api/events/demo/admission";
        let (s, a) = call(&app, "POST", claim, &[("authorization", t)], None).await;
        assert_eq!(s, StatusCode::OK, "{a}");
        let token = a["admission_token"].as_str().expect("token");
        jtis.push(app.state.0.signer.verify(token).expect("ok").jti);
    }
    assert_eq!(active(&app).await, 3);

    let url = "/internal/events/demo/sessions/end-batch";
    let svc = bearer(SERVICE);
    let auth = [("authorization", svc.as_str())];
    let body = json!({"jtis": [jtis[0], jtis[1], "no-such-jti"]});
    let (s, r) = call(&app, "POST", url, &[], Some(body.clone())).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{r}");
    let (s, r) = call(&app, "POST", url, &auth, Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r, json!({"ended": 2, "already_ended": 0, "unknown": 1}));
    assert_eq!(active(&app).await, 1, "two slots freed at once");
    let again = json!({"jtis": [jtis[0], jtis[2]]});
    let (s, r) = call(&app, "POST", url, &auth, Some(again)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r, json!({"ended": 1, "already_ended": 1, "unknown": 0}));
    assert_eq!(active(&app).await, 0);

    let elsewhere = "/internal/events/no-such-event/sessions/end-batch";
    let (s, r) = call(&app, "POST", elsewhere, &auth, Some(json!({"jtis": ["a"]}))).await;
    assert_eq!(s, StatusCode::OK, "never a 404: {r}");
    assert_eq!(r, json!({"ended": 0, "already_ended": 0, "unknown": 1}));

    let too_many: Vec<String> = (0..257).map(|i| format!("j{i}")).collect();
    for bad in [
        json!({"jtis": []}),
        json!({"jtis": too_many}),
        json!({"jtis": [""]}),
        json!({"jtis": ["x".repeat(129)]}),
        json!({"jti": jtis[0]}),
        json!({"jtis": "one"}),
    ] {
        let (s, r) = call(&app, "POST", url, &auth, Some(bad.clone())).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{bad} → {r}");
        assert_eq!(r["status"], 422, "a problem body: {r}");
    }
}

/// The seed rehearsal's wait check (70.0 % of fans inside the range shown, goal 90 %): while the
/// pre-queue is being numbered (`opening`, public `open`) the document's wait was `held`, all
/// speeds 0, and the page fell back to the admit rate as a point (low = high). It is the
/// configured range now, from a third of the admit rate to the admit rate, as right after opening.
#[tokio::test]
async fn while_the_prequeue_is_numbered_the_wait_is_the_configured_range() {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    let state = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
    let app = App {
        router: router(state.clone()).layer(MockConnectInfo(peer)),
        clock,
        store,
        state,
    };
    for _ in 0..3 {
        join(&app).await;
    }
    assert_eq!(app.store.begin_open(&demo()).await.expect("begin"), 3);
    assert_eq!(app.store.open_chunk(&demo(), 1).await.expect("chunk"), 2);
    app.state.refresh_status(&demo()).await;
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    let rate = doc["admit_rate"].as_f64().expect("admit_rate");
    assert!(rate > 0.0, "{doc}");
    let w = &doc["wait"];
    assert_eq!(
        (&doc["state"], &w["basis"]),
        (&json!("open"), &json!("configured")),
        "{doc}"
    );
    assert_eq!(w["high_places_per_sec"].as_f64(), Some(rate), "{doc}");
    let low = w["low_places_per_sec"].as_f64().expect("low");
    assert!((low - rate / 3.0).abs() < 0.01, "{doc}");
    // Numbered and open: still the configured range until a block of history is measured.
    assert_eq!(app.store.open_chunk(&demo(), 10).await.expect("chunk"), 0);
    app.clock.advance_ms(1_000);
    app.state.refresh_status(&demo()).await;
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    assert_eq!(
        (&doc["state"], &doc["wait"]["basis"]),
        (&json!("open"), &json!("configured")),
        "{doc}"
    );
}
