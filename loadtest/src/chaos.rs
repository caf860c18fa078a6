//! `rush --cluster DIR --chaos FILE|builtin`: the chaos rehearsal. While the fans run, a schedule
//! of operator actions is played against the cluster through `infra/cluster/ctl`: rolling
//! restarts (each node out of nginx, SIGTERM, started again, back in), a kill -9 of the node that
//! holds the admitter lock, a kill -9 of a Redis master so its replica takes over, a PostgreSQL
//! restart. Each action's time window is recorded; afterwards the checks read the fans' calls
//! (`timeline::spans`) and what the fans were told (`seen`):
//! - no fan request dropped by a rolling restart: no transport error (connection reset or
//!   refused), no 502/504 from a balancer, no 503 without `Retry-After`, among the calls in
//!   flight during a `ctl restart`; counted per endpoint;
//! - the admitter taken over after kill -9 within 2 × the lock TTL (each waiting-room node's
//!   `/metrics` says whether it holds the event's lock, `wr_admitter_lock_held`, and the TTL);
//! - after the Redis failover, no queue number held twice, nobody admitted twice: every fan
//!   known then reads its position again (same number) and every admitted fan claims again
//!   (same admission), right after the failover and at the end of the run.
//!
//! The schedule file is JSON: a list (or `{"steps": [...]}`) of `{"at_secs": S, "action": A,
//! ...}`, `at_secs` counted from the rush's start; steps run in order, each at its time or when
//! the previous one ended, whichever is later. Actions: `rolling_restart` (optional `nodes`,
//! default every waiting-room node then every booking-core node), `restart` (`node`),
//! `kill_admitter`, `failover_redis` (`kill`, default true: kill -9 the master; false: a
//! `CLUSTER FAILOVER`), `restart_postgres`.

use crate::cluster::Cluster;
use crate::model::Check;
use crate::seen;
use crate::stats::Stats;
use crate::timeline::{self, CallSpan};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One step of the schedule.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    /// Seconds from the rush's start; the step waits for the previous one to end.
    pub at_secs: f64,
    /// What to do.
    #[serde(flatten)]
    pub action: Action,
}

/// An operator action on the cluster.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// `ctl restart` each node in turn (default: every waiting-room node, then every
    /// booking-core node).
    RollingRestart {
        /// Nodes, in order; empty: all.
        #[serde(default)]
        nodes: Vec<String>,
    },
    /// `ctl restart NODE`.
    Restart {
        /// wr1.., bc1.., gateway.
        node: String,
    },
    /// kill -9 the waiting-room node holding the event's admitter lock, time the takeover,
    /// start the node again.
    KillAdmitter,
    /// `ctl failover-redis --event EVENT [--kill]`, then every fan reads its place again.
    FailoverRedis {
        /// kill -9 the master (default) rather than a `CLUSTER FAILOVER`.
        #[serde(default = "yes")]
        kill: bool,
    },
    /// `ctl restart-postgres`.
    RestartPostgres,
}

fn yes() -> bool {
    true
}

impl Action {
    fn label(&self) -> String {
        match self {
            Action::RollingRestart { .. } => "rolling restart".into(),
            Action::Restart { node } => format!("restart {node}"),
            Action::KillAdmitter => "kill -9 the admitter".into(),
            Action::FailoverRedis { kill: true } => "Redis failover (kill -9 the master)".into(),
            Action::FailoverRedis { kill: false } => "Redis failover (CLUSTER FAILOVER)".into(),
            Action::RestartPostgres => "PostgreSQL restart".into(),
        }
    }
}

/// The built-in schedule, from one second after the sale opens (`opens_in` seconds after the
/// start), one action after the other: a kill -9 of the admitter and a kill -9 of the queue's
/// Redis master while fans are still being let in, a PostgreSQL restart while they hold and
/// pay, then a rolling restart of every waiting-room and booking-core node.
pub fn builtin(opens_in: u64) -> Vec<Step> {
    let at = opens_in as f64 + 1.0;
    [
        Action::KillAdmitter,
        Action::FailoverRedis { kill: true },
        Action::RestartPostgres,
        Action::RollingRestart { nodes: Vec::new() },
    ]
    .into_iter()
    .map(|action| Step {
        at_secs: at,
        action,
    })
    .collect()
}

