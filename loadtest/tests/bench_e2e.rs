//! CI-sized `loadtest bench`: 2 s per figure against a spawned stack with the queue in a real
//! Redis (started here), and checks that the JSON file has every figure and each is above zero.
//! Not a speed assertion: only that every figure was measured in the run.

use sale_common::testsupport::RedisServer;
use std::process::Command;

#[test]
fn bench_writes_every_figure_above_zero() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["bench", "--duration", "2", "--connections", "8"])
        .args(["--memory-fans", "20000", "--redis", &redis.url()])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("run loadtest bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json written")).expect("json");
    let figures = doc["figures"].as_array().expect("figures");
    let names: Vec<&str> = figures.iter().filter_map(|f| f["name"].as_str()).collect();
    for want in [
        "healthz",
        "status",
        "join",
        "heartbeat",
        "claim",
        "door",
        "bc-healthz",
        "door-cached",
        "hold",
        "hold-queue",
        "pool-hold",
        "pool-queue",
        "db-hold",
        "db-queue",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // A hold phase made only of refusals measures nothing (every hold once came back
    // `409 admission-ended`, because a released hold ends its admission).
    for f in figures.iter().filter(|f| {
        let n = f["name"].as_str().unwrap_or("");
        n.starts_with("hold") || n.starts_with("pool") || n.starts_with("db-")
    }) {
        assert!(f["ok"].as_u64().unwrap_or(0) > 0, "no hold was made: {f}");
    }
    for f in figures {
        for k in ["rps", "ratio", "p50_ms", "p99_ms"] {
            let v = f[k].as_f64().unwrap_or(0.0);
            assert!(v > 0.0, "{} {k} = {v}: {f}", f["name"]);
        }
    }
    // The raw transaction through the typed pool and through sqlx `Any`, with their ratio.
    let raw = &doc["raw_db"];
    for k in ["tps", "any_tps", "any_over_typed"] {
        assert!(raw[k].as_f64().unwrap_or(0.0) > 0.0, "raw_db {k}: {raw}");
    }
    assert!(stdout.contains("through sqlx Any"), "{stdout}");
    assert!(
        stdout.contains("door with a cached token:"),
        "the door's ratio to the booking core's ceiling: {stdout}"
    );
    let mem = &doc["redis_memory"];
    assert!(mem["bytes_per_fan"].as_f64().unwrap_or(0.0) > 0.0, "{doc}");
    assert_eq!(mem["fans"], 20000, "{doc}");
    assert!(stdout.contains("ratio"), "{stdout}");
}
