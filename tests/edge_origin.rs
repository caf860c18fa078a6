//! Origin load does not grow with the number of waiting fans: pollers fetch the status document
//! through a real CDN (nginx with `proxy_cache`, `infra/`), and the origin's own `/metrics` count
//! what reached it. Its own test binary, so no other test's requests share the metrics recorder.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Status-document requests the origin has answered, from its own `/metrics`
/// (`wr_requests_total{route="/status/{file}"}`).
async fn origin_status_hits(c: &reqwest::Client, origin: &str) -> u64 {
    support::origin_counter(c, origin, "wr_requests_total", "/status/{file}").await
}

/// `pollers` fans each fetch the status document through the CDN once a second for `secs`
/// seconds (spread evenly over the second); returns the calls made.
async fn poll(cdn: &str, pollers: u64, secs: u64) -> u64 {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let limit = Arc::new(tokio::sync::Semaphore::new(200));
    let calls = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for p in 0..pollers {
        let (client, limit, calls) = (client.clone(), limit.clone(), calls.clone());
        let url = format!("{cdn}/status/edge.json");
        tasks.spawn(async move {
            let offset = Duration::from_micros(1_000_000 * p / pollers);
            for tick in 0..secs {
                let at = start + Duration::from_secs(tick) + offset;
                tokio::time::sleep_until(at.into()).await;
                let _permit = limit.acquire().await.expect("semaphore");
                let r = client
                    .get(&url)
                    .send()
                    .await
                    .expect("status through the CDN");
                assert!(r.status().is_success(), "status answered {}", r.status());
                let _ = r.bytes().await;
                calls.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("poller");
    }
    calls.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_status_load_is_independent_of_the_number_of_waiters() {
    let (s, cdn) = support::start_with_cdn("edge", 3600, 10.0).await;
    let c = reqwest::Client::new();
    let secs = 20;
    let mut hits = Vec::new();
    for pollers in [200u64, 2000] {
        let before = origin_status_hits(&c, &s.waiting_room_url).await;
        let calls = poll(&cdn.url, pollers, secs).await;
        let after = origin_status_hits(&c, &s.waiting_room_url).await;
        let origin = after - before;
        println!(
            "{pollers} pollers × {secs} s: {calls} status calls at the CDN, {origin} at the origin"
        );
        assert_eq!(calls, pollers * secs);
        hits.push(origin);
    }
    // max-age is 1 s: at most one origin fetch per second of polling, plus a small constant.
    for h in &hits {
        assert!(
            *h <= secs + 5,
            "origin status hits {h} > {secs}/max-age + 5"
        );
        assert!(*h >= 1, "the origin must have been asked at least once");
    }
    assert!(
        hits[0].abs_diff(hits[1]) <= 5,
        "origin hits must not grow with waiters: {hits:?}"
    );
    drop(cdn);
    s.shutdown().await;
}
