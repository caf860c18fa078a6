//! Typed booking-core configuration, validated before any port is bound (STYLE.md rule 7):
//! database, the waiting room's JWKS and token rules, the gateway, hold timings, shows and venues.
//! Also the two URL rules start-up checks need: which database a `database_url` selects
//! ([`Backend`], re-exported as `db::Backend`) and the `smtp://` relay rule ([`smtp_relay`]).
//! The binary reads it from a JSON file and `BOOKING_*` environment overrides ([`Config::load`],
//! `sources`, `file`); `rules` holds the start-up checks.
//!
//! Layer: above `venue`, `error`, `telemetry`; imports nothing else, so every layer may read it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sale_common::config::Invalid;
use sale_common::{Secret, SharedClock, SystemClock};
use serde::Deserialize;

mod file;
mod rules;
mod sources;

pub use file::{ConfigFile, ShowFile};
pub use rules::MIN_ADMIN_TOKEN_CHARS;
pub use sources::{ENV_PREFIX, SECRET_KEYS};

pub use crate::venue::{PoolSpec, Section, Venue};

/// Lifetimes of one sales channel, seconds; the payment session always ends first (DESIGN
/// "Timing": 7 against 8 minutes on the web).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Channel {
    /// Hold lifetime from creation, seconds (web: 480).
    pub hold_secs: u64,
    /// Payment session from hold creation, seconds, shorter than `hold_secs` (web: 420).
    pub payment_secs: u64,
    /// The least time a checkout at the gateway takes, seconds, shorter than `payment_secs`: a
    /// payment starts no later than this before the session ends, and that moment (or the hold's
    /// end, if earlier) is the fan's one deadline (DECISIONS). Unset: a minute, or a quarter of a
    /// shorter session ([`Channel::min_checkout`]), so existing files with short sessions work.
    #[serde(default)]
    pub min_checkout_secs: Option<u64>,
}

impl Channel {
    /// The minimum checkout time in force, seconds: `min_checkout_secs`, else 60 s (the gateway's
    /// page, a card and its check) or a quarter of a session shorter than 4 minutes.
    pub fn min_checkout(&self) -> u64 {
        self.min_checkout_secs
            .unwrap_or_else(|| (self.payment_secs / 4).min(60))
    }

    /// `web` 480/420 s (seed 000) and `app` 600/540 s (the app keeps the fan a little longer
    /// for its in-app wallet step).
    pub fn defaults() -> BTreeMap<String, Channel> {
        BTreeMap::from([
            (
                "web".to_owned(),
                Channel {
                    hold_secs: 480,
                    payment_secs: 420,
                    min_checkout_secs: None,
                },
            ),
            (
                "app".to_owned(),
                Channel {
                    hold_secs: 600,
                    payment_secs: 540,
                    min_checkout_secs: None,
                },
            ),
        ])
    }
}

/// A show on sale; its id is the waiting room's event id (the admission's `event` claim).
#[derive(Debug, Clone)]
pub struct ShowConfig {
    /// Show id = event id, `[a-z0-9-]{1,40}`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Seats, seeded idempotently at start-up.
    pub venue: Venue,
}

/// `Config::hold_lock_wait_ms`'s default, milliseconds.
pub const HOLD_LOCK_WAIT_MS: u64 = 1000;

