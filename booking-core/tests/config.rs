//! The booking core's configuration as an operator gives it (issue 12 item 8): a JSON file,
//! `BOOKING_*` overrides (passed as a map: no test calls `set_var`), secrets from files, and the
//! start-up check that names every bad field and its rule at once; the real binary refuses a bad
//! file before it binds its port.

use std::path::PathBuf;
use std::process::Command;

use booking_core::Config;

const VENUE: &str =
    r#"{"sections": [{"name": "A", "price_cents": 1000}], "rows": 2, "seats_per_row": 5}"#;

/// A config file in a fresh folder: the required URLs and one show, plus `extra` members.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(extra: &str) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            r#"{{
  "jwks_url": "http://127.0.0.1:8080/.well-known/jwks.json",
  "waiting_room_url": "http://127.0.0.1:8080",
  "gateway_url": "http://127.0.0.1:8082",
  "public_url": "http://127.0.0.1:8081",
  "shows": [{{"id": "demo", "venue": {VENUE}}}]{extra}
}}"#
        );
        std::fs::write(dir.path().join("booking.json"), text).expect("write config");
        Self { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("booking.json")
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).expect("write");
        p
    }

    fn load(&self, env: &[(&str, &str)]) -> anyhow::Result<Config> {
        Config::load(Some(&self.path()), vars(env))
    }
}

fn vars(env: &[(&str, &str)]) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Every secret, from the environment.
const SECRETS: &[(&str, &str)] = &[
    ("BOOKING_ADMIN_TOKEN", "admin-token-0123456789"),
    ("BOOKING_GATEWAY_SECRET", "gw-hmac"),
    ("BOOKING_GATEWAY_CLIENT_SECRET", "gw-client"),
    ("BOOKING_WEBHOOK_SECRETS", "wh-1"),
];

fn with_secrets(more: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    SECRETS.iter().chain(more).copied().collect()
}

fn error_of(r: anyhow::Result<Config>) -> String {
    format!("{:#}", r.expect_err("refused"))
}

