//! The door: algorithm confusion (W01), key encodings (W02), deep links and replay (W08), and
//! the session cookie.

mod support;

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use booking_core::door::keys;
use booking_core::door::{DoorError, Verifier};
use ed25519_dalek::pkcs8::EncodePublicKey;
use hmac::{Hmac, Mac};
use sale_common::{Clock, ManualClock};
use serde_json::json;
use sha2::Sha256;
use support::{claims, Harness, Signer, KID, SHOW};

fn b64(v: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(v)
}

fn hs256_with(secret: &[u8], payload: &serde_json::Value) -> String {
    let head = b64(json!({"alg": "HS256", "typ": "JWT", "kid": KID})
        .to_string()
        .as_bytes());
    let body = b64(payload.to_string().as_bytes());
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
    mac.update(format!("{head}.{body}").as_bytes());
    format!("{head}.{body}.{}", b64(&mac.finalize().into_bytes()))
}

fn verifier(clock: &ManualClock) -> Verifier {
    Verifier::new(
        None,
        "waiting-room",
        "booking-core",
        5,
        Duration::from_secs(10),
        Arc::new(clock.clone()),
    )
}

#[tokio::test]
async fn case_w01_alg_confusion_rejected() {
    let clock = ManualClock::new(1_764_500_000_000);
    let signer = Signer::new(7);
    let v = verifier(&clock);
    v.insert_key(KID, keys::from_jwk_x(&signer.x()).unwrap())
        .await;
    let payload = claims("v1", SHOW, "j1", clock.now_secs());
    let vk = signer.key.verifying_key();
    let pem = vk.to_public_key_pem(Default::default()).unwrap();
    let forged = [
        hs256_with(vk.as_bytes(), &payload),
        hs256_with(pem.as_bytes(), &payload),
        hs256_with(signer.x().as_bytes(), &payload),
    ];
    for t in &forged {
        assert!(
            matches!(v.verify(t, Some(SHOW)).await, Err(DoorError::Invalid(_))),
            "HS256 accepted: {t}"
        );
    }
    let body = b64(payload.to_string().as_bytes());
    let none = format!(
        "{}.{body}.",
        b64(json!({"alg": "none", "kid": KID}).to_string().as_bytes())
    );
    assert!(
        v.verify(&none, Some(SHOW)).await.is_err(),
        "alg none accepted"
    );
    let rs = format!(
        "{}.{body}.{}",
        b64(json!({"alg": "RS256", "kid": KID}).to_string().as_bytes()),
        b64(&[1u8; 256])
    );
    assert!(v.verify(&rs, Some(SHOW)).await.is_err(), "RS256 accepted");
    let genuine = signer.sign(&payload);
    assert_eq!(v.verify(&genuine, Some(SHOW)).await.unwrap().sub, "v1");
}

#[tokio::test]
async fn case_w02_every_key_encoding_verifies() {
    let clock = ManualClock::new(1_764_500_000_000);
    let signer = Signer::new(9);
    let vk = signer.key.verifying_key();
    let der = vk.to_public_key_der().unwrap();
    let pem = vk.to_public_key_pem(Default::default()).unwrap();
    let token = signer.sign(&claims("v1", SHOW, "j1", clock.now_secs()));
    let loaded = [
        keys::from_pem(&pem).unwrap(),
        keys::from_der(der.as_bytes()).unwrap(),
        keys::from_raw(vk.as_bytes()).unwrap(),
        keys::from_jwk_x(&signer.x()).unwrap(),
    ];
    for k in loaded {
        let v = verifier(&clock);
        v.insert_key(KID, k).await;
        assert!(v.verify(&token, Some(SHOW)).await.is_ok());
    }
    // DER through the raw path fails loudly at load time, not per fan at sale time.
    let Err(err) = keys::from_raw(der.as_bytes()) else {
        panic!("DER must not load as raw")
    };
    assert!(err.to_string().contains("32 bytes"), "{err}");
}