/// Booking-core configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `sqlite::memory:` or `sqlite://path?mode=rwc` (embedded default), or
    /// `postgres://user@host:port/db` (production; selected by the scheme).
    pub database_url: String,
    /// The waiting room's JWKS URL (`.../.well-known/jwks.json`).
    pub jwks_url: String,
    /// Required `iss` of admission tokens ("waiting-room", API.md).
    pub issuer: String,
    /// Required `aud` of admission tokens ("booking-core", API.md).
    pub audience: String,
    /// Audiences of other origins guarded by the edge gate (`infra/nginx/gate.conf.template`;
    /// default none): `/gate/{audience}/check` and `/gate/{audience}/enter` verify admission
    /// tokens whose `aud` contains it (DECISIONS: each guarded origin has its own `aud`; the
    /// waiting room's `gate_audiences` must list the same).
    pub gate_audiences: Vec<String>,
    /// Leeway on `exp`/`nbf`, **seconds** (default 0, and it must equal the waiting room's
    /// published `door_exp_leeway_secs`): clock skew is absorbed by the waiting room's
    /// `nbf = iat - max_clock_skew_secs` and slot tail instead (DECISIONS "Tokens, capacity and
    /// clocks"), so `max_active` stays exact (case W10).
    pub leeway_secs: u64,
    /// Largest clock difference between services, **seconds** (default 30, case W11). Must equal
    /// the waiting room's `max_clock_skew_secs`; the door refuses to start otherwise.
    pub max_clock_skew_secs: u64,
    /// Minimum seconds between two JWKS refreshes caused by unknown `kid`s.
    pub jwks_refresh_cooldown_secs: u64,
    /// The JWKS is re-read on this schedule too, **seconds** (default 60): a key that left it is
    /// dropped and its tokens refused within one interval (case W09).
    pub jwks_refresh_secs: u64,
    /// On SIGTERM/SIGINT, how long requests in flight may take before the remaining
    /// connections are closed, **seconds** (case W13).
    pub drain_secs: u64,
    /// On SIGTERM/SIGINT, how long the node answers as a lame duck before it stops accepting,
    /// **milliseconds** (default 1000; `sale_common::shutdown`): every answer carries
    /// `Connection: close`, so no keep-alive request is dropped.
    pub lame_duck_ms: u64,
    /// Waiting room base URL, returned in 401 bodies so the page can send the fan back.
    pub waiting_room_url: String,
    /// Payment gateway base URL (server-to-server).
    pub gateway_url: String,
    /// Key of the gateway's per-payment HMAC signatures.
    pub gateway_secret: Secret,
    /// Timeout of every gateway call; an execute that takes longer is "timed out".
    pub gateway_timeout: Duration,
    /// Client id for the gateway's token grant (HTTP basic auth).
    pub gateway_client_id: String,
    /// Client secret for the gateway's token grant. `demo` uses `gateway_secret`.
    pub gateway_client_secret: Secret,
    /// Keys accepted on webhook signatures; several during a secret rotation. `demo` uses
    /// `gateway_secret`.
    pub webhook_secrets: Vec<Secret>,
    /// Webhook timestamp tolerance, seconds (300).
    pub webhook_tolerance_secs: i64,
    /// Directory the outbox worker writes emails to (one `.eml` file per message), used when
    /// `smtp_url` is `None` (the embedded default).
    pub mail_dir: PathBuf,
    /// SMTP relay for emails instead of the mail directory: `smtp://host:port`, a plain relay
    /// on a trusted network (see [`smtp_relay`]).
    pub smtp_url: Option<String>,
    /// `From:` address of the emails sent over SMTP.
    pub mail_from: String,
    /// Domain of fans' addresses when a message names no `email`: `{visitor_id}@{domain}`.
    pub fan_mail_domain: String,
    /// Outbox worker cadence, milliseconds; 0 disables the loop (tests call `Outbox::step`).
    pub outbox_interval_ms: u64,
    /// How often, milliseconds, the statistics keeper looks for tables grown or shrunk twice
    /// over since the planner last counted them and analyses them (PostgreSQL only,
    /// `db::statistics`); 0 disables the loop (tests call `db::statistics::step`), else at
    /// least 100.
    pub statistics_interval_ms: u64,
    /// Test hook for case B08: the callback path stops right after the gateway's execute
    /// succeeded, before anything is recorded, as if the process had been killed. Never set it
    /// in production.
    pub crash_after_execute: bool,
    /// This service's public base URL; the gateway return URL is `{public_url}/payment/callback`.
    pub public_url: String,
    /// Hold and payment-session lifetimes per sales channel (seed 001 "Hold Lifetimes Are
    /// Policy"); the request picks one with `X-Channel` or the body's `channel`.
    pub channels: BTreeMap<String, Channel>,
    /// Channel of a request that names none (`"web"`).
    pub default_channel: String,
    /// Seats per hold, at most (seed/DESIGN: N = 4); also the most units of one pool hold.
    pub max_seats_per_hold: usize,
    /// Live holds per visitor (admission `sub`) across admissions, at most (seed 001 "Cap
    /// active holds per holder"; default 2). One live hold per admission always.
    pub max_holds_per_visitor: u32,
    /// Hold creations per admission per minute, at most (seed 001: "rate-limit hold
    /// creation"; default 10, burst the same). 0 disables the limit.
    pub hold_rate_per_min: u32,
    /// Longest a hold request waits for another transaction's locks (its seats, its caps' and
    /// keys' rows) on PostgreSQL, **milliseconds** (default 1000; 0: no limit): the hold
    /// requests' connections set it as their `lock_timeout` (`db::lock_wait_session`). A hold
    /// that waits longer is answered `503` + `Retry-After: 1` with nothing written.
    pub hold_lock_wait_ms: u64,
    /// Longest a fan's checkout step (paying, the gateway's callback and webhook, releasing a
    /// hold, reading it) waits for another transaction's locks on PostgreSQL,
    /// **milliseconds** (default 2000, at most 5000; 0: no limit): the checkout's connections set it as
    /// their `lock_timeout` (`db::lock_wait_session`). A step that waits longer is answered
    /// `503` + `Retry-After: 1` with its transaction rolled back (a newcomer review: a release
    /// of a hold whose row another session kept locked waited out the 15 s request limit,
    /// `db::outage::REQUEST_WITHIN`, and that cut-off tripped the outage gate for every
    /// request of the node). Above a hold's limit: a step is rarer and worth more than a hold;
    /// at most 5 s, as each of a step's statements may wait this long and a step also calls the
    /// gateway (`gateway_timeout`), all within the 15 s limit.
    pub checkout_lock_wait_ms: u64,
    /// Longest a request's body may take to arrive, **milliseconds** (default 10000, from 100
    /// to 60000): read whole before the handler, answered `408 request-timeout` with
    /// `Connection: close` past it. The outage gate's request limit (`db::outage::REQUEST_WITHIN`)
    /// starts after the body is in, so a client that sends a body slowly, or never finishes it,
    /// is not taken for a database that does not answer (a newcomer review: 60 such requests
    /// in 15 s tripped the gate with PostgreSQL healthy, and 47 % of fans' reads got 503).
    pub body_within_ms: u64,
    /// Bearer token of the waiting room's internal API (`/internal/events/{event}/…`), the same
    /// secret as the waiting room's `service_token`. `None`: the waiting room is not told when
    /// sessions end or the show sells out (the outbox marks those messages done unsent).
    pub service_token: Option<Secret>,
    /// Shows on sale.
    pub shows: Vec<ShowConfig>,
    /// Shows whose holds go through the per-show hold queue from start-up (the hottest shows,
    /// seed 002; the hold queue in `inventory/hotq.rs`); switchable at run time by `POST /admin/shows/{show}/hold-queue`.
    pub queued_shows: Vec<String>,
    /// Bearer token of `/admin/*`. No default.
    pub admin_token: Secret,
    /// Directory served at `/` (book.html, confirmation.html, ...), if any.
    pub static_dir: Option<PathBuf>,
    /// Reconciler cadence, seconds (DESIGN: 20). 0 disables the background loop (tests call
    /// `Reconciler::step` directly).
    pub reconcile_interval_secs: u64,
    /// Time source (epoch ms) for token checks, hold deadlines and the reconciler.
    pub clock: SharedClock,
}