#[test]
fn the_environment_overrides_the_file_top_level_and_nested() {
    let f = Fixture::new(r#", "leeway_secs": 2, "hold_rate_per_min": 7, "drain_secs": 9"#);
    let c = f
        .load(&with_secrets(&[
            ("BOOKING_LEEWAY_SECS", "5"),
            ("BOOKING_CHANNELS__WEB__HOLD_SECS", "900"),
            ("BOOKING_CHANNELS__WEB__PAYMENT_SECS", "840"),
            ("BOOKING_QUEUED_SHOWS", r#"["demo"]"#),
            ("BOOKING_GATEWAY_TIMEOUT_MS", "1500"),
            ("BOOKING_LISTEN", "127.0.0.1:1"),
            ("OTHER_LEEWAY_SECS", "99"),
        ]))
        .expect("loads");
    assert_eq!(c.leeway_secs, 5, "the environment wins");
    assert_eq!(c.hold_rate_per_min, 7, "the file's value stays");
    assert_eq!(c.drain_secs, 9);
    let web = c.channels["web"];
    assert_eq!((web.hold_secs, web.payment_secs), (900, 840));
    assert_eq!(c.queued_shows, ["demo"]);
    assert_eq!(c.gateway_timeout, std::time::Duration::from_millis(1500));
    assert_eq!(c.shows[0].name, "demo", "the name defaults to the id");
}

#[test]
fn a_secret_of_digits_from_the_environment_stays_text() {
    let f = Fixture::new("");
    let mut env = with_secrets(&[]);
    env[0] = ("BOOKING_ADMIN_TOKEN", "00012345678901234567");
    let c = f.load(&env).expect("loads");
    assert_eq!(c.admin_token.expose(), "00012345678901234567");
}

#[test]
fn secrets_come_from_files_relative_to_the_config_file_or_named_in_the_environment() {
    let f = Fixture::new(
        r#", "admin_token_file": "secrets/admin", "webhook_secrets_file": "secrets/webhooks""#,
    );
    std::fs::create_dir(f.dir.path().join("secrets")).expect("mkdir");
    f.write("secrets/admin", "admin-token-from-a-file\n");
    f.write("secrets/webhooks", "new-key\n\nold-key\n");
    let gw = f.write("gateway", "  gw-from-file \n");
    let c = Config::load(
        Some(&f.path()),
        vars(&[
            ("BOOKING_GATEWAY_SECRET_FILE", gw.to_str().expect("utf-8")),
            ("BOOKING_GATEWAY_CLIENT_SECRET", "gw-client"),
        ]),
    )
    .expect("loads");
    assert_eq!(c.admin_token.expose(), "admin-token-from-a-file");
    assert_eq!(c.gateway_secret.expose(), "gw-from-file");
    let hooks: Vec<&str> = c.webhook_secrets.iter().map(|s| s.expose()).collect();
    assert_eq!(hooks, ["new-key", "old-key"], "one secret per line");
    let shown = format!("{c:?}");
    assert!(!shown.contains("admin-token-from-a-file") && !shown.contains("new-key"));
}

#[test]
fn a_secret_in_the_environment_replaces_the_file_secret_however_given() {
    let f = Fixture::new(r#", "admin_token_file": "admin""#);
    f.write("admin", "admin-token-from-a-file");
    let c = f.load(&with_secrets(&[])).expect("loads");
    assert_eq!(c.admin_token.expose(), "admin-token-0123456789");
}

#[test]
fn a_secret_and_its_file_in_one_layer_are_refused() {
    let f = Fixture::new(r#", "admin_token": "admin-token-0123456789", "admin_token_file": "x""#);
    let err = error_of(f.load(&SECRETS[1..]));
    assert!(
        err.contains("admin_token and admin_token_file are both set"),
        "{err}"
    );
    let err = error_of(f.load(&[("BOOKING_GATEWAY_SECRET_FILE", "/nonexistent/gw")]));
    assert!(
        err.contains("gateway_secret_file: cannot read /nonexistent/gw"),
        "{err}"
    );
}

#[test]
fn secrets_have_no_default_and_every_missing_one_is_named() {
    let err = error_of(Fixture::new("").load(&[]));
    for field in [
        "admin_token",
        "gateway_secret",
        "gateway_client_secret",
        "webhook_secrets",
    ] {
        assert!(
            err.contains(&format!("- {field}: required, secrets have no default")),
            "{err}"
        );
    }
    assert!(err.contains("BOOKING_ADMIN_TOKEN_FILE"), "{err}");
    assert!(
        !err.contains("admin_token: at least"),
        "a missing value is reported once: {err}"
    );
    let err = error_of(Config::load(None, vars(SECRETS)));
    for field in [
        "jwks_url",
        "waiting_room_url",
        "gateway_url",
        "public_url",
        "shows",
    ] {
        assert!(
            err.contains(&format!("- {field}: required (no default)")),
            "{err}"
        );
    }
}

#[test]
fn every_bad_value_is_reported_at_once_with_its_field_and_rule() {
    let f = Fixture::new(
        r#", "channels": {"web": {"hold_secs": 480, "payment_secs": 500}},
  "default_channel": "kiosk", "max_seats_per_hold": 0, "leeway_secs": 601,
  "jwks_refresh_secs": 0, "queued_shows": ["other"], "mail_from": "tickets",
  "database_url": "mysql://db", "admin_token": "short", "gateway_timeout_ms": 0,
  "statistics_interval_ms": 1"#,
    );
    let err = error_of(f.load(&SECRETS[1..]));
    for line in [
        "invalid booking core configuration, 11 problems:",
        "- channels.web.payment_secs (500) must be shorter than channels.web.hold_secs (480)",
        "- default_channel: \"kiosk\" is not one of channels (web)",
        "- max_seats_per_hold: at least 1",
        "- leeway_secs: at most 600",
        "- jwks_refresh_secs: at least 1",
        "- queued_shows[0]: \"other\" is not one of shows",
        "- mail_from: must be an address local@domain",
        "- database_url: must start with sqlite: or postgres://",
        "- admin_token: at least 16 characters (got 5)",
        "- gateway_timeout_ms: must be > 0",
        "- statistics_interval_ms: 0 (off) or at least 100",
    ] {
        assert!(err.contains(line), "missing {line:?} in:\n{err}");
    }
}

#[test]
fn a_value_of_the_wrong_type_names_its_key_and_layer() {
    let f = Fixture::new("");
    let err = error_of(f.load(&with_secrets(&[("BOOKING_LEEWAY_SECS", "soon")])));
    assert!(
        err.contains("for key \"BOOKING_LEEWAY_SECS\" in environment"),
        "{err}"
    );
    let f = Fixture::new(r#", "channels": {"web": {"hold_secs": "long", "payment_secs": 1}}"#);
    let err = error_of(f.load(SECRETS));
    assert!(err.contains("for key \"channels.web.hold_secs\""), "{err}");
    assert!(err.contains(&f.path().display().to_string()), "{err}");
}

#[test]
fn unknown_keys_are_refused_in_the_file_and_the_environment() {
    let err = error_of(Fixture::new("").load(&with_secrets(&[("BOOKING_LEEWAY", "5")])));
    assert!(err.contains("unknown field: found `leeway`"), "{err}");
    let err = error_of(Fixture::new(r#", "leway_secs": 5"#).load(SECRETS));
    assert!(err.contains("unknown field: found `leway_secs`"), "{err}");
}

#[test]
fn a_venue_file_is_read_relative_to_the_config_file() {
    let f = Fixture::new("");
    f.write("hall.json", VENUE);
    let text = std::fs::read_to_string(f.path()).expect("read");
    let text = text.replace(
        &format!(r#""venue": {VENUE}"#),
        r#""venue_file": "hall.json""#,
    );
    std::fs::write(f.path(), text).expect("write");
    let c = f.load(SECRETS).expect("loads");
    assert_eq!(c.shows[0].venue.capacity(), 10);
    let err = error_of(f.load(&with_secrets(&[(
        "BOOKING_SHOWS",
        r#"[{"id": "demo", "venue_file": "missing.json"}]"#,
    )])));
    assert!(
        err.contains("- shows[0].venue_file: venue file missing.json"),
        "{err}"
    );
}

#[test]
fn the_venue_files_new_fields_are_checked_at_start_naming_the_field() {
    let f = Fixture::new("");
    let venue = VENUE.trim_end().trim_end_matches('}');
    // A file of the previous version still loads: EUR, UTC.
    let old = f.write("old.json", VENUE);
    let zoned = f.write(
        "zoned.json",
        &format!(r#"{venue}, "time_zone": "Europe/Paris", "currency": "CHF"}}"#),
    );
    let bad = f.write(
        "bad.json",
        &format!(r#"{venue}, "time_zone": "Europe/Atlantis"}}"#),
    );
    let shows = format!(
        r#"[{{"id": "a", "venue_file": "{}"}}, {{"id": "b", "venue_file": "{}"}}]"#,
        old.display(),
        zoned.display()
    );
    let c = f
        .load(&with_secrets(&[("BOOKING_SHOWS", &*shows.leak())]))
        .expect("loads");
    assert_eq!(
        (
            c.shows[0].venue.currency.as_str(),
            c.shows[0].venue.time_zone.as_str()
        ),
        ("EUR", "UTC")
    );
    assert_eq!(
        (
            c.shows[1].venue.currency.as_str(),
            c.shows[1].venue.time_zone.as_str()
        ),
        ("CHF", "Europe/Paris")
    );
    let shows = format!(r#"[{{"id": "demo", "venue_file": "{}"}}]"#, bad.display());
    let err = error_of(f.load(&with_secrets(&[("BOOKING_SHOWS", &*shows.leak())])));
    assert!(
        err.contains(
            "- shows[0].venue_file: time_zone: \"Europe/Atlantis\" is not an IANA time zone"
        ),
        "{err}"
    );
}

/// The binary checks the configuration before it binds: with the port already taken by this
/// test, a bind-first binary would fail on the port instead of naming the bad fields.
#[test]
fn the_binary_refuses_a_bad_config_before_binding_its_port() {
    let f = Fixture::new(
        r#", "admin_token": "short", "channels": {"web": {"hold_secs": 480, "payment_secs": 500}}"#,
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let out = Command::new(env!("CARGO_BIN_EXE_booking-core"))
        .arg("--config")
        .arg(f.path())
        .arg("--listen")
        .arg(taken.local_addr().expect("addr").to_string())
        .env_clear()
        .envs(vars(&SECRETS[1..]))
        .output()
        .expect("run booking-core");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(
        stderr.contains("admin_token: at least 16 characters (got 5)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "channels.web.payment_secs (500) must be shorter than channels.web.hold_secs (480)"
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("in use"),
        "bound before checking: {stderr}"
    );
}

#[test]
fn the_binary_names_a_missing_config_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_booking-core"))
        .args(["--config", "/nonexistent/booking.json"])
        .env_clear()
        .output()
        .expect("run booking-core");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("cannot read the configuration file /nonexistent/booking.json"),
        "{stderr}"
    );
}
