//! Every fan page in French when the browser's first language is French (issue 18 item 7),
//! chosen the way the waiting page chooses, tab titles included, at both sizes (laptop, and the
//! phone's mobile emulation): the waiting page, the seat map, the hold, the gateway's checkout
//! (from `Accept-Language`), the hold after a cancelled payment, the confirmation; on the phone
//! also the page a fan sees once the admission is over. Screenshots under `target/screenshots/`.

mod support;

use fantoccini::{Client, Locator};
use std::time::{Duration, Instant};
use support::browser::{
    click, open, shot, unix_now, wait_text, wait_url, Driver, Viewport, ONE_AT_A_TIME,
};
use ticket_sale::stack::{self, Stack, StackOptions};

/// How long an admission lasts in this test: enough to hold seats (the hold then outlives it),
/// short enough to see it end.
const ADMISSION_SECS: u64 = 25;

async fn start_stack() -> Stack {
    let mut opts = StackOptions::local_random_ports();
    // Opens in 4 s: time to see the waiting page before the fan is let in.
    opts.event = support::demo_event(4, ADMISSION_SECS);
    stack::start(opts).await.expect("stack starts")
}

/// Waits until the tab title is `want` (the pages set it once they know their state).
async fn title_is(c: &Client, want: &str) {
    let start = Instant::now();
    loop {
        let t = c.title().await.expect("title");
        if t == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "tab title {t:?}, wanted {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn page_lang(c: &Client) -> String {
    c.execute("return document.documentElement.lang;", vec![])
        .await
        .expect("lang")
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn french_on_every_page(v: Viewport) {
    let _one = ONE_AT_A_TIME.lock().await;
    let s = start_stack().await;
    let driver = Driver::start();
    let (c, _profile) = open(&driver, v, "fr").await;
    let n = format!("fr-{}", v.name());
    c.goto(&format!("{}/?event=demo", s.waiting_room_url))
        .await
        .expect("open waiting page");
    // Waiting page: title, heading and language read at once (the page moves on at opening).
    let start = Instant::now();
    let seen = loop {
        let seen = c
            .execute(
                "return [location.pathname, document.documentElement.lang, document.title,
                         (document.getElementById('title') || {}).textContent || ''];",
                vec![],
            )
            .await
            .expect("read the waiting page");
        if seen[1] == "fr" || seen[0] != "/" {
            break seen;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{seen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        seen,
        serde_json::json!([
            "/",
            "fr",
            "Salle d'attente",
            "Vous êtes dans la salle d'attente"
        ]),
        "the waiting page in French, before the sale opens"
    );
    shot(&c, &format!("{n}-01-waiting")).await;
    // Seat map.
    let admitted_at = unix_now();
    c.wait()
        .at_most(Duration::from_secs(60))
        .for_element(Locator::Css("#seatmap .seat.free"))
        .await
        .expect("admitted and the seat map is shown");
    title_is(&c, "Choisissez vos places").await;
    assert_eq!(page_lang(&c).await, "fr");
    wait_text(&c, "#message", "places disponibles sur", 10).await;
    wait_text(&c, "#turn", "C'est votre tour", 10).await;
    assert_eq!(
        wait_text(&c, "#hold", "Réserver", 5).await,
        "Réserver les places choisies"
    );
    let label = c
        .find(Locator::Css("#seatmap .seat.free"))
        .await
        .expect("seat")
        .attr("aria-label")
        .await
        .expect("label")
        .unwrap_or_default();
    assert!(
        label.contains("rang") && label.contains("libre") && label.contains("€"),
        "{label}"
    );
    shot(&c, &format!("{n}-02-map")).await;
    support::browser::focus_visible(&c, 2).await;
    // Hold.
    click(&c, "#seatmap .seat.free").await;
    click(&c, "#hold").await;
    title_is(&c, "Places réservées").await;
    wait_text(&c, "#held", "Commencez le paiement dans", 10).await;
    assert_eq!(wait_text(&c, "#pay", "Payer", 5).await, "Payer maintenant");
    assert_eq!(
        wait_text(&c, "#release", "Libérer", 5).await,
        "Libérer et choisir d'autres places"
    );
    shot(&c, &format!("{n}-03-held")).await;
    // The gateway's checkout, in French from Accept-Language.
    click(&c, "#pay").await;
    wait_url(&c, &s.gateway_url, 30).await;
    title_is(&c, "Paiement – simulateur de passerelle").await;
    assert_eq!(page_lang(&c).await, "fr");
    assert_eq!(wait_text(&c, "#pay", "Payer", 5).await, "Payer");
    assert_eq!(wait_text(&c, "#cancel", "Annuler", 5).await, "Annuler");
    let amount = wait_text(&c, "#amount", "€", 5).await;
    assert!(amount.contains(','), "a French amount: {amount}");
    shot(&c, &format!("{n}-04-checkout")).await;
    // Cancelled: back on the hold, told in French.
    click(&c, "#cancel").await;
    wait_url(&c, &format!("{}/book.html", s.booking_url), 30).await;
    wait_text(&c, "#payment-note", "Votre paiement a été annulé", 20).await;
    assert_eq!(wait_text(&c, "#pay", "Payer", 5).await, "Payer à nouveau");
    shot(&c, &format!("{n}-05-cancelled")).await;
    click(&c, "#pay").await;
    wait_url(&c, &s.gateway_url, 30).await;
    click(&c, "#pay").await;
    // Confirmation.
    let head = wait_text(&c, "#headline", "Réservation confirmée", 30).await;
    assert_eq!(head, "Réservation confirmée");
    title_is(&c, "Votre réservation").await;
    let details = wait_text(&c, "#details", "Réservé pour vous : les places ", 5).await;
    assert!(details.contains("Référence de réservation"), "{details}");
    assert!(
        details.contains("Total payé") && details.contains(",00") && details.contains('€'),
        "the amount paid, in French: {details}"
    );
    shot(&c, &format!("{n}-06-confirmed")).await;
    if v == Viewport::Phone {
        admission_over_in_french(&c, &s, &n, admitted_at).await;
    }
    c.close().await.ok();
    s.shutdown().await;
}

/// Once the admission is over, the booking page says so in French and offers the waiting room.
/// Polls (a fresh page load each second) until the admission's end plus a margin.
async fn admission_over_in_french(c: &Client, s: &Stack, n: &str, admitted_at: f64) {
    let deadline = admitted_at + ADMISSION_SECS as f64 + 60.0;
    loop {
        c.execute("sessionStorage.clear();", vec![])
            .await
            .expect("forget the paid hold");
        c.goto(&format!("{}/book.html?show=demo", s.booking_url))
            .await
            .expect("booking page");
        let over = c
            .wait()
            .at_most(Duration::from_secs(5))
            .for_element(Locator::Css(
                "#outcome:not([hidden])[data-kind='admission_over'], #picker:not([hidden])",
            ))
            .await
            .expect("the page shows a state");
        if over.attr("id").await.ok().flatten().as_deref() == Some("outcome") {
            break;
        }
        assert!(unix_now() < deadline, "the admission never ended");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    title_is(c, "Accès terminé").await;
    assert_eq!(
        wait_text(c, "#headline", "accès", 5).await,
        "Votre accès est terminé"
    );
    let link = wait_text(c, "#outcome-link", "salle d'attente", 5).await;
    assert_eq!(link, "Revenir dans la salle d'attente");
    let href = c
        .find(Locator::Css("#outcome-link"))
        .await
        .expect("link")
        .attr("href")
        .await
        .expect("href")
        .unwrap_or_default();
    assert!(
        href.starts_with(&s.waiting_room_url),
        "back to the waiting room: {href}"
    );
    shot(c, &format!("{n}-07-admission-over")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn french_on_every_page_laptop() {
    french_on_every_page(Viewport::Laptop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn french_on_every_page_phone() {
    french_on_every_page(Viewport::Phone).await;
}
