//! The waiting page in a real headless Chromium, through the CDN (nginx, `infra/`): pre-queue
//! countdown, opening, position falling, a refresh keeping the place, the paused state, then
//! admitted → seat map → hold → pay → confirmation; and the closed, sold-out and "trouble
//! reaching us" states. Each step checks visible text and saves a screenshot under
//! `target/screenshots/`.

mod support;

use fantoccini::Locator;
use std::time::{Duration, Instant};
use support::browser::{connect, shot, text_of, wait_text, Driver};

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

async fn admin(stack: &ticket_sale::stack::Stack, path: &str, body: Option<serde_json::Value>) {
    let c = reqwest::Client::new();
    let url = format!("{}/admin/events{path}", stack.waiting_room_url);
    let req = c
        .post(url)
        .bearer_auth(&stack.admin_token)
        .header("X-Operator", "browser-test");
    let req = match body {
        Some(b) => req.json(&b),
        None => req,
    };
    let r = req.send().await.expect("admin call");
    assert!(
        r.status().is_success(),
        "admin {path}: {} {}",
        r.status(),
        r.text().await.unwrap_or_default()
    );
}

async fn create_event(stack: &ticket_sale::stack::Stack, id: &str, opens_in: i64) {
    let body = serde_json::json!({"id": id, "opens_at": now_secs() + opens_in, "admit_rate": 1.0, "max_active": 5});
    admin(stack, "", Some(body)).await;
}

