//! Issue 13 item 2: a seat hold or a pool hold is at most three statements between `BEGIN` and
//! `COMMIT` (on PostgreSQL: three round trips, each one statement, the last a data-modifying
//! CTE; on SQLite: three calls into the connection's worker, some carrying several statements
//! under the one writer). Its release, with no fan on the waitlist, is at most two (seats) or
//! three (pool) calls: the guarded status update with one read of the hold's parts and of
//! whether anyone waits, one call for the seats, cap slots, session end, audit and offer row;
//! a pool's uncounting (it was nine and eleven). Counted from sqlx's own query log (target `sqlx::query`, one event per
//! call sent to the database), the way an operator would see them with `RUST_LOG=sqlx=debug`,
//! on the hold path below HTTP (`claim::create`) with no background task beside it.
//!
//! On PostgreSQL the plain named-seat hold the HTTP handler sends first
//! (`inventory::onetrip`) is ONE call and no `BEGIN` or `COMMIT`: one round trip.
//!
//! One `#[test]` in its own binary: the counting subscriber is global, and nothing else may
//! send a query while it counts.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use booking_core::db::Actor;
use booking_core::door::Admission;
use booking_core::inventory::claim::{self, Ask, Lost, Request, Timing};
use booking_core::inventory::holds::{self, Ended};
use booking_core::inventory::onetrip::{self, OneTrip};
use booking_core::payments::attempts;
use booking_core::payments::confirm::{confirm_paid, Confirm};
use booking_core::{db, PoolSpec, ShowConfig, Venue};
use support::Backend;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

/// Whether [`Counter`] records.
static COUNTING: AtomicBool = AtomicBool::new(false);
/// The calls recorded: each call's SQL text (sqlx's `db.statement`, else its summary).
static CALLS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records every `sqlx::query` event while [`COUNTING`] is on.
struct Counter;

/// An event's SQL: its `db.statement` field (the whole text), else its `summary` (sqlx logs
/// a short statement such as `COMMIT` with the summary alone).
#[derive(Default)]
struct Sql {
    statement: String,
    summary: String,
}

impl Sql {
    fn text(self) -> String {
        if self.statement.is_empty() {
            self.summary
        } else {
            self.statement
        }
    }
}

impl Visit for Sql {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "db.statement" => self.statement = value.trim().to_owned(),
            "summary" => self.summary = value.trim().to_owned(),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

impl<S: tracing::Subscriber> Layer<S> for Counter {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if COUNTING.load(Ordering::SeqCst) && event.metadata().target() == "sqlx::query" {
            let mut sql = Sql::default();
            event.record(&mut sql);
            CALLS.lock().unwrap().push(sql.text());
        }
    }
}

/// The calls of `create` but `BEGIN` and `COMMIT` (sqlx logs them on PostgreSQL, where they
/// are simple queries; SQLite's go to its worker as commands and are not logged), and the
/// new hold's id.
async fn calls_of_one_hold(db: &db::Db, r: &Request<'_>) -> (Vec<String>, String) {
    start_counting();
    let answer = claim::create(db, db, None, r, now_ms()).await;
    let calls = stop_counting();
    let answer = answer.unwrap_or_else(|e| panic!("hold refused: {e:?}"));
    assert_eq!(answer.status, 201, "{}", answer.body);
    (calls, answer.body["hold_id"].as_str().unwrap().to_owned())
}

/// The calls of the release of `hold` (the fan's cancel), `BEGIN` and `COMMIT` left out.
async fn calls_of_one_release(db: &db::Db, hold: &str) -> Vec<String> {
    start_counting();
    let done = holds::release(db, hold, Actor::Api, Ended::Released, "fan", now_ms()).await;
    let calls = stop_counting();
    assert!(done.unwrap(), "the hold was released");
    calls
}

fn start_counting() {
    CALLS.lock().unwrap().clear();
    COUNTING.store(true, Ordering::SeqCst);
}

