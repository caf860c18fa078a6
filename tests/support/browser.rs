//! Headless Chromium (Debian's `chromium`) through `chromedriver`, driven by fantoccini: start,
//! connect with the flags this machine needs (no network, no sandbox as root), screenshots under
//! `target/screenshots/`, and waits for visible text.

use fantoccini::{ClientBuilder, Locator};
use sale_common::testsupport::free_port;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A chromedriver child on a free port, in a process group of its own, which is killed on
/// drop: the Chromium it started is in that group too, so a test that panics before it closes
/// its session leaves no browser behind (a newcomer's run with axe-core missing left 27).
pub struct Driver(Child, u16);

impl Driver {
    pub fn start() -> Self {
        use std::os::unix::process::CommandExt;
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver must be installed (Debian's chromium-driver)");
        Self(child, port)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group (`kill -KILL -- -PGID`, procps' kill; the workspace forbids the
        // unsafe call to kill(2)), then the child itself in case the group signal failed.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub async fn connect(driver: &Driver, profile: &std::path::Path) -> fantoccini::Client {
    connect_with(driver, profile, None, "en").await
}

/// The two sizes a fan's page is tried at (issue 18): a laptop window (1280×800) and a phone,
/// which is Chromium's mobile emulation (390×844 CSS pixels, DPR 3, touch, a mobile user agent),
/// not only a narrow window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewport {
    Laptop,
    Phone,
}

impl Viewport {
    /// Both sizes, laptop first.
    pub const BOTH: [Viewport; 2] = [Viewport::Laptop, Viewport::Phone];

    /// `laptop` or `phone`, for screenshot names.
    pub fn name(self) -> &'static str {
        match self {
            Viewport::Laptop => "laptop",
            Viewport::Phone => "phone",
        }
    }
}

/// A Chromium at `viewport` whose languages are `lang` first (`navigator.languages` and
/// `Accept-Language`, e.g. `fr`); checks both took effect on a blank page.
pub async fn open(
    driver: &Driver,
    viewport: Viewport,
    lang: &str,
) -> (fantoccini::Client, tempfile::TempDir) {
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect_with(driver, profile.path(), Some(viewport), lang).await;
    c.goto("about:blank").await.expect("blank page");
    let seen: serde_json::Value = c
        .execute(
            "return [navigator.languages[0] || navigator.language, screen.width, window.devicePixelRatio, navigator.maxTouchPoints];",
            vec![],
        )
        .await
        .expect("read the browser's settings");
    assert!(
        seen[0].as_str().unwrap_or_default().starts_with(lang),
        "browser languages: {seen}"
    );
    if viewport == Viewport::Phone {
        assert_eq!(
            (seen[1].as_i64(), seen[2].as_f64()),
            (Some(390), Some(3.0)),
            "mobile emulation: {seen}"
        );
        assert!(seen[3].as_i64().unwrap_or(0) > 0, "touch emulated: {seen}");
    }
    (c, profile)
}

async fn connect_with(
    driver: &Driver,
    profile: &std::path::Path,
    viewport: Option<Viewport>,
    lang: &str,
) -> fantoccini::Client {
    let size = match viewport {
        None => "--window-size=1000,1400",
        Some(Viewport::Laptop) => "--window-size=1280,800",
        // The emulated device sets the page's size; the window only has to hold it.
        Some(Viewport::Phone) => "--window-size=500,1000",
    };
    let accept = if lang == "en" {
        "en-US,en".to_owned()
    } else {
        format!("{lang},en;q=0.5")
    };
    let mut opts = serde_json::json!({
        "binary": "/usr/bin/chromium",
        "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", size, format!("--lang={lang}"),
                 format!("--user-data-dir={}", profile.display())],
        "prefs": {"intl.accept_languages": accept}
    });
    if viewport == Some(Viewport::Phone) {
        opts["mobileEmulation"] = serde_json::json!({
            "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 3.0, "touch": true, "mobile": true},
            "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Mobile Safari/537.36"
        });
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), opts);
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

pub fn shots_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    std::fs::create_dir_all(&dir).expect("create target/screenshots");
    dir
}

