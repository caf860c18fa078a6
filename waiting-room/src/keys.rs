//! The signing-key directory: Ed25519 private keys as PKCS#8 PEM files, their role in the name.
//!
//! - `active.pem` signs admission tokens;
//! - `next-{created}.pem` is published in the JWKS but signs nothing yet (`created`: epoch s);
//! - `retired-{until}.pem` is published until epoch second `until`, then pruned.
//!
//! `generate` creates the active key (first call) or the next key. `rotate` promotes the next
//! key — refused until it has been published for `min_published_secs`, so every verifier's
//! cached JWKS (max-age 60 s, nodes re-read the directory every 5 s) already holds it — retires
//! the old active key until `now + keep_secs` (set `keep_secs` ≥ the longest admission lifetime
//! plus the verifier's leeway, so the last token it signed expires first) and generates a new
//! next key. Every step writes a temporary file and renames it, and a copy of the retiring key
//! is written before the active key is replaced, so a reader never sees a directory without an
//! active key.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::pkcs8::{spki::der::pem::LineEnding, DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The keys a directory holds at a moment.
#[derive(Debug)]
pub struct KeySet {
    /// The signing key.
    pub active: SigningKey,
    /// Other published public keys (next, retired and not yet expired).
    pub published: Vec<VerifyingKey>,
}

/// Default for `rotate`'s `min_published_secs`: JWKS max-age (60 s) + re-read (5 s) + margin.
pub const MIN_PUBLISHED_SECS: i64 = 120;

fn read_key(path: &Path) -> anyhow::Result<SigningKey> {
    let pem = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        anyhow::anyhow!(
            "{}: not an Ed25519 private key in PKCS#8 PEM (\"-----BEGIN PRIVATE KEY-----\", as \
             `openssl genpkey -algorithm ed25519` writes; RFC 8410): {e}",
            path.display()
        )
    })
}

fn write_key(path: &Path, key: &SigningKey) -> anyhow::Result<()> {
    let tmp = write_aside(path, key)?;
    let renamed = std::fs::rename(&tmp, path);
    if renamed.is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    Ok(renamed?)
}

/// Writes `key` (mode 0600) beside `path` under a name of its own (process id and a random
/// number: two processes writing the same key file never share a temporary) and returns it.
fn write_aside(path: &Path, key: &SigningKey) -> anyhow::Result<PathBuf> {
    let pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| anyhow::anyhow!("PKCS#8 PEM: {e}"))?;
    let tmp = path.with_extension(format!(
        "tmp-{}-{:x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::write(&tmp, pem.as_bytes())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(tmp)
}

/// Puts `key` at `path` only if nothing is there (a hard link from a file written aside never
/// replaces); false when another writer's file was there first (kept as it is).
fn write_key_new(path: &Path, key: &SigningKey) -> anyhow::Result<bool> {
    let tmp = write_aside(path, key)?;
    let linked = std::fs::hard_link(&tmp, path);
    std::fs::remove_file(&tmp).ok();
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `(path, number)` of every file named `{prefix}-{number}.pem`.
fn numbered(dir: &Path, prefix: &str) -> anyhow::Result<Vec<(PathBuf, i64)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let n = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.strip_suffix(".pem"))
            .and_then(|r| r.parse::<i64>().ok());
        if let Some(n) = n {
            out.push((path, n));
        }
    }
    out.sort_by_key(|(_, n)| *n);
    Ok(out)
}

/// What `generate` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Generated {
    /// The first key: `active.pem`.
    Active(PathBuf),
    /// A next key, published before it signs.
    Next(PathBuf),
}

/// Creates `dir` if needed and an active key in it if there is none; returns whether this
/// call made it. Two processes at once on one directory (two starts refilling it) both succeed
/// and the directory keeps one key whole: the first linked into place, the other discarded.
pub fn ensure_active(dir: &Path) -> anyhow::Result<bool> {
    std::fs::create_dir_all(dir)?;
    let active = dir.join("active.pem");
    if active.exists() {
        return Ok(false);
    }
    write_key_new(&active, &SigningKey::generate(&mut rand::rngs::OsRng))
}

