//! Thin binary (STYLE.md rule 1): `serve` reads the config and runs the library; `admin` calls
//! the admin API and prints its JSON answer (`watch` prints live figures every second);
//! `verify-draw` recomputes a published pre-queue draw (`waiting_room::draw::verify`).

/// mimalloc rather than glibc malloc: many small short-lived allocations per request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "waiting-room",
    about = "Virtual queue in front of the booking core"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the waiting room.
    Serve {
        /// JSON configuration file.
        #[arg(long)]
        config: PathBuf,
        /// Listen address, e.g. 127.0.0.1:8080.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: String,
    },
    /// Signing keys in a key directory (PKCS#8 PEM files).
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
    /// Operator commands against a running waiting room.
    Admin {
        /// Base URL of the waiting room.
        #[arg(long)]
        url: String,
        /// Admin bearer token.
        #[arg(long, env = "WAITING_ROOM_ADMIN_TOKEN")]
        token: String,
        /// Your name, recorded in the audit trail (`X-Operator`).
        #[arg(long, env = "WAITING_ROOM_OPERATOR", default_value = "cli")]
        operator: String,
        /// Event id.
        #[arg(long)]
        event: String,
        #[command(subcommand)]
        action: Action,
    },
    /// Recompute a published pre-queue draw (GET /api/events/{event}/draw): checks SHA-256(seed)
    /// against the commitment, the list against its hash and every position against the seed;
    /// prints the positions (or one fan's). Exits 1 on any mismatch, 2 when it cannot read it,
    /// 3 when the given visitor is not in the draw.
    VerifyDraw {
        /// The published draw: an http(s) URL or a JSON file.
        source: String,
        /// Print only this fan's number (their visitor id; it is hashed here, never sent).
        #[arg(long)]
        visitor: Option<String>,
    },
}

#[derive(Subcommand)]
enum KeysAction {
    /// Create the active key (first call) or the next key (published before it signs).
    Generate {
        /// Key directory.
        #[arg(long)]
        dir: PathBuf,
    },
    /// Promote the next key, retire the active one, generate a new next key.
    Rotate {
        /// Key directory.
        #[arg(long)]
        dir: PathBuf,
        /// Keep the retired key in the JWKS this long, seconds (≥ longest admission lifetime
        /// plus the verifier's leeway).
        #[arg(long, default_value_t = 660)]
        keep_secs: u64,
        /// Refuse unless the next key has been published at least this long, seconds.
        #[arg(long, default_value_t = waiting_room::keys::MIN_PUBLISHED_SECS)]
        min_published_secs: i64,
    },
    /// Revoke a published (retired or next) key: it leaves the JWKS at once, and booking doors
    /// refuse its tokens within one JWKS refresh (60 s by default). Retiring lets tokens live
    /// until they expire; revoking ends them (a compromised key).
    Revoke {
        /// Key directory.
        #[arg(long)]
        dir: PathBuf,
        /// The key's `kid` (its JWK thumbprint, as in the JWKS).
        #[arg(long)]
        kid: String,
    },
}

