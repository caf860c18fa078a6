//! The console's quiet-lane panel (issue 15 item 2) in a real headless Chromium, in French:
//! an operator adds a shadow rule for the local address range through the form, a client
//! joining from it shows up in the shadow line (its rule, its address), the operator releases it
//! into the fans' line, and a bad range is refused and reported; a blocked range's waiting page
//! says it is not accepted. The panel's strings are the
//! French ones; every screenshot is checked by axe-core. Screenshots under `target/screenshots/`.

mod support;

use fantoccini::{Client, Locator};
use support::browser::{click, open, shot, wait_text, Driver, Viewport, ONE_AT_A_TIME};
use ticket_sale::stack::{self, StackOptions};

async fn type_into(c: &Client, css: &str, text: &str) {
    let el = c.find(Locator::Css(css)).await.expect("input");
    el.click().await.expect("focus");
    el.clear().await.expect("clear");
    el.send_keys(text).await.expect("type");
}

async fn rows(c: &Client, css: &str) -> usize {
    c.find_all(Locator::Css(css)).await.map_or(0, |v| v.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_lists_the_shadow_line_and_releases_a_false_positive_in_french() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    opts.event = support::demo_event(600, 600);
    let s = stack::start(opts).await.expect("stack starts");
    let driver = Driver::start();
    let (c, _profile) = open(&driver, Viewport::Laptop, "fr").await;
    c.goto(&format!("{}/console.html", s.waiting_room_url))
        .await
        .expect("console");
    type_into(&c, "#token", &s.admin_token).await;
    type_into(&c, "#operator", "ops-lea").await;
    click(&c, "#login button").await;
    wait_text(&c, "#rules-panel summary", "Règles par adresse", 20).await;
    click(&c, "#rules-panel summary").await;
    click(&c, "#shadow-panel summary").await;
    wait_text(&c, "#shadow-empty", "Personne dans la file fantôme", 20).await;

    // A bad range is refused by the server and reported until dismissed.
    type_into(&c, "#rule-cidr", "10.0.0.1/8").await;
    click(&c, "#rule-form button").await;
    wait_text(&c, "#errors li", "10.0.0.1/8", 20).await;

    // A shadow rule for the local range, then a client joining from it.
    type_into(&c, "#rule-cidr", "127.0.0.0/8").await;
    type_into(&c, "#rule-note", "essai").await;
    click(&c, "#rule-form button").await;
    let rules = wait_text(&c, "#rules", "127.0.0.0/8", 20).await;
    assert!(
        rules.contains("ombre") && rules.contains("ops-lea"),
        "{rules}"
    );
    let http = reqwest::Client::new();
    let joined: serde_json::Value = http
        .post(format!("{}/api/events/demo/join", s.waiting_room_url))
        .send()
        .await
        .expect("join")
        .json()
        .await
        .expect("json");
    let visitor = joined["visitor_id"].as_str().expect("visitor").to_owned();
    let line = wait_text(&c, "#shadow", &visitor, 20).await;
    assert!(line.contains("127.0.0.1"), "{line}");
    shot(&c, "console-shadow-01-listed-fr").await;

    // Release: the client leaves the shadow line, the audit trail says so.
    click(&c, "#shadow button").await;
    wait_text(&c, "#shadow-empty", "Personne dans la file fantôme", 20).await;
    assert_eq!(rows(&c, "#shadow tr").await, 0);
    wait_text(&c, "#audit", "release_shadow", 20).await;
    let trail = wait_text(&c, "#audit", "add_rule", 5).await;
    assert!(trail.contains("ops-lea"), "{trail}");
    shot(&c, "console-shadow-02-released-fr").await;

    // Delete the rule.
    click(&c, "#rules button").await;
    wait_text(&c, "#rules-empty", "Aucune règle", 20).await;
    wait_text(&c, "#audit", "delete_rule", 20).await;

    // A blocked range: the waiting page says so (in French) and stops asking.
    let added = http
        .post(format!("{}/admin/events/demo/rules", s.waiting_room_url))
        .bearer_auth(&s.admin_token)
        .json(&serde_json::json!({"cidr": "127.0.0.0/8", "action": "block"}))
        .send()
        .await
        .expect("add a block rule");
    assert_eq!(added.status(), 201);
    c.goto(&format!("{}/?event=demo", s.waiting_room_url))
        .await
        .expect("waiting page");
    wait_text(&c, "#blocked", "ne sont pas acceptées", 20).await;
    wait_text(&c, "#state", "Non acceptée", 5).await;
    shot(&c, "wait-blocked-fr").await;
    c.close().await.ok();
    s.shutdown().await;
}
