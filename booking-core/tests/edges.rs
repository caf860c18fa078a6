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
    case_b12_identical_refused_requests_answer_the_owners_refusal_never_429,
    case_b13_approved_at_the_deadline_is_executed_once_never_released,
    case_b14_refund_or_chargeback_at_the_gateway_cancels_once_waitlist_first,
    a_seat_refund_overtaken_by_a_full_refund_at_the_gateway_is_settled_and_told,
    a_refund_after_a_partial_refund_at_the_gateway_refunds_the_rest,
    money_back_at_the_gateway_after_a_cancel_without_refund_is_recorded_and_told,
    a_refund_the_gateway_refuses_is_one_alert_and_retried_until_it_is_made,
    operator_refunds_by_seat_then_in_full_and_cancels_without_refund,
    pool_bookings_listed_and_the_waitlist_opens_per_kind,
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
    h.sim_payments()
        .await
        .into_iter()
        .find(|p| p["payment_id"] == pid)
        .unwrap()
}

/// B12 for a refusal (newcomer review: 20 identical requests for a held seat answered 10 x 409
/// and 10 x 429 with a limit of 10): a refusal is not stored as an answer, so the waiting
/// duplicates used to wake, find nothing to replay and run one after another, each counted by
/// the rate limit. Here the owner's refusal is held up (a test session holds the write the
/// refusal's key record needs: the SQLite writer, PostgreSQL's `idempotency` table locked in
/// EXCLUSIVE mode) until the 19 duplicates wait for it; then all 20 answer the owner's
/// `409 seats-unavailable`, none `429` (limit 5 a minute), one refused key row.
async fn case_b12_identical_refused_requests_answer_the_owners_refusal_never_429(b: Backend) {
    let h = Harness::on_with(b, |c| c.hold_rate_per_min = 5).await;
    let (st, held) = h.hold(&h.token("holder"), "holder-key", &["A-1-1"]).await;
    assert_eq!(st, 201, "{held}");
    let mut lock = booking_core::db::begin_write(&h.state.db).await.unwrap();
    if b == Backend::Postgres {
        sqlx::query("LOCK TABLE idempotency IN EXCLUSIVE MODE")
            .execute(&mut *lock)
            .await
            .unwrap();
    }
    let t = h.token("refused");
    let body = json!({"seats": ["A-1-1"]});
    let tries: Vec<_> = (0..20)
        .map(|_| {
            let (http, base, t, body) = (h.http.clone(), h.base.clone(), t.clone(), body.clone());
            tokio::spawn(async move {
                let r = http
                    .post(format!("{base}/api/shows/{SHOW}/holds"))
                    .bearer_auth(&t)
                    .header("Idempotency-Key", "refused-key")
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                let st = r.status().as_u16();
                (st, r.json::<Value>().await.unwrap_or(Value::Null))
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while h.state.in_flight.waiting("refused", "refused-key") < 19 {
        assert!(
            std::time::Instant::now() < deadline,
            "19 duplicates wait for the owner: {}",
            h.state.in_flight.waiting("refused", "refused-key")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    lock.rollback().await.unwrap();
    let mut answers = Vec::new();
    for t in tries {
        answers.push(t.await.unwrap());
    }
    for (st, v) in &answers {
        assert_eq!(
            (*st, v["type"].as_str()),
            (409, Some("/problems/seats-unavailable")),
            "{answers:?}"
        );
        assert_eq!(v["availability"], json!({"A-1-1": "held"}), "{v}");
    }
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM idempotency WHERE visitor_id = $1",
            "refused"
        )
        .await,
        1,
        "one refused key"
    );
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
            "SELECT COUNT(*) FROM audit WHERE action IN ('released', 'expired', 'failed') AND hold_id = $1",
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

async fn admin_get(h: &Harness, path: &str) -> Value {
    h.http
        .get(format!("{}{path}", h.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn payment_of(h: &Harness, hold: &str) -> String {
    sqlx::query_scalar("SELECT payment_id FROM holds WHERE id = $1")
        .bind(hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap()
}

/// A signed gateway event like the simulator sends; returns the webhook's `result`.
async fn event(h: &Harness, id: &str, kind: &str, pid: &str) -> String {
    let raw =
        json!({"id": id, "type": kind, "created": 0, "data": {"payment_id": pid}}).to_string();
    let t = h.now_s();
    let sig = booking_core::payments::webhook::sign(GW_SECRET.as_bytes(), t, raw.as_bytes());
    let r = h
        .http
        .post(format!("{}/payment/webhook", h.base))
        .header("Gateway-Signature", format!("t={t},v1={sig}"))
        .body(raw)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    v["result"].as_str().unwrap_or_default().to_owned()
}

async fn join_waitlist(h: &Harness, fan: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = h
        .http
        .post(format!("{}/api/shows/{SHOW}/waitlist", h.base))
        .bearer_auth(h.token(fan));
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn console(h: &Harness, pid: &str, what: &str) {
    let r = h
        .http
        .post(format!("{}/v1/sim/payments/{pid}/{what}", h.gw))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// B14: a PAID booking is refunded in the gateway's console; the gateway's own
/// `payment.refunded` webhook, confirmed by querying the gateway, cancels the booking, offers
/// the seat to the waiting fan first, queues the fan's email and is audited. The same event
/// again, another refunded event and a late `payment.completed` change nothing. A chargeback
/// (`payment.disputed`) cancels the next booking and, with nobody waiting, the seat goes back
/// to sale.
/// An operator's refund of one seat, queued, is overtaken by a full refund made in the
/// gateway's console (the B14 webhook cancels the other seats): the gateway then refuses the
/// seat's refund, the money being back already, so the seat's cancellation is settled as
/// refunded by the provider and its email sent: every seat told once, the amounts adding up to
/// what was paid, nothing left pending, no alert (a newcomer review: the message was retried
/// for ever, `refund answered 409`, and the fan never told of that seat).
async fn a_seat_refund_overtaken_by_a_full_refund_at_the_gateway_is_settled_and_told(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 3)).await;
    let t = h.token("three");
    let (st, v) = h.hold(&t, "k3", &["A-1-1", "A-1-2", "A-1-3"]).await;
    assert_eq!(st, 201, "{v}");
    let hold = v["hold_id"].as_str().unwrap().to_owned();
    let total = v["amount_cents"].as_i64().unwrap();
    let (_, back) = h.approve(&t, &hold).await;
    h.http.get(back).send().await.unwrap();
    let booking = h.booking_of(&hold).await;
    let pid = payment_of(&h, &hold).await;
    let (st, one) = cancel(&h, &booking, json!({"seats": ["A-1-1"], "operator": "ops"})).await;
    assert_eq!((st, &one["refund"]), (200, &json!("pending")), "{one}");
    let seat = one["amount_cents"].as_i64().unwrap();
    // The whole payment refunded at the gateway before the outbox asks for the seat's refund.
    console(&h, &pid, "refund").await;
    h.wait_count(
        "SELECT COUNT(*) FROM bookings WHERE status = 'cancelled' AND id = $1",
        &booking,
        1,
    )
    .await;
    let outbox = h.state.outbox();
    for _ in 0..2 {
        let out = outbox.step(h.clock.now_ms()).await.unwrap();
        assert_eq!(out.failed, 0, "{b:?}: {out:?}");
    }
    let settled: Vec<(String, String)> =
        sqlx::query_as("SELECT id, refund FROM cancellations WHERE booking_id = $1 ORDER BY id")
            .bind(&booking)
            .fetch_all(&h.state.db)
            .await
            .unwrap();
    let want = [
        (format!("cancel-{booking}-1"), "at-gateway".to_owned()),
        (format!("cancel-{booking}-2"), "at-gateway".to_owned()),
    ];
    assert_eq!(settled, want, "{b:?}");
    mail_says(
        &h,
        &format!("cancel-{booking}-1"),
        &[
            "Cancelled: Seat: A-1-1",
            &format!(
                "Refunded by the payment provider: {}",
                booking_core::outbox::mail::money(seat, "EUR")
            ),
            // Sent after the whole cancellation's email (third review: it said the rest stands).
            "The rest of your booking has been cancelled since",
        ],
    )
    .await;
    mail_says(
        &h,
        &format!("cancel-{booking}-2"),
        &[
            "Subject: Your booking was cancelled",
            "Cancelled: Seats: A-1-2, A-1-3",
            &format!(
                "Refunded by the payment provider: {}",
                booking_core::outbox::mail::money(total - seat, "EUR")
            ),
        ],
    )
    .await;
    let gateway_mail = std::fs::read_to_string(
        h.mail
            .path()
            .join(format!("cancellation-email-cancel-{booking}-2.eml")),
    )
    .unwrap();
    assert!(
        !gateway_mail.contains("Reason:"),
        "the provider's refund is said in words, not the code's reason:\n{gateway_mail}"
    );
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL AND ref_id LIKE $1",
            &format!("cancel-{booking}-%")
        )
        .await,
        0,
        "{b:?}: nothing left to send"
    );
    assert_eq!(
        h.count("SELECT COUNT(*) FROM alerts WHERE hold_id = $1", &hold)
            .await,
        0
    );
}

/// An operator's refund the gateway refuses (`409 refund-refused`, the payment still completed
/// and nothing refunded): the cancellation stays `pending`, the back office shows one
/// `refund-refused` alert for the booking however often the outbox tries, and no email says
/// a refund; once the gateway takes it, the next try after the retry wait refunds the whole
/// amount once and the fan is told once.
async fn a_refund_the_gateway_refuses_is_one_alert_and_retried_until_it_is_made(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 2)).await;
    let hold = h.buy("refused", "A-1-1").await;
    let booking = h.booking_of(&hold).await;
    let pid = payment_of(&h, &hold).await;
    let paid = gateway_payment(&h, &pid).await["amount_cents"]
        .as_i64()
        .unwrap();
    h.payment_faults(&pid, json!({"refuse_refund_rate": 1.0}))
        .await;
    let (st, v) = cancel(
        &h,
        &booking,
        json!({"operator": "ops", "reason": "show moved"}),
    )
    .await;
    assert_eq!((st, &v["refund"]), (200, &json!("pending")), "{v}");
    let cancel_id = format!("cancel-{booking}-1");
    let outbox = h.state.outbox();
    for attempt in 0..3 {
        let out = outbox.step(h.clock.now_ms()).await.unwrap();
        assert_eq!(out.failed, 1, "{b:?}: attempt {attempt}: {out:?}");
        h.clock
            .advance_ms(booking_core::outbox::worker::RETRY_MS * (attempt + 1));
    }
    let refund: String = sqlx::query_scalar("SELECT refund FROM cancellations WHERE id = $1")
        .bind(&cancel_id)
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    assert_eq!(refund, "pending", "{b:?}");
    let alerts = h.admin_get("/admin/alerts").await;
    let ours: Vec<&Value> = alerts
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["hold_id"] == hold.as_str())
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "{b:?}: one alert however many tries: {alerts}"
    );
    assert_eq!(ours[0]["kind"], "refund-refused", "{alerts}");
    let said = ours[0]["message"].as_str().unwrap();
    assert!(
        said.contains(&cancel_id) && said.contains("refund-refused"),
        "{said}"
    );
    let email = h
        .mail
        .path()
        .join(format!("cancellation-email-{cancel_id}.eml"));
    assert!(!email.exists(), "no email before the money is back");
    assert_eq!(gateway_payment(&h, &pid).await["refunded_cents"], 0);

    h.payment_faults(&pid, json!({"refuse_refund_rate": 0.0}))
        .await;
    h.clock
        .advance_ms(booking_core::outbox::worker::RETRY_MS * 4);
    let out = outbox.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.failed, 0, "{b:?}: {out:?}");
    let p = gateway_payment(&h, &pid).await;
    assert_eq!(
        (&p["status"], p["refunded_cents"].as_i64()),
        (&json!("refunded"), Some(paid)),
        "{p}"
    );
    mail_says(
        &h,
        &cancel_id,
        &[&format!(
            "Refunded: {}",
            booking_core::outbox::mail::money(paid, "EUR")
        )],
    )
    .await;
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL AND ref_id = $1",
            &cancel_id
        )
        .await,
        0,
        "{b:?}: nothing left to send"
    );
}

