//! Proof-of-work on join: the operator sets the difficulty live (audited), the status document
//! publishes it, a new join without a valid proof gets 403, a solved challenge is spent once,
//! re-joins with a join token need no proof. Also measures the cost of solving.

mod oneshot;
use oneshot::call;

use axum::extract::connect_info::MockConnectInfo;
use axum::http::StatusCode;
use sale_common::{ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use waiting_room::pow::{solve, zero_bits};
use waiting_room::store::memory::MemoryStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;

#[tokio::test]
async fn proof_of_work_is_set_live_and_spent_once() {
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), clock)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    let app = router(st).layer(MockConnectInfo(peer));
    let admin = [
        ("authorization", "Bearer demo-admin-token"),
        ("x-operator", "carol"),
    ];
    let join = "/api/events/demo/join";
    let (s, _) = call(&app, "POST", join, &[], None).await;
    assert_eq!(s, StatusCode::OK, "off by default");
    let (s, _) = call(
        &app,
        "PATCH",
        "/admin/events/demo",
        &admin,
        Some(json!({"pow_difficulty": 29})),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, f) = call(
        &app,
        "PATCH",
        "/admin/events/demo",
        &admin,
        Some(json!({"pow_difficulty": 12})),
    )
    .await;
    assert_eq!((s, &f["pow_difficulty"]), (StatusCode::OK, &json!(12)));
    let (_, doc) = call(&app, "GET", "/status/demo.json", &[], None).await;
    assert_eq!(doc["pow_difficulty"], 12);

    let (s, p) = call(&app, "POST", join, &[], None).await;
    assert_eq!(
        (s, p["type"].as_str(), &p["difficulty"]),
        (
            StatusCode::FORBIDDEN,
            Some("/problems/pow-required"),
            &json!(12)
        )
    );
    let (s, c) = call(&app, "GET", "/api/events/demo/pow", &[], None).await;
    assert_eq!((s, &c["difficulty"]), (StatusCode::OK, &json!(12)));
    let challenge = c["challenge"].as_str().expect("challenge").to_owned();
    let (solution, _) = solve(&challenge, 12);
    let proof = [
        ("x-pow-challenge", challenge.as_str()),
        ("x-pow-solution", solution.as_str()),
    ];
    let (s, j) = call(&app, "POST", join, &proof, None).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = call(&app, "POST", join, &proof, None).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "a challenge is spent once");
    let bad = (0..)
        .map(|n: u32| n.to_string())
        .find(|x| zero_bits(&challenge, x) < 12)
        .expect("bad");
    let (s, _) = call(
        &app,
        "POST",
        join,
        &[("x-pow-challenge", &challenge), ("x-pow-solution", &bad)],
        None,
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let token = format!("Bearer {}", j["join_token"].as_str().expect("token"));
    let (s, again) = call(&app, "POST", join, &[("authorization", &token)], None).await;
    assert_eq!(
        (s, &again["visitor_id"]),
        (StatusCode::OK, &j["visitor_id"]),
        "re-join needs no proof"
    );

    call(
        &app,
        "PATCH",
        "/admin/events/demo",
        &admin,
        Some(json!({"pow_difficulty": 0})),
    )
    .await;
    let (s, _) = call(&app, "POST", join, &[], None).await;
    assert_eq!(s, StatusCode::OK, "switched off live");
    let (_, log) = call(&app, "GET", "/admin/events/demo/audit", &admin, None).await;
    let pows: Vec<(Value, Value)> = log
        .as_array()
        .expect("log")
        .iter()
        .filter(|e| e["action"] == "set_pow_difficulty")
        .map(|e| (e["old"].clone(), e["new"].clone()))
        .collect();
    assert_eq!(pows, vec![(json!(0), json!(12)), (json!(12), json!(0))]);
}

/// Measures the client's cost: mean hashes per solution and hashes per second on this machine
/// (printed; run with `--nocapture`). The mean must be near 2^bits.
#[test]
fn proof_of_work_cost_is_about_two_to_the_difficulty_hashes() {
    let pow = waiting_room::pow::Pow::new(b"measure");
    let ev = waiting_room::domain::EventId::parse("demo").expect("id");
    let bits = 12;
    let (runs, start) = (64u64, Instant::now());
    let mut hashes = 0;
    for i in 0..runs {
        let (c, _) = pow.issue(&ev, T0 + i as i64);
        hashes += solve(&c, bits).1;
    }
    let secs = start.elapsed().as_secs_f64();
    let mean = hashes as f64 / runs as f64;
    eprintln!(
        "pow: {bits} bits, {runs} solutions, mean {mean:.0} hashes, {:.0} hashes/s",
        hashes as f64 / secs
    );
    assert!(
        (1024.0..16384.0).contains(&mean),
        "mean {mean} far from 4096"
    );
}

/// A solved challenge is spent once across every node (issue 11 item 6): two nodes on one
/// store, the second refuses the proof the first accepted, though its own replay cache never saw
/// it.
#[tokio::test]
async fn a_challenge_is_spent_once_across_nodes() {
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let store = Arc::new(MemoryStore::new());
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    let a = AppState::new(cfg.clone(), store.clone(), clock.clone())
        .await
        .expect("node a");
    let node_a = router(a).layer(MockConnectInfo(peer));
    let admin = [
        ("authorization", "Bearer demo-admin-token"),
        ("x-operator", "carol"),
    ];
    let patch = Some(json!({"pow_difficulty": 8}));
    let (s, _) = call(&node_a, "PATCH", "/admin/events/demo", &admin, patch).await;
    assert_eq!(s, StatusCode::OK);
    let b = AppState::new(cfg, store, clock).await.expect("node b");
    let node_b = router(b).layer(MockConnectInfo(peer));
    let (_, c) = call(&node_a, "GET", "/api/events/demo/pow", &[], None).await;
    let challenge = c["challenge"].as_str().expect("challenge").to_owned();
    let (solution, _) = solve(&challenge, 8);
    let proof = [
        ("x-pow-challenge", challenge.as_str()),
        ("x-pow-solution", solution.as_str()),
    ];
    let join = "/api/events/demo/join";
    let (s, _) = call(&node_a, "POST", join, &proof, None).await;
    assert_eq!(s, StatusCode::OK, "node a accepts the proof");
    let (s, p) = call(&node_b, "POST", join, &proof, None).await;
    assert_eq!(
        (s, p["title"].as_str()),
        (StatusCode::FORBIDDEN, Some("challenge already used")),
        "node b refuses the same proof: {p}"
    );
}
