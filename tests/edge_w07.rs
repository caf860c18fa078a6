//! Case W07 through a real CDN (nginx with `proxy_cache`, `infra/`): no cacheable answer carries
//! `Set-Cookie` or anything per fan; per-fan answers are `private, no-store`; fan B never
//! receives fan A's token.

mod support;

fn is_cacheable(h: &reqwest::header::HeaderMap) -> bool {
    let cc = h
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    cc.contains("public") || cc.contains("s-maxage")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_w07_one_cookie_one_fan_through_the_cdn() {
    let (s, cdn) = support::start_with_cdn("edge", 3600, 10.0).await;
    let a = reqwest::Client::new();
    let b = reqwest::Client::new();
    // Fan A joins through the CDN: a per-fan answer, never stored.
    let ja = a
        .post(format!("{}/api/events/edge/join", cdn.url))
        .send()
        .await
        .expect("join A");
    assert!(ja.status().is_success());
    let cc = ja.headers()["cache-control"]
        .to_str()
        .unwrap_or("")
        .to_owned();
    assert!(
        cc.contains("private") && cc.contains("no-store"),
        "join answer: {cc}"
    );
    let token_a = ja.json::<serde_json::Value>().await.expect("json")["join_token"]
        .as_str()
        .expect("token")
        .to_owned();
    // Fan B joins through the same CDN and never receives A's token.
    let jb = b
        .post(format!("{}/api/events/edge/join", cdn.url))
        .send()
        .await
        .expect("join B");
    let body_b = jb.text().await.expect("body B");
    assert!(!body_b.contains(&token_a), "fan B received fan A's token");
    // Every cacheable answer is free of Set-Cookie and of A's token, fetched twice (miss, hit).
    for path in [
        "/",
        "/index.html",
        "/wait.js",
        "/status/edge.json",
        "/.well-known/jwks.json",
    ] {
        for round in 0..2 {
            let r = b
                .get(format!("{}{path}", cdn.url))
                .bearer_auth(&token_a)
                .send()
                .await
                .expect("get");
            assert!(r.status().is_success(), "{path}: {}", r.status());
            let h = r.headers().clone();
            let body = r.text().await.expect("body");
            assert!(
                h.get("set-cookie").is_none(),
                "{path} (round {round}) sets a cookie"
            );
            assert!(
                !body.contains(&token_a),
                "{path} (round {round}) carries a fan's token"
            );
            if path.starts_with("/status") {
                assert!(is_cacheable(&h), "the status document must be cacheable");
            }
        }
    }
    // A per-fan read without a token is refused, never served from A's earlier answer.
    let _ = a
        .get(format!("{}/api/events/edge/position", cdn.url))
        .bearer_auth(&token_a)
        .send()
        .await;
    let r = b
        .get(format!("{}/api/events/edge/position", cdn.url))
        .send()
        .await
        .expect("position");
    assert_eq!(r.status(), 401, "no token, no position");
    drop(cdn);
    s.shutdown().await;
}
