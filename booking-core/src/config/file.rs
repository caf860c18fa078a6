//! The configuration as an operator writes it (`booking-core/config.example.json`): every knob
//! of [`Config`] under the same name (`gateway_timeout_ms` for `gateway_timeout`), defaults for
//! the knobs that have one, none for URLs, shows and secrets. [`ConfigFile::into_config`]
//! loads the venues and checks every value, reporting all problems at once.
//! Not here: `clock` (the system clock) and `crash_after_execute` (a test hook).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use figment::value::magic::RelativePathBuf;
use sale_common::config::Invalid;
use sale_common::{Secret, SystemClock};
use serde::{Deserialize, Deserializer};

use super::{Channel, Config, ShowConfig, Venue};

/// The file's members (and `BOOKING_*` overrides) before defaults are checked. Paths given in
/// the file are relative to the file's folder; paths from the environment to the working
/// directory.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)] // Each member is the `Config` field of the same name.
pub struct ConfigFile {
    pub database_url: String,
    pub jwks_url: Option<String>,
    pub issuer: String,
    pub audience: String,
    pub gate_audiences: Vec<String>,
    pub leeway_secs: u64,
    pub max_clock_skew_secs: u64,
    pub jwks_refresh_secs: u64,
    pub jwks_refresh_cooldown_secs: u64,
    pub drain_secs: u64,
    pub lame_duck_ms: u64,
    pub waiting_room_url: Option<String>,
    pub gateway_url: Option<String>,
    #[serde(deserialize_with = "secret")]
    pub gateway_secret: Option<Secret>,
    /// `Config::gateway_timeout`, milliseconds.
    pub gateway_timeout_ms: u64,
    pub gateway_client_id: String,
    #[serde(deserialize_with = "secret")]
    pub gateway_client_secret: Option<Secret>,
    /// One secret, or a list of them during a rotation.
    #[serde(deserialize_with = "secrets")]
    pub webhook_secrets: Option<Vec<Secret>>,
    pub webhook_tolerance_secs: i64,
    pub mail_dir: Option<RelativePathBuf>,
    pub smtp_url: Option<String>,
    pub mail_from: String,
    pub fan_mail_domain: String,
    pub outbox_interval_ms: u64,
    pub statistics_interval_ms: u64,
    pub public_url: Option<String>,
    pub channels: BTreeMap<String, Channel>,
    pub default_channel: String,
    pub max_seats_per_hold: usize,
    pub max_holds_per_visitor: u32,
    pub hold_rate_per_min: u32,
    pub hold_lock_wait_ms: u64,
    pub checkout_lock_wait_ms: u64,
    pub body_within_ms: u64,
    #[serde(deserialize_with = "secret")]
    pub service_token: Option<Secret>,
    pub shows: Vec<ShowFile>,
    pub queued_shows: Vec<String>,
    #[serde(deserialize_with = "secret")]
    pub admin_token: Option<Secret>,
    pub static_dir: Option<RelativePathBuf>,
    pub reconcile_interval_secs: u64,
}

/// One show: its id (the waiting room's event id), display name (default: the id) and venue,
/// from a venue file (booking-core/README.md "Venue files") or inline.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShowFile {
    /// Show id = event id.
    pub id: String,
    /// Display name; the id when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// A JSON venue file.
    #[serde(default)]
    pub venue_file: Option<RelativePathBuf>,
    /// The venue itself, instead of `venue_file`.
    #[serde(default)]
    pub venue: Option<Venue>,
}

fn secret<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    Option::<String>::deserialize(d).map(|o| o.map(Secret::new))
}

fn secrets<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Secret>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(Option::<OneOrMany>::deserialize(d)?.map(|v| match v {
        OneOrMany::One(s) => vec![Secret::new(s)],
        OneOrMany::Many(v) => v.into_iter().map(Secret::new).collect(),
    }))
}

impl Default for ConfigFile {
    /// The knobs' defaults are [`Config::demo`]'s; URLs, shows and secrets have none.
    fn default() -> Self {
        let d = Config::demo("demo", "", "", Secret::new(""), "");
        Self {
            database_url: "sqlite://booking.db?mode=rwc".into(),
            jwks_url: None,
            issuer: d.issuer,
            audience: d.audience,
            gate_audiences: d.gate_audiences,
            leeway_secs: d.leeway_secs,
            max_clock_skew_secs: d.max_clock_skew_secs,
            jwks_refresh_secs: d.jwks_refresh_secs,
            jwks_refresh_cooldown_secs: d.jwks_refresh_cooldown_secs,
            drain_secs: d.drain_secs,
            lame_duck_ms: d.lame_duck_ms,
            waiting_room_url: None,
            gateway_url: None,
            gateway_secret: None,
            gateway_timeout_ms: u64::try_from(d.gateway_timeout.as_millis()).unwrap_or(u64::MAX),
            gateway_client_id: d.gateway_client_id,
            gateway_client_secret: None,
            webhook_secrets: None,
            webhook_tolerance_secs: d.webhook_tolerance_secs,
            mail_dir: None,
            smtp_url: None,
            mail_from: d.mail_from,
            fan_mail_domain: d.fan_mail_domain,
            outbox_interval_ms: d.outbox_interval_ms,
            statistics_interval_ms: d.statistics_interval_ms,
            public_url: None,
            channels: d.channels,
            default_channel: d.default_channel,
            max_seats_per_hold: d.max_seats_per_hold,
            max_holds_per_visitor: d.max_holds_per_visitor,
            hold_rate_per_min: d.hold_rate_per_min,
            hold_lock_wait_ms: d.hold_lock_wait_ms,
            checkout_lock_wait_ms: d.checkout_lock_wait_ms,
            body_within_ms: d.body_within_ms,
            service_token: None,
            shows: Vec::new(),
            queued_shows: Vec::new(),
            admin_token: None,
            static_dir: None,
            reconcile_interval_secs: d.reconcile_interval_secs,
        }
    }
}

