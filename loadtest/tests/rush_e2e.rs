//! End-to-end: runs the real `loadtest rush --spawn` binary for a few hundred fans, once with the
//! queue in a real Redis server (started here on a free port) and once on the embedded defaults
//! with a general-admission pool and a seat-pick / best-available / pool mix,
//! once on PostgreSQL with gateway faults (10% failures, 10% cancels, 5% timeouts, 5% duplicate
//! webhooks), once on PostgreSQL with a venue of interval resources and 30% of fans adding one
//! to their seats, and requires every invariant check to print PASS and the process to exit 0.

use sale_common::testsupport::{PostgresServer, RedisServer};
use std::process::Command;

/// A rush on a stack of its own. The sale opens 5 s after the services are asked to start: on a
/// loaded machine (the whole suite in parallel) starting them took over 2 s, and the sale
/// had opened before the first status read (newcomer review: "already exists ... state open").
fn rush(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args([
            "rush", "--spawn", "--fans", "300", "--seats", "240", "--quiet",
        ])
        .args([
            "--admit-rate",
            "200",
            "--max-active",
            "120",
            "--admission-ttl",
            "15",
        ])
        .args(["--opens-in", "5", "--timeout", "240"])
        .args(extra)
        .output()
        .expect("run loadtest");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "loadtest failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

fn assert_checks(stdout: &str) {
    let passes = stdout.lines().filter(|l| l.starts_with("PASS ")).count();
    assert!(
        !stdout.lines().any(|l| l.starts_with("FAIL ")),
        "a check failed:\n{stdout}"
    );
    // The seven invariant checks at least; the rehearsal checks add more (PASS or SKIP).
    assert!(passes >= 7, "every check printed PASS:\n{stdout}");
    assert!(stdout.contains("zero seats sold twice"), "{stdout}");
    // Issue 18 item 5: the wait range the page showed against the wait (report-only here).
    let line = stdout
        .lines()
        .find(|l| l.starts_with("wait estimate: "))
        .unwrap_or_else(|| panic!("no wait estimate line:\n{stdout}"));
    assert!(
        !line.contains("(0 fans;"),
        "fans were shown a range: {line}"
    );
    println!("{line}");
    assert!(
        stdout.contains("PASS wait estimate inside the shown range ≥ 90%")
            && stdout.contains("PASS wait range high ≤ 3 × low"),
        "{stdout}"
    );
}

#[test]
fn rush_with_redis_passes_every_check() {
    let redis = RedisServer::start();
    let out = rush(&["--redis", &redis.url(), "--event", "rush-redis"]);
    assert_checks(&out);
}

#[test]
fn rush_on_embedded_defaults_passes_every_check() {
    // The mixed journey: a 50-place `FLOOR` pool, 30% of fans holding by best available and
    // 20% in the pool, the rest picking seats.
    let out = rush(&[
        "--event",
        "rush-mem",
        "--pool-places",
        "50",
        "--best-available-share",
        "0.3",
        "--pool-share",
        "0.2",
    ]);
    assert_checks(&out);
    assert!(out.contains("pool places sold"), "{out}");
}

/// Issue 17: a venue with interval resources (six parking bays with a 15-minute buffer, two
/// meet-and-greet rooms) and 30% of fans adding one to their seats in one mixed hold, on
/// PostgreSQL (the exclusion constraint decides); the check "no overlapping live claims on any
/// resource" reads the claims from the database and must have some to compare.
#[test]
fn rush_with_interval_resources_passes_every_check() {
    let pg = PostgresServer::start();
    let url = pg.create_database();
    let venue = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../infra/venues/club-240-resources.json"
    );
    let out = rush(&[
        "--database",
        &url,
        "--event",
        "rush-intervals",
        "--venue",
        venue,
        "--interval-share",
        "0.3",
    ]);
    assert_checks(&out);
    let line = out
        .lines()
        .find(|l| l.contains("no overlapping live claims on any resource"))
        .unwrap_or_else(|| panic!("no interval check:\n{out}"));
    let claims: u64 = line
        .split(": ")
        .nth(1)
        .and_then(|d| d.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(claims > 0, "the fans held intervals: {line}");
    println!("{line}");
}

#[test]
fn rush_on_postgres_with_gateway_faults_passes_every_check() {
    let pg = PostgresServer::start();
    let url = pg.create_database();
    let out = rush(&[
        "--database",
        &url,
        "--event",
        "rush-pg",
        "--fail-rate",
        "0.1",
        "--cancel-rate",
        "0.1",
        "--timeout-rate",
        "0.05",
        "--duplicate-webhook-rate",
        "0.05",
    ]);
    assert_checks(&out);
    assert!(
        out.contains("PASS every completed payment has exactly one booking or one refund"),
        "{out}"
    );
    assert!(out.contains("PASS emails sent = bookings"), "{out}");
}

/// The stock rule (issue "closed loop and report"): on a small show (`--seats 6`: the launcher's
/// smallest venue, 100 seats) with 80 fans let in at
/// 5/s, 20 s holds and half the fans walking away from theirs, a control run without the rule lets fans in while
/// every seat left sits in a live hold (the check fails), and the run with the rule lets
/// nobody in then (the check passes, and says it saw such windows).
#[test]
fn the_stock_rule_keeps_fans_off_an_empty_map_in_a_small_show_rush() {
    let small = |rule: &str, event: &str| -> (bool, String) {
        let out = sale_common::testsupport::output_within(
            Command::new(env!("CARGO_BIN_EXE_loadtest"))
                .args(["rush", "--spawn", "--fans", "80", "--seats", "6", "--quiet"])
                .args(["--admit-rate", "5", "--max-active", "100"])
                .args([
                    "--admission-ttl",
                    "60",
                    "--opens-in",
                    "5",
                    "--timeout",
                    "180",
                ])
                .args(["--hold-ttl", "20", "--payment-session", "15"])
                // Half the fans walk away from their hold: seats sit held until it lapses.
                .args(["--pay-share", "0.4", "--cancel-share", "0.1"])
                .args([rule, "--event", event]),
            std::time::Duration::from_secs(300),
        );
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let line = stdout
            .lines()
            .find(|l| l.contains("(stock rule)"))
            .unwrap_or_else(|| panic!("no stock check:\n{stdout}"))
            .to_owned();
        (out.status.success(), line)
    };
    // The control shows the race without the rule. It is a real-time rush, so whether a fan
    // is let in inside an empty-map window varies from run to run (one CI run saw a single
    // 3.2 s window whose admissions all fell within the rule's reaction time): it is shown
    // once in up to three runs.
    let mut controls = Vec::new();
    for i in 0..3 {
        let (ok, control) = small("--check-stock", &format!("small-control-{i}"));
        let shown = !ok && control.starts_with("FAIL ");
        controls.push(control);
        if shown {
            break;
        }
    }
    assert!(
        controls.last().is_some_and(|c| c.starts_with("FAIL ")),
        "without the rule fans are let in to an empty map: {controls:?}"
    );
    let (ok, line) = small("--stock-rule", "small-rule");
    assert!(ok && line.starts_with("PASS "), "{line}");
    assert!(
        !line.contains(": 0 windows"),
        "the show ran out with seats in holds at least once: {line}"
    );
    println!("control: {controls:?}\nrule:    {line}");
}
