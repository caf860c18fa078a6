//! The door's JWKS cache (issue 3, "Tokens and keys"): an unknown `kid` triggers a refresh, at
//! most once per cooldown, so random `kid`s cannot make the booking core fetch on every request;
//! a key published by a rotation is picked up on its first token once the cooldown has passed.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use booking_core::door::Verifier;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::SigningKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use sale_common::{Clock, SystemClock};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A JWKS endpoint that counts its fetches and whose key set the test can change.
#[derive(Clone, Default)]
struct Jwks {
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

async fn serve_jwks(State(j): State<Jwks>) -> Json<Value> {
    j.fetches.fetch_add(1, Ordering::SeqCst);
    Json(json!({ "keys": *j.keys.lock().expect("keys") }))
}

async fn start_jwks(j: Jwks) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!(
        "http://{}/.well-known/jwks.json",
        l.local_addr().expect("addr")
    );
    let app = Router::new()
        .route("/.well-known/jwks.json", get(serve_jwks))
        .with_state(j);
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });
    url
}

fn jwk(key: &SigningKey, kid: &str) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": kid,
           "x": URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes())})
}

fn token(key: &SigningKey, kid: &str) -> String {
    let now = SystemClock.now_secs();
    let claims = json!({"iss": "waiting-room", "aud": "booking-core", "sub": "v1", "event": "demo",
                        "jti": format!("j-{kid}"), "iat": now, "nbf": now, "exp": now + 600});
    let mut h = Header::new(Algorithm::EdDSA);
    h.kid = Some(kid.into());
    let der = key.to_pkcs8_der().expect("pkcs8");
    jsonwebtoken::encode(&h, &claims, &EncodingKey::from_ed_der(der.as_bytes())).expect("sign")
}

fn verifier(url: String, cooldown: Duration) -> Verifier {
    Verifier::new(
        Some(url),
        "waiting-room",
        "booking-core",
        5,
        cooldown,
        Arc::new(SystemClock),
    )
}

#[tokio::test]
async fn random_kids_cannot_make_the_door_fetch_on_every_request() {
    let k1 = SigningKey::from_bytes(&[7; 32]);
    let jwks = Jwks::default();
    jwks.keys.lock().expect("keys").push(jwk(&k1, "k1"));
    let door = verifier(start_jwks(jwks.clone()).await, Duration::from_secs(60));

    door.verify(&token(&k1, "k1"), Some("demo"))
        .await
        .expect("genuine token");
    assert_eq!(
        jwks.fetches.load(Ordering::SeqCst),
        1,
        "first use fetches the JWKS once"
    );

    for i in 0..200 {
        let forged = token(&k1, &format!("random-{i}"));
        assert!(
            door.verify(&forged, Some("demo")).await.is_err(),
            "unknown kid {i} refused"
        );
    }
    assert_eq!(
        jwks.fetches.load(Ordering::SeqCst),
        1,
        "200 unknown kids within the cooldown cause no further fetch"
    );
    // Known keys keep working without a fetch.
    door.verify(&token(&k1, "k1"), Some("demo"))
        .await
        .expect("still valid");
    assert_eq!(jwks.fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_on_its_first_token_after_the_cooldown() {
    let k1 = SigningKey::from_bytes(&[7; 32]);
    let k2 = SigningKey::from_bytes(&[9; 32]);
    let jwks = Jwks::default();
    jwks.keys.lock().expect("keys").push(jwk(&k1, "k1"));
    let cooldown = Duration::from_millis(300);
    let door = verifier(start_jwks(jwks.clone()).await, cooldown);
    let fetched_at = Instant::now();
    door.verify(&token(&k1, "k1"), Some("demo"))
        .await
        .expect("k1");

    // The waiting room publishes k2 (rotation: published before it signs anything).
    jwks.keys.lock().expect("keys").push(jwk(&k2, "k2"));
    let early = door.verify(&token(&k2, "k2"), Some("demo")).await;
    if fetched_at.elapsed() < cooldown {
        assert!(
            early.is_err(),
            "within the cooldown the new kid is not fetched yet"
        );
        assert_eq!(jwks.fetches.load(Ordering::SeqCst), 1);
    }
    // Once the cooldown has passed (a fixed duration the door defines), the first k2 token
    // refreshes the cache and is accepted; k1 tokens stay valid (retired keys remain).
    tokio::time::sleep(cooldown.saturating_sub(fetched_at.elapsed()) + Duration::from_millis(20))
        .await;
    door.verify(&token(&k2, "k2"), Some("demo"))
        .await
        .expect("k2 after the cooldown");
    door.verify(&token(&k1, "k1"), Some("demo"))
        .await
        .expect("k1 still valid");
    assert_eq!(
        jwks.fetches.load(Ordering::SeqCst),
        2,
        "exactly one refresh for the rotation"
    );
}
