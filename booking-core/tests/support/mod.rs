//! Test harness: a real gateway-sim, a tiny JWKS server and the booking core, each on a
//! 127.0.0.1:0 listener in-process, sharing one ManualClock; plus an Ed25519 token signer. The
//! booking database is SQLite or a fresh database on the test binary's shared PostgreSQL server
//! ([`Backend`]); [`on_both!`] runs one test body on both (the conformance suite).
#![allow(dead_code)]

use std::sync::Arc;

use axum::routing::get;
use axum::Json;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use booking_core::{AppState, Config, Venue};
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::SigningKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use sale_common::{Clock, ManualClock, Secret};
use serde_json::{json, Value};

pub const SHOW: &str = "demo";
pub const KID: &str = "k1";
pub const GW_SECRET: &str = "gw-secret";
pub const ADMIN: &str = "admin-demo-token";

/// Signs admission tokens like the waiting room does.
#[derive(Clone)]
pub struct Signer {
    pub key: SigningKey,
    enc: EncodingKey,
}

impl Signer {
    pub fn new(seed: u8) -> Self {
        let key = SigningKey::from_bytes(&[seed; 32]);
        let der = key.to_pkcs8_der().unwrap();
        let enc = EncodingKey::from_ed_der(der.as_bytes());
        Self { key, enc }
    }
    pub fn x(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.key.verifying_key().as_bytes())
    }
    pub fn sign(&self, claims: &Value) -> String {
        let mut h = Header::new(Algorithm::EdDSA);
        h.kid = Some(KID.into());
        jsonwebtoken::encode(&h, claims, &self.enc).unwrap()
    }
}

/// Standard admission claims at `now_s`, valid 10 minutes.
pub fn claims(sub: &str, event: &str, jti: &str, now_s: i64) -> Value {
    json!({"iss": "waiting-room", "aud": "booking-core", "sub": sub, "event": event, "jti": jti,
           "iat": now_s, "nbf": now_s, "exp": now_s + 600})
}

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// A fresh database URL for one test: a SQLite file in `dir` (so a second "process" can
    /// open the same database), or a new database on the shared PostgreSQL server.
    pub fn fresh_url(self, dir: &std::path::Path) -> String {
        match self {
            Backend::Sqlite => format!("sqlite://{}?mode=rwc", dir.join("booking.db").display()),
            Backend::Postgres => {
                sale_common::testsupport::PostgresServer::shared().create_database()
            }
        }
    }
}

/// Runs `async fn $name(b: Backend)` as two tests, `$name::sqlite` and `$name::postgres`.
#[macro_export]
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(super::support::Backend::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(super::support::Backend::Postgres).await
            }
        }
    )*};
}

pub struct Harness {
    pub db_dir: Option<std::sync::Arc<tempfile::TempDir>>,
    pub base: String,
    pub mail: std::sync::Arc<tempfile::TempDir>,
    pub gw: String,
    pub clock: ManualClock,
    pub state: AppState,
    pub http: reqwest::Client,
    pub signer: Signer,
}

async fn bind() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    (l, url)
}

impl Harness {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Self {
        Self::on_with(Backend::Sqlite, tweak).await
    }

    pub async fn on(b: Backend) -> Self {
        Self::on_with(b, |_| {}).await
    }

    pub async fn on_with(b: Backend, tweak: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = b.fresh_url(dir.path());
        let mut h = Self::start_full(move |c| {
            c.database_url = url;
            tweak(c)
        })
        .await;
        h.db_dir = Some(std::sync::Arc::new(dir));
        h
    }

    async fn start_full(tweak: impl FnOnce(&mut Config)) -> Self {
        let now = sale_common::SystemClock.now_ms();
        let clock = ManualClock::new(now);
        let signer = Signer::new(7);
        // gateway-sim
        let (gl, gw) = bind().await;
        let mut gc = gateway_sim::Config::demo(gw.clone(), Secret::new(GW_SECRET));
        gc.clock = Arc::new(clock.clone());
        gc.execute_timeout_sleep = std::time::Duration::from_secs(3);
        tokio::spawn(gateway_sim::serve(gl, gc, std::future::pending()));
        // JWKS
        let (jl, jurl) = bind().await;
        let jwks = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": signer.x(), "kid": KID, "alg": "EdDSA", "use": "sig"}]});
        let app = axum::Router::new().route(
            "/.well-known/jwks.json",
            get(move || async move { Json(jwks) }),
        );
        tokio::spawn(async move { axum::serve(jl, app).await });
        // booking core
        let (bl, base) = bind().await;
        let mut c = Config::demo(
            SHOW,
            format!("{jurl}/.well-known/jwks.json"),
            gw.clone(),
            Secret::new(GW_SECRET),
            base.clone(),
        );
        c.clock = Arc::new(clock.clone());
        c.reconcile_interval_secs = 0;
        c.outbox_interval_ms = 0;
        c.statistics_interval_ms = 0;
        let mail = std::sync::Arc::new(tempfile::tempdir().unwrap());
        c.mail_dir = mail.path().to_owned();
        c.gateway_timeout = std::time::Duration::from_secs(1);
        tweak(&mut c);
        let state = AppState::build(c).await.unwrap();
        tokio::spawn(booking_core::serve_state(
            bl,
            state.clone(),
            std::future::pending(),
        ));
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Self {
            db_dir: None,
            base,
            mail,
            gw,
            clock,
            state,
            http,
            signer,
        }
    }