/// A booking partly refunded in the gateway's console, then cancelled with refund by an
/// operator: the shop refunds what is left, the fan's email says both parts and their sum, the
/// gateway's payment ends refunded in full, nothing stays queued (third newcomer review: the
/// refund of the whole amount was refused, `409`, and retried for ever; the fan never told).
async fn a_refund_after_a_partial_refund_at_the_gateway_refunds_the_rest(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 2)).await;
    let hold = h.buy("partly", "A-1-1").await;
    let booking = h.booking_of(&hold).await;
    let pid = payment_of(&h, &hold).await;
    let paid = gateway_payment(&h, &pid).await["amount_cents"]
        .as_i64()
        .unwrap();
    let r = h
        .http
        .post(format!("{}/v1/sim/payments/{pid}/refund", h.gw))
        .json(&json!({"amount_cents": 1000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // The console's partial refund reaches the booking core (an alert; the booking stays).
    h.wait_count("SELECT COUNT(*) FROM alerts WHERE hold_id = $1", &hold, 1)
        .await;
    let (st, v) = cancel(
        &h,
        &booking,
        json!({"operator": "ops", "reason": "show moved"}),
    )
    .await;
    assert_eq!((st, &v["refund"]), (200, &json!("pending")), "{v}");
    let outbox = h.state.outbox();
    let out = outbox.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.failed, 0, "{b:?}: {out:?}");
    let p = gateway_payment(&h, &pid).await;
    assert_eq!(
        (&p["status"], p["refunded_cents"].as_i64()),
        (&json!("refunded"), Some(paid)),
        "{b:?}: the rest refunded"
    );
    let eur = |c: i64| booking_core::outbox::mail::money(c, "EUR");
    mail_says(
        &h,
        &format!("cancel-{booking}-1"),
        &[&format!(
            "Refunded: {} now, and {} the payment provider refunded earlier: {} in all",
            eur(paid - 1000),
            eur(1000),
            eur(paid)
        )],
    )
    .await;
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM outbox WHERE sent_at IS NULL AND ref_id LIKE $1",
            &format!("cancel-{booking}-%")
        )
        .await,
        0,
        "{b:?}: nothing left queued"
    );
}

