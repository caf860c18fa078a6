//! General-admission pools (issue 5, seed 001 "Counters for Pooled Inventory") on SQLite and
//! PostgreSQL: the pretix-style race (an unguarded read-then-write counter oversells; the
//! conditional update gives exactly `capacity` winners), expiry on read and reclaim, release in
//! the same transaction, the drift check, and an oversell allowance with who set it.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use booking_core::PoolSpec;
use sale_common::Clock;
use serde_json::{json, Value};
use support::{analyse, Analysed, Backend, Harness, ADMIN, SHOW};
use tokio::sync::Barrier;

on_both!(
    pool_counter_race_exactly_capacity_winners,
    pool_expiry_release_drift_and_oversell,
    pool_holds_on_the_last_places_never_oversell,
    queued_pool_holds_sell_exactly_capacity,
    pool_holds_and_releases_at_once_lose_no_place,
    a_pools_lapsed_places_are_read_from_its_own_holds,
    a_pool_holds_moved_deadline_frees_its_places_on_the_map_when_it_passes,
);

async fn with_pool(b: Backend, capacity: u32) -> Harness {
    Harness::on_with(b, move |c| {
        Harness::small_venue(c, 4);
        c.shows[0].venue.pools.push(PoolSpec {
            id: "FLOOR".into(),
            price_cents: 3_000,
            capacity,
        });
    })
    .await
}

