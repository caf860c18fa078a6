//! Case B11: SQLite takes one process. A second real `booking-core` process on the same SQLite
//! file refuses to start, naming PostgreSQL for several nodes, instead of answering
//! `500 database is locked` under load; once the first stops (SIGTERM), the file is free again.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sale_common::testsupport::{free_port, output_within, wait_within};

fn start(db: &str, port: u16) -> Child {
    command(db, port)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start booking-core")
}

/// A `booking-core` on `db`, listening on `port`, configured from the environment alone.
fn command(db: &str, port: u16) -> Command {
    let public = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_booking-core"));
    cmd
        .args(["--listen", &format!("127.0.0.1:{port}")])
        // The whole configuration from the environment, no file (booking-core/README.md).
        .envs([
            ("BOOKING_DATABASE_URL", db),
            ("BOOKING_JWKS_URL", "http://127.0.0.1:9/.well-known/jwks.json"),
            ("BOOKING_WAITING_ROOM_URL", "http://127.0.0.1:9"),
            ("BOOKING_GATEWAY_URL", "http://127.0.0.1:9"),
            ("BOOKING_PUBLIC_URL", &public),
            (
                "BOOKING_SHOWS",
                r#"[{"id": "demo", "venue": {"sections": [{"name": "A", "price_cents": 1000}], "rows": 2, "seats_per_row": 5}}]"#,
            ),
            ("BOOKING_GATEWAY_SECRET", "b11-gateway-secret"),
            ("BOOKING_GATEWAY_CLIENT_SECRET", "b11-gateway-secret"),
            ("BOOKING_WEBHOOK_SECRETS", "b11-gateway-secret"),
            ("BOOKING_ADMIN_TOKEN", "b11-admin-token-0123456789"),
        ]);
    cmd
}

fn answers(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.1 200")
}

fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn case_b11_a_second_process_on_one_sqlite_file_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("sale.db").display());
    let (p1, p2) = (free_port(), free_port());
    let mut first = start(&db, p1);
    wait_until(Duration::from_secs(30), "the first process answers", || {
        answers(p1)
    });

    let second = output_within(&mut command(&db, p2), Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "the second process must not run");
    assert!(
        stderr.contains("in use by another booking-core process") && stderr.contains("PostgreSQL"),
        "a clear message: {stderr}"
    );
    assert!(answers(p1), "the first process is unharmed");

    assert!(Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let status = wait_within(&mut first, Duration::from_secs(30));
    assert_eq!(
        status.code(),
        Some(0),
        "SIGTERM is a normal stop (case W13)"
    );
    let mut again = start(&db, p2);
    wait_until(
        Duration::from_secs(30),
        "a restart on the same file answers",
        || answers(p2),
    );
    let _ = again.kill();
    let _ = again.wait();
}
