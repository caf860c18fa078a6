//! The booking core's start-up rules: every value of a [`Config`] checked in one pass, each
//! problem one line naming its field and the rule (`channels.web.payment_secs (500) must be
//! shorter than channels.web.hold_secs (480)`), so an operator fixes them all at once.
//! Values with no rule: `drain_secs`, `lame_duck_ms`, `outbox_interval_ms` and
//! `reconcile_interval_secs` (0 disables the loop), `hold_rate_per_min` (0 disables the limit),
//! `mail_dir`, `static_dir`.

use sale_common::config::{is_http_url, min_chars};

use super::{smtp_relay, valid_show_id, Backend, Config};

/// Longest clock skew or leeway accepted, seconds: beyond this, run time sync instead.
const MAX_SKEW_SECS: u64 = 600;

/// Shortest admin token, characters (the waiting room's rule too).
pub const MIN_ADMIN_TOKEN_CHARS: usize = 16;

impl Config {
    /// Every problem of this configuration, one line each (`field: rule`); empty when valid.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        self.urls(&mut p);
        self.tokens(&mut p);
        self.gateway(&mut p);
        self.mail(&mut p);
        self.holds(&mut p);
        self.shows_rules(&mut p);
        p.extend(min_chars(
            "admin_token",
            self.admin_token.expose(),
            MIN_ADMIN_TOKEN_CHARS,
        ));
        if self
            .service_token
            .as_ref()
            .is_some_and(|t| t.expose().is_empty())
        {
            p.push("service_token: must not be empty when set".into());
        }
        p
    }

    fn urls(&self, p: &mut Vec<String>) {
        if let Err(e) = Backend::of_url(&self.database_url) {
            p.push(e.to_string());
        }
        for (name, url) in [
            ("jwks_url", &self.jwks_url),
            ("gateway_url", &self.gateway_url),
            ("public_url", &self.public_url),
            ("waiting_room_url", &self.waiting_room_url),
        ] {
            if !is_http_url(url) {
                p.push(format!(
                    "{name}: must be an absolute http(s) URL (got {url:?})"
                ));
            }
        }
    }

    fn tokens(&self, p: &mut Vec<String>) {
        for (name, v) in [("issuer", &self.issuer), ("audience", &self.audience)] {
            if v.is_empty() {
                p.push(format!("{name}: must not be empty"));
            }
        }
        for (name, v) in [
            ("leeway_secs", self.leeway_secs),
            ("max_clock_skew_secs", self.max_clock_skew_secs),
        ] {
            if v > MAX_SKEW_SECS {
                p.push(format!(
                    "{name}: at most {MAX_SKEW_SECS} (10 minutes; got {v}); run time sync (chrony, systemd-timesyncd)"
                ));
            }
        }
        if self.jwks_refresh_secs == 0 {
            p.push(
                "jwks_refresh_secs: at least 1 (a revoked key is refused within one interval)"
                    .into(),
            );
        }
        if self.jwks_refresh_cooldown_secs == 0 {
            p.push("jwks_refresh_cooldown_secs: at least 1 (unknown kids must not cause a JWKS fetch per request)".into());
        }
        for (i, aud) in self.gate_audiences.iter().enumerate() {
            let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
            if aud.is_empty() || aud.len() > 64 || !aud.chars().all(safe) {
                p.push(format!(
                    "gate_audiences[{i}]: 1 to 64 of A-Z a-z 0-9 - _ . (it is a path segment; got {aud:?})"
                ));
            } else if *aud == self.audience || self.gate_audiences[..i].contains(aud) {
                p.push(format!(
                    "gate_audiences[{i}]: {aud:?} is the booking core's own audience or listed twice"
                ));
            }
        }
    }

    fn gateway(&self, p: &mut Vec<String>) {
        if self.gateway_timeout.is_zero() {
            p.push("gateway_timeout_ms: must be > 0".into());
        }
        if self.gateway_client_id.is_empty() {
            p.push("gateway_client_id: must not be empty".into());
        }
        for (name, s) in [
            ("gateway_secret", &self.gateway_secret),
            ("gateway_client_secret", &self.gateway_client_secret),
        ] {
            if s.expose().is_empty() {
                p.push(format!("{name}: must not be empty"));
            }
        }
        if self.webhook_secrets.is_empty() {
            p.push("webhook_secrets: at least one secret is required".into());
        }
        for (i, s) in self.webhook_secrets.iter().enumerate() {
            if s.expose().is_empty() {
                p.push(format!("webhook_secrets[{i}]: must not be empty"));
            }
        }
        if self.webhook_tolerance_secs < 1 {
            p.push(format!(
                "webhook_tolerance_secs: at least 1 (got {})",
                self.webhook_tolerance_secs
            ));
        }
    }

    fn mail(&self, p: &mut Vec<String>) {
        if let Some(url) = &self.smtp_url {
            if let Err(e) = smtp_relay(url) {
                p.push(format!("smtp_url: {e}"));
            }
        }
        let (local, domain) = self.mail_from.split_once('@').unwrap_or(("", ""));
        if local.is_empty() || domain.is_empty() {
            p.push(format!(
                "mail_from: must be an address local@domain (got {:?})",
                self.mail_from
            ));
        }
        let d = &self.fan_mail_domain;
        if d.is_empty() || d.contains(['@', ' ', '/']) {
            p.push(format!(
                "fan_mail_domain: must be a domain name (got {d:?})"
            ));
        }
    }

    fn holds(&self, p: &mut Vec<String>) {
        if self.channels.is_empty() {
            p.push("channels: at least one channel is required".into());
        }
        for (name, c) in &self.channels {
            if !valid_channel_name(name) {
                p.push(format!(
                    "channels.{name}: a channel name is [a-z0-9_-]{{1,40}}"
                ));
            }
            if c.payment_secs == 0 {
                p.push(format!("channels.{name}.payment_secs: must be > 0"));
            } else if c.payment_secs >= c.hold_secs {
                p.push(format!(
                    "channels.{name}.payment_secs ({}) must be shorter than channels.{name}.hold_secs ({})",
                    c.payment_secs, c.hold_secs
                ));
            }
            if let Some(m) = c.min_checkout_secs.filter(|m| *m >= c.payment_secs) {
                p.push(format!(
                    "channels.{name}.min_checkout_secs ({m}) must be shorter than channels.{name}.payment_secs ({})",
                    c.payment_secs
                ));
            }
        }
        if !self.channels.contains_key(&self.default_channel) {
            let names: Vec<&str> = self.channels.keys().map(String::as_str).collect();
            p.push(format!(
                "default_channel: {:?} is not one of channels ({})",
                self.default_channel,
                names.join(", ")
            ));
        }
        if self.max_seats_per_hold == 0 {
            p.push("max_seats_per_hold: at least 1".into());
        }
        if self.max_holds_per_visitor == 0 {
            p.push("max_holds_per_visitor: at least 1".into());
        }
        if self.hold_lock_wait_ms > 60_000 {
            p.push("hold_lock_wait_ms: at most 60000 (0: no limit)".into());
        }
        if self.statistics_interval_ms != 0 && self.statistics_interval_ms < 100 {
            // Each step is a transaction and a read of the catalogue: every millisecond is a
            // thousand commits a second (a newcomer measured 7,000 in 6 s at 1 ms).
            p.push("statistics_interval_ms: 0 (off) or at least 100".into());
        }
        if self.checkout_lock_wait_ms > 5_000 {
            // Each statement of a step may wait this long, and a step also calls the gateway:
            // it must be answered before the request limit cuts it off and trips the gate.
            p.push("checkout_lock_wait_ms: at most 5000 (0: no limit)".into());
        }
        if !(100..=60_000).contains(&self.body_within_ms) {
            p.push("body_within_ms: from 100 to 60000".into());
        }
    }

    fn shows_rules(&self, p: &mut Vec<String>) {
        if self.shows.is_empty() {
            p.push("shows: at least one show is required".into());
        }
        let mut ids = std::collections::HashSet::new();
        for (i, s) in self.shows.iter().enumerate() {
            if !valid_show_id(&s.id) {
                p.push(format!(
                    "shows[{i}].id: {:?} must match [a-z0-9-]{{1,40}}",
                    s.id
                ));
            } else if !ids.insert(&s.id) {
                p.push(format!(
                    "shows[{i}].id: {:?} is used by an earlier show",
                    s.id
                ));
            }
            if s.name.is_empty() {
                p.push(format!("shows[{i}].name: must not be empty"));
            }
            if let Err(e) = s.venue.validate() {
                p.push(format!("shows[{i}].venue: {e}"));
            }
        }
        for (i, q) in self.queued_shows.iter().enumerate() {
            if !self.has_show(q) {
                p.push(format!("queued_shows[{i}]: {q:?} is not one of shows"));
            }
        }
    }
}

/// Channel names: `[a-z0-9_-]{1,40}` (lower case, so `BOOKING_CHANNELS__WEB__HOLD_SECS` can
/// name one).
fn valid_channel_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}
