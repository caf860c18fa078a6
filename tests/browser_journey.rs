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
use ticket_sale::stack::{self, DemoEvent, StackOptions};

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
    shot(&c, "02-seat-map").await;

    support::browser::hold_pay_and_confirm(&c, &stack.gateway_url, "03").await;

    // The back office agrees: exactly one booking.
    let n = support::browser::demo_bookings(&stack.booking_url, &stack.admin_token).await;
    assert_eq!(n, 1, "one booking in the back office");

    c.close().await.ok();
    stack.shutdown().await;
}

/// A venue file in pounds sterling (issue 18 item 4): two sections, one with a plan (stage and
/// section outlines).
fn gbp_venue(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("gbp-venue.json");
    let venue = serde_json::json!({
        "name": "Royal Hall", "currency": "GBP", "time_zone": "Europe/London",
        "rows": 4, "seats_per_row": 12,
        "sections": [{"name": "S", "price_cents": 4500}, {"name": "T", "price_cents": 3000}],
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
    for (lang, price, seat) in [("en", "£45.00", "S-1-1"), ("fr", "45,00\u{a0}£GB", "S-1-2")] {
        let (c, _profile) = open(&driver, Viewport::Laptop, lang).await;
        c.goto(&format!("{}/?event=demo", stack.waiting_room_url))
            .await
            .expect("open waiting page");
        let seat = c
            .wait()
            .at_most(Duration::from_secs(60))
            .for_element(Locator::Css(&format!("#seat-{seat}.free")))
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
        seat.click().await.expect("choose the seat");
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
