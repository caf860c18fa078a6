//! Shared pieces of the end-to-end tests: a stack with the CDN in front, and a headless
//! Chromium driven through chromedriver.

#![allow(dead_code)]

pub mod browser;

use serde_json::Value;
use ticket_sale::cdn::Cdn;
use ticket_sale::stack::{self, DemoEvent, StackOptions};

/// The browser tests' event `demo`: opens in `opens_in_secs`, lets fans in fast (20/s, 10 at a
/// time), admissions last `admission_ttl_secs`.
pub fn demo_event(opens_in_secs: u64, admission_ttl_secs: u64) -> DemoEvent {
    DemoEvent {
        id: "demo".into(),
        opens_in_secs,
        admit_rate: 20.0,
        max_active: 10,
        admission_ttl_secs,
    }
}

/// A stack with one event `id` opening in `opens_in_secs`, and nginx in front of the waiting room.
pub async fn start_with_cdn(id: &str, opens_in_secs: u64, admit_rate: f64) -> (stack::Stack, Cdn) {
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: id.into(),
        opens_in_secs,
        admit_rate,
        max_active: 10,
        admission_ttl_secs: 600,
    };
    opts.join_rate_per_sec = 1000;
    opts.join_burst = 1000;
    opts.fan_rate_per_sec = 1000;
    opts.fan_burst = 1000;
    let s = stack::start(opts).await.expect("stack starts");
    let cdn =
        Cdn::start(0, s.waiting_room_url.trim_start_matches("http://")).expect("nginx starts");
    (s, cdn)
}

/// The sum of the origin's `/metrics` counter `name` over the series whose labels include
/// `route="{route}"`.
pub async fn origin_counter(c: &reqwest::Client, origin: &str, name: &str, route: &str) -> u64 {
    let text = c
        .get(format!("{origin}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    let (series, label) = (format!("{name}{{"), format!("route=\"{route}\""));
    text.lines()
        .filter(|l| l.starts_with(&series) && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// Joins `event`; returns the join token.
pub async fn join(c: &reqwest::Client, wr: &str, event: &str) -> String {
    let j: Value = c
        .post(format!("{wr}/api/events/{event}/join"))
        .send()
        .await
        .expect("join")
        .json()
        .await
        .expect("join json");
    j["join_token"].as_str().expect("join token").to_owned()
}

/// Claims the admission once: the admission token when it is this fan's turn.
pub async fn claim(c: &reqwest::Client, wr: &str, event: &str, join: &str) -> Option<String> {
    let r = c
        .post(format!("{wr}/api/events/{event}/admission"))
        .bearer_auth(join)
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    let a: Value = r.json().await.ok()?;
    a["admission_token"].as_str().map(str::to_owned)
}
