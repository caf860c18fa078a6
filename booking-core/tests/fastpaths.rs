//! Issue 7's fast paths: the per-show hold queue (seed 002: one worker per show applying a batch
//! of holds in one transaction, each still all-or-nothing and answered on its own), its admin
//! switch, the door's verified-token cache (a cached token still expires and stays bound to its
//! event), and the cached seat map (a hold and a lapse show at once).

mod support;

on_both!(
    queued_holds_have_one_winner_per_seat,
    queue_switch_is_an_admin_call,
    seat_map_cache_follows_holds_and_lapses,
    queued_unknown_seat_is_422_as_unqueued,
    a_refused_key_stored_first_by_another_body_is_reported_as_not_ours,
);

use std::collections::HashSet;

use serde_json::{json, Value};
use support::{Backend, Harness, ADMIN, SHOW};

/// 60 fans race for 2-seat pairs over 6 seats through the queue: the 201s never share a seat,
/// every refusal is a 409 with fresh availability, and a retried key replays its 201.
async fn queued_holds_have_one_winner_per_seat(b: Backend) {
    let h = Harness::on_with(b, |c| c.queued_shows = vec![SHOW.into()]).await;
    let seats = ["A-1-1", "A-1-2", "A-1-3", "A-1-4", "A-1-5", "A-1-6"];
    let tokens: Vec<String> = (0..60).map(|i| h.token(&format!("q{i}"))).collect();
    let tries = tokens.iter().enumerate().map(|(i, t)| {
        let h = &h;
        let pair = [seats[i % 6], seats[(i * 7 + 1) % 6]];
        let pair: Vec<&str> = if pair[0] == pair[1] {
            vec![pair[0]]
        } else {
            pair.to_vec()
        };
        async move { (i, h.hold(t, &format!("k{i}"), &pair).await) }
    });
    let results = futures::future::join_all(tries).await;
    let mut taken = HashSet::new();
    let mut winners = Vec::new();
    for (i, (st, body)) in &results {
        match st {
            201 => {
                for s in body["seats"].as_array().unwrap() {
                    assert!(taken.insert(s.as_str().unwrap().to_owned()), "{s} twice");
                }
                winners.push((*i, body["hold_id"].clone()));
            }
            409 => assert!(body["type"].as_str().unwrap().starts_with("/problems/")),
            _ => panic!("unexpected {st}: {body}"),
        }
    }
    assert!(!winners.is_empty());
    let stats = h.stats().await;
    assert_eq!(
        stats["held"].as_i64().unwrap(),
        taken.len() as i64,
        "{stats}"
    );
    let (i, id) = &winners[0];
    let again = h
        .hold(&tokens[*i], &format!("k{i}"), &[seats[*i % 6]])
        .await;
    assert_eq!(again.0, 422, "same key, other body: {again:?}");
    let pair = [seats[*i % 6], seats[(*i * 7 + 1) % 6]];
    let mut pair: Vec<&str> = pair.into_iter().collect();
    pair.sort();
    pair.dedup();
    let replay = h.hold(&tokens[*i], &format!("k{i}"), &pair).await;
    assert_eq!((replay.0, &replay.1["hold_id"]), (201, id), "{replay:?}");
}

