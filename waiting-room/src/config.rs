//! Typed configuration (STYLE.md rule 7), read from a JSON file by the binary and validated
//! before any port is bound. Secrets are [`Secret`]s and have no defaults. The listen address is
//! not here: `serve` takes an already-bound listener.

use crate::closedloop::ClosedLoop;
use crate::domain::{EventId, EventMeta, EventState};
use sale_common::Secret;
use serde::Deserialize;
use std::net::IpAddr;
use std::path::PathBuf;

mod rules;

pub use rules::MIN_TOKEN_CHARS;

/// One event as configured at start-up (created in the store unless it exists already).
#[derive(Debug, Clone, Deserialize)]
pub struct EventConfig {
    /// Event id, `[a-z0-9-]{1,40}`.
    pub id: EventId,
    /// Opening time, Unix epoch **seconds**.
    pub opens_at: i64,
    /// Admissions per **second**, > 0.
    pub admit_rate: f64,
    /// Most concurrently admitted sessions.
    pub max_active: u64,
    /// Admission lifetime, **seconds** (API.md default 600).
    #[serde(default = "default_ttl")]
    pub admission_ttl_secs: u64,
    /// The booking core's public base URL.
    pub booking_url: String,
    /// Admission that follows the booking core's load (default off; [`ClosedLoop`]).
    #[serde(default)]
    pub closed_loop: Option<ClosedLoop>,
    /// What the fan waits for, shown on the waiting page (`GET /api/events/{event}/about`):
    /// the event's display name, 1 to 120 characters (unset: none shown).
    #[serde(default)]
    pub name: Option<String>,
    /// The venue's name, 1 to 120 characters (unset: none shown).
    #[serde(default)]
    pub venue: Option<String>,
    /// When the event itself takes place, Unix epoch **seconds** (unset: no date shown).
    #[serde(default)]
    pub starts_at: Option<i64>,
    /// The event's own IANA time zone (DECISIONS: waiting-room events have their own), in which
    /// the waiting page writes the event's date and the opening's clock time (default `UTC`).
    #[serde(default = "default_time_zone")]
    pub time_zone: String,
}

fn default_time_zone() -> String {
    "UTC".into()
}

impl EventConfig {
    /// The store record for this event, in `prequeue` state.
    pub fn meta(&self) -> EventMeta {
        EventMeta {
            id: self.id.clone(),
            state: EventState::Prequeue,
            opens_at: self.opens_at,
            admit_rate: self.admit_rate,
            max_active: self.max_active,
            admission_ttl_secs: self.admission_ttl_secs,
            booking_url: self.booking_url.clone(),
            pow_bits: 0,
            stock_wait: 0,
            time_zone: self.time_zone.clone(),
        }
    }
}

/// Where the queue lives.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StoreConfig {
    /// In-process store (single node).
    Memory,
    /// One Redis server at `url` (`redis://host:port/`).
    Redis {
        /// Connection URL.
        url: String,
    },
    /// A Redis Cluster reached through `urls` (`redis://host:port`, one or more of its nodes;
    /// the client discovers the rest and follows slot moves and failovers).
    RedisCluster {
        /// Seed nodes.
        urls: Vec<String>,
    },
}

fn de_secret<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Secret, D::Error> {
    String::deserialize(d).map(Secret::new)
}

fn de_opt_secret<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    Option::<String>::deserialize(d).map(|o| o.map(Secret::new))
}

fn de_secrets<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Secret>, D::Error> {
    Vec::<String>::deserialize(d).map(|v| v.into_iter().map(Secret::new).collect())
}

