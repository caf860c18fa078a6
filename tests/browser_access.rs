//! The waiting page's access step (issue 14 items 1–2) in a real headless Chromium: a presale
//! event asks for the access code, says why a wrong one is refused, and takes the fan into the
//! pre-queue with the right one — on a laptop in English and on a phone in French; a fan whose code
//! the organiser revokes is told the place is gone. Invite-only: an invitation link puts the fan
//! in line and leaves the address bar; an expired one is explained. Every screenshot is checked by axe-core
//! (`support::browser::shot`); screenshots under `target/screenshots/wait-code-*`, `wait-invitation-*`.

mod support;

use fantoccini::{Client, Locator};
use serde_json::json;
use support::browser::{click, open, shot, wait_text, Driver, Viewport, ONE_AT_A_TIME};
use ticket_sale::stack::{self, StackOptions};

async fn type_into(c: &Client, css: &str, text: &str) {
    let el = c.find(Locator::Css(css)).await.expect("input");
    el.click().await.expect("focus");
    el.clear().await.expect("clear");
    el.send_keys(text).await.expect("type");
}

/// One generated code of `uses` uses, from the admin API's CSV.
async fn new_code(http: &reqwest::Client, base: &str, token: &str) -> String {
    let csv = http
        .post(format!("{base}/admin/events/demo/codes"))
        .bearer_auth(token)
        .json(&json!({"count": 1, "uses": 1}))
        .send()
        .await
        .expect("generate")
        .text()
        .await
        .expect("csv");
    let row = csv.lines().nth(1).expect("one code");
    row.split(',').next().expect("code").to_owned()
}

