//! Simulator configuration: public base URL for checkout links, the HMAC secret for per-payment
//! signatures, client credentials and the hourly grant allowance of the token endpoint, webhook
//! signing keys, fault timings, the RNG seed for fault injection, and the clock.

use std::time::Duration;

use sale_common::{Secret, SharedClock, SystemClock};

/// Gateway-simulator configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Base URL the fan's browser uses to reach this server (e.g. `http://127.0.0.1:8082`);
    /// `checkout_url` = `{public_url}/checkout/{payment_id}`. No trailing slash.
    pub public_url: String,
    /// HMAC-SHA256 key: `signature` = hex HMAC(secret, payment_id). No default (STYLE.md rule 7).
    pub secret: Secret,
    /// Client id accepted by `POST /v1/oauth/token`.
    pub client_id: String,
    /// Client secret accepted by `POST /v1/oauth/token`. `demo` uses `secret`.
    pub client_secret: Secret,
    /// Grants allowed per sliding hour (seed 000 Challenge 3: "a couple"); more → 429.
    pub grants_per_hour: u32,
    /// Access-token lifetime, seconds.
    pub token_ttl_secs: i64,
    /// Whether `/v1/payments*` calls need `Authorization: Bearer <access token>`.
    pub require_token: bool,
    /// Webhook signing keys: every delivery carries one `v1=` signature per key (rotation).
    /// `demo` uses `[secret]`.
    pub webhook_secrets: Vec<Secret>,
    /// Seed for fault-injection randomness; `None` = seeded from entropy.
    pub seed: Option<u64>,
    /// How long a timed-out execute or query sleeps before answering; must exceed the client's
    /// timeout. Default 30 s.
    pub execute_timeout_sleep: Duration,
    /// Late-success fault: the payment completes this long after its session deadline, seconds
    /// (default 120: a 7-minute session completes at minute 9, case B02).
    pub late_success_delay_secs: i64,
    /// Out-of-order fault: a delivery is held back this long so later events overtake it, ms.
    pub reorder_delay_ms: u64,
    /// Time source (epoch ms); `expires_at` of payments is compared against it.
    pub clock: SharedClock,
}

impl Config {
    /// A config for tests and the local demo: given public URL and secret (also the client
    /// secret and the webhook key), client id `booking-core`, 2 grants per hour, 1-hour tokens,
    /// seeded RNG 7, system clock.
    pub fn demo(public_url: impl Into<String>, secret: Secret) -> Self {
        Self {
            public_url: public_url.into(),
            client_id: "booking-core".into(),
            client_secret: secret.clone(),
            grants_per_hour: 2,
            token_ttl_secs: 3600,
            require_token: true,
            webhook_secrets: vec![secret.clone()],
            secret,
            seed: Some(7),
            execute_timeout_sleep: Duration::from_secs(30),
            late_success_delay_secs: 120,
            reorder_delay_ms: 300,
            clock: std::sync::Arc::new(SystemClock),
        }
    }

    /// Checks the config before any port is served.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.public_url.starts_with("http://") || self.public_url.starts_with("https://"),
            "public_url must be an absolute http(s) URL"
        );
        anyhow::ensure!(!self.secret.expose().is_empty(), "secret must not be empty");
        anyhow::ensure!(
            !self.client_secret.expose().is_empty(),
            "client_secret must not be empty"
        );
        anyhow::ensure!(
            !self.webhook_secrets.is_empty(),
            "at least one webhook secret is required"
        );
        anyhow::ensure!(self.token_ttl_secs > 0, "token_ttl_secs must be > 0");
        Ok(())
    }

    /// `public_url` without a trailing slash.
    pub fn base(&self) -> &str {
        self.public_url.trim_end_matches('/')
    }
}
