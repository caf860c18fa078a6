//! Starting the waiting room: configuration that cannot work stops the start before the port
//! is bound (README, "every value checked before the port is bound").

/// A `signing_key_dir` with no `active.pem` (newcomer review: the node logged "waiting room
/// listening" and then exited reading the key): the start fails before it listens, saying how
/// to make the first key. Without the check before the bind, "listening" is logged first.
#[test]
fn a_signing_key_dir_without_a_key_stops_the_start_before_it_listens() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let keys = tempfile::tempdir().unwrap();
    let mut config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("waiting-room/config.example.json")).unwrap(),
    )
    .unwrap();
    config["signing_key_dir"] = keys.path().display().to_string().into();
    let file = keys.path().join("config.json");
    std::fs::write(&file, config.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_waiting-room"))
        .current_dir(&root)
        .env("RUST_LOG", "info")
        .env("RUST_BACKTRACE", "0")
        .args(["serve", "--config"])
        .arg(&file)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("active.pem"), "{said}");
    assert!(said.contains("keys generate --dir"), "{said}");
    assert!(!said.contains("listening"), "{said}");
}