fn default_report_sample() -> u64 {
    10
}
fn default_ttl() -> u64 {
    600
}
fn default_issuer() -> String {
    "waiting-room".into()
}
fn default_audience() -> String {
    "booking-core".into()
}
fn default_one() -> u64 {
    1
}
fn default_poll() -> u64 {
    2000
}
fn default_join_rate() -> u64 {
    5
}
fn default_join_burst() -> u32 {
    10
}
fn default_tick() -> u64 {
    100
}
fn default_grace() -> u64 {
    60
}
fn default_join_ttl() -> u64 {
    86_400
}
fn default_store_timeout() -> u64 {
    2000
}
fn default_heartbeat() -> u64 {
    10_000
}
fn default_silence() -> u64 {
    30_000
}
fn default_rejoin() -> u64 {
    120
}
fn default_window_secs() -> u64 {
    60
}
fn default_window_min() -> u64 {
    100
}
fn default_scan_limit() -> u64 {
    10_000
}
fn default_fan_rate() -> u64 {
    2
}
fn default_fan_burst() -> u32 {
    10
}
fn default_status_throttle() -> u64 {
    1000
}
fn default_s3_prefix() -> String {
    "status/".into()
}
fn default_drain() -> u64 {
    sale_common::shutdown::DEFAULT_DRAIN_SECS
}
fn default_lame_duck() -> u64 {
    sale_common::shutdown::DEFAULT_LAME_DUCK_MS
}
fn default_replication_timeout() -> u64 {
    500
}
fn default_skew() -> u64 {
    DEFAULT_MAX_CLOCK_SKEW_SECS
}

/// Default of [`Config::max_clock_skew_secs`]: the skew between services' clocks the tokens
/// tolerate, **seconds** (case W11 asks for at least ±30 s).
pub const DEFAULT_MAX_CLOCK_SKEW_SECS: u64 = 30;

