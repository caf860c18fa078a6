//! The booking core tells the waiting room (issue 4): a session ends when its hold is PAID or
//! released or the fan leaves, and the show is reported sold out when nothing is left to sell.
//! A tiny axum stub stands in for the waiting room's internal API and records every call.

mod support;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Json;
use sale_common::{Clock, Secret};
use serde_json::{json, Value};
use support::{Backend, Harness};

on_both!(sessions_end_and_sold_out_reach_the_waiting_room);

type Calls = Arc<Mutex<Vec<(String, String, Value)>>>;

/// Starts the stub; returns its base URL and the recorded `(path, authorization, body)`.
async fn stub() -> (String, Calls) {
    let calls: Calls = Arc::default();
    async fn end(
        State(c): State<Calls>,
        Path(ev): Path<String>,
        h: HeaderMap,
        Json(b): Json<Value>,
    ) -> Json<Value> {
        let auth = h["authorization"].to_str().unwrap().to_owned();
        c.lock()
            .unwrap()
            .push((format!("{ev}/sessions/end"), auth, b));
        Json(json!({"ended": true, "already_ended": false}))
    }
    async fn sold(State(c): State<Calls>, Path(ev): Path<String>, h: HeaderMap) -> Json<Value> {
        let auth = h["authorization"].to_str().unwrap().to_owned();
        c.lock()
            .unwrap()
            .push((format!("{ev}/sold-out"), auth, Value::Null));
        Json(json!({"event": ev, "state": "sold_out"}))
    }
    let app = axum::Router::new()
        .route("/internal/events/{event}/sessions/end", post(end))
        .route("/internal/events/{event}/sold-out", post(sold))
        .with_state(calls.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    (url, calls)
}

async fn sessions_end_and_sold_out_reach_the_waiting_room(b: Backend) {
    let (wr, calls) = stub().await;
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, 2);
        c.waiting_room_url = wr.clone();
        c.service_token = Some(Secret::new("svc-token"));
    })
    .await;
    let outbox = h.state.outbox();
    let sent = |calls: &Calls| calls.lock().unwrap().clone();
    // paid → the session ends
    h.buy("payer", "A-1-1").await;
    let out = outbox.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.notices, 1, "{out:?}");
    assert_eq!(
        sent(&calls),
        vec![(
            "demo/sessions/end".into(),
            "Bearer svc-token".into(),
            json!({"jti": "jti-payer"})
        )]
    );
    // released by the fan → the session ends
    let t = h.token("quitter");
    let (_, hold) = h.hold(&t, "k", &["A-1-2"]).await;
    let r = h
        .http
        .delete(format!(
            "{}/api/holds/{}",
            h.base,
            hold["hold_id"].as_str().unwrap()
        ))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // the fan leaves without holding anything
    let r = h
        .http
        .post(format!("{}/api/leave", h.base))
        .bearer_auth(h.token("browser"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    outbox.step(h.clock.now_ms()).await.unwrap();
    let bodies: Vec<Value> = sent(&calls).into_iter().map(|c| c.2).collect();
    assert!(
        bodies.contains(&json!({"jti": "jti-quitter"})),
        "{bodies:?}"
    );
    assert!(
        bodies.contains(&json!({"jti": "jti-browser"})),
        "{bodies:?}"
    );
    assert!(
        !sent(&calls).iter().any(|c| c.0.ends_with("sold-out")),
        "a seat is left"
    );
    // the last seat sells → sold out, reported once
    h.buy("last", "A-1-2").await;
    outbox.step(h.clock.now_ms()).await.unwrap();
    outbox.step(h.clock.now_ms()).await.unwrap();
    let sold: Vec<_> = sent(&calls)
        .into_iter()
        .filter(|c| c.0 == "demo/sold-out")
        .collect();
    assert_eq!(sold.len(), 1, "{:?}", sent(&calls));
    assert_eq!(sold[0].1, "Bearer svc-token");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND sent_at IS NULL",
            "session-end"
        )
        .await,
        0
    );
}
