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

/// SQLite transactions that write begin as writers (`BEGIN IMMEDIATE`, `db::begin_write`). Two
/// writer pools on one file (as the hold path and a second pool in the same process): without
/// it, a transaction that read and then writes after the other pool's commit fails at once
/// with a lock error (its read snapshot cannot be upgraded); with it, the other writer waits at
/// its `BEGIN` and both writes land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_write_transaction_never_upgrades_a_read_into_a_lock_error() {
    use booking_core::db;
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("booking.db").display()
    );
    let a = db::connect(&url).await.unwrap();
    let b = db::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE counter (n BIGINT NOT NULL)")
        .execute(&a)
        .await
        .unwrap();
    sqlx::query("INSERT INTO counter (n) VALUES (0)")
        .execute(&a)
        .await
        .unwrap();
    let read = "SELECT n FROM counter";
    let bump = "UPDATE counter SET n = n + 1";
    // Without: a deferred BEGIN reads, the other pool commits a write, the upgrade fails.
    let mut tx = a.begin().await.unwrap();
    let _: i64 = sqlx::query_scalar(read).fetch_one(&mut *tx).await.unwrap();
    sqlx::query(bump).execute(&b).await.unwrap();
    let err = sqlx::query(bump).execute(&mut *tx).await.unwrap_err();
    assert!(
        err.to_string().contains("locked") || err.to_string().contains("busy"),
        "{err}"
    );
    tx.rollback().await.unwrap();
    // With: the writer's lock is taken at BEGIN; the other pool's write waits for the commit.
    let mut tx = db::begin_write(&a).await.unwrap();
    let seen: i64 = sqlx::query_scalar(read).fetch_one(&mut *tx).await.unwrap();
    let other = tokio::spawn({
        let b = b.clone();
        async move { sqlx::query(bump).execute(&b).await.map(|_| ()) }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!other.is_finished(), "the other writer waits for the lock");
    sqlx::query("UPDATE counter SET n = $1")
        .bind(seen + 1)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    other.await.unwrap().unwrap();
    let n: i64 = sqlx::query_scalar(read).fetch_one(&a).await.unwrap();
    assert_eq!(n, seen + 2, "both writes landed, none lost");
}
