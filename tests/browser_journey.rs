//! One fan's whole journey in a real headless Chromium (Debian's `chromium` driven through
//! `chromedriver` by fantoccini): waiting page → admitted → seat map → hold → pay on the gateway
//! simulator's checkout page → confirmation. Checks visible text and saves screenshots under
//! `target/screenshots/`.

use fantoccini::{ClientBuilder, Locator};
use sale_common::testsupport::free_port;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use ticket_sale::stack::{self, DemoEvent, StackOptions};

/// A chromedriver child on a free port, killed on drop.
struct Driver(Child, u16);

impl Driver {
    fn start() -> Self {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver must be installed (Debian's chromium-driver)");
        Self(child, port)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn connect(driver: &Driver, profile: &std::path::Path) -> fantoccini::Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-dev-shm-usage", "--window-size=1000,1400",
                     format!("--user-data-dir={}", profile.display())]
        }),
    );
    let url = format!("http://127.0.0.1:{}", driver.1);
    for _ in 0..100 {
        if let Ok(c) = ClientBuilder::native()
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("could not connect to chromedriver at {url}");
}

fn shots_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).expect("create target/screenshots");
    dir
}

async fn shot(c: &fantoccini::Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(shots_dir().join(format!("{name}.png")), png).expect("write screenshot");
}

async fn text_of(c: &fantoccini::Client, css: &str) -> String {
    let el = c
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} never appeared: {e}"));
    el.text().await.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_books_a_seat_in_a_real_browser() {
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: "demo".into(),
        opens_in_secs: 3,
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
    let title = text_of(&c, "#title").await;
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
    shot(&c, "02-seat-map").await;

    c.find(Locator::Css("#seatmap .seat.free"))
        .await
        .expect("a free seat")
        .click()
        .await
        .expect("click seat");
    c.find(Locator::Id("hold"))
        .await
        .expect("hold button")
        .click()
        .await
        .expect("click hold");
    let held = text_of(&c, "#held:not([hidden]) #held-seats").await;
    assert!(held.contains('-'), "held seats shown: {held}");
    shot(&c, "03-held").await;

    c.find(Locator::Id("pay"))
        .await
        .expect("pay button")
        .click()
        .await
        .expect("click pay");
    let checkout = c
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Id("pay"))
        .await
        .expect("checkout page");
    let url = c.current_url().await.expect("url");
    assert!(
        url.as_str().starts_with(&stack.gateway_url),
        "on the gateway: {url}"
    );
    shot(&c, "04-checkout").await;
    checkout.click().await.expect("press Pay at the gateway");

    let confirmed = c
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::XPath(
            "//h1[@id='headline' and text()='Booking confirmed']",
        ))
        .await;
    let headline = text_of(&c, "#headline").await;
    shot(&c, "05-confirmation").await;
    assert!(
        confirmed.is_ok(),
        "confirmation page never said so: {headline}"
    );
    assert_eq!(headline, "Booking confirmed");
    let details = text_of(&c, "#details").await;
    assert!(
        details.contains("are yours"),
        "confirmation details: {details}"
    );

    // The back office agrees: exactly one booking.
    let bookings: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/admin/shows/demo/bookings", stack.booking_url))
        .bearer_auth(&stack.admin_token)
        .send()
        .await
        .expect("bookings")
        .json()
        .await
        .expect("json");
    let n = bookings.as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(n, 1, "one booking in the back office: {bookings}");

    c.close().await.ok();
    stack.shutdown().await;
}