    /// Another booking-core "process" on the same database and gateway (restart, two
    /// reconcilers, ten token users): same config, a new `AppState`, not served.
    pub async fn another_state(&self) -> AppState {
        AppState::build((*self.state.config).clone()).await.unwrap()
    }

    /// Gateway fault patch (global).
    pub async fn faults(&self, patch: Value) {
        let r = self
            .http
            .post(format!("{}/v1/faults", self.gw))
            .json(&patch)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    /// Gateway fault patch for one payment.
    pub async fn payment_faults(&self, pid: &str, patch: Value) {
        let r = self
            .http
            .post(format!("{}/v1/faults/payments/{pid}", self.gw))
            .json(&patch)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }

    /// Counts rows of a SQL `SELECT COUNT(*) …` with `$1` bound to `arg`.
    pub async fn count(&self, sql: &str, arg: &str) -> i64 {
        sqlx::query_scalar(sql)
            .bind(arg)
            .fetch_one(&self.state.db)
            .await
            .unwrap()
    }

    /// Waits (at most 5 s) until `sql` with `$1` = `arg` counts `want` rows (webhooks arrive
    /// on their own time).
    pub async fn wait_count(&self, sql: &str, arg: &str, want: i64) {
        for _ in 0..100 {
            if self.count(sql, arg).await == want {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("{sql} with {arg} never reached {want}");
    }

    /// Emails written to the mail directory.
    pub fn mail_files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.mail.path())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".eml"))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    pub fn now_s(&self) -> i64 {
        self.clock.now_secs()
    }