/// The calls recorded since [`start_counting`], but `BEGIN`, `COMMIT` and a new pooled
/// connection's session setup (`db::PG_SESSION`, sent once per connection, not per hold).
fn stop_counting() -> Vec<String> {
    COUNTING.store(false, Ordering::SeqCst);
    let calls = CALLS.lock().unwrap().clone();
    let bare = |c: &String| {
        let w = c
            .trim_matches(|ch| ch == '"' || ch == ' ')
            .to_ascii_uppercase();
        w.starts_with("BEGIN") || w.starts_with("COMMIT")
    };
    calls
        .into_iter()
        .filter(|c| !bare(c) && !is_session_setup(c))
        .collect()
}

/// Whether `c` is a new PostgreSQL connection's session setup (the pool's `after_connect`).
fn is_session_setup(c: &str) -> bool {
    c.trim_matches(|ch| ch == '"' || ch == ' ') == booking_core::db::PG_SESSION
}

/// A hold request on the show "counted" (channel `web`, 4 holds per visitor).
fn counted<'a>(adm: &'a Admission, key: &'a str, ask: Ask, timing: Timing) -> Request<'a> {
    Request {
        adm,
        show: "counted",
        ask,
        key,
        channel: "web",
        timing,
        visitor_cap: 4,
    }
}

/// A fresh database of backend `b` with the show "counted": 10 seats and a `FLOOR` pool of
/// `floor` places at 2,500 cents.
async fn counted_show(b: Backend, floor: u32) -> (tempfile::TempDir, db::Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = db::connect(&b.fresh_url(dir.path())).await.unwrap();
    let mut venue = Venue::small(10);
    venue.pools.push(PoolSpec {
        id: "FLOOR".into(),
        price_cents: 2_500,
        capacity: floor,
    });
    let show = ShowConfig {
        id: "counted".into(),
        name: "counted".into(),
        venue,
    };
    db::seed_show(&db, &show).await.unwrap();
    (dir, db)
}

