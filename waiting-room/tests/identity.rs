//! One queue place per signed identity token (`X-Identity-Token`, issue 3): concurrent joins
//! with one identity from any peer get one visitor and one place, the same one the trusted
//! identity header gives; forged and expired tokens are refused with 401 before any store call.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::Router;
use futures::future::join_all;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use sale_common::{ManualClock, Secret, SharedClock};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::domain::EventId;
use waiting_room::store::{memory::MemoryStore, QueueStore};
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const KEY: &str = "login-service-shared-key-0123456789abcdef";

fn token(key: &str, sub: &str, exp: i64) -> String {
    let c = json!({"sub": sub, "aud": "waiting-room", "iat": T0, "exp": exp});
    encode(
        &Header::new(Algorithm::HS256),
        &c,
        &EncodingKey::from_secret(key.as_bytes()),
    )
    .expect("sign")
}

async fn join(app: &Router, peer: &str, headers: &[(&str, String)]) -> (StatusCode, Value) {
    let mut req = Request::post("/api/events/demo/join");
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let mut req = req.body(Body::empty()).expect("req");
    let addr: SocketAddr = peer.parse().expect("peer");
    req.extensions_mut().insert(ConnectInfo(addr));
    let resp = app.clone().oneshot(req).await.expect("call");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .expect("body");
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn one_place_per_signed_identity_token_from_any_peer() {
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    cfg.join_rate_per_sec = 100_000;
    cfg.join_burst = 100_000;
    cfg.identity_token_key = Some(Secret::new(KEY));
    cfg.identity_header = Some("x-verified-user".into());
    cfg.trusted_proxies = vec!["10.0.0.1".parse().expect("ip")];
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let st = AppState::new(cfg, store.clone(), clock)
        .await
        .expect("state");
    waiting_room::admitter::open_event(store.as_ref(), &EventId::parse("demo").expect("id"))
        .await
        .expect("open");
    let app = router(st);
    let tok = token(KEY, "carol@example.com", T0 + 300);
    let joins = (0..200u32).map(|i| {
        let (app, tok) = (app.clone(), tok.clone());
        tokio::spawn(async move {
            let peer = format!("198.51.100.{}:5", i % 200 + 1);
            let (s, j) = join(&app, &peer, &[("x-identity-token", tok)]).await;
            assert_eq!(s, StatusCode::OK, "{j}");
            (
                j["visitor_id"].as_str().expect("id").to_owned(),
                j["queue_number"].as_u64(),
            )
        })
    });
    let seen: HashSet<(String, Option<u64>)> = join_all(joins)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();
    assert_eq!(seen.len(), 1, "one identity, one place: {seen:?}");
    let (visitor, number) = seen.into_iter().next().expect("one");
    assert_eq!(number, Some(1));
    // The trusted header with the same identity lands on the same place.
    let h = [("x-verified-user", "carol@example.com".to_owned())];
    let (_, j) = join(&app, "10.0.0.1:5", &h).await;
    assert_eq!(
        (j["visitor_id"].as_str(), j["queue_number"].as_u64()),
        (Some(&*visitor), Some(1))
    );
    // Forged, expired and garbage tokens: 401, no place.
    for bad in [
        token(
            "someone-else-s-key-0123456789abcdef0123",
            "carol@example.com",
            T0 + 300,
        ),
        token(KEY, "carol@example.com", T0 - 60),
        "not-a-jwt".to_owned(),
    ] {
        let (s, j) = join(&app, "203.0.113.7:5", &[("x-identity-token", bad)]).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{j}");
        assert_eq!(j["type"], "/problems/invalid-identity-token");
    }
}