impl Config {
    /// A demo/test config: in-memory SQLite, one show `show_id` on the demo venue, seed timings
    /// (channels `web` 480/420 s and `app` 600/540 s), leeway 0 s, clock skew 30 s,
    /// JWKS re-read every 60 s, system clock; the gateway's client secret
    /// and webhook key default to `gateway_secret` (the simulator's `demo` does the same).
    pub fn demo(
        show_id: &str,
        jwks_url: impl Into<String>,
        gateway_url: impl Into<String>,
        gateway_secret: Secret,
        public_url: impl Into<String>,
    ) -> Self {
        Self {
            database_url: "sqlite::memory:".into(),
            jwks_url: jwks_url.into(),
            issuer: "waiting-room".into(),
            audience: "booking-core".into(),
            gate_audiences: Vec::new(),
            leeway_secs: 0,
            max_clock_skew_secs: 30,
            jwks_refresh_cooldown_secs: 10,
            jwks_refresh_secs: 60,
            drain_secs: sale_common::shutdown::DEFAULT_DRAIN_SECS,
            lame_duck_ms: sale_common::shutdown::DEFAULT_LAME_DUCK_MS,
            waiting_room_url: "http://127.0.0.1:8080".into(),
            gateway_url: gateway_url.into(),
            gateway_secret: gateway_secret.clone(),
            gateway_timeout: Duration::from_secs(5),
            gateway_client_id: "booking-core".into(),
            gateway_client_secret: gateway_secret.clone(),
            webhook_secrets: vec![gateway_secret.clone()],
            webhook_tolerance_secs: 300,
            mail_dir: std::env::temp_dir().join("ticket-sale-mail"),
            smtp_url: None,
            mail_from: "tickets@example.invalid".into(),
            fan_mail_domain: "fans.example.invalid".into(),
            outbox_interval_ms: 500,
            statistics_interval_ms: 1000,
            crash_after_execute: false,
            public_url: public_url.into(),
            channels: Channel::defaults(),
            default_channel: "web".into(),
            max_seats_per_hold: 4,
            max_holds_per_visitor: 2,
            hold_rate_per_min: 10,
            hold_lock_wait_ms: HOLD_LOCK_WAIT_MS,
            checkout_lock_wait_ms: 2000,
            body_within_ms: 10_000,
            service_token: None,
            shows: vec![ShowConfig {
                id: show_id.into(),
                name: format!("Show {show_id}"),
                venue: Venue::demo(),
            }],
            queued_shows: Vec::new(),
            admin_token: Secret::new("admin-demo-token"),
            static_dir: None,
            reconcile_interval_secs: 20,
            clock: Arc::new(SystemClock),
        }
    }