/// Waiting-room configuration.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    /// Events created at start-up.
    #[serde(default)]
    pub events: Vec<EventConfig>,
    /// Queue store backend.
    pub store: StoreConfig,
    /// Bearer token of the admin API (compared in constant time).
    #[serde(deserialize_with = "de_secret")]
    pub admin_token: Secret,
    /// Ed25519 private key, PKCS#8 PEM. `None`: a fresh key is generated at start (one node).
    #[serde(default, deserialize_with = "de_opt_secret")]
    pub signing_key_pem: Option<Secret>,
    /// HMAC key of join tokens (HS256). Every node of one deployment shares it.
    #[serde(deserialize_with = "de_secret")]
    pub join_hmac_key: Secret,
    /// Earlier join-token HMAC keys, still accepted (verify only) until their tokens expire
    /// (`join_token_ttl_secs` after the rotation). Verified identities map to visitor ids with
    /// the current key, so rotate between sales when `identity_header` is used.
    #[serde(default, deserialize_with = "de_secrets")]
    pub join_hmac_previous_keys: Vec<Secret>,
    /// `iss` of admission tokens.
    #[serde(default = "default_issuer")]
    pub issuer: String,
    /// `aud` of admission tokens.
    #[serde(default = "default_audience")]
    pub audience: String,
    /// Audiences of other origins guarded by the edge gate (default none; the booking core's
    /// `gate_audiences` lists the same): each is added to every admission token's `aud`, which
    /// then becomes an array (RFC 7519 §4.1.3; DECISIONS: each guarded origin has its own `aud`).
    #[serde(default)]
    pub gate_audiences: Vec<String>,
    /// Directory of the fan pages, served at `/`.
    #[serde(default)]
    pub static_dir: Option<PathBuf>,
    /// `max-age` of the status document, **seconds** (API.md: 1).
    #[serde(default = "default_one")]
    pub status_max_age_secs: u64,
    /// Poll interval advertised to fans, **milliseconds**.
    #[serde(default = "default_poll")]
    pub poll_interval_ms: u64,
    /// Joins per **second** per client IP (tower_governor).
    #[serde(default = "default_join_rate")]
    pub join_rate_per_sec: u64,
    /// Join burst per client IP.
    #[serde(default = "default_join_burst")]
    pub join_burst: u32,
    /// Proxies whose `X-Forwarded-For` is believed (case W03).
    #[serde(default)]
    pub trusted_proxies: Vec<IpAddr>,
    /// Admitter tick, **milliseconds**.
    #[serde(default = "default_tick")]
    pub tick_ms: u64,
    /// How long an invitation (cursor passed, not yet claimed) holds a `max_active` slot,
    /// **seconds**.
    #[serde(default = "default_grace")]
    pub invite_grace_secs: u64,
    /// Join-token lifetime, **seconds**.
    #[serde(default = "default_join_ttl")]
    pub join_token_ttl_secs: u64,
    /// Bound on every store call, **milliseconds**; past it the request gets 503.
    #[serde(default = "default_store_timeout")]
    pub store_timeout_ms: u64,
    /// Heartbeat interval advertised to fans in the ready window, **milliseconds**.
    #[serde(default = "default_heartbeat")]
    pub heartbeat_interval_ms: u64,
    /// A fan in the ready window silent for longer than this is skipped when the cursor reaches
    /// it, **milliseconds** (default 3 heartbeat intervals).
    #[serde(default = "default_silence")]
    pub silence_grace_ms: u64,
    /// A skipped fan who comes back within this keeps the place, **seconds**.
    #[serde(default = "default_rejoin")]
    pub rejoin_grace_secs: u64,
    /// The ready window covers this many seconds of admissions at the admit rate, **seconds**.
    #[serde(default = "default_window_secs")]
    pub ready_window_secs: u64,
    /// The ready window covers at least this many places.
    #[serde(default = "default_window_min")]
    pub ready_window_min: u64,
    /// Most queue numbers the cursor examines per tick (bounds each store step).
    #[serde(default = "default_scan_limit")]
    pub scan_limit: u64,
    /// Heartbeats and admission claims per **second** per client IP (each its own limiter).
    #[serde(default = "default_fan_rate")]
    pub fan_rate_per_sec: u64,
    /// Heartbeat / claim burst per client IP.
    #[serde(default = "default_fan_burst")]
    pub fan_burst: u32,
    /// Bearer token of the service-to-service API (`/internal/...`, the booking core).
    /// `None` disables that API.
    #[serde(default, deserialize_with = "de_opt_secret")]
    pub service_token: Option<Secret>,
    /// Header carrying a verified identity set by a trusted upstream (one place per identity);
    /// honoured only from `trusted_proxies`.
    #[serde(default)]
    pub identity_header: Option<String>,
    /// HS256 key shared with a login service that signs `X-Identity-Token` (one place per
    /// identity from any peer; `identity` module). At least 32 bytes; `None` ignores the header.
    #[serde(default, deserialize_with = "de_opt_secret")]
    pub identity_token_key: Option<Secret>,
    /// Directory of Ed25519 PKCS#8 PEM keys (`active.pem`, `next.pem`, `retired-*.pem`; see
    /// `keys`). Takes precedence over `signing_key_pem`; re-read every few seconds.
    #[serde(default)]
    pub signing_key_dir: Option<PathBuf>,
    /// Directory the status documents are published to as `{event}.json` (temp file + rename),
    /// for a static server or CDN origin; `None`: not written (still served from memory).
    #[serde(default)]
    pub status_dir: Option<PathBuf>,
    /// At most one periodic status publish per this many **milliseconds** across every node
    /// (a `SET NX PX` latch; seed 000 used 2 s); state transitions publish at once.
    #[serde(default = "default_status_throttle")]
    pub status_throttle_ms: u64,
    /// S3 bucket the status documents are published to (`None`: no S3). Endpoint, region and
    /// credentials come from the standard AWS configuration (`AWS_ENDPOINT_URL`, …).
    #[serde(default)]
    pub s3_bucket: Option<String>,
    /// Key prefix of the status objects: `{s3_prefix}{event}.json` (default `status/`).
    #[serde(default = "default_s3_prefix")]
    pub s3_prefix: String,
    /// On SIGTERM/SIGINT, how long requests in flight may take before the remaining connections
    /// are closed, **seconds** (case W13).
    #[serde(default = "default_drain")]
    pub drain_secs: u64,
    /// On SIGTERM/SIGINT, how long the node answers as a lame duck before it stops accepting,
    /// **milliseconds** (default 1000; `sale_common::shutdown`): every answer carries
    /// `Connection: close` and `/readyz` is 503, so no keep-alive request is dropped.
    #[serde(default = "default_lame_duck")]
    pub lame_duck_ms: u64,
    /// How often each event's sale report takes a sample, **seconds** (1–60, default 10;
    /// `report` module, API.md "Sale report"). Also the resolution of its time in queue.
    #[serde(default = "default_report_sample")]
    pub report_sample_secs: u64,
    /// Largest clock difference between this service and any booking door, **seconds** (case
    /// W11, DECISIONS "Tokens, capacity and clocks"). Admission tokens carry
    /// `nbf = iat - max_clock_skew_secs` (a door whose clock is behind accepts a fresh token),
    /// and a `max_active` slot is freed only at `exp + max_clock_skew_secs` (a door whose clock
    /// is behind may accept the token until then; case W10). Published in
    /// `/.well-known/admission-policy.json`; the booking door refuses to start when its own value
    /// differs.
    #[serde(default = "default_skew")]
    pub max_clock_skew_secs: u64,
    /// Replicas that must confirm a join, a claim and the opening shuffle before the answer
    /// (Redis `WAIT`, issue 11 item 5: a failover then loses no place anyone was told). `None`:
    /// 1 for a Redis Cluster (each master has a replica), 0 for one server or memory.
    #[serde(default)]
    pub store_min_replicas: Option<u32>,
    /// The longest wait for those replicas, **milliseconds** (default 500); past it the call
    /// answers 503 + `Retry-After` and hands out nothing.
    #[serde(default = "default_replication_timeout")]
    pub store_replication_timeout_ms: u64,
    /// Proof-of-work failures from one client address (IPv6: its /64) within
    /// `pow_failure_window_secs` after which its joins go to the shadow line (issue 15 item 2;
    /// default 5, 0 = never). Counted per node, like the rate limits.
    #[serde(default = "default_shadow_after")]
    pub shadow_after_pow_failures: u32,
    /// The window of those failures, **seconds** (default 600).
    #[serde(default = "default_pow_failure_window")]
    pub pow_failure_window_secs: u64,
}

