//! The waiting room's start-up rules: every value of a [`Config`] checked in one pass, each
//! problem one line naming its field and the rule (`admin_token: at least 16 characters (got
//! 5)`), so an operator (or `ticket-sale up`) sees them all before anything starts.
//! Values with no rule: paths (`static_dir`, `status_dir`, `signing_key_dir`), `trusted_proxies`
//! (typed), `status_max_age_secs`, `invite_grace_secs`, `rejoin_grace_secs`,
//! `ready_window_secs`, `ready_window_min`, `drain_secs`, `lame_duck_ms`, `s3_prefix`, `signing_key_pem` (read
//! when the signer starts).

use sale_common::config::{is_http_url, min_chars};

use super::{Config, StoreConfig};

/// Shortest admin and service tokens, characters.
pub const MIN_TOKEN_CHARS: usize = 16;
/// Shortest HMAC keys, bytes.
const MIN_KEY_BYTES: usize = 32;

impl Config {
    /// Every problem of this configuration, one line each (`field: rule`); empty when valid.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        self.secret_rules(&mut p);
        self.timing_rules(&mut p);
        self.limit_rules(&mut p);
        self.event_rules(&mut p);
        self.store_rules(&mut p);
        for (name, v) in [("issuer", &self.issuer), ("audience", &self.audience)] {
            if v.is_empty() {
                p.push(format!("{name}: must not be empty"));
            }
        }
        for (i, aud) in self.gate_audiences.iter().enumerate() {
            let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
            if aud.is_empty() || aud.len() > 64 || !aud.chars().all(safe) {
                p.push(format!(
                    "gate_audiences[{i}]: 1 to 64 of A-Z a-z 0-9 - _ . (got {aud:?})"
                ));
            } else if *aud == self.audience || self.gate_audiences[..i].contains(aud) {
                p.push(format!(
                    "gate_audiences[{i}]: {aud:?} is the booking core's own audience or listed twice"
                ));
            }
        }
        if let Some(h) = &self.identity_header {
            if h.is_empty() || !h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                p.push(format!(
                    "identity_header: a header name is [A-Za-z0-9-]+ (got {h:?})"
                ));
            }
        }
        if self.s3_bucket.as_deref() == Some("") {
            p.push("s3_bucket: must not be empty when set".into());
        }
        p
    }

    fn store_rules(&self, p: &mut Vec<String>) {
        match &self.store {
            StoreConfig::Memory => {}
            StoreConfig::Redis { url } => {
                let schemes = ["redis://", "rediss://", "redis+unix://", "unix://"];
                if !schemes.iter().any(|s| url.starts_with(s)) {
                    p.push(
                        "store.url: must start with redis://, rediss://, redis+unix:// or unix://"
                            .into(),
                    );
                }
            }
            StoreConfig::RedisCluster { urls } => {
                if urls.is_empty() {
                    p.push("store.urls: at least one cluster node".into());
                }
                for (i, url) in urls.iter().enumerate() {
                    if !url.starts_with("redis://") && !url.starts_with("rediss://") {
                        p.push(format!(
                            "store.urls[{i}]: must start with redis:// or rediss:// (got {url:?})"
                        ));
                    }
                }
            }
        }
    }

    fn secret_rules(&self, p: &mut Vec<String>) {
        p.extend(min_chars(
            "admin_token",
            self.admin_token.expose(),
            MIN_TOKEN_CHARS,
        ));
        if let Some(t) = &self.service_token {
            p.extend(min_chars("service_token", t.expose(), MIN_TOKEN_CHARS));
        }
        let mut key = |name: String, len: usize| {
            if len < MIN_KEY_BYTES {
                p.push(format!(
                    "{name}: at least {MIN_KEY_BYTES} bytes (got {len})"
                ));
            }
        };
        key("join_hmac_key".into(), self.join_hmac_key.expose().len());
        for (i, k) in self.join_hmac_previous_keys.iter().enumerate() {
            key(format!("join_hmac_previous_keys[{i}]"), k.expose().len());
        }
        if let Some(k) = &self.identity_token_key {
            key("identity_token_key".into(), k.expose().len());
        }
    }

    fn timing_rules(&self, p: &mut Vec<String>) {
        for (name, v) in [
            ("tick_ms", self.tick_ms),
            ("status_throttle_ms", self.status_throttle_ms),
            ("poll_interval_ms", self.poll_interval_ms),
            ("heartbeat_interval_ms", self.heartbeat_interval_ms),
            ("store_timeout_ms", self.store_timeout_ms),
            ("join_token_ttl_secs", self.join_token_ttl_secs),
            ("report_sample_secs", self.report_sample_secs),
        ] {
            if v == 0 {
                p.push(format!("{name}: must be > 0"));
            }
        }
        if self.silence_grace_ms <= self.heartbeat_interval_ms {
            p.push(format!(
                "silence_grace_ms ({}) must exceed heartbeat_interval_ms ({})",
                self.silence_grace_ms, self.heartbeat_interval_ms
            ));
        }
        if self.report_sample_secs > 60 {
            p.push(format!(
                "report_sample_secs: at most 60 (the report is per minute; got {})",
                self.report_sample_secs
            ));
        }
        if self.max_clock_skew_secs > 600 {
            p.push(format!(
                "max_clock_skew_secs: at most 600 (10 minutes; got {}); run time sync (chrony, systemd-timesyncd)",
                self.max_clock_skew_secs
            ));
        }
    }

    fn limit_rules(&self, p: &mut Vec<String>) {
        for (name, v) in [
            ("join_rate_per_sec", self.join_rate_per_sec),
            ("join_burst", u64::from(self.join_burst)),
            ("fan_rate_per_sec", self.fan_rate_per_sec),
            ("fan_burst", u64::from(self.fan_burst)),
            ("scan_limit", self.scan_limit),
        ] {
            if v == 0 {
                p.push(format!("{name}: must be > 0"));
            }
        }
    }

    fn event_rules(&self, p: &mut Vec<String>) {
        let mut ids = std::collections::HashSet::new();
        for (i, e) in self.events.iter().enumerate() {
            if !ids.insert(e.id.as_str()) {
                p.push(format!(
                    "events[{i}].id: {:?} is used by an earlier event",
                    e.id.as_str()
                ));
            }
            // The same ranges as the admin API's (API.md "Events").
            if !(e.admit_rate.is_finite() && e.admit_rate > 0.0 && e.admit_rate <= 1_000_000.0) {
                p.push(format!(
                    "events[{i}].admit_rate: must be in (0, 1000000] fans per second (got {})",
                    e.admit_rate
                ));
            }
            if e.max_active == 0 {
                p.push(format!("events[{i}].max_active: must be >= 1"));
            }
            if !(1..=86_400).contains(&e.admission_ttl_secs) {
                p.push(format!(
                    "events[{i}].admission_ttl_secs: must be in 1..=86400 (got {})",
                    e.admission_ttl_secs
                ));
            }
            for (field, v) in [("name", &e.name), ("venue", &e.venue)] {
                if let Some(v) = v
                    .as_deref()
                    .filter(|v| !(1..=120).contains(&v.chars().count()))
                {
                    p.push(format!(
                        "events[{i}].{field}: 1 to 120 characters (got {})",
                        v.chars().count()
                    ));
                }
            }
            if jiff::tz::TimeZone::get(&e.time_zone).is_err() {
                p.push(format!(
                    "events[{i}].time_zone: {:?} is not an IANA time zone (e.g. Europe/London)",
                    e.time_zone
                ));
            }
            if !is_http_url(&e.booking_url) {
                p.push(format!(
                    "events[{i}].booking_url: must be an absolute http(s) URL (got {:?})",
                    e.booking_url
                ));
            }
            if let Some(cl) = &e.closed_loop {
                p.extend(cl.problems(&format!("events[{i}].closed_loop")));
                if self.service_token.is_none() {
                    p.push(format!(
                        "events[{i}].closed_loop: needs service_token (the booking core's /internal/load takes it as a bearer; without it the loop could never read a figure)"
                    ));
                }
            }
        }
    }
}