/// `builtin`, or the JSON schedule in the file `spec`.
pub fn load(spec: &str, opens_in: u64) -> anyhow::Result<Vec<Step>> {
    if spec == "builtin" {
        return Ok(builtin(opens_in));
    }
    let text = std::fs::read_to_string(spec)
        .map_err(|e| anyhow::anyhow!("--chaos {spec}: {e} (a JSON file, or `builtin`)"))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("--chaos {spec}: not JSON: {e}"))?;
    let steps = match v {
        Value::Object(mut o) => o.remove("steps").unwrap_or(Value::Null),
        other => other,
    };
    serde_json::from_value(steps).map_err(|e| anyhow::anyhow!("--chaos {spec}: {e}"))
}

/// When an action ran, ms since the rush's start.
#[derive(Debug, Clone)]
pub struct Window {
    /// What ran (`restart wr1`, …).
    pub what: String,
    /// Part of a rolling restart (`ctl restart`): no request may be dropped meanwhile.
    pub rolling: bool,
    /// Start, ms.
    pub start_ms: u64,
    /// End, ms.
    pub end_ms: u64,
}

/// The admitter's takeover after kill -9.
#[derive(Debug, Clone, Default)]
pub struct Takeover {
    /// The node killed (the lock's holder).
    pub killed: String,
    /// The lock's TTL as the nodes report it, ms.
    pub ttl_ms: u64,
    /// From the kill until another node held the lock, ms.
    pub taken_ms: Option<u64>,
    /// The node that took it.
    pub by: Option<String>,
    /// From the kill until the cursor moved again, ms (when it had fans to let in).
    pub cursor_ms: Option<u64>,
    /// Why the cursor could not move, when it could not.
    pub cursor_note: String,
}

/// What the fans were told again after the Redis failover.
#[derive(Debug, Clone, Default)]
pub struct Probe {
    /// Fans asked (every fan known then).
    pub fans: usize,
    /// Positions answered with a number the fan already had.
    pub numbers_checked: usize,
    /// Fans whose number changed (`was → now`).
    pub numbers_changed: Vec<String>,
    /// Admitted fans that claimed again and got an admission back.
    pub admissions_checked: usize,
    /// Admitted fans that got a different admission (another `jti`): admitted twice.
    pub readmitted: usize,
    /// How the claims were answered (status → count; 0: no answer).
    pub claim_answers: BTreeMap<u16, usize>,
    /// How long the probe took, ms.
    pub took_ms: u64,
}

/// What the schedule did and measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every action's window.
    pub windows: Vec<Window>,
    /// The kill -9 of the admitter.
    pub takeover: Option<Takeover>,
    /// Probes after the Redis failover (right after it; the end-of-run probe is added later).
    pub failover: Vec<(String, Probe)>,
    /// `ctl failover-redis` said (which master, how long until a replica took over).
    pub failover_log: String,
    /// Steps that failed.
    pub failures: Vec<String>,
}

/// What the chaos runner needs.
#[derive(Clone)]
pub struct Ctx {
    /// The cluster.
    pub cluster: Arc<Cluster>,
    /// The fans' client.
    pub client: reqwest::Client,
    /// The fans' figures (the probes' calls count there too).
    pub stats: Arc<Stats>,
    /// The rush's event.
    pub event: String,
    /// The rush's start.
    pub started: Instant,
}

fn ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

/// A probe running beside the schedule: its label and its task.
type Running = Vec<(String, tokio::task::JoinHandle<Probe>)>;

/// Plays `steps` in order; returns what happened once every step ran and every probe the steps
/// started has answered.
pub fn spawn(ctx: Ctx, steps: Vec<Step>) -> tokio::task::JoinHandle<Report> {
    tokio::spawn(async move {
        let mut report = Report::default();
        let mut probes: Running = Vec::new();
        for step in steps {
            let at = ctx.started + Duration::from_secs_f64(step.at_secs.max(0.0));
            tokio::time::sleep_until(at.into()).await;
            let t0 = ms(ctx.started);
            println!("chaos {:6.1}s: {}", t0 as f64 / 1000.0, step.action.label());
            if let Err(e) = run_step(&ctx, &step.action, &mut report, &mut probes).await {
                println!("chaos: {} failed: {e:#}", step.action.label());
                report
                    .failures
                    .push(format!("{}: {e:#}", step.action.label()));
            }
        }
        for (label, task) in probes {
            match task.await {
                Ok(p) => {
                    println!(
                        "chaos: {label}, {} fans read their place again in {:.1} s: {} numbers changed, {} admitted again with another token",
                        p.fans,
                        p.took_ms as f64 / 1000.0,
                        p.numbers_changed.len(),
                        p.readmitted
                    );
                    report.failover.push((label, p));
                }
                Err(e) => report.failures.push(format!("{label}: probe failed: {e}")),
            }
        }
        report
    })
}

