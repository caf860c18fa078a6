//! Key directory rotation: the next key is in the JWKS before any token is signed with it, and
//! a retired key stays in the JWKS until the last token it signed has expired. Time is a
//! `ManualClock`; the directory is re-read with `reload_keys` (the loop does it every 5 s).

use sale_common::{Clock, ManualClock, SharedClock};
use std::collections::HashSet;
use std::sync::Arc;
use waiting_room::domain::{Admission, EventId};
use waiting_room::keys::{self, Generated};
use waiting_room::store::memory::MemoryStore;
use waiting_room::{AppState, Config};

const T0: i64 = 1_764_500_000;

fn jwks_kids(st: &AppState) -> HashSet<String> {
    st.0.signer.jwks()["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .map(|k| k["kid"].as_str().expect("kid").to_owned())
        .collect()
}

/// Signs a 600-second admission at `now` and returns (token, kid in its header).
fn sign(st: &AppState, now: i64) -> (String, String) {
    let a = Admission {
        jti: format!("j{now}"),
        iat: now,
        exp: now + 600,
    };
    let claims =
        st.0.signer
            .claims(&EventId::parse("demo").expect("id"), "v", &a);
    let token = st.0.signer.sign(&claims).expect("sign");
    let kid = jsonwebtoken::decode_header(&token)
        .expect("header")
        .kid
        .expect("kid");
    (token, kid)
}

#[tokio::test]
async fn rotation_publishes_before_signing_and_retires_after_the_last_token() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path().join("keys");
    assert!(matches!(
        keys::generate(&d, T0).expect("gen"),
        Generated::Active(_)
    ));
    assert!(matches!(
        keys::generate(&d, T0).expect("gen"),
        Generated::Next(_)
    ));
    assert!(keys::generate(&d, T0).is_err(), "one next key at a time");

    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    cfg.signing_key_dir = Some(d.clone());
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), shared)
        .await
        .expect("state");
    let first = jwks_kids(&st);
    assert_eq!(first.len(), 2, "active and next are published");
    let (old_token, old_kid) = sign(&st, T0);
    assert!(first.contains(&old_kid));

    assert!(
        keys::rotate(&d, T0 + 10, 660, keys::MIN_PUBLISHED_SECS).is_err(),
        "next too fresh"
    );
    clock.advance_ms(200_000);
    keys::rotate(&d, clock.now_secs(), 660, keys::MIN_PUBLISHED_SECS).expect("rotate");
    st.reload_keys();
    let (new_token, new_kid) = sign(&st, clock.now_secs());
    assert_ne!(new_kid, old_kid);
    assert!(
        first.contains(&new_kid),
        "the new signing key was in the JWKS before it signed"
    );
    let after = jwks_kids(&st);
    assert_eq!(after.len(), 3, "active, retired, new next");
    assert!(
        after.contains(&old_kid),
        "the retired key stays while its tokens live"
    );
    st.0.signer
        .verify(&old_token)
        .expect("old token still verifies");
    st.0.signer.verify(&new_token).expect("new token verifies");

    // The last token of the old key was signed at T0 + 200 at the latest and lives 600 s; the
    // retired key is kept 660 s (lifetime + leeway) after the rotation, then leaves the JWKS.
    clock.advance_ms(659_000);
    st.reload_keys();
    assert!(jwks_kids(&st).contains(&old_kid));
    clock.advance_ms(2_000);
    st.reload_keys();
    let later = jwks_kids(&st);
    assert!(
        !later.contains(&old_kid),
        "retired key gone after its tokens expired"
    );
    assert_eq!(later.len(), 2);
    assert!(st.0.signer.verify(&old_token).is_err());

    // A broken directory never replaces working keys.
    std::fs::write(d.join("active.pem"), "not a key").expect("write");
    st.reload_keys();
    assert_eq!(sign(&st, clock.now_secs()).1, new_kid);
}