async fn queue_switch_is_an_admin_call(b: Backend) {
    let h = Harness::on(b).await;
    let url = format!("{}/admin/shows/{SHOW}/hold-queue", h.base);
    let get = || async {
        let v: Value = h
            .http
            .get(&url)
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["enabled"].as_bool().unwrap()
    };
    assert!(!get().await);
    let r = h
        .http
        .post(&url)
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = h
        .http
        .post(&url)
        .bearer_auth(ADMIN)
        .json(&json!({"enabled": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(get().await);
    let t = h.token("sw");
    assert_eq!(h.hold(&t, "k1", &["A-1-1"]).await.0, 201);
    assert_eq!(h.hold(&h.token("sw2"), "k1", &["A-1-1"]).await.0, 409);
}

/// Served from the cache between writes, yet a new hold shows at once, and so does its lapse
/// when the (test) clock passes its deadline.
async fn seat_map_cache_follows_holds_and_lapses(b: Backend) {
    let h = Harness::on(b).await;
    assert_eq!(h.seat_status("A-1-1").await, "free");
    assert_eq!(h.seat_status("A-1-1").await, "free");
    let t = h.token("cache");
    assert_eq!(h.hold(&t, "k", &["A-1-1"]).await.0, 201);
    assert_eq!(h.seat_status("A-1-1").await, "held");
    h.clock.advance_ms(481_000);
    assert_eq!(h.seat_status("A-1-1").await, "free");
    // The door's cache: the token verified above is refused once past exp + leeway.
    h.clock.advance_ms(125_000);
    let me = format!("{}/api/me", h.base);
    assert_eq!(
        h.http
            .get(&me)
            .bearer_auth(&t)
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
}

/// Newcomer review: through the hold queue a seat that does not exist was `409
/// seats-unavailable` (which a client retries forever); it is `422 unknown-seat` naming it, as
/// without the queue, and the known seat asked beside it stays free.
async fn queued_unknown_seat_is_422_as_unqueued(b: Backend) {
    let h = Harness::on_with(b, |c| c.queued_shows = vec![SHOW.into()]).await;
    for (i, seats) in [vec!["Z-9-99"], vec!["A-1-1", "Z-9-99"]].iter().enumerate() {
        let (st, body) = h.hold(&h.token(&format!("u{i}")), "k", seats).await;
        assert_eq!(st, 422, "{body}");
        assert_eq!(body["type"], "/problems/unknown-seat", "{body}");
        assert_eq!(body["seats"], json!(["Z-9-99"]), "{body}");
    }
    assert_eq!(h.seat_status("A-1-1").await, "free");
}

/// A test session's transaction holding the caps table against writes (`LOCK TABLE hold_slots
/// IN EXCLUSIVE MODE`: reads go on), which every hold transaction's first statement writes
/// (PostgreSQL); roll it back to let them on.
async fn lock_caps(h: &Harness) -> booking_core::db::Tx<'static> {
    let mut lock = booking_core::db::begin_write(&h.state.db).await.unwrap();
    sqlx::query("LOCK TABLE hold_slots IN EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    lock
}

/// `ask`'s answer within 5 s (while [`lock_caps`] holds, only a request answered without a
/// hold transaction is).
async fn at_once(ask: impl std::future::Future<Output = (u16, Value)>) -> (u16, Value) {
    tokio::time::timeout(std::time::Duration::from_secs(5), ask)
        .await
        .expect("answered while every hold transaction waits for the caps table")
}

/// Issue 13: a hold of seats another fan holds is refused from one read, without a
/// transaction (`inventory::preread`). A test session locks the caps table against writes
/// (`LOCK TABLE hold_slots IN EXCLUSIVE MODE`: reads go on), which every hold transaction's
/// first statement writes: the loser still gets its 409 with fresh availability at once (through
/// the transaction it waits for the lock and the client's 5 s timeout fails the test), its key is
/// remembered as refused (reused with another body: 422), and once the seats are free the same
/// request, key and body, holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn visibly_taken_seats_are_refused_without_a_transaction() {
    let h = Harness::on(Backend::Postgres).await;
    let a = h.token("fan-a");
    let (st, first) = h.hold(&a, "ka", &["A-1-1", "A-1-2"]).await;
    assert_eq!(st, 201, "{first}");
    let lock = lock_caps(&h).await;
    let b = h.token("fan-b");
    let ask = |key: &str, seats: &[&str]| {
        h.http
            .post(format!("{}/api/shows/{SHOW}/holds", h.base))
            .bearer_auth(&b)
            .header("Idempotency-Key", key)
            .timeout(std::time::Duration::from_secs(5))
            .json(&json!({ "seats": seats }))
    };
    let r = ask("kb", &["A-1-2", "A-1-3"])
        .send()
        .await
        .expect("answered while every hold transaction waits for the caps table");
    assert_eq!(r.status(), 409);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "/problems/seats-unavailable", "{body}");
    assert_eq!(
        body["availability"],
        json!({"A-1-2": "held", "A-1-3": "free"}),
        "{body}"
    );
    lock.rollback().await.unwrap();
    let (st, reused) = h
        .hold_with(&b, "kb", json!({"seats": ["A-1-4"]}), &[])
        .await;
    assert_eq!(st, 422, "the refused key is remembered: {reused}");
    assert_eq!(reused["type"], "/problems/idempotency-key-reused");
    let st = h.cancel_hold("fan-a", &first["hold_id"]).await;
    assert!((200..300).contains(&st), "fan a's release: {st}");
    let (st, held) = h.hold(&b, "kb", &["A-1-2", "A-1-3"]).await;
    assert_eq!(st, 201, "a refusal is computed anew: {held}");
}

/// Issue 13: on PostgreSQL the read before a hold stores the refusal it makes in the same
/// statement (`preread::Seen::recorded`): no batch of the refusals' group commit for it, one
/// round trip for the 409. The key is stored as refused all the same (another body with it:
/// 422), a retry of the same request while the seats are still taken is refused again without
/// a record, and one whose seats are free again holds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_seen_by_the_read_is_stored_by_it() {
    let h = Harness::on(Backend::Postgres).await;
    let (st, first) = h.hold(&h.token("fan-a"), "ka", &["A-1-1"]).await;
    assert_eq!(st, 201, "{first}");
    let before = h.state.refusals.batches();
    let b = h.token("fan-b");
    for _ in 0..2 {
        let (st, body) = h.hold(&b, "kb", &["A-1-1", "A-1-2"]).await;
        assert_eq!(st, 409, "{body}");
        assert_eq!(
            body["availability"],
            json!({"A-1-1": "held", "A-1-2": "free"}),
            "{body}"
        );
    }
    assert_eq!(h.state.refusals.batches(), before, "no group-commit batch");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM idempotency WHERE key = $1 AND status = 409",
            "kb"
        )
        .await,
        1
    );
    let (st, body) = h.hold(&b, "kb", &["A-1-3"]).await;
    assert_eq!(st, 422, "the refused key is stored: {body}");
    assert_eq!(h.cancel_hold("fan-a", &first["hold_id"]).await / 100, 2);
    let (st, body) = h.hold(&b, "kb", &["A-1-1", "A-1-2"]).await;
    assert_eq!(st, 201, "a refusal is decided anew: {body}");
}