    /// Another session's transaction that has run `sql` (a `… FOR UPDATE` or `LOCK TABLE …`)
    /// with `binds` and keeps its locks until it is rolled back or dropped.
    pub async fn locking(
        &self,
        sql: &str,
        binds: &[&str],
    ) -> sqlx::Transaction<'static, sqlx::Any> {
        let mut tx = booking_core::db::begin_write(&self.state.db).await.unwrap();
        let mut q = sqlx::query(sql);
        for b in binds {
            q = q.bind(*b);
        }
        q.execute(&mut *tx).await.unwrap();
        tx
    }

    /// A valid admission token for `sub` on the demo show.
    pub fn token(&self, sub: &str) -> String {
        self.signer
            .sign(&claims(sub, SHOW, &format!("jti-{sub}"), self.now_s()))
    }

    pub async fn hold(&self, token: &str, key: &str, seats: &[&str]) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/api/shows/{SHOW}/holds", self.base))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&json!({"seats": seats}))
            .send()
            .await
            .unwrap();
        let st = r.status().as_u16();
        (st, r.json().await.unwrap_or(Value::Null))
    }

    /// Every payment the gateway simulator holds (`GET /v1/sim/payments`).
    pub async fn sim_payments(&self) -> Vec<Value> {
        let all: Value = self
            .http
            .get(format!("{}/v1/sim/payments", self.gw))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        all.as_array().cloned().unwrap_or_default()
    }

    pub async fn stats(&self) -> Value {
        self.admin_get(&format!("/admin/shows/{SHOW}/stats")).await
    }

    /// `GET {path}` with the admin token: the JSON answer.
    pub async fn admin_get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub async fn seat_status(&self, seat: &str) -> String {
        let v: Value = self
            .http
            .get(format!("{}/api/shows/{SHOW}/seats", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["seats"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == seat)
            .unwrap()["status"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Small venue helper for tweak closures.
    pub fn small_venue(c: &mut Config, seats: u32) {
        c.shows[0].venue = Venue::small(seats);
    }

    /// [`Harness::small_venue`] of `seats` seats and a `FLOOR` pool of `places` at 3,000 cents.
    pub fn venue_with_floor(c: &mut Config, seats: u32, places: u32) {
        Self::small_venue(c, seats);
        c.shows[0].venue.pools.push(booking_core::PoolSpec {
            id: "FLOOR".into(),
            price_cents: 3_000,
            capacity: places,
        });
    }
}

impl Harness {
    /// A hold request with any body (pool, best available, channel) and extra headers.
    pub async fn hold_with(
        &self,
        token: &str,
        key: &str,
        body: Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}/api/shows/{SHOW}/holds", self.base))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let st = r.status().as_u16();
        (st, r.json().await.unwrap_or(Value::Null))
    }

    /// `POST /api/holds/{hold}/pay` with `token`, no body: the answer
    /// (`{payment_id, checkout_url, attempt}` or a problem).
    pub async fn pay(&self, token: &str, hold: &str) -> Value {
        self.http
            .post(format!("{}/api/holds/{hold}/pay", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Creates the payment of `hold` and clicks Pay at the gateway; returns (payment id, the
    /// callback URL the browser is sent to).
    pub async fn approve(&self, token: &str, hold: &str) -> (String, String) {
        let p = self.pay(token, hold).await;
        let pid = p["payment_id"].as_str().unwrap().to_owned();
        let r = self
            .http
            .post(format!("{}/pay", p["checkout_url"].as_str().unwrap()))
            .send()
            .await
            .unwrap();
        (pid, r.headers()["location"].to_str().unwrap().to_owned())
    }

    /// Holds `seat` for `fan`, pays and follows the callback: the hold is PAID. Returns its id.
    pub async fn buy(&self, fan: &str, seat: &str) -> String {
        let t = self.token(fan);
        let (st, b) = self.hold(&t, &format!("buy-{seat}"), &[seat]).await;
        assert_eq!(st, 201, "{b}");
        let hold = b["hold_id"].as_str().unwrap().to_owned();
        let (_, back) = self.approve(&t, &hold).await;
        let r = self.http.get(back).send().await.unwrap();
        assert!(r.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/confirmation.html"));
        hold
    }

    /// `fan` buys `qty` places of `pool` (hold, pay, callback), one second after the previous
    /// purchase; the booking id.
    pub async fn buy_places(&self, fan: &str, pool: &str, qty: u32) -> String {
        self.clock.advance_ms(1_000);
        let t = self.token(fan);
        let body = json!({"pool": pool, "quantity": qty});
        let (st, b) = self.hold_with(&t, &format!("buy-{fan}"), body, &[]).await;
        assert_eq!(st, 201, "{b}");
        let hold = b["hold_id"].as_str().unwrap().to_owned();
        let (_, back) = self.approve(&t, &hold).await;
        self.http.get(back).send().await.unwrap();
        self.booking_of(&hold).await
    }

    /// The booking id of paid hold `hold`.
    pub async fn booking_of(&self, hold: &str) -> String {
        sqlx::query_scalar("SELECT id FROM bookings WHERE hold_id = $1")
            .bind(hold)
            .fetch_one(&self.state.db)
            .await
            .unwrap()
    }

    /// `GET {path}` as `fan`, the JSON answer.
    pub async fn fan_get(&self, fan: &str, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(self.token(fan))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `GET /api/holds/{hold}` as `fan`.
    pub async fn hold_view(&self, fan: &str, hold: &str) -> Value {
        self.fan_get(fan, &format!("/api/holds/{hold}")).await
    }

    /// `DELETE /api/holds/{hold}` as `fan` (the fan cancels): the status.
    pub async fn cancel_hold(&self, fan: &str, hold: &Value) -> u16 {
        let id = hold.as_str().unwrap();
        self.http
            .delete(format!("{}/api/holds/{id}", self.base))
            .bearer_auth(self.token(fan))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// An operator's `POST /admin/bookings/{booking}/cancel` with `body`: (status, answer).
    pub async fn cancel_booking(&self, booking: &str, body: Value) -> (u16, Value) {
        self.admin_post(&format!("/admin/bookings/{booking}/cancel"), body)
            .await
    }

    /// `POST {path}` with the admin token and `body`: (status, answer).
    pub async fn admin_post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
            .await
            .unwrap();
        let st = r.status().as_u16();
        (st, r.json().await.unwrap_or(Value::Null))
    }

    /// The process's Prometheus text.
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// A PostgreSQL plan run by `EXPLAIN (ANALYZE)`, as text (the Any driver cannot decode the
/// JSON format): its lines, each node's actual rows (`(actual time=a..b rows=N loops=1)`;
/// nodes never executed have none) and the rows read and dropped (`Rows Removed by Filter`).
pub struct Analysed {
    /// The plan's lines.
    pub plan: Vec<String>,
    /// Each executed node's actual rows.
    pub read: Vec<i64>,
    /// Rows dropped by filters, summed.
    pub dropped: i64,
}

/// Runs `EXPLAIN (ANALYZE, COSTS OFF) {sql}` on PostgreSQL (`sql` with its values inlined).
pub async fn analyse(db: &booking_core::db::Db, sql: &str) -> Analysed {
    let plan: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, COSTS OFF) {sql}"))
        .fetch_all(db)
        .await
        .unwrap();
    let read: Vec<i64> = plan
        .iter()
        .filter_map(|l| l.split("(actual ").nth(1))
        .filter_map(|a| a.split("rows=").nth(1))
        .filter_map(|r| r.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(!read.is_empty(), "an analysed plan: {plan:?}");
    let dropped = plan
        .iter()
        .filter_map(|l| l.split("Rows Removed by Filter: ").nth(1))
        .filter_map(|n| n.trim().parse::<i64>().ok())
        .sum();
    Analysed {
        plan,
        read,
        dropped,
    }
}

/// Polls until a session of `db`'s database waits for a row lock (`pg_stat_activity`), or
/// `done()` says what it waits for finished without waiting; no sleep, only a yield between
/// reads.
pub async fn until_lock_wait(db: &booking_core::db::Db, done: impl Fn() -> bool) {
    while !done() {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND datname = current_database()",
        )
        .fetch_one(db)
        .await
        .unwrap();
        if waiting > 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
}