/// Saves a screenshot `target/screenshots/{name}.png` of the page in its current state, and
/// checks that state with axe-core ([`axe`]).
pub async fn shot(c: &fantoccini::Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(shots_dir().join(format!("{name}.png")), png).expect("write screenshot");
    axe(c, name).await;
}

/// The violations axe-core finds on the current page, as `[{id, impact, help, nodes}]`.
pub async fn axe_violations(c: &fantoccini::Client) -> Vec<serde_json::Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/a11y/node_modules/axe-core/axe.min.js");
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (scripts/install-test-deps installs axe-core with npm ci)",
            path.display()
        )
    });
    c.execute(&format!("{source}\n;return typeof axe;"), vec![])
        .await
        .expect("inject axe-core");
    let found = c
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, {resultTypes: ['violations']}).then(
               (r) => done(r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                 nodes: v.nodes.map((n) => n.target.join(' '))}))),
               (e) => done('axe failed: ' + e));",
            vec![],
        )
        .await
        .expect("run axe-core");
    match found {
        serde_json::Value::Array(v) => v,
        other => panic!("axe-core: {other}"),
    }
}

/// Runs axe-core on the page (issue 18 item 8), writes its violations to
/// `target/screenshots/axe/{name}.json` (the count per page is the closing note's figure) and
/// fails on any serious or critical one.
pub async fn axe(c: &fantoccini::Client, name: &str) {
    let found = axe_violations(c).await;
    let dir = shots_dir().join("axe");
    std::fs::create_dir_all(&dir).expect("create target/screenshots/axe");
    std::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_string_pretty(&found).expect("json"),
    )
    .expect("write the axe report");
    let bad: Vec<&serde_json::Value> = found
        .iter()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .collect();
    if std::env::var_os("AXE_REPORT_ONLY").is_none() {
        assert!(bad.is_empty(), "axe-core on {name}: {bad:#?}");
    }
}

pub async fn text_of(c: &fantoccini::Client, css: &str) -> String {
    let el = c
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css} never appeared: {e}"));
    el.text().await.unwrap_or_default()
}