async fn ahead(c: &fantoccini::Client) -> u64 {
    text_of(c, "#ahead")
        .await
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_page_from_countdown_to_confirmation_through_the_cdn() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let (stack, cdn) = support::start_with_cdn("edge", 2, 1.0).await;
    let driver = Driver::start();
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect(&driver, profile.path()).await;

    // Pre-queue: a countdown and the promise that the order is drawn at opening.
    create_event(&stack, "later", 3600).await;
    c.goto(&format!("{}/?event=later", cdn.url))
        .await
        .expect("open page");
    wait_text(&c, "#countdown-box:not([hidden]) #countdown", "min", 20).await;
    let shuffle = text_of(&c, "#shuffle").await;
    assert!(
        shuffle.contains("random order"),
        "shuffle notice: {shuffle}"
    );
    shot(&c, "edge-01-prequeue-countdown").await;

    // Eight fans get in line first (after opening: FIFO), then our fan.
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let doc: serde_json::Value = http
            .get(format!("{}/status/edge.json", stack.waiting_room_url))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("json");
        if doc["state"] == "open" {
            break;
        }
        assert!(Instant::now() < deadline, "the event never opened: {doc}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..8 {
        let r = http
            .post(format!("{}/api/events/edge/join", stack.waiting_room_url))
            .send()
            .await
            .expect("join");
        assert!(r.status().is_success());
    }
    c.goto(&format!("{}/?event=edge", cdn.url))
        .await
        .expect("open page");
    wait_text(&c, "#queue-box:not([hidden]) #queue-number", "", 20).await;
    let first_ahead = ahead(&c).await;
    let number = text_of(&c, "#queue-number").await;
    assert!(
        (1..20).contains(&first_ahead),
        "people ahead: {first_ahead}"
    );
    shot(&c, "edge-02-in-line").await;

    // A refresh keeps the place (the join token lives in localStorage, never in the URL).
    c.refresh().await.expect("refresh");
    let again = wait_text(&c, "#queue-box:not([hidden]) #queue-number", &number, 20).await;
    assert_eq!(again, number, "the refresh kept the queue number");
    assert!(!c.current_url().await.expect("url").as_str().contains("eyJ"));

    // The operator pauses: the page says so in plain words, and the place is kept.
    admin(&stack, "/edge/pause", None).await;
    let paused = wait_text(&c, "#state", "paused", 20).await;
    shot(&c, "edge-03-paused").await;
    assert!(paused.contains("Your place is kept"));
    admin(&stack, "/edge/resume", None).await;

    // Position falls as the cursor moves.
    let start = Instant::now();
    loop {
        let now_ahead = ahead(&c).await;
        if now_ahead < first_ahead || c.find(Locator::Css("#seatmap")).await.is_ok() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "people ahead never fell from {first_ahead}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Admitted: the token is handed over by a form POST, then seat map → hold → pay → confirmed.
    c.wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css("#seatmap .seat.free"))
        .await
        .expect("admitted to the seat map");
    assert!(!c.current_url().await.expect("url").as_str().contains("eyJ"));
    shot(&c, "edge-04-seat-map").await;
    support::browser::hold_pay_and_confirm(&c, &stack.gateway_url, "edge-05").await;

    c.close().await.ok();
    drop(cdn);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_page_shows_closed_sold_out_and_trouble_in_plain_words() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let (stack, cdn) = support::start_with_cdn("states", 3600, 1.0).await;
    let driver = Driver::start();
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect(&driver, profile.path()).await;

    create_event(&stack, "closing", 0).await;
    c.goto(&format!("{}/?event=closing", cdn.url))
        .await
        .expect("open page");
    wait_text(&c, "#state", "open", 20).await;
    admin(&stack, "/closing/close", None).await;
    wait_text(&c, "#state", "The sale is closed.", 20).await;
    shot(&c, "edge-07-closed").await;

    create_event(&stack, "gone", 0).await;
    c.goto(&format!("{}/?event=gone", cdn.url))
        .await
        .expect("open page");
    wait_text(&c, "#state", "open", 20).await;
    admin(&stack, "/gone/sold-out", None).await;
    wait_text(&c, "#state", "Sold out", 20).await;
    shot(&c, "edge-08-sold-out").await;

    // The origin goes away: the CDN keeps serving the page, and the page says what is wrong.
    c.goto(&format!("{}/?event=states", cdn.url))
        .await
        .expect("open page");
    wait_text(&c, "#state", "not opened yet", 20).await;
    stack.shutdown().await;
    let trouble = wait_text(&c, "#trouble:not([hidden])", "trouble reaching", 40).await;
    assert!(trouble.contains("your place is kept"));
    shot(&c, "edge-09-trouble").await;

    c.close().await.ok();
    drop(cdn);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_page_solves_the_proof_of_work_in_a_web_worker() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let (stack, cdn) = support::start_with_cdn("pow", 3600, 1.0).await;
    let r = reqwest::Client::new()
        .patch(format!("{}/admin/events/pow", stack.waiting_room_url))
        .bearer_auth(&stack.admin_token)
        .header("X-Operator", "browser-test")
        .json(&serde_json::json!({"pow_difficulty": 10}))
        .send()
        .await
        .expect("set difficulty");
    assert!(
        r.status().is_success(),
        "PATCH pow_difficulty: {}",
        r.status()
    );
    // Without a proof, a join is refused.
    let plain = reqwest::Client::new()
        .post(format!("{}/api/events/pow/join", stack.waiting_room_url))
        .send()
        .await
        .expect("join");
    assert_eq!(
        plain.status(),
        403,
        "a join without proof of work is refused"
    );

    let driver = Driver::start();
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect(&driver, profile.path()).await;
    c.goto(&format!("{}/?event=pow", cdn.url))
        .await
        .expect("open page");
    // The worker finds a solution and the fan gets a place in the pre-queue.
    wait_text(&c, "#state", "not opened yet", 60).await;
    let token: serde_json::Value = c
        .execute("return localStorage.getItem('join:pow');", vec![])
        .await
        .expect("read localStorage");
    assert!(
        token.as_str().is_some_and(|t| t.split('.').count() == 3),
        "join token stored: {token}"
    );
    shot(&c, "edge-10-after-proof-of-work").await;
    c.close().await.ok();
    drop(cdn);
    stack.shutdown().await;
}
