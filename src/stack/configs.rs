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
            join_hmac_key: random_hex_key(),
            signing_key_dir: None,
        }
    }
}

/// 256 random bits as 64 hex digits.
fn random_hex_key() -> String {
    format!(
        "{:032x}{:032x}",
        rand::random::<u128>(),
        rand::random::<u128>()
    )
}

/// The keys kept in `dir` (see `StackOptions::keys_dir`), created there on the first start:
/// `dir` and `signing/` mode 0700, `join-hmac.key` (0600) and `signing/active.pem` (0600, by
/// `waiting_room::keys::ensure_active`). Each appears whole or not at all (written aside, then
/// linked or renamed into place without replacing anything), so two starts racing on a new
/// directory end with the same keys. An unreadable or malformed key file is an error naming it,
/// never a silently replaced key (that would refuse every token it signed).
pub(crate) fn persisted_keys(dir: &std::path::Path) -> anyhow::Result<Keys> {
    use anyhow::Context;
    use std::os::unix::fs::PermissionsExt;
    let fresh = !present(dir).with_context(|| format!("keys directory {}", dir.display()))?;
    if !fresh && !dir.is_dir() {
        anyhow::bail!(
            "keys directory {} is a file, not a directory (choose another with --keys-dir)",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("keys directory {}", dir.display()))?;
    if fresh {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let aside = format!(".new-{}-{:x}", std::process::id(), rand::random::<u64>());
    let join_path = dir.join("join-hmac.key");
    if !present(&join_path).with_context(|| format!("reading {}", join_path.display()))? {
        let tmp = write_secret(dir, &format!("join-hmac.key{aside}"), &random_hex_key())
            .with_context(|| format!("writing {}", join_path.display()))?;
        // A link never replaces: if another start linked its key first, that one is kept.
        let linked = std::fs::hard_link(&tmp, &join_path);
        std::fs::remove_file(&tmp).ok();
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(e).with_context(|| format!("writing {}", join_path.display()));
            }
            _ => {}
        }
    }
    let join_hmac_key = std::fs::read_to_string(&join_path)
        .with_context(|| format!("reading {}", join_path.display()))?
        .trim()
        .to_owned();
    anyhow::ensure!(
        join_hmac_key.len() >= 32,
        "{}: the join-token key must be at least 32 characters (got {})",
        join_path.display(),
        join_hmac_key.len()
    );
    let signing = dir.join("signing");
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs(),
    )?;
    if !present(&signing).with_context(|| format!("reading {}", signing.display()))? {
        // Made aside and renamed into place: a rename onto a directory another start has
        // made already fails, and that one is kept.
        let tmp = dir.join(format!("signing{aside}"));
        waiting_room::keys::ensure_active(&tmp)
            .with_context(|| format!("creating a signing key in {}", signing.display()))?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
        if std::fs::rename(&tmp, &signing).is_err() {
            std::fs::remove_dir_all(&tmp).ok();
        }
    }
    let active = signing.join("active.pem");
    if !present(&active).with_context(|| format!("reading {}", signing.display()))? {
        // An existing directory without an active key (emptied by hand): make one in it
        // (another start refilling it at once keeps the same one).
        let made = waiting_room::keys::ensure_active(&signing)
            .with_context(|| format!("creating a signing key in {}", signing.display()))?;
        tracing::warn!(
            made,
            path = %active.display(),
            "no active signing key: made a new one; admission tokens signed by an earlier key are refused"
        );
    }
    // Read now, before anything binds: a malformed key stops `up` here, naming its file,
    // instead of after the gateway simulator has started.
    waiting_room::keys::load(&signing, now)
        .with_context(|| format!("reading the signing keys in {}", signing.display()))?;
    let mut kept = vec![dir.to_path_buf(), signing.clone(), join_path.clone()];
    for entry in
        std::fs::read_dir(&signing).with_context(|| format!("reading {}", signing.display()))?
    {
        kept.push(entry?.path());
    }
    for p in &kept {
        let mode = std::fs::metadata(p)
            .with_context(|| format!("reading {}", p.display()))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %p.display(),
                mode = format!("{:o}", mode & 0o777),
                "keys readable by other users: run chmod go= on this path"
            );
        }
    }
    Ok(Keys {
        join_hmac_key,
        signing_key_dir: Some(signing),
    })
}

