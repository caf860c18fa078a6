//! `rush --cluster DIR`: the entry points of a cluster started by `infra/cluster/up --dir DIR`,
//! read from its `state.json` (URLs, admin token, node ports, the `ctl` command), and the
//! waiting-room event the rush runs on: one of the booking core's extra shows (`up --show ID`),
//! created through the admin API when the rush starts so that the sale opens when the rush wants
//! it to, or an existing event still in its pre-queue.

use anyhow::Context as _;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running cluster, as `state.json` describes it.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The state directory.
    pub dir: PathBuf,
    /// `infra/cluster/ctl`.
    pub ctl: PathBuf,
    /// `up --event`'s event (opening time fixed when the cluster started).
    pub event: String,
    /// Shows of the booking core with no waiting-room event yet (`up --show`).
    pub shows: Vec<String>,
    /// Admin bearer token of both services.
    pub admin_token: String,
    /// The CDN in front of the waiting room's balancer: the fans' entry point.
    pub cdn: String,
    /// The waiting room's balancer.
    pub waiting_room: String,
    /// The booking core's balancer.
    pub booking: String,
    /// The payment-gateway simulator.
    pub gateway: String,
    /// The waiting room's queue store: `single` (a redis-server of its own) or `cluster`.
    pub store: String,
    /// Every node's port by name (wr1.., bc1.., redis1.., postgres, …).
    pub nodes: BTreeMap<String, u16>,
}

impl Cluster {
    /// Reads `DIR/state.json` (written by `up` once every node answers).
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join("state.json");
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "{}: not a running cluster (infra/cluster/up --dir DIR writes it once ready)",
                path.display()
            )
        })?;
        let v: Value = serde_json::from_str(&text).context("state.json")?;
        let s = |p: &str| -> anyhow::Result<String> {
            v.pointer(p)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| anyhow::anyhow!("state.json: {p} missing"))
        };
        let ctl = v["ctl"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/cluster/ctl"));
        let nodes = v["nodes"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, n)| Some((k.clone(), u16::try_from(n["port"].as_u64()?).ok()?)))
            .collect();
        Ok(Self {
            dir: dir.to_path_buf(),
            ctl,
            event: s("/event")?,
            shows: v["shows"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect(),
            admin_token: s("/admin_token")?,
            cdn: s("/urls/cdn")?,
            waiting_room: s("/urls/waiting_room")?,
            booking: s("/urls/booking")?,
            gateway: s("/urls/gateway")?,
            store: v["store"].as_str().unwrap_or("single").to_owned(),
            nodes,
        })
    }

    /// Nodes whose name starts with `prefix` (`wr`, `bc`), in name order, with their ports.
    pub fn nodes_of(&self, prefix: &str) -> Vec<(String, u16)> {
        self.nodes
            .iter()
            .filter(|(k, _)| {
                k.strip_prefix(prefix)
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
            })
            .map(|(k, p)| (k.clone(), *p))
            .collect()
    }

    /// Runs `ctl DIR ARGS…` (blocking); its output, or an error with that output.
    pub fn ctl(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(&self.ctl)
            .arg(&self.dir)
            .args(args)
            .output()
            .with_context(|| format!("run {}", self.ctl.display()))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        anyhow::ensure!(out.status.success(), "ctl {args:?} failed:\n{text}");
        Ok(text)
    }
}

/// What the rush's event is to be when the waiting room does not have it yet.
#[derive(Debug, Clone, Copy)]
pub struct NewEvent {
    /// Seconds from now until the sale opens.
    pub opens_in: u64,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Live admitted sessions at most.
    pub max_active: u64,
    /// Admission token lifetime, seconds.
    pub admission_ttl: u64,
}

/// Makes sure `event` is ready for a rush on the cluster: the booking core has the show, and
/// the waiting room has the event in its pre-queue (created now with `new` when missing).
/// Returns the event's `max_active` and opening time (Unix seconds).
pub async fn prepare_event(
    client: &reqwest::Client,
    c: &Cluster,
    event: &str,
    new: NewEvent,
) -> anyhow::Result<(u64, i64)> {
    let show = client
        .get(format!("{}/api/shows/{event}/sections", c.booking))
        .send()
        .await?;
    anyhow::ensure!(
        show.status().is_success(),
        "the booking core has no show {event:?} ({}): start the cluster with `infra/cluster/up --show {event}`",
        show.status()
    );
    let url = format!("{}/admin/events/{event}", c.waiting_room);
    let r = client.get(&url).bearer_auth(&c.admin_token).send().await?;
    let figures: Value = if r.status() == reqwest::StatusCode::NOT_FOUND {
        let opens_at = time::OffsetDateTime::now_utc().unix_timestamp() + new.opens_in as i64;
        let body = serde_json::json!({"id": event, "opens_at": opens_at,
            "admit_rate": new.admit_rate, "max_active": new.max_active,
            "admission_ttl_secs": new.admission_ttl, "booking_url": c.booking});
        client
            .post(format!("{}/admin/events", c.waiting_room))
            .bearer_auth(&c.admin_token)
            .header("X-Operator", "loadtest")
            .json(&body)
            .send()
            .await?
            .error_for_status()
            .context("create the event through the waiting room's admin API")?;
        return Ok((new.max_active, opens_at));
    } else {
        r.error_for_status()?.json().await?
    };
    // An event already past its pre-queue would make this run a continuation (no pre-queue,
    // no shuffle, stale figures): refuse it, as `--spawn` refuses a used Redis.
    anyhow::ensure!(
        figures["state"] == "prequeue",
        "event {event:?} exists and is {} (not in its pre-queue): use another show (`up --show ID`) or a fresh cluster",
        figures["state"]
    );
    let max_active = figures["max_active"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("the waiting room's figures carry no max_active"))?;
    let opens_at = figures["opens_at"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("the waiting room's figures carry no opens_at"))?;
    Ok((max_active, opens_at))
}

/// Waits (at most 10 s) until the fans' entry point serves the event's status document: every
/// node republishes it at its next tick, and the rush's late arrivals read the opening time
/// from it.
pub async fn wait_for_status(
    client: &reqwest::Client,
    c: &Cluster,
    event: &str,
) -> anyhow::Result<()> {
    let url = format!("{}/status/{event}.json", c.cdn);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Ok(r) = client.get(&url).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        anyhow::ensure!(
            std::time::Instant::now() < until,
            "{url} not served within 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
