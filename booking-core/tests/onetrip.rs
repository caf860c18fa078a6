//! The plain named-seat hold on PostgreSQL in one statement (`inventory::onetrip`, issue 13
//! item 2: "one round trip on PostgreSQL, for example a data-modifying CTE"): a grant writes
//! the hold, its seats, its audit row, its cap slots and its key's stored 201 with the summed
//! price; a loss at the guarded update writes nothing; a refusal after the seats were taken
//! (a cap slot or the key taken meanwhile) leaves nothing half-written, not even the seats.
//! A fan's release of a plain seat hold likewise: everything or, when its guard fails or a
//! waitlist needs the full release's offers, nothing. That the hold is one call, outside any
//! `BEGIN`, is counted in `tests/statements.rs`.

mod support;

use booking_core::door::Admission;
use booking_core::inventory::claim::{self, Ask, Request, Timing};
use booking_core::inventory::onetrip::{self, OneTrip};
use booking_core::inventory::releases::{self, Release};
use booking_core::{db, ShowConfig, Venue};
use support::Backend;

const SHOW: &str = "one";
const TIMING: Timing = Timing {
    hold_ttl_ms: 600_000,
    payment_session_ms: 300_000,
};

async fn seeded() -> db::Db {
    let dir = tempfile::tempdir().unwrap();
    let db = db::connect(&Backend::Postgres.fresh_url(dir.path()))
        .await
        .unwrap();
    let show = ShowConfig {
        id: SHOW.into(),
        name: SHOW.into(),
        venue: Venue::small(10),
    };
    db::seed_show(&db, &show).await.unwrap();
    db
}

fn admission(name: &str) -> Admission {
    let now_s = now_ms() / 1000;
    Admission {
        iss: "waiting-room".into(),
        aud: "booking-core".into(),
        sub: format!("visitor-{name}"),
        event: SHOW.into(),
        jti: format!("jti-{name}"),
        iat: now_s,
        nbf: now_s,
        exp: now_s + 3600,
        tier: None,
    }
}

fn seats(ids: &[&str]) -> Ask {
    Ask::Seats(ids.iter().map(|s| (*s).to_owned()).collect())
}

fn request<'a>(adm: &'a Admission, key: &'a str, ask: Ask) -> Request<'a> {
    Request {
        adm,
        show: SHOW,
        ask,
        key,
        channel: "web",
        timing: TIMING,
        visitor_cap: 1,
    }
}

fn now_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

async fn count(db: &db::Db, sql: &str, arg: &str) -> i64 {
    sqlx::query_scalar(sql)
        .bind(arg)
        .fetch_one(db)
        .await
        .unwrap()
}

async fn free_seats(db: &db::Db) -> i64 {
    count(
        db,
        "SELECT COUNT(*) FROM seats WHERE show_id = $1 AND status = 'free'",
        SHOW,
    )
    .await
}

