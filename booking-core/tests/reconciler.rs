//! The reconciler step by step with a controlled clock, on SQLite and PostgreSQL: a failed
//! payment is released in one cycle once no new attempt can start (before that the fan may pay
//! again), a gateway that never answers gets three extensions and
//! then an alert with the seat kept (B03); 8 holds per batch and the time budget; one
//! reconciler across two processes (lease); ten processes asking for a gateway token at once
//! make one grant call (seed 000 Challenge 3).

mod support;

use std::time::Duration;

use booking_core::Reconciler;
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, ADMIN};

on_both!(
    case_b03_failure_releases_uncertainty_extends_then_alerts,
    batches_of_eight_most_overdue_first_within_budget,
    one_reconciler_across_two_processes,
    ten_processes_make_one_token_grant,
);

async fn pay(h: &Harness, fan: &str, seat: &str) -> (String, Value) {
    let t = h.token(fan);
    let (st, b) = h.hold(&t, "k", &[seat]).await;
    assert_eq!(st, 201, "{b}");
    let hold = b["hold_id"].as_str().unwrap().to_owned();
    let p: Value = h
        .http
        .post(format!("{}/api/holds/{hold}/pay", h.base))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (hold, p)
}

async fn expires_at(h: &Harness, hold: &str) -> i64 {
    sqlx::query_scalar("SELECT expires_at FROM holds WHERE id = $1")
        .bind(hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap()
}

async fn case_b03_failure_releases_uncertainty_extends_then_alerts(b: Backend) {
    let h = Harness::on_with(b, |c| c.gateway_timeout = Duration::from_millis(300)).await;
    h.faults(json!({"drop_webhook_rate": 1.0})).await;
    // failed → released within one cycle
    let (_failed, p) = pay(&h, "fails", "A-1-1").await;
    h.payment_faults(p["payment_id"].as_str().unwrap(), json!({"fail_rate": 1.0}))
        .await;
    let back = h
        .http
        .post(format!("{}/pay", p["checkout_url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    h.http
        .get(back.headers()["location"].to_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        h.seat_status("A-1-1").await,
        "held",
        "the callback never releases"
    );
    // every query of this one times out
    let (stuck, p2) = pay(&h, "stuck", "A-1-2").await;
    h.payment_faults(
        p2["payment_id"].as_str().unwrap(),
        json!({"query_timeout_rate": 1.0}),
    )
    .await;
    let rec = Reconciler::new(h.state.clone());
    // Before the last moment to start paying (420 s session − 60 s checkout) the fan may still
    // pay again: the failed payment's hold is left; from that moment it is released.
    h.clock.advance_ms(3 * 60_000);
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.released, 0, "the fan may still pay again: {out:?}");
    assert_eq!(h.seat_status("A-1-1").await, "held");
    h.clock.advance_ms(3 * 60_000);
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.released, 1, "{out:?}");
    assert_eq!(h.seat_status("A-1-1").await, "free");
    let (mut extended, mut alerted) = (out.extended, out.alerted);
    for _ in 0..15 {
        let due = expires_at(&h, &stuck).await - 60_000;
        h.clock.set_ms(due.max(h.clock.now_ms() + 20_000));
        let out = rec.step(h.clock.now_ms()).await.unwrap();
        assert_eq!(out.released, 0, "never released on a guess: {out:?}");
        extended += out.extended;
        alerted += out.alerted;
    }
    assert_eq!((extended, alerted), (3, 1));
    h.clock.advance_ms(3_600_000);
    assert_eq!(
        h.seat_status("A-1-2").await,
        "held",
        "the seat is kept after the alert"
    );
    let alerts: Value = h
        .http
        .get(format!("{}/admin/alerts", h.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(alerts[0]["hold_id"], stuck.as_str());
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM audit WHERE action = 'extended' AND hold_id = $1",
            &stuck
        )
        .await,
        3
    );
    // the alert is a Prometheus figure too (process-wide recorder: other tests may add to it)
    let m = h.metrics().await;
    assert!(
        m.contains("bc_alerts_total{kind=\"payment-unknown\"}"),
        "{m}"
    );
    assert!(m.contains("bc_hold_extensions_total"), "{m}");
    assert!(m.contains("bc_alerts_open"), "{m}");
}

async fn case_b03_shape(h: &Harness, n: usize) -> Vec<String> {
    let mut holds = Vec::new();
    for i in 0..n {
        let (st, b) = h
            .hold(
                &h.token(&format!("idle{i}")),
                "k",
                &[&format!("B-1-{}", i + 1)],
            )
            .await;
        assert_eq!(st, 201);
        holds.push(b["hold_id"].as_str().unwrap().to_owned());
        h.clock.advance_ms(1_000);
    }
    holds
}

async fn batches_of_eight_most_overdue_first_within_budget(b: Backend) {
    let h = Harness::on(b).await;
    let holds = case_b03_shape(&h, 10).await;
    h.clock.advance_ms(9 * 60_000);
    // a zero budget stops after the first batch: the 8 most overdue (oldest) go first
    let out = Reconciler::new(h.state.clone())
        .with_budget(Duration::ZERO)
        .step(h.clock.now_ms())
        .await
        .unwrap();
    assert_eq!((out.batches, out.released), (1, 8), "{out:?}");
    let left: Vec<String> =
        sqlx::query_scalar("SELECT id FROM holds WHERE status = 'HELD' ORDER BY id")
            .fetch_all(&h.state.db)
            .await
            .unwrap();
    assert_eq!(left, holds[8..].to_vec());
    let out = Reconciler::new(h.state.clone())
        .step(h.clock.now_ms() + 61_000)
        .await
        .unwrap();
    assert_eq!(out.released, 2, "{out:?}");
}

async fn one_reconciler_across_two_processes(b: Backend) {
    let h = Harness::on(b).await;
    let other = h.another_state().await;
    let (a, c) = (Reconciler::new(h.state.clone()), Reconciler::new(other));
    let now = h.clock.now_ms();
    let (x, y) = tokio::join!(a.step(now), c.step(now));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert!(x.skipped != y.skipped, "exactly one ran: {x:?} {y:?}");
    let (first, second) = if x.skipped { (&c, &a) } else { (&a, &c) };
    assert!(
        !first.step(now + 20_000).await.unwrap().skipped,
        "the holder renews"
    );
    assert!(second.step(now + 20_000).await.unwrap().skipped);
    assert!(
        !second.step(now + 20_000 + 61_000).await.unwrap().skipped,
        "a lapsed lease is taken over"
    );
}

async fn ten_processes_make_one_token_grant(b: Backend) {
    let h = Harness::on(b).await;
    let mut states = Vec::new();
    for _ in 0..10 {
        states.push(h.another_state().await);
    }
    let asks = states
        .iter()
        .map(|s| s.gateway.tokens().get(Duration::from_secs(5)));
    let tokens = futures::future::join_all(asks).await;
    let tokens: Vec<String> = tokens.into_iter().map(Result::unwrap).collect();
    assert!(tokens.iter().all(|t| t == &tokens[0]), "one shared token");
    let g: Value = h
        .http
        .get(format!("{}/v1/oauth/grants", h.gw))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(g["grants"], 1);
    // refreshed a few minutes before expiry, still by one process
    h.clock.advance_ms(3_600_000 - 4 * 60_000);
    let asks = states
        .iter()
        .map(|s| s.gateway.tokens().get(Duration::from_secs(5)));
    for t in futures::future::join_all(asks).await {
        t.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let g: Value = h
        .http
        .get(format!("{}/v1/oauth/grants", h.gw))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(g["grants"], 2);
}
