//! The operator console keeps what the operator typed (issue 18 item 6), in a real headless
//! Chromium at both sizes (laptop, and the phone's mobile emulation): live values beside the
//! inputs while the figures refresh every second, both typed knobs applied and confirmed from the
//! server's answer, a refused change that stays until dismissed, buttons enabled only for the
//! transitions the state allows, and a confirmation step before closing. Screenshots under
//! `target/screenshots/`.

mod support;

use fantoccini::{Client, Locator};
use std::time::{Duration, Instant};
use support::browser::{click, open, shot, wait_focus, wait_text, Driver, Viewport, ONE_AT_A_TIME};
use ticket_sale::stack::{self, Stack, StackOptions};

/// An event that opens in 10 minutes: it stays in the pre-queue for the whole test.
async fn start_stack() -> Stack {
    let mut opts = StackOptions::local_random_ports();
    opts.event = support::demo_event(600, 600);
    stack::start(opts).await.expect("stack starts")
}

async fn value_of(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .prop("value")
        .await
        .expect("value")
        .unwrap_or_default()
}

async fn type_into(c: &Client, css: &str, text: &str) {
    let el = c.find(Locator::Css(css)).await.expect("input");
    el.click().await.expect("focus");
    el.clear().await.expect("clear");
    el.send_keys(text).await.expect("type");
}

