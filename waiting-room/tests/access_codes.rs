//! Presale rooms (issue 14 item 1) over real HTTP on the memory and the Redis store: an event in
//! `code` mode takes a new fan only with one use of a valid code; refusals (`code-required`,
//! `code-unknown`, `code-used-up`, `code-expired`) write nothing (on Redis: the server's own
//! change counter `rdb_changes_since_last_save` does not move); concurrent fans on the last uses
//! get exactly as many places as there were uses; a revoked code costs its fan the place and the
//! fan is told (`410 code-revoked`), audited; refused codes are limited per address (429) and
//! per identity (429), counted in `wr_code_failures_total{reason}`. Signed invitations give one
//! place per `sub` and pass their tier to the admission token; the same scenarios run on a Redis
//! Cluster.

use futures::future::join_all;
use reqwest::{Client, Method};
use sale_common::testsupport::RedisServer;
use sale_common::{Clock, ManualClock, SharedClock};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use waiting_room::admitter::Admitter;
use waiting_room::domain::EventId;
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const ADMIN: &str = "demo-admin-token";

struct Room {
    root: String,
    http: Client,
    clock: Arc<ManualClock>,
    admitter: tokio::sync::Mutex<Admitter>,
}

/// The waiting room on a real socket, event `demo` open and in `code` mode.
async fn room(store: Arc<dyn QueueStore>) -> Room {
    let clock = Arc::new(ManualClock::new(T0 * 1000));
    let shared: SharedClock = clock.clone();
    let mut cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    // The test client stands for a proxy: `join_from` names each fan's own address.
    cfg.trusted_proxies = vec!["127.0.0.1".parse().expect("ip")];
    // … and may name the fan's verified identity (the per-visitor limit's key).
    cfg.identity_header = Some("x-user".into());
    let st = AppState::new(cfg, store.clone(), shared)
        .await
        .expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(st).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut admitter = Admitter::new(store, EventId::parse("demo").expect("id"), 100, 60);
    admitter.step(clock.now_ms()).await.expect("open");
    let room = Room {
        root: format!("http://{addr}"),
        http: Client::new(),
        clock,
        admitter: tokio::sync::Mutex::new(admitter),
    };
    let (s, b) = room
        .admin(Method::PUT, "access", json!({"mode": "code"}).to_string())
        .await;
    assert_eq!((s, b["access"].as_str()), (200, Some("code")), "{b}");
    room
}

impl Room {
    async fn admin(&self, method: Method, tail: &str, body: String) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}/admin/events/demo/{tail}", self.root))
            .bearer_auth(ADMIN)
            .header("x-operator", "presale-test")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("send");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Generates codes; returns them as the CSV's first column.
    async fn generate(&self, count: u32, uses: u32) -> Vec<String> {
        let r = self
            .http
            .post(format!("{}/admin/events/demo/codes", self.root))
            .bearer_auth(ADMIN)
            .json(&json!({"count": count, "uses": uses}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 200);
        let csv = r.text().await.expect("csv");
        csv.lines()
            .skip(1)
            .map(|l| l.split(',').next().expect("code").to_owned())
            .collect()
    }

    async fn csv(&self, tail: &str, csv: &str) -> (u16, Value) {
        self.admin(Method::POST, tail, csv.to_owned()).await
    }

    /// A join with `code` (none: no header): (status, body).
    async fn join(&self, code: Option<&str>) -> (u16, Value) {
        self.join_from("192.0.2.1", code).await
    }

    /// A join from the fan address `from` (the test client is a trusted proxy).
    async fn join_from(&self, from: &str, code: Option<&str>) -> (u16, Value) {
        let mut rb = self
            .http
            .post(format!("{}/api/events/demo/join", self.root))
            .header("x-forwarded-for", from);
        if let Some(c) = code {
            rb = rb.header("x-access-code", c);
        }
        let r = rb.send().await.expect("send");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// A join of the verified identity `user` (header set by the trusted proxy) from `from`.
    async fn join_as(&self, user: &str, from: &str, code: &str) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/api/events/demo/join", self.root))
            .header("x-forwarded-for", from)
            .header("x-user", user)
            .header("x-access-code", code)
            .send()
            .await
            .expect("send");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn position(&self, token: &str) -> (u16, Value) {
        let r = self
            .http
            .get(format!("{}/api/events/demo/position", self.root))
            .bearer_auth(token)
            .send()
            .await
            .expect("send");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Lets the first fans in (one admitter step 10 s later: 100 places at the demo rate).
    async fn admit(&self) {
        self.clock.advance_ms(10_000);
        let mut a = self.admitter.lock().await;
        a.step(self.clock.now_ms()).await.expect("step");
    }

    /// The claims of the admission token of the fan with `join_token`.
    async fn admission_claims(&self, join_token: &str) -> Value {
        let r = self
            .http
            .post(format!("{}/api/events/demo/admission", self.root))
            .bearer_auth(join_token)
            .send()
            .await
            .expect("send");
        let status = r.status().as_u16();
        let b: Value = r.json().await.expect("json");
        assert_eq!(status, 200, "{b}");
        let token = b["admission_token"].as_str().expect("token");
        let payload = token.split('.').nth(1).expect("payload");
        use base64::Engine;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("base64");
        serde_json::from_slice(&raw).expect("claims")
    }

    async fn metrics(&self) -> String {
        let r = self
            .http
            .get(format!("{}/metrics", self.root))
            .send()
            .await
            .expect("send");
        r.text().await.expect("text")
    }
}

/// A fresh `redis-server` and a store on it.
async fn redis() -> (RedisServer, Arc<dyn QueueStore>) {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), std::time::Duration::from_secs(2))
        .await
        .expect("redis");
    (server, Arc::new(store))
}

