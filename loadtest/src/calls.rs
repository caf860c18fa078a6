//! The fans' one way to call the services: a timed HTTP call recorded under its endpoint, a 503
//! with `Retry-After` waited out as the pages do, the in-flight caps shared by every fan, and a
//! JWT's claims read without verifying. Below every module that makes calls (fans, behaviours,
//! chaos).

use crate::stats::Stats;
use reqwest::{Client, StatusCode};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Times a fan waits in all for one call answered 503 + `Retry-After` before it takes the 503.
const RETRY_LATER_FOR: Duration = Duration::from_secs(60);

/// A timed HTTP call that records latency and status under `endpoint`. A 503 with
/// `Retry-After` (the server's "come back later": a store failing over, a database restarting,
/// a node draining) is waited out and sent again, as the fans' pages do, for up to a minute;
/// each such answer is recorded apart from the server errors.
pub async fn call(
    client: &Client,
    stats: &Stats,
    endpoint: &'static str,
    req: reqwest::RequestBuilder,
) -> anyhow::Result<(StatusCode, Value, reqwest::header::HeaderMap)> {
    let _ = client;
    let (status, bytes, headers) = send(stats, endpoint, req, true).await?;
    Ok((status, json(&bytes), headers))
}

/// [`call`] answering the body's bytes unparsed: for the answers a fan reads into a typed,
/// borrowed view (the section maps, `picks::Map`).
pub async fn call_bytes(
    stats: &Stats,
    endpoint: &'static str,
    req: reqwest::RequestBuilder,
) -> anyhow::Result<(StatusCode, bytes::Bytes, reqwest::header::HeaderMap)> {
    send(stats, endpoint, req, true).await
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// [`call`] outside the in-flight caps: for the one shared status poller, which plays the CDN's
/// copy every fan reads. Behind the fans' cap it waited 2–4 s behind seat-map calls in the seed
/// rehearsal (302 reads in 770 s instead of one every 250 ms), so every fan saw its turn late and
/// the wait-estimate measurement measured the load generator's own backlog.
pub async fn call_uncapped(
    stats: &Stats,
    endpoint: &'static str,
    req: reqwest::RequestBuilder,
) -> anyhow::Result<(StatusCode, Value, reqwest::header::HeaderMap)> {
    let (status, bytes, headers) = send(stats, endpoint, req, false).await?;
    Ok((status, json(&bytes), headers))
}

async fn send(
    stats: &Stats,
    endpoint: &'static str,
    req: reqwest::RequestBuilder,
    capped: bool,
) -> anyhow::Result<(StatusCode, bytes::Bytes, reqwest::header::HeaderMap)> {
    let give_up = Instant::now() + RETRY_LATER_FOR;
    let mut req = req;
    loop {
        let again = req.try_clone();
        let permit = if capped { permit(endpoint).await } else { None };
        let t = Instant::now();
        let res = req.send().await;
        match res {
            Ok(r) => {
                let status = r.status();
                let headers = r.headers().clone();
                let bytes = r.bytes().await.unwrap_or_default();
                let later = status == StatusCode::SERVICE_UNAVAILABLE
                    && headers.contains_key(reqwest::header::RETRY_AFTER);
                stats.record_answer(endpoint, t.elapsed(), Some(status.as_u16()), later);
                drop(permit);
                if let (true, Some(next)) = (later, again) {
                    let pause = retry_after(&headers);
                    if Instant::now() + pause < give_up {
                        tokio::time::sleep(pause).await;
                        req = next;
                        continue;
                    }
                }
                return Ok((status, bytes, headers));
            }
            Err(e) => {
                let kind = crate::stats::transport_kind(&e);
                stats.record_transport_error(endpoint, t.elapsed(), kind);
                return Err(e.into());
            }
        }
    }
}

/// Decodes a JWT's claims without verifying (the fan only reads `iat`/`exp` for the checks).
pub fn jwt_claims(token: &str) -> Option<Value> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Seconds to wait from a 429/503 `Retry-After` header (default 1 s, at most 30 s).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Duration {
    let secs = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(secs.clamp(1, 30))
}

static LIMIT: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();

static CHECKOUT_LIMIT: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();

/// Caps HTTP calls in flight across all fans (set once, before the fans start): `n` for the
/// queue and the hold, and a separate [`checkout_permits`]`(n)` for the checkout steps, so fans
/// paying for a hold never wait behind thousands of others still fighting for seats (each real
/// fan has a browser of its own; only the load generator shares its sockets).
pub fn set_concurrency(n: usize) {
    let _ = LIMIT.set(tokio::sync::Semaphore::new(n.max(1)));
    let _ = CHECKOUT_LIMIT.set(tokio::sync::Semaphore::new(checkout_permits(n)));
}

/// Checkout calls in flight at most when the others may have `n`: `n / 2`, at least 16. A won
/// hold costs four checkout calls (pay, the gateway's page, the callback, the read back), and
/// a permit's wait is left out of the calls' latencies. With `n / 4` (192 of the seed profile's
/// 768) prompt payers took 47 and 64 s (median, `hold_to_paid_secs`) from their hold to PAID in
/// two seed rehearsals, of a 60 s hold: 17 s of it before their payment was created and 32 s
/// to the callback's confirmation (the audit rows' times), while each call took about
/// 0.5 s (the wait for a permit itself was not measured apart); in one run of eight the payments fell behind the windows altogether (16,466 holds
/// expired with their payment started, 1,600 seats unsold at the end). With `n / 2`: 33 s
/// (9 s + 16 s in the audit), while the checkout calls' own latency doubled (pay p50 0.53 →
/// 1.06 s): the wait moved from the generator, where no figure showed it, to the services.
pub fn checkout_permits(n: usize) -> usize {
    (n / 2).max(16)
}

async fn permit(endpoint: &str) -> Option<tokio::sync::SemaphorePermit<'static>> {
    let pool = match endpoint {
        "pay" | "checkout" | "callback" | "hold_read" | "release" => &CHECKOUT_LIMIT,
        _ => &LIMIT,
    };
    match pool.get() {
        Some(s) => s.acquire().await.ok(),
        None => None,
    }
}
