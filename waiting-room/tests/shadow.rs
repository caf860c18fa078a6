//! The quiet lane for bots (issue 15 item 2, must show), over real HTTP on the memory and the
//! Redis store: operator rules by address range (block, bypass, challenge, shadow) managed
//! through the admin API and audited; bad rule input is a 4xx problem; flagged clients (a
//! shadow rule's range, and an address past the proof-of-work failure threshold) get
//! normal-looking answers and are never admitted while fans are; fans' numbers, positions and
//! the status document's figures and wait estimate are the same as in a control run without
//! the bots; the per-rule counters move on `/metrics`; the operator view lists the shadow line
//! and releases a false positive to the back of the fans' line. Client addresses come through
//! `X-Forwarded-For` from a trusted proxy (the peer, 127.0.0.1), the project's one rule for it.

use reqwest::Client;
use sale_common::{Clock, ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use waiting_room::admitter::Admitter;
use waiting_room::domain::EventId;
use waiting_room::pow::zero_bits;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const EVENT_BITS: u32 = 6;
const ADMIN: &str = "Bearer demo-admin-token";

struct Room {
    base: String,
    event: String,
    http: Client,
    st: AppState,
    clock: Arc<ManualClock>,
    admitter: Admitter,
}

async fn room(store: Arc<dyn QueueStore>, event: &str) -> Room {
    let clock = Arc::new(ManualClock::new(T0 * 1000));
    let shared: SharedClock = clock.clone();
    let mut cfg = Config::demo(event, T0, "http://127.0.0.1:8081");
    cfg.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
    cfg.status_throttle_ms = 1;
    cfg.events[0].admit_rate = 2.0;
    let st = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(st.clone()).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let id = EventId::parse(event).expect("id");
    let mut admitter = Admitter::new(store, id, 100, 60);
    admitter.step(clock.now_ms()).await.expect("open");
    Room {
        base: format!("http://{addr}"),
        event: event.to_owned(),
        http: Client::new(),
        st,
        clock,
        admitter,
    }
}

/// One answer: status, `Content-Type`, JSON body (`Null` when empty).
type Answer = (u16, String, Value);

impl Room {
    async fn send(&self, rb: reqwest::RequestBuilder) -> Answer {
        let r = rb.send().await.expect("send");
        let status = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = r.text().await.expect("body");
        (
            status,
            ct,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/api/events/{}/{tail}", self.base, self.event)
    }

    fn admin_url(&self, tail: &str) -> String {
        format!("{}/admin/events/{}{tail}", self.base, self.event)
    }

    async fn admin(&self, method: &str, tail: &str, body: Option<Value>) -> Answer {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self
            .http
            .request(m, self.admin_url(tail))
            .header("authorization", ADMIN)
            .header("x-operator", "olga");
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        self.send(rb).await
    }

    /// A new join from `addr`; `bits` > 0 solves the challenge the address is given at that
    /// difficulty (and not two bits more), `None` sends no proof, `Some(0)` a wrong one.
    async fn join(&self, addr: &str, bits: Option<u32>) -> Answer {
        let mut rb = self
            .http
            .post(self.url("join"))
            .header("x-forwarded-for", addr);
        if let Some(bits) = bits {
            let (_, _, c) = self
                .send(
                    self.http
                        .get(self.url("pow"))
                        .header("x-forwarded-for", addr),
                )
                .await;
            let challenge = c["challenge"].as_str().expect("challenge").to_owned();
            let solution = if bits == 0 {
                just_enough(&challenge, 0)
            } else {
                just_enough(&challenge, bits)
            };
            rb = rb
                .header("x-pow-challenge", challenge)
                .header("x-pow-solution", solution);
        }
        self.send(rb).await
    }

    async fn fan_call(&self, method: &str, tail: &str, token: &str) -> Answer {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let rb = self
            .http
            .request(m, self.url(tail))
            .header("authorization", format!("Bearer {token}"));
        self.send(rb).await
    }

    /// One second: an admitter tick, a fresh status document.
    async fn tick(&mut self) {
        self.clock.advance_ms(1000);
        self.admitter.step(self.clock.now_ms()).await.expect("step");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let id = EventId::parse(&self.event).expect("id");
        self.st.refresh_status(&id).await.expect("status");
    }

    async fn status(&self) -> Value {
        let url = format!("{}/status/{}.json", self.base, self.event);
        self.send(self.http.get(url)).await.2
    }
}

/// A solution with `bits` or `bits + 1` leading zero bits (so it fails a harder challenge; with
/// 0, a wrong one).
fn just_enough(challenge: &str, bits: u32) -> String {
    (0u64..)
        .map(|n| n.to_string())
        .find(|s| (bits..bits + 2).contains(&zero_bits(challenge, s)))
        .expect("a solution")
}

fn token(a: &Answer) -> String {
    a.2["join_token"].as_str().expect("join token").to_owned()
}

struct Rules {
    shadow: String,
    block: String,
    bypass: String,
    challenge: String,
}

async fn add_rules(r: &Room) -> Rules {
    let mut ids = Vec::new();
    for body in [
        json!({"cidr": "203.0.113.0/24", "action": "shadow", "note": "scalper farm"}),
        json!({"cidr": "198.51.100.0/24", "action": "block"}),
        json!({"cidr": "192.0.2.0/28", "action": "bypass", "note": "box office"}),
        json!({"cidr": "2001:db8::/32", "action": "challenge", "pow_bits": 8}),
    ] {
        let (s, ct, rule) = r.admin("POST", "/rules", Some(body.clone())).await;
        assert_eq!(
            (s, ct.as_str()),
            (201, "application/json"),
            "{body}: {rule}"
        );
        assert_eq!(rule["action"], body["action"]);
        ids.push(rule["id"].as_str().expect("id").to_owned());
    }
    Rules {
        shadow: ids[0].clone(),
        block: ids[1].clone(),
        bypass: ids[2].clone(),
        challenge: ids[3].clone(),
    }
}

/// What the fans saw in one run: their numbers, positions at two moments, the status figures
/// at those moments, and how many were admitted.
#[derive(Debug, PartialEq)]
struct FanView {
    numbers: Vec<Value>,
    positions: Vec<Value>,
    figures: Vec<Value>,
    admitted: usize,
}

fn figures_of(doc: &Value) -> Value {
    json!({
        "state": doc["state"], "cursor": doc["cursor"], "queue_length": doc["queue_length"],
        "active": doc["active"], "wait": doc["wait"], "admitted_per_sec": doc["admitted_per_sec"],
    })
}

/// Six fans join (from 10.0.0.x, with proofs), bots joining between them when `bots`; then
/// ten seconds of admitter ticks in which every fan claims as soon as its turn comes.
/// Returns the fans' view and the bots' join answers.
async fn run(r: &mut Room, bots: bool) -> (FanView, Vec<Answer>) {
    let mut fans = Vec::new();
    let mut bot_answers = Vec::new();
    for k in 0..6 {
        let fan = r.join(&format!("10.0.0.{}", k + 1), Some(EVENT_BITS)).await;
        assert_eq!(fan.0, 200, "{:?}", fan.2);
        fans.push(fan);
        if bots {
            let bot = r
                .join(&format!("203.0.113.{}", k + 10), Some(EVENT_BITS))
                .await;
            assert_eq!(
                bot.0, 200,
                "a shadowed join looks like any join: {:?}",
                bot.2
            );
            bot_answers.push(bot);
        }
    }
    let numbers = fans.iter().map(|f| f.2["queue_number"].clone()).collect();
    let mut view = FanView {
        numbers,
        positions: Vec::new(),
        figures: Vec::new(),
        admitted: 0,
    };
    let mut admitted = vec![false; fans.len()];
    for second in 0..10 {
        r.tick().await;
        for (i, f) in fans.iter().enumerate() {
            let (_, _, p) = r.fan_call("GET", "position", &token(f)).await;
            if second == 1 || second == 3 {
                view.positions.push(json!([p["queue_number"], p["cursor"]]));
            }
            let my_turn = p["queue_number"].as_u64() <= p["cursor"].as_u64();
            if my_turn && !admitted[i] {
                let (s, _, a) = r.fan_call("POST", "admission", &token(f)).await;
                assert_eq!(s, 200, "{a}");
                admitted[i] = true;
            }
        }
        for b in &bot_answers {
            let (s, _, a) = r.fan_call("POST", "admission", &token(b)).await;
            assert_eq!(
                (s, a["type"].as_str()),
                (409, Some("/problems/not-your-turn"))
            );
            assert!(a.get("admission_token").is_none());
        }
        if second == 1 || second == 3 {
            view.figures.push(figures_of(&r.status().await));
        }
    }
    view.admitted = admitted.iter().filter(|a| **a).count();
    (view, bot_answers)
}

fn metric(text: &str, rule: &str, action: &str) -> u64 {
    text.lines()
        .find(|l| {
            l.starts_with("wr_address_rule_hits_total{")
                && l.contains(&format!("rule=\"{rule}\""))
                && l.contains(&format!("action=\"{action}\""))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

async fn quiet_lane(control: &mut Room, with_bots: &mut Room) {
    for r in [&mut *control, &mut *with_bots] {
        let (s, _, _) = r
            .admin("PATCH", "", Some(json!({"pow_difficulty": EVENT_BITS})))
            .await;
        assert_eq!(s, 200);
        r.tick().await;
    }
    let _ = add_rules(control).await;
    let rules = add_rules(with_bots).await;
    let (ctl_view, _) = run(control, false).await;
    let (bot_view, bots) = run(with_bots, true).await;

    // Fans are unaffected: same numbers, positions, figures and wait estimate, all admitted.
    assert_eq!(ctl_view.admitted, 6, "{ctl_view:?}");
    assert_eq!(bot_view, ctl_view, "the bots changed what fans see");

    // Bots: normal-looking answers, numbers from their own line, never admitted.
    for b in &bots {
        assert!(
            b.2["visitor_id"].is_string() && b.2["state"] == "open",
            "{:?}",
            b.2
        );
        let n = b.2["queue_number"]
            .as_u64()
            .expect("a number like any fan's");
        let (s, _, p) = with_bots.fan_call("GET", "position", &token(b)).await;
        assert_eq!(s, 200);
        assert_eq!(
            (p["queue_number"].as_u64(), &p["admitted"]),
            (Some(n), &json!(false))
        );
        assert!(
            p["cursor"].as_u64().expect("cursor") < n,
            "never its turn: {p}"
        );
        let (s, _, h) = with_bots.fan_call("POST", "heartbeat", &token(b)).await;
        assert_eq!((s, h["place"].as_str()), (200, Some("waiting")));
        let (s, _, again) = with_bots
            .send(
                with_bots
                    .http
                    .post(with_bots.url("join"))
                    .header("authorization", format!("Bearer {}", token(b))),
            )
            .await;
        assert_eq!(
            (s, &again["queue_number"]),
            (200, &json!(n)),
            "re-join keeps it"
        );
    }

    // An address past the proof-of-work failure threshold (5) goes to the shadow line quietly.
    for _ in 0..5 {
        let (s, ct, p) = with_bots.join("100.64.0.9", Some(0)).await;
        assert_eq!(
            (s, ct.as_str(), p["type"].as_str()),
            (
                403,
                "application/problem+json",
                Some("/problems/pow-required")
            )
        );
    }
    let flagged = with_bots.join("100.64.0.9", Some(0)).await;
    assert_eq!(flagged.0, 200, "{:?}", flagged.2);
    let (s, _, a) = with_bots
        .fan_call("POST", "admission", &token(&flagged))
        .await;
    assert_eq!(
        (s, a["type"].as_str()),
        (409, Some("/problems/not-your-turn"))
    );

    // Block: a specific 403 problem. Bypass: no proof asked, queued normally. Challenge: the
    // event's proof is not enough; the rule's difficulty is announced and accepted.
    let (s, ct, p) = with_bots.join("198.51.100.7", Some(EVENT_BITS)).await;
    assert_eq!(
        (s, ct.as_str(), p["type"].as_str()),
        (
            403,
            "application/problem+json",
            Some("/problems/address-blocked")
        )
    );
    let staff = with_bots.join("192.0.2.3", None).await;
    assert_eq!(
        (staff.0, staff.2["queue_number"].as_u64()),
        (200, Some(7)),
        "{:?}",
        staff.2
    );
    let (s, _, p) = with_bots.join("2001:db8:1::5", Some(EVENT_BITS)).await;
    assert_eq!(
        (s, p["type"].as_str()),
        (403, Some("/problems/pow-required"))
    );
    let (_, _, c) = with_bots
        .send(
            with_bots
                .http
                .get(with_bots.url("pow"))
                .header("x-forwarded-for", "2001:db8:1::5"),
        )
        .await;
    assert_eq!(c["difficulty"], 8);
    let challenged = with_bots.join("2001:db8:1::5", Some(8)).await;
    assert_eq!(
        (challenged.0, challenged.2["queue_number"].as_u64()),
        (200, Some(8))
    );

    // Per-rule counters on /metrics.
    let m = with_bots
        .http
        .get(format!("{}/metrics", with_bots.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert_eq!(metric(&m, &rules.shadow, "shadow"), 6, "{m}");
    assert_eq!(metric(&m, &rules.block, "block"), 1);
    assert_eq!(metric(&m, &rules.bypass, "bypass"), 1);
    assert_eq!(metric(&m, &rules.challenge, "challenge"), 2);

    // The operator view lists the shadow line: who, which rule, when.
    let (s, _, line) = with_bots.admin("GET", "/shadow", None).await;
    assert_eq!(s, 200);
    let entries = line["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 7, "{line}");
    let by_rule = |r: &str| entries.iter().filter(|e| e["rule"] == r).count();
    assert_eq!((by_rule(&rules.shadow), by_rule("pow-failures")), (6, 1));
    assert_eq!(entries[0]["address"], "203.0.113.10");
    assert_eq!(entries[0]["shadow_number"], 1);
    assert!(entries[0]["at_ms"].as_i64().is_some_and(|t| t >= T0 * 1000));

    // Releasing a false positive: at the back of the fans' line, audited, then admitted.
    let fp = bots[0].2["visitor_id"].as_str().expect("id").to_owned();
    let (s, _, rel) = with_bots
        .admin("POST", &format!("/shadow/{fp}/release"), None)
        .await;
    assert_eq!((s, rel["queue_number"].as_u64()), (200, Some(9)), "{rel}");
    let (s, _, _) = with_bots
        .admin("POST", &format!("/shadow/{fp}/release"), None)
        .await;
    assert_eq!(s, 404, "released once");
    let (_, _, line) = with_bots.admin("GET", "/shadow", None).await;
    assert_eq!(line["entries"].as_array().map(Vec::len), Some(6));
    let mut claimed = None;
    for _ in 0..10 {
        with_bots.tick().await;
        let (s, _, a) = with_bots
            .fan_call("POST", "admission", &token(&bots[0]))
            .await;
        if s == 200 {
            claimed = a["admission_token"].as_str().map(str::to_owned);
            break;
        }
    }
    assert!(claimed.is_some(), "a released visitor is admitted in turn");
    let (_, _, audit) = with_bots.admin("GET", "/audit", None).await;
    let actions: Vec<&str> = audit
        .as_array()
        .expect("audit")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(actions.iter().filter(|a| **a == "add_rule").count(), 4);
    assert!(actions.contains(&"release_shadow"), "{actions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_lane_over_http_on_memory() {
    let mut control = room(Arc::new(MemoryStore::new()), "control").await;
    let mut bots = room(Arc::new(MemoryStore::new()), "bots").await;
    quiet_lane(&mut control, &mut bots).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_lane_over_http_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let timeout = std::time::Duration::from_secs(2);
    let a = RedisStore::connect(&server.url(), timeout)
        .await
        .expect("redis");
    let b = RedisStore::connect(&server.url(), timeout)
        .await
        .expect("redis");
    let mut control = room(Arc::new(a), "control-redis").await;
    let mut bots = room(Arc::new(b), "bots-redis").await;
    quiet_lane(&mut control, &mut bots).await;
}

#[tokio::test]
async fn bad_rule_input_is_a_4xx_problem_and_rules_are_listed_and_deleted() {
    let r = room(Arc::new(MemoryStore::new()), "rules").await;
    for (body, kind) in [
        (
            json!({"cidr": "10.0.0.1/8", "action": "block"}),
            Some("/problems/invalid-cidr"),
        ),
        (
            json!({"cidr": "not-an-address", "action": "block"}),
            Some("/problems/invalid-cidr"),
        ),
        (
            json!({"cidr": "10.0.0.0/33", "action": "block"}),
            Some("/problems/invalid-cidr"),
        ),
        (
            json!({"cidr": "2001:db8::/129", "action": "block"}),
            Some("/problems/invalid-cidr"),
        ),
        (
            json!({"cidr": "10.0.0.0/8", "action": "nuke"}),
            Some("/problems/invalid-action"),
        ),
        (
            json!({"cidr": "10.0.0.0/8", "action": "block", "pow_bits": 8}),
            Some("/problems/invalid-pow-bits"),
        ),
        (
            json!({"cidr": "10.0.0.0/8", "action": "challenge", "pow_bits": 99}),
            Some("/problems/invalid-pow-bits"),
        ),
        (
            json!({"cidr": "10.0.0.0/8", "action": "block", "extra": 1}),
            None,
        ),
        (json!({"action": "block"}), None),
        (json!([1, 2]), None),
    ] {
        let (s, ct, p) = r.admin("POST", "/rules", Some(body.clone())).await;
        assert!((400..500).contains(&s), "{body}: {s}");
        assert_eq!(ct, "application/problem+json", "{body}");
        if let Some(kind) = kind {
            assert_eq!(p["type"].as_str(), Some(kind), "{body}: {p}");
        }
    }
    let raw = r
        .send(
            r.http
                .post(r.admin_url("/rules"))
                .header("authorization", ADMIN)
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert!(
        (400..500).contains(&raw.0) && raw.1 == "application/problem+json",
        "{raw:?}"
    );
    let unauth = r.send(r.http.get(r.admin_url("/rules"))).await;
    assert_eq!(unauth.0, 401);
    let (s, _, rule) = r
        .admin(
            "POST",
            "/rules",
            Some(json!({"cidr": "2001:DB8:0:0::/64", "action": "shadow"})),
        )
        .await;
    assert_eq!((s, rule["cidr"].as_str()), (201, Some("2001:db8::/64")));
    let id = rule["id"].as_str().expect("id").to_owned();
    let (_, _, list) = r.admin("GET", "/rules", None).await;
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    let (s, _, _) = r.admin("DELETE", &format!("/rules/{id}"), None).await;
    assert_eq!(s, 204);
    let (s, ct, p) = r.admin("DELETE", &format!("/rules/{id}"), None).await;
    assert_eq!(
        (s, ct.as_str(), p["type"].as_str()),
        (
            404,
            "application/problem+json",
            Some("/problems/no-such-rule")
        )
    );
    let (s, _, _) = r.admin("GET", "/rules", None).await;
    assert_eq!(s, 200);
    let (s, _, _) = r
        .send(
            r.http
                .get(format!("{}/admin/events/nope/rules", r.base))
                .header("authorization", ADMIN),
        )
        .await;
    assert_eq!(s, 404);
    let (_, _, audit) = r.admin("GET", "/audit", None).await;
    let actions: Vec<&str> = audit
        .as_array()
        .expect("audit")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.ends_with("_rule"))
        .collect();
    assert_eq!(actions, ["add_rule", "delete_rule"]);
}

/// Two operators at once (found by the newcomer review on Redis): 20 concurrent adds of one
/// range store exactly one rule (the rest `409 rule-exists`), and 20 concurrent releases of one
/// shadowed visitor answer exactly one 200 with one audit entry (the rest `404`), the visitor
/// holding one place in the fans' line.
async fn one_winner_among_concurrent_operators(r: &Room) {
    let adds = futures::future::join_all((0..20).map(|_| {
        r.admin(
            "POST",
            "/rules",
            Some(json!({"cidr": "198.51.100.0/24", "action": "shadow"})),
        )
    }))
    .await;
    let created = adds.iter().filter(|a| a.0 == 201).count();
    let exists = adds
        .iter()
        .filter(|a| a.0 == 409 && a.2["type"] == "/problems/rule-exists")
        .count();
    assert_eq!((created, exists), (1, 19), "{adds:?}");
    let (_, _, list) = r.admin("GET", "/rules", None).await;
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");

    let joined = r.join("198.51.100.7", Some(EVENT_BITS)).await;
    let visitor = joined.2["visitor_id"].as_str().expect("visitor").to_owned();
    let (_, _, shadow) = r.admin("GET", "/shadow", None).await;
    assert!(shadow.to_string().contains(&visitor), "shadowed: {shadow}");
    let path = format!("/shadow/{visitor}/release");
    let releases = futures::future::join_all((0..20).map(|_| r.admin("POST", &path, None))).await;
    let ok: Vec<&Answer> = releases.iter().filter(|a| a.0 == 200).collect();
    let gone = releases.iter().filter(|a| a.0 == 404).count();
    assert_eq!((ok.len(), gone), (1, 19), "{releases:?}");
    let (_, _, audit) = r.admin("GET", "/audit", None).await;
    let released = audit
        .as_array()
        .expect("audit")
        .iter()
        .filter(|e| e["action"] == "release_shadow")
        .count();
    assert_eq!(released, 1, "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_winner_among_concurrent_operators_on_memory_and_redis() {
    let memory = room(Arc::new(MemoryStore::new()), "ops-mem").await;
    one_winner_among_concurrent_operators(&memory).await;
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("redis");
    let redis = room(Arc::new(store), "ops-redis").await;
    one_winner_among_concurrent_operators(&redis).await;
}