/// Waits until the element matching `css` shows text containing `want`; returns that text.
pub async fn wait_text(c: &fantoccini::Client, css: &str, want: &str, secs: u64) -> String {
    let xpath_free = c
        .wait()
        .at_most(Duration::from_secs(secs))
        .every(Duration::from_millis(100))
        .for_element(Locator::Css(css))
        .await;
    let start = std::time::Instant::now();
    let mut last = String::new();
    if xpath_free.is_ok() {
        while start.elapsed() < Duration::from_secs(secs) {
            if let Ok(el) = c.find(Locator::Css(css)).await {
                last = el.text().await.unwrap_or_default();
                if last.contains(want) {
                    return last;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("{css} never showed {want:?} within {secs} s (last: {last:?})");
}

/// One browser test at a time per test binary: two Chromiums and two stacks on 2 cores make
/// every wait slower than the page's own timers.
pub static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// From a shown seat map to the confirmation: picks the first free seat, holds it, pays on the
/// gateway simulator's checkout page, and waits for "Booking confirmed". Saves screenshots
/// `{prefix}-held`, `{prefix}-checkout` and `{prefix}-confirmation`.
pub async fn hold_pay_and_confirm(c: &fantoccini::Client, gateway_url: &str, prefix: &str) {
    click(c, "#seatmap .seat.free").await;
    click(c, "#hold").await;
    let held = wait_text(c, "#held:not([hidden]) #held-seats", "-", 20).await;
    assert!(held.contains('-'), "held seats shown: {held}");
    shot(c, &format!("{prefix}-held")).await;
    click(c, "#pay").await;
    // The booking page's own button is also `#pay`: wait until the browser is at the gateway.
    let start = std::time::Instant::now();
    while !c
        .current_url()
        .await
        .expect("url")
        .as_str()
        .starts_with(gateway_url)
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never reached the gateway's checkout"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cancel = text_of(c, "#cancel").await;
    assert!(
        cancel.contains("Cancel"),
        "checkout offers Cancel: {cancel}"
    );
    shot(c, &format!("{prefix}-checkout")).await;
    click(c, "#pay").await;
    let headline = wait_text(c, "#headline", "Booking confirmed", 30).await;
    shot(c, &format!("{prefix}-confirmation")).await;
    assert_eq!(headline, "Booking confirmed");
    let details = text_of(c, "#details").await;
    assert!(
        details.contains("Booked for you: seats "),
        "confirmation details: {details}"
    );
}

/// A fresh Chromium (own profile) whose device clock is `offset_secs` off the real time: before
/// any page script runs, every new document gets a `Date` whose "now" is shifted
/// (chromedriver's CDP passthrough, `Page.addScriptToEvaluateOnNewDocument`). Checks that the
/// shift is in effect on a blank page. Keep the returned directory alive as long as the client.
pub async fn skewed_browser(
    driver: &Driver,
    offset_secs: i64,
) -> (fantoccini::Client, tempfile::TempDir) {
    let profile = tempfile::tempdir().expect("profile dir");
    let c = connect(driver, profile.path()).await;
    skew(driver, &c, offset_secs).await;
    (c, profile)
}

/// Shifts the device clock of the browser `c` by `offset_secs` for every new document
/// (chromedriver's CDP passthrough, `Page.addScriptToEvaluateOnNewDocument`), and checks the
/// shift on a blank page.
pub async fn skew(driver: &Driver, c: &fantoccini::Client, offset_secs: i64) {
    let session = c
        .session_id()
        .await
        .expect("session id")
        .expect("a session");
    let source = format!(
        "(() => {{ const off = {ms}, Real = Date;
           function D(...a) {{
             if (!new.target) return new Real(Real.now() + off).toString();
             return a.length ? new Real(...a) : new Real(Real.now() + off);
           }}
           D.prototype = Real.prototype; D.now = () => Real.now() + off;
           D.parse = Real.parse; D.UTC = Real.UTC;
           globalThis.Date = D; }})();",
        ms = offset_secs * 1000
    );
    let url = format!(
        "http://127.0.0.1:{}/session/{session}/goog/cdp/execute",
        driver.1
    );
    let body = serde_json::json!({"cmd": "Page.addScriptToEvaluateOnNewDocument",
                                  "params": {"source": source}});
    let r = reqwest::Client::new()
        .post(&url)
        .json(&body)
        .send()
        .await
        .expect("CDP passthrough");
    assert!(
        r.status().is_success(),
        "CDP command refused: {}",
        r.status()
    );
    c.goto("about:blank").await.expect("blank page");
    let device: serde_json::Value = c
        .execute("return Date.now();", vec![])
        .await
        .expect("read the device clock");
    let off = device.as_f64().expect("Date.now() is a number") / 1000.0 - unix_now();
    assert!(
        (off - offset_secs as f64).abs() < 5.0,
        "the device clock is {off:.1} s off, wanted {offset_secs} s"
    );
}

/// The real time, epoch seconds.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// Seconds in a shown duration such as `29 min 59 s`, `7 min 0 s` or `42 s` (English).
pub fn shown_secs(text: &str) -> Option<f64> {
    let mut secs = 0.0;
    let mut words = text.split_whitespace();
    let mut any = false;
    while let Some(n) = words.next() {
        let n: f64 = n.parse().ok()?;
        match words.next()? {
            "min" => secs += 60.0 * n,
            "s" => secs += n,
            _ => return None,
        }
        any = true;
    }
    any.then_some(secs)
}

/// How many bookings the back office lists for the show `demo`.
pub async fn demo_bookings(booking_url: &str, admin_token: &str) -> usize {
    let v: serde_json::Value = reqwest::Client::new()
        .get(format!("{booking_url}/admin/shows/demo/bookings"))
        .bearer_auth(admin_token)
        .send()
        .await
        .expect("bookings")
        .json()
        .await
        .expect("json");
    v.as_array().map(Vec::len).unwrap_or(0)
}

/// The server's view of the hold the booking page shows (`?hold=`), read with the fan's own cookie.
pub async fn hold_on_page(c: &fantoccini::Client) -> serde_json::Value {
    c.execute_async(
        "const done = arguments[0];
         const id = new URLSearchParams(location.search).get('hold');
         fetch('/api/holds/' + id, {credentials: 'same-origin', cache: 'no-store'})
           .then((r) => r.json()).then(done, (e) => done(String(e)));",
        vec![],
    )
    .await
    .expect("read the hold")
}

/// Clicks the element matching `css` (it must be there), first scrolled to the middle of the
/// window as a person would (WebDriver clicks an element already in view where it is, even under
/// the booking page's sticky selection summary).
pub async fn click(c: &fantoccini::Client, css: &str) {
    let el = c
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"));
    c.execute(
        "arguments[0].scrollIntoView({block: 'center', inline: 'nearest'});",
        vec![serde_json::to_value(&el).expect("element reference")],
    )
    .await
    .unwrap_or_else(|e| panic!("scroll to {css}: {e}"));
    el.click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

/// Waits (polling every 100 ms, at most `secs`) until the browser's URL starts with `prefix`;
/// returns the URL.
pub async fn wait_url(c: &fantoccini::Client, prefix: &str, secs: u64) -> String {
    let start = std::time::Instant::now();
    loop {
        let url = c.current_url().await.expect("url").to_string();
        if url.starts_with(prefix) {
            return url;
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "never reached {prefix} (at {url})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Our own focus check (axe-core does not measure it; DECISIONS): presses Tab `tabs` times and
/// asks, of every element that gets the keyboard focus, for a visible focus indicator (an outline
/// at least 2 px wide) whose colour has at least 3:1 contrast with the background it is drawn on
/// (the parent's, as the outline sits outside the element). Returns what was checked.
pub async fn focus_visible(c: &fantoccini::Client, tabs: usize) -> Vec<serde_json::Value> {
    let mut seen = Vec::new();
    for _ in 0..tabs {
        c.active_element()
            .await
            .expect("focused element")
            .send_keys("\u{E004}")
            .await
            .expect("Tab");
        let v: serde_json::Value = c
            .execute(
                "const el = document.activeElement;
                 if (!el || el === document.body) return null;
                 const rgb = (s) => (s.match(/[\\d.]+/g) || []).map(Number);
                 const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => {
                   v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
                   return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
                 let bg = el.parentElement, back = [255, 255, 255];
                 while (bg) { const c = rgb(getComputedStyle(bg).backgroundColor);
                   if (c.length >= 3 && (c.length < 4 || c[3] > 0)) { back = c; break; }
                   bg = bg.parentElement; }
                 const st = getComputedStyle(el), ring = rgb(st.outlineColor);
                 const [a, b] = [lum(ring), lum(back)].sort((x, y) => y - x);
                 return {el: el.id || el.tagName, style: st.outlineStyle,
                         width: parseFloat(st.outlineWidth), contrast: (a + 0.05) / (b + 0.05)};",
                vec![],
            )
            .await
            .expect("read the focus ring");
        if v.is_null() {
            continue;
        }
        let ok = v["style"] != "none"
            && v["width"].as_f64().unwrap_or(0.0) >= 2.0
            && v["contrast"].as_f64().unwrap_or(0.0) >= 3.0;
        assert!(ok, "focus indicator too faint or missing: {v}");
        seen.push(v);
    }
    assert!(!seen.is_empty(), "Tab focused nothing");
    seen
}

/// Waits (polling every 100 ms, at most `secs`) until the keyboard focus is on an element
/// matching `css`: after an action, focus goes to the element stating its result (issue 18
/// item 8). Returns the focused element's text.
pub async fn wait_focus(c: &fantoccini::Client, css: &str, secs: u64) -> String {
    let start = std::time::Instant::now();
    loop {
        let v = c
            .execute(
                "const el = document.activeElement;
                 return {on: !!el && el.matches(arguments[0]),
                         what: el ? (el.id ? '#' + el.id : el.tagName) : null,
                         text: el ? el.textContent : ''};",
                vec![serde_json::Value::from(css)],
            )
            .await
            .expect("read the focus");
        if v["on"] == true {
            return v["text"].as_str().unwrap_or_default().to_owned();
        }
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "focus never reached {css} (it is on {})",
            v["what"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