fn kind(b: &Value) -> &str {
    b["type"]
        .as_str()
        .unwrap_or("")
        .trim_start_matches("/problems/")
}

/// Writes the store has taken, where it can tell (Redis: `rdb_changes_since_last_save`).
type Writes = Box<dyn Fn() -> Option<u64>>;

fn redis_writes(url: String) -> Writes {
    Box::new(move || {
        let client = redis::Client::open(url.as_str()).expect("client");
        let mut con = client.get_connection().expect("connect");
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut con)
            .expect("info");
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .map(|v| v.trim().parse().expect("number"))
    })
}

async fn presale_code_admits_once_per_use_on(store: Arc<dyn QueueStore>, writes: Writes) {
    let room = room(store.clone()).await;
    let codes = room.generate(2, 2).await;
    assert_eq!(codes.len(), 2);
    assert!(codes[0].len() == 14 && codes[0] != codes[1], "{codes:?}");
    let (s, b) = room.join(Some(&codes[0].to_lowercase())).await;
    assert_eq!((s, b["queue_number"].as_u64()), (200, Some(1)), "{b}");
    let (s, _) = room.join(Some(&codes[0])).await;
    assert_eq!(s, 200);
    let (s, b) = room
        .csv(
            "codes/import",
            "code,uses,expires_ms\nPROMO-2026,1,\nOLD-CODE-1,5,1000\n",
        )
        .await;
    assert_eq!((s, b["added"].as_u64()), (200, Some(2)), "{b}");

    let before = writes();
    for (code, status, want) in [
        (None, 401, "code-required"),
        (Some(codes[0].as_str()), 410, "code-used-up"),
        (Some("NOPE-NOPE-NOPE"), 403, "code-unknown"),
        (Some("OLD-CODE-1"), 410, "code-expired"),
        (Some("!!"), 403, "code-unknown"),
    ] {
        let (s, b) = room.join(code).await;
        assert_eq!((s, kind(&b)), (status, want), "{code:?}: {b}");
    }
    assert_eq!(writes(), before, "a refused code wrote to the store");

    // Ten fans race for the last use of PROMO-2026 plus the two of codes[1]: three places.
    let addrs: Vec<String> = (0..10).map(|i| format!("198.51.100.{i}")).collect();
    let racers = (0..10).map(|i| {
        let code = if i % 2 == 0 { "PROMO-2026" } else { &codes[1] };
        room.join_from(&addrs[i], Some(code))
    });
    let results = join_all(racers).await;
    let won: Vec<u64> = results
        .iter()
        .filter_map(|(_, b)| b["queue_number"].as_u64())
        .collect();
    assert_eq!(won.len(), 3, "{results:?}");
    let (s, b) = room.join(Some("PROMO-2026")).await;
    assert_eq!((s, kind(&b)), (410, "code-used-up"));
    let (_, audit) = room.admin(Method::GET, "audit", String::new()).await;
    let actions: Vec<&str> = audit
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["action"].as_str())
        .collect();
    for a in ["set_access", "generate_codes", "import_codes"] {
        assert!(actions.contains(&a), "{a} not audited: {audit}");
    }

    // A closed event takes no new fan: the code's use is given back, not lost.
    let (s, b) = room.csv("codes/import", "LAST-ONE,1\n").await;
    assert_eq!((s, b["added"].as_u64()), (200, Some(1)), "{b}");
    assert_eq!(
        room.admin(Method::POST, "close", String::new()).await.0,
        200
    );
    let (s, b) = room.join(Some("LAST-ONE")).await;
    assert_eq!((s, b["queue_number"].clone()), (200, Value::Null), "{b}");
    let demo = EventId::parse("demo").expect("id");
    let cfg = Config::demo("demo", T0, "http://127.0.0.1:8081");
    let hasher = waiting_room::access::CodeHasher::new(cfg.join_hmac_key.expose().as_bytes());
    let hash = hasher.hash(&demo, "LASTONE");
    let probe = waiting_room::domain::VisitorId::random();
    let access = store.access().expect("access store");
    let left = access.spend_code(&demo, &hash, &probe, T0 * 1000).await;
    assert!(
        matches!(left, Ok(waiting_room::access::Spend::Spent(_))),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presale_code_admits_once_per_use_and_refuses_the_rest_without_a_write() {
    presale_code_admits_once_per_use_on(Arc::new(MemoryStore::new()), Box::new(|| None)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presale_code_admits_once_per_use_and_refuses_the_rest_without_a_write_on_redis() {
    let (server, store) = redis().await;
    let writes = redis_writes(server.url());
    assert!(writes().is_some());
    presale_code_admits_once_per_use_on(store, writes).await;
}

async fn revoked_code_frees_the_place_on(store: Arc<dyn QueueStore>) {
    let room = room(store).await;
    let codes = room.generate(2, 1).await;
    let (_, a) = room.join(Some(&codes[0])).await;
    let (_, b) = room.join(Some(&codes[1])).await;
    let (ta, tb) = (
        a["join_token"].as_str().expect("a"),
        b["join_token"].as_str().expect("b"),
    );
    assert_eq!(room.position(tb).await.1["ahead"].as_u64(), Some(1));

    let (s, r) = room
        .csv("codes/revoke", &format!("code\n{}\n", codes[0]))
        .await;
    assert_eq!(
        (s, r["revoked"].as_u64(), r["places_lost"].as_u64()),
        (200, Some(1), Some(1)),
        "{r}"
    );
    let (s, p) = room.position(ta).await;
    assert_eq!((s, kind(&p)), (410, "code-revoked"), "{p}");
    assert_eq!(
        room.position(tb).await.1["ahead"].as_u64(),
        Some(0),
        "the place ahead is freed"
    );
    // The join token alone does not bring the fan back, nor does the revoked code.
    let r = room
        .http
        .post(format!("{}/api/events/demo/join", room.root))
        .bearer_auth(ta)
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 410);
    assert_eq!(kind(&room.join(Some(&codes[0])).await.1), "code-unknown");
    let (_, audit) = room.admin(Method::GET, "audit", String::new()).await;
    assert!(audit.to_string().contains("revoke_codes"), "{audit}");

    // A fan the cursor has reached but who has not claimed yet is stopped too; a fan already
    // admitted keeps its admission (newcomer review: the invited fan still got a token).
    let more = room.generate(2, 1).await;
    let (_, c) = room.join(Some(&more[0])).await;
    let (_, d) = room.join(Some(&more[1])).await;
    let (tc, td) = (
        c["join_token"].as_str().expect("c"),
        d["join_token"].as_str().expect("d"),
    );
    room.admit().await;
    let admitted = room.admission_claims(td).await;
    let (s, r) = room
        .csv("codes/revoke", &format!("{}\n{}\n", more[0], more[1]))
        .await;
    assert_eq!((s, r["revoked"].as_u64()), (200, Some(2)), "{r}");
    let claim = |t: &str| {
        room.http
            .post(format!("{}/api/events/demo/admission", room.root))
            .bearer_auth(t.to_owned())
            .send()
    };
    let r = claim(tc).await.expect("send");
    let (s, b) = (
        r.status().as_u16(),
        r.json::<Value>().await.unwrap_or(Value::Null),
    );
    assert_eq!((s, kind(&b)), (410, "code-revoked"), "{b}");
    let again = room.admission_claims(td).await;
    assert_eq!(
        again["jti"], admitted["jti"],
        "the admitted fan keeps its admission"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_code_tells_the_queued_fan_and_frees_the_place() {
    revoked_code_frees_the_place_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_code_tells_the_queued_fan_and_frees_the_place_on_redis() {
    let (_server, store) = redis().await;
    revoked_code_frees_the_place_on(store).await;
}

async fn brute_force_on(store: Arc<dyn QueueStore>) {
    let room = room(store).await;
    let before = room.metrics().await;
    let codes = room.generate(1, 5).await;
    let mut statuses = Vec::new();
    for i in 0..13 {
        statuses.push(room.join(Some(&format!("GUESS-{i:04}"))).await.0);
    }
    // FAILURE_BURST (10) refusals are free, the next one starts the wait.
    assert_eq!(&statuses[..11], &[403; 11], "{statuses:?}");
    assert_eq!(&statuses[11..], &[429, 429], "{statuses:?}");
    // Another address is not slowed by this one's guesses.
    let (s, _) = room.join_from("203.0.113.9", Some(&codes[0])).await;
    assert_eq!(s, 200);
    // Limited before any store call: even the right code waits.
    let (s, b) = room.join(Some(&codes[0])).await;
    assert_eq!((s, kind(&b)), (429, "code-attempts-limited"), "{b}");

    // Per visitor: one identity guessing from a new address each time is limited all the same.
    let mut statuses = Vec::new();
    for i in 0..12 {
        let from = format!("198.18.0.{i}");
        let guess = format!("ID-GUESS-{i:04}");
        statuses.push(room.join_as("guesser", &from, &guess).await.0);
    }
    assert_eq!(&statuses[..11], &[403; 11], "{statuses:?}");
    assert_eq!(statuses[11], 429, "{statuses:?}");
    assert_eq!(
        room.join_as("guesser", "198.18.1.1", &codes[0]).await.0,
        429
    );
    assert_eq!(
        room.join_as("someone-else", "198.18.1.1", &codes[0])
            .await
            .0,
        200
    );
    let after = room.metrics().await;
    let count = |text: &str, reason: &str| {
        let line = format!("wr_code_failures_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0.0, |v| v.parse::<f64>().expect("n"))
    };
    assert!(
        count(&after, "code-unknown") - count(&before, "code-unknown") >= 10.0,
        "{after}"
    );
    assert!(
        count(&after, "limited") - count(&before, "limited") >= 3.0,
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_brute_force_is_limited_and_counted() {
    brute_force_on(Arc::new(MemoryStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_brute_force_is_limited_and_counted_on_redis() {
    let (_server, store) = redis().await;
    brute_force_on(store).await;
}

/// An invitation signed with `key` for event `aud`, fan `sub`, expiring at `exp` (epoch s).
fn invitation(key: &Signer, sub: &str, aud: &str, exp: i64, tier: Option<&str>) -> String {
    use jsonwebtoken::{encode, EncodingKey, Header};
    let claims = json!({"sub": sub, "aud": aud, "exp": exp, "tier": tier});
    let (alg, enc) = match key {
        Signer::Ed(sk) => {
            use ed25519_dalek::pkcs8::EncodePrivateKey;
            let pem = sk.to_pkcs8_pem(Default::default()).expect("pem");
            let enc = EncodingKey::from_ed_pem(pem.as_bytes()).expect("ed key");
            (jsonwebtoken::Algorithm::EdDSA, enc)
        }
        Signer::Hs(secret) => (
            jsonwebtoken::Algorithm::HS256,
            EncodingKey::from_secret(secret.as_bytes()),
        ),
    };
    encode(&Header::new(alg), &claims, &enc).expect("sign")
}

enum Signer {
    Ed(ed25519_dalek::SigningKey),
    Hs(String),
}

impl Signer {
    /// The body of `PUT …/invitation-key`.
    fn registration(&self) -> Value {
        match self {
            Signer::Ed(sk) => {
                use ed25519_dalek::pkcs8::EncodePublicKey;
                let pem = sk
                    .verifying_key()
                    .to_public_key_pem(Default::default())
                    .expect("pem");
                json!({"alg": "EdDSA", "public_key_pem": pem})
            }
            Signer::Hs(secret) => json!({"alg": "HS256", "secret": secret}),
        }
    }
}

impl Room {
    async fn join_invited(&self, token: Option<&str>) -> (u16, Value) {
        let mut rb = self
            .http
            .post(format!("{}/api/events/demo/join", self.root))
            .header("x-forwarded-for", "192.0.2.7");
        if let Some(t) = token {
            rb = rb.header("x-invitation", t);
        }
        let r = rb.send().await.expect("send");
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
}

async fn invitation_one_place_per_key_on(store: Arc<dyn QueueStore>, key: Signer) {
    let room = room(store).await;
    let mode = json!({"mode": "invitation"}).to_string();
    assert_eq!(room.admin(Method::PUT, "access", mode).await.0, 200);
    let exp = T0 + 3600;
    let alice = invitation(&key, "promoter-fan-17", "demo", exp, None);
    let (s, b) = room.join_invited(Some(&alice)).await;
    assert_eq!((s, kind(&b)), (409, "invitation-key-missing"), "{b}");
    let (s, b) = room
        .admin(
            Method::PUT,
            "invitation-key",
            key.registration().to_string(),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let bad = json!({"alg": "HS256", "secret": "short"}).to_string();
    let (s, b) = room.admin(Method::PUT, "invitation-key", bad).await;
    assert_eq!((s, kind(&b)), (422, "invalid-codes"), "{b}");

    let (s, first) = room.join_invited(Some(&alice)).await;
    assert_eq!(s, 200, "{first}");
    let (_, bob) = room
        .join_invited(Some(&invitation(&key, "fan-2", "demo", exp, None)))
        .await;
    // The same invitation again, and a fresh one for the same key: the same place.
    let again = invitation(&key, "promoter-fan-17", "demo", exp + 60, Some("vip"));
    for token in [&alice, &alice, &again] {
        let (s, b) = room.join_invited(Some(token)).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["visitor_id"], first["visitor_id"]);
        assert_eq!(b["queue_number"], first["queue_number"]);
    }
    assert_eq!(bob["queue_number"].as_u64(), Some(2), "{bob}");
    // The tier of the latest invitation reaches the admission token; a fan without one has none.
    room.admit().await;
    let token = |b: &Value| b["join_token"].as_str().expect("join token").to_owned();
    let vip = room.admission_claims(&token(&first)).await;
    assert_eq!(vip["tier"].as_str(), Some("vip"), "{vip}");
    let plain = room.admission_claims(&token(&bob)).await;
    assert!(plain.get("tier").is_none(), "{plain}");

    let forger = Signer::Hs("someone-else-entirely-0123456789-0123".into());
    for (token, status, want) in [
        (None, 401, "invitation-required"),
        (
            Some(invitation(&key, "x", "demo", T0, None)),
            410,
            "invitation-expired",
        ),
        (
            Some(invitation(&key, "x", "other", exp, None)),
            403,
            "invitation-other-event",
        ),
        (
            Some(invitation(&forger, "x", "demo", exp, None)),
            403,
            "invitation-invalid",
        ),
        (Some("not-a-jwt".to_owned()), 403, "invitation-invalid"),
    ] {
        let (s, b) = room.join_invited(token.as_deref()).await;
        assert_eq!((s, kind(&b)), (status, want), "{b}");
    }
    let (_, audit) = room.admin(Method::GET, "audit", String::new()).await;
    let text = audit.to_string();
    assert!(text.contains("set_invitation_key"), "{audit}");
    if let Signer::Hs(secret) = &key {
        assert!(
            !text.contains(secret.as_str()),
            "the secret is never audited"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invitation_gives_one_place_per_key() {
    let key = Signer::Ed(ed25519_dalek::SigningKey::from_bytes(&[7; 32]));
    invitation_one_place_per_key_on(Arc::new(MemoryStore::new()), key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invitation_gives_one_place_per_key_on_redis() {
    let (_server, store) = redis().await;
    let key = Signer::Hs("promoter-secret-0123456789-0123456789".into());
    invitation_one_place_per_key_on(store, key).await;
}

/// On a Redis Cluster every access key carries the event's `{event}` tag, so `access.lua`'s
/// keys (codes, the per-code visitor sets, revoked, tiers) share one slot: generate, spend,
/// race, revoke and invitations run there unchanged (a key outside the slot would be refused
/// with `CROSSSLOT`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_codes_and_invitations_work_on_a_redis_cluster() {
    let cluster = sale_common::testsupport::RedisCluster::start();
    let urls = cluster.urls();
    let timeout = std::time::Duration::from_secs(2);
    // Each part starts from an empty cluster (FLUSHALL on every master; replicas refuse it).
    let fresh = || async {
        for url in &urls {
            let client = redis::Client::open(url.as_str()).expect("client");
            let mut con = client.get_connection().expect("connect");
            let _: redis::RedisResult<()> = redis::cmd("FLUSHALL").query(&mut con);
        }
        let store = RedisStore::connect_cluster(&urls, timeout)
            .await
            .expect("cluster");
        Arc::new(store) as Arc<dyn QueueStore>
    };
    presale_code_admits_once_per_use_on(fresh().await, Box::new(|| None)).await;
    revoked_code_frees_the_place_on(fresh().await).await;
    let key = Signer::Hs("promoter-secret-0123456789-0123456789".into());
    invitation_one_place_per_key_on(fresh().await, key).await;
}
