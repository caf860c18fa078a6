//! Case W13 for the one-command sale: `ticket-sale up --cdn` gets a real SIGTERM while requests
//! through its CDN are in flight (held in the waiting room by pausing Redis with SIGSTOP). Every
//! request is answered, nginx stops (its port is free again, its master gone) and `up` exits 0.

use std::process::Command;
use std::time::{Duration, Instant};

use sale_common::testsupport::{free_port, RedisServer};

fn kill(sig: &str, pid: u32) {
    assert!(Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success());
}

/// Polls `cond` every 25 ms until it holds or `limit` passes.
async fn until<F, Fut>(limit: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn case_w13_sigterm_to_up_drains_the_cdn_and_the_services_and_exits_0() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut up, origin, _, cdn) = start_up(dir.path(), &redis, &[], true).await;
    let edge = format!("http://127.0.0.1:{cdn}");
    let c = reqwest::Client::new();
    until(Duration::from_secs(60), "the CDN answers", || {
        let c = c.clone();
        let url = format!("{edge}/status/demo.json");
        async move { c.get(url).send().await.is_ok_and(|r| r.status() == 200) }
    })
    .await;
    let mut tokens = Vec::new();
    for _ in 0..20 {
        let j: serde_json::Value = c
            .post(format!("{edge}/api/events/demo/join"))
            .send()
            .await
            .expect("join")
            .json()
            .await
            .expect("json");
        tokens.push(j["join_token"].as_str().expect("token").to_owned());
    }
    kill("-STOP", redis.pid());
    let calls: Vec<_> = tokens
        .into_iter()
        .map(|t| {
            let (c, url) = (c.clone(), format!("{edge}/api/events/demo/position"));
            tokio::spawn(async move { c.get(url).bearer_auth(t).send().await })
        })
        .collect();
    until(Duration::from_secs(10), "20 requests in flight", || {
        let (c, url) = (c.clone(), format!("{origin}/metrics"));
        async move {
            let Ok(r) = c.get(url).send().await else {
                return false;
            };
            let text = r.text().await.unwrap_or_default();
            text.lines()
                .find(|l| l.starts_with("wr_http_in_flight "))
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .is_some_and(|n| n >= 21.0)
        }
    })
    .await;
    kill("-TERM", up.id());
    let stopping = Instant::now();
    while stopping.elapsed() < Duration::from_millis(300) {
        assert!(
            up.try_wait().expect("wait").is_none(),
            "up drains instead of exiting at once"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    kill("-CONT", redis.pid());
    for call in calls {
        let r = call
            .await
            .expect("task")
            .expect("every request in flight is answered");
        assert_eq!(r.status(), 200, "through the draining CDN");
    }
    assert_eq!(exited(up).await.code(), Some(0), "SIGTERM is a normal stop");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", cdn)).is_err(),
        "nginx stopped with up: its port is free"
    );
}