fn default_shadow_after() -> u32 {
    5
}

fn default_pow_failure_window() -> u64 {
    600
}

impl Config {
    /// The replication rule of the configured store ([`Config::store_min_replicas`]).
    pub fn durability(&self) -> crate::store::redis::Durability {
        let default = u32::from(matches!(self.store, StoreConfig::RedisCluster { .. }));
        crate::store::redis::Durability {
            min_replicas: self.store_min_replicas.unwrap_or(default),
            timeout_ms: self.store_replication_timeout_ms,
        }
    }
}

impl Config {
    /// A demo/test configuration: one event `id` opening at `opens_at` (epoch s) with admit
    /// rate 50/s and `max_active` 500, in-memory store, generated signing key, fixed demo secrets
    /// (`admin_token` = "demo-admin-token"). Never use for a real sale.
    pub fn demo(id: &str, opens_at: i64, booking_url: &str) -> Self {
        let event = EventConfig {
            id: EventId::parse(id).unwrap_or_else(|| EventId::parse("demo").expect("valid id")),
            opens_at,
            admit_rate: 50.0,
            max_active: 500,
            admission_ttl_secs: default_ttl(),
            booking_url: booking_url.to_owned(),
            closed_loop: None,
            name: None,
            venue: None,
            starts_at: None,
            time_zone: default_time_zone(),
        };
        Self {
            events: vec![event],
            store: StoreConfig::Memory,
            admin_token: Secret::new("demo-admin-token"),
            signing_key_pem: None,
            join_hmac_key: Secret::new("demo-join-hmac-key-change-me-0123456789"),
            join_hmac_previous_keys: Vec::new(),
            issuer: default_issuer(),
            audience: default_audience(),
            gate_audiences: Vec::new(),
            static_dir: None,
            status_max_age_secs: 1,
            poll_interval_ms: default_poll(),
            join_rate_per_sec: 1000,
            join_burst: 1000,
            trusted_proxies: Vec::new(),
            tick_ms: default_tick(),
            invite_grace_secs: default_grace(),
            join_token_ttl_secs: default_join_ttl(),
            store_timeout_ms: default_store_timeout(),
            heartbeat_interval_ms: default_heartbeat(),
            silence_grace_ms: default_silence(),
            rejoin_grace_secs: default_rejoin(),
            ready_window_secs: default_window_secs(),
            ready_window_min: default_window_min(),
            scan_limit: default_scan_limit(),
            fan_rate_per_sec: 1000,
            fan_burst: 1000,
            service_token: Some(Secret::new("demo-service-token")),
            identity_header: None,
            identity_token_key: None,
            signing_key_dir: None,
            status_dir: None,
            status_throttle_ms: default_status_throttle(),
            s3_bucket: None,
            s3_prefix: default_s3_prefix(),
            drain_secs: default_drain(),
            lame_duck_ms: default_lame_duck(),
            report_sample_secs: default_report_sample(),
            max_clock_skew_secs: default_skew(),
            store_min_replicas: None,
            store_replication_timeout_ms: default_replication_timeout(),
            shadow_after_pow_failures: default_shadow_after(),
            pow_failure_window_secs: default_pow_failure_window(),
        }
    }

