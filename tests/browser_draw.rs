//! The page for the curious (issue 15 item 1): `draw.html` in a real headless Chromium shows
//! the commitment before opening; after opening it recomputes every place of the published
//! draw in the browser (WebCrypto, as `waiting-room verify-draw` does) and finds a fan's number
//! from their visitor id, which must be the number the queue gave that fan.

mod support;

use fantoccini::Locator;
use support::browser::{connect, shot, wait_text, Driver};
use ticket_sale::stack::{self, DemoEvent, StackOptions};

/// Fans in the pre-queue (under the per-IP join limit).
const FANS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draw_page_recomputes_the_published_draw_and_finds_a_fans_number() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: "drawn".into(),
        opens_in_secs: 3600,
        admit_rate: 1.0,
        max_active: 5,
        admission_ttl_secs: 600,
    };
    let stack = stack::start(opts).await.expect("stack starts");
    let wr = stack.waiting_room_url.clone();
    let http = reqwest::Client::new();
    let mut fans = Vec::new();
    for _ in 0..FANS {
        let j: serde_json::Value = http
            .post(format!("{wr}/api/events/drawn/join"))
            .send()
            .await
            .expect("join")
            .json()
            .await
            .expect("json");
        fans.push(j);
    }
    let driver = Driver::start();
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect(&driver, profile.path()).await;
    let page = format!("{wr}/draw.html?event=drawn");
    c.goto(&page).await.expect("open page");
    wait_text(&c, "#draw-status", "only the commitment", 20).await;
    shot(&c, "draw-01-committed").await;

    let r = http
        .post(format!("{wr}/admin/events/drawn/open"))
        .bearer_auth(&stack.admin_token)
        .header("X-Operator", "browser-test")
        .send()
        .await
        .expect("open");
    assert!(r.status().is_success(), "open: {}", r.status());
    c.goto(&page).await.expect("reload page");
    wait_text(&c, "#draw-status", &format!("all {FANS} places"), 20).await;

    let fan = &fans[FANS / 2];
    let pos: serde_json::Value = http
        .get(format!("{wr}/api/events/drawn/position"))
        .bearer_auth(fan["join_token"].as_str().expect("token"))
        .send()
        .await
        .expect("position")
        .json()
        .await
        .expect("json");
    let number = pos["queue_number"].as_u64().expect("numbered");
    let input = c
        .find(Locator::Css("#draw-visitor"))
        .await
        .expect("visitor field");
    input.clear().await.expect("clear");
    input
        .send_keys(fan["visitor_id"].as_str().expect("visitor id"))
        .await
        .expect("type");
    c.find(Locator::Css("#draw-mine button"))
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    wait_text(
        &c,
        "#draw-result",
        &format!("Your number in the draw: {number}."),
        10,
    )
    .await;
    shot(&c, "draw-02-verified").await;
    let _ = c.close().await;
    stack.shutdown().await;
}