/// Starts `ticket-sale up --opens-in 0 --redis {redis}` in `dir` on fresh ports (with
/// `cdn`, `--cdn` on a fresh port too); returns the process, the waiting room's and booking
/// core's URLs once both answer `/healthz`, and the CDN's port (0 without). `up` writes its
/// log to `dir/up.log`; an `up` that exits before answering fails the test with that log at
/// once, or, when a port was taken between [`free_port`] and its bind (by a server another
/// test started: CI saw `up` not answer for 60 s), is started again on new ports.
async fn start_up(
    dir: &std::path::Path,
    redis: &RedisServer,
    extra: &[&str],
    cdn: bool,
) -> (std::process::Child, String, String, u16) {
    let log_path = dir.join("up.log");
    for _ in 0..3 {
        let [wr, bc, gw] = [free_port(), free_port(), free_port()];
        let edge = if cdn { free_port() } else { 0 };
        let log = std::fs::File::create(&log_path).expect("up.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ticket-sale"));
        cmd.current_dir(dir)
            .args(["up", "--opens-in", "0", "--redis", &redis.url()])
            .args(["--waiting-room", &format!("127.0.0.1:{wr}")])
            .args(["--booking", &format!("127.0.0.1:{bc}")])
            .args(["--gateway", &format!("127.0.0.1:{gw}")])
            .args(["--admin-token", "stop-up-test-admin-token-0123"])
            .args(extra)
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        if cdn {
            cmd.args(["--cdn", &edge.to_string()]);
        }
        let mut up = cmd.spawn().expect("start ticket-sale up");
        let (origin, booking) = (
            format!("http://127.0.0.1:{wr}"),
            format!("http://127.0.0.1:{bc}"),
        );
        let c = reqwest::Client::new();
        let start = Instant::now();
        let mut answering = 0;
        while answering < 2 {
            if up.try_wait().expect("wait").is_some() {
                break;
            }
            if start.elapsed() >= Duration::from_secs(60) {
                let _ = up.kill();
                let _ = up.wait();
                panic!(
                    "timed out waiting for up answers /healthz: {}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                );
            }
            let url = [&origin, &booking][answering];
            if c.get(format!("{url}/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                answering += 1;
            } else {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
        if answering == 2 {
            return (up, origin, booking, edge);
        }
        // It exited (`try_wait` saw it): reaped already; `wait` returns that status.
        let _ = up.wait();
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        assert!(
            ["in use", "cannot be listened on"]
                .iter()
                .any(|m| log.contains(m)),
            "up exited before answering: {log}"
        );
    }
    panic!("up: its ports were taken before it bound them, three times over");
}

/// SIGTERM to `up`, then its exit status.
async fn stop_up(up: std::process::Child) -> std::process::ExitStatus {
    kill("-TERM", up.id());
    exited(up).await
}

/// `up`'s exit status, within 40 s.
async fn exited(mut up: std::process::Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = up.try_wait().expect("wait") {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(40), "up did not exit");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// `POST /admission` with the join token until the fan is let in (the demo admits 5 a second);
/// returns the admission token.
async fn admitted(c: &reqwest::Client, origin: &str, join_token: &str) -> String {
    let start = Instant::now();
    loop {
        let r = c
            .post(format!("{origin}/api/events/demo/admission"))
            .bearer_auth(join_token)
            .send()
            .await
            .expect("admission");
        if r.status() == 200 {
            let j: serde_json::Value = r.json().await.expect("json");
            return j["admission_token"].as_str().expect("token").to_owned();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "never let in");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A restart of `up` on Redis (SIGTERM, start again in the same directory) keeps the line:
/// the fan's join token from before it still finds the same queue number, and the admission
/// token signed before it still opens the booking core. Both keys are kept in `sale.keys/`
/// (`--keys-dir`); a start with a fresh keys directory shows what was lost without them: the
/// same join token refused with a 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn up_restarted_on_redis_keeps_the_fans_join_and_admission_tokens() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let c = reqwest::Client::new();
    let (up, origin, booking, _) = start_up(dir.path(), &redis, &[], false).await;
    let j: serde_json::Value = c
        .post(format!("{origin}/api/events/demo/join"))
        .send()
        .await
        .expect("join")
        .json()
        .await
        .expect("json");
    let join_token = j["join_token"].as_str().expect("join token").to_owned();
    let number = j["queue_number"]
        .as_u64()
        .expect("numbered: the sale is open");
    let admission = admitted(&c, &origin, &join_token).await;
    let me = |booking: String, token: String| {
        let c = c.clone();
        async move {
            c.get(format!("{booking}/api/me"))
                .bearer_auth(token)
                .send()
                .await
                .expect("me")
                .status()
        }
    };
    assert_eq!(me(booking.clone(), admission.clone()).await, 200);
    assert_eq!(stop_up(up).await.code(), Some(0));
    let keys = dir.path().join("sale.keys");
    assert!(keys.join("join-hmac.key").is_file() && keys.join("signing/active.pem").is_file());

    let (up, origin, booking, _) = start_up(dir.path(), &redis, &[], false).await;
    let pos = c
        .get(format!("{origin}/api/events/demo/position"))
        .bearer_auth(&join_token)
        .send()
        .await
        .expect("position");
    assert_eq!(pos.status(), 200, "the join token from before the restart");
    let pos: serde_json::Value = pos.json().await.expect("json");
    assert_eq!(pos["queue_number"].as_u64(), Some(number), "{pos}");
    assert_eq!(
        me(booking.clone(), admission.clone()).await,
        200,
        "the admission token signed before the restart"
    );
    assert_eq!(stop_up(up).await.code(), Some(0));

    // Without the kept keys: the same line in Redis, but the token is no longer the line's.
    let (up, origin, _, _) =
        start_up(dir.path(), &redis, &["--keys-dir", "other.keys"], false).await;
    let pos = c
        .get(format!("{origin}/api/events/demo/position"))
        .bearer_auth(&join_token)
        .send()
        .await
        .expect("position");
    assert_eq!(pos.status(), 401, "a join token under another key");
    assert_eq!(stop_up(up).await.code(), Some(0));
}