async fn three_statements(b: Backend) {
    let (_dir, db) = counted_show(b, 1_000).await;
    let timing = Timing {
        hold_ttl_ms: 600_000,
        payment_session_ms: 300_000,
    };
    for (n, ask) in [
        Ask::Seats(vec!["A-1-1".into(), "A-1-2".into()]),
        Ask::Pool {
            pool: "FLOOR".into(),
            quantity: 2,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let adm = admission(n);
        let key = format!("key-{n}");
        let kind = ask.kind();
        let r = counted(&adm, &key, ask, timing);
        let (calls, hold) = calls_of_one_hold(&db, &r).await;
        assert!(
            calls.len() <= 3,
            "{b:?} {kind} hold: {} calls between BEGIN and COMMIT, at most 3: {calls:#?}",
            calls.len()
        );
        assert!(
            calls
                .iter()
                .any(|c| c.contains("UPDATE seats") || c.contains("UPDATE pools")),
            "the guarded update is among them: {calls:#?}"
        );
        let calls = calls_of_one_release(&db, &hold).await;
        let most = if kind == "pool" { 3 } else { 2 };
        assert!(
            calls.len() <= most,
            "{b:?} {kind} release: {} calls between BEGIN and COMMIT, at most {most}: {calls:#?}",
            calls.len()
        );
    }
    // What the releases wrote (on PostgreSQL a pool's places come back as returns that the
    // next increment folds: `pools::TAKEN` counts them).
    let taken = format!(
        "SELECT {} FROM pools p WHERE p.show_id = 'counted'",
        booking_core::inventory::pools::TAKEN
    );
    for (sql, want, what) in [
        (
            "SELECT COUNT(*) FROM seats WHERE show_id = 'counted' AND status = 'free'",
            10,
            "every seat is free again",
        ),
        (taken.as_str(), 0, "the pool's places are uncounted"),
        (
            "SELECT COUNT(*) FROM hold_slots WHERE live_until <> 0 \
             AND live_until <> 9223372036854775807",
            0,
            "no cap slot is live",
        ),
        (
            "SELECT COUNT(*) FROM hold_slots WHERE scope = 'jti' \
             AND live_until = 9223372036854775807",
            2,
            "both ended sessions' admission slots closed",
        ),
        (
            "SELECT COUNT(*) FROM outbox WHERE kind = 'session-end' AND ref_id IN (SELECT jti FROM admissions_ended)",
            2,
            "both sessions ended, both notices queued",
        ),
        (
            "SELECT COUNT(*) FROM audit WHERE action = 'released' AND actor = 'api'",
            2,
            "both releases audited",
        ),
    ] {
        let got: i64 = sqlx::query_scalar(sql).fetch_one(&db).await.unwrap();
        assert_eq!(got, want, "{b:?}: {what}");
    }
    // Best available on a section with free seats: no probe for the section's existence (the
    // read of its free seats answers it; the probe cost 0.2 ms a request in the seed rehearsal).
    let adm = admission(7);
    let pair = || Ask::Best {
        section: "A".into(),
        quantity: 2,
        allow_split: false,
    };
    let r = counted(&adm, "key-best", pair(), timing);
    let (calls, _) = calls_of_one_hold(&db, &r).await;
    let probes = calls
        .iter()
        .filter(|c| c.contains("EXISTS (SELECT 1 FROM seats"))
        .count();
    assert_eq!(probes, 0, "{b:?} best available: {calls:#?}");
    // Best available on a section with no free seat left: refused with the availability of
    // the transaction's one read of the section (`best::NotTaken::NoneFree`), not read again
    // (the refusal's own read of a held-up section cost 0.39 ms × 17,589 calls in the seed
    // rehearsal and found 86 seats in all).
    let adm = admission(8);
    let rest: Vec<String> = (3..=10).map(|n| format!("A-1-{n}")).collect();
    let r = counted(&adm, "key-rest", Ask::Seats(rest), timing);
    calls_of_one_hold(&db, &r).await;
    let adm = admission(9);
    let r = counted(&adm, "key-none-free", pair(), timing);
    start_counting();
    let refused = claim::create(&db, &db, None, &r, now_ms()).await;
    let calls = stop_counting();
    let Err(booking_core::error::ApiError::Problem(p)) = refused else {
        panic!("{b:?}: best available with no free seat must be refused: {refused:?}");
    };
    assert_eq!(
        (p.status.as_u16(), p.kind, &p.extra["availability"]),
        (
            409,
            "no-seats-together",
            &serde_json::json!({"section": "A", "free": 0, "largest_block": 0})
        ),
        "{b:?}"
    );
    let reads = calls
        .iter()
        .filter(|c| c.contains("ORDER BY seat_row, number"))
        .count();
    assert_eq!(
        reads, 1,
        "{b:?} one read of the section's free seats: {calls:#?}"
    );
    // The seat map's poll after a write: the change feed, the pools, and per pool one
    // statement for its lapsed places and its next lapse (`pools::availability_until`; the
    // next lapse was a statement of its own).
    let maps = booking_core::inventory::seatmap::SeatMaps::default();
    maps.get(&db, "counted", now_ms(), None).await.unwrap();
    booking_core::inventory::seatmap::touch();
    start_counting();
    let served = maps.get(&db, "counted", now_ms(), None).await;
    let calls = stop_counting();
    assert!(served.is_ok(), "{b:?}: {served:?}");
    assert_eq!(
        calls.len(),
        3,
        "{b:?} a poll of a show with one pool is three statements: {calls:#?}"
    );
    db.close().await;
}

/// PostgreSQL: the one-trip hold is one call, with no `BEGIN` or `COMMIT` beside it.
async fn one_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = db::connect(&Backend::Postgres.fresh_url(dir.path()))
        .await
        .unwrap();
    let show = ShowConfig {
        id: "counted".into(),
        name: "counted".into(),
        venue: Venue::small(10),
    };
    db::seed_show(&db, &show).await.unwrap();
    let adm = admission(7);
    let timing = Timing {
        hold_ttl_ms: 600_000,
        payment_session_ms: 300_000,
    };
    let seats = Ask::Seats(vec!["A-1-1".into(), "A-1-2".into()]);
    let r = counted(&adm, "one-trip", seats, timing);
    start_counting();
    let held = onetrip::hold(&db, &r, now_ms()).await;
    COUNTING.store(false, Ordering::SeqCst);
    let calls: Vec<String> = CALLS
        .lock()
        .unwrap()
        .iter()
        .filter(|c| !is_session_setup(c))
        .cloned()
        .collect();
    assert!(matches!(held, Ok(OneTrip::Held(_))), "held: {held:?}");
    assert_eq!(calls.len(), 1, "one call, no BEGIN or COMMIT: {calls:#?}");
    assert!(calls[0].contains("UPDATE seats"), "{calls:#?}");
    db.close().await;
}