/// (viewport, language, the strings expected: title, refusal, revoked, in the pre-queue)
const RUNS: [(Viewport, &str, [&str; 4]); 2] = [
    (
        Viewport::Laptop,
        "en",
        [
            "This sale needs an access code",
            "not valid for this sale",
            "withdrew the access code",
            "has not opened yet",
        ],
    ),
    (
        Viewport::Phone,
        "fr",
        [
            "Cette vente demande un code d'accès",
            "pas valable pour cette vente",
            "a retiré le code d'accès",
            "pas encore ouverte",
        ],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_page_asks_for_the_code_and_tells_a_revoked_fan_in_english_and_french() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    // Before the opening: a fan in the pre-queue is still waiting when its code is revoked.
    opts.event = support::demo_event(600, 600);
    let s = stack::start(opts).await.expect("stack starts");
    let base = s.waiting_room_url.clone();
    let http = reqwest::Client::new();
    let set = http
        .put(format!("{base}/admin/events/demo/access"))
        .bearer_auth(&s.admin_token)
        .json(&json!({"mode": "code"}))
        .send()
        .await
        .expect("set access");
    assert_eq!(set.status(), 200);
    let driver = Driver::start();
    for (viewport, lang, want) in RUNS {
        let name = |step: &str| format!("wait-code-{step}-{}-{lang}", viewport.name());
        let code = new_code(&http, &base, &s.admin_token).await;
        let (c, _profile) = open(&driver, viewport, lang).await;
        c.goto(&format!("{base}/?event=demo"))
            .await
            .expect("waiting page");
        wait_text(&c, "#code-form h2", want[0], 20).await;
        shot(&c, &name("01-asked")).await;

        type_into(&c, "#code-input", "WRONG-CODE-42").await;
        click(&c, "#code-form button").await;
        wait_text(&c, "#code-error", want[1], 20).await;
        shot(&c, &name("02-refused")).await;

        type_into(&c, "#code-input", &code.to_lowercase()).await;
        click(&c, "#code-form button").await;
        wait_text(&c, "#state", want[3], 20).await;
        assert!(
            c.find(Locator::Css("#code-form"))
                .await
                .expect("form")
                .is_displayed()
                .await
                .ok()
                == Some(false)
        );
        shot(&c, &name("03-in-line")).await;

        let revoked = http
            .post(format!("{base}/admin/events/demo/codes/revoke"))
            .bearer_auth(&s.admin_token)
            .body(code.clone())
            .send()
            .await
            .expect("revoke");
        assert_eq!(revoked.status(), 200);
        wait_text(&c, "#access-refused-text", want[2], 20).await;
        shot(&c, &name("04-revoked")).await;
        c.close().await.ok();
    }
    invitations(&s, &http, &driver).await;
    s.shutdown().await;
}

/// An invitation (HS256, the promoter's secret) for fan `sub` expiring at `exp`.
fn invitation(sub: &str, exp: u64) -> String {
    use jsonwebtoken::{encode, EncodingKey, Header};
    let claims = json!({"sub": sub, "aud": "demo", "exp": exp});
    encode(
        &Header::default(),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .expect("sign")
}

const SECRET: &str = "promoter-secret-0123456789-0123456789";

/// Invite-only: an invitation link puts the fan in the pre-queue and leaves the address bar
/// (laptop, English); an expired one is explained (phone, French).
async fn invitations(s: &stack::Stack, http: &reqwest::Client, driver: &Driver) {
    let base = &s.waiting_room_url;
    for (path, body) in [
        ("access", json!({"mode": "invitation"})),
        ("invitation-key", json!({"alg": "HS256", "secret": SECRET})),
    ] {
        let r = http
            .put(format!("{base}/admin/events/demo/{path}"))
            .bearer_auth(&s.admin_token)
            .json(&body)
            .send()
            .await
            .expect("admin");
        assert_eq!(r.status(), 200, "{path}");
    }
    let now = support::browser::unix_now() as u64;
    let (c, _profile) = open(driver, Viewport::Laptop, "en").await;
    let link = format!(
        "{base}/?event=demo&invite={}",
        invitation("guest-1", now + 3600)
    );
    c.goto(&link).await.expect("invitation link");
    wait_text(&c, "#state", "has not opened yet", 20).await;
    let url = c.current_url().await.expect("url");
    assert!(
        !url.as_str().contains("invite"),
        "the token left the address bar: {url}"
    );
    shot(&c, "wait-invitation-01-in-line-laptop-en").await;
    c.close().await.ok();

    let (c, _profile) = open(driver, Viewport::Phone, "fr").await;
    let link = format!(
        "{base}/?event=demo&invite={}",
        invitation("guest-2", now - 10)
    );
    c.goto(&link).await.expect("invitation link");
    wait_text(&c, "#access-refused-text", "Cette invitation a expiré", 20).await;
    shot(&c, "wait-invitation-02-expired-phone-fr").await;
    c.close().await.ok();
}

/// The console's Access panel (French, laptop): the mode is switched to access codes, 3 codes
/// are generated (the CSV is offered at once), and a CSV file of one code revokes it; each
/// change is in the audit trail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_access_panel_sets_the_mode_generates_and_revokes_in_french() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut opts = StackOptions::local_random_ports();
    opts.event = support::demo_event(600, 600);
    let s = stack::start(opts).await.expect("stack starts");
    let http = reqwest::Client::new();
    let code = new_code(&http, &s.waiting_room_url, &s.admin_token).await;
    let driver = Driver::start();
    let (c, _profile) = open(&driver, Viewport::Laptop, "fr").await;
    c.goto(&format!("{}/console.html", s.waiting_room_url))
        .await
        .expect("console");
    type_into(&c, "#token", &s.admin_token).await;
    type_into(&c, "#operator", "ops-lea").await;
    click(&c, "#login button").await;
    wait_text(
        &c,
        "#access-panel summary",
        "Accès : codes et invitations",
        20,
    )
    .await;
    click(&c, "#access-panel summary").await;
    wait_text(&c, "#access-now", "tout le monde", 20).await;

    let mode = c.find(Locator::Css("#access-mode")).await.expect("select");
    mode.select_by_value("code").await.expect("choose code");
    click(&c, "#access-form button").await;
    wait_text(&c, "#access-now", "les détenteurs d'un code", 20).await;
    wait_text(&c, "#audit", "set_access", 20).await;

    type_into(&c, "#codes-count", "3").await;
    click(&c, "#codes-form button").await;
    wait_text(&c, "#codes-result", "Codes générés et téléchargés : 3", 20).await;
    wait_text(&c, "#audit", "generate_codes", 20).await;

    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("revoke.csv");
    std::fs::write(&file, format!("code\n{code}\n")).expect("csv");
    let input = c
        .find(Locator::Css("#codes-revoke"))
        .await
        .expect("file input");
    input
        .send_keys(file.to_str().expect("path"))
        .await
        .expect("upload");
    wait_text(&c, "#codes-result", "Codes retirés : 1", 20).await;
    wait_text(&c, "#audit", "revoke_codes", 20).await;
    shot(&c, "console-access-01-revoked-fr").await;
    c.close().await.ok();
    s.shutdown().await;
}