/// Money the provider gives back after an operator cancelled without refund is recorded and
/// told in full (third newcomer review, both confirmed): a seat cancelled without refund, then
/// the whole payment refunded in the console: the gateway's cancellation counts that seat's
/// money too (it counted only the seats still booked: half); a booking cancelled whole without
/// refund, then charged back: a `gateway-refund-email` with the whole amount and the back
/// office's `refunded_cents` (it was `unchanged`, the fan's only email "Not refunded.").
async fn money_back_at_the_gateway_after_a_cancel_without_refund_is_recorded_and_told(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 3)).await;
    let t = h.token("pair");
    let (st, v) = h.hold(&t, "k", &["A-1-1", "A-1-2"]).await;
    assert_eq!(st, 201, "{v}");
    let pair = v["hold_id"].as_str().unwrap().to_owned();
    let total = v["amount_cents"].as_i64().unwrap();
    let (_, back) = h.approve(&t, &pair).await;
    h.http.get(back).send().await.unwrap();
    let booking = h.booking_of(&pair).await;
    let (st, one) = cancel(
        &h,
        &booking,
        json!({"seats": ["A-1-1"], "operator": "ops", "refund": false}),
    )
    .await;
    assert_eq!((st, &one["refund"]), (200, &json!("none")), "{one}");
    console(&h, &payment_of(&h, &pair).await, "refund").await;
    h.wait_count(
        "SELECT COUNT(*) FROM bookings WHERE status = 'cancelled' AND id = $1",
        &booking,
        1,
    )
    .await;
    let eur = |c: i64| booking_core::outbox::mail::money(c, "EUR");
    mail_says(
        &h,
        &format!("cancel-{booking}-2"),
        &[
            "Cancelled: Seat: A-1-2",
            &format!("Refunded by the payment provider: {}", eur(total)),
        ],
    )
    .await;

    let single = h.buy("single", "A-1-3").await;
    let b2 = h.booking_of(&single).await;
    let paid = gateway_payment(&h, &payment_of(&h, &single).await).await["amount_cents"]
        .as_i64()
        .unwrap();
    let (st, none) = cancel(&h, &b2, json!({"operator": "ops", "refund": false})).await;
    assert_eq!((st, &none["refund"]), (200, &json!("none")), "{none}");
    console(&h, &payment_of(&h, &single).await, "dispute").await;
    h.wait_count(
        "SELECT COUNT(*) FROM cancellations WHERE refund = 'at-gateway' AND hold_id = $1",
        &single,
        1,
    )
    .await;
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    let mail = std::fs::read_to_string(
        h.mail
            .path()
            .join(format!("gateway-refund-email-cancel-{b2}-2.eml")),
    )
    .unwrap_or_else(|e| panic!("{b:?}: {e}: {:?}", h.mail_files()));
    for want in [
        "Subject: Your payment was returned to you".to_owned(),
        format!("Refunded by the payment provider: {}", eur(paid)),
        "disputed".to_owned(),
    ] {
        assert!(mail.contains(&want), "{b:?}: {want:?} missing from\n{mail}");
    }
    let list = admin_get(&h, &format!("/admin/shows/{SHOW}/bookings")).await;
    let back: Vec<(String, i64)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["booking_id"].as_str().unwrap().to_owned(),
                x["refunded_cents"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(
        back.contains(&(booking.clone(), total)) && back.contains(&(b2.clone(), paid)),
        "{b:?}: the back office counts what the gateway gave back: {back:?}"
    );
}

