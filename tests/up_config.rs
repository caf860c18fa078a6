//! `ticket-sale up` checks every service's configuration before it binds anything (issue 12
//! item 8): a short admin token is named as such, not reported as a service that did not answer;
//! and `up` says where the webhook secret is without printing a secret it chose itself.

use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sale_common::testsupport::{free_port, output_within, read_until_line, wait_within};

#[test]
fn up_with_a_short_admin_token_names_admin_token_before_binding() {
    // The three ports are taken: an `up` that bound first would fail on them instead.
    let taken: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addr = |i: usize| taken[i].local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_ticket-sale"))
        .current_dir(dir.path())
        .args(["up", "--admin-token", "short"])
        .args(["--waiting-room", &addr(0), "--booking", &addr(1)])
        .args(["--gateway", &addr(2)])
        .env_remove("SALE_ADMIN_TOKEN")
        .output()
        .expect("run ticket-sale up");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    for line in [
        "nothing was started, the configuration is refused.",
        "invalid waiting room configuration, 1 problem:\n  - admin_token: at least 16 characters (got 5)",
        "invalid booking core configuration, 1 problem:\n  - admin_token: at least 16 characters (got 5)",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in:\n{stderr}");
    }
    assert!(!stderr.contains("healthz"), "{stderr}");
    assert!(
        !stderr.contains("in use"),
        "bound before checking: {stderr}"
    );
    assert!(
        !dir.path().join("sale.db").exists(),
        "no database is created either"
    );
}

/// `ticket-sale up ARGS… --booking B --gateway G` run in `dir` to its end (60 s at most).
fn up_in(dir: &std::path::Path, args: &[&str], [booking, gateway]: [&str; 2]) -> Output {
    output_within(
        Command::new(env!("CARGO_BIN_EXE_ticket-sale"))
            .current_dir(dir)
            .arg("up")
            .args(args)
            .args(["--booking", booking, "--gateway", gateway])
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(60),
    )
}