#[derive(Subcommand)]
enum Action {
    /// Print the live figures.
    Figures,
    /// Set the admit rate (admissions per second).
    SetRate { rate: f64 },
    /// Set the most concurrent admitted sessions.
    SetMaxActive { max_active: u64 },
    /// Hold the cursor.
    Pause,
    /// Move the cursor again.
    Resume,
    /// Open now (number the pre-queue in draw order).
    Open,
    /// Close: no more joins or claims.
    Close,
    /// Mark sold out.
    SoldOut,
    /// Print the audit trail (who changed what, when).
    Audit {
        /// Most recent entries to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Print live figures every second until interrupted.
    Watch,
    /// Print the address rules (issue 15 item 2).
    Rules,
    /// Add an address rule: `add-rule 203.0.113.0/24 shadow --note "scalper farm"`.
    AddRule {
        /// IPv4 or IPv6 range (CIDR) or one address.
        cidr: String,
        /// block, bypass, challenge or shadow.
        action: String,
        /// challenge only: leading zero bits (1..=28, default 16).
        #[arg(long)]
        pow_bits: Option<u32>,
        /// Why (kept with the rule).
        #[arg(long)]
        note: Option<String>,
    },
    /// Delete an address rule by id.
    DeleteRule { id: String },
    /// Switch the queue mode: scheduled, always_on, pass_through or maintenance (issue 14).
    SetMode { mode: String },
    /// Show a message to every waiting fan: `broadcast --en "…" --fr "…"` (at least one).
    Broadcast {
        /// English text.
        #[arg(long)]
        en: Option<String>,
        /// French text.
        #[arg(long)]
        fr: Option<String>,
    },
    /// Take the message off the pages.
    ClearBroadcast,
    /// Schedule the phases (epoch seconds): `phases --sale-opens-at T [--prequeue-opens-at T]
    /// [--sale-ends-at T]`.
    Phases {
        /// The pre-queue opens (the event is closed until then).
        #[arg(long)]
        prequeue_opens_at: Option<i64>,
        /// The sale opens.
        #[arg(long)]
        sale_opens_at: i64,
        /// The sale ends (closed).
        #[arg(long)]
        sale_ends_at: Option<i64>,
    },
    /// Clear the schedule.
    ClearPhases,
    /// Print the shadow line (who, which rule, when).
    Shadow {
        /// First entries to show.
        #[arg(long, default_value_t = 500)]
        limit: usize,
    },
    /// Release a visitor from the shadow line to the back of the fans' line.
    Release { visitor: String },
    /// Create the event (POST /admin/events): `create --opens-at 2026-10-25T19:00
    /// --time-zone Europe/London --admit-rate 50 --max-active 2000`.
    Create {
        /// Opening: Unix seconds, an RFC 3339 instant with its offset, or a local wall-clock
        /// time `YYYY-MM-DDTHH:MM` read in `--time-zone` (checked here first: a time in a DST
        /// gap, or an ambiguous one without an offset, is refused before anything is sent).
        #[arg(long)]
        opens_at: String,
        /// IANA time zone of a local `--opens-at` (default: the configured event's, else UTC).
        #[arg(long)]
        time_zone: Option<String>,
        /// Admissions per second.
        #[arg(long)]
        admit_rate: f64,
        /// Most concurrent admitted sessions.
        #[arg(long)]
        max_active: u64,
    },
}

/// The body of `create`: `opens_at` as Unix seconds when it is a number, else as text; a local
/// time with a `time_zone` is checked with the server's rules first, so a DST gap or an
/// ambiguous fall-back time is a named error here (`nonexistent-local-time: …`).
fn create_body(
    event: &str,
    opens_at: &str,
    time_zone: Option<&str>,
    admit_rate: f64,
    max_active: u64,
) -> anyhow::Result<serde_json::Value> {
    let at = match opens_at.parse::<i64>() {
        Ok(unix) => serde_json::json!(unix),
        Err(_) => {
            if let Some(zone) = time_zone {
                sale_common::localtime::to_instant(opens_at, zone)
                    .map_err(|e| anyhow::anyhow!("create: --opens-at: {}: {e}", e.kind()))?;
            }
            serde_json::json!(opens_at)
        }
    };
    let mut body = serde_json::json!({"id": event, "opens_at": at,
        "admit_rate": admit_rate, "max_active": max_active});
    if let Some(zone) = time_zone {
        body["time_zone"] = zone.into();
    }
    Ok(body)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().cmd {
        Cmd::Serve { config, listen } => {
            let config = waiting_room::Config::from_file(&config)?;
            config.validate()?;
            // The signing keys are configuration too: read before the port is bound, so a
            // directory without `active.pem` stops the start before it listens (newcomer
            // review: it logged "listening", then exited).
            if let Some(dir) = &config.signing_key_dir {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)?
                    .as_secs() as i64;
                waiting_room::keys::load(dir, now).map_err(|e| {
                    anyhow::anyhow!(
                        "signing_key_dir {}: {e:#} (create the first key with `waiting-room keys generate --dir {}`)",
                        dir.display(),
                        dir.display()
                    )
                })?;
            }
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            tracing::info!(addr = %listener.local_addr()?, "waiting room listening");
            waiting_room::serve(listener, config, sale_common::shutdown::signal()).await
        }
        Cmd::Keys { action } => keys(action),
        Cmd::VerifyDraw { source, visitor } => {
            let code = verify_draw(&source, visitor.as_deref()).await;
            std::process::exit(code)
        }
        Cmd::Admin {
            url,
            token,
            operator,
            event,
            action,
        } => {
            let base = format!("{}/admin/events/{event}", url.trim_end_matches('/'));
            match action {
                Action::Watch => watch(&base, &token).await,
                action => admin(&base, &token, &operator, action).await,
            }
        }
    }
}

