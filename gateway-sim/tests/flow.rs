//! The simulator over a real socket: create, checkout page, pay, execute (idempotent), cancel,
//! expiry, and fault injection.

use std::sync::Arc;

use sale_common::{ManualClock, Secret};
use serde_json::{json, Value};

struct Sim {
    url: String,
    http: reqwest::Client,
    clock: ManualClock,
    token: String,
}

async fn start() -> Sim {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let clock = ManualClock::new(1_764_500_000_000);
    let mut c = gateway_sim::Config::demo(url.clone(), Secret::new("s3cret"));
    c.clock = Arc::new(clock.clone());
    tokio::spawn(gateway_sim::serve(l, c, std::future::pending()));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let g: Value = http
        .post(format!("{url}/v1/oauth/token"))
        .basic_auth("booking-core", Some("s3cret"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = g["access_token"].as_str().unwrap().to_owned();
    Sim {
        url,
        http,
        clock,
        token,
    }
}

impl Sim {
    async fn create(&self) -> Value {
        let body = json!({"amount_cents": 12000, "reference": "hold-1", "return_url": "http://shop/cb", "expires_at": 1_764_500_420});
        let r = self
            .http
            .post(format!("{}/v1/payments", self.url))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json().await.unwrap()
    }
    async fn post(&self, path: &str) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
    }
    async fn status(&self, id: &str) -> Value {
        self.http
            .get(format!("{}/v1/payments/{id}", self.url))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn pay_execute_is_idempotent_and_redirect_is_signed() {
    let s = start().await;
    let p = s.create().await;
    let id = p["payment_id"].as_str().unwrap();
    assert_eq!(p["checkout_url"], format!("{}/checkout/{id}", s.url));
    assert_eq!(p["signature"].as_str().unwrap().len(), 64);
    let page = s
        .http
        .get(p["checkout_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("id=\"pay\"") && page.contains("id=\"cancel\"") && page.contains("hold-1")
    );
    assert_eq!(
        s.post(&format!("/v1/payments/{id}/execute")).await.status(),
        409,
        "not approved yet"
    );
    let r = s.post(&format!("/checkout/{id}/pay")).await;
    assert_eq!(r.status(), 303);
    let loc = r.headers()["location"].to_str().unwrap();
    assert_eq!(
        loc,
        format!(
            "http://shop/cb?paymentID={id}&status=success&signature={}",
            p["signature"].as_str().unwrap()
        )
    );
    let e1: Value = s
        .post(&format!("/v1/payments/{id}/execute"))
        .await
        .json()
        .await
        .unwrap();
    let e2: Value = s
        .post(&format!("/v1/payments/{id}/execute"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(e1["status"], "completed");
    assert_eq!(e1["transaction_id"], e2["transaction_id"]);
    assert_eq!(s.status(id).await["status"], "completed");
}

#[tokio::test]
async fn cancel_expiry_and_faults() {
    let s = start().await;
    let p = s.create().await;
    let id = p["payment_id"].as_str().unwrap();
    let r = s.post(&format!("/checkout/{id}/cancel")).await;
    assert!(r.headers()["location"]
        .to_str()
        .unwrap()
        .contains("status=cancel"));
    assert_eq!(
        s.post(&format!("/v1/payments/{id}/execute")).await.status(),
        409
    );
    // expiry: not paid before expires_at
    let p2 = s.create().await;
    let id2 = p2["payment_id"].as_str().unwrap();
    s.clock.advance_ms(421_000);
    assert_eq!(s.post(&format!("/checkout/{id2}/pay")).await.status(), 410);
    assert_eq!(s.status(id2).await["status"], "expired");
    // fail fault
    s.clock.set_ms(1_764_500_000_000);
    let f = s
        .http
        .post(format!("{}/v1/faults", s.url))
        .json(&json!({"fail_rate": 1.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(f.status(), 200);
    let p3 = s.create().await;
    let id3 = p3["payment_id"].as_str().unwrap();
    s.post(&format!("/checkout/{id3}/pay")).await;
    let e: Value = s
        .post(&format!("/v1/payments/{id3}/execute"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(e["status"], "failed");
    let bad = s
        .http
        .post(format!("{}/v1/faults", s.url))
        .json(&json!({"fail_rate": 2.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert_eq!(
        s.http
            .get(format!("{}/healthz", s.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "ok"
    );
}
