//! `Stack::shutdown` (what `up` does on SIGTERM) stops the gateway last: while the booking core
//! is still answering in its lame duck, the gateway it calls for pays is still there. Found by
//! a newcomer review: stopped together, 7 of ~30 pays in that second were `502
//! gateway-unavailable`.

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
    // Wait for the booking core's lame duck (its /readyz turns 503 at once on shutdown; the
    // lame duck lasts 1 s, far inside this bound).
    let mut in_lame_duck = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        match http.get(format!("{bc}/readyz")).send().await {
            Ok(r) if r.status() == 503 => {
                in_lame_duck = true;
                break;
            }
            Ok(_) => tokio::task::yield_now().await,
            Err(e) => panic!("the booking core stopped answering before its lame duck: {e}"),
        }
    }
    assert!(in_lame_duck, "the booking core never said it was stopping");
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