/// Whether `p` is there, a dangling symbolic link included (`Path::try_exists` follows the
/// link and says no: a key mounted through a link that is briefly missing would then be
/// replaced by a new one, found by a newcomer). A dangling link then fails when read, naming it.
fn present(p: &std::path::Path) -> std::io::Result<bool> {
    match std::fs::symlink_metadata(p) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
    }

    /// `--keys-dir` naming a regular file says so (it said "File exists"), and leaves the file.
    #[test]
    fn a_keys_dir_that_is_a_file_is_named_as_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("keys");
        std::fs::write(&file, "not a directory").expect("write");
        let err = format!("{:#}", persisted_keys(&file).expect_err("must refuse"));
        assert!(err.contains("is a file, not a directory"), "{err}");
        assert!(err.contains("--keys-dir"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&file).expect("kept"),
            "not a directory"
        );
    }

    /// A signing key mounted through a link that points nowhere (a secret briefly missing) is
    /// an error naming it, and the link is left as it is (it was replaced by a new key, which
    /// would refuse every admission token the real one signed: found by a newcomer).
    #[test]
    fn a_dangling_link_to_the_signing_key_is_an_error_not_a_new_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        persisted_keys(dir.path()).expect("first start");
        let active = dir.path().join("signing/active.pem");
        std::fs::remove_file(&active).expect("rm");
        std::os::unix::fs::symlink(dir.path().join("mounted/active.pem"), &active).expect("ln");
        let err = format!("{:#}", persisted_keys(dir.path()).expect_err("must refuse"));
        assert!(err.contains("active.pem"), "{err}");
        assert!(
            std::fs::symlink_metadata(&active)
                .expect("still there")
                .file_type()
                .is_symlink(),
            "the link is kept"
        );
    }

    /// Eight starts racing on one new keys directory all start, with the same keys (before,
    /// one in five runs of two starts failed: "File exists", or a join key read half-written).
    #[test]
    fn starts_racing_on_a_new_keys_dir_all_get_the_same_keys() {
        for _ in 0..20 {
            let root = tempfile::tempdir().expect("tempdir");
            let dir = root.path().join("sale.keys");
            let gate = std::sync::Barrier::new(8);
            let got: Vec<(String, Vec<u8>)> = std::thread::scope(|s| {
                let runs: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            gate.wait();
                            let k = persisted_keys(&dir).expect("every start gets the keys");
                            let pem =
                                std::fs::read(k.signing_key_dir.expect("kept").join("active.pem"))
                                    .expect("active key");
                            (k.join_hmac_key, pem)
                        })
                    })
                    .collect();
                runs.into_iter()
                    .map(|r| r.join().expect("thread"))
                    .collect()
            });
            assert!(got.iter().all(|g| g == &got[0]), "one set of keys");
            assert_eq!(got[0].0.len(), 64);
            let names: Vec<_> = std::fs::read_dir(&dir)
                .expect("dir")
                .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
                .collect();
            assert_eq!(names.len(), 2, "nothing left aside: {names:?}");
            assert_eq!(mode(&dir), 0o700);
            assert_eq!(mode(&dir.join("signing")), 0o700);
            assert_eq!(mode(&dir.join("join-hmac.key")), 0o600);
        }
    }

    /// 256 random bits: no run of zeros where a random u128 was padded to 64 digits.
    #[test]
    fn the_join_key_is_64_random_hex_digits() {
        let keys: Vec<String> = (0..4).map(|_| random_hex_key()).collect();
        for k in &keys {
            assert_eq!(k.len(), 64);
            assert!(k.chars().all(|c| c.is_ascii_hexdigit()));
            assert_ne!(&k[..32], "0".repeat(32));
        }
        assert_ne!(keys[0][..32], keys[1][..32]);
    }
}