/// Case W11 (the waiting room's half): a token starts `max_clock_skew_secs` before it is issued,
/// so a booking door whose clock is behind accepts it at once, and the policy both sides must
/// share is published beside the JWKS.
#[tokio::test]
async fn case_w11_tokens_start_max_clock_skew_before_issue_and_the_policy_is_published() {
    use tower::ServiceExt;
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    cfg.max_clock_skew_secs = 45;
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), clock)
        .await
        .expect("state");
    let a = Admission {
        jti: "j".into(),
        iat: T0,
        exp: T0 + 600,
    };
    let c =
        st.0.signer
            .claims(&EventId::parse("demo").expect("id"), "v", &a);
    assert_eq!((c.iat, c.nbf, c.exp), (T0, T0 - 45, T0 + 600));
    let req = axum::http::Request::get("/.well-known/admission-policy.json")
        .body(axum::body::Body::empty())
        .expect("request");
    let resp = waiting_room::router(st).oneshot(req).await.expect("answer");
    assert_eq!(resp.status(), 200);
    let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .expect("body");
    let p: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(p["max_clock_skew_secs"], 45);
    assert_eq!(p["door_exp_leeway_secs"], 0);
    assert_eq!(
        (p["issuer"].as_str(), p["audience"].as_str()),
        (Some("waiting-room"), Some("booking-core"))
    );
}

/// Case W09 (the waiting room's half): `keys revoke` takes a retired key out of the JWKS at the
/// next directory re-read, long before its `keep_secs` ends; the active key cannot be revoked.
#[tokio::test]
async fn case_w09_a_revoked_key_leaves_the_jwks_at_the_next_reread() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path().join("keys");
    keys::generate(&d, T0).expect("active");
    keys::generate(&d, T0).expect("next");
    let clock = ManualClock::new(T0 * 1000);
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    cfg.signing_key_dir = Some(d.clone());
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), Arc::new(clock.clone()))
        .await
        .expect("state");
    let (_, old_kid) = sign(&st, T0);
    keys::rotate(&d, T0 + 200, 660, keys::MIN_PUBLISHED_SECS).expect("rotate");
    clock.set_ms((T0 + 201) * 1000);
    st.reload_keys();
    assert!(
        jwks_kids(&st).contains(&old_kid),
        "retired: still published"
    );
    let (_, new_kid) = sign(&st, T0 + 201);
    assert!(
        keys::revoke(&d, &new_kid).is_err(),
        "the active key is not revoked"
    );
    keys::revoke(&d, &old_kid).expect("revoke the retired key");
    assert!(keys::revoke(&d, &old_kid).is_err(), "already gone");
    st.reload_keys();
    assert!(
        !jwks_kids(&st).contains(&old_kid),
        "revoked: out of the JWKS at once, not at T0 + 860"
    );
    assert!(jwks_kids(&st).contains(&new_kid));
}

/// Two processes refilling one emptied key directory at once (two `up` starting beside each
/// other, `keys::ensure_active`): both succeed, exactly one of them made the key, and the
/// directory keeps that one key whole, with no temporary left (no next key either). Before,
/// both wrote the one temporary `active.tmp` through `keys::generate`: one's rename took the
/// other's file away (an error, "No such file or directory", in round 0 of 50).
#[test]
fn two_starts_refilling_one_key_dir_both_succeed_and_exactly_one_key_is_made() {
    for round in 0..50 {
        let dir = tempfile::tempdir().expect("tempdir");
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (dir, barrier) = (dir.path().to_path_buf(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    keys::ensure_active(&dir).map_err(|e| format!("{e:#}"))
                })
            })
            .collect();
        let made: Vec<Result<bool, String>> = writers
            .into_iter()
            .map(|w| w.join().expect("thread"))
            .collect();
        let mut made: Vec<bool> = made
            .into_iter()
            .map(|m| m.unwrap_or_else(|e| panic!("round {round}: {e}")))
            .collect();
        made.sort();
        assert_eq!(made, vec![false, true], "round {round}: one maker");
        keys::load(dir.path(), T0).expect("one whole key");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["active.pem".to_owned()], "round {round}");
    }
}

/// A key file that is not an Ed25519 PKCS#8 PEM says what was expected, naming the file
/// (pkcs8 alone said "PEM preamble contains invalid data (NUL byte)" for plain text).
#[test]
fn a_malformed_key_file_says_what_was_expected() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("active.pem"), "not a key\n").expect("write");
    let err = format!("{:#}", keys::load(dir.path(), T0).expect_err("must refuse"));
    assert!(err.contains("active.pem"), "{err}");
    assert!(
        err.contains("not an Ed25519 private key in PKCS#8 PEM"),
        "{err}"
    );
}