/// What a request's admission and key left in the database: (key rows, live cap slots of
/// its admission and visitor, holds of its admission).
async fn traces(db: &db::Db, adm: &Admission, key: &str) -> (i64, i64, i64) {
    let keys =
        sqlx::query_scalar("SELECT COUNT(*) FROM idempotency WHERE visitor_id = $1 AND key = $2")
            .bind(&adm.sub)
            .bind(key)
            .fetch_one(db)
            .await
            .unwrap();
    let slots = sqlx::query_scalar(
        "SELECT COUNT(*) FROM hold_slots WHERE owner IN ($1, $2) AND live_until <> 0",
    )
    .bind(&adm.jti)
    .bind(&adm.sub)
    .fetch_one(db)
    .await
    .unwrap();
    let holds = count(
        db,
        "SELECT COUNT(*) FROM holds WHERE admission_jti = $1",
        &adm.jti,
    )
    .await;
    (keys, slots, holds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_trip_grant_writes_the_hold_its_slots_audit_and_the_stored_201_with_the_summed_price()
{
    let db = seeded().await;
    let adm = admission("fan");
    let r = request(&adm, "k1", seats(&["A-1-1", "A-1-2"]));
    let answer = match onetrip::hold(&db, &r, now_ms()).await.unwrap() {
        OneTrip::Held(a) => a,
        other => panic!("held, not {other:?}"),
    };
    assert_eq!(answer.status, 201);
    // Two seats of section A at 5,000 cents: summed by the statement from the guarded update.
    assert_eq!(answer.body["amount_cents"], 10_000, "{}", answer.body);
    let hold = answer.body["hold_id"].as_str().unwrap().to_owned();
    assert_eq!(
        count(
            &db,
            "SELECT amount_cents FROM holds WHERE id = $1 AND status = 'HELD'",
            &hold
        )
        .await,
        10_000
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM seats WHERE hold_id = $1 AND status = 'held'",
            &hold
        )
        .await,
        2
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM hold_seats WHERE hold_id = $1",
            &hold
        )
        .await,
        2
    );
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM audit WHERE hold_id = $1 AND action = 'held'",
            &hold
        )
        .await,
        1
    );
    assert_eq!(
        traces(&db, &adm, "k1").await,
        (1, 2, 1),
        "key, both cap slots, one hold"
    );
    // The stored answer replays as the same 201.
    let hash = r.ask.request_hash(SHOW, "web");
    let stored = claim::stored_answer(&db, &adm.sub, "k1", &hash)
        .await
        .unwrap()
        .expect("a stored answer");
    assert_eq!((stored.status.as_u16(), stored.body), (201, answer.body));
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_trip_hold_lost_at_the_guarded_update_writes_nothing() {
    let db = seeded().await;
    held(&db, &admission("first"), "k", &["A-1-1"]).await;
    let second = admission("second");
    let r = request(&second, "k2", seats(&["A-1-1", "A-1-2"]));
    let lost = onetrip::hold(&db, &r, now_ms()).await.unwrap();
    assert!(matches!(lost, OneTrip::Lost), "{lost:?}");
    assert_eq!(
        traces(&db, &second, "k2").await,
        (0, 0, 0),
        "no key, slot or hold"
    );
    assert_eq!(
        free_seats(&db).await,
        9,
        "A-1-2 was not taken: all or nothing"
    );
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_trip_hold_refused_after_it_took_the_seats_leaves_nothing_half_written() {
    let db = seeded().await;
    let adm = admission("twice");
    // The admission holds already (one live hold per admission): its slot is taken, as when
    // another tab's hold committed after the read before this one.
    held(&db, &adm, "k1", &["A-1-1"]).await;
    let second = request(&adm, "k2", seats(&["A-1-5", "A-1-6"]));
    let refused = onetrip::hold(&db, &second, now_ms()).await.unwrap();
    assert!(matches!(refused, OneTrip::Other), "{refused:?}");
    // The guarded update had taken A-1-5 and A-1-6; the statement was undone whole.
    assert_eq!(free_seats(&db).await, 9, "only A-1-1 is held");
    assert_eq!(
        traces(&db, &adm, "k2").await,
        (0, 2, 1),
        "no key k2; the first hold's slots"
    );
    // The full path then decides it: 409 hold-exists.
    let err = claim::create(&db, &db, None, &second, now_ms())
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("hold-exists"), "{err:?}");

    // The key stored meanwhile by another request (another body): undone too.
    let other = admission("other");
    sqlx::query(
        "INSERT INTO idempotency (visitor_id, key, request_hash, status, body, created_at) \
         VALUES ($1, 'used', 'another-hash', 201, '{}', 0)",
    )
    .bind(&other.sub)
    .execute(&db)
    .await
    .unwrap();
    let reused = request(&other, "used", seats(&["A-1-7"]));
    let undone = onetrip::hold(&db, &reused, now_ms()).await.unwrap();
    assert!(matches!(undone, OneTrip::Other), "{undone:?}");
    assert_eq!(free_seats(&db).await, 9, "A-1-7 is free");
    assert_eq!(
        traces(&db, &other, "used").await,
        (1, 0, 0),
        "the other request's key only"
    );
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_trip_retry_of_a_refused_request_takes_its_key_over() {
    let db = seeded().await;
    let adm = admission("retry");
    let r = request(&adm, "k", seats(&["A-1-3"]));
    let hash = r.ask.request_hash(SHOW, "web");
    // The same request was refused before (its key stored as refused, status 409).
    assert!(claim::record_refusal(&db, &adm.sub, "k", &hash, now_ms())
        .await
        .unwrap());
    let held = onetrip::hold(&db, &r, now_ms()).await.unwrap();
    assert!(matches!(held, OneTrip::Held(_)), "{held:?}");
    assert_eq!(
        count(
            &db,
            "SELECT status FROM idempotency WHERE key = 'k' AND visitor_id = $1",
            &adm.sub
        )
        .await,
        201
    );
    db.close().await;
}

/// A hold made in one statement, its id.
async fn held(db: &db::Db, adm: &Admission, key: &str, ids: &[&str]) -> String {
    match onetrip::hold(db, &request(adm, key, seats(ids)), now_ms())
        .await
        .unwrap()
    {
        OneTrip::Held(a) => a.body["hold_id"].as_str().unwrap().to_owned(),
        other => panic!("held, not {other:?}"),
    }
}

fn release_of(hold: &str, adm: &Admission, payment: &str) -> Release {
    Release {
        hold_id: hold.to_owned(),
        show: SHOW.to_owned(),
        jti: adm.jti.clone(),
        payment: payment.to_owned(),
        reason: "released by fan".into(),
        now_ms: now_ms(),
    }
}

/// What a release of `hold` (admission `adm`) wrote: (hold RELEASED, seats it still holds,
/// live cap slots, `released` audit rows, session ended, session-end notices).
async fn released_traces(db: &db::Db, hold: &str, adm: &Admission) -> [i64; 6] {
    [
        count(db, "SELECT COUNT(*) FROM holds WHERE id = $1 AND status = 'RELEASED' AND ended_as = 'released'", hold).await,
        count(db, "SELECT COUNT(*) FROM seats WHERE hold_id = $1", hold).await,
        // Live slots (a closed one, `notify::SLOT_CLOSED`, is no hold's: its session ended).
        count(db, "SELECT COUNT(*) FROM hold_slots WHERE hold_id = $1 AND live_until <> 0 AND live_until <> 9223372036854775807", hold).await,
        count(db, "SELECT COUNT(*) FROM audit WHERE hold_id = $1 AND action = 'released'", hold).await,
        count(db, "SELECT COUNT(*) FROM admissions_ended WHERE jti = $1", &adm.jti).await,
        count(db, "SELECT COUNT(*) FROM outbox WHERE kind = 'session-end' AND ref_id = $1", &adm.jti).await,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_trip_release_frees_seats_and_slots_audits_and_ends_the_session() {
    let db = seeded().await;
    let adm = admission("leaver");
    let hold = held(&db, &adm, "k", &["A-1-1", "A-1-2"]).await;
    assert_eq!(released_traces(&db, &hold, &adm).await, [0, 2, 2, 0, 0, 0]);
    assert!(onetrip::release(&db, &release_of(&hold, &adm, ""))
        .await
        .unwrap());
    assert_eq!(released_traces(&db, &hold, &adm).await, [1, 0, 0, 1, 1, 1]);
    assert_eq!(free_seats(&db).await, 10);
    // The session ended with it: the admission's slot is closed, not free.
    let closed = "SELECT COUNT(*) FROM hold_slots WHERE scope = 'jti' AND owner = $1 \
                  AND live_until = 9223372036854775807";
    assert_eq!(count(&db, closed, &adm.jti).await, 1);
    // A second release finds it RELEASED: nothing more is written.
    assert!(!onetrip::release(&db, &release_of(&hold, &adm, ""))
        .await
        .unwrap());
    assert_eq!(released_traces(&db, &hold, &adm).await, [1, 0, 0, 1, 1, 1]);
    db.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_trip_release_writes_nothing_when_its_guard_fails_and_leaves_waitlists_to_the_full_release(
) {
    let db = seeded().await;
    let adm = admission("payer");
    let hold = held(&db, &adm, "k", &["A-1-3"]).await;
    // A payment started after the fan's read: the release must not go ahead under it.
    sqlx::query("UPDATE holds SET payment_id = 'pending:x' WHERE id = $1")
        .bind(&hold)
        .execute(&db)
        .await
        .unwrap();
    assert!(!onetrip::release(&db, &release_of(&hold, &adm, ""))
        .await
        .unwrap());
    assert_eq!(released_traces(&db, &hold, &adm).await, [0, 1, 2, 0, 0, 0]);
    sqlx::query("UPDATE holds SET payment_id = NULL WHERE id = $1")
        .bind(&hold)
        .execute(&db)
        .await
        .unwrap();
    // A fan waits on the show's waitlist: the full release offers the seat, not this one.
    sqlx::query(
        "INSERT INTO waitlist (show_id, visitor_id, admission_jti, joined_at) \
         VALUES ($1, 'visitor-waiting', 'jti-waiting', 0)",
    )
    .bind(SHOW)
    .execute(&db)
    .await
    .unwrap();
    assert!(!onetrip::release(&db, &release_of(&hold, &adm, ""))
        .await
        .unwrap());
    assert_eq!(released_traces(&db, &hold, &adm).await, [0, 1, 2, 0, 0, 0]);
    assert!(releases::alone(&db, &release_of(&hold, &adm, ""))
        .await
        .unwrap());
    let offered = count(
        &db,
        "SELECT COUNT(*) FROM waitlist WHERE show_id = $1 AND status = 'offered'",
        SHOW,
    )
    .await;
    assert_eq!(
        offered, 1,
        "the full release offered the seat to the waiting fan"
    );
    db.close().await;
}

/// The fan's release with no read of the hold first (`onetrip::release_own`, the booking
/// core's `DELETE /api/holds/{id}` on PostgreSQL): what the admission says (show, `jti`, no
/// payment) and the visitor are the guard. Another visitor's hold, a hold made under another
/// admission of the same visitor, and a hold with a payment are left alone (false, nothing
/// written: the handler reads the hold and answers 404, releases it the full way, or voids
/// the payment first); the fan's own plain hold is released with every trace of a release.
/// Without the visitor in the guard, the stranger's call releases the hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_with_no_read_first_releases_only_the_fans_own_plain_hold() {
    let db = seeded().await;
    let adm = admission("owner");
    let hold = held(&db, &adm, "k", &["A-1-1", "A-1-2"]).await;
    // A stranger who learned the hold's id, with an admission of the same show.
    let stranger = admission("stranger");
    let as_stranger = Release {
        jti: adm.jti.clone(),
        ..release_of(&hold, &stranger, "")
    };
    assert!(!onetrip::release_own(&db, &as_stranger, &stranger.sub)
        .await
        .unwrap());
    // The owner with a later admission (a new turn in the queue).
    let later = Admission {
        jti: "jti-owner-later".into(),
        ..adm.clone()
    };
    assert!(
        !onetrip::release_own(&db, &release_of(&hold, &later, ""), &later.sub)
            .await
            .unwrap()
    );
    // A payment started: the full path voids it first.
    sqlx::query("UPDATE holds SET payment_id = 'pending:x' WHERE id = $1")
        .bind(&hold)
        .execute(&db)
        .await
        .unwrap();
    assert!(
        !onetrip::release_own(&db, &release_of(&hold, &adm, ""), &adm.sub)
            .await
            .unwrap()
    );
    assert_eq!(released_traces(&db, &hold, &adm).await, [0, 2, 2, 0, 0, 0]);
    sqlx::query("UPDATE holds SET payment_id = NULL WHERE id = $1")
        .bind(&hold)
        .execute(&db)
        .await
        .unwrap();
    assert!(
        onetrip::release_own(&db, &release_of(&hold, &adm, ""), &adm.sub)
            .await
            .unwrap()
    );
    assert_eq!(released_traces(&db, &hold, &adm).await, [1, 0, 0, 1, 1, 1]);
    assert_eq!(free_seats(&db).await, 10);
    db.close().await;
}

/// Newcomer review: a fan's release and a second tab's hold of the same admission at once.
/// The release frees the admission's cap slot and ends its session in one transaction; the
/// hold's slot upsert waits on that slot row and then re-reads it, while its check that the
/// session has not ended reads its own, older snapshot. It took the freed slot: a `HELD` hold
/// on an ended admission. The release now closes the slot (`notify::SLOT_CLOSED`), so the
/// hold that waited finds it taken and is refused `admission-ended`, on both hold paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_tabs_hold_racing_the_release_that_ends_the_session_is_refused() {
    let db = seeded().await;
    for (n, one_statement) in [(1, false), (2, true)] {
        let adm = admission(&format!("tabs-{n}"));
        let first = held(&db, &adm, "k1", &[&format!("A-1-{n}")]).await;
        // The release, not yet committed: it has freed (or closed) the slot row.
        let mut release = db.begin().await.unwrap();
        let released = booking_core::inventory::holds::release_in(
            &mut release,
            true,
            &first,
            Some(""),
            booking_core::db::Actor::Api,
            booking_core::inventory::holds::Ended::Released,
            "released by fan",
            now_ms(),
        )
        .await
        .unwrap();
        assert!(released);
        let (db2, adm2) = (db.clone(), adm.clone());
        let seat = format!("A-1-{}", n + 5);
        let second_tab = tokio::spawn(async move {
            let r = request(&adm2, "k2", seats(&[&seat]));
            if one_statement {
                match onetrip::hold(&db2, &r, now_ms()).await {
                    Ok(OneTrip::Held(a)) => format!("201 {}", a.body),
                    Ok(other) => format!("{other:?}"),
                    Err(e) => format!("{e:?}"),
                }
            } else {
                match claim::create(&db2, &db2, None, &r, now_ms()).await {
                    Ok(a) => format!("201 {}", a.body),
                    Err(e) => format!("{e:?}"),
                }
            }
        });
        // The second tab's hold waits on the slot row the release changed.
        support::until_lock_wait(&db, || false).await;
        release.commit().await.unwrap();
        let answer = second_tab.await.unwrap();
        // One statement: undone (the full path then answers admission-ended); full path: 409.
        let expected = if one_statement {
            "Other"
        } else {
            "admission-ended"
        };
        assert!(answer.contains(expected), "tab {n}: {answer}");
        let held_on_ended = count(
            &db,
            "SELECT COUNT(*) FROM holds h JOIN admissions_ended e ON e.jti = h.admission_jti \
             WHERE h.status = 'HELD' AND h.admission_jti = $1",
            &adm.jti,
        )
        .await;
        assert_eq!(
            held_on_ended, 0,
            "no live hold on an ended admission: {answer}"
        );
    }
    db.close().await;
}

fn own(hold: &str, adm: &Admission, visitor: &str) -> onetrip::OwnRelease {
    onetrip::OwnRelease {
        release: release_of(hold, adm, ""),
        visitor: visitor.to_owned(),
    }
}

/// Fans' releases of their own plain holds applied together in one statement
/// (`onetrip::release_own_many`, the PostgreSQL group commit of `DELETE /api/holds/{id}`):
/// each answer and each trace is what that release alone writes. Three fans' holds are
/// released with every trace (the hold, its seats, its slots, its audit row, its session's end
/// and one notice with the body a release alone writes); the same hold asked twice in one
/// batch is released once (one audit row, one notice); a stranger's release of a hold, and a
/// release under a payment started meanwhile, write nothing and answer false.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_fans_releases_writes_what_each_release_alone_writes() {
    let db = seeded().await;
    let fans: Vec<Admission> = (1..=3).map(|n| admission(&format!("batch-{n}"))).collect();
    let mut holds = Vec::new();
    for (n, adm) in fans.iter().enumerate() {
        let ids = [format!("A-1-{}", 2 * n + 1), format!("A-1-{}", 2 * n + 2)];
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        holds.push(held(&db, adm, "k", &ids).await);
    }
    let payer = admission("batch-payer");
    let paying = held(&db, &payer, "k", &["A-1-7"]).await;
    sqlx::query("UPDATE holds SET payment_id = 'pending:x' WHERE id = $1")
        .bind(&paying)
        .execute(&db)
        .await
        .unwrap();
    let victim = admission("batch-victim");
    let victims = held(&db, &victim, "k", &["A-1-8"]).await;
    let stranger = admission("batch-stranger");
    let as_stranger = onetrip::OwnRelease {
        release: Release {
            jti: victim.jti.clone(),
            ..release_of(&victims, &stranger, "")
        },
        visitor: stranger.sub.clone(),
    };
    let batch = [
        own(&holds[0], &fans[0], &fans[0].sub),
        own(&holds[1], &fans[1], &fans[1].sub),
        own(&holds[1], &fans[1], &fans[1].sub),
        as_stranger,
        own(&paying, &payer, &payer.sub),
        own(&holds[2], &fans[2], &fans[2].sub),
    ];
    let refs: Vec<&onetrip::OwnRelease> = batch.iter().collect();
    let answers = onetrip::release_own_many(&db, &refs).await.unwrap();
    assert_eq!(answers, [true, true, true, false, false, true]);
    for (hold, adm) in holds.iter().zip(&fans) {
        assert_eq!(released_traces(&db, hold, adm).await, [1, 0, 0, 1, 1, 1]);
        let body: String = sqlx::query_scalar(
            "SELECT payload FROM outbox WHERE kind = 'session-end' AND ref_id = $1",
        )
        .bind(&adm.jti)
        .fetch_one(&db)
        .await
        .unwrap();
        let alone = booking_core::outbox::notify::session_end_payload(SHOW, &adm.jti);
        assert_eq!(body, alone.to_string());
    }
    assert_eq!(
        released_traces(&db, &paying, &payer).await,
        [0, 1, 2, 0, 0, 0]
    );
    assert_eq!(
        released_traces(&db, &victims, &victim).await,
        [0, 1, 2, 0, 0, 0]
    );
    assert_eq!(free_seats(&db).await, 8);
    // The same batch again: every hold is RELEASED or guarded, nothing more is written.
    let again = onetrip::release_own_many(&db, &refs).await.unwrap();
    assert_eq!(again, [false; 6]);
    assert_eq!(
        released_traces(&db, &holds[1], &fans[1]).await,
        [1, 0, 0, 1, 1, 1]
    );
    db.close().await;
}

/// Two holds of one admission released in one batch (the first lapsed, not yet swept, and the
/// hold the admission made after it): the session ends once, with one notice, and the
/// admission's slot is closed, as when the two are released one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_holds_of_one_admission_released_together_end_its_session_once() {
    let db = seeded().await;
    let adm = admission("twice");
    let first = held(&db, &adm, "k1", &["A-1-1"]).await;
    let later = now_ms() + TIMING.hold_ttl_ms + 1_000;
    let second = match onetrip::hold(&db, &request(&adm, "k2", seats(&["A-1-2"])), later)
        .await
        .unwrap()
    {
        OneTrip::Held(a) => a.body["hold_id"].as_str().unwrap().to_owned(),
        other => panic!("held after the first lapsed, not {other:?}"),
    };
    let at = |hold: &str| onetrip::OwnRelease {
        release: Release {
            now_ms: later + 1,
            ..release_of(hold, &adm, "")
        },
        visitor: adm.sub.clone(),
    };
    let batch = [at(&first), at(&second)];
    let refs: Vec<&onetrip::OwnRelease> = batch.iter().collect();
    assert_eq!(
        onetrip::release_own_many(&db, &refs).await.unwrap(),
        [true, true]
    );
    for hold in [&first, &second] {
        assert_eq!(released_traces(&db, hold, &adm).await, [1, 0, 0, 1, 1, 1]);
    }
    let closed = "SELECT COUNT(*) FROM hold_slots WHERE scope = 'jti' AND owner = $1 \
                  AND live_until = 9223372036854775807";
    assert_eq!(count(&db, closed, &adm.jti).await, 1);
    assert_eq!(free_seats(&db).await, 10);
    db.close().await;
}

