//! `Stack::shutdown` (what `up` does on SIGTERM) stops the booking core first and the gateway
//! last: while the booking core is still answering in its lame duck, the gateway it calls for
//! pays is still there (found by a newcomer review: stopped together, 7 of ~30 pays in that
//! second were `502 gateway-unavailable`), and so is the waiting room its outbox tells of
//! ended sessions (stopped together, every `rush --spawn` ended with about 6 s of "session
//! ends failed; will retry").

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_answers_until_the_booking_core_has_stopped() {
    let stack = ticket_sale::stack::start(ticket_sale::stack::StackOptions::local_random_ports())
        .await
        .expect("stack");
    let (bc, gw) = (stack.booking_url.clone(), stack.gateway_url.clone());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    assert!(http.get(format!("{gw}/healthz")).send().await.is_ok());
    let stopping = tokio::spawn(stack.shutdown());
    // The booking core's lame duck: its /readyz turns 503 at once on shutdown; the lame duck
    // lasts 1 s.
    booking_core_in_lame_duck(&http, &bc).await;
    let gw_now = http.get(format!("{gw}/healthz")).send().await;
    assert!(
        matches!(&gw_now, Ok(r) if r.status().is_success()),
        "the gateway must outlive the booking core's lame duck: {gw_now:?}"
    );
    stopping.await.expect("shutdown");
    assert!(
        http.get(format!("{gw}/healthz")).send().await.is_err(),
        "after shutdown the gateway is stopped too"
    );
}

/// Waits until the booking core at `bc` answers `/readyz` with 503 (its lame duck; at most 5 s).
async fn booking_core_in_lame_duck(http: &reqwest::Client, bc: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        match http.get(format!("{bc}/readyz")).send().await {
            Ok(r) if r.status() == 503 => return,
            Ok(_) => tokio::task::yield_now().await,
            Err(e) => panic!("the booking core stopped answering before its lame duck: {e}"),
        }
    }
    panic!("the booking core never said it was stopping");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waiting_room_stays_ready_until_the_booking_core_has_stopped() {
    let stack = ticket_sale::stack::start(ticket_sale::stack::StackOptions::local_random_ports())
        .await
        .expect("stack");
    let (bc, wr) = (stack.booking_url.clone(), stack.waiting_room_url.clone());
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("client");
    let stopping = tokio::spawn(stack.shutdown());
    booking_core_in_lame_duck(&http, &bc).await;
    // Still ready, not in a lame duck of its own: the booking core's outbox can deliver.
    let wr_now = http.get(format!("{wr}/readyz")).send().await;
    assert!(
        matches!(&wr_now, Ok(r) if r.status().is_success()),
        "the waiting room must stay ready through the booking core's lame duck: {wr_now:?}"
    );
    stopping.await.expect("shutdown");
    assert!(
        http.get(format!("{wr}/healthz")).send().await.is_err(),
        "after shutdown the waiting room is stopped too"
    );
}
