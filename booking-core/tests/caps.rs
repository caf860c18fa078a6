//! Caps and channels (seed 001 "Caps and Abuse", "Hold Lifetimes Are Policy"), on SQLite and
//! PostgreSQL: one live hold per admission as a slot taken inside the claiming transaction
//! (race test: the old check-then-insert lets two holds win; the slot lets exactly one), the
//! per-visitor cap under concurrency, the per-admission rate limit, and hold/payment lifetimes
//! chosen by channel.

mod support;

use std::sync::Arc;

use booking_core::Reconciler;
use sale_common::Clock;
use serde_json::json;
use support::{claims, Backend, Harness, SHOW};
use tokio::sync::Barrier;

on_both!(
    one_live_hold_per_admission_race,
    visitor_cap_holds_under_concurrency,
    hold_creation_is_rate_limited_per_admission,
    a_request_over_the_rate_limit_leaves_its_key_unused,
    a_refused_request_sent_again_over_the_limit_is_refused_again,
    channel_picks_hold_and_payment_lifetimes,
    a_lapsed_holds_sweep_keeps_the_session_of_the_hold_after_it,
);

/// STYLE.md race test. Without the guard (count the admission's live holds, then insert; a
/// barrier makes both requests read before either writes) two holds win; with the slot taken
/// in the claiming transaction, 20 concurrent requests of one admission with different
/// idempotency keys give exactly one 201 and nineteen 409 `hold-exists`.
async fn one_live_hold_per_admission_race(b: Backend) {
    let h = Harness::on_with(b, |c| c.hold_rate_per_min = 0).await;
    let db = h.state.db.clone();
    let now = h.clock.now_ms();
    let barrier = Arc::new(Barrier::new(2));
    let unguarded: Vec<_> = (0..2)
        .map(|i| {
            let (db, barrier) = (db.clone(), barrier.clone());
            tokio::spawn(async move {
                let live: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM holds WHERE admission_jti = 'jti-race' AND status = 'HELD' AND expires_at > $1",
                )
                .bind(now)
                .fetch_one(&db)
                .await
                .unwrap();
                barrier.wait().await; // the injected pause between the check and the write
                if live == 0 {
                    sqlx::query("INSERT INTO holds (id, show_id, visitor_id, admission_jti, status, amount_cents, expires_at, payment_expires_at, created_at) VALUES ($1, 'demo', 'v', 'jti-race', 'HELD', 0, $2, $2, $3)")
                        .bind(format!("unguarded-{i}"))
                        .bind(now + 480_000)
                        .bind(now)
                        .execute(&db)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for t in unguarded {
        t.await.unwrap();
    }
    let both: i64 = h
        .count(
            "SELECT COUNT(*) FROM holds WHERE admission_jti = $1 AND status = 'HELD'",
            "jti-race",
        )
        .await;
    assert_eq!(both, 2, "without the guard both holds win");

    let t = h.token("racer");
    let tries = (0..20).map(|i| {
        let (h, t) = (&h, &t);
        async move {
            h.hold(t, &format!("key-{i}"), &[&format!("B-1-{}", i % 12 + 1)])
                .await
        }
    });
    let results = futures::future::join_all(tries).await;
    let won = results.iter().filter(|r| r.0 == 201).count();
    assert_eq!(won, 1, "{results:?}");
    for (st, body) in results.iter().filter(|r| r.0 != 201) {
        assert_eq!(*st, 409, "{body}");
        assert_eq!(body["type"], "/problems/hold-exists", "{body}");
    }
    let held = h
        .count(
            "SELECT COUNT(*) FROM holds WHERE admission_jti = $1 AND status = 'HELD'",
            "jti-racer",
        )
        .await;
    assert_eq!(held, 1);
    // the slot frees when the hold lapses: the same admission may hold again
    h.clock.advance_ms(481_000);
    let (st, body) = h.hold(&t, "after-lapse", &["C-1-1"]).await;
    assert_eq!(st, 201, "{body}");
}

/// One visitor with five admissions (five jti) asks concurrently: at most
/// `max_holds_per_visitor` (2) win, the others get 409 `visitor-hold-cap`.
async fn visitor_cap_holds_under_concurrency(b: Backend) {
    let h = Harness::on(b).await;
    let now_s = h.now_s();
    let tokens: Vec<String> = (0..5)
        .map(|i| {
            h.signer
                .sign(&claims("same-fan", SHOW, &format!("jti-sf-{i}"), now_s))
        })
        .collect();
    let tries = tokens.iter().enumerate().map(|(i, t)| {
        let h = &h;
        async move {
            h.hold(t, &format!("k{i}"), &[&format!("D-2-{}", i + 1)])
                .await
        }
    });
    let results = futures::future::join_all(tries).await;
    assert_eq!(
        results.iter().filter(|r| r.0 == 201).count(),
        2,
        "{results:?}"
    );
    for (st, body) in results.iter().filter(|r| r.0 != 201) {
        assert_eq!(
            (*st, body["type"].as_str()),
            (409, Some("/problems/visitor-hold-cap"))
        );
        assert_eq!(body["max_holds"], 2);
    }
}

async fn hold_creation_is_rate_limited_per_admission(b: Backend) {
    let h = Harness::on_with(b, |c| c.hold_rate_per_min = 3).await;
    let t = h.token("rapid");
    for i in 0..3 {
        // unknown seats: refused, but each attempt still counts against the admission's rate
        let (st, _) = h.hold(&t, &format!("r{i}"), &["Z-1-1"]).await;
        assert_eq!(st, 422);
    }
    let r = h
        .http
        .post(format!("{}/api/shows/{SHOW}/holds", h.base))
        .bearer_auth(&t)
        .header("Idempotency-Key", "r4")
        .json(&json!({"seats": ["A-1-1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "20");
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["type"], "/problems/hold-rate-limited");
    let (st, _) = h.hold(&h.token("other"), "x", &["A-1-1"]).await;
    assert_eq!(st, 201, "another admission is not limited");
}

/// A show with a hold rate limit of 1 a minute per admission, seat `A-1-1` held by another fan.
async fn one_hold_a_minute_a_1_1_held(b: Backend) -> Harness {
    let h = Harness::on_with(b, |c| c.hold_rate_per_min = 1).await;
    let (st, body) = h.hold(&h.token("holder"), "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "{body}");
    h
}

/// A request the rate limiter refuses writes nothing, not even its key (newcomer review: on
/// PostgreSQL the read before the hold stored its refusal first, so after a 429 the same key with
/// another body was `422 idempotency-key-reused`, still a minute later). Limit 1 a minute: the
/// admission spends it on a refused request, a request for a held seat gets 429, and once a
/// token is back the same key with another body holds.
async fn a_request_over_the_rate_limit_leaves_its_key_unused(b: Backend) {
    let h = one_hold_a_minute_a_1_1_held(b).await;
    let t = h.token("limited");
    let (st, body) = h.hold(&t, "spent", &["A-1-1", "A-1-2"]).await;
    assert_eq!(st, 409, "{body}");
    let (st, body) = h.hold(&t, "k2", &["A-1-1"]).await;
    assert_eq!(
        (st, body["type"].as_str()),
        (429, Some("/problems/hold-rate-limited")),
        "{body}"
    );
    assert_eq!(
        h.count("SELECT COUNT(*) FROM idempotency WHERE key = $1", "k2")
            .await,
        0,
        "nothing stored for a 429"
    );
    h.clock.advance_ms(61_000);
    let (st, body) = h.hold(&t, "k2", &["A-1-3"]).await;
    assert_eq!(st, 201, "the key was never used: {body}");
}

/// B12 over the rate limit (newcomer review: 25 identical requests sent at once with one token
/// left: those after the first's quick 409 found no owner in flight and were answered 429): a
/// request identical to one refused, sent again while its refusal still holds, is refused
/// again with the same 409 and does not count; a new request is limited.
async fn a_refused_request_sent_again_over_the_limit_is_refused_again(b: Backend) {
    let h = one_hold_a_minute_a_1_1_held(b).await;
    let t = h.token("fan");
    for _ in 0..3 {
        let (st, body) = h.hold(&t, "again", &["A-1-1", "A-1-2"]).await;
        assert_eq!(
            (st, body["type"].as_str()),
            (409, Some("/problems/seats-unavailable")),
            "{body}"
        );
    }
    let (st, body) = h.hold(&t, "new", &["A-1-3"]).await;
    assert_eq!(
        (st, body["type"].as_str()),
        (429, Some("/problems/hold-rate-limited"))
    );
}

async fn channel_picks_hold_and_payment_lifetimes(b: Backend) {
    let h = Harness::on(b).await;
    let now = h.now_s();
    let (st, web) = h.hold(&h.token("w"), "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "{web}");
    assert_eq!(
        (
            web["expires_at"].as_i64().unwrap() - now,
            web["channel"].as_str()
        ),
        (480, Some("web"))
    );
    assert_eq!(web["payment_expires_at"].as_i64().unwrap() - now, 420);
    let (st, app) = h
        .hold_with(
            &h.token("a"),
            "k",
            json!({"seats": ["A-1-2"]}),
            &[("X-Channel", "app")],
        )
        .await;
    assert_eq!(st, 201, "{app}");
    assert_eq!(app["expires_at"].as_i64().unwrap() - now, 600);
    assert_eq!(app["payment_expires_at"].as_i64().unwrap() - now, 540);
    let (st, body) = h
        .hold_with(
            &h.token("b"),
            "k",
            json!({"seats": ["A-1-3"], "channel": "app"}),
            &[],
        )
        .await;
    assert_eq!((st, body["channel"].as_str()), (201, Some("app")));
    let (st, bad) = h
        .hold_with(
            &h.token("c"),
            "k",
            json!({"seats": ["A-1-4"], "channel": "fax"}),
            &[],
        )
        .await;
    assert_eq!(
        (st, bad["type"].as_str()),
        (422, Some("/problems/unknown-channel"))
    );
    // An `X-Channel` that is not visible ASCII names no channel: refused, not ignored for the
    // default (newcomer review: the hold went to `web`).
    let raw = reqwest::header::HeaderValue::from_bytes(b"app\xe9").unwrap();
    let resp = h
        .http
        .post(format!("{}/api/shows/{}/holds", h.base, support::SHOW))
        .bearer_auth(h.token("d"))
        .header("Idempotency-Key", "k")
        .header("X-Channel", raw)
        .json(&json!({"seats": ["A-1-5"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["type"], "/problems/unknown-channel", "{body}");
    assert_eq!(h.seat_status("A-1-5").await, "free");
}

/// Newcomer review: once a hold lapsed, its admission may hold again before the reconciler
/// sweeps the lapsed one; the sweep then released the lapsed hold and ended the admission's
/// session with it, leaving the new hold HELD on an ended admission (and the fan's
/// waiting-room slot freed under it). The sweep now ends the session only when no other hold
/// of the admission is live; the new hold's own end (here the fan's release) ends it.
async fn a_lapsed_holds_sweep_keeps_the_session_of_the_hold_after_it(b: Backend) {
    let h = Harness::on(b).await;
    let t = h.token("lapser");
    let ended = || {
        h.count(
            "SELECT COUNT(*) FROM admissions_ended WHERE jti = $1",
            "jti-lapser",
        )
    };
    let (st, first) = h.hold(&t, "k1", &["A-1-1"]).await;
    assert_eq!(st, 201, "{first}");
    h.clock.advance_ms(481_000);
    let (st, second) = h.hold(&t, "k2", &["A-1-2"]).await;
    assert_eq!(st, 201, "the lapsed hold's admission holds again: {second}");
    Reconciler::new(h.state.clone())
        .step(h.clock.now_ms())
        .await
        .unwrap();
    assert_eq!(
        h.hold_view("lapser", first["hold_id"].as_str().unwrap())
            .await["status"],
        "RELEASED"
    );
    assert_eq!(
        ended().await,
        0,
        "the sweep of the lapsed hold ended the live hold's session"
    );
    let id = second["hold_id"].as_str().unwrap();
    assert_eq!(h.hold_view("lapser", id).await["status"], "HELD");
    let (st, body) = h.hold(&t, "k3", &["A-1-3"]).await;
    assert_eq!(
        (st, body["type"].as_str()),
        (409, Some("/problems/hold-exists")),
        "{body}"
    );
    assert_eq!(h.cancel_hold("lapser", &second["hold_id"]).await, 200);
    assert_eq!(
        ended().await,
        1,
        "the live hold's own release ends the session"
    );
}
