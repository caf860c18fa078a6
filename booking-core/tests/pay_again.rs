//! Paying again after a cancelled payment (issue 18 item 1; DECISIONS "Booking core": payment
//! attempts per hold), on SQLite and PostgreSQL through a real gateway-sim: a new attempt for
//! the same hold that books, the old checkout's callback sent back to the hold, the reconciler
//! voiding the superseded attempt, bad input answered 4xx, and two pay-again calls naming the
//! same old attempt making exactly one new attempt; and a hold outliving its admission.

mod support;

on_both!(
    cancel_then_pay_again_books_with_a_new_attempt,
    two_pay_again_calls_with_the_same_old_attempt_make_one,
    pay_again_refuses_what_it_cannot_do,
    a_hold_outlives_the_admission_that_made_it,
);

use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, SHOW};

async fn pay(h: &Harness, t: &str, hold: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = h
        .http
        .post(format!("{}/api/holds/{hold}/pay", h.base))
        .bearer_auth(t);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

async fn get_hold(h: &Harness, t: &str, hold: &str) -> Value {
    h.http
        .get(format!("{}/api/holds/{hold}", h.base))
        .bearer_auth(t)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The fan presses `button` ("pay" or "cancel") on the checkout page, then the browser follows
/// the gateway's redirect to the booking core's callback; returns the callback's redirect.
async fn checkout(h: &Harness, checkout_url: &str, button: &str) -> String {
    let r = h
        .http
        .post(format!("{checkout_url}/{button}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    let back = r.headers()["location"].to_str().unwrap().to_owned();
    callback(h, &back).await
}

async fn callback(h: &Harness, url: &str) -> String {
    let r = h.http.get(url).send().await.unwrap();
    assert_eq!(r.status(), 303, "callback {url}");
    r.headers()["location"].to_str().unwrap().to_owned()
}

/// A held seat with a payment the fan then cancelled at the gateway: (token, hold, payment).
async fn cancelled(h: &Harness, fan: &str, seat: &str) -> (String, String, Value) {
    let t = h.token(fan);
    let (st, b) = h.hold(&t, "k", &[seat]).await;
    assert_eq!(st, 201, "{b}");
    let hold = b["hold_id"].as_str().unwrap().to_owned();
    let (st, p) = pay(h, &t, &hold, None).await;
    assert_eq!(st, 200, "{p}");
    let back = checkout(h, p["checkout_url"].as_str().unwrap(), "cancel").await;
    assert_eq!(back, format!("/book.html?show={SHOW}&hold={hold}"));
    (t, hold, p)
}

async fn attempts(h: &Harness, hold: &str) -> Vec<(String, i64, String)> {
    sqlx::query_as(
        "SELECT payment_id, attempt, status FROM payment_attempts WHERE hold_id = $1 ORDER BY attempt",
    )
    .bind(hold)
    .fetch_all(&h.state.db)
    .await
    .unwrap()
}

/// Payments the gateway created for `hold` (its merchant reference).
async fn gateway_payments(h: &Harness, hold: &str) -> Vec<Value> {
    h.sim_payments()
        .await
        .into_iter()
        .filter(|p| p["reference"] == hold)
        .collect()
}

async fn cancel_then_pay_again_books_with_a_new_attempt(b: Backend) {
    let h = Harness::on(b).await;
    let (t, hold, first) = cancelled(&h, "again", "A-6-1").await;
    let old = first["payment_id"].as_str().unwrap();
    // The hold page learns that the payment died, and until when a new one may start.
    let v = get_hold(&h, &t, &hold).await;
    assert_eq!(v["status"], "HELD");
    assert_eq!(
        v["payment"],
        json!({"attempt": 1, "gateway_status": "cancelled"})
    );
    let pay_by = v["pay_by"].as_i64().unwrap();
    assert_eq!(pay_by, v["payment_expires_at"].as_i64().unwrap() - 60);
    // Without naming the old attempt, pay still answers the same payment (no silent switch).
    let (st, same) = pay(&h, &t, &hold, None).await;
    assert_eq!((st, &same["payment_id"]), (200, &first["payment_id"]));
    // An empty JSON object is no body too (newcomer review: it was 400 "missing field").
    let (st, same) = pay(&h, &t, &hold, Some(json!({}))).await;
    assert_eq!(
        (st, &same["payment_id"]),
        (200, &first["payment_id"]),
        "{same}"
    );
    // Paying again: a new attempt for the same hold, the old one superseded.
    let (st, second) = pay(&h, &t, &hold, Some(json!({"replaces": old}))).await;
    assert_eq!(st, 200, "{second}");
    let new = second["payment_id"].as_str().unwrap();
    assert_ne!(new, old);
    assert_eq!(second["attempt"], 2);
    assert_eq!(
        attempts(&h, &hold).await,
        vec![
            (old.to_owned(), 1, "superseded".to_owned()),
            (new.to_owned(), 2, "current".to_owned())
        ]
    );
    // Asking again to replace the old attempt answers the new one (nothing more is created).
    let (st, again) = pay(&h, &t, &hold, Some(json!({"replaces": old}))).await;
    assert_eq!((st, &again["payment_id"]), (200, &second["payment_id"]));
    assert_eq!(gateway_payments(&h, &hold).await.len(), 2);
    // The new attempt books.
    let to = checkout(&h, second["checkout_url"].as_str().unwrap(), "pay").await;
    assert_eq!(to, format!("/confirmation.html?hold={hold}"));
    let v = get_hold(&h, &t, &hold).await;
    assert_eq!(
        (&v["status"], &v["payment_id"]),
        (&json!("PAID"), &json!(new))
    );
    assert_eq!(h.seat_status("A-6-1").await, "sold");
    // The old checkout tab's callback is verified and sent to the (now paid) hold.
    let sig = h.state.config.gateway_secret.expose().to_owned();
    let old_sig = booking_core::payments::expected_signature(&sig, old);
    let to = callback(
        &h,
        &format!(
            "{}/payment/callback?paymentID={old}&status=success&signature={old_sig}",
            h.base
        ),
    )
    .await;
    assert_eq!(to, format!("/confirmation.html?hold={hold}"));
    let r = h
        .http
        .get(format!(
            "{}/payment/callback?paymentID={old}&status=success&signature=00",
            h.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        400,
        "an old attempt's forged callback is refused"
    );
    // The reconciler voids the superseded attempt; it never settles it.
    let out = booking_core::Reconciler::new(h.state.clone())
        .step(h.clock.now_ms())
        .await
        .unwrap();
    assert_eq!(
        (out.superseded.examined, out.superseded.voided),
        (1, 1),
        "{out:?}"
    );
    assert_eq!(attempts(&h, &hold).await[0].2, "voided");
    let s = h.stats().await;
    assert_eq!(
        (s["bookings"].as_i64(), s["seats_sold_twice"].as_i64()),
        (Some(1), Some(0))
    );
}

async fn two_pay_again_calls_with_the_same_old_attempt_make_one(b: Backend) {
    let h = Harness::on(b).await;
    for (i, seat) in ["A-7-1", "A-7-2", "A-7-3", "A-7-4"].iter().enumerate() {
        let (t, hold, first) = cancelled(&h, &format!("racer{i}"), seat).await;
        let body = json!({"replaces": first["payment_id"]});
        let (a, b) = tokio::join!(
            pay(&h, &t, &hold, Some(body.clone())),
            pay(&h, &t, &hold, Some(body.clone()))
        );
        let mut new_ids = Vec::new();
        for (st, v) in [&a, &b] {
            match st {
                200 => new_ids.push(v["payment_id"].as_str().unwrap().to_owned()),
                409 => assert_eq!(v["type"], "/problems/payment-in-progress", "{v}"),
                _ => panic!("unexpected answer {st}: {v}"),
            }
        }
        assert!(!new_ids.is_empty(), "one call wins: {a:?} {b:?}");
        new_ids.dedup();
        assert_eq!(
            new_ids.len(),
            1,
            "both winners name one attempt: {a:?} {b:?}"
        );
        assert_ne!(new_ids[0], first["payment_id"].as_str().unwrap());
        let rows = attempts(&h, &hold).await;
        assert_eq!(rows.len(), 2, "exactly one new attempt: {rows:?}");
        assert_eq!(
            (rows[1].0.as_str(), rows[1].2.as_str()),
            (new_ids[0].as_str(), "current")
        );
        assert_eq!(
            gateway_payments(&h, &hold).await.len(),
            2,
            "the gateway created one new payment"
        );
    }
}

async fn pay_again_refuses_what_it_cannot_do(b: Backend) {
    let h = Harness::on(b).await;
    let (t, hold, first) = cancelled(&h, "refused", "A-8-1").await;
    let old = first["payment_id"].as_str().unwrap();
    let (st, p) = pay(&h, &t, &hold, Some(json!({"replaces": "pay_nobody"}))).await;
    assert_eq!((st, &p["type"]), (422, &json!("/problems/unknown-attempt")));
    // an unknown member is a data error: 422, as for every JSON body
    let (st, p) = pay(&h, &t, &hold, Some(json!({"replace": old}))).await;
    assert_eq!((st, &p["type"]), (422, &json!("/problems/invalid-body")));
    let r = h
        .http
        .post(format!("{}/api/holds/{hold}/pay", h.base))
        .bearer_auth(&t)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    // Another fan's attempt id on my hold is not mine.
    let (t2, hold2, other) = cancelled(&h, "other", "A-8-2").await;
    let (st, _) = pay(
        &h,
        &t,
        &hold,
        Some(json!({"replaces": other["payment_id"]})),
    )
    .await;
    assert_eq!(st, 422);
    // Past the last moment to start paying: refused, with that moment.
    h.clock.advance_ms(361_000);
    let (st, p) = pay(
        &h,
        &t2,
        &hold2,
        Some(json!({"replaces": other["payment_id"]})),
    )
    .await;
    assert_eq!(
        (st, &p["type"]),
        (409, &json!("/problems/payment-session-over")),
        "{p}"
    );
    assert!(p["pay_by"].is_i64(), "{p}");
    // A released hold cannot be paid again.
    let r = h
        .http
        .delete(format!("{}/api/holds/{hold}", h.base))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, p) = pay(&h, &t, &hold, Some(json!({"replaces": old}))).await;
    assert_eq!((st, &p["type"]), (409, &json!("/problems/hold-not-held")));
}

/// DECISIONS: paying needs a live hold, not a live admission. The admission ends 60 s after the
/// hold is made; the hold (payable until `pay_by`, 360 s) is still read, paid and released with
/// that expired token, which opens nothing else: not the seat map's holds, not another hold.
async fn a_hold_outlives_the_admission_that_made_it(b: Backend) {
    let h = Harness::on(b).await;
    let now = h.now_s();
    let mut c = support::claims("late", SHOW, "jti-short", now);
    c["exp"] = json!(now + 60);
    let short = h.signer.sign(&c);
    let (st, body) = h.hold(&short, "k", &["A-9-1"]).await;
    assert_eq!(st, 201, "{body}");
    let hold = body["hold_id"].as_str().unwrap().to_owned();
    // A second hold of the same fan, made with another admission.
    let other_token = h.token("late");
    let (st, other) = h.hold(&other_token, "k2", &["A-9-2"]).await;
    assert_eq!(st, 201, "{other}");
    h.clock.advance_ms(61_000);
    let me = h
        .http
        .get(format!("{}/api/me", h.base))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(me.status(), 401, "the admission itself is over");
    let v = get_hold(&h, &short, &hold).await;
    assert_eq!(v["status"], "HELD", "{v}");
    let r = h
        .http
        .get(format!(
            "{}/api/holds/{}",
            h.base,
            other["hold_id"].as_str().unwrap()
        ))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "an expired token opens only its own holds");
    let (st, p) = pay(&h, &short, &hold, None).await;
    assert_eq!(
        st, 200,
        "paying needs a live hold, not a live admission: {p}"
    );
    let (st, again) = h.hold(&short, "k3", &["A-9-3"]).await;
    assert_eq!(st, 401, "no new hold on an ended admission: {again}");
    let r = h
        .http
        .delete(format!("{}/api/holds/{hold}", h.base))
        .bearer_auth(&short)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the fan can still let the seats go");
}
