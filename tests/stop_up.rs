//! Case W13 for the one-command sale: `ticket-sale up --cdn` gets a real SIGTERM while requests
//! through its CDN are in flight (held in the waiting room by pausing Redis with SIGSTOP). Every
//! request is answered, nginx stops (its port is free again, its master gone) and `up` exits 0.

use std::process::{Command, Stdio};
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
    let [wr, bc, gw, cdn] = [free_port(), free_port(), free_port(), free_port()];
    let mut up = Command::new(env!("CARGO_BIN_EXE_ticket-sale"))
        .current_dir(dir.path())
        .args(["up", "--opens-in", "0", "--redis", &redis.url()])
        .args(["--waiting-room", &format!("127.0.0.1:{wr}")])
        .args(["--booking", &format!("127.0.0.1:{bc}")])
        .args(["--gateway", &format!("127.0.0.1:{gw}")])
        .args(["--cdn", &cdn.to_string()])
        .args(["--admin-token", "stop-test-admin-token-0123"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ticket-sale up");
    let edge = format!("http://127.0.0.1:{cdn}");
    let origin = format!("http://127.0.0.1:{wr}");
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
    let start = Instant::now();
    let status = loop {
        if let Some(s) = up.try_wait().expect("wait") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "up did not exit after draining"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert_eq!(status.code(), Some(0), "SIGTERM is a normal stop");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", cdn)).is_err(),
        "nginx stopped with up: its port is free"
    );
}
