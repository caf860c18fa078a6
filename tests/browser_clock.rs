//! Case W15, a phone with the wrong time: the waiting page's countdown to opening, the booking
//! page's hold timer and the console's time to opening are shown from the server's clock. Each
//! page runs in a headless Chromium whose device clock is 10 minutes fast, then 10 minutes slow
//! (CDP `Page.addScriptToEvaluateOnNewDocument` shifting `Date`), and the shown time left must be
//! within a few seconds of the truth taken from the server's own figures and the real clock.

mod support;

use fantoccini::Locator;
use std::time::Duration;
use support::browser::{shot, shown_secs, skewed_browser, unix_now, wait_text, Driver};
use ticket_sale::stack::{self, DemoEvent, StackOptions};

/// Device clock offsets tried on every page: 10 minutes fast, 10 minutes slow.
const SKEWS: [i64; 2] = [600, -600];
/// How far the shown time may be from the truth: the page refreshes the countdown once per
/// poll (≤ 2 s), rounds to whole seconds, and the test reads the page a moment later.
const TOLERANCE_SECS: f64 = 4.0;

async fn stack_with(id: &str, opens_in_secs: u64) -> stack::Stack {
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: id.into(),
        opens_in_secs,
        admit_rate: 20.0,
        max_active: 10,
        admission_ttl_secs: 600,
    };
    stack::start(opts).await.expect("stack starts")
}

async fn opens_at(stack: &stack::Stack, event: &str) -> f64 {
    let doc: serde_json::Value =
        reqwest::get(format!("{}/status/{event}.json", stack.waiting_room_url))
            .await
            .expect("status")
            .json()
            .await
            .expect("json");
    doc["opens_at"].as_f64().expect("opens_at")
}

/// A browser `skew` seconds off, showing `url`.
async fn open_skewed(
    driver: &Driver,
    skew: i64,
    url: String,
) -> (fantoccini::Client, tempfile::TempDir) {
    let (c, profile) = skewed_browser(driver, skew).await;
    c.goto(&url)
        .await
        .unwrap_or_else(|e| panic!("open {url}: {e}"));
    (c, profile)
}

fn assert_close(what: &str, skew: i64, shown: &str, truth: f64) {
    let secs = shown_secs(shown).unwrap_or_else(|| panic!("{what}: not a duration: {shown:?}"));
    assert!(
        (secs - truth).abs() <= TOLERANCE_SECS,
        "{what} with the device clock {skew:+} s off: shows {shown:?} ({secs} s), truth {truth:.1} s"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_w15_waiting_page_counts_down_from_the_server_clock() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let stack = stack_with("later", 1800).await;
    let opens_at = opens_at(&stack, "later").await;
    let driver = Driver::start();
    for skew in SKEWS {
        let url = format!("{}/?event=later", stack.waiting_room_url);
        let (c, _profile) = open_skewed(&driver, skew, url).await;
        let shown = wait_text(&c, "#countdown-box:not([hidden]) #countdown", "min", 30).await;
        assert_close("countdown to opening", skew, &shown, opens_at - unix_now());
        shot(&c, &format!("w15-waiting-{skew:+}")).await;
        c.close().await.ok();
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_w15_booking_page_hold_timer_from_the_server_clock() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let stack = stack_with("demo", 0).await;
    let driver = Driver::start();
    for skew in SKEWS {
        let url = format!("{}/?event=demo", stack.waiting_room_url);
        let (c, _profile) = open_skewed(&driver, skew, url).await;
        c.wait()
            .at_most(Duration::from_secs(60))
            .for_element(Locator::Css("#seatmap .seat.free"))
            .await
            .expect("admitted and the seat map is shown");
        c.find(Locator::Css("#seatmap .seat.free"))
            .await
            .expect("a free seat")
            .click()
            .await
            .expect("pick it");
        c.find(Locator::Css("#hold"))
            .await
            .expect("hold button")
            .click()
            .await
            .expect("hold");
        let shown = wait_text(&c, "#held:not([hidden]) #countdown", "min", 20).await;
        let now = unix_now();
        // The truth: the server's one deadline for this hold (the last moment to start paying,
        // issue 18 item 2), read with the fan's own cookie.
        let hold = support::browser::hold_on_page(&c).await;
        let pay_by = hold["pay_by"]
            .as_f64()
            .unwrap_or_else(|| panic!("the hold names its deadline: {hold}"));
        assert!(
            pay_by < hold["expires_at"].as_f64().unwrap_or(0.0),
            "the last moment to start paying comes before the hold's end: {hold}"
        );
        assert_close("hold timer", skew, &shown, pay_by - now);
        shot(&c, &format!("w15-hold-{skew:+}")).await;
        c.close().await.ok();
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_w15_console_counts_down_from_the_server_clock() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let stack = stack_with("later", 1800).await;
    let opens_at = opens_at(&stack, "later").await;
    let driver = Driver::start();
    for skew in SKEWS {
        let url = format!("{}/console.html", stack.waiting_room_url);
        let (c, _profile) = open_skewed(&driver, skew, url).await;
        for (id, value) in [
            ("token", stack.admin_token.as_str()),
            ("operator", "w15-test"),
        ] {
            c.find(Locator::Id(id))
                .await
                .expect("login field")
                .send_keys(value)
                .await
                .expect("type");
        }
        let ev = c.find(Locator::Id("event")).await.expect("event field");
        ev.clear().await.expect("clear");
        ev.send_keys("later").await.expect("type");
        c.find(Locator::Css("#login button"))
            .await
            .expect("login button")
            .click()
            .await
            .expect("log in");
        let shown = wait_text(&c, "#figures", "Opens in", 20).await;
        let value = shown
            .lines()
            .skip_while(|l| !l.contains("Opens in"))
            .nth(1)
            .unwrap_or_else(|| panic!("no value after \"Opens in\": {shown:?}"))
            .to_owned();
        assert_close(
            "console's time to opening",
            skew,
            &value,
            opens_at - unix_now(),
        );
        shot(&c, &format!("w15-console-{skew:+}")).await;
        c.close().await.ok();
    }
    stack.shutdown().await;
}
