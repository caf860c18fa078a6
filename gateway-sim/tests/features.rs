//! The simulator's gateway features over a real socket: the rate-limited token grant, refunds
//! (idempotent), merchant void, signed webhooks with several signatures during a key rotation,
//! per-payment faults (5xx, duplicate and dropped webhooks) and success after the deadline.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::HeaderMap;
use sale_common::{ManualClock, Secret};
use serde_json::{json, Value};

type Inbox = Arc<Mutex<Vec<(String, Value)>>>;

struct Sim {
    url: String,
    http: reqwest::Client,
    clock: ManualClock,
    inbox: Inbox,
    hook: String,
}

async fn start(tweak: impl FnOnce(&mut gateway_sim::Config)) -> Sim {
    let inbox: Inbox = Arc::default();
    let hl = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", hl.local_addr().unwrap());
    let ib = inbox.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |h: HeaderMap, b: Bytes| {
            let ib = ib.clone();
            async move {
                let sig = h["gateway-signature"].to_str().unwrap().to_owned();
                ib.lock()
                    .unwrap()
                    .push((sig, serde_json::from_slice(&b).unwrap()));
                "ok"
            }
        }),
    );
    tokio::spawn(async move { axum::serve(hl, app).await });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let clock = ManualClock::new(1_764_500_000_000);
    let mut c = gateway_sim::Config::demo(url.clone(), Secret::new("s3cret"));
    c.clock = Arc::new(clock.clone());
    tweak(&mut c);
    tokio::spawn(gateway_sim::serve(l, c, std::future::pending()));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Sim {
        url,
        http,
        clock,
        inbox,
        hook,
    }
}

impl Sim {
    async fn grant(&self) -> reqwest::Response {
        self.http
            .post(format!("{}/v1/oauth/token", self.url))
            .basic_auth("booking-core", Some("s3cret"))
            .send()
            .await
            .unwrap()
    }
    async fn token(&self) -> String {
        let v: Value = self.grant().await.json().await.unwrap();
        v["access_token"].as_str().unwrap().to_owned()
    }
    async fn create(&self, t: &str) -> String {
        let body = json!({"amount_cents": 5000, "reference": "h1", "return_url": "http://shop/cb",
                          "notify_url": self.hook, "expires_at": 1_764_500_420});
        let r = self
            .http
            .post(format!("{}/v1/payments", self.url))
            .bearer_auth(t)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let v: Value = r.json().await.unwrap();
        v["payment_id"].as_str().unwrap().to_owned()
    }
    async fn post(&self, t: &str, path: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.url))
            .bearer_auth(t)
            .header("Idempotency-Key", "k")
            .send()
            .await
            .unwrap()
    }
    async fn status(&self, t: &str, id: &str) -> Value {
        self.http
            .get(format!("{}/v1/payments/{id}", self.url))
            .bearer_auth(t)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
    async fn events(&self, n: usize) -> Vec<(String, Value)> {
        for _ in 0..100 {
            if self.inbox.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(30)).await;
        }
        self.inbox.lock().unwrap().clone()
    }
}

