//! Typed booking-core configuration, validated before any port is bound (STYLE.md rule 7):
//! database, the waiting room's JWKS and token rules, the gateway, hold timings, shows and venues.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sale_common::{Secret, SharedClock, SystemClock};

/// One seat section of a venue: name (`"A"`) and price per seat in cents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Section name, used in seat ids `"{section}-{row}-{n}"`.
    pub name: String,
    /// Price of every seat in the section, cents.
    pub price_cents: i64,
}

/// A rectangular venue: every section has `rows` rows of `seats_per_row` seats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Venue {
    /// Sections in order.
    pub sections: Vec<Section>,
    /// Rows per section (numbered from 1).
    pub rows: u32,
    /// Seats per row (numbered from 1).
    pub seats_per_row: u32,
}

impl Venue {
    /// The demo venue (API.md): sections A..E, rows 1..10, 12 seats per row = 600 seats.
    pub fn demo() -> Self {
        let prices = [12_000, 9_500, 8_000, 6_500, 5_000];
        let sections = ["A", "B", "C", "D", "E"]
            .iter()
            .zip(prices)
            .map(|(n, p)| Section {
                name: (*n).into(),
                price_cents: p,
            })
            .collect();
        Self {
            sections,
            rows: 10,
            seats_per_row: 12,
        }
    }

    /// A tiny venue for tests: section `A`, one row of `seats` seats at 5,000 cents.
    pub fn small(seats: u32) -> Self {
        Self {
            sections: vec![Section {
                name: "A".into(),
                price_cents: 5_000,
            }],
            rows: 1,
            seats_per_row: seats,
        }
    }

    /// Number of seats.
    pub fn capacity(&self) -> u64 {
        self.sections.len() as u64 * u64::from(self.rows) * u64::from(self.seats_per_row)
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
    /// Clock leeway for `exp`/`nbf`, seconds (DESIGN: explicit and small; default 5).
    pub leeway_secs: u64,
    /// Minimum seconds between two JWKS refreshes caused by unknown `kid`s.
    pub jwks_refresh_cooldown_secs: u64,
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
    /// Directory the outbox worker writes emails to (one `.eml` file per message).
    pub mail_dir: PathBuf,
    /// Outbox worker cadence, milliseconds; 0 disables the loop (tests call `Outbox::step`).
    pub outbox_interval_ms: u64,
    /// Test hook for case B08: the callback path stops right after the gateway's execute
    /// succeeded, before anything is recorded, as if the process had been killed. Never set it
    /// in production.
    pub crash_after_execute: bool,
    /// This service's public base URL; the gateway return URL is `{public_url}/payment/callback`.
    pub public_url: String,
    /// Hold lifetime, seconds (seed: 8 minutes = 480).
    pub hold_ttl_secs: u64,
    /// Payment session, seconds, counted from hold creation; must be shorter than the hold
    /// (seed: 7 minutes = 420).
    pub payment_session_secs: u64,
    /// Seats per hold, at most (seed/DESIGN: N = 4).
    pub max_seats_per_hold: usize,
    /// Shows on sale.
    pub shows: Vec<ShowConfig>,
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
    /// (480 s hold, 420 s payment session), leeway 5 s, system clock; the gateway's client secret
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
            leeway_secs: 5,
            jwks_refresh_cooldown_secs: 10,
            waiting_room_url: "http://127.0.0.1:8080".into(),
            gateway_url: gateway_url.into(),
            gateway_secret: gateway_secret.clone(),
            gateway_timeout: Duration::from_secs(5),
            gateway_client_id: "booking-core".into(),
            gateway_client_secret: gateway_secret.clone(),
            webhook_secrets: vec![gateway_secret.clone()],
            webhook_tolerance_secs: 300,
            mail_dir: std::env::temp_dir().join("ticket-sale-mail"),
            outbox_interval_ms: 500,
            crash_after_execute: false,
            public_url: public_url.into(),
            hold_ttl_secs: 480,
            payment_session_secs: 420,
            max_seats_per_hold: 4,
            shows: vec![ShowConfig {
                id: show_id.into(),
                name: format!("Show {show_id}"),
                venue: Venue::demo(),
            }],
            admin_token: Secret::new("admin-demo-token"),
            static_dir: None,
            reconcile_interval_secs: 20,
            clock: Arc::new(SystemClock),
        }
    }

    /// Start-up checks: the payment session ends before the hold (DESIGN "Timing"), URLs are
    /// absolute, show ids are valid and unique, secrets are set.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.payment_session_secs > 0 && self.payment_session_secs < self.hold_ttl_secs,
            "payment_session_secs ({}) must be > 0 and shorter than hold_ttl_secs ({})",
            self.payment_session_secs,
            self.hold_ttl_secs
        );
        for (name, url) in [
            ("jwks_url", &self.jwks_url),
            ("gateway_url", &self.gateway_url),
            ("public_url", &self.public_url),
            ("waiting_room_url", &self.waiting_room_url),
        ] {
            anyhow::ensure!(
                url.starts_with("http://") || url.starts_with("https://"),
                "{name} must be an absolute http(s) URL"
            );
        }
        anyhow::ensure!(
            self.max_seats_per_hold >= 1,
            "max_seats_per_hold must be >= 1"
        );
        anyhow::ensure!(!self.shows.is_empty(), "at least one show is required");
        let mut ids = std::collections::HashSet::new();
        for s in &self.shows {
            anyhow::ensure!(valid_show_id(&s.id), "invalid show id {:?}", s.id);
            anyhow::ensure!(ids.insert(&s.id), "duplicate show id {:?}", s.id);
            anyhow::ensure!(s.venue.capacity() > 0, "show {} has no seats", s.id);
        }
        anyhow::ensure!(
            !self.admin_token.expose().is_empty(),
            "admin_token must be set"
        );
        anyhow::ensure!(
            !self.gateway_secret.expose().is_empty(),
            "gateway_secret must be set"
        );
        anyhow::ensure!(
            !self.webhook_secrets.is_empty()
                && self.webhook_secrets.iter().all(|s| !s.expose().is_empty()),
            "at least one non-empty webhook secret is required"
        );
        crate::db::Backend::of_url(&self.database_url)?;
        Ok(())
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
    fn payment_session_must_end_before_hold() {
        let mut c = cfg();
        c.payment_session_secs = 480;
        assert!(c.validate().is_err());
    }
}