    /// The liveness rules for an event admitting `admit_rate` per second: the ready window is
    /// `max(ready_window_min, admit_rate × ready_window_secs)` places.
    pub fn liveness(&self, admit_rate: f64) -> crate::domain::Liveness {
        self.liveness_rules().at_rate(admit_rate)
    }

    /// The events' closed loops ([`crate::closedloop::run`]): each read from its `load_urls`, or
    /// its `booking_url` when none are listed.
    pub fn closed_loops(&self) -> Vec<crate::closedloop::EventLoop> {
        self.events
            .iter()
            .filter_map(|e| {
                let cfg = e.closed_loop.clone()?;
                let urls = if cfg.load_urls.is_empty() {
                    vec![e.booking_url.clone()]
                } else {
                    cfg.load_urls.clone()
                };
                Some(crate::closedloop::EventLoop {
                    event: e.id.clone(),
                    cfg,
                    urls,
                })
            })
            .collect()
    }

    /// Where each configured event's booking-core figures are read for its sale report: its
    /// closed loop's `load_urls` when listed, else its `booking_url`.
    pub fn report_load_urls(&self) -> crate::report::LoadUrls {
        self.events
            .iter()
            .map(|e| {
                let urls = match &e.closed_loop {
                    Some(cl) if !cl.load_urls.is_empty() => cl.load_urls.clone(),
                    _ => vec![e.booking_url.clone()],
                };
                (e.id.clone(), urls)
            })
            .collect()
    }

    /// The configured liveness rules for the admitter.
    pub fn liveness_rules(&self) -> crate::admitter::LivenessRules {
        crate::admitter::LivenessRules {
            silence_ms: self.silence_grace_ms,
            ready_window_secs: self.ready_window_secs,
            ready_window_min: self.ready_window_min,
            scan_limit: self.scan_limit,
        }
    }

    /// The rejoin grace in **milliseconds**.
    pub fn rejoin_grace_ms(&self) -> u64 {
        self.rejoin_grace_secs.saturating_mul(1000)
    }