#[tokio::test]
async fn grants_are_limited_per_hour_and_tokens_required() {
    let s = start(|_| {}).await;
    let r = s
        .http
        .post(format!("{}/v1/payments", s.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert!(r.status() == 401 || r.status() == 422 || r.status() == 400);
    let t = s.token().await;
    let _ = s.token().await;
    let r = s.grant().await;
    assert_eq!(r.status(), 429, "third grant within the hour");
    assert!(r.headers().contains_key("retry-after"));
    let bad = s
        .http
        .post(format!("{}/v1/oauth/token", s.url))
        .basic_auth("booking-core", Some("no"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 401);
    let id = s.create(&t).await;
    assert_eq!(
        s.http
            .get(format!("{}/v1/payments/{id}", s.url))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    s.clock.advance_ms(3_600_001);
    assert_eq!(s.grant().await.status(), 200, "the window slid");
    let g: Value = s
        .http
        .get(format!("{}/v1/oauth/grants", s.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(g["grants"], 3);
}

#[tokio::test]
async fn refund_is_idempotent_and_void_cancels() {
    let s = start(|_| {}).await;
    let t = s.token().await;
    let id = s.create(&t).await;
    assert_eq!(
        s.post(&t, &format!("/v1/payments/{id}/refund"))
            .await
            .status(),
        409
    );
    s.http
        .post(format!("{}/checkout/{id}/pay", s.url))
        .send()
        .await
        .unwrap();
    s.post(&t, &format!("/v1/payments/{id}/execute")).await;
    let r1: Value = s
        .post(&t, &format!("/v1/payments/{id}/refund"))
        .await
        .json()
        .await
        .unwrap();
    let r2: Value = s
        .post(&t, &format!("/v1/payments/{id}/refund"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r1["status"], "refunded");
    assert_eq!(r1["refund_id"], r2["refund_id"]);
    let id2 = s.create(&t).await;
    let v: Value = s
        .post(&t, &format!("/v1/payments/{id2}/void"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "cancelled");
}

#[tokio::test]
async fn webhooks_are_signed_with_every_key_and_faults_apply_per_payment() {
    let s = start(|c| c.webhook_secrets = vec![Secret::new("old"), Secret::new("new")]).await;
    let t = s.token().await;
    let id = s.create(&t).await;
    s.http
        .post(format!("{}/checkout/{id}/pay", s.url))
        .send()
        .await
        .unwrap();
    let ev = s.events(1).await;
    let (sig, body) = &ev[0];
    assert_eq!(body["type"], "payment.approved");
    assert_eq!(sig.matches("v1=").count(), 2, "{sig}");
    let ts: i64 = sig.split(',').next().unwrap()[2..].parse().unwrap();
    let want = gateway_sim::webhooks::signature_header(&[b"new"], ts, body.to_string().as_bytes());
    assert!(
        sig.contains(want.split(',').nth(1).unwrap()),
        "the new key's signature is present"
    );
    // per-payment: 5xx on every call of this payment only
    let id2 = s.create(&t).await;
    s.http
        .post(format!("{}/v1/faults/payments/{id2}", s.url))
        .json(&json!({"error_rate": 1.0, "duplicate_webhook_rate": 1.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        s.post(&t, &format!("/v1/payments/{id2}/execute"))
            .await
            .status(),
        503
    );
    assert_eq!(
        s.post(&t, &format!("/v1/payments/{id}/execute"))
            .await
            .status(),
        200
    );
    s.http
        .post(format!("{}/checkout/{id2}/cancel", s.url))
        .send()
        .await
        .unwrap();
    let ev = s.events(4).await;
    let cancelled = ev
        .iter()
        .filter(|e| e.1["type"] == "payment.cancelled")
        .count();
    assert_eq!(cancelled, 2, "duplicated delivery: {ev:?}");
    let ids: Vec<&Value> = ev
        .iter()
        .filter(|e| e.1["type"] == "payment.cancelled")
        .map(|e| &e.1["id"])
        .collect();
    assert_eq!(ids[0], ids[1], "a duplicate repeats the event id");
}

#[tokio::test]
async fn late_success_completes_after_the_deadline_and_drop_sends_nothing() {
    let s = start(|_| {}).await;
    s.http
        .post(format!("{}/v1/faults", s.url))
        .json(&json!({"late_success_rate": 1.0}))
        .send()
        .await
        .unwrap();
    let t = s.token().await;
    let id = s.create(&t).await;
    s.http
        .post(format!("{}/checkout/{id}/pay", s.url))
        .send()
        .await
        .unwrap();
    let e: Value = s
        .post(&t, &format!("/v1/payments/{id}/execute"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(e["status"], "approved", "execute does not complete it");
    s.clock.advance_ms(421_000);
    assert_eq!(s.status(&t, &id).await["status"], "approved");
    s.clock.advance_ms(120_000);
    let st = s.status(&t, &id).await;
    assert_eq!(st["status"], "completed");
    assert!(st["transaction_id"].is_string());
    let ev = s.events(2).await;
    assert!(ev.iter().any(|e| e.1["type"] == "payment.completed"));
    // dropped webhooks
    s.http
        .post(format!("{}/v1/faults", s.url))
        .json(&json!({"late_success_rate": 0.0, "drop_webhook_rate": 1.0}))
        .send()
        .await
        .unwrap();
    let before = s.inbox.lock().unwrap().len();
    let id2 = s.create(&t).await;
    s.http
        .post(format!("{}/checkout/{id2}/cancel", s.url))
        .send()
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(s.inbox.lock().unwrap().len(), before);
    let bad = s
        .http
        .post(format!("{}/v1/faults", s.url))
        .json(&json!({"nope": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

/// Partial refunds by amount, each under its own idempotency key (a retry answers the same
/// refund), never more than the amount; the last cent makes the payment `refunded`. The
/// console refunds or disputes outside the merchant, and every refund or dispute is a webhook.
#[tokio::test]
async fn partial_refunds_by_key_and_the_console_refunds_and_disputes() {
    let s = start(|_| {}).await;
    let t = s.token().await;
    let completed = |id: String| {
        let s = &s;
        let t = &t;
        async move {
            s.http
                .post(format!("{}/checkout/{id}/pay", s.url))
                .send()
                .await
                .unwrap();
            s.post(t, &format!("/v1/payments/{id}/execute")).await;
            id
        }
    };
    let id = completed(s.create(&t).await).await;
    let refund = |key: &'static str, amount: Option<i64>| {
        let (s, t, id) = (&s, &t, &id);
        async move {
            let mut r = s
                .http
                .post(format!("{}/v1/payments/{id}/refund", s.url))
                .bearer_auth(t)
                .header("Idempotency-Key", key);
            if let Some(a) = amount {
                r = r.json(&json!({"amount_cents": a}));
            }
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (st, a) = refund("seat-1", Some(2000)).await;
    assert_eq!(
        (st, &a["status"], &a["amount_cents"]),
        (200, &json!("completed"), &json!(2000))
    );
    let (_, again) = refund("seat-1", Some(2000)).await;
    assert_eq!(again["refund_id"], a["refund_id"], "same key, same refund");
    assert_eq!(s.status(&t, &id).await["refunded_cents"], 2000);
    let (st, too) = refund("seat-2", Some(3001)).await;
    assert_eq!((st, &too["refundable_cents"]), (409, &json!(3000)));
    let (st, rest) = refund("rest", None).await;
    assert_eq!(
        (st, &rest["status"], &rest["amount_cents"]),
        (200, &json!("refunded"), &json!(3000))
    );
    assert_eq!(refund("more", Some(1)).await.0, 409);
    let events = s.events(4).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.1["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "payment.refunded").count(),
        2,
        "one event per refund: {kinds:?}"
    );
    // The console: a refund of part, then a chargeback of the rest; no token needed.
    let id2 = completed(s.create(&t).await).await;
    let r: Value = s
        .http
        .post(format!("{}/v1/sim/payments/{id2}/refund", s.url))
        .json(&json!({"amount_cents": 1000}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&r["status"], &r["refunded_cents"]),
        (&json!("completed"), &json!(1000))
    );
    let d = s
        .http
        .post(format!("{}/v1/sim/payments/{id2}/dispute", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(d.status(), 200);
    assert_eq!(s.status(&t, &id2).await["status"], "disputed");
    let events = s.events(8).await;
    assert!(events
        .iter()
        .any(|e| e.1["type"] == "payment.disputed" && e.1["data"]["payment_id"] == id2.as_str()));
}
