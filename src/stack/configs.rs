//! Builds each service's `Config` from the launcher's options and the wiring (URLs and shared
//! secrets of the other services), and checks all three before anything starts.

use super::{StackOptions, Wiring};
use sale_common::config::Invalid;
use sale_common::Secret;

/// The three services' configurations, every one checked; the error lists every problem of
/// every service, each line naming the field and its rule (`admin_token: at least 16
/// characters (got 5)`), instead of a service that does not come up.
pub(crate) fn checked(
    opts: &StackOptions,
    w: &Wiring<'_>,
) -> anyhow::Result<(
    gateway_sim::Config,
    waiting_room::Config,
    booking_core::Config,
)> {
    let gw = gateway(opts, w);
    let wr = waiting_room(opts, w);
    let bc = booking(opts, w);
    let mut refused = Vec::new();
    let mut note = |service: &str, r: anyhow::Result<()>| match r {
        Ok(()) => {}
        // Already says whose configuration it is.
        Err(e) if e.is::<Invalid>() => refused.push(e.to_string()),
        Err(e) => refused.push(format!("{service}: {e:#}")),
    };
    note("payment gateway simulator", gw.validate());
    note(
        "waiting room",
        wr.as_ref().map_err(clone_err).and_then(|c| c.validate()),
    );
    note(
        "booking core",
        bc.as_ref().map_err(clone_err).and_then(|c| c.validate()),
    );
    anyhow::ensure!(
        refused.is_empty(),
        "nothing was started, the configuration is refused.\n{}",
        refused.join("\n")
    );
    Ok((gw, wr?, bc?))
}

fn clone_err(e: &anyhow::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

/// Writes `secret` to `dir/name`, readable by this user only; returns the path.
pub(crate) fn write_secret(
    dir: &std::path::Path,
    name: &str,
    secret: &str,
) -> anyhow::Result<std::path::PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    writeln!(f, "{secret}")?;
    Ok(path)
}

/// The waiting room's keys for one start: fresh ones, or those kept in `StackOptions::keys_dir`.
#[derive(Debug)]
pub(crate) struct Keys {
    /// The join-token HMAC key (64 hex digits).
    pub join_hmac_key: String,
    /// The signing-key directory (`None`: the waiting room generates a key in memory).
    pub signing_key_dir: Option<std::path::PathBuf>,
}

impl Keys {
    /// Keys of this start only: a random join key and an in-memory signing key.
    pub(crate) fn fresh() -> Self {
        Self {
            join_hmac_key: format!("{:064x}", rand::random::<u128>()),
            signing_key_dir: None,
        }
    }
}

/// The keys kept in `dir` (see `StackOptions::keys_dir`), created there on the first start:
/// `dir` mode 0700, `join-hmac.key` (0600) and `signing/active.pem` (0600, by
/// `waiting_room::keys::generate`). An unreadable or malformed key file is an error naming it,
/// never a silently replaced key (that would refuse every token it signed).
pub(crate) fn persisted_keys(dir: &std::path::Path) -> anyhow::Result<Keys> {
    use anyhow::Context;
    use std::os::unix::fs::PermissionsExt;
    let fresh = !dir.exists();
    std::fs::create_dir_all(dir).with_context(|| format!("keys directory {}", dir.display()))?;
    if fresh {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let join_path = dir.join("join-hmac.key");
    if !join_path.exists() {
        write_secret(dir, "join-hmac.key", &Keys::fresh().join_hmac_key)
            .with_context(|| format!("writing {}", join_path.display()))?;
    }
    let join_hmac_key = std::fs::read_to_string(&join_path)
        .with_context(|| format!("reading {}", join_path.display()))?
        .trim()
        .to_owned();
    anyhow::ensure!(
        join_hmac_key.len() >= 32,
        "{}: the join-token key must be at least 32 characters (got {}); delete the file for a new one",
        join_path.display(),
        join_hmac_key.len()
    );
    let signing = dir.join("signing");
    if !signing.join("active.pem").exists() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        waiting_room::keys::generate(&signing, i64::try_from(now)?)
            .with_context(|| format!("creating a signing key in {}", signing.display()))?;
    }
    Ok(Keys {
        join_hmac_key,
        signing_key_dir: Some(signing),
    })
}

/// The gateway simulator: checkout links point at its own public URL.
pub(crate) fn gateway(_opts: &StackOptions, w: &Wiring<'_>) -> gateway_sim::Config {
    let mut cfg = gateway_sim::Config::demo(w.gw_url, Secret::new(w.gateway_secret));
    cfg.seed = None;
    cfg
}