fn admission(n: usize) -> Admission {
    let now_s = now_ms() / 1000;
    Admission {
        iss: "waiting-room".into(),
        aud: "booking-core".into(),
        sub: format!("visitor-{n}"),
        event: "counted".into(),
        jti: format!("jti-{n}"),
        iat: now_s,
        nbf: now_s,
        exp: now_s + 3600,
        tier: None,
    }
}

fn now_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The hold queue's batch (`inventory::batch`): a request that lost its seats in the batch
/// gets its 409's availability from the batch's own read, and answering it sends nothing.
async fn queue_losers_need_no_read(b: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = db::connect(&b.fresh_url(dir.path())).await.unwrap();
    let show = ShowConfig {
        id: "counted".into(),
        name: "counted".into(),
        venue: Venue::small(10),
    };
    db::seed_show(&db, &show).await.unwrap();
    let timing = Timing {
        hold_ttl_ms: 600_000,
        payment_session_ms: 300_000,
    };
    let (first, second) = (admission(20), admission(21));
    let seats = |a: &str, b: &str| Ask::Seats(vec![a.into(), b.into()]);
    let jobs = [
        (
            counted(&first, "q-1", seats("A-1-1", "A-1-2"), timing),
            now_ms(),
        ),
        (
            counted(&second, "q-2", seats("A-1-2", "A-1-3"), timing),
            now_ms(),
        ),
    ];
    let pg = matches!(b, Backend::Postgres);
    let mut tx = db::begin_hold(&db).await.unwrap();
    let answers: Vec<_> = booking_core::inventory::batch::create_seats(&mut tx, pg, &jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.expect("settled in the batch"))
        .collect();
    tx.commit().await.unwrap();
    assert!(matches!(answers[0], Ok(Ok(_))), "{b:?}: {answers:?}");
    let Ok(Err(lost)) = &answers[1] else {
        panic!("{b:?}: the second request lost A-1-2: {answers:?}");
    };
    start_counting();
    let problem = lost.problem(&db, None, "counted", now_ms()).await.unwrap();
    let calls = stop_counting();
    assert_eq!(
        (problem.status.as_u16(), &problem.extra["availability"]),
        (409, &serde_json::json!({"A-1-2": "held", "A-1-3": "free"})),
        "{b:?}"
    );
    assert!(calls.is_empty(), "{b:?} the 409 sends nothing: {calls:#?}");
    db.close().await;
}

#[test]
fn a_seat_or_pool_hold_is_three_statements_and_its_release_two_or_three_on_both_stores() {
    let subscriber = tracing_subscriber::registry().with(Counter);
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(three_statements(Backend::Sqlite));
    rt.block_on(three_statements(Backend::Postgres));
    rt.block_on(one_round_trip());
    rt.block_on(queue_losers_need_no_read(Backend::Sqlite));
    rt.block_on(queue_losers_need_no_read(Backend::Postgres));
    rt.block_on(a_sold_out_pools_batch_is_refused_together(Backend::Sqlite));
    rt.block_on(a_sold_out_pools_batch_is_refused_together(
        Backend::Postgres,
    ));
    rt.block_on(checkout_statements(Backend::Sqlite));
    rt.block_on(checkout_statements(Backend::Postgres));
}