/// Adds holds `from..to` of the show (`RELEASED`, as the fans' released ones) in one statement.
async fn add_holds(conn: &mut sqlx::AnyConnection, from: i64, to: i64) {
    sqlx::query(
        "INSERT INTO holds (id, show_id, visitor_id, admission_jti, status, amount_cents, \
         expires_at, payment_expires_at, created_at) \
         SELECT 'old-' || g, $1, 'v-' || g, 'j-' || g, 'RELEASED', 0, 0, 0, 0 \
         FROM generate_series(CAST($2 AS BIGINT), CAST($3 AS BIGINT) - 1) AS g",
    )
    .bind(SHOW)
    .bind(from)
    .bind(to)
    .execute(&mut *conn)
    .await
    .unwrap();
}

/// The plan `conn` has cached for its prepared statement `locks` (`force_generic_plan`, as
/// every connection of the booking core), one line per node.
async fn cached_plan(conn: &mut sqlx::AnyConnection) -> String {
    let lines: Vec<(String,)> =
        sqlx::query_as("EXPLAIN (COSTS OFF) EXECUTE locks('old-1', 'old-2')")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    lines
        .into_iter()
        .map(|(l,)| l)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A plan cached while `holds` was small is made again once the table has grown
/// (`db::statistics`): the fans' releases lock their holds by primary key
/// (`onetrip::release_own_many`'s `k`, the shape prepared here), but a connection that
/// planned the statement after autovacuum analysed `holds` at a few dozen rows kept a
/// sequential scan of the whole table, which read 13.3 million rows in one bench phase while
/// `holds` grew by a thousand a second. Without the keeper's step the plan still scans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_planned_while_holds_was_small_is_planned_again_once_it_grows() {
    use sqlx::{Acquire, Executor};
    let db = seeded().await;
    // Autovacuum stays out of the test's way: only the keeper analyses.
    db.execute("ALTER TABLE holds SET (autovacuum_enabled = false)")
        .await
        .unwrap();
    let mut pooled = db.acquire().await.unwrap();
    let conn = pooled.acquire().await.unwrap();
    add_holds(conn, 0, 60).await;
    conn.execute("ANALYZE holds").await.unwrap();
    conn.execute(
        "PREPARE locks (text, text) AS SELECT id FROM holds \
         WHERE id IN (SELECT hold FROM (VALUES ($1), ($2)) AS v (hold)) FOR UPDATE SKIP LOCKED",
    )
    .await
    .unwrap();
    let small = cached_plan(conn).await;
    assert!(small.contains("Seq Scan on holds"), "{small}");
    add_holds(conn, 60, 3_000).await;
    assert_eq!(cached_plan(conn).await, small, "the plan is cached");
    // The statistics system counts the new rows once this connection reports them.
    conn.execute("SELECT pg_stat_force_next_flush()")
        .await
        .unwrap();
    counted_rows(&db, "holds", 3_000).await;
    let analysed = db::statistics::step(&db).await.unwrap();
    assert!(analysed.iter().any(|t| t == "holds"), "{analysed:?}");
    let grown = cached_plan(conn).await;
    assert!(
        grown.contains("holds_pkey") && !grown.contains("Seq Scan on holds"),
        "{grown}"
    );
    let again = db::statistics::step(&db).await.unwrap();
    assert!(
        !again.iter().any(|t| t == "holds"),
        "not due twice: {again:?}"
    );
    drop(pooled);
    db.close().await;
}

