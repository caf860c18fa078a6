//! Fresh status through the CDN (issue 12, item 6): after a state change the next poll through
//! nginx shows it within `max-age` + 1 s whatever the poll pattern — the first poll after an
//! idle gap longer than `max-age` included (nginx must not answer it with the expired copy while
//! it refreshes in the background) — and an unchanged document is revalidated with its ETag, so
//! the origin answers `304` (counted in its `wr_http_not_modified_total`).

mod support;

use std::time::{Duration, Instant};

struct Poll {
    state: String,
    cache: String,
}

async fn poll(c: &reqwest::Client, cdn: &str, event: &str) -> Poll {
    let r = c
        .get(format!("{cdn}/status/{event}.json"))
        .send()
        .await
        .expect("status through the CDN");
    assert!(r.status().is_success(), "status answered {}", r.status());
    let cache = r
        .headers()
        .get("x-cache-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let doc: serde_json::Value = r.json().await.expect("json");
    Poll {
        state: doc["state"].as_str().unwrap_or("").to_owned(),
        cache,
    }
}

/// `max-age` of the status document, from the origin's own `Cache-Control`.
async fn max_age(c: &reqwest::Client, origin: &str, event: &str) -> Duration {
    let r = c
        .get(format!("{origin}/status/{event}.json"))
        .send()
        .await
        .expect("status");
    let cc = r.headers()["cache-control"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let secs = cc
        .split(',')
        .find_map(|d| d.trim().strip_prefix("max-age=")?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no max-age in {cc:?}"));
    Duration::from_secs(secs)
}

async fn not_modified_at_origin(c: &reqwest::Client, origin: &str) -> u64 {
    support::origin_counter(c, origin, "wr_http_not_modified_total", "/status/{file}").await
}

async fn admin(c: &reqwest::Client, stack: &ticket_sale::stack::Stack, path: &str) {
    let r = c
        .post(format!("{}/admin/events/{path}", stack.waiting_room_url))
        .bearer_auth(&stack.admin_token)
        .header("X-Operator", "edge-test")
        .send()
        .await
        .expect("admin call");
    assert!(r.status().is_success(), "admin {path}: {}", r.status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_shows_on_the_first_poll_after_an_idle_gap_and_304s_reach_the_origin() {
    let (stack, cdn) = support::start_with_cdn("fresh", 3600, 1.0).await;
    let c = reqwest::Client::new();
    let origin = &stack.waiting_room_url;
    let gap = max_age(&c, origin, "fresh").await + Duration::from_secs(1);

    assert_eq!(poll(&c, &cdn.url, "fresh").await.state, "prequeue");
    // Idle longer than max-age, nothing changed: nginx revalidates and the origin answers 304.
    let before = not_modified_at_origin(&c, origin).await;
    tokio::time::sleep(gap).await;
    let p = poll(&c, &cdn.url, "fresh").await;
    assert_eq!(
        (p.state.as_str(), p.cache.as_str()),
        ("prequeue", "REVALIDATED")
    );
    let after = not_modified_at_origin(&c, origin).await;
    assert!(
        after > before,
        "the origin answered 304: {before} → {after}"
    );
    println!("304s at the origin: {before} → {after}");

    // Idle again, then the operator closes: the very next poll shows it.
    tokio::time::sleep(gap).await;
    admin(&c, &stack, "fresh/close").await;
    let p = poll(&c, &cdn.url, "fresh").await;
    assert_eq!(
        p.state, "closed",
        "first poll after an idle gap (cache status {})",
        p.cache
    );
    drop(cdn);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_state_change_shows_within_max_age_plus_one_second_under_steady_polling() {
    let (stack, cdn) = support::start_with_cdn("steady", 3600, 1.0).await;
    let c = reqwest::Client::new();
    let bound = max_age(&c, &stack.waiting_room_url, "steady").await + Duration::from_secs(1);
    // Open, pause, resume, sold out: after each, polls every 100 ms (one poller) and a few
    // polls spread over the seconds before, so some copy is always in the cache.
    for (action, want) in [
        ("open", "open"),
        ("pause", "paused"),
        ("resume", "open"),
        ("sold-out", "sold_out"),
    ] {
        for _ in 0..5 {
            poll(&c, &cdn.url, "steady").await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        admin(&c, &stack, &format!("steady/{action}")).await;
        let changed = Instant::now();
        loop {
            let asked = Instant::now();
            let p = poll(&c, &cdn.url, "steady").await;
            if p.state == want {
                break;
            }
            assert!(
                asked.duration_since(changed) < bound,
                "{action}: a poll {:?} after the change still shows {:?} (cache {})",
                asked.duration_since(changed),
                p.state,
                p.cache
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    drop(cdn);
    stack.shutdown().await;
}