/// The checkout's share of the database (issue 13, the seed rehearsal: about 60 statements a
/// booking, 70 % of all it sent): the pay's created payment stored in one call (on PostgreSQL
/// one statement without `BEGIN` and `COMMIT`; it was those and three statements); a hold's
/// view (`GET /api/holds/{hold}`) is one statement; a seat hold's confirmation is the guarded
/// HELD→PAID update, which also returns the hold's parts and when its payment started, then
/// the seats (locked first on PostgreSQL), the booking with its email, audit, cap slots and
/// session end in one call, and the sold-out check, with no read
/// for a pool or an interval the hold does not have; a webhook's delivery for a paid hold is
/// its event id alone, one statement with no transaction around it (`BEGIN` and `COMMIT`
/// counted here too).
async fn checkout_statements(b: Backend) {
    let (_dir, db) = counted_show(b, 1_000).await;
    let timing = Timing {
        hold_ttl_ms: 600_000,
        payment_session_ms: 300_000,
    };
    let adm = admission(20);
    let ask = Ask::Seats(vec!["A-1-4".into(), "A-1-5".into()]);
    let (_, hold_id) = calls_of_one_hold(&db, &counted(&adm, "key-pay", ask, timing)).await;
    // The pay: the hold's claim (`pending:…`), then what the gateway created, stored.
    sqlx::query("UPDATE holds SET payment_id = 'pending:1' WHERE id = $1")
        .bind(&hold_id)
        .execute(&db)
        .await
        .unwrap();
    let created = attempts::NewPayment {
        hold_id: &hold_id,
        show_id: "counted",
        token: "pending:1",
        payment_id: "pay-1",
        signature: "sig",
        checkout_url: "http://gateway.test/checkout/pay-1",
    };
    start_counting();
    let attempt = attempts::store_created(&db, &created, now_ms()).await;
    let calls = stop_counting();
    assert_eq!(
        attempt.as_ref().ok(),
        Some(&Some(1)),
        "{b:?} the first attempt: {attempt:?}"
    );
    assert_eq!(
        calls.len(),
        1,
        "{b:?} a created payment stored (hold, attempt, audit): {calls:#?}"
    );
    let stored: (String, i64) = sqlx::query_as(
        "SELECT h.payment_signature, (SELECT COUNT(*) FROM audit a WHERE a.hold_id = h.id \
         AND a.action = 'payment-created' AND a.reason = 'pay-1') FROM holds h WHERE h.id = $1",
    )
    .bind(&hold_id)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(stored, ("sig".to_owned(), 1), "{b:?}");
    let hold = holds::load(&db, &hold_id).await.unwrap().unwrap();

    start_counting();
    let view = holds::view(&db, &hold).await.unwrap();
    let calls = stop_counting();
    assert_eq!(calls.len(), 1, "{b:?} a hold's view: {calls:#?}");
    assert_eq!(
        view["seats"],
        serde_json::json!(["A-1-4", "A-1-5"]),
        "{b:?}"
    );
    assert_eq!(view["payment_id"], "pay-1", "{b:?}");

    start_counting();
    let paid = confirm_paid(&db, &hold, "txn-1", Actor::Callback, now_ms(), None).await;
    let calls = stop_counting();
    assert!(matches!(paid, Ok(Confirm::Paid(_))), "{b:?}: {paid:?}");
    // The guarded update, (the seats' lock on PostgreSQL,) the seats' sale, the booking's
    // writes in one call, the sold-out check: 12 and 14 calls two sessions ago, 8 and 9 before
    // the booking's writes went into one call.
    let most = if b == Backend::Postgres { 5 } else { 4 };
    assert!(
        calls.len() <= most,
        "{b:?} a seat hold's confirmation: {} calls between BEGIN and COMMIT, at most {most}: {calls:#?}",
        calls.len()
    );
    // The view read with the hold as loaded before the confirmation (the handler's read, then
    // the commit, then the view's statement): status and booking from one snapshot.
    let after = holds::view(&db, &hold).await.unwrap();
    assert_eq!(
        (&after["status"], after["booking_id"].is_string()),
        (&serde_json::json!("PAID"), true),
        "{b:?} a view never shows HELD with a booking: {after}"
    );
    let sold: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM seats WHERE show_id = 'counted' AND status = 'sold' AND hold_id = $1",
    )
    .bind(&hold_id)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(sold, 2, "{b:?}: both seats sold");

    let paid_hold = holds::load(&db, &hold_id).await.unwrap().unwrap();
    for (event_answer, what) in [
        (Confirm::AlreadyPaid, "first"),
        (Confirm::DuplicateEvent, "again"),
    ] {
        COUNTING.store(true, Ordering::SeqCst);
        CALLS.lock().unwrap().clear();
        let got = confirm_paid(
            &db,
            &paid_hold,
            "txn-1",
            Actor::Webhook,
            now_ms(),
            Some("evt-1"),
        )
        .await;
        COUNTING.store(false, Ordering::SeqCst);
        let calls: Vec<String> = CALLS
            .lock()
            .unwrap()
            .drain(..)
            .filter(|c| !is_session_setup(c))
            .collect();
        assert_eq!(got.ok(), Some(event_answer), "{b:?} the event {what}");
        assert_eq!(
            calls.len(),
            1,
            "{b:?} a paid hold's webhook event ({what}): {calls:#?}"
        );
        assert!(
            calls[0].contains("INSERT INTO webhook_events"),
            "{calls:#?}"
        );
    }
    db.close().await;
}