    /// Reads a JSON configuration file.
    pub fn from_file(path: &std::path::Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("cannot read the configuration file {}: {e}", path.display())
        })?;
        serde_json::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// Checks every value against its rule ([`Config::problems`]) before anything starts, all
    /// problems at once, each naming its field.
    ///
    /// # Errors
    /// A [`sale_common::config::Invalid`] listing every problem.
    pub fn validate(&self) -> anyhow::Result<()> {
        Ok(sale_common::config::Invalid::check(
            "waiting room",
            self.problems(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_config_parses_and_validates() {
        let c: Config =
            serde_json::from_str(include_str!("../config.example.json")).expect("parses");
        c.validate().expect("valid");
        assert!(matches!(c.store, StoreConfig::Memory));
        assert_eq!(
            (c.tick_ms, c.status_max_age_secs, c.poll_interval_ms),
            (100, 1, 2000)
        );
        assert_eq!(c.events[0].admission_ttl_secs, 600);
        assert_eq!(format!("{:?}", c.admin_token), "Secret(***)");
    }

    #[test]
    fn every_problem_names_its_field_and_rule() {
        let mut c = Config::demo("demo", 0, "http://127.0.0.1:8081");
        c.admin_token = Secret::new("short");
        c.join_hmac_key = Secret::new("k");
        c.tick_ms = 0;
        c.silence_grace_ms = c.heartbeat_interval_ms;
        c.events.push(c.events[0].clone());
        c.events[0].admit_rate = 0.0;
        c.events[0].booking_url = "booking".into();
        c.events[1].admit_rate = 2_000_000.0;
        c.events[1].max_active = 0;
        c.store = StoreConfig::Redis {
            url: "localhost:6379".into(),
        };
        let err = c.validate().expect_err("refused").to_string();
        for line in [
            "invalid waiting room configuration, 10 problems:",
            "- admin_token: at least 16 characters (got 5)",
            "- join_hmac_key: at least 32 bytes (got 1)",
            "- tick_ms: must be > 0",
            "- silence_grace_ms (10000) must exceed heartbeat_interval_ms (10000)",
            "- events[0].admit_rate: must be in (0, 1000000] fans per second (got 0)",
            "- events[1].admit_rate: must be in (0, 1000000] fans per second (got 2000000)",
            "- events[1].max_active: must be >= 1",
            "- events[0].booking_url: must be an absolute http(s) URL (got \"booking\")",
            "- events[1].id: \"demo\" is used by an earlier event",
            "- store.url: must start with redis://",
        ] {
            assert!(err.contains(line), "missing {line:?} in:\n{err}");
        }
    }

    #[test]
    fn store_forms_parse() {
        let one: StoreConfig =
            serde_json::from_str(r#"{"kind": "redis", "url": "redis://127.0.0.1:6379/"}"#)
                .expect("one server");
        assert!(matches!(one, StoreConfig::Redis { .. }));
        let cluster: StoreConfig = serde_json::from_str(
            r#"{"kind": "redis_cluster", "urls": ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]}"#,
        )
        .expect("cluster");
        assert!(matches!(&cluster, StoreConfig::RedisCluster { urls } if urls.len() == 2));
        let mut c = Config::demo("demo", 0, "http://127.0.0.1:8081");
        c.store = cluster;
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        c.store = StoreConfig::RedisCluster {
            urls: vec!["127.0.0.1:7000".into()],
        };
        assert_eq!(
            c.problems(),
            ["store.urls[0]: must start with redis:// or rediss:// (got \"127.0.0.1:7000\")"]
        );
    }

    #[test]
    fn an_events_display_fields_are_checked_at_start() {
        let mut c = Config::demo("demo", 0, "http://127.0.0.1:8081");
        assert_eq!(c.events[0].time_zone, "UTC");
        c.events[0].name = Some("Midnight Opera".into());
        c.events[0].time_zone = "Europe/London".into();
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        c.events[0].venue = Some(String::new());
        c.events[0].time_zone = "Mars/Olympus".into();
        assert_eq!(
            c.problems(),
            [
                "events[0].venue: 1 to 120 characters (got 0)",
                "events[0].time_zone: \"Mars/Olympus\" is not an IANA time zone (e.g. Europe/London)"
            ]
        );
    }
}