async fn ctl(ctx: &Ctx, args: Vec<String>) -> anyhow::Result<String> {
    let c = ctx.cluster.clone();
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        c.ctl(&a)
    })
    .await?
}

/// Runs one ctl verb as a window.
async fn windowed(
    ctx: &Ctx,
    report: &mut Report,
    what: String,
    rolling: bool,
    args: Vec<String>,
) -> anyhow::Result<String> {
    let start_ms = ms(ctx.started);
    let out = ctl(ctx, args).await;
    let end_ms = ms(ctx.started);
    println!(
        "chaos {:6.1}s: {what} done in {:.1} s",
        end_ms as f64 / 1000.0,
        (end_ms - start_ms) as f64 / 1000.0
    );
    report.windows.push(Window {
        what,
        rolling,
        start_ms,
        end_ms,
    });
    out
}

async fn run_step(
    ctx: &Ctx,
    action: &Action,
    report: &mut Report,
    probes: &mut Running,
) -> anyhow::Result<()> {
    let s = |x: &str| x.to_owned();
    match action {
        Action::RollingRestart { nodes } => {
            let nodes: Vec<String> = if nodes.is_empty() {
                let c = &ctx.cluster;
                c.nodes_of("wr")
                    .into_iter()
                    .chain(c.nodes_of("bc"))
                    .map(|(n, _)| n)
                    .collect()
            } else {
                nodes.clone()
            };
            for n in nodes {
                windowed(
                    ctx,
                    report,
                    format!("restart {n}"),
                    true,
                    vec![s("restart"), n.clone()],
                )
                .await?;
            }
        }
        Action::Restart { node } => {
            windowed(
                ctx,
                report,
                format!("restart {node}"),
                true,
                vec![s("restart"), node.clone()],
            )
            .await?;
        }
        Action::KillAdmitter => kill_admitter(ctx, report).await?,
        Action::FailoverRedis { kill } => {
            let mut args = vec![s("failover-redis"), s("--event"), ctx.event.clone()];
            if *kill {
                args.push(s("--kill"));
            }
            let out = windowed(ctx, report, action.label(), false, args).await?;
            report.failover_log = out
                .lines()
                .filter(|l| {
                    l.contains("took over") || l.contains("is master") || l.contains("in sync")
                })
                .collect::<Vec<_>>()
                .join("; ");
            // Beside the next steps: with thousands of fans the probe waits for the same
            // connections as they do, and the schedule must not wait for it (measured: a
            // 3,000-fan rush's probe took 297 s and pushed every later step to the rush's end).
            let ctx = ctx.clone();
            probes.push((
                "right after the failover".into(),
                tokio::spawn(async move { probe(&ctx).await }),
            ));
        }
        Action::RestartPostgres => {
            windowed(
                ctx,
                report,
                action.label(),
                false,
                vec![s("restart-postgres")],
            )
            .await?;
        }
    }
    Ok(())
}

/// `(holds the event's lock, lock TTL in ms)` from one waiting-room node's `/metrics`.
async fn lock_of(client: &reqwest::Client, port: u16, event: &str) -> Option<(bool, u64)> {
    let text = client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let value = |line: &str| line.rsplit(' ').next()?.trim().parse::<f64>().ok();
    let label = format!("event=\"{event}\"");
    let held = text
        .lines()
        .filter(|l| l.starts_with("wr_admitter_lock_held{") && l.contains(&label))
        .find_map(value)
        .is_some_and(|v| v > 0.5);
    let ttl = text
        .lines()
        .filter(|l| l.starts_with("wr_admitter_lock_ttl_seconds"))
        .find_map(value)
        .map_or(3000, |s| (s * 1000.0) as u64);
    Some((held, ttl))
}