/// The hold queue's batch of pool requests on a pool with no place left: every request is
/// `409 pool-unavailable` from the batch's own statements, a few for the whole batch. Each ran
/// alone once (a savepoint and its statements apiece) while the show's other holds waited.
async fn a_sold_out_pools_batch_is_refused_together(b: Backend) {
    let (_dir, db) = counted_show(b, 1).await;
    let timing = Timing {
        hold_ttl_ms: 600_000,
        payment_session_ms: 300_000,
    };
    let floor = |quantity| Ask::Pool {
        pool: "FLOOR".into(),
        quantity,
    };
    let pg = matches!(b, Backend::Postgres);
    let first = admission(30);
    let mut tx = db::begin_hold(&db).await.unwrap();
    let took = booking_core::inventory::batch::create_pools(
        &mut tx,
        pg,
        &[(counted(&first, "p-first", floor(1), timing), now_ms())],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(matches!(took[0], Some(Ok(Ok(_)))), "{b:?}: {took:?}");
    let fans: Vec<Admission> = (31..51).map(admission).collect();
    let keys: Vec<String> = (0..fans.len()).map(|i| format!("p-{i}")).collect();
    let jobs: Vec<(Request<'_>, i64)> = fans
        .iter()
        .zip(&keys)
        .enumerate()
        .map(|(i, (a, k))| (counted(a, k, floor(1 + (i % 2) as u32), timing), now_ms()))
        .collect();
    let mut tx = db::begin_hold(&db).await.unwrap();
    start_counting();
    let answers = booking_core::inventory::batch::create_pools(&mut tx, pg, &jobs)
        .await
        .unwrap();
    let calls = stop_counting();
    tx.commit().await.unwrap();
    for a in &answers {
        assert!(
            matches!(a, Some(Ok(Err(Lost::Pool(p)))) if p == "FLOOR"),
            "{b:?}: {answers:?}"
        );
    }
    assert!(
        calls.len() <= 12,
        "{b:?}: {} statements for 20 refusals: {calls:#?}",
        calls.len()
    );
    db.close().await;
}
