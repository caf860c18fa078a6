//! The bench table printed at the end of a run.

use super::BenchReport;

/// A text table: figure, req/s, ratio to the ceiling, p50/p99 in milliseconds, counts; then the
/// Redis memory figure and the skipped figures.
pub fn table(r: &BenchReport) -> String {
    let mut out = format!(
        "\n== bench: queue {}, database {}, {} CPUs, {} connections, {} s per figure ==\n",
        r.queue_store, r.database, r.cpus, r.connections, r.duration_secs
    );
    out.push_str(&format!(
        "{:<10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>8} {:>6}\n",
        "figure", "req/s", "ratio", "p50 ms", "p99 ms", "ok", "4xx", "5xx"
    ));
    for f in &r.figures {
        let m = &f.m;
        out.push_str(&format!(
            "{:<10} {:>10.0} {:>7.2} {:>9.2} {:>9.2} {:>9} {:>8} {:>6}\n",
            m.name, m.rps, f.ratio, m.p50_ms, m.p99_ms, m.ok, m.other_4xx, m.errors
        ));
    }
    for f in &r.figures {
        out.push_str(&format!("  {}: {}\n", f.m.name, f.note));
    }
    let rps = |name: &str| r.figures.iter().find(|f| f.m.name == name).map(|f| f.m.rps);
    if let (Some(door), Some(ceiling)) = (rps("door-cached"), rps("bc-healthz")) {
        out.push_str(&format!(
            "door with a cached token: {door:.0} req/s = {:.2}x the booking core's /healthz ({ceiling:.0} req/s; target 0.9x)\n",
            door / ceiling.max(1e-9)
        ));
    }
    if let Some(raw) = &r.raw_db {
        out.push_str(&format!(
            "raw database: {:.0} transactions/s typed, {:.0}/s through sqlx Any = {:.2}x typed ({})\n",
            raw.tps, raw.any_tps, raw.any_over_typed, raw.method
        ));
        for f in r
            .figures
            .iter()
            .filter(|f| f.m.name.contains("hold") || f.m.name.contains("queue"))
        {
            out.push_str(&format!(
                "  {}: {:.0} req/s = {:.2}x raw, {:.0} held/s = {:.2}x raw\n",
                f.m.name,
                f.m.rps,
                f.m.rps / raw.tps.max(1e-9),
                f.m.ok_rps,
                f.m.ok_rps / raw.tps.max(1e-9)
            ));
        }
    }
    match &r.redis_memory {
        Some(m) => out.push_str(&format!(
            "redis memory: {:.1} bytes per queued fan ({} fans, used_memory {} → {} bytes; store joins {:.0}/s)\n  how: {}\n",
            m.bytes_per_fan, m.fans, m.used_before, m.used_after, m.store_joins_per_sec, m.method
        )),
        None => out.push_str("redis memory: not measured\n"),
    }
    for s in &r.skipped {
        out.push_str(&format!("skipped: {s}\n"));
    }
    out
}