async fn pool_json(h: &Harness) -> Value {
    let v: Value = h
        .http
        .get(format!("{}/api/shows/{SHOW}/seats", h.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["pools"][0].clone()
}

async fn drift(h: &Harness) -> Value {
    h.http
        .get(format!("{}/admin/shows/{SHOW}/pools/drift", h.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The race without the guard: `fans` tasks each read the counter, pause (barrier), and
/// increment it when it looked free. Returns how many incremented.
async fn read_then_write(h: &Harness, fans: usize) -> usize {
    let (db, winners, barrier) = (
        h.state.db.clone(),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Barrier::new(fans)),
    );
    let tasks: Vec<_> = (0..fans)
        .map(|_| {
            let (db, winners, barrier) = (db.clone(), winners.clone(), barrier.clone());
            tokio::spawn(async move {
                let (taken, cap): (i64, i64) = sqlx::query_as(
                    "SELECT taken, capacity + oversell FROM pools WHERE show_id = 'demo' AND pool_id = 'FLOOR'",
                )
                .fetch_one(&db)
                .await
                .unwrap();
                barrier.wait().await;
                if taken < cap {
                    sqlx::query(
                        "UPDATE pools SET taken = taken + 1 WHERE show_id = 'demo' AND pool_id = 'FLOOR'",
                    )
                    .execute(&db)
                    .await
                    .unwrap();
                    winners.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    winners.load(Ordering::SeqCst)
}

/// `fans` concurrent pool holds of 1 place through the API: asserts exactly `winners` got 201,
/// the others `409 pool-unavailable` with nothing left, and the pool counter at `taken` with no
/// drift against the holds' rows.
async fn concurrent_holds_sell_exactly(h: &Harness, fans: usize, winners: usize, taken: i64) {
    let tokens: Vec<String> = (0..fans).map(|i| h.token(&format!("ga{i}"))).collect();
    let tries = tokens.iter().map(|t| async move {
        h.hold_with(t, "k", json!({"pool": "FLOOR", "quantity": 1}), &[])
            .await
    });
    let results = futures::future::join_all(tries).await;
    assert_eq!(
        results.iter().filter(|r| r.0 == 201).count(),
        winners,
        "{results:?}"
    );
    for (st, body) in results.iter().filter(|r| r.0 != 201) {
        assert_eq!(
            (*st, body["type"].as_str()),
            (409, Some("/problems/pool-unavailable")),
            "{body}"
        );
        assert_eq!(body["availability"][0]["available"], 0, "{body}");
    }
    let d = drift(h).await;
    assert_eq!(
        (d["pools"][0]["taken"].as_i64(), d["drifting"].as_i64()),
        (Some(taken), Some(0)),
        "{d}"
    );
    assert_eq!(pool_json(h).await["available"], 0);
}

async fn pool_counter_race_exactly_capacity_winners(b: Backend) {
    let h = with_pool(b, 10).await;
    assert_eq!(
        read_then_write(&h, 20).await,
        20,
        "unguarded: 20 fans for 10 places"
    );
    sqlx::query("UPDATE pools SET taken = 0")
        .execute(&h.state.db)
        .await
        .unwrap();
    // With the conditional counter: exactly 10 of 20 concurrent fans win.
    concurrent_holds_sell_exactly(&h, 20, 10, 10).await;
}

/// Through the per-show hold queue, whose batches take a pool's places with one counter update
/// for the batch's sum (issue 13 item 3) and fall back to one update per hold when the sum does
/// not fit: 30 concurrent fans of 1 place, then 2 places, still sell exactly the capacity.
async fn queued_pool_holds_sell_exactly_capacity(b: Backend) {
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, 4);
        c.shows[0].venue.pools.push(PoolSpec {
            id: "FLOOR".into(),
            price_cents: 3_000,
            capacity: 10,
        });
        c.queued_shows = vec![SHOW.into()];
    })
    .await;
    concurrent_holds_sell_exactly(&h, 30, 10, 10).await;
    // A second round on a bigger pool of 2-place holds: 7 fit into 15 (one place stays).
    sqlx::query("UPDATE pools SET capacity = 25")
        .execute(&h.state.db)
        .await
        .unwrap();
    let tokens: Vec<String> = (0..20).map(|i| h.token(&format!("pair{i}"))).collect();
    let h = &h;
    let tries = tokens.iter().map(|t| async move {
        h.hold_with(t, "k2", json!({"pool": "FLOOR", "quantity": 2}), &[])
            .await
    });
    let results = futures::future::join_all(tries).await;
    let won: Vec<&Value> = results
        .iter()
        .filter(|r| r.0 == 201)
        .map(|r| &r.1)
        .collect();
    assert_eq!(won.len(), 7, "{results:?}");
    for w in &won {
        assert_eq!(w["amount_cents"], 6_000, "{w}");
    }
    for (st, body) in results.iter().filter(|r| r.0 != 201) {
        assert_eq!(
            (*st, body["type"].as_str()),
            (409, Some("/problems/pool-unavailable")),
            "{body}"
        );
    }
    let d = drift(h).await;
    assert_eq!(
        (d["pools"][0]["taken"].as_i64(), d["drifting"].as_i64()),
        (Some(24), Some(0)),
        "{d}"
    );
    assert_eq!(pool_json(h).await["available"], 1);
}

async fn pool_expiry_release_drift_and_oversell(b: Backend) {
    let h = with_pool(b, 3).await;
    let t1 = h.token("p1");
    let (st, hold) = h
        .hold_with(&t1, "k", json!({"pool": "FLOOR", "quantity": 3}), &[])
        .await;
    assert_eq!(
        (st, hold["amount_cents"].as_i64()),
        (201, Some(9_000)),
        "{hold}"
    );
    assert_eq!(pool_json(&h).await["available"], 0);
    // expiry on read: the lapsed hold stops counting at once, before any sweeper
    h.clock.advance_ms(481_000);
    assert_eq!(pool_json(&h).await["available"], 3);
    let t2 = h.token("p2");
    let (st, h2) = h
        .hold_with(&t2, "k", json!({"pool": "FLOOR", "quantity": 2}), &[])
        .await;
    assert_eq!(st, 201, "{h2}");
    let d = drift(&h).await;
    assert_eq!(
        (d["pools"][0]["taken"].as_i64(), d["drifting"].as_i64()),
        (Some(2), Some(0)),
        "{d}"
    );
    // release decrements in the same transaction
    let r = h
        .http
        .delete(format!(
            "{}/api/holds/{}",
            h.base,
            h2["hold_id"].as_str().unwrap()
        ))
        .bearer_auth(&t2)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(drift(&h).await["pools"][0]["taken"], 0);
    // oversell: an operator allows 2 more, recorded with who and when
    let r = h
        .http
        .post(format!(
            "{}/admin/shows/{SHOW}/pools/FLOOR/oversell",
            h.base
        ))
        .bearer_auth(ADMIN)
        .json(&json!({"allowance": 2, "operator": "ops-anna", "policy": {
            "no_show_rate": 0.7, "sample": "club nights 2026, 30 shows",
            "move_order": "latest-booking-first", "offers": [{"kind": "refund-plus-compensation", "compensation_cents": 500}]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, _) = h
        .hold_with(
            &h.token("p3"),
            "k",
            json!({"pool": "FLOOR", "quantity": 4}),
            &[],
        )
        .await;
    assert_eq!(st, 201);
    let (st, _) = h
        .hold_with(
            &h.token("p4"),
            "k",
            json!({"pool": "FLOOR", "quantity": 2}),
            &[],
        )
        .await;
    assert_eq!(st, 409, "capacity 3 + oversell 2 = 5");
    let (by, at): (String, i64) = sqlx::query_as(
        "SELECT oversell_set_by, oversell_set_at FROM pools WHERE pool_id = 'FLOOR'",
    )
    .fetch_one(&h.state.db)
    .await
    .unwrap();
    assert_eq!(by, "ops-anna");
    assert!(at > 0);
    // discrete seats cannot be oversold: there is no allowance for them at all
    let r = h
        .http
        .post(format!(
            "{}/admin/shows/{SHOW}/pools/A-1-1/oversell",
            h.base
        ))
        .bearer_auth(ADMIN)
        .json(&json!({"allowance": 1, "operator": "ops"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let (st, body) = h
        .hold_with(
            &h.token("p5"),
            "k",
            json!({"pool": "NOPE", "quantity": 1}),
            &[],
        )
        .await;
    assert_eq!(
        (st, body["type"].as_str()),
        (422, Some("/problems/unknown-pool"))
    );
}

/// Issue 13 item 3: a pool hold claims its places with one short guarded update at the end of
/// its transaction (no `SELECT … FOR UPDATE` on the pool row before). On the last 3 of 7
/// places, 12 concurrent fans: a read-then-write claim (check the counter, pause, then
/// increment) sells 12 of 3 places; the hold path sells exactly the 3 left, and the drift check
/// (pool counter against the holds' rows) stays at zero.
async fn pool_holds_on_the_last_places_never_oversell(b: Backend) {
    let h = with_pool(b, 7).await;
    let (st, first) = h
        .hold_with(
            &h.token("early"),
            "k",
            json!({"pool": "FLOOR", "quantity": 4}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "{first}");
    assert_eq!(
        read_then_write(&h, 12).await,
        12,
        "unguarded: 12 fans for the last 3 places"
    );
    assert_eq!(drift(&h).await["pools"][0]["taken"], 16, "oversold by 9");
    sqlx::query("UPDATE pools SET taken = 4")
        .execute(&h.state.db)
        .await
        .unwrap();
    // With the guarded update: exactly the 3 places left are sold, to 3 of the 12.
    concurrent_holds_sell_exactly(&h, 12, 3, 7).await;
}

/// Rows of `pool_returns` (places released on PostgreSQL, not folded into `taken` yet).
async fn returns(h: &Harness) -> i64 {
    h.count(
        "SELECT COUNT(*) FROM pool_returns WHERE pool_id = $1",
        "FLOOR",
    )
    .await
}

/// Issue 13 item 3, no hot row for pools: a release does not wait on the pool row. A test
/// session locks the pool row (as every increment does from its update to its commit); a fan's
/// release still answers at once (without the returns it waited for the lock and the client's
/// 5 s timeout failed it), the place is available again and the drift check sees none. The
/// next hold folds the return into the counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_release_does_not_wait_on_the_pool_row() {
    let h = with_pool(Backend::Postgres, 10).await;
    let (st, held) = h
        .hold_with(
            &h.token("r1"),
            "k",
            json!({"pool": "FLOOR", "quantity": 2}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "{held}");
    let mut lock = h.state.db.begin().await.unwrap();
    sqlx::query("SELECT pool_id FROM pools WHERE pool_id = 'FLOOR' FOR UPDATE")
        .fetch_all(&mut *lock)
        .await
        .unwrap();
    let released = h
        .http
        .delete(format!(
            "{}/api/holds/{}",
            h.base,
            held["hold_id"].as_str().unwrap()
        ))
        .bearer_auth(h.token("r1"))
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .expect("the release answers while the pool row is locked");
    assert!(released.status().is_success(), "{:?}", released.status());
    assert_eq!(pool_json(&h).await["available"], 10, "the places are back");
    let d = drift(&h).await;
    assert_eq!(
        (d["pools"][0]["taken"].as_i64(), d["drifting"].as_i64()),
        (Some(0), Some(0)),
        "{d}"
    );
    lock.rollback().await.unwrap();
    assert_eq!(returns(&h).await, 1, "given back as a return");
    let (st, body) = h
        .hold_with(
            &h.token("r2"),
            "k",
            json!({"pool": "FLOOR", "quantity": 3}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "{body}");
    assert_eq!(returns(&h).await, 0, "the increment folded the return");
    let (taken,): (i64,) = sqlx::query_as("SELECT taken FROM pools WHERE pool_id = 'FLOOR'")
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    assert_eq!(taken, 3, "the counter holds the new hold only");
    assert_eq!(pool_json(&h).await["available"], 7);
}

/// Holds and releases of one pool at once (issue 13 item 3): on PostgreSQL releases append
/// returns that increments fold, on SQLite they decrement. Whatever won, no place is lost or
/// made up: the live holds never exceed the capacity, the counter has no drift, and exactly
/// the places left can still be held, one by one, before the pool refuses.
async fn pool_holds_and_releases_at_once_lose_no_place(b: Backend) {
    let h = with_pool(b, 3).await;
    let mut first = Vec::new();
    for i in 0..3 {
        let fan = format!("first{i}");
        let (st, body) = h
            .hold_with(
                &h.token(&fan),
                "k",
                json!({"pool": "FLOOR", "quantity": 1}),
                &[],
            )
            .await;
        assert_eq!(st, 201, "{body}");
        first.push((fan, body["hold_id"].clone()));
    }
    let releases = first.iter().map(|(fan, hold)| {
        let h = &h;
        async move {
            assert!((200..300).contains(&h.cancel_hold(fan, hold).await));
        }
    });
    let tokens: Vec<String> = (0..6).map(|i| h.token(&format!("next{i}"))).collect();
    let holds = tokens.iter().map(|t| {
        let h = &h;
        async move {
            h.hold_with(t, "k", json!({"pool": "FLOOR", "quantity": 1}), &[])
                .await
                .0
        }
    });
    let (_, answers) = tokio::join!(
        futures::future::join_all(releases),
        futures::future::join_all(holds)
    );
    let won = answers.iter().filter(|&&st| st == 201).count() as i64;
    assert!(
        answers.iter().all(|&st| st == 201 || st == 409),
        "{answers:?}"
    );
    assert!(won <= 3, "{won} holds on 3 places: {answers:?}");
    let d = drift(&h).await;
    assert_eq!(
        (d["pools"][0]["taken"].as_i64(), d["drifting"].as_i64()),
        (Some(won), Some(0)),
        "{d}"
    );
    assert_eq!(pool_json(&h).await["available"], 3 - won);
    let mut more = 0;
    for i in 0..4 {
        let (st, _) = h
            .hold_with(
                &h.token(&format!("late{i}")),
                "k",
                json!({"pool": "FLOOR", "quantity": 1}),
                &[],
            )
            .await;
        if st == 201 {
            more += 1;
        }
    }
    assert_eq!(more, 3 - won, "exactly the places left, after {won} won");
    assert_eq!(pool_json(&h).await["available"], 0);
}

/// Expiry on read among many lapsed holds (issue 13, the seed rehearsal: hundreds of
/// walk-aways' seat holds lapsed between two reconciler steps, and every pool read and refused
/// pool claim probed `hold_pools` once for each of them, 2.3 ms and 1.6 ms a call). A pool's
/// lapsed places are found from its own rows (`hold_pools.lapses_at`, migration
/// `20261205030000_pool_lapse_hint`): a lapsed pool hold counts free, a paid one never does
/// (its bound cleared when it is sold), and on PostgreSQL no node of the plan reads the lapsed
/// seat holds (fails without: the read walked all 13 lapsed holds).
async fn a_pools_lapsed_places_are_read_from_its_own_holds(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::venue_with_floor(c, 12, 5)).await;
    let booking = h.buy_places("paid", "FLOOR", 1).await;
    let (lapses_at,): (Option<i64>,) = sqlx::query_as(
        "SELECT hp.lapses_at FROM hold_pools hp JOIN bookings b ON b.hold_id = hp.hold_id \
         WHERE b.id = $1",
    )
    .bind(&booking)
    .fetch_one(&h.state.db)
    .await
    .unwrap();
    assert_eq!(lapses_at, None, "a sold hold's places never lapse");
    for i in 1..=12 {
        let (st, body) = h
            .hold(&h.token(&format!("s{i}")), "k", &[&format!("A-1-{i}")])
            .await;
        assert_eq!(st, 201, "{body}");
    }
    let (st, body) = h
        .hold_with(
            &h.token("walks-away"),
            "k",
            json!({"pool": "FLOOR", "quantity": 3}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "{body}");
    assert_eq!(pool_json(&h).await["available"], 1);
    // Every hold lapses: 12 seat holds and one pool hold, none swept.
    h.clock.advance_ms(481_000);
    assert_eq!(
        pool_json(&h).await["available"],
        4,
        "the lapsed 3 count free, the paid 1 does not"
    );
    let (st, body) = h
        .hold_with(
            &h.token("late"),
            "k",
            json!({"pool": "FLOOR", "quantity": 4}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "the lapsed places are reclaimed: {body}");
    assert_eq!(drift(&h).await["drifting"], 0);
    if b == Backend::Postgres {
        let db = &h.state.db;
        let mut lapsed = 0;
        for _ in 0..2 {
            // The refused claim's question, asked when nothing has lapsed and when 5 have.
            let (sql, _) =
                booking_core::inventory::pools::lapsed_exist_sql(SHOW, "FLOOR", h.clock.now_ms());
            let sql = sql
                .replace("$1", &format!("'{SHOW}'"))
                .replace("$2", "'FLOOR'")
                .replace("$3", &h.clock.now_ms().to_string());
            let Analysed { plan, read, .. } = analyse(db, &sql).await;
            assert!(
                read.iter().all(|rows| *rows <= 1),
                "no node reads another hold than the pool's own ({lapsed} lapsed): {plan:#?}"
            );
            h.clock.advance_ms(481_000);
            lapsed = 4;
        }
    }
}

/// The seat map's pools are read again as soon as the clock passes the next live pool hold's
/// deadline, found from the pools' own holds (`hold_pools.lapses_at`, a lower bound) and, for a
/// hold whose bound has passed but whose deadline was moved later (the extension ladder's
/// `UPDATE holds SET expires_at`, `payments::ladder`), from the hold itself: its places show
/// free once the moved deadline passes, with no wait for the real-time poll interval (fails
/// without the second part: the map kept the places held, no poll being due).
async fn a_pool_holds_moved_deadline_frees_its_places_on_the_map_when_it_passes(b: Backend) {
    let h = with_pool(b, 3).await;
    let (st, hold) = h
        .hold_with(
            &h.token("slow-payer"),
            "k",
            json!({"pool": "FLOOR", "quantity": 3}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "{hold}");
    assert_eq!(pool_json(&h).await["available"], 0);
    // The ladder gives the payment 2 minutes more.
    sqlx::query("UPDATE holds SET expires_at = expires_at + 120000 WHERE id = $1")
        .bind(hold["hold_id"].as_str().unwrap())
        .execute(&h.state.db)
        .await
        .unwrap();
    h.clock.advance_ms(481_000);
    assert_eq!(
        pool_json(&h).await["available"],
        0,
        "past the first deadline the hold still holds"
    );
    h.clock.advance_ms(120_000);
    assert_eq!(
        pool_json(&h).await["available"],
        3,
        "past the moved deadline the places show free"
    );
}
