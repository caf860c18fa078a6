//! A file database survives a restart: the schema and venue seeding are idempotent and state
//! (holds) is kept.

mod support;

use support::Harness;

#[tokio::test]
async fn file_database_restart_keeps_holds_and_seeds_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("booking.db").display()
    );
    let u1 = url.clone();
    let h = Harness::start_with(move |c| c.database_url = u1).await;
    let (st, _) = h.hold(&h.token("keeper"), "k", &["D-1-1"]).await;
    assert_eq!(st, 201);
    h.state.db.close().await;
    let h2 = Harness::start_with(move |c| c.database_url = url).await;
    let s = h2.stats().await;
    assert_eq!(
        (s["capacity"].as_i64(), s["held"].as_i64()),
        (Some(600), Some(1))
    );
}