/// Issue 13: a pool that a read shows short is refused from that read, before the hold queue
/// and without a transaction (`inventory::preread`; read when the node's seat map says the
/// pool is short): in the seed rehearsal's hot show 29,500 of
/// 29,900 pool requests in 80 s came after the pool had sold out, each through the queue. With
/// the show queued and every hold transaction waiting (a test session locks the caps table
/// against writes, as above), a pool ask for more places than are left gets its 409 at once,
/// with the pool's availability as the read saw it; the refused key is remembered (422 with
/// another body); once the holds lapse (the read counts a lapsed hold's places as free, as the
/// transaction reclaims them) the same request holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_pool_is_refused_before_the_hold_queue() {
    let h = Harness::on_with(Backend::Postgres, |c| {
        Harness::venue_with_floor(c, 2, 3);
        c.queued_shows = vec![SHOW.into()];
    })
    .await;
    let pool = |n: u32| json!({"pool": "FLOOR", "quantity": n});
    let (st, body) = h.hold_with(&h.token("places"), "k", pool(2), &[]).await;
    assert_eq!(st, 201, "{body}");
    // The read happens when this node's seat map says the pool is short: a fan's look at it.
    let map = h.fan_get("fan", &format!("/api/shows/{SHOW}/seats")).await;
    assert_eq!(map["pools"][0]["available"], 1, "{map}");
    let lock = lock_caps(&h).await;
    let (st, body) = at_once(h.hold_with(&h.token("fan"), "k", pool(2), &[])).await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(body["type"], "/problems/pool-unavailable", "{body}");
    assert_eq!(
        body["availability"],
        json!([{"id": "FLOOR", "price_cents": 3000, "capacity": 3, "oversell": 0, "available": 1}]),
        "{body}"
    );
    lock.rollback().await.unwrap();
    let (st, body) = h.hold_with(&h.token("fan"), "k", pool(1), &[]).await;
    assert_eq!(st, 422, "the refused key is remembered: {body}");
    assert_eq!(body["type"], "/problems/idempotency-key-reused");
    h.clock.advance_ms(481_000);
    let (st, body) = h.hold_with(&h.token("fan"), "k", pool(2), &[]).await;
    assert_eq!(st, 201, "lapsed places count as free: {body}");
}