/// Waits until the console has refreshed its figures `n` more times (its "updated" time moved on
/// `n` times), at most 20 s: a condition, not a fixed sleep.
async fn refreshes(c: &Client, n: usize) {
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.len() <= n {
        let t = c
            .find(Locator::Id("updated"))
            .await
            .expect("updated")
            .text()
            .await
            .unwrap_or_default();
        if seen.last() != Some(&t) {
            seen.push(t);
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the figures did not refresh {n} times: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn enabled(c: &Client, act: &str) -> bool {
    c.find(Locator::Css(&format!("[data-act='{act}']")))
        .await
        .expect("button")
        .is_enabled()
        .await
        .expect("enabled")
}

/// Which of open, pause, resume, close and sold out are enabled.
async fn allowed_buttons(c: &Client) -> [bool; 5] {
    let mut out = [false; 5];
    for (i, act) in ["open", "pause", "resume", "close", "sold-out"]
        .iter()
        .enumerate()
    {
        out[i] = enabled(c, act).await;
    }
    out
}

async fn figures(s: &Stack) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("{}/admin/events/demo", s.waiting_room_url))
        .bearer_auth(&s.admin_token)
        .header("X-Operator", "test")
        .send()
        .await
        .expect("figures")
        .json()
        .await
        .expect("json")
}

async fn console_keeps_typed_values(v: Viewport) {
    let _one = ONE_AT_A_TIME.lock().await;
    let s = start_stack().await;
    let driver = Driver::start();
    let (c, _profile) = open(&driver, v, "en").await;
    let n = format!("console-{}", v.name());
    c.goto(&format!("{}/console.html", s.waiting_room_url))
        .await
        .expect("console");
    type_into(&c, "#token", &s.admin_token).await;
    type_into(&c, "#operator", "ops-anna").await;
    click(&c, "#login button").await;
    wait_text(&c, "#live-rate", "20", 20).await;
    // Issue 17 item 4: the opening as local time with its offset and the event's zone (UTC here).
    let shown = wait_text(&c, "#figures", "Opens at (local)", 20).await;
    let opening = shown
        .lines()
        .skip_while(|l| !l.contains("Opens at (local)"))
        .nth(1)
        .unwrap_or_default();
    assert!(
        opening.ends_with(" UTC") && opening.contains("GMT"),
        "{opening:?}"
    );
    // The accessibility check can fail: an image without a text alternative is reported.
    c.execute(
        "const i = document.createElement('img'); i.id = 'axe-probe'; i.src = 'x.png';
         document.querySelector('main').append(i);",
        vec![],
    )
    .await
    .expect("add a probe");
    let found = support::browser::axe_violations(&c).await;
    assert!(
        found
            .iter()
            .any(|v| v["id"] == "image-alt" && v["impact"] == "critical"),
        "axe-core reports the probe: {found:?}"
    );
    c.execute("document.getElementById('axe-probe').remove();", vec![])
        .await
        .expect("remove the probe");
    assert_eq!(
        value_of(&c, "#k-rate").await,
        "",
        "live values are beside the inputs"
    );
    // Buttons follow the state: a pre-queue can open or close, not pause or resume.
    wait_text(&c, "#state", "prequeue", 10).await;
    let allowed = allowed_buttons(&c).await;
    assert_eq!(allowed, [true, false, false, true, true]);
    // Type a rate, move on to max_active and type it; the refreshes keep both.
    type_into(&c, "#k-rate", "7").await;
    type_into(&c, "#k-max", "3").await;
    click(&c, "#k-pow").await;
    refreshes(&c, 2).await;
    assert_eq!(
        value_of(&c, "#k-rate").await,
        "7",
        "the typed rate survives refreshes"
    );
    assert_eq!(value_of(&c, "#k-max").await, "3");
    shot(&c, &format!("{n}-01-typed")).await;
    click(&c, "#apply").await;
    let applied = wait_text(&c, "#applied", "Applied", 20).await;
    assert!(
        applied.contains("admit rate 7") && applied.contains("max_active 3"),
        "{applied}"
    );
    assert!(!applied.contains("Not what was asked"), "{applied}");
    // Focus is on the result line after every console action (issue 18 item 8).
    wait_focus(&c, "#applied", 5).await;
    wait_text(&c, "#live-rate", "7", 10).await;
    wait_text(&c, "#live-max", "3", 10).await;
    let f = figures(&s).await;
    assert_eq!(
        (f["admit_rate"].as_f64(), f["max_active"].as_u64()),
        (Some(7.0), Some(3))
    );
    let trail = wait_text(&c, "#audit", "set_max_active", 10).await;
    assert!(
        trail.contains("set_admit_rate") && trail.contains("ops-anna"),
        "{trail}"
    );
    shot(&c, &format!("{n}-02-applied")).await;
    // A refused change stays until dismissed.
    type_into(&c, "#k-rate", "2000000").await;
    click(&c, "#apply").await;
    let err = wait_text(&c, "#errors li", "admit_rate", 20).await;
    assert!(wait_focus(&c, "#errors li", 5).await.contains("admit_rate"));
    refreshes(&c, 2).await;
    assert_eq!(
        wait_text(&c, "#errors li", "admit_rate", 1).await,
        err,
        "still shown"
    );
    shot(&c, &format!("{n}-03-error")).await;
    click(&c, "#errors li .dismiss").await;
    let start = Instant::now();
    while c.find(Locator::Css("#errors li")).await.is_ok() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "dismissed error still shown"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_focus(&c, "#applied", 5).await;
    // Closing asks first; "keep" changes nothing, "yes" closes.
    click(&c, "[data-act='close']").await;
    let ask = wait_text(
        &c,
        "#confirm:not([hidden]) #confirm-text",
        "Close the sale",
        10,
    )
    .await;
    assert!(ask.contains("demo"), "{ask}");
    shot(&c, &format!("{n}-04-confirm-close")).await;
    support::browser::focus_visible(&c, 2).await;
    click(&c, "#confirm-no").await;
    refreshes(&c, 1).await;
    assert_eq!(figures(&s).await["internal_state"], "prequeue");
    click(&c, "[data-act='close']").await;
    wait_text(&c, "#confirm:not([hidden]) #confirm-yes", "Yes", 10).await;
    click(&c, "#confirm-yes").await;
    wait_text(&c, "#state", "closed", 20).await;
    assert!(wait_focus(&c, "#applied", 5).await.contains("now closed"));
    assert_eq!(figures(&s).await["internal_state"], "closed");
    let allowed = allowed_buttons(&c).await;
    assert_eq!(allowed, [false, false, false, false, true]);
    wait_text(&c, "#audit", "close", 10).await;
    shot(&c, &format!("{n}-05-closed")).await;
    // The sale report panel: totals and the charts, fetched with the admin token.
    click(&c, "#report-refresh").await;
    wait_text(&c, "#report-totals", "Admitted", 20).await;
    let start = Instant::now();
    loop {
        let width = c
            .execute(
                "const i = document.getElementById('report-chart');
                 return i.hidden ? 0 : i.naturalWidth;",
                vec![],
            )
            .await
            .expect("chart width");
        if width.as_u64() == Some(1000) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the report's chart never showed: {width}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.execute(
        "document.getElementById('report-h2').scrollIntoView();",
        vec![],
    )
    .await
    .expect("scroll");
    shot(&c, &format!("{n}-06-report")).await;
    c.close().await.ok();
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_keeping_typed_values_laptop() {
    console_keeps_typed_values(Viewport::Laptop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_keeping_typed_values_phone() {
    console_keeps_typed_values(Viewport::Phone).await;
}
