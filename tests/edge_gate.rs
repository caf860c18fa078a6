//! The edge gate (issue "bots and draw", item 3): nginx (`infra/gate-start`,
//! `infra/nginx/gate.conf.template`) guards every path of another origin with the admission
//! token, asking the booking core's door (`/gate/{audience}/check`) through `auth_request`.
//! Through the real nginx: a page without a token is redirected to the waiting room, an API call
//! gets 403 problem+json, and neither reaches the origin; the token handed over by the form POST
//! (`/_gate/enter`) opens both; and with the waiting room stopped the gate still verifies (the
//! door keeps the JWKS it read).

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use ticket_sale::cdn::Cdn;
use ticket_sale::stack::{self, DemoEvent, StackOptions};

/// The guarded origin: a page and an API, counting the requests that reach it.
async fn origin(hits: Arc<AtomicU64>) -> SocketAddr {
    use axum::routing::get;
    let count = move |body: &'static str| {
        let hits = hits.clone();
        move || async move {
            hits.fetch_add(1, Ordering::SeqCst);
            body
        }
    };
    // What the origin is sent: the gate keeps the token to itself.
    let echo = |h: axum::http::HeaderMap| async move {
        let get = |n: &str| {
            h.get(n)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_owned()
        };
        format!(
            "cookie={} authorization={}",
            get("cookie"),
            get("authorization")
        )
    };
    let app = axum::Router::new()
        .route("/shop", get(count("merch page")))
        .route("/api/items", get(count(r#"{"items": ["scarf"]}"#)))
        .route("/echo", get(echo));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await });
    addr
}

/// Joins `event` and claims the admission as soon as it is this visitor's turn.
async fn admission_token(c: &reqwest::Client, wr: &str, event: &str) -> String {
    let join = support::join(c, wr, event).await;
    // The event opens now and admits 50/s: the deadline is generous for a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(token) = support::claim(c, wr, event, &join).await {
            return token;
        }
        assert!(Instant::now() < deadline, "not admitted within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_gate_redirects_pages_refuses_api_calls_and_verifies_with_the_waiting_room_down() {
    let hits = Arc::new(AtomicU64::new(0));
    let origin = origin(hits.clone()).await;
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: "gate".into(),
        opens_in_secs: 0,
        admit_rate: 50.0,
        max_active: 100,
        admission_ttl_secs: 600,
    };
    opts.gate_audiences = vec!["shop".into()];
    let mut s = stack::start(opts).await.expect("stack starts");
    let waiting_page = format!("{}/?event=gate", s.waiting_room_url);
    let gate = Cdn::start_gate(
        0,
        &origin.to_string(),
        s.booking_url.trim_start_matches("http://"),
        "shop",
        &waiting_page,
    )
    .expect("the gate (nginx) starts");
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let g = &gate.url;

    // No token: the page is redirected to the waiting room, the API call refused with 403 JSON.
    let r = c.get(format!("{g}/shop")).send().await.expect("page");
    assert_eq!(r.status(), 302);
    assert_eq!(header(&r, "location"), waiting_page);
    let r = c.get(format!("{g}/api/items")).send().await.expect("api");
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "content-type"), "application/problem+json");
    let p: Value = r.json().await.expect("problem json");
    assert_eq!(p["type"], "/problems/admission-required");
    assert_eq!(p["waiting_room"], waiting_page.as_str());
    // A cookie or bearer that is not a valid token does no better.
    let r = c
        .get(format!("{g}/shop"))
        .header("cookie", "gate_admission=not.a.token")
        .send()
        .await
        .expect("page");
    assert_eq!(r.status(), 302);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "refused requests reached the origin"
    );

    let token = admission_token(&c, &s.waiting_room_url, "gate").await;
    // One token, two audiences: the booking core's own door still takes it.
    let me = c
        .get(format!("{}/api/me", s.booking_url))
        .bearer_auth(&token)
        .send()
        .await
        .expect("me");
    assert_eq!(me.status(), 200);
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    let r = c
        .get(format!("{g}/api/items"))
        .bearer_auth(&forged)
        .send()
        .await
        .expect("api");
    assert_eq!(r.status(), 403, "a forged signature passed the gate");

    // The hand-over: a form POST sets this origin's HttpOnly cookie and goes on to return_to.
    let r = c
        .post(format!("{g}/_gate/enter"))
        .form(&[("admission_token", forged.as_str()), ("return_to", "/shop")])
        .send()
        .await
        .expect("enter");
    assert_eq!(r.status(), 401, "a forged token was handed over");
    let r = c
        .post(format!("{g}/_gate/enter"))
        .form(&[
            ("admission_token", token.as_str()),
            ("return_to", "//evil.example/"),
        ])
        .send()
        .await
        .expect("enter");
    assert_eq!(r.status(), 303);
    assert_eq!(header(&r, "location"), "/", "return_to left the origin");
    let cookie = header(&r, "set-cookie").to_owned();
    assert!(
        cookie.starts_with(&format!("gate_admission={token};")) && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let jar = format!("gate_admission={token}");

    let through = |c: reqwest::Client, url: String, jar: String, bearer: Option<String>| async move {
        let mut req = c.get(url);
        req = match bearer {
            Some(t) => req.bearer_auth(t),
            None => req.header("cookie", jar),
        };
        let r = req.send().await.expect("through the gate");
        (r.status().as_u16(), r.text().await.unwrap_or_default())
    };
    assert_eq!(
        through(c.clone(), format!("{g}/shop"), jar.clone(), None).await,
        (200, "merch page".into())
    );
    assert_eq!(
        through(
            c.clone(),
            format!("{g}/api/items"),
            jar.clone(),
            Some(token.clone())
        )
        .await,
        (200, r#"{"items": ["scarf"]}"#.into())
    );
    assert_eq!(hits.load(Ordering::SeqCst), 2);
    // The origin never sees the token: not the gate's cookie (its other cookies pass), not the
    // bearer (the token's aud also names the booking core, where it is a fan's admission).
    let seen = c
        .get(format!("{g}/echo"))
        .header("cookie", format!("a=1; gate_admission={token}; b=2"))
        .send()
        .await
        .expect("echo")
        .text()
        .await
        .expect("echo body");
    assert_eq!(
        seen, "cookie=a=1; b=2 authorization=-",
        "the origin was sent {seen:?}"
    );
    let seen = c
        .get(format!("{g}/echo"))
        .bearer_auth(&token)
        .send()
        .await
        .expect("echo")
        .text()
        .await
        .expect("echo body");
    assert!(
        !seen.contains(&token),
        "the origin was sent the token: {seen:?}"
    );

    // The waiting room goes down; the gate keeps verifying with the keys the door holds.
    s.stop_waiting_room().await.expect("the waiting room stops");
    assert!(
        c.get(format!("{}/healthz", s.waiting_room_url))
            .send()
            .await
            .is_err(),
        "the waiting room still answers"
    );
    assert_eq!(
        through(c.clone(), format!("{g}/shop"), jar.clone(), None).await,
        (200, "merch page".into())
    );
    assert_eq!(
        through(c.clone(), format!("{g}/api/items"), jar, Some(token))
            .await
            .0,
        200
    );
    let r = c.get(format!("{g}/shop")).send().await.expect("page");
    assert_eq!(
        r.status(),
        302,
        "without a token, still sent to the waiting room"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 4);
    drop(gate);
    s.shutdown().await;
}
