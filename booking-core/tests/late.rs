//! Late success with the webhook dropped (issue 4): the gateway completes a payment after the
//! reconciler released its hold and never sends the webhook; the reconciler's late-payment
//! sweep finds it, takes the same seat again when free, else refunds it once.

mod support;

use std::time::Duration;

use booking_core::Reconciler;
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness};

on_both!(late_payment_found_without_webhook);

async fn sim_status(h: &Harness, pid: &str) -> String {
    let pays: Value = h
        .http
        .get(format!("{}/v1/sim/payments", h.gw))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let p = pays
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["payment_id"] == pid)
        .unwrap();
    p["status"].as_str().unwrap().to_owned()
}

async fn late_payment_found_without_webhook(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 4)).await;
    h.faults(json!({"late_success_rate": 1.0, "drop_webhook_rate": 1.0}))
        .await;
    let mut pids = Vec::new();
    let mut holds = Vec::new();
    for (fan, seat) in [("taken", "A-1-1"), ("free", "A-1-3")] {
        let t = h.token(fan);
        let (st, b) = h.hold(&t, "k", &[seat]).await;
        assert_eq!(st, 201, "{b}");
        let hold = b["hold_id"].as_str().unwrap().to_owned();
        let (pid, back) = h.approve(&t, &hold).await;
        h.http.get(back).send().await.unwrap(); // execute leaves it approved
        pids.push(pid);
        holds.push(hold);
    }
    let rec = Reconciler::new(h.state.clone());
    h.clock.advance_ms(8 * 60_000 + 1_000);
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.released, 2, "{out:?}");
    // the same step's sweep asks about the released holds: still pending, asked again later
    assert_eq!((out.late.examined, out.late.retaken), (2, 0), "{out:?}");
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.late.examined, 0, "not again within a minute: {out:?}");
    let (st, _) = h.hold(&h.token("next"), "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "someone else takes A-1-1");
    h.clock.advance_ms(61_000); // 9:02: the gateway completes both, sends nothing
    for pid in &pids {
        for _ in 0..100 {
            if sim_status(&h, pid).await == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(sim_status(&h, pid).await, "completed");
    }
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM webhook_events WHERE payment_id = $1",
            &pids[0]
        )
        .await,
        0
    );
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!((out.late.retaken, out.late.refunded), (1, 1), "{out:?}");
    assert_eq!(
        h.seat_status("A-1-3").await,
        "sold",
        "the free seat was retaken"
    );
    assert_eq!(
        h.seat_status("A-1-1").await,
        "held",
        "the new holder keeps A-1-1"
    );
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    assert_eq!(sim_status(&h, &pids[0]).await, "refunded");
    // nothing more to find: both holds are settled for good
    h.clock.advance_ms(61_000);
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.late.examined, 0, "{out:?}");
    assert!(h.metrics().await.contains("bc_late_payments_found_total"));
    let _ = holds;
}