fn keys(action: KeysAction) -> anyhow::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs() as i64;
    match action {
        KeysAction::Generate { dir } => {
            println!("{:?}", waiting_room::keys::generate(&dir, now)?);
        }
        KeysAction::Rotate {
            dir,
            keep_secs,
            min_published_secs,
        } => {
            let retired = waiting_room::keys::rotate(&dir, now, keep_secs, min_published_secs)?;
            println!("rotated; retired key kept at {}", retired.display());
        }
        KeysAction::Revoke { dir, kid } => {
            let removed = waiting_room::keys::revoke(&dir, &kid)?;
            println!(
                "revoked {kid} ({} removed): it leaves the JWKS within 5 s; booking doors refuse \
                 its tokens within one JWKS refresh",
                removed.display()
            );
        }
    }
    Ok(())
}

/// Reads the published draw from a URL or a file.
async fn read_draw(source: &str) -> anyhow::Result<waiting_room::draw::Publication> {
    let bytes = if source.starts_with("http://") || source.starts_with("https://") {
        let resp = reqwest::get(source).await?;
        anyhow::ensure!(resp.status().is_success(), "{source}: {}", resp.status());
        resp.bytes().await?.to_vec()
    } else {
        std::fs::read(source)?
    };
    Ok(serde_json::from_slice(&bytes)?)
}

/// `verify-draw`: 0 when every position checks out, 1 on a mismatch, 2 when unreadable, 3 when
/// the given visitor is not in the draw, 4 when only the commitment is published (not opened).
async fn verify_draw(source: &str, visitor: Option<&str>) -> i32 {
    let p = match read_draw(source).await {
        Ok(p) => p,
        Err(e) => {
            eprintln!("verify-draw: cannot read {source}: {e:#}");
            return 2;
        }
    };
    let positions = match waiting_room::draw::verify(&p) {
        Ok(v) => v,
        Err(waiting_room::draw::Mismatch::NotPublished) => {
            eprintln!(
                "verify-draw: event {} has not opened yet: only the commitment {} is published; check again after the opening",
                p.event, p.commitment
            );
            return 4;
        }
        Err(m) => {
            eprintln!("verify-draw: MISMATCH for event {}: {m}", p.event);
            return 1;
        }
    };
    println!(
        "draw of event {} verified: SHA-256(seed) = commitment {}, list hash {}, {} pre-queued fans",
        p.event,
        p.commitment,
        p.visitors_hash.as_deref().unwrap_or(""),
        positions.len()
    );
    match visitor {
        Some(v) => {
            let mine = waiting_room::draw::public_id(v);
            match positions.iter().find(|(_, id)| *id == mine) {
                Some((n, id)) => println!("visitor {v}: public id {id}, queue number {n}"),
                None => {
                    eprintln!("verify-draw: visitor {v} (public id {mine}) is not in the draw");
                    return 3;
                }
            }
        }
        None => {
            for (n, id) in &positions {
                println!("{n} {id}");
            }
        }
    }
    0
}

/// One line of live figures per second (ends on Ctrl-C or an error).
async fn watch(base: &str, token: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    println!(
        "time      state     cursor  waiting  active/max   rate  admitted/s  skipped  stock-wait"
    );
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        let resp = client.get(base).bearer_auth(token).send().await?;
        anyhow::ensure!(resp.status().is_success(), "figures: {}", resp.status());
        let f: serde_json::Value = resp.json().await?;
        let n = |k: &str| f[k].as_f64().unwrap_or(0.0);
        println!(
            "{:<9} {:<9} {:>6} {:>8} {:>6}/{:<5} {:>5} {:>11.2} {:>8} {:>11}",
            f["updated_at"].as_i64().unwrap_or(0) % 86_400,
            f["state"].as_str().unwrap_or("?"),
            n("cursor"),
            n("queue_length"),
            n("active"),
            n("max_active"),
            n("admit_rate"),
            n("admitted_per_sec"),
            n("skipped_total"),
            // Places in live holds the line waits for (the stock rule), 0 when moving.
            n("waiting_for_stock"),
        );
    }
}

