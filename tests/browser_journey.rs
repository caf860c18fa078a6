//! One fan's whole journey in a real headless Chromium (Debian's `chromium` driven through
//! `chromedriver` by fantoccini): waiting page → admitted → seat map → hold → pay on the gateway
//! simulator's checkout page → confirmation. Checks visible text and saves screenshots under
//! `target/screenshots/`.

mod support;

use fantoccini::Locator;
use std::time::Duration;
use support::browser::{
    click, connect, open, shot, text_of, wait_text, wait_url, Driver, Viewport,
};
use ticket_sale::stack::{self, DemoEvent, EventAbout, StackOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_books_a_seat_in_a_real_browser() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: "demo".into(),
        // Opens in 5 s: time to see the waiting page before the fan is let in.
        opens_in_secs: 5,
        admit_rate: 20.0,
        max_active: 10,
        admission_ttl_secs: 600,
    };
    let stack = stack::start(opts).await.expect("stack starts");
    let driver = Driver::start();
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect(&driver, profile.path()).await;

    c.goto(&format!("{}/?event=demo", stack.waiting_room_url))
        .await
        .expect("open waiting page");
    // Read at once: the page leaves for the booking core when the fan is let in.
    let seen = c
        .execute(
            "return [location.pathname, (document.getElementById('title') || {}).textContent || ''];",
            vec![],
        )
        .await
        .expect("read the waiting page");
    assert_eq!(seen[0], "/", "still on the waiting page: {seen}");
    let title = seen[1].as_str().unwrap_or_default();
    assert!(
        title.contains("waiting room"),
        "waiting page title: {title}"
    );
    shot(&c, "01-waiting-room").await;

    // Admission hands the token over with a form POST; the booking page then shows the seat map.
    c.wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css("#seatmap .seat.free"))
        .await
        .expect("admitted and the seat map is shown");
    let url = c.current_url().await.expect("url");
    assert!(
        url.as_str().starts_with(&stack.booking_url),
        "on the booking core: {url}"
    );
    assert!(
        !url.as_str().contains("admission_token"),
        "token must not travel in URLs: {url}"
    );
    assert!(!url.as_str().contains("eyJ"), "no JWT in the URL: {url}");
    // The map's age, from the booking core's Seat-Map-Age-Ms header (issue 13 item 6).
    let age = text_of(&c, "#map-age").await;
    assert!(age.starts_with("Seat map as of "), "map age shown: {age:?}");
    // A venue without a layout (the launcher's): the list of sections, no plan.
    let plain: serde_json::Value = c
        .execute(
            "return [!!document.getElementById('plan'), document.querySelectorAll('#sections button').length];",
            vec![],
        )
        .await
        .expect("read the overview");
    assert_eq!(plain[0], false, "no plan without a layout");
    assert!(
        plain[1].as_u64().unwrap_or(0) >= 1,
        "sections listed: {plain}"
    );
    shot(&c, "02-seat-map").await;

    support::browser::hold_pay_and_confirm(&c, &stack.gateway_url, "03").await;

    // The back office agrees: exactly one booking.
    let n = support::browser::demo_bookings(&stack.booking_url, &stack.admin_token).await;
    assert_eq!(n, 1, "one booking in the back office");

    c.close().await.ok();
    stack.shutdown().await;
}

/// A venue file in pounds sterling (issue 18 item 4) with a plan (stage and section outlines):
/// sections S (£45.00) and T (£30.00 plus a £2.50 booking fee per seat).
fn gbp_venue(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("gbp-venue.json");
    let venue = serde_json::json!({
        "name": "Royal Hall", "currency": "GBP", "time_zone": "Europe/London",
        "rows": 4, "seats_per_row": 12,
        "sections": [{"name": "S", "price_cents": 4500},
                     {"name": "T", "price_cents": 3000, "fee_cents": 250, "rows": [20, 22, 24, 24]}],
        "layout": {
            "stage": {"points": [[20, 0], [80, 0], [80, 10], [20, 10]]},
            "sections": [
                {"section": "S", "shape": {"points": [[10, 20], [48, 20], [48, 50], [10, 50]]}},
                {"section": "T", "shape": {"points": [[52, 20], [90, 20], [90, 50], [52, 50]]}}
            ]
        }
    });
    std::fs::write(&path, venue.to_string()).expect("write the venue file");
    path
}

