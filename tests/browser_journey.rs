//! One fan's whole journey in a real headless Chromium (Debian's `chromium` driven through
//! `chromedriver` by fantoccini): waiting page → admitted → seat map → hold → pay on the gateway
//! simulator's checkout page → confirmation. Checks visible text and saves screenshots under
//! `target/screenshots/`.

mod support;

use fantoccini::Locator;
use std::time::Duration;
use support::browser::{connect, shot, text_of, Driver};
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
