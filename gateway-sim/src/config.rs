//! Simulator configuration: public base URL for checkout links, the HMAC secret for per-payment
//! signatures, the RNG seed for fault injection, and the clock.

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
    /// Seed for fault-injection randomness; `None` = seeded from entropy.
    pub seed: Option<u64>,
    /// How long an execute "times out" (sleeps) when the timeout fault fires; must exceed the
    /// client's timeout. Default 30 s.
    pub execute_timeout_sleep: Duration,
    /// Time source (epoch ms); `expires_at` of payments is compared against it.
    pub clock: SharedClock,
}

impl Config {
    /// A config for tests and the local demo: given public URL and secret, seeded RNG 7,
    /// system clock.
    pub fn demo(public_url: impl Into<String>, secret: Secret) -> Self {
        Self {
            public_url: public_url.into(),
            secret,
            seed: Some(7),
            execute_timeout_sleep: Duration::from_secs(30),
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
        Ok(())
    }

    /// `public_url` without a trailing slash.
    pub fn base(&self) -> &str {
        self.public_url.trim_end_matches('/')
    }
}