/// Prices in the venue's currency (issue 18 item 4): with a GBP venue file, the seat labels, the
/// selection's total, the hold page, the gateway's checkout and the confirmation show pounds,
/// formatted for the page's language (English `£45.00`, French `45,00 £`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prices_are_in_the_venues_currency_in_english_and_french() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().expect("venue dir");
    let mut opts = StackOptions::local_random_ports();
    opts.event = support::demo_event(0, 600);
    opts.venue = Some(gbp_venue(dir.path()));
    let stack = stack::start(opts).await.expect("stack starts");
    let driver = Driver::start();
    // WebDriver's visible text turns no-break spaces into spaces; attributes keep them.
    let plain = |s: &str| s.replace(['\u{a0}', '\u{202f}'], " ");
    for (lang, price, id) in [("en", "£45.00", "S-1-1"), ("fr", "45,00\u{a0}£GB", "S-1-2")] {
        let (c, _profile) = open(&driver, Viewport::Laptop, lang).await;
        c.goto(&format!("{}/?event=demo", stack.waiting_room_url))
            .await
            .expect("open waiting page");
        let seat = c
            .wait()
            .at_most(Duration::from_secs(60))
            .for_element(Locator::Css(&format!("#seat-{id}.free")))
            .await
            .expect("admitted and the seat map is shown");
        let label = seat
            .attr("aria-label")
            .await
            .expect("label")
            .unwrap_or_default();
        assert!(
            plain(&label).contains(&plain(price)),
            "{lang} seat label: {label:?}"
        );
        click(&c, &format!("#seat-{id}")).await;
        let summary = text_of(&c, "#selection").await;
        assert!(
            plain(&summary).contains(&plain(price)),
            "{lang} summary: {summary:?}"
        );
        shot(&c, &format!("journey-gbp-{lang}-map")).await;
        click(&c, "#hold").await;
        let total = wait_text(&c, "#held:not([hidden]) #held-total", "£", 20).await;
        assert_eq!(plain(&total), plain(price), "{lang} hold total");
        shot(&c, &format!("journey-gbp-{lang}-held")).await;
        click(&c, "#pay").await;
        wait_url(&c, &stack.gateway_url, 30).await;
        let amount = text_of(&c, "#amount").await;
        assert_eq!(plain(&amount), plain(price), "{lang} checkout amount");
        shot(&c, &format!("journey-gbp-{lang}-checkout")).await;
        click(&c, "#pay").await;
        let details = wait_text(&c, "#details", "£", 30).await;
        assert!(
            plain(&details).contains(&plain(price)),
            "{lang} confirmation: {details:?}"
        );
        shot(&c, &format!("journey-gbp-{lang}-confirmation")).await;
        c.close().await.ok();
    }
    stack.shutdown().await;
}

/// Whether the page scrolls sideways, and the right edge of the grid's last seat against the
/// viewport's width.
async fn sideways(c: &fantoccini::Client) -> serde_json::Value {
    c.execute(
        "const d = document.documentElement;
         const right = Math.max(...Array.from(document.querySelectorAll('#seatmap .seat'),
           (b) => b.getBoundingClientRect().right));
         return {scroll: d.scrollWidth, width: d.clientWidth, right: right};",
        vec![],
    )
    .await
    .expect("measure the page")
}

