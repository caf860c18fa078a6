//! The chaos rehearsal, CI-sized (issue 11, item 8): starts `infra/cluster/up --store cluster`
//! (Redis Cluster holding the queue, PostgreSQL, the gateway, 3 waiting-room and 2 booking-core
//! nodes behind nginx) from the
//! binaries `cargo test` built, then runs `loadtest rush --cluster DIR --profile ci --chaos
//! builtin` against it: while 300 fans queue, hold and pay, the node holding the admitter lock
//! is killed with kill -9, then the queue's Redis master, PostgreSQL restarts, and every
//! waiting-room and booking-core node is restarted one at a time. Every check must print PASS, the existing ones and
//! the chaos ones (nothing dropped by the rolling restart, takeover within 2 × the lock TTL, no
//! number held twice and nobody admitted twice after the failover, server errors below 0.01%).

use sale_common::testsupport::cluster_up::bin_dir_of;
use sale_common::testsupport::ClusterUp;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// 100 seats in two sections (the CI profile's size).
const VENUE: &str = r#"{"name": "Chaos 100", "rows": 5, "seats_per_row": 10,
  "sections": [{"name": "A", "price_cents": 4500}, {"name": "B", "price_cents": 3500}]}"#;

fn chaos_rehearsal(store: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let venue = tmp.path().join("venue.json");
    std::fs::write(&venue, VENUE).expect("venue");
    let bins = bin_dir_of(Path::new(env!("CARGO_BIN_EXE_loadtest")));
    let venue = venue.to_str().expect("utf-8 path");
    #[rustfmt::skip]
    let args = [
        "--store", store, "--venue", venue, "--opens-in", "3600", "--show", "chaos",
        // The CI profile's lifetimes (`--spawn` sets them itself) and no hold-rate limit for
        // 300 fans behind one address.
        "--hold-ttl", "20", "--payment-session", "15", "--hold-rate-per-min", "100000",
    ];
    let mut up = ClusterUp::start(tmp.path(), &bins, &args);
    up.state(Duration::from_secs(150));
    let out = Command::new(env!("CARGO_BIN_EXE_loadtest"))
        .args(["rush", "--cluster"])
        .arg(up.path())
        .args(["--profile", "ci", "--chaos", "builtin", "--no-report"])
        .output()
        .expect("run loadtest rush");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "loadtest rush --chaos failed ({}):\n{stdout}\n{stderr}\n{}",
        out.status,
        up.output()
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("PASS ") || l.starts_with("FAIL "))
        .collect();
    for l in &lines {
        assert!(l.starts_with("PASS "), "{l}\n\n{stdout}");
    }
    for name in [
        "zero seats sold twice",
        "server errors below 0.01%",
        "every chaos step ran",
        "no fan request dropped by a rolling restart",
        "admitter takeover after kill -9 within 2 × the lock TTL",
        "after the Redis failover, no number held twice and no one admitted twice",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(name)),
            "check {name:?} printed:\n{stdout}"
        );
    }
    assert!(lines.len() >= 15, "every check printed:\n{stdout}");
}

/// The queue on the Redis Cluster (`up --store cluster`): the Redis failover hits the queue's
/// own master.
#[test]
fn chaos_rehearsal_on_the_cluster_passes_every_check() {
    chaos_rehearsal("cluster");
}