/// The cursor, the last number given, and the state, from the admin figures.
async fn cursor_of(ctx: &Ctx) -> Option<(u64, u64, String)> {
    let v: Value = ctx
        .client
        .get(format!(
            "{}/admin/events/{}",
            ctx.cluster.waiting_room, ctx.event
        ))
        .bearer_auth(&ctx.cluster.admin_token)
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    Some((
        v["cursor"].as_u64()?,
        v["last_number"].as_u64().unwrap_or(0),
        v["state"].as_str().unwrap_or("").to_owned(),
    ))
}

async fn kill_admitter(ctx: &Ctx, report: &mut Report) -> anyhow::Result<()> {
    let nodes = ctx.cluster.nodes_of("wr");
    anyhow::ensure!(
        nodes.len() > 1,
        "kill_admitter needs two waiting-room nodes"
    );
    // The holder: the one node whose /metrics says so (a takeover may be under way: wait).
    let found = Instant::now();
    let (holder, ttl_ms) = loop {
        let mut holders = Vec::new();
        let mut ttl = 3000;
        for (name, port) in &nodes {
            if let Some((held, t)) = lock_of(&ctx.client, *port, &ctx.event).await {
                ttl = t;
                if held {
                    holders.push(name.clone());
                }
            }
        }
        if holders.len() == 1 {
            break (holders.remove(0), ttl);
        }
        anyhow::ensure!(
            found.elapsed() < Duration::from_secs(20),
            "no single waiting-room node holds the admitter lock of {} (holders: {holders:?})",
            ctx.event
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let start_ms = ms(ctx.started);
    let t0 = Instant::now();
    ctl(ctx, vec!["kill".into(), holder.clone()]).await?;
    // The cursor as the killed admitter left it (read once it is gone: a step it took between
    // this read and the kill would look like a takeover).
    let before = cursor_of(ctx).await;
    let mut t = Takeover {
        killed: holder.clone(),
        ttl_ms,
        ..Default::default()
    };
    let can_move = match &before {
        Some((cursor, last, state)) if state == "open" && last > cursor => true,
        Some((cursor, last, state)) => {
            t.cursor_note = format!(
                "the cursor had nobody to let in (state {state}, cursor {cursor}, last number {last})"
            );
            false
        }
        None => {
            t.cursor_note = "the figures did not answer at the kill".into();
            false
        }
    };
    let limit = Duration::from_millis(ttl_ms * 4);
    let mut tick = 0u32;
    while t0.elapsed() < limit && (t.taken_ms.is_none() || (can_move && t.cursor_ms.is_none())) {
        if t.taken_ms.is_none() {
            for (name, port) in nodes.iter().filter(|(n, _)| *n != holder) {
                if let Some((true, _)) = lock_of(&ctx.client, *port, &ctx.event).await {
                    t.taken_ms = Some(t0.elapsed().as_millis() as u64);
                    t.by = Some(name.clone());
                    break;
                }
            }
        }
        if can_move && t.cursor_ms.is_none() && tick.is_multiple_of(2) {
            if let (Some((now, _, _)), Some((was, _, _))) = (cursor_of(ctx).await, &before) {
                if now > *was {
                    t.cursor_ms = Some(t0.elapsed().as_millis() as u64);
                }
            }
        }
        tick += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if can_move && t.cursor_ms.is_none() {
        t.cursor_note = format!("the cursor did not move within {} ms", limit.as_millis());
    }
    println!(
        "chaos: {holder} (admitter) killed; lock taken by {} after {} (TTL {ttl_ms} ms); cursor moving again after {}",
        t.by.as_deref().unwrap_or("nobody"),
        t.taken_ms.map_or("never".into(), |m| format!("{m} ms")),
        t.cursor_ms.map_or(t.cursor_note.clone(), |m| format!("{m} ms"))
    );
    report.takeover = Some(t);
    let started = ctl(ctx, vec!["start".into(), holder.clone()]).await;
    report.windows.push(Window {
        what: format!("kill -9 {holder} (admitter) and start it again"),
        rolling: false,
        start_ms,
        end_ms: ms(ctx.started),
    });
    started.map(|_| ())
}

/// Every fan known so far reads its position again, and every admitted fan claims again, through
/// the fans' entry point: the number must be the one it had, the admission the same `jti`.
pub async fn probe(ctx: &Ctx) -> Probe {
    use futures::StreamExt as _;
    let fans = seen::snapshot();
    let count = fans.len();
    let t0 = Instant::now();
    let answers: Vec<(Option<String>, Option<bool>, Option<u16>)> = futures::stream::iter(fans)
        .map(|(token, f)| {
            let (c, stats) = (ctx.client.clone(), ctx.stats.clone());
            let (wr, ev) = (ctx.cluster.cdn.clone(), ctx.event.clone());
            async move {
                let mut changed = None;
                if let Some(n) = f.number {
                    let req = c
                        .get(format!("{wr}/api/events/{ev}/position"))
                        .bearer_auth(&token);
                    if let Ok((s, body, _)) =
                        crate::calls::call(&c, &stats, "probe_position", req).await
                    {
                        if s.is_success() {
                            changed = Some(match body["queue_number"].as_u64() {
                                Some(now) if now != n => format!("{n} → {now}"),
                                Some(_) => String::new(),
                                None => format!("{n} → none"),
                            });
                        }
                    }
                }
                let mut again = None;
                let mut status = None;
                if let Some(jti) = &f.jti {
                    status = Some(0);
                    let req = c
                        .post(format!("{wr}/api/events/{ev}/admission"))
                        .bearer_auth(&token);
                    if let Ok((s, body, _)) =
                        crate::calls::call(&c, &stats, "probe_claim", req).await
                    {
                        status = Some(s.as_u16());
                        if s.is_success() {
                            let other = body["admission_token"]
                                .as_str()
                                .and_then(crate::calls::jwt_claims)
                                .and_then(|cl| cl["jti"].as_str().map(str::to_owned));
                            again = Some(other.as_deref() != Some(jti.as_str()));
                        }
                    }
                }
                (changed, again, status)
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let mut p = Probe {
        fans: count,
        took_ms: t0.elapsed().as_millis() as u64,
        ..Default::default()
    };
    for (changed, again, status) in answers {
        if let Some(s) = status {
            *p.claim_answers.entry(s).or_default() += 1;
        }
        if let Some(c) = changed {
            p.numbers_checked += 1;
            if !c.is_empty() {
                p.numbers_changed.push(c);
            }
        }
        if let Some(a) = again {
            p.admissions_checked += 1;
            p.readmitted += usize::from(a);
        }
    }
    p
}

/// A call counted as dropped: a transport error (reset, refused), a balancer's 502 or 504, or
/// a 503 without `Retry-After`.
fn dropped(c: &CallSpan) -> bool {
    matches!(c.status, 0 | 502 | 504) || (c.status == 503 && !c.retry_later)
}

/// A server error as the rush counts them: a transport error or a 5xx other than 503 +
/// `Retry-After`.
/// Server errors answered while a process was being killed with -9. A crash loses the requests
/// it was serving (nginx cannot send a POST that reached it again; the fans retry): the rush's
/// server-error check counts these apart and says how many. Stops and restarts drop nothing
/// (their own check).
pub fn crash_errors(report: &Report) -> u64 {
    let spans = timeline::spans();
    in_windows_by(
        &spans,
        &report.windows,
        |w| w.what.starts_with("kill -9"),
        server_error,
    )
    .values()
    .map(|x| x.1)
    .sum()
}

fn server_error(c: &CallSpan) -> bool {
    c.status == 0 || (c.status >= 500 && !(c.status == 503 && c.retry_later))
}

/// Calls in flight during the windows `pick` selects: `(in flight, dropped)` per endpoint.
fn in_windows(
    spans: &[CallSpan],
    windows: &[Window],
    pick: impl Fn(&Window) -> bool,
) -> BTreeMap<&'static str, (u64, u64)> {
    in_windows_by(spans, windows, pick, dropped)
}

fn in_windows_by(
    spans: &[CallSpan],
    windows: &[Window],
    pick: impl Fn(&Window) -> bool,
    bad: fn(&CallSpan) -> bool,
) -> BTreeMap<&'static str, (u64, u64)> {
    let mut out = BTreeMap::<&'static str, (u64, u64)>::new();
    let ws: Vec<&Window> = windows.iter().filter(|w| pick(w)).collect();
    for c in spans {
        if ws
            .iter()
            .any(|w| c.sent_ms <= w.end_ms && c.done_ms >= w.start_ms)
        {
            let e = out.entry(c.endpoint).or_default();
            e.0 += 1;
            e.1 += u64::from(bad(c));
        }
    }
    out
}

fn per_endpoint(m: &BTreeMap<&'static str, (u64, u64)>) -> String {
    m.iter()
        .map(|(e, (n, d))| format!("{e} {d}/{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The chaos checks and figures, after the run (and the end-of-run probe, in `report`).
pub fn checks(report: &Report, store: &str) -> Vec<Check> {
    let spans = timeline::spans();
    let mut out = Vec::new();
    out.push(Check {
        name: "every chaos step ran",
        pass: report.failures.is_empty(),
        detail: if report.failures.is_empty() {
            format!("{} actions", report.windows.len())
        } else {
            report.failures.join(" | ")
        },
    });

    let rolling = in_windows(&spans, &report.windows, |w| w.rolling);
    let restarted: Vec<&str> = report
        .windows
        .iter()
        .filter(|w| w.rolling)
        .map(|w| w.what.trim_start_matches("restart "))
        .collect();
    let secs: f64 = report
        .windows
        .iter()
        .filter(|w| w.rolling)
        .map(|w| (w.end_ms - w.start_ms) as f64 / 1000.0)
        .sum();
    let (inflight, drops) = rolling
        .values()
        .fold((0, 0), |(n, d), (a, b)| (n + a, d + b));
    println!("\n== chaos figures ==");
    for w in &report.windows {
        let one = std::slice::from_ref(w);
        let errors = in_windows_by(&spans, one, |_| true, server_error);
        let later = in_windows_by(&spans, one, |_| true, |c| c.status == 503 && c.retry_later);
        let n: u64 = errors.values().map(|x| x.0).sum();
        let mut kinds = BTreeMap::<(&str, u16), u64>::new();
        for c in spans
            .iter()
            .filter(|c| server_error(c) && c.sent_ms <= w.end_ms && c.done_ms >= w.start_ms)
        {
            *kinds.entry((c.endpoint, c.status)).or_default() += 1;
        }
        let bad: Vec<String> = kinds
            .iter()
            .map(|((e, st), n)| match st {
                0 => format!("{e} {n} × transport error"),
                st => format!("{e} {n} × {st}"),
            })
            .collect();
        println!(
            "  {:>6.1}s – {:>6.1}s  {:<48} {n} requests in flight, {} server errors{}, {} answered 503 + Retry-After",
            w.start_ms as f64 / 1000.0,
            w.end_ms as f64 / 1000.0,
            w.what,
            errors.values().map(|x| x.1).sum::<u64>(),
            if bad.is_empty() { String::new() } else { format!(" ({})", bad.join(", ")) },
            later.values().map(|x| x.1).sum::<u64>()
        );
    }
    println!(
        "requests dropped during rolling restarts: {drops} of {inflight} in flight ({})",
        per_endpoint(&rolling)
    );
    let others = in_windows(&spans, &report.windows, |w| !w.rolling);
    println!(
        "requests dropped during the other actions (kill -9, failover, PostgreSQL): {} of {} ({})",
        others.values().map(|x| x.1).sum::<u64>(),
        others.values().map(|x| x.0).sum::<u64>(),
        per_endpoint(&others)
    );
    if !restarted.is_empty() {
        out.push(Check {
            name: "no fan request dropped by a rolling restart",
            pass: drops == 0 && inflight > 0,
            detail: format!(
                "{drops} dropped of {inflight} requests in flight while {} restarted one at a time ({secs:.1} s in all); per endpoint dropped/in flight: {}",
                restarted.join(", "),
                per_endpoint(&rolling)
            ),
        });
    }

    if let Some(t) = &report.takeover {
        println!(
            "admitter takeover after kill -9: {} (lock TTL {} ms){}",
            t.taken_ms.map_or("none".into(), |m| format!("{m} ms")),
            t.ttl_ms,
            t.cursor_ms
                .map_or(format!("; {}", t.cursor_note), |m| format!(
                    "; cursor moving again after {m} ms"
                ))
        );
        out.push(Check {
            name: "admitter takeover after kill -9 within 2 × the lock TTL",
            pass: t.taken_ms.is_some_and(|m| m <= 2 * t.ttl_ms),
            detail: format!(
                "{} killed; {} took the lock after {} (limit {} ms = 2 × TTL {} ms); {}",
                t.killed,
                t.by.as_deref().unwrap_or("no node"),
                t.taken_ms.map_or("never".into(), |m| format!("{m} ms")),
                2 * t.ttl_ms,
                t.ttl_ms,
                t.cursor_ms.map_or(t.cursor_note.clone(), |m| format!(
                    "the cursor moved again after {m} ms"
                ))
            ),
        });
    }

    if !report.failover.is_empty() {
        let fans = seen::snapshot();
        let (numbers, admitted) = seen::duplicates(&fans);
        let changed: usize = report
            .failover
            .iter()
            .map(|(_, p)| p.numbers_changed.len())
            .sum();
        let readmitted: usize = report.failover.iter().map(|(_, p)| p.readmitted).sum();
        // At the end the queue must answer again: no admitted fan's claim still refused as
        // unavailable (503) or unanswered.
        let stuck: usize = report
            .failover
            .last()
            .map(|(_, p)| {
                p.claim_answers
                    .iter()
                    .filter(|(s, _)| matches!(s, 0 | 500..))
                    .map(|(_, n)| n)
                    .sum()
            })
            .unwrap_or(0);
        let probes = report
            .failover
            .iter()
            .map(|(when, p)| {
                format!(
                    "{when} ({:.1} s): {} fans, {} numbers read again ({} changed{}), {} admissions claimed again ({} with another token; answers {:?})",
                    p.took_ms as f64 / 1000.0,
                    p.fans,
                    p.numbers_checked,
                    p.numbers_changed.len(),
                    if p.numbers_changed.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", p.numbers_changed.iter().take(5).cloned().collect::<Vec<_>>().join(", "))
                    },
                    p.admissions_checked,
                    p.readmitted,
                    p.claim_answers
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let queue = if store == "cluster" {
            "queue on the Redis Cluster".to_owned()
        } else {
            format!("queue on its own redis-server (store {store}): the Redis Cluster failover did not touch it")
        };
        println!(
            "after the Redis failover: {} numbers held twice, {} admitted twice, {changed} numbers changed, {readmitted} re-admissions with another token ({queue}; {})",
            numbers.len(),
            admitted.len(),
            report.failover_log
        );
        out.push(Check {
            name: "after the Redis failover, no number held twice and no one admitted twice",
            pass: numbers.is_empty()
                && admitted.is_empty()
                && changed == 0
                && readmitted == 0
                && stuck == 0,
            detail: format!(
                "{} fans: {} numbers held twice {:?}, {} visitors or admissions twice, {stuck} claims still unanswered or 5xx at the end; {probes}; {queue}",
                fans.len(),
                numbers.len(),
                numbers.iter().take(5).collect::<Vec<_>>(),
                admitted.len(),
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_file_parses_and_builtin_has_every_action() {
        let steps: Vec<Step> = serde_json::from_str(
            r#"[{"at_secs": 5, "action": "restart", "node": "wr1"},
                {"at_secs": 6, "action": "rolling_restart"},
                {"at_secs": 7, "action": "kill_admitter"},
                {"at_secs": 8, "action": "failover_redis", "kill": false},
                {"at_secs": 9, "action": "restart_postgres"}]"#,
        )
        .expect("parses");
        assert_eq!(steps.len(), 5);
        assert!(matches!(&steps[0].action, Action::Restart { node } if node == "wr1"));
        assert!(matches!(
            steps[3].action,
            Action::FailoverRedis { kill: false }
        ));
        let b = builtin(3);
        assert_eq!(b.len(), 4);
        assert!(matches!(b[1].action, Action::FailoverRedis { kill: true }));
        assert!((b[0].at_secs - 4.0).abs() < 1e-9);
    }

    #[test]
    fn drops_are_counted_only_inside_rolling_windows() {
        let span = |sent, done, status, retry_later| CallSpan {
            sent_ms: sent,
            done_ms: done,
            endpoint: "join",
            status,
            retry_later,
        };
        let windows = vec![
            Window {
                what: "restart wr1".into(),
                rolling: true,
                start_ms: 1000,
                end_ms: 2000,
            },
            Window {
                what: "kill".into(),
                rolling: false,
                start_ms: 5000,
                end_ms: 6000,
            },
        ];
        let spans = vec![
            span(900, 1100, 200, false),  // in flight, answered
            span(1500, 1600, 502, false), // dropped
            span(1500, 1600, 503, true),  // come back later: not dropped
            span(1500, 1600, 0, false),   // reset: dropped
            span(5500, 5600, 502, false), // the kill's window, not a rolling restart
            span(3000, 3100, 502, false), // outside every window
        ];
        let m = in_windows(&spans, &windows, |w| w.rolling);
        assert_eq!(m["join"], (4, 2));
    }
}