    /// Start-up checks: every value against its rule ([`Config::problems`]), all problems
    /// reported at once, each naming its field.
    ///
    /// # Errors
    /// A [`sale_common::config::Invalid`] listing every problem.
    pub fn validate(&self) -> anyhow::Result<()> {
        Ok(Invalid::check("booking core", self.problems())?)
    }

    /// Whether a show with this id is configured.
    pub fn has_show(&self, id: &str) -> bool {
        self.shows.iter().any(|s| s.id == id)
    }

    /// `public_url` without a trailing slash.
    pub fn public_base(&self) -> &str {
        self.public_url.trim_end_matches('/')
    }
}

/// Which database a URL selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:` URLs (the embedded default).
    Sqlite,
    /// `postgres://` or `postgresql://` URLs.
    Postgres,
}

impl Backend {
    /// The backend of `url`, or an error for anything else.
    pub fn of_url(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else {
            anyhow::bail!(
                "database_url: must start with sqlite: or postgres:// (got {}:)",
                url.split(':').next().unwrap_or("")
            )
        }
    }
}

/// Host and port of an `smtp://host[:port]` relay (port 25 by default). Only unencrypted
/// relays on a trusted network (a local MTA that does the relaying) are supported: TLS would pull
/// a second TLS stack into the build; run a local relay (Postfix, an MTA sidecar) for TLS. The
/// outbox's mailer builds its transport from this (`outbox::mail::plain_relay`).
///
/// # Errors
/// Another scheme, or no host.
pub fn smtp_relay(url: &str) -> anyhow::Result<(String, u16)> {
    let u = reqwest::Url::parse(url)?;
    anyhow::ensure!(
        u.scheme() == "smtp",
        "only smtp://host:port relays are supported"
    );
    let host = u
        .host_str()
        .ok_or_else(|| anyhow::anyhow!("smtp_url has no host"))?;
    Ok((host.to_owned(), u.port().unwrap_or(25)))
}

/// Show/event ids: `[a-z0-9-]{1,40}` (API.md).
pub fn valid_show_id(id: &str) -> bool {
    (1..=40).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        Config::demo(
            "demo",
            "http://a/jwks",
            "http://g",
            Secret::new("s"),
            "http://b",
        )
    }

    #[test]
    fn demo_config_is_valid_and_has_600_seats() {
        let c = cfg();
        c.validate().unwrap();
        assert_eq!(c.shows[0].venue.capacity(), 600);
    }

    #[test]
    fn an_unset_minimum_checkout_fits_short_sessions() {
        let mut c = cfg();
        let short = Channel {
            hold_secs: 20,
            payment_secs: 15,
            min_checkout_secs: None,
        };
        assert_eq!(short.min_checkout(), 3, "a quarter of a 15 s session");
        assert_eq!(Channel::defaults()["web"].min_checkout(), 60);
        c.channels.insert("short".into(), short);
        c.validate()
            .expect("a 15 s session needs no min_checkout_secs");
    }

    #[test]
    fn payment_session_must_end_before_hold() {
        let mut c = cfg();
        c.channels.insert(
            "slow".into(),
            Channel {
                hold_secs: 480,
                payment_secs: 480,
                min_checkout_secs: Some(480),
            },
        );
        let err = c.validate().expect_err("refused").to_string();
        assert!(
            err.contains("channels.slow.payment_secs (480) must be shorter than channels.slow.hold_secs (480)"),
            "{err}"
        );
        assert!(
            err.contains("channels.slow.min_checkout_secs (480) must be shorter than channels.slow.payment_secs (480)"),
            "{err}"
        );
    }

    #[test]
    fn example_config_parses_and_validates() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.json");
        // The example holds no secret (none has a default): the environment gives them.
        let env = [
            ("BOOKING_ADMIN_TOKEN", "an-admin-token-of-32-characters!"),
            ("BOOKING_GATEWAY_SECRET", "gateway-hmac-key"),
            ("BOOKING_GATEWAY_CLIENT_SECRET", "gateway-client-secret"),
            ("BOOKING_WEBHOOK_SECRETS", "webhook-key"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let c = Config::load(Some(&path), env).expect("loads");
        assert_eq!(c.channels, Channel::defaults());
        assert_eq!(
            (c.leeway_secs, c.max_clock_skew_secs, c.jwks_refresh_secs),
            (0, 30, 60)
        );
        assert_eq!(c.gateway_timeout, Duration::from_secs(5));
        assert_eq!(c.drain_secs, sale_common::shutdown::DEFAULT_DRAIN_SECS);
        assert_eq!(c.shows[0].venue.capacity(), 21_875);
        assert_eq!(c.webhook_secrets.len(), 1);
        assert!(c
            .static_dir
            .expect("static_dir")
            .join("book.html")
            .is_file());
        assert_eq!(format!("{:?}", c.admin_token), "Secret(***)");
    }
}
