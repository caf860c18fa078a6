//! Payments at the edges (issue 13 item 5), on SQLite and PostgreSQL: identical concurrent hold
//! requests (B12), an approved payment at the hold's deadline (B13), refunds and chargebacks
//! made at the gateway (B14), and operators refunding or cancelling from the back office.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use booking_core::Reconciler;
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, ADMIN, GW_SECRET, SHOW};

on_both!(
    case_b12_identical_concurrent_holds_answer_the_stored_201_or_concurrent_request,
    case_b13_approved_at_the_deadline_is_executed_once_never_released,
);

async fn serve_another(h: &Harness) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let state = h.another_state().await;
    tokio::spawn(booking_core::serve_state(l, state, std::future::pending()));
    url
}

async fn post_hold(
    h: &Harness,
    base: &str,
    token: &str,
    key: &str,
    body: &Value,
) -> (u16, Option<String>, Value) {
    let r = h
        .http
        .post(format!("{base}/api/shows/{SHOW}/holds"))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (st, retry, r.json().await.unwrap_or(Value::Null))
}

/// B12: 20 identical requests (one key, one body) at once, on PostgreSQL through two booking-core
/// nodes on the same database, on SQLite through its one process: one hold; every answer is the
/// stored 201 with its hold id or `409 concurrent-request` with `Retry-After`; never
/// `hold-exists` or `429`, although the rate limit (5 a minute) is below 20; and the replays
/// took nothing from the limit.
async fn case_b12_identical_concurrent_holds_answer_the_stored_201_or_concurrent_request(
    b: Backend,
) {
    let h = Harness::on_with(b, |c| c.hold_rate_per_min = 5).await;
    let mut bases = vec![h.base.clone()];
    if b == Backend::Postgres {
        bases.push(serve_another(&h).await);
    }
    let t = h.token("twenty");
    let body = json!({"seats": ["A-1-1", "A-1-2"]});
    let tries = (0..20).map(|i| {
        let (h, t, body, base) = (&h, &t, &body, &bases[i % bases.len()]);
        async move { post_hold(h, base, t, "one-key", body).await }
    });
    let answers = futures::future::join_all(tries).await;
    let mut ids = HashSet::new();
    for (st, retry, v) in &answers {
        match st {
            201 => {
                ids.insert(v["hold_id"].as_str().unwrap().to_owned());
            }
            409 => {
                assert_eq!(v["type"], "/problems/concurrent-request", "{answers:?}");
                assert!(retry.is_some(), "Retry-After: {answers:?}");
            }
            _ => panic!("never {st}: {answers:?}"),
        }
    }
    assert_eq!(ids.len(), 1, "one hold id: {answers:?}");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM holds WHERE admission_jti = $1",
            "jti-twenty"
        )
        .await,
        1
    );
    // Replays afterwards are the stored 201 too, on every node.
    for base in &bases {
        let (st, _, v) = post_hold(&h, base, &t, "one-key", &body).await;
        assert_eq!(
            (st, v["hold_id"].as_str()),
            (201, ids.iter().next().map(|s| s.as_str()))
        );
    }
    // Only the one request that held took a token: four more new requests of this admission
    // pass the limiter (refused because the admission holds seats, not for the rate).
    for i in 0..4 {
        let (st, _, v) = post_hold(
            &h,
            &h.base,
            &t,
            &format!("new-{i}"),
            &json!({"seats": ["C-1-1"]}),
        )
        .await;
        assert_eq!(
            (st, v["type"].as_str()),
            (409, Some("/problems/hold-exists")),
            "request {i}: {v}"
        );
    }
}

async fn hold_expiry(h: &Harness, hold: &str) -> i64 {
    sqlx::query_scalar("SELECT expires_at FROM holds WHERE id = $1")
        .bind(hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap()
}

async fn gateway_payment(h: &Harness, pid: &str) -> Value {
    let all: Value = h
        .http
        .get(format!("{}/v1/sim/payments", h.gw))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|p| p["payment_id"] == pid)
        .cloned()
        .unwrap()
}

/// B13: the fan approved on the gateway's page, the callback was lost (and so are the webhooks).
/// At the hold's deadline the reconciler asks, sees `approved`, and executes the payment under
/// the callback's owner lock with the seat kept: PAID, the seat sold, another fan refused. The
/// late callback and further steps change nothing: one execute, one booking, one email.
async fn case_b13_approved_at_the_deadline_is_executed_once_never_released(b: Backend) {
    let h = Harness::on(b).await;
    h.faults(json!({"drop_webhook_rate": 1.0})).await;
    let t = h.token("b13");
    let (st, v) = h.hold(&t, "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "{v}");
    let hold = v["hold_id"].as_str().unwrap().to_owned();
    let (pid, lost_callback) = h.approve(&t, &hold).await;
    assert_eq!(gateway_payment(&h, &pid).await["status"], "approved");
    let deadline = hold_expiry(&h, &hold).await;
    h.clock.set_ms(deadline);
    let rec = Reconciler::new(h.state.clone());
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!((out.paid, out.released), (1, 0), "{out:?}");
    assert_eq!(gateway_payment(&h, &pid).await["status"], "completed");
    assert_eq!(h.seat_status("A-1-1").await, "sold");
    let (st, v) = h.hold(&h.token("b13-next"), "k", &["A-1-1"]).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (409, Some("/problems/seats-unavailable")),
        "{v}"
    );
    // The lost callback arrives late; the reconciler runs again: nothing more happens.
    let r = h.http.get(&lost_callback).send().await.unwrap();
    assert_eq!(r.status(), 303);
    h.clock.advance_ms(30_000);
    let again = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!((again.paid, again.released), (0, 0), "{again:?}");
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    for (sql, want) in [
        ("SELECT COUNT(*) FROM bookings WHERE hold_id = $1", 1),
        (
            "SELECT COUNT(*) FROM audit WHERE action = 'paid' AND hold_id = $1",
            1,
        ),
        (
            "SELECT COUNT(*) FROM audit WHERE action = 'released' AND hold_id = $1",
            0,
        ),
        (
            "SELECT COUNT(*) FROM audit WHERE action = 'execute-after-deadline' AND hold_id = $1",
            1,
        ),
    ] {
        assert_eq!(h.count(sql, &hold).await, want, "{sql}");
    }
    let mails = h.mail_files();
    assert_eq!(
        mails
            .iter()
            .filter(|m| m.starts_with("confirmation-email-"))
            .count(),
        1,
        "{mails:?}"
    );
}
