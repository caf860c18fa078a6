//! `loadtest revalidate`: what conditional requests save the origin behind the CDN. Runs the
//! same crowd of pollers (2,000 by default, each fetching the status document once per poll
//! interval) through nginx twice in one run — with `proxy_cache_revalidate on` (an expired copy
//! is revalidated with its ETag; the origin answers `304`) and `off` (fetched whole again) —
//! and prints the requests and bytes the origin served each time. The bytes are counted on the
//! wire by a small TCP relay between nginx and the origin (headers included); the requests and
//! 304s come from the origin's own `/metrics`. A measurement, not a test: no pass mark.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `revalidate` flags.
#[derive(Debug, clap::Args)]
pub struct RevalidateArgs {
    /// Pollers, each fetching the status document once per `--poll-ms`.
    #[arg(long, default_value_t = 2000)]
    pub pollers: u64,
    /// Seconds of polling per mode.
    #[arg(long, default_value_t = 30)]
    pub duration: u64,
    /// Each poller's interval, ms (spread evenly over the interval).
    #[arg(long, default_value_t = 1000)]
    pub poll_ms: u64,
}

/// What the origin served in one mode.
#[derive(Debug, Default, Clone, Copy)]
struct Served {
    polls: u64,
    requests: u64,
    not_modified: u64,
    bytes: u64,
}

/// Runs both modes and prints the comparison; always `Ok(true)` unless something broke.
pub async fn run(a: RevalidateArgs) -> anyhow::Result<bool> {
    let mut opts = ticket_sale::stack::StackOptions::local_random_ports();
    // Pre-queue: the document stays the same, as it does for most of a fan's wait.
    opts.event.id = "poll".into();
    opts.event.opens_in_secs = 24 * 3600;
    let stack = ticket_sale::stack::start(opts).await?;
    let origin = stack
        .waiting_room_url
        .trim_start_matches("http://")
        .to_owned();
    let (relay, bytes) = Relay::start(&origin).await?;
    let mut rows = Vec::new();
    for revalidate in [true, false] {
        let cdn = ticket_sale::cdn::Cdn::start_with(0, &relay, None, revalidate)?;
        let before = origin_counts(&stack.waiting_room_url).await?;
        let b0 = bytes.load(Ordering::Relaxed);
        let polls = poll(&cdn.url, &a).await?;
        let after = origin_counts(&stack.waiting_room_url).await?;
        let served = Served {
            polls,
            requests: after.0 - before.0,
            not_modified: after.1 - before.1,
            bytes: bytes.load(Ordering::Relaxed) - b0,
        };
        drop(cdn);
        rows.push((revalidate, served));
    }
    println!(
        "{} pollers × {} s, one poll per {} ms each, through nginx (max-age from the origin):",
        a.pollers, a.duration, a.poll_ms
    );
    for (revalidate, s) in &rows {
        let mode = if *revalidate {
            "conditional (proxy_cache_revalidate on) "
        } else {
            "unconditional (proxy_cache_revalidate off)"
        };
        println!(
            "  {mode}: {} polls at the CDN; origin served {} requests ({} × 304), {} bytes ({:.0} bytes/request)",
            s.polls,
            s.requests,
            s.not_modified,
            s.bytes,
            s.bytes as f64 / s.requests.max(1) as f64
        );
    }
    stack.shutdown().await;
    Ok(true)
}

/// `pollers` clients each fetching `/status/poll.json` through `cdn` every `poll_ms` for
/// `duration` s, spread evenly over the interval; returns the polls made.
async fn poll(cdn: &str, a: &RevalidateArgs) -> anyhow::Result<u64> {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    let limit = Arc::new(tokio::sync::Semaphore::new(200));
    let calls = Arc::new(AtomicU64::new(0));
    let (start, every) = (Instant::now(), Duration::from_millis(a.poll_ms));
    let rounds = a.duration * 1000 / a.poll_ms.max(1);
    let mut tasks = tokio::task::JoinSet::new();
    for p in 0..a.pollers {
        let (client, limit, calls) = (client.clone(), limit.clone(), calls.clone());
        let url = format!("{cdn}/status/poll.json");
        let offset = every.mul_f64(p as f64 / a.pollers as f64);
        tasks.spawn(async move {
            for round in 0..rounds {
                let at = start + every * round as u32 + offset;
                tokio::time::sleep_until(at.into()).await;
                let _permit = limit.acquire().await?;
                let r = client.get(&url).send().await?.error_for_status()?;
                r.bytes().await?;
                calls.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(calls.load(Ordering::Relaxed))
}

/// Status-document requests and 304s the origin answered, from its `/metrics`.
async fn origin_counts(origin: &str) -> anyhow::Result<(u64, u64)> {
    let text = reqwest::get(format!("{origin}/metrics"))
        .await?
        .text()
        .await?;
    let sum = |name: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains("route=\"/status/{file}\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    Ok((
        sum("wr_requests_total{"),
        sum("wr_http_not_modified_total{"),
    ))
}

/// A TCP relay in front of the origin counting the bytes the origin sends back.
struct Relay;

impl Relay {
    /// Listens on a free loopback port; returns its `host:port` and the byte counter.
    async fn start(origin: &str) -> anyhow::Result<(String, Arc<AtomicU64>)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let bytes = Arc::new(AtomicU64::new(0));
        let (origin, counter) = (origin.to_owned(), bytes.clone());
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let (origin, counter) = (origin.clone(), counter.clone());
                tokio::spawn(async move {
                    let Ok(up) = tokio::net::TcpStream::connect(&origin).await else {
                        return;
                    };
                    let (mut down_r, mut down_w) = down.into_split();
                    let (mut up_r, mut up_w) = up.into_split();
                    let to_origin = tokio::io::copy(&mut down_r, &mut up_w);
                    let from_origin = async {
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = up_r.read(&mut buf).await?;
                            if n == 0 {
                                return std::io::Result::Ok(());
                            }
                            counter.fetch_add(n as u64, Ordering::Relaxed);
                            down_w.write_all(&buf[..n]).await?;
                        }
                    };
                    let _ = tokio::join!(to_origin, from_origin);
                });
            }
        });
        Ok((addr, bytes))
    }
}