/// Creates `dir` if needed, then the active key if there is none, else a next key if there is
/// none (refuses when both exist). `now`: epoch seconds.
pub fn generate(dir: &Path, now: i64) -> anyhow::Result<Generated> {
    std::fs::create_dir_all(dir)?;
    let fresh = SigningKey::generate(&mut rand::rngs::OsRng);
    let active = dir.join("active.pem");
    if !active.exists() && write_key_new(&active, &fresh)? {
        return Ok(Generated::Active(active));
    }
    anyhow::ensure!(
        numbered(dir, "next")?.is_empty(),
        "a next key exists already: rotate first"
    );
    let next = dir.join(format!("next-{now}.pem"));
    write_key(&next, &fresh)?;
    Ok(Generated::Next(next))
}

/// Promotes the next key (see the module doc); returns the retired file. `now`: epoch seconds.
pub fn rotate(
    dir: &Path,
    now: i64,
    keep_secs: u64,
    min_published_secs: i64,
) -> anyhow::Result<PathBuf> {
    let next = numbered(dir, "next")?;
    let Some((next_path, created)) = next.last().cloned() else {
        anyhow::bail!("no next key: run `keys generate` first and wait until it is published");
    };
    anyhow::ensure!(
        now - created >= min_published_secs,
        "the next key was published {}s ago; wait until {min_published_secs}s so every verifier has it",
        now - created
    );
    let active_path = dir.join("active.pem");
    let old = read_key(&active_path)?;
    let next_key = read_key(&next_path)?;
    let retired = dir.join(format!("retired-{}.pem", now + keep_secs as i64));
    write_key(&retired, &old)?;
    write_key(&active_path, &next_key)?;
    std::fs::remove_file(&next_path)?;
    for (p, until) in numbered(dir, "retired")? {
        if until <= now {
            std::fs::remove_file(p)?;
        }
    }
    generate(dir, now)?;
    Ok(retired)
}

/// RFC 7638 thumbprint of an Ed25519 OKP key (members in lexicographic order, no spaces).
pub fn jwk_thumbprint(raw: &[u8; 32]) -> String {
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(raw)
    );
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// Revokes the published key `kid` (case W09, DECISIONS "Tokens, capacity and clocks"): a next
/// or retired key file is removed, so the key leaves the JWKS at the nodes' next directory
/// re-read (≤ 5 s) and booking doors refuse its tokens within one JWKS refresh (60 s by
/// default). Retiring lets a key's tokens live until they expire; revoking ends them. Admitted
/// fans whose token died claim again and get a token signed by the active key, same place.
///
/// Errors: `kid` is the active key (rotate first, then revoke the retired key), or no published
/// key has that `kid`. Returns the removed file.
pub fn revoke(dir: &Path, kid: &str) -> anyhow::Result<PathBuf> {
    let active = read_key(&dir.join("active.pem"))?;
    anyhow::ensure!(
        jwk_thumbprint(&active.verifying_key().to_bytes()) != kid,
        "{kid} is the active signing key: run `keys rotate` first, then revoke it"
    );
    for role in ["retired", "next"] {
        for (p, _) in numbered(dir, role)? {
            if jwk_thumbprint(&read_key(&p)?.verifying_key().to_bytes()) == kid {
                std::fs::remove_file(&p)?;
                return Ok(p);
            }
        }
    }
    anyhow::bail!("no published key has kid {kid}")
}

/// Reads the directory at `now` (epoch s): the active key, and every next key and retired key
/// whose `until` is still ahead.
pub fn load(dir: &Path, now: i64) -> anyhow::Result<KeySet> {
    let active = read_key(&dir.join("active.pem"))?;
    let mut published = Vec::new();
    for (p, _) in numbered(dir, "next")? {
        published.push(read_key(&p)?.verifying_key());
    }
    for (p, until) in numbered(dir, "retired")? {
        if until > now {
            published.push(read_key(&p)?.verifying_key());
        }
    }
    Ok(KeySet { active, published })
}