/// Issue 13: in the hold queue's batch a best-available party whose section has no block for
/// it (read whole, with nothing else of the batch taken) is settled before its key and cap
/// slots are written (`inventory::batch`, `held_back`): with every hold transaction's first
/// write held up (the caps table locked against writes, as above), such a party gets its 409
/// at once. A stored key or a cap still answers first, as in the party's own transaction: the
/// winner's retry replays its 201, and its new request is refused for the hold it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_party_with_no_seats_left_is_settled_before_its_keys_are_written() {
    let h = Harness::on_with(Backend::Postgres, |c| {
        Harness::small_venue(c, 2);
        c.queued_shows = vec![SHOW.into()];
    })
    .await;
    let best = |n: u32| json!({"best_available": {"section": "A", "quantity": n}});
    let first = h.token("first");
    let (st, held) = h.hold_with(&first, "k", best(2), &[]).await;
    assert_eq!(st, 201, "{held}");
    let lock = lock_caps(&h).await;
    let (st, body) = at_once(h.hold_with(&h.token("late"), "k", best(1), &[])).await;
    assert_eq!(
        (st, body["availability"].clone()),
        (409, json!({"section": "A", "free": 0, "largest_block": 0})),
        "{body}"
    );
    lock.rollback().await.unwrap();
    let (st, again) = h.hold_with(&first, "k", best(2), &[]).await;
    assert_eq!((st, &again["hold_id"]), (201, &held["hold_id"]), "{again}");
    let (st, body) = h.hold_with(&first, "k2", best(1), &[]).await;
    assert_eq!(
        (st, body["type"].as_str()),
        (409, Some("/problems/hold-exists")),
        "{body}"
    );
}

/// Issue 13: refusals before a transaction store their keys in batches
/// (`inventory::refusals`). With SQLite's one writer busy (a test transaction holds it), 20
/// fans asking for a held seat are each refused from the read before the hold and wait for
/// their key to be stored; once the writer is free the worker's first batch is stored and
/// every row that queued behind it in one more statement: at most 2 commits, not 20. Every 409 is answered only after
/// its key is stored (each key reused with another body is 422).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_waiting_for_the_writer_are_stored_in_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("b.db").display());
    let h = Harness::start_with(move |c| c.database_url = url).await;
    let (st, first) = h.hold(&h.token("holder"), "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "{first}");
    let before = h.state.refusals.batches();
    let writer = booking_core::db::begin_write(&h.state.db).await.unwrap();
    let keys: Vec<String> = (0..20).map(|i| format!("r{i}")).collect();
    let fans: Vec<String> = keys.iter().map(|k| h.token(k)).collect();
    let asks = futures::future::join_all(
        fans.iter()
            .zip(&keys)
            .map(|(t, k)| h.hold(t, k, &["A-1-1"])),
    );
    let waited = async {
        // Every refusal handed over: the worker's first batch waits for the writer, the
        // rest queue behind it.
        while h.state.refusals.pending() < 20 {
            tokio::task::yield_now().await;
        }
        writer.rollback().await.unwrap();
    };
    let (answers, ()) = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        tokio::join!(asks, waited)
    })
    .await
    .expect("the 20 refusals queued for the writer");
    for (st, body) in &answers {
        assert_eq!(*st, 409, "{body}");
        assert_eq!(body["type"], "/problems/seats-unavailable", "{body}");
    }
    let batches = h.state.refusals.batches() - before;
    assert!(
        (1..=2).contains(&batches),
        "the worker's first batch, then every row queued behind it: {batches} commits for 20"
    );
    for (t, k) in fans.iter().zip(&keys) {
        let (st, body) = h.hold_with(t, k, json!({"seats": ["A-1-2"]}), &[]).await;
        assert_eq!(st, 422, "the refused key was stored: {body}");
    }
}

