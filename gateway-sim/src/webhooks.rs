//! The webhook dispatcher: every 100 ms it applies due late successes and sends queued events,
//! signed with every configured key (`Gateway-Signature: t=<epoch s>,v1=<hex>,…`, HMAC-SHA256
//! over `"{t}.{raw body}"`), retried up to 3 times on a non-2xx answer. Per-event faults: never
//! sent, held back (so a later event overtakes it), or sent twice at once.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::store::Outgoing;
use crate::AppState;

/// Header carrying the signatures.
pub const HEADER: &str = "Gateway-Signature";

/// The header value for `body` at `t` (epoch s) under `keys`.
pub fn signature_header(keys: &[&[u8]], t: i64, body: &[u8]) -> String {
    let mut parts = vec![format!("t={t}")];
    for k in keys {
        let mut mac = Hmac::<Sha256>::new_from_slice(k).expect("HMAC takes any key length");
        mac.update(format!("{t}.").as_bytes());
        mac.update(body);
        parts.push(format!("v1={}", hex::encode(mac.finalize().into_bytes())));
    }
    parts.join(",")
}

/// Runs until the task is dropped.
pub async fn dispatch_loop(state: AppState) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tick.tick().await;
        state.store.tick();
        for out in state.store.drain_events() {
            let f = out.faults;
            let rng = state.store.rng();
            if rng.fires(f.drop_webhook_rate) {
                tracing::info!(event = %out.event["id"], "webhook dropped (fault)");
                continue;
            }
            let hold_back = rng
                .fires(f.reorder_webhook_rate)
                .then(|| Duration::from_millis(state.config.reorder_delay_ms));
            let copies = if rng.fires(f.duplicate_webhook_rate) {
                2
            } else {
                1
            };
            for _ in 0..copies {
                let (state, http, out) = (state.clone(), http.clone(), out.clone());
                tokio::spawn(async move {
                    if let Some(d) = hold_back {
                        tokio::time::sleep(d).await;
                    }
                    deliver(&state, &http, &out).await;
                });
            }
        }
    }
}

async fn deliver(state: &AppState, http: &reqwest::Client, out: &Outgoing) {
    let body = out.event.to_string();
    for attempt in 0..3u32 {
        let t = state.config.clock.now_secs();
        let keys: Vec<&[u8]> = state
            .config
            .webhook_secrets
            .iter()
            .map(|s| s.expose().as_bytes())
            .collect();
        let r = http
            .post(&out.url)
            .header(HEADER, signature_header(&keys, t, body.as_bytes()))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => return,
            Ok(r) => tracing::warn!(status = %r.status(), attempt, "webhook not accepted"),
            Err(e) => tracing::warn!(error = %e, attempt, "webhook delivery failed"),
        }
        tokio::time::sleep(Duration::from_millis(500 * u64::from(attempt + 1))).await;
    }
}