/// A seat map people can use on a phone (issue 18 item 3), at both sizes: the venue's plan and
/// the list of sections; choosing section T (rows of up to 24 seats) shows its seats as a grid
/// that fits the viewport's width (no sideways scroll), each seat named "Section T, row 1, seat
/// 1, £32.50, free" (price with fee); one tap on "Hold the best 2 together" holds two seats side
/// by side in T, and the hold page shows "£60.00 + £5.00 fees = £65.00".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_chooses_a_section_and_holds_the_best_seats_in_one_tap() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().expect("venue dir");
    let mut opts = StackOptions::local_random_ports();
    opts.event = support::demo_event(0, 600);
    opts.venue = Some(gbp_venue(dir.path()));
    let stack = stack::start(opts).await.expect("stack starts");
    let driver = Driver::start();
    // Section T has 90 seats; the laptop's fan holds two before the phone's comes.
    for (v, free) in [(Viewport::Laptop, 90), (Viewport::Phone, 88)] {
        let (c, _profile) = open(&driver, v, "en").await;
        let n = format!("journey-sections-{}", v.name());
        c.goto(&format!("{}/?event=demo", stack.waiting_room_url))
            .await
            .expect("open waiting page");
        c.wait()
            .at_most(Duration::from_secs(60))
            .for_element(Locator::Css("#plan polygon.area"))
            .await
            .expect("admitted and the venue's plan is shown");
        let item = text_of(&c, "#section-T").await;
        assert!(
            item.contains("£32.50 (£30.00 + £2.50 fee)") && item.contains(&format!("{free} free")),
            "section T listed with price and seats free: {item}"
        );
        shot(&c, &format!("{n}-01-overview")).await;
        click(&c, "#section-T").await;
        let seat = c
            .wait()
            .at_most(Duration::from_secs(20))
            .for_element(Locator::Css("#seat-T-4-24"))
            .await
            .expect("section T's seats");
        let label = seat
            .attr("aria-label")
            .await
            .expect("label")
            .unwrap_or_default();
        assert_eq!(label, "Section T, row 4, seat 24, £32.50, free");
        let heading = wait_text(&c, "#section-h2", "Section T", 10).await;
        assert!(heading.contains("£32.50 (£30.00 + £2.50 fee)"), "{heading}");
        let fit = sideways(&c).await;
        let width = fit["width"].as_f64().unwrap_or(0.0);
        assert!(
            fit["scroll"].as_f64().unwrap_or(f64::MAX) <= width
                && fit["right"].as_f64().unwrap_or(f64::MAX) <= width,
            "the grid fits the viewport ({}): {fit}",
            v.name()
        );
        if v == Viewport::Phone {
            assert!(width <= 390.0, "phone width: {fit}");
        }
        shot(&c, &format!("{n}-02-section")).await;
        let best = text_of(&c, "#best").await;
        assert_eq!(best, "Hold the best 2 together");
        click(&c, "#best").await;
        let held = wait_text(&c, "#held:not([hidden]) #held-seats", "T-", 20).await;
        // Focus is on the headline that says so (issue 18 item 8).
        support::browser::wait_focus(&c, "#headline", 5).await;
        let seats: Vec<&str> = held.split(", ").collect();
        assert_eq!(seats.len(), 2, "two seats held: {held}");
        assert!(seats.iter().all(|s| s.starts_with("T-")), "{held}");
        // Price and fee apart before the gateway: 2 × £30.00 + 2 × £2.50.
        let total = text_of(&c, "#held-total").await;
        assert_eq!(total, "£65.00");
        let fees = text_of(&c, "#held-fees").await;
        assert_eq!(fees, "£60.00 + £5.00 fees = £65.00");
        shot(&c, &format!("{n}-03-held")).await;
        c.close().await.ok();
    }
    stack.shutdown().await;
}

/// `HH:MM` of epoch second `t` at a fixed offset of `offset_h` hours (Asia/Tokyo has no DST).
fn clock_at(t: i64, offset_h: i64) -> String {
    let s = (t + offset_h * 3600).rem_euclid(86_400);
    format!("{:02}:{:02}", s / 3600, s % 3600 / 60)
}