/// Issue 13: fans' releases on SQLite are applied in batches (`inventory::releases`). With the
/// one writer busy (a test transaction holds it), 20 fans release their holds and one of them
/// sends its DELETE twice: every release queues for the worker; once the writer is free the
/// worker's first batch is applied and every release that queued behind it in one more
/// transaction: at most 2 commits, not 21. Each DELETE is answered 200 only after its release is
/// committed, the twice-sent one too (its second finds the hold released and writes nothing):
/// every seat is free again and each hold has exactly one release audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_waiting_for_the_writer_are_applied_in_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("b.db").display());
    let h = Harness::start_with(move |c| c.database_url = url).await;
    let fans: Vec<String> = (0..20).map(|i| format!("rel{i}")).collect();
    let seat = |i: usize| format!("A-{}-{}", i / 10 + 1, i % 10 + 1);
    let mut holds = Vec::new();
    for (i, fan) in fans.iter().enumerate() {
        let (st, body) = h.hold(&h.token(fan), "k", &[seat(i).as_str()]).await;
        assert_eq!(st, 201, "{body}");
        holds.push(body["hold_id"].clone());
    }
    let before = h.state.releases.batches();
    let writer = booking_core::db::begin_write(&h.state.db).await.unwrap();
    let mut deletes: Vec<(&String, &Value)> = fans.iter().zip(&holds).collect();
    deletes.push((&fans[0], &holds[0]));
    let asks = futures::future::join_all(deletes.iter().map(|(f, id)| h.cancel_hold(f, id)));
    let waited = async {
        // Every release handed over: the worker's first batch waits for the writer, the
        // rest queue behind it.
        while h.state.releases.pending() < deletes.len() {
            tokio::task::yield_now().await;
        }
        writer.rollback().await.unwrap();
    };
    let (answers, ()) = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        tokio::join!(asks, waited)
    })
    .await
    .expect("the 21 releases queued for the writer");
    assert!(answers.iter().all(|st| *st == 200), "{answers:?}");
    let batches = h.state.releases.batches() - before;
    assert!(
        (1..=2).contains(&batches),
        "the worker's first batch, then every release queued behind it: {batches} commits for 21"
    );
    for (i, id) in holds.iter().enumerate() {
        assert_eq!(h.seat_status(&seat(i)).await, "free");
        let id = id.as_str().unwrap();
        assert_eq!(h.hold_view(&fans[i], id).await["status"], "RELEASED");
        let audited = h
            .count(
                "SELECT COUNT(*) FROM audit WHERE hold_id = $1 AND action = 'released'",
                id,
            )
            .await;
        assert_eq!(audited, 1, "hold {id}: one release audited");
    }
}

/// Newcomer review: one key sent at once with two bodies, both for taken seats, was answered
/// 409 twice (the refusal rows were inserted with `ON CONFLICT DO NOTHING` and nobody looked
/// which one stayed), and the later body's retry then 422. `claim::record_refused_rows` now
/// says per row whether the stored row is that row's request: the handler answers the other
/// body 422 `idempotency-key-reused` at once. Within one batch and across batches; an identical
/// request (same hash) is still ours.
async fn a_refused_key_stored_first_by_another_body_is_reported_as_not_ours(b: Backend) {
    use booking_core::inventory::claim::{record_refused_rows, Refused};
    let h = Harness::on(b).await;
    let db = &h.state.db;
    let (x, y) = (
        Refused::of("fan", "k1", "hash-x", 1),
        Refused::of("fan", "k1", "hash-y", 2),
    );
    assert_eq!(
        record_refused_rows(db, &[&x, &y, &x]).await.unwrap(),
        vec![true, false, true],
        "in one batch: the first body's row stays; the same body again is ours"
    );
    let other = Refused::of("fan", "k2", "hash-z", 3);
    assert_eq!(
        record_refused_rows(db, &[&y, &x, &other]).await.unwrap(),
        vec![false, true, true],
        "in a later batch: the stored row decides"
    );
    let via = h.state.refusals.record(db, y.clone()).await.unwrap();
    assert!(!via, "through the batch worker too");
}
