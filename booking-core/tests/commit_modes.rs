//! Which transactions answer before their WAL is on disk on PostgreSQL (`db::begin_hold`): a
//! fan's hold and a fan's release commit with `synchronous_commit = off`; every step of a
//! payment (the `pending:` claim before the gateway hears of it, the payment id stored, the
//! confirmation) commits synchronously, so a hold is durable before money moves for it. A
//! trigger on `holds` notes the commit mode of each transaction that writes a hold row (and
//! its `plan_cache_mode`: every statement of the booking core's sessions runs on a generic
//! plan, `db::PG_SESSION`). A fan's plain named-seat hold on PostgreSQL, and a fan's release
//! of a plain seat hold, is one statement outside any `BEGIN` (`inventory::onetrip`): it sets
//! `synchronous_commit = off` for its own implicit transaction (`set_config(…, true)`, which
//! never outlives it: the payment steps after it commit synchronously).

mod support;

use support::{Backend, Harness};

/// `synchronous_commit/plan_cache_mode` of a fan's hold or release (`db::begin_hold`).
const HOLD_MODE: &str = "off/force_generic_plan";
/// The same of a fan's plain named-seat hold, or its release, in one statement
/// (`inventory::onetrip`).
const ONE_TRIP_MODE: &str = "off/force_generic_plan";

/// `(operation, status, payment id, synchronous_commit/plan_cache_mode)` of every write of a hold row, in order.
async fn modes(h: &Harness) -> Vec<(String, String, Option<String>, String)> {
    sqlx::query_as("SELECT op, status, payment, mode FROM commit_modes ORDER BY n")
        .fetch_all(&h.state.db)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_holds_and_releases_commit_async_and_payments_synchronously_on_postgres() {
    commit_modes_of_a_sale(false).await;
}

/// The same through the show's hold queue (its batch is the hold's transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_holds_commit_async_and_payments_synchronously_on_postgres() {
    commit_modes_of_a_sale(true).await;
}

async fn commit_modes_of_a_sale(queued: bool) {
    // The shared test server runs with `synchronous_commit = off` for speed: this database
    // gets PostgreSQL's default back before the booking core connects.
    let dir = tempfile::tempdir().unwrap();
    let url = Backend::Postgres.fresh_url(dir.path());
    let setup = booking_core::db::connect(&url).await.unwrap();
    let name: String = sqlx::query_scalar("SELECT CAST(current_database() AS TEXT)")
        .fetch_one(&setup)
        .await
        .unwrap();
    sqlx::query(&format!(
        "ALTER DATABASE \"{name}\" SET synchronous_commit = on"
    ))
    .execute(&setup)
    .await
    .unwrap();
    setup.close().await;
    let h = Harness::start_with(move |c| {
        c.database_url = url;
        if queued {
            c.queued_shows = vec![support::SHOW.to_owned()];
        }
    })
    .await;
    let on: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    assert_eq!(on, "on", "the database's default");
    // Every session of the booking core: generic plans and no JIT compiling (`db::PG_SESSION`).
    let session: (String, String) =
        sqlx::query_as("SELECT current_setting('plan_cache_mode'), current_setting('jit')")
            .fetch_one(&h.state.db)
            .await
            .unwrap();
    assert_eq!(session, ("force_generic_plan".into(), "off".into()));
    for sql in [
        "CREATE TABLE commit_modes (n BIGSERIAL PRIMARY KEY, op TEXT NOT NULL, \
         status TEXT NOT NULL, payment TEXT, mode TEXT NOT NULL)",
        "CREATE FUNCTION note_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
         INSERT INTO commit_modes (op, status, payment, mode) \
         VALUES (TG_OP, NEW.status, NEW.payment_id, \
         current_setting('synchronous_commit') || '/' || current_setting('plan_cache_mode')); \
         RETURN NEW; END $$",
        "CREATE TRIGGER note_commit_mode AFTER INSERT OR UPDATE ON holds \
         FOR EACH ROW EXECUTE FUNCTION note_commit_mode()",
    ] {
        sqlx::query(sql).execute(&h.state.db).await.unwrap();
    }

    // A fan holds a seat and lets it go.
    let t = h.token("leaver");
    let (st, b) = h.hold(&t, "leave-1", &["A-1-1"]).await;
    assert_eq!(st, 201, "{b}");
    assert_eq!(h.cancel_hold("leaver", &b["hold_id"]).await, 200);
    let m = modes(&h).await;
    // Through the queue a hold is a batch's transaction; else one statement, as is the
    // fan's release of a plain seat hold either way.
    let held_mode = if queued { HOLD_MODE } else { ONE_TRIP_MODE };
    assert_eq!(
        m.iter()
            .map(|(op, status, _, mode)| (op.as_str(), status.as_str(), mode.as_str()))
            .collect::<Vec<_>>(),
        [
            ("INSERT", "HELD", held_mode),
            ("UPDATE", "RELEASED", ONE_TRIP_MODE)
        ],
        "{m:?}"
    );

    // Another buys one: hold, pay, callback.
    let hold = h.buy("buyer", "A-1-2").await;
    let m = modes(&h).await;
    let bought: Vec<_> = m[2..].to_vec();
    assert_eq!(bought[0].0, "INSERT", "{m:?}");
    assert_eq!(bought[0].3, held_mode, "the hold itself: {m:?}");
    let payment_steps: Vec<_> = bought[1..].to_vec();
    assert!(
        payment_steps
            .iter()
            .any(|(_, _, p, _)| p.as_deref().is_some_and(|p| p.starts_with("pending:"))),
        "the pending claim is noted: {m:?}"
    );
    assert!(
        payment_steps.iter().any(|(_, s, _, _)| s == "PAID"),
        "the confirmation is noted: {m:?}"
    );
    assert!(
        payment_steps
            .iter()
            .all(|(_, _, _, mode)| mode == "on/force_generic_plan"),
        "every payment step commits synchronously (SET LOCAL never leaks into the pooled \
         connection's next transaction): {m:?}"
    );
    let status: String = sqlx::query_scalar("SELECT status FROM holds WHERE id = $1")
        .bind(&hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    assert_eq!(status, "PAID");
}