/// The waiting page says what the fan waits for (issue 18 item 5), in English and French: the
/// event's name, its venue and date, and the opening as a clock time in the event's own time
/// zone (the waiting room's `time_zone`, here Asia/Tokyo, UTC+9, unlike the browser's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_says_what_the_fan_waits_for() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    // Opens in 5 minutes: the page stays before the opening for the whole test.
    opts.event = support::demo_event(300, 600);
    opts.about = EventAbout {
        name: Some("Midnight Opera".into()),
        venue: Some("Royal Hall".into()),
        // 2026-12-12 11:00 UTC = 20:00 in Tokyo.
        starts_at: Some(1_797_073_200),
        time_zone: Some("Asia/Tokyo".into()),
    };
    let stack = stack::start(opts).await.expect("stack starts");
    let about: serde_json::Value =
        reqwest::get(format!("{}/api/events/demo/about", stack.waiting_room_url))
            .await
            .expect("about")
            .json()
            .await
            .expect("about json");
    assert_eq!(
        about,
        serde_json::json!({"event": "demo", "name": "Midnight Opera", "venue": "Royal Hall",
                           "starts_at": 1_797_073_200, "time_zone": "Asia/Tokyo"})
    );
    let status: serde_json::Value =
        reqwest::get(format!("{}/status/demo.json", stack.waiting_room_url))
            .await
            .expect("status")
            .json()
            .await
            .expect("status json");
    let opens = clock_at(status["opens_at"].as_i64().expect("opens_at"), 9);
    let driver = Driver::start();
    let cases = [
        (
            "en",
            "Royal Hall · Saturday, December 12, 2026 at 20:00 (Asia/Tokyo)",
            format!("Opens at {opens} Asia/Tokyo, GMT+9"),
        ),
        (
            "fr",
            "Royal Hall · samedi 12 décembre 2026 à 20:00 (Asia/Tokyo)",
            format!("Ouverture à {opens} Asia/Tokyo, GMT+9"),
        ),
    ];
    for (lang, details, opening) in cases {
        for v in Viewport::BOTH {
            let (c, _profile) = open(&driver, v, lang).await;
            c.goto(&format!("{}/?event=demo", stack.waiting_room_url))
                .await
                .expect("open waiting page");
            assert_eq!(text_of(&c, "#about-name").await, "Midnight Opera");
            let said = wait_text(&c, "#about-details", "Royal Hall", 10).await;
            assert_eq!(said, details, "{lang} event details");
            let at = wait_text(&c, "#opens-at", "Asia/Tokyo", 10).await;
            assert_eq!(at, opening, "{lang} opening time");
            shot(&c, &format!("journey-waiting-about-{lang}-{}", v.name())).await;
            // A pre-queued fan may leave the pre-queue (issue 18 item 5), focus following.
            click(&c, "#leave").await;
            support::browser::wait_focus(&c, "#leave-question", 5).await;
            click(&c, "#leave-yes").await;
            let left = support::browser::wait_focus(&c, "#left-title", 10).await;
            let want = if lang == "fr" {
                "Vous avez quitté la file"
            } else {
                "You left the line"
            };
            assert_eq!(left, want);
            shot(&c, &format!("journey-waiting-left-{lang}-{}", v.name())).await;
            c.close().await.ok();
        }
    }
    stack.shutdown().await;
}