async fn admin(base: &str, token: &str, operator: &str, action: Action) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let req = match action {
        Action::Figures => client.get(base),
        Action::SetRate { rate } => {
            // JSON has no NaN or infinity: serde would send `null`, which the API reads as
            // "no change" and answers 200.
            anyhow::ensure!(
                rate.is_finite() && rate > 0.0,
                "set-rate: the rate must be a number > 0 (got {rate})"
            );
            client
                .patch(base)
                .json(&serde_json::json!({"admit_rate": rate}))
        }
        Action::SetMaxActive { max_active } => client
            .patch(base)
            .json(&serde_json::json!({"max_active": max_active})),
        Action::Pause => client.post(format!("{base}/pause")),
        Action::Resume => client.post(format!("{base}/resume")),
        Action::Open => client.post(format!("{base}/open")),
        Action::Close => client.post(format!("{base}/close")),
        Action::SoldOut => client.post(format!("{base}/sold-out")),
        Action::Audit { limit } => client.get(format!("{base}/audit?limit={limit}")),
        Action::Watch => anyhow::bail!("watch is handled separately"),
        Action::Rules => client.get(format!("{base}/rules")),
        Action::AddRule {
            cidr,
            action,
            pow_bits,
            note,
        } => client.post(format!("{base}/rules")).json(
            &serde_json::json!({"cidr": cidr, "action": action, "pow_bits": pow_bits, "note": note}),
        ),
        Action::DeleteRule { id } => client.delete(format!("{base}/rules/{id}")),
        Action::SetMode { mode } => client
            .put(format!("{base}/mode"))
            .json(&serde_json::json!({"mode": mode})),
        Action::Broadcast { en, fr } => client
            .put(format!("{base}/broadcast"))
            .json(&serde_json::json!({"en": en, "fr": fr})),
        Action::ClearBroadcast => client.delete(format!("{base}/broadcast")),
        Action::Phases {
            prequeue_opens_at,
            sale_opens_at,
            sale_ends_at,
        } => client.put(format!("{base}/phases")).json(&serde_json::json!({
            "prequeue_opens_at": prequeue_opens_at,
            "sale_opens_at": sale_opens_at,
            "sale_ends_at": sale_ends_at,
        })),
        Action::ClearPhases => client.delete(format!("{base}/phases")),
        Action::Shadow { limit } => client.get(format!("{base}/shadow?limit={limit}")),
        Action::Release { visitor } => client.post(format!("{base}/shadow/{visitor}/release")),
        Action::Create {
            opens_at,
            time_zone,
            admit_rate,
            max_active,
        } => {
            let (events, event) = base.rsplit_once('/').unwrap_or((base, ""));
            let body = create_body(
                event,
                &opens_at,
                time_zone.as_deref(),
                admit_rate,
                max_active,
            )?;
            client.post(events).json(&body)
        }
    };
    let resp = req
        .bearer_auth(token)
        .header("x-operator", operator)
        .send()
        .await?;
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
    println!("{}", serde_json::to_string_pretty(&body)?);
    anyhow::ensure!(status.is_success(), "admin call failed: {status}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::create_body;

    #[test]
    fn create_refuses_a_dst_gap_or_an_ambiguous_local_opening_by_name() {
        let london = Some("Europe/London");
        let gap = create_body("e", "2026-03-29T01:30", london, 1.0, 1).unwrap_err();
        assert!(
            gap.to_string()
                .starts_with("create: --opens-at: nonexistent-local-time"),
            "{gap}"
        );
        let fold = create_body("e", "2026-10-25T01:30", london, 1.0, 1).unwrap_err();
        assert!(fold.to_string().contains("ambiguous-local-time"), "{fold}");
        let ok = create_body("e", "2026-10-25T01:30+00:00", london, 1.0, 1).unwrap();
        assert_eq!(
            (&ok["opens_at"], &ok["time_zone"]),
            (&"2026-10-25T01:30+00:00".into(), &"Europe/London".into())
        );
        assert_eq!(
            create_body("e", "1792888200", None, 1.0, 1).unwrap()["opens_at"],
            1_792_888_200
        );
    }
}
