//! CI-sized rehearsal: `loadtest rush --spawn --profile ci` with the queue in a real Redis
//! (started here), every behaviour of the mix (pay, pay slowly, pay after the deadline, cancel,
//! walk away, same-key retry, several tabs, late arrivals), and the report folder. Requires
//! every check line to print PASS, except the sold-out cap check while the launcher's stack does
//! not pass the booking core's sold-out report to the waiting room (then it must say so), and the
//! folder to hold summary.md, summary.json and every PNG plot.

use sale_common::testsupport::RedisServer;
use std::process::Command;

const PLOTS: [&str; 5] = [
    "queue.png",
    "admissions.png",
    "holds.png",
    "paid.png",
    "latency_p99.png",
];

#[test]
fn ci_rehearsal_passes_every_check_and_writes_the_report() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let report = dir.path().join("report");
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["rush", "--spawn", "--profile", "ci", "--event", "rehearsal"])
        .args(["--redis", &redis.url()])
        .arg("--report")
        .arg(&report)
        .output()
        .expect("run loadtest rush");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL "))
        .collect();
    assert!(lines.len() >= 11, "every check printed:\n{stdout}");
    for l in &lines {
        assert!(l.starts_with("PASS "), "{l}\n\n{stdout}");
    }
    for f in ["summary.md", "summary.json"].iter().chain(PLOTS.iter()) {
        let p = report.join(f);
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "{} missing or empty\n{stdout}", p.display());
    }
    for f in PLOTS {
        let bytes = std::fs::read(report.join(f)).expect("png");
        assert_eq!(&bytes[1..4], b"PNG", "{f} is a PNG");
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.join("summary.json")).expect("json"))
            .expect("summary.json parses");
    assert_eq!(
        summary["checks"].as_array().map(Vec::len),
        Some(lines.len()),
        "summary.json has every check"
    );
    let md = std::fs::read_to_string(report.join("summary.md")).expect("md");
    assert!(md.contains("zero seats sold twice"), "{md}");
}
