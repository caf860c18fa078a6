//! The rehearsal's report folder: `summary.json` (figures, checks, per-second series),
//! `summary.md` (the same for people) and PNG plots over time (1-second buckets): queue length
//! and cursor, admissions/s, holds/s and 409s/s, paid/s, p99 latency per endpoint.

use crate::model::Check;
use crate::timeline::Timeline;
use sale_common::plots::{line_chart, per_second, Line};
use serde_json::{json, Value};
use std::path::Path;

/// The PNG files every report has.
pub const PLOTS: [&str; 5] = [
    "queue.png",
    "admissions.png",
    "holds.png",
    "paid.png",
    "latency_p99.png",
];

/// Writes the folder. `figures`: the run's headline figures; `endpoints`: per-endpoint rows.
pub fn write(
    dir: &Path,
    figures: &Value,
    endpoints: &Value,
    checks: &[Check],
    t: &Timeline,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let checks_json: Vec<Value> = checks
        .iter()
        .map(|c| json!({"name": c.name, "pass": c.pass, "detail": c.detail}))
        .collect();
    let summary = json!({
        "figures": figures,
        "endpoints": endpoints,
        "checks": checks_json,
        "all_pass": checks.iter().all(|c| c.pass),
        "timeline": t,
        "plots": PLOTS,
    });
    std::fs::write(
        dir.join("summary.json"),
        serde_json::to_vec_pretty(&summary)?,
    )?;
    std::fs::write(dir.join("summary.md"), markdown(figures, endpoints, checks))?;
    plots(dir, t)
}

fn markdown(figures: &Value, endpoints: &Value, checks: &[Check]) -> String {
    let mut md = String::from("# Rush rehearsal\n\n## Figures\n\n| figure | value |\n|---|---|\n");
    if let Some(o) = figures.as_object() {
        for (k, v) in o {
            md.push_str(&format!("| {k} | {v} |\n"));
        }
    }
    md.push_str("\n## Endpoints\n\n| endpoint | calls | calls/s | p50 ms | p99 ms | max ms | 4xx | 5xx |\n|---|---|---|---|---|---|---|---|\n");
    for e in endpoints.as_array().into_iter().flatten() {
        md.push_str(&format!(
            "| {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {} | {} |\n",
            e["endpoint"].as_str().unwrap_or(""),
            e["calls"],
            e["calls_per_sec"].as_f64().unwrap_or(0.0),
            e["p50_ms"].as_f64().unwrap_or(0.0),
            e["p99_ms"].as_f64().unwrap_or(0.0),
            e["max_ms"].as_f64().unwrap_or(0.0),
            e["client_errors"],
            e["server_errors"]
        ));
    }
    md.push_str("\n## Checks\n\n");
    for c in checks {
        md.push_str(&format!(
            "- **{}** {}: {}\n",
            if c.pass { "PASS" } else { "FAIL" },
            c.name,
            c.detail
        ));
    }
    md.push_str("\n## Plots (1-second buckets)\n\n");
    for p in PLOTS {
        md.push_str(&format!("![{p}]({p})\n"));
    }
    md
}

fn plots(dir: &Path, t: &Timeline) -> anyhow::Result<()> {
    let s = |f: fn(&crate::timeline::Sample) -> u64| -> Vec<(f64, f64)> {
        t.samples
            .iter()
            .map(|x| (x.t_ms as f64 / 1000.0, f(x) as f64))
            .collect()
    };
    let queue: Vec<Line> = vec![
        ("queue length (live)".into(), s(|x| x.queue_length)),
        ("cursor".into(), s(|x| x.cursor)),
        ("active sessions".into(), s(|x| x.active)),
    ];
    line_chart(
        &dir.join(PLOTS[0]),
        "Queue length and cursor",
        "fans / number",
        &queue,
    )?;
    let adm: Vec<Line> = vec![("admissions/s".into(), per_second(&t.admissions))];
    line_chart(
        &dir.join(PLOTS[1]),
        "Admissions per second",
        "per second",
        &adm,
    )?;
    let holds: Vec<Line> = vec![
        ("holds/s (201)".into(), per_second(&t.holds)),
        ("409s/s".into(), per_second(&t.conflicts)),
    ];
    line_chart(
        &dir.join(PLOTS[2]),
        "Holds and conflicts per second",
        "per second",
        &holds,
    )?;
    let paid: Vec<Line> = vec![("paid/s".into(), per_second(&t.paid))];
    line_chart(
        &dir.join(PLOTS[3]),
        "Paid holds per second",
        "per second",
        &paid,
    )?;
    let lat: Vec<Line> = t
        .p99_ms
        .iter()
        .map(|(k, v)| {
            let pts = v
                .iter()
                .enumerate()
                .filter(|(_, y)| **y > 0.0)
                .map(|(i, y)| (i as f64, *y))
                .collect();
            ((*k).to_string(), pts)
        })
        .collect();
    line_chart(
        &dir.join(PLOTS[4]),
        "p99 latency per endpoint",
        "milliseconds",
        &lat,
    )
}