#[tokio::test]
async fn case_w08_deep_link_and_replay() {
    let h = Harness::start().await;
    let url = format!("{}/api/shows/{SHOW}/holds", h.base);
    // no token
    let r = h
        .http
        .post(&url)
        .header("Idempotency-Key", "k")
        .json(&json!({"seats": ["A-1-1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["type"], "/problems/admission-required");
    assert!(body["waiting_room"].as_str().unwrap().starts_with("http"));
    // expired (beyond the 5 s leeway), and for another event
    let now = h.now_s();
    let mut old = claims("v1", SHOW, "j-old", now - 700);
    old["exp"] = json!(now - 6);
    let other = claims("v1", "other-show", "j-other", now);
    for t in [h.signer.sign(&old), h.signer.sign(&other)] {
        let (st, b) = h.hold(&t, "k", &["A-1-1"]).await;
        assert_eq!(st, 401, "{b}");
        assert_eq!(b["type"], "/problems/admission-required");
    }
    // one token replayed from 6 tabs: one live hold
    let t = h.token("v1");
    let tabs: Vec<_> = (0..6)
        .map(|i| {
            let (h, t) = (&h, t.clone());
            async move {
                h.hold(&t, &format!("tab-{i}"), &[&format!("B-1-{}", i + 1)])
                    .await
            }
        })
        .collect();
    let results = futures::future::join_all(tabs).await;
    let won: Vec<_> = results.iter().filter(|r| r.0 == 201).collect();
    assert_eq!(won.len(), 1, "{results:?}");
    assert!(results
        .iter()
        .filter(|r| r.0 == 409)
        .all(|r| r.1["type"] == "/problems/hold-exists"));
    // another visitor cannot see or pay the hold
    let hold_id = won[0].1["hold_id"].as_str().unwrap().to_owned();
    let r = h
        .http
        .get(format!("{}/api/holds/{hold_id}", h.base))
        .bearer_auth(h.token("v2"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = h
        .http
        .get(format!("{}/api/holds/{hold_id}", h.base))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["cache-control"], "private, no-store");
}

#[tokio::test]
async fn session_sets_httponly_cookie_and_cookie_authenticates() {
    let h = Harness::start().await;
    let t = h.token("v9");
    let r = h
        .http
        .post(format!("{}/session", h.base))
        .form(&[("admission_token", t.as_str()), ("show", SHOW)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], format!("/book.html?show={SHOW}"));
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax") && cookie.contains("Path=/")
    );
    let r = h
        .http
        .get(format!("{}/api/me", h.base))
        .header("cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let me: serde_json::Value = r.json().await.unwrap();
    assert_eq!(me["visitor_id"], "v9");
    let bad = h
        .http
        .post(format!("{}/session", h.base))
        .form(&[("admission_token", "garbage"), ("show", SHOW)])
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
}

/// A request with two `Authorization` headers carries no credentials the door accepts, even
/// when both are valid tokens: 401 `admission-required` naming the headers (the first was
/// used, and a proxy checking the other would have passed a token nobody verified).
#[tokio::test]
async fn two_authorization_headers_are_refused() {
    let h = Harness::start().await;
    let (good, other) = (h.token("v1"), h.token("v2"));
    let one = h
        .http
        .get(format!("{}/api/me", h.base))
        .bearer_auth(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(one.status(), 200);
    let two = h
        .http
        .get(format!("{}/api/me", h.base))
        .header("authorization", format!("Bearer {good}"))
        .header("authorization", format!("Bearer {other}"))
        .send()
        .await
        .unwrap();
    assert_eq!(two.status(), 401);
    assert_eq!(two.headers()["content-type"], "application/problem+json");
    let p: serde_json::Value = two.json().await.unwrap();
    assert_eq!(p["type"], "/problems/admission-required");
    assert!(p["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("more than one Authorization header"));
}