async fn case_b14_refund_or_chargeback_at_the_gateway_cancels_once_waitlist_first(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 2)).await;
    let first = h.buy("b14-first", "A-1-1").await;
    let second = h.buy("b14-second", "A-1-2").await;
    let (st, v) = join_waitlist(&h, "b14-waiting", None).await;
    assert_eq!(st, 201, "sold out: the waitlist opens: {v}");
    let pid = payment_of(&h, &first).await;
    let booking = h.booking_of(&first).await;
    console(&h, &pid, "refund").await;
    h.wait_count(
        "SELECT COUNT(*) FROM bookings WHERE status = 'cancelled' AND id = $1",
        &booking,
        1,
    )
    .await;
    let w: Value = h
        .http
        .get(format!("{}/api/shows/{SHOW}/waitlist", h.base))
        .bearer_auth(h.token("b14-waiting"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(w["status"], "offered", "{w}");
    assert_eq!(
        h.seat_status("A-1-1").await,
        "held",
        "offered to the waiting fan"
    );
    // Twice, again, and out of order: nothing more happens.
    for (id, kind) in [
        ("evt_b14_a", "payment.refunded"),
        ("evt_b14_a", "payment.refunded"),
        ("evt_b14_b", "payment.refunded"),
        ("evt_b14_c", "payment.completed"),
    ] {
        let result = event(&h, id, kind, &pid).await;
        assert!(
            ["unchanged", "duplicate"].contains(&result.as_str()),
            "{id}: {result}"
        );
    }
    // A chargeback of the second booking: nobody waits any more, the seat goes back to sale.
    let pid2 = payment_of(&h, &second).await;
    console(&h, &pid2, "dispute").await;
    let booking2 = h.booking_of(&second).await;
    h.wait_count(
        "SELECT COUNT(*) FROM bookings WHERE status = 'cancelled' AND id = $1",
        &booking2,
        1,
    )
    .await;
    assert_eq!(h.seat_status("A-1-2").await, "free");
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    for (hold, reason) in [(&first, "refunded at the gateway"), (&second, "dispute")] {
        assert_eq!(
            h.count(
                "SELECT COUNT(*) FROM cancellations WHERE hold_id = $1",
                hold
            )
            .await,
            1
        );
        assert_eq!(
            h.count(
                "SELECT COUNT(*) FROM audit WHERE action = 'cancelled' AND hold_id = $1",
                hold
            )
            .await,
            1
        );
        let why: String = sqlx::query_scalar(
            "SELECT reason FROM audit WHERE action = 'cancelled' AND hold_id = $1",
        )
        .bind(hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap();
        assert!(why.contains(reason), "{why}");
    }
    let mails = h.mail_files();
    assert_eq!(
        mails
            .iter()
            .filter(|m| m.starts_with("cancellation-email-"))
            .count(),
        2,
        "{mails:?}"
    );
    assert_eq!(h.stats().await["seats_sold_twice"], 0);
}

async fn cancel(h: &Harness, booking: &str, body: Value) -> (u16, Value) {
    let r = h
        .http
        .post(format!("{}/admin/bookings/{booking}/cancel", h.base))
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Operators refund from the back office through the same code as B14: one seat of a two-seat
/// booking (a partial gateway refund by amount under the cancellation's key; the seat to the
/// waiting fan), then the rest (the payment fully refunded, the seat back to sale, the booking
/// cancelled), each with the fan's email through the outbox; the gateway's own webhooks about
/// these refunds change nothing. A cancel without refund leaves the money alone.
/// Asserts that the cancellation email `cancel_id` in the mail directory, after one more
/// outbox step (a refund's step queues the email), has every line of `want` (the text a fan
/// reads, `outbox::mail::body_text`).
async fn mail_says(h: &Harness, cancel_id: &str, want: &[&str]) {
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    let path = h
        .mail
        .path()
        .join(format!("cancellation-email-{cancel_id}.eml"));
    let mail = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for line in want {
        assert!(mail.contains(line), "{line:?} missing from\n{mail}");
    }
}

async fn operator_refunds_by_seat_then_in_full_and_cancels_without_refund(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 3)).await;
    let t = h.token("pair");
    let (st, v) = h.hold(&t, "k", &["A-1-1", "A-1-2"]).await;
    assert_eq!(st, 201, "{v}");
    let pair = v["hold_id"].as_str().unwrap().to_owned();
    let (_, back) = h.approve(&t, &pair).await;
    h.http.get(back).send().await.unwrap();
    let single = h.buy("single", "A-1-3").await;
    assert_eq!(join_waitlist(&h, "waiting", None).await.0, 201);
    let booking = h.booking_of(&pair).await;
    let pid = payment_of(&h, &pair).await;
    let total = v["amount_cents"].as_i64().unwrap();
    let (st, one) = cancel(&h, &booking, json!({"seats": ["A-1-2"], "operator": "ops"})).await;
    assert_eq!(st, 200, "{one}");
    assert_eq!(
        (&one["refund"], &one["booking_status"]),
        (&json!("pending"), &json!("active"))
    );
    assert!(one["offered_to_waitlist"].is_string(), "{one}");
    // The fan's view of the hold: the cancelled seat leaves `seats` (newcomer review: a
    // refunded seat was still shown as booked).
    let mine = h.hold_view("pair", &pair).await;
    assert_eq!(
        (
            &mine["seats"],
            &mine["cancelled_seats"],
            &mine["booking_status"]
        ),
        (&json!(["A-1-1"]), &json!(["A-1-2"]), &json!("active")),
        "{mine}"
    );
    let seat_price = one["amount_cents"].as_i64().unwrap();
    assert!(seat_price > 0 && seat_price < total);
    assert_eq!(
        cancel(&h, &booking, json!({"seats": ["A-1-2"], "operator": "ops"}))
            .await
            .0,
        409
    );
    assert_eq!(
        cancel(&h, &booking, json!({"seats": ["B-9-9"], "operator": "ops"}))
            .await
            .0,
        422
    );
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    let p = gateway_payment(&h, &pid).await;
    assert_eq!(
        (&p["status"], p["refunded_cents"].as_i64()),
        (&json!("completed"), Some(seat_price))
    );
    // The fan's email says what was cancelled and refunded, in words.
    let eur = |c: i64| booking_core::outbox::mail::money(c, "EUR");
    mail_says(
        &h,
        &format!("cancel-{booking}-1"),
        &[
            "Subject: Part of your booking was cancelled",
            "Cancelled: Seat: A-1-2",
            &format!("Refunded: {}", eur(seat_price)),
            "The rest of your booking stands.",
        ],
    )
    .await;
    let (st, rest) = cancel(
        &h,
        &booking,
        json!({"operator": "ops", "reason": "fan moved away"}),
    )
    .await;
    assert_eq!(st, 200, "{rest}");
    assert_eq!(rest["amount_cents"].as_i64(), Some(total - seat_price));
    let mine = h.hold_view("pair", &pair).await;
    assert_eq!(
        (&mine["status"], &mine["booking_status"], &mine["seats"]),
        (&json!("PAID"), &json!("cancelled"), &json!([])),
        "the fan sees the booking cancelled: {mine}"
    );
    assert_eq!(rest["booking_status"], "cancelled");
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    let p = gateway_payment(&h, &pid).await;
    assert_eq!(
        (&p["status"], p["refunded_cents"].as_i64()),
        (&json!("refunded"), Some(total))
    );
    mail_says(
        &h,
        &format!("cancel-{booking}-2"),
        &[
            "Cancelled: Seat: A-1-1",
            &format!("Refunded: {}", eur(total - seat_price)),
            "Reason: fan moved away",
        ],
    )
    .await;
    assert_eq!(
        h.seat_status("A-1-1").await,
        "free",
        "nobody else waits: back to sale"
    );
    // Without refund.
    let b3 = h.booking_of(&single).await;
    let (st, none) = cancel(&h, &b3, json!({"operator": "ops", "refund": false})).await;
    assert_eq!((st, &none["refund"]), (200, &json!("none")), "{none}");
    // The gateway's webhooks for the pair's payment (its completion and the two refunds) have
    // arrived and were handled before the checks below (was a fixed 600 ms sleep).
    h.wait_count(
        "SELECT COUNT(*) FROM webhook_events WHERE payment_id = $1",
        &pid,
        4,
    )
    .await;
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    assert_eq!(
        gateway_payment(&h, &payment_of(&h, &single).await).await["status"],
        "completed"
    );
    mail_says(
        &h,
        &format!("cancel-{b3}-1"),
        &["Cancelled: Seat: A-1-3", "Not refunded."],
    )
    .await;
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM cancellations WHERE hold_id = $1",
            &pair
        )
        .await,
        2
    );
    assert_eq!(
        h.count("SELECT COUNT(*) FROM alerts WHERE hold_id = $1", &pair)
            .await,
        0
    );
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM cancellations WHERE refund = 'refunded' AND hold_id = $1",
            &pair
        )
        .await,
        2
    );
    let mails = h.mail_files();
    assert_eq!(
        mails
            .iter()
            .filter(|m| m.starts_with("cancellation-email-"))
            .count(),
        3,
        "{mails:?}"
    );
    let none = admin_get(&h, "/admin/shows/no-such-show/bookings").await;
    assert_eq!(
        none["status"], 404,
        "an unknown show is not an empty list: {none}"
    );
    let list = admin_get(&h, &format!("/admin/shows/{SHOW}/bookings")).await;
    let mine = list
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["booking_id"] == booking.as_str())
        .unwrap();
    assert_eq!(
        (&mine["status"], &mine["cancelled_seats"]),
        (&json!("cancelled"), &json!(["A-1-1", "A-1-2"]))
    );
    // What was paid and what went back, in the venue's currency (the back office's column).
    assert_eq!(
        (
            mine["amount_cents"].as_i64(),
            mine["refunded_cents"].as_i64(),
            &mine["currency"]
        ),
        (Some(total), Some(total), &json!("EUR")),
        "{mine}"
    );
    let kept = list
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["booking_id"] == b3.as_str())
        .unwrap();
    assert_eq!(
        kept["refunded_cents"], 0,
        "cancelled without refund: {kept}"
    );
    let r = h
        .http
        .post(format!("{}/admin/bookings/{booking}/cancel", h.base))
        .json(&json!({"operator": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        cancel(&h, "no-such-booking", json!({"operator": "ops"}))
            .await
            .0,
        404
    );
    let page = h
        .http
        .get(format!("{}/office", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("/admin/bookings/") && page.contains("/admin/alerts"));
}

/// The bookings list includes pool bookings; the waitlist opens only when nothing of the kind
/// the fan asked for is left (seats, or the asked pool's places); a cancelled pool booking's
/// places go to the fan waiting for that pool.
async fn pool_bookings_listed_and_the_waitlist_opens_per_kind(b: Backend) {
    let h = Harness::on_with(b, |c| {
        Harness::venue_with_floor(c, 1, 2);
    })
    .await;
    assert_eq!(
        join_waitlist(&h, "early", Some(json!({"pool": "FLOOR"})))
            .await
            .0,
        409
    );
    let t = h.token("floor");
    let (st, v) = h
        .hold_with(&t, "k", json!({"pool": "FLOOR", "quantity": 2}), &[])
        .await;
    assert_eq!(st, 201, "{v}");
    let hold = v["hold_id"].as_str().unwrap().to_owned();
    let (_, back) = h.approve(&t, &hold).await;
    h.http.get(back).send().await.unwrap();
    let (st, v) = join_waitlist(&h, "seat-fan", None).await;
    assert_eq!(
        (st, &v["type"]),
        (409, &json!("/problems/seats-available")),
        "a seat is free: {v}"
    );
    let (st, v) = join_waitlist(&h, "pool-fan", Some(json!({"pool": "FLOOR"}))).await;
    assert_eq!(
        (st, &v["pool"]),
        (201, &json!("FLOOR")),
        "the pool is sold out: {v}"
    );
    let list = admin_get(&h, &format!("/admin/shows/{SHOW}/bookings")).await;
    assert_eq!(list[0]["pool"], "FLOOR", "{list}");
    assert_eq!(list[0]["quantity"], 2);
    let booking = list[0]["booking_id"].as_str().unwrap().to_owned();
    let (st, c) = cancel(&h, &booking, json!({"operator": "ops"})).await;
    assert_eq!((st, c["quantity"].as_i64()), (200, Some(2)), "{c}");
    assert!(c["offered_to_waitlist"].is_string(), "{c}");
    let drift = admin_get(&h, &format!("/admin/shows/{SHOW}/pools/drift")).await;
    assert_eq!(drift["drifting"], 0, "{drift}");
}