/// The waiting room: one event, opening `opens_in_secs` after now, queue in memory or Redis;
/// status documents to `status_dir` and, with `s3_bucket`, to S3.
pub(crate) fn waiting_room(
    opts: &StackOptions,
    w: &Wiring<'_>,
) -> anyhow::Result<waiting_room::Config> {
    let e = &opts.event;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let opens_at = i64::try_from(now + e.opens_in_secs)?;
    let mut cfg = waiting_room::Config::demo(&e.id, opens_at, w.bc_url);
    anyhow::ensure!(
        cfg.events[0].id.as_str() == e.id,
        "invalid event id {:?}",
        e.id
    );
    cfg.events[0].admit_rate = e.admit_rate;
    cfg.events[0].max_active = e.max_active;
    cfg.events[0].admission_ttl_secs = e.admission_ttl_secs;
    cfg.store = match &opts.redis_url {
        Some(url) => waiting_room::config::StoreConfig::Redis { url: url.clone() },
        None => waiting_room::config::StoreConfig::Memory,
    };
    cfg.admin_token = Secret::new(opts.admin_token.clone());
    cfg.join_hmac_key = Secret::new(w.keys.join_hmac_key.clone());
    cfg.signing_key_dir = w.keys.signing_key_dir.clone();
    cfg.static_dir = Some(opts.static_dir.clone());
    cfg.join_rate_per_sec = u64::from(opts.join_rate_per_sec);
    cfg.join_burst = opts.join_burst;
    cfg.fan_rate_per_sec = u64::from(opts.fan_rate_per_sec);
    cfg.fan_burst = opts.fan_burst;
    cfg.service_token = Some(Secret::new(w.service_token));
    cfg.status_dir = Some(w.status_dir.to_path_buf());
    cfg.s3_bucket = opts.s3_bucket.clone();
    cfg.s3_prefix = opts.s3_prefix.clone();
    cfg.gate_audiences = opts.gate_audiences.clone();
    cfg.events[0].closed_loop = opts.closed_loop.clone();
    cfg.report_sample_secs = opts.report_sample_secs;
    let about = &opts.about;
    cfg.events[0].name = about.name.clone();
    cfg.events[0].venue = about.venue.clone();
    cfg.events[0].starts_at = about.starts_at;
    if let Some(tz) = &about.time_zone {
        cfg.events[0].time_zone = tz.clone();
    }
    Ok(cfg)
}

/// The booking core: one show with the event's id on a venue of at least `opts.seats` seats
/// (5 sections — more above 7,500 seats, one per 1,500, at most 26 — of rows of 20, rounded up
/// to whole rows) or the venue file, with an optional
/// `FLOOR` pool, verifying admission tokens from the
/// waiting room's JWKS and paying through the simulator.
pub(crate) fn booking(opts: &StackOptions, w: &Wiring<'_>) -> anyhow::Result<booking_core::Config> {
    let mut cfg = booking_core::Config::demo(
        &opts.event.id,
        format!("{}/.well-known/jwks.json", w.wr_url),
        w.gw_url,
        Secret::new(w.gateway_secret),
        w.bc_url,
    );
    cfg.database_url = w.database_url.to_owned();
    cfg.waiting_room_url = w.wr_url.to_owned();
    cfg.admin_token = Secret::new(opts.admin_token.clone());
    cfg.hold_rate_per_min = opts.hold_rate_per_min;
    if opts.hold_queue {
        cfg.queued_shows = vec![opts.event.id.clone()];
    }
    cfg.static_dir = Some(opts.static_dir.clone());
    cfg.channels.insert(
        "web".into(),
        booking_core::Channel {
            hold_secs: opts.hold_ttl_secs,
            payment_secs: opts.payment_session_secs,
            // Unset: a minute, or a quarter of a short session (the browser tests' 15 s → 3 s).
            min_checkout_secs: None,
        },
    );
    cfg.service_token = Some(Secret::new(w.service_token));
    cfg.shows[0].venue = venue(opts)?;
    cfg.gate_audiences = opts.gate_audiences.clone();
    Ok(cfg)
}

/// The show's venue: the venue file, or 5..=26 sections (`A`, `B`, …; one per 1,500 seats above
/// 7,500, so no section's seat map is huge) of rows of 20 seats; plus the `FLOOR` pool
/// of `opts.pool_places` places when that is not 0 (replacing a `FLOOR` of the file).
fn venue(opts: &StackOptions) -> anyhow::Result<booking_core::config::Venue> {
    let mut venue = match &opts.venue {
        Some(path) => booking_core::config::Venue::load(path)?,
        None => {
            let mut v = booking_core::config::Venue::demo();
            let n = opts.seats.div_ceil(1_500).clamp(5, 26);
            let template = v.sections[4].clone();
            for c in (b'F'..=b'Z').take(n as usize - 5) {
                let mut s = template.clone();
                s.name = char::from(c).to_string();
                v.sections.push(s);
            }
            v.seats_per_row = 20;
            v.rows = opts.seats.div_ceil(n * 20).max(1);
            v
        }
    };
    if opts.pool_places > 0 {
        venue.pools.retain(|p| p.id != "FLOOR");
        venue.pools.push(booking_core::config::PoolSpec {
            id: "FLOOR".into(),
            price_cents: 6_500,
            capacity: opts.pool_places,
        });
    }
    Ok(venue)
}