/// Waits until the statistics system counts at least `rows` live rows in `table` (a backend
/// reports its counts when idle; `pg_stat_force_next_flush` was called on it).
async fn counted_rows(db: &db::Db, table: &str, rows: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while sqlx::query_scalar::<_, i64>(
        "SELECT COALESCE(MAX(n_live_tup), 0) FROM pg_stat_user_tables WHERE relname = $1",
    )
    .bind(table)
    .fetch_one(db)
    .await
    .unwrap()
        < rows
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{table}: rows never counted"
        );
        tokio::task::yield_now().await;
    }
}

/// The keeper analyses only the tables its role may analyse (a newcomer review): PostgreSQL
/// skips another role's table with a WARNING notice, not an error, so the step reported it
/// analysed, it stayed due, and every step logged the notice again, once a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_leaves_alone_a_table_its_role_may_not_analyse() {
    use sqlx::{Acquire, Executor};
    let dir = tempfile::tempdir().unwrap();
    let url = Backend::Postgres.fresh_url(dir.path());
    let admin = db::connect(&url).await.unwrap();
    let role = format!("keeper_{}", uuid::Uuid::new_v4().simple());
    let mut pooled = admin.acquire().await.unwrap();
    let conn = pooled.acquire().await.unwrap();
    for sql in [
        format!("CREATE ROLE {role} LOGIN"),
        "CREATE TABLE theirs (i INT)".to_owned(),
        "CREATE TABLE ours (i INT)".to_owned(),
        format!("ALTER TABLE ours OWNER TO {role}"),
        "INSERT INTO theirs SELECT generate_series(1, 100)".to_owned(),
        "INSERT INTO ours SELECT generate_series(1, 100)".to_owned(),
        "SELECT pg_stat_force_next_flush()".to_owned(),
    ] {
        conn.execute(sql.as_str()).await.unwrap();
    }
    counted_rows(&admin, "theirs", 100).await;
    counted_rows(&admin, "ours", 100).await;
    let keeper = sqlx::AnyPool::connect(&url.replacen(
        "postgres://postgres@",
        &format!("postgres://{role}@"),
        1,
    ))
    .await
    .unwrap();
    let analysed = db::statistics::step(&keeper).await.unwrap();
    assert_eq!(analysed, ["ours"], "only its own table");
    keeper.close().await;
    for sql in [
        format!("REASSIGN OWNED BY {role} TO postgres"),
        format!("DROP OWNED BY {role}"),
        format!("DROP ROLE {role}"),
    ] {
        conn.execute(sql.as_str()).await.unwrap();
    }
    drop(pooled);
    admin.close().await;
}