/// Collects the "required" problems of values that have no default.
struct Required(Vec<String>);

impl Required {
    fn take<T: Default>(&mut self, field: &str, v: Option<T>) -> T {
        v.unwrap_or_else(|| {
            self.0.push(format!("{field}: required (no default)"));
            T::default()
        })
    }

    fn secret(&mut self, field: &str, v: Option<Secret>) -> Secret {
        v.unwrap_or_else(|| {
            let env = field.to_ascii_uppercase();
            self.0.push(format!(
                "{field}: required, secrets have no default (set {field} or {field}_file in the file, \
                 or BOOKING_{env} or BOOKING_{env}_FILE)"
            ));
            Secret::new("")
        })
    }

    fn named(&self, problem: &str) -> bool {
        self.0.iter().any(|r| {
            let field = r.split(':').next().unwrap_or(r);
            problem
                .strip_prefix(field)
                .is_some_and(|rest| rest.starts_with([':', ' ', '[', '.']))
        })
    }
}

impl ConfigFile {
    /// The [`Config`] these values describe (system clock), after loading every venue file and
    /// checking every value ([`Config::problems`]).
    ///
    /// # Errors
    /// A [`sale_common::config::Invalid`] listing every problem: missing values without a
    /// default, unreadable venue files, values that break a rule.
    pub fn into_config(self) -> Result<Config, Invalid> {
        let mut req = Required(Vec::new());
        let mut venue_problems = Vec::new();
        if self.shows.is_empty() {
            req.0
                .push("shows: required (no default), at least one show".into());
        }
        let shows = (self.shows.into_iter().enumerate())
            .map(|(i, s)| s.load(i, &mut venue_problems))
            .collect();
        let gateway_secret = req.secret("gateway_secret", self.gateway_secret);
        let config = Config {
            database_url: self.database_url,
            jwks_url: req.take("jwks_url", self.jwks_url),
            issuer: self.issuer,
            audience: self.audience,
            gate_audiences: self.gate_audiences,
            leeway_secs: self.leeway_secs,
            max_clock_skew_secs: self.max_clock_skew_secs,
            jwks_refresh_cooldown_secs: self.jwks_refresh_cooldown_secs,
            jwks_refresh_secs: self.jwks_refresh_secs,
            drain_secs: self.drain_secs,
            lame_duck_ms: self.lame_duck_ms,
            waiting_room_url: req.take("waiting_room_url", self.waiting_room_url),
            gateway_url: req.take("gateway_url", self.gateway_url),
            gateway_secret,
            gateway_timeout: Duration::from_millis(self.gateway_timeout_ms),
            gateway_client_id: self.gateway_client_id,
            gateway_client_secret: req.secret("gateway_client_secret", self.gateway_client_secret),
            webhook_secrets: match self.webhook_secrets {
                Some(v) => v,
                None => vec![req.secret("webhook_secrets", None)],
            },
            webhook_tolerance_secs: self.webhook_tolerance_secs,
            mail_dir: self.mail_dir.map_or_else(
                || std::env::temp_dir().join("ticket-sale-mail"),
                |p| p.relative(),
            ),
            smtp_url: self.smtp_url,
            mail_from: self.mail_from,
            fan_mail_domain: self.fan_mail_domain,
            outbox_interval_ms: self.outbox_interval_ms,
            statistics_interval_ms: self.statistics_interval_ms,
            crash_after_execute: false,
            public_url: req.take("public_url", self.public_url),
            channels: self.channels,
            default_channel: self.default_channel,
            max_seats_per_hold: self.max_seats_per_hold,
            max_holds_per_visitor: self.max_holds_per_visitor,
            hold_rate_per_min: self.hold_rate_per_min,
            hold_lock_wait_ms: self.hold_lock_wait_ms,
            checkout_lock_wait_ms: self.checkout_lock_wait_ms,
            body_within_ms: self.body_within_ms,
            service_token: self.service_token,
            shows,
            queued_shows: self.queued_shows,
            admin_token: req.secret("admin_token", self.admin_token),
            static_dir: self.static_dir.map(|p| p.relative()),
            reconcile_interval_secs: self.reconcile_interval_secs,
            clock: Arc::new(SystemClock),
        };
        // A missing value is reported once, not again as breaking its rule.
        let rules = config.problems().into_iter().filter(|p| !req.named(p));
        let mut problems = req.0.clone();
        problems.extend(venue_problems);
        problems.extend(rules);
        Invalid::check("booking core", problems)?;
        Ok(config)
    }
}

impl ShowFile {
    /// The show, its venue read from `venue_file` or given inline. A venue that cannot be had
    /// is a problem, and the demo venue stands in so the show's other values are still checked
    /// under their own index.
    fn load(self, i: usize, problems: &mut Vec<String>) -> ShowConfig {
        let venue = match (self.venue, self.venue_file) {
            (Some(mut v), None) => v
                .resolve_local_times()
                .map(|()| v)
                .map_err(|e| format!("shows[{i}].venue: {e}")),
            (None, Some(path)) => {
                Venue::load(&path.relative()).map_err(|e| format!("shows[{i}].venue_file: {e:#}"))
            }
            (Some(_), Some(_)) => Err(format!("shows[{i}]: give venue or venue_file, not both")),
            (None, None) => Err(format!("shows[{i}]: venue_file (or venue) is required")),
        };
        ShowConfig {
            name: self.name.unwrap_or_else(|| self.id.clone()),
            id: self.id,
            venue: venue.unwrap_or_else(|e| {
                problems.push(e);
                Venue::demo()
            }),
        }
    }
}