/// `127.0.0.1:` and a port free now.
fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// A malformed signing key in `--keys-dir` stops `up` before it binds anything, naming the
/// file (found in review: the gateway simulator had started, and the waiting room then failed
/// with the PEM error among the others' start-up lines).
#[test]
fn up_with_a_malformed_signing_key_names_the_file_before_binding() {
    let taken: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addr = |i: usize| taken[i].local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let signing = dir.path().join("keys/signing");
    std::fs::create_dir_all(&signing).expect("mkdir");
    std::fs::write(signing.join("active.pem"), "not a key\n").expect("write");
    let out = up_in(
        dir.path(),
        &["--keys-dir", "keys", "--waiting-room", &addr(0)],
        [&addr(1), &addr(2)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(
        stderr.contains("reading the signing keys in keys/signing")
            && stderr.contains("keys/signing/active.pem"),
        "{stderr}"
    );
    assert!(!stderr.contains("in use"), "bound before reading: {stderr}");
    assert_eq!(
        std::fs::read_to_string(signing.join("active.pem")).expect("read"),
        "not a key\n",
        "a bad key is reported, never replaced"
    );
}

/// A taken port is named with its service and the flag that moves it, not only "Address
/// already in use" (found in review); a keys directory others can read is warned about.
#[test]
fn up_on_a_taken_port_names_the_service_and_its_flag() {
    use std::os::unix::fs::PermissionsExt;
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("addr").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).expect("mkdir");
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // A signing key of its own, left readable by all.
    let signing = keys.join("signing");
    waiting_room::keys::generate(&signing, 1_800_000_000).expect("generate");
    std::fs::set_permissions(&signing, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let active = signing.join("active.pem");
    std::fs::set_permissions(&active, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = up_in(
        dir.path(),
        &["--keys-dir", "keys", "--waiting-room", &free_addr()],
        [&busy, &free_addr()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must fail: {stderr}");
    assert!(
        stderr.contains(&format!(
            "binding the booking core on {busy} (choose another with --booking)"
        )),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("keys readable by other users") && stdout.contains("\"755\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("signing/active.pem") && stdout.contains("\"644\""),
        "the key file itself: {stdout}"
    );
}

/// `--cdn` on a taken port stops `up` before anything starts (found by a newcomer: nginx
/// exited at once, and `up` printed the Python server that held the port as the fans' entry
/// point and ran on).
#[test]
fn up_with_a_taken_cdn_port_says_so_before_starting() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = up_in(
        dir.path(),
        &["--cdn", &port.to_string(), "--waiting-room", &free_addr()],
        [&free_addr(), &free_addr()],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "must fail: {stdout}");
    assert!(
        stderr.contains(&format!(
            "binding the CDN on 127.0.0.1:{port} (choose another with --cdn)"
        )),
        "{stderr}"
    );
    assert!(!stdout.contains("fans start here"), "{stdout}");
    assert!(
        !dir.path().join("sale.db").exists(),
        "nothing started: no database either"
    );
}

/// `up` prints the path of the webhook secret (and of its random admin and service tokens),
/// never the secrets; the file's key signs webhooks the booking core accepts, the service
/// token's opens the waiting room's internal API.
#[tokio::test]
async fn up_prints_where_the_webhook_secret_is_and_not_the_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let [wr, bc, gw] = [free_port(), free_port(), free_port()];
    let mut up = Command::new(env!("CARGO_BIN_EXE_ticket-sale"))
        .current_dir(dir.path())
        .args(["up", "--database", "sqlite::memory:"])
        .args(["--waiting-room", &format!("127.0.0.1:{wr}")])
        .args(["--booking", &format!("127.0.0.1:{bc}")])
        .args(["--gateway", &format!("127.0.0.1:{gw}")])
        .env_remove("SALE_ADMIN_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ticket-sale up");
    let printed = read_until_line(
        up.stdout.take().expect("stdout"),
        "press Ctrl-C",
        Duration::from_secs(60),
    );
    let path_after = |label: &str| -> std::path::PathBuf {
        let line = printed
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label:?} line in:\n{printed}"));
        let rest = line.split(" in ").nth(1).expect("in PATH");
        rest.split(' ').next().expect("path").into()
    };
    let secret_file = path_after("webhook secret:");
    let secret = std::fs::read_to_string(&secret_file).expect("read");
    let secret = secret.trim();
    let admin = std::fs::read_to_string(path_after("admin token:")).expect("read");
    assert_eq!(secret.len(), 32, "a random key");
    assert!(!printed.contains(secret), "the key is printed:\n{printed}");
    assert!(
        !printed.contains(admin.trim()),
        "the token is printed:\n{printed}"
    );

    let body = br#"{"id":"evt_x","type":"payment.completed","created":0,"data":{"payment_id":"pay_unknown"}}"#;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let c = reqwest::Client::new();
    let post = |key: Vec<u8>| {
        let c = c.clone();
        async move {
            c.post(format!("http://127.0.0.1:{bc}/payment/webhook"))
                .header(
                    gateway_sim::webhooks::HEADER,
                    gateway_sim::webhooks::signature_header(&[&key], t, body),
                )
                .header("content-type", "application/json")
                .body(body.as_slice())
                .send()
                .await
                .expect("webhook")
                .status()
        }
    };
    assert_eq!(post(b"not-the-key".to_vec()).await, 401);
    let accepted = post(secret.as_bytes().to_vec()).await;
    assert_ne!(accepted, 401, "the file's key signs accepted webhooks");
    // The service token's file: the waiting room's /internal API takes it (newcomer review: a
    // newcomer could not try that API against `up`), and it is never printed either.
    let service_file = path_after("service token:");
    let service = std::fs::read_to_string(&service_file).expect("read");
    let service = service.trim();
    assert!(
        !printed.contains(service),
        "the token is printed:\n{printed}"
    );
    let end = |token: String| {
        let c = c.clone();
        async move {
            c.post(format!(
                "http://127.0.0.1:{wr}/internal/events/demo/sessions/end-batch"
            ))
            .bearer_auth(token)
            .json(&serde_json::json!({"jtis": ["no-such-jti"]}))
            .send()
            .await
            .expect("end-batch")
        }
    };
    assert_eq!(end("not-the-token-0123456789".into()).await.status(), 401);
    let r = end(service.to_owned()).await;
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.expect("json");
    assert_eq!(v["unknown"], 1, "{v}");
    // SIGTERM: `up` drains and removes its secret files.
    let term = Command::new("kill")
        .args(["-TERM", &up.id().to_string()])
        .status()
        .expect("kill");
    assert!(term.success());
    assert!(wait_within(&mut up, Duration::from_secs(60)).success());
    assert!(!secret_file.exists(), "the secret file outlived up");
    assert!(
        !service_file.exists(),
        "the service token's file outlived up"
    );
}

/// A service that stops while starting fails `up` with its own error, not "healthz did not
/// answer" (found by a newcomer: a second `up` on the same `sale.db` only said that).
#[test]
fn a_second_up_on_the_same_sale_db_says_the_database_is_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ports = |p: [u16; 3]| {
        [
            "--waiting-room".to_owned(),
            format!("127.0.0.1:{}", p[0]),
            "--booking".to_owned(),
            format!("127.0.0.1:{}", p[1]),
            "--gateway".to_owned(),
            format!("127.0.0.1:{}", p[2]),
        ]
    };
    let first_ports = [free_port(), free_port(), free_port()];
    let mut first = Command::new(env!("CARGO_BIN_EXE_ticket-sale"))
        .current_dir(dir.path())
        .arg("up")
        .args(ports(first_ports))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("first up");
    // `up` binds its ports before the booking core opens (and locks) the database, so a port
    // that answers proves nothing: wait for the line `up` prints once every service is healthy.
    // (Waiting for the port raced on a loaded CI machine: the second `up` took the lock first
    // and ran for ever.)
    read_until_line(
        first.stdout.take().expect("stdout"),
        "press Ctrl-C",
        Duration::from_secs(60),
    );
    let second = output_within(
        Command::new(env!("CARGO_BIN_EXE_ticket-sale"))
            .current_dir(dir.path())
            .arg("up")
            .args(ports([free_port(), free_port(), free_port()]))
            .env("RUST_BACKTRACE", "0"),
        Duration::from_secs(60),
    );
    let _ = first.kill();
    let _ = first.wait();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        stderr.contains("the booking core could not start")
            && stderr.contains("in use by another booking-core process"),
        "{stderr}"
    );
}
