//! `infra/cluster/up` for real (issue 11, item 1): Redis Cluster (3 + 3), PostgreSQL, the
//! gateway simulator, 3 waiting-room and 2 booking-core nodes behind nginx (load balancer and
//! CDN), started from the binaries `cargo test` built (`target/debug`, beside this test's
//! executable). Checks that every entry point answers, that a join works through the CDN and
//! through the waiting room's balancer, that a rolling restart (`ctl restart` of every
//! waiting-room node and of a booking-core node) drops no request of clients that keep polling
//! and joining meanwhile (no connection error, no 5xx), that the other `ctl` verbs work, and that
//! SIGTERM to `up` stops every process it started (checked through its pid files).

use sale_common::testsupport::cluster_up::{bin_dir_of, script};
use sale_common::testsupport::ClusterUp;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `ctl DIR ARGS…`; panics with its output when it fails.
fn ctl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(script("ctl"))
        .arg(dir)
        .args(args)
        .output()
        .expect("run infra/cluster/ctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "ctl {args:?} failed:\n{text}");
    text
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// What the clients saw during the rolling restarts.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    dropped: AtomicU64,
}

/// One client: alternately joins (POST, not idempotent) and reads its position (GET) through
/// `base`, until `stop`. A transport error (reset, refused, closed) or a 5xx counts as dropped.
async fn keep_busy(base: String, event: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let mut token: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let r = match &token {
            Some(t) if tally.ok.load(Ordering::Relaxed).is_multiple_of(2) => {
                c.get(format!("{base}/api/events/{event}/position"))
                    .bearer_auth(t)
                    .send()
                    .await
            }
            _ => {
                c.post(format!("{base}/api/events/{event}/join"))
                    .send()
                    .await
            }
        };
        match r {
            Ok(r) if r.status().is_success() => {
                let is_join = r.url().path().ends_with("/join");
                if is_join {
                    if let Ok(j) = r.json::<serde_json::Value>().await {
                        token = j["join_token"].as_str().map(str::to_owned);
                    }
                } else {
                    let _ = r.bytes().await;
                }
                tally.ok.fetch_add(1, Ordering::Relaxed);
            }
            Ok(r) => {
                eprintln!("dropped: {} {}", r.status(), r.url());
                tally.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                eprintln!("dropped: {e:?}");
                tally.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Polls the booking core's balancer (GET) until `stop`; same counting.
async fn keep_polling(url: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let c = reqwest::Client::new();
    while !stop.load(Ordering::Relaxed) {
        match c.get(&url).send().await {
            Ok(r) if r.status().is_success() => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
            }
            other => {
                eprintln!("dropped: {other:?}");
                tally.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_up_serves_every_entry_point_survives_rolling_restarts_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // This test runs from target/debug/deps/; the binaries are in target/debug.
    let exe = std::env::current_exe().expect("current_exe");
    let bins = bin_dir_of(exe.parent().expect("deps"));
    let mut up = ClusterUp::start(tmp.path(), &bins, &["--opens-in", "3600"]);
    let state = up.state(Duration::from_secs(120));
    let url = |k: &str| state["urls"][k].as_str().expect(k).to_owned();
    let event = state["event"].as_str().expect("event").to_owned();
    let c = reqwest::Client::new();

    // Every entry point answers.
    for (what, u) in [
        ("fans' page through the CDN", url("fans")),
        (
            "status document through the CDN",
            format!("{}/status/{event}.json", url("cdn")),
        ),
        (
            "waiting-room balancer",
            format!("{}/readyz", url("waiting_room")),
        ),
        (
            "JWKS through the balancer",
            format!("{}/.well-known/jwks.json", url("waiting_room")),
        ),
        (
            "booking-core balancer",
            format!("{}/healthz", url("booking")),
        ),
        ("gateway", format!("{}/healthz", url("gateway"))),
        ("console", url("console")),
    ] {
        let r = c
            .get(&u)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{what} {u}: {e}"));
        assert!(r.status().is_success(), "{what} {u}: {}", r.status());
    }

    // A join through the CDN and one through the waiting room's balancer; the join token works
    // on any node (shared join_hmac_key and store).
    for base in [url("cdn"), url("waiting_room")] {
        let r = c
            .post(format!("{base}/api/events/{event}/join"))
            .send()
            .await
            .expect("join");
        assert!(
            r.status().is_success(),
            "join through {base}: {}",
            r.status()
        );
        let j: serde_json::Value = r.json().await.expect("join json");
        let token = j["join_token"].as_str().expect("join_token");
        for _ in 0..3 {
            let r = c
                .get(format!(
                    "{}/api/events/{event}/position",
                    url("waiting_room")
                ))
                .bearer_auth(token)
                .send()
                .await
                .expect("position");
            assert!(r.status().is_success(), "position: {}", r.status());
        }
    }

    // A rolling deploy: every waiting-room node, then a booking-core node, restarted one at a
    // time by `ctl restart` while clients keep joining and polling through the balancers.
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut clients = Vec::new();
    for base in [url("waiting_room"), url("waiting_room"), url("cdn")] {
        clients.push(tokio::spawn(keep_busy(
            base,
            event.clone(),
            stop.clone(),
            tally.clone(),
        )));
    }
    clients.push(tokio::spawn(keep_polling(
        format!("{}/healthz", url("booking")),
        stop.clone(),
        tally.clone(),
    )));
    let dir = up.path().to_path_buf();
    let pid_before = std::fs::read_to_string(dir.join("pids/wr1.pid")).expect("wr1.pid");
    let started = Instant::now();
    tokio::task::spawn_blocking(move || {
        for node in ["wr1", "wr2", "wr3", "bc1"] {
            ctl(&dir, &["restart", node]);
        }
    })
    .await
    .expect("ctl restart");
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in clients {
        t.await.expect("client");
    }
    let (ok, dropped) = (
        tally.ok.load(Ordering::Relaxed),
        tally.dropped.load(Ordering::Relaxed),
    );
    println!("rolling restart of wr1, wr2, wr3, bc1 in {took:?}: {ok} requests answered, {dropped} dropped");
    assert!(ok > 100, "the clients kept busy ({ok} requests)");
    assert_eq!(dropped, 0, "no request dropped by a rolling restart");
    let pid_after = std::fs::read_to_string(up.path().join("pids/wr1.pid")).expect("wr1.pid");
    assert_ne!(pid_before, pid_after, "wr1 is a new process");

    // The other verbs.
    let status = ctl(up.path(), &["status"]);
    assert!(status.contains("cluster_state:ok"), "{status}");
    assert_eq!(status.matches("in the balancer").count(), 5, "{status}");
    ctl(up.path(), &["kill", "wr2"]);
    // Passive health: the balancer leaves the dead node out; GETs go to another node.
    for _ in 0..10 {
        let r = c
            .get(format!("{}/readyz", url("waiting_room")))
            .send()
            .await
            .expect("readyz with wr2 dead");
        assert!(r.status().is_success(), "GET with wr2 dead: {}", r.status());
    }
    ctl(up.path(), &["start", "wr2"]);
    let failover = ctl(up.path(), &["failover-redis"]);
    assert!(failover.contains("is master"), "{failover}");
    ctl(up.path(), &["restart-postgres"]);
    let r = c
        .get(format!("{}/healthz", url("booking")))
        .send()
        .await
        .expect("booking after the PostgreSQL restart");
    assert!(r.status().is_success());

    // SIGTERM: everything `up` started stops, and `up` exits 0.
    let pids = up.pids();
    assert!(pids.len() >= 15, "a pid file per node: {pids:?}");
    assert!(Command::new("kill")
        .args(["-TERM", &up.child.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let start = Instant::now();
    let code = loop {
        if let Some(s) = up.child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "up still running 60 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        code.code(),
        Some(0),
        "SIGTERM is a normal stop:\n{}",
        up.output()
    );
    let left: Vec<_> = pids.iter().filter(|(_, pid)| alive(*pid)).collect();
    assert!(left.is_empty(), "processes left after up stopped: {left:?}");
    for k in ["cdn", "waiting_room", "booking", "gateway"] {
        let port: u16 = url(k)
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port");
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "{k} port {port} is free again"
        );
    }
}