/// Polls (every 100 ms, at most 20 s) until `#ahead` shows exactly `want`.
async fn wait_ahead(c: &fantoccini::Client, want: u64) {
    let start = std::time::Instant::now();
    loop {
        let shown = text_of(c, "#ahead").await;
        if shown == want.to_string() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "people ahead never showed {want} (shows {shown})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The line told truthfully (issue 18 item 5) and focus after each action (item 8), on a laptop
/// and a phone: with the line paused, a fan ahead leaves and the page's "people ahead" drops at
/// once (the old formula number − cursor − 1 would not move); the fan leaves the line in two
/// steps (focus on the question, then on "You left the line"), and joins again at the back
/// (focus on the line's state).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_ahead_drop_when_a_fan_ahead_leaves_the_line() {
    let _one = support::browser::ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    opts.event = support::demo_event(0, 600);
    let stack = stack::start(opts).await.expect("stack starts");
    let wr = stack.waiting_room_url.clone();
    let http = reqwest::Client::new();
    let admin = |method: reqwest::Method, tail: &str| {
        http.request(method, format!("{wr}/admin/events/demo{tail}"))
            .bearer_auth(&stack.admin_token)
            .header("x-operator", "ops-test")
    };
    // Open, then pause so the cursor stands still while the test looks at the line.
    let start = std::time::Instant::now();
    loop {
        let f: serde_json::Value = admin(reqwest::Method::GET, "")
            .send()
            .await
            .expect("figures")
            .json()
            .await
            .expect("figures json");
        if f["internal_state"] == "open" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never opened: {f}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let paused = admin(reqwest::Method::POST, "/pause")
        .send()
        .await
        .expect("pause");
    assert!(paused.status().is_success(), "{}", paused.status());
    let driver = Driver::start();
    for v in Viewport::BOTH {
        let n = format!("journey-leave-{}", v.name());
        let _first = support::join(&http, &wr, "demo").await;
        let second = support::join(&http, &wr, "demo").await;
        let (c, _profile) = open(&driver, v, "en").await;
        c.goto(&format!("{wr}/?event=demo"))
            .await
            .expect("waiting page");
        wait_text(&c, "#queue-box:not([hidden]) #queue-number", "", 20).await;
        let token = c
            .execute("return localStorage.getItem('join:demo');", vec![])
            .await
            .expect("join token");
        let token = token.as_str().expect("token").to_owned();
        let pos = |t: String| {
            let http = http.clone();
            let url = format!("{wr}/api/events/demo/position");
            async move {
                let r = http.get(url).bearer_auth(t).send().await.expect("position");
                r.json::<serde_json::Value>().await.expect("position json")
            }
        };
        let p = pos(token.clone()).await;
        let before = p["ahead"].as_u64().expect("ahead");
        let formula = p["queue_number"].as_u64().expect("n") - p["cursor"].as_u64().expect("c") - 1;
        wait_ahead(&c, before).await;
        // The second fan ahead leaves: one fewer ahead, though no number moved.
        let left = http
            .post(format!("{wr}/api/events/demo/leave"))
            .bearer_auth(&second)
            .send()
            .await
            .expect("leave");
        assert_eq!(left.status(), 200);
        wait_ahead(&c, before - 1).await;
        let p = pos(token.clone()).await;
        let formula_now =
            p["queue_number"].as_u64().expect("n") - p["cursor"].as_u64().expect("c") - 1;
        assert_eq!(formula_now, formula, "the old formula did not move");
        assert_eq!(p["ahead"].as_u64(), Some(before - 1));
        shot(&c, &format!("{n}-01-one-fewer-ahead")).await;
        // This fan leaves too: asked first, then told, focus following each step.
        click(&c, "#leave").await;
        let q = support::browser::wait_focus(&c, "#leave-question", 5).await;
        assert!(q.contains("cannot be given back"), "{q}");
        support::browser::axe(&c, &format!("{n}-02-leave-question")).await;
        click(&c, "#leave-yes").await;
        let said = support::browser::wait_focus(&c, "#left-title", 10).await;
        assert_eq!(said, "You left the line");
        assert_eq!(c.title().await.expect("title"), "You left the line");
        shot(&c, &format!("{n}-03-left")).await;
        let p = pos(token.clone()).await;
        assert_eq!(
            p["queue_number"],
            serde_json::Value::Null,
            "the place is given up: {p}"
        );
        // Joining again is a new place at the end, and focus goes to the line's state.
        click(&c, "#left-rejoin").await;
        support::browser::wait_focus(&c, "#state", 10).await;
        wait_text(&c, "#queue-box:not([hidden]) #queue-number", "", 20).await;
        c.close().await.ok();
    }
    stack.shutdown().await;
}
