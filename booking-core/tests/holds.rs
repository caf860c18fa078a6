//! Holds: same-millisecond holds (B04), overlapping multi-seat holds (B05), expired holds do not
//! block (B06), idempotency keys, and input errors.

mod support;

on_both!(
    case_b04_same_millisecond_holds,
    case_b04_race_exists_without_the_guard,
    case_b05_overlapping_multi_seat_holds,
    case_b06_expired_holds_do_not_block,
    idempotency_key_replays_and_refuses_a_different_body,
    bad_seat_requests_are_specific_4xx,
    section_views_and_overview_agree_with_the_whole_map,
);

use serde_json::json;
use support::{Backend, Harness, SHOW};

async fn case_b04_same_millisecond_holds(b: Backend) {
    let h = Harness::on(b).await;
    let tokens: Vec<String> = (0..50).map(|i| h.token(&format!("fan{i}"))).collect();
    let tries = tokens.iter().enumerate().map(|(i, t)| {
        let h = &h;
        async move { h.hold(t, &format!("k{i}"), &["A-1-1"]).await }
    });
    let results = futures::future::join_all(tries).await;
    let created = results.iter().filter(|r| r.0 == 201).count();
    let conflicts: Vec<_> = results.iter().filter(|r| r.0 == 409).collect();
    assert_eq!(created, 1, "{results:?}");
    assert_eq!(conflicts.len(), 49, "{results:?}");
    for (_, b) in conflicts {
        assert_eq!(b["type"], "/problems/seats-unavailable");
        assert_eq!(b["availability"]["A-1-1"], "held");
    }
}

/// STYLE.md race test: the same 50 fans through an unguarded read-then-write (no status check
/// in the UPDATE) all "win": a barrier between the read and the write (the injected pause) makes
/// every fan read `free` before anyone writes, so the race shows every time, never by luck. The
/// guarded claim above produces exactly one winner.
async fn case_b04_race_exists_without_the_guard(b: Backend) {
    let h = Harness::on(b).await;
    let db = h.state.db.clone();
    let winners = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(50));
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let (db, winners, barrier) = (db.clone(), winners.clone(), barrier.clone());
            tokio::spawn(async move {
                let st: String = sqlx::query_scalar("SELECT status FROM seats WHERE show_id = $1 AND seat_id = 'A-1-1'")
                    .bind(SHOW)
                    .fetch_one(&db)
                    .await
                    .unwrap();
                barrier.wait().await;
                if st == "free" {
                    sqlx::query("UPDATE seats SET status = 'held', hold_id = $1 WHERE show_id = $2 AND seat_id = 'A-1-1'")
                        .bind(format!("h{i}"))
                        .bind(SHOW)
                        .execute(&db)
                        .await
                        .unwrap();
                    winners.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        winners.load(std::sync::atomic::Ordering::SeqCst),
        50,
        "the unguarded variant lets every fan claim the seat"
    );
}

async fn case_b05_overlapping_multi_seat_holds(b: Backend) {
    let h = Harness::on(b).await;
    let asks = [["A-1-1", "A-1-2"], ["A-1-2", "A-1-3"], ["A-1-3", "A-1-1"]];
    let tokens: Vec<String> = (0..3).map(|i| h.token(&format!("m{i}"))).collect();
    let tries = asks.iter().zip(&tokens).enumerate().map(|(i, (a, t))| {
        let h = &h;
        async move { h.hold(t, &format!("b05-{i}"), a).await }
    });
    let results = futures::future::join_all(tries).await;
    let won: Vec<_> = results.iter().filter(|r| r.0 == 201).collect();
    assert!(won.len() <= 1, "{results:?}");
    assert!(
        results.iter().all(|r| r.0 == 201 || r.0 == 409),
        "{results:?}"
    );
    // no partial claim: exactly the winner's seats are held
    let held: Vec<String> =
        sqlx::query_scalar("SELECT seat_id FROM seats WHERE status = 'held' ORDER BY seat_id")
            .fetch_all(&h.state.db)
            .await
            .unwrap();
    let expect: Vec<String> = won
        .first()
        .map(|w| serde_json::from_value(w.1["seats"].clone()).unwrap())
        .unwrap_or_default();
    assert_eq!(held, expect);
}

async fn case_b06_expired_holds_do_not_block(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 10)).await;
    for i in 1..=10 {
        let (st, b) = h
            .hold(&h.token(&format!("f{i}")), "k", &[&format!("A-1-{i}")])
            .await;
        assert_eq!(st, 201, "{b}");
    }
    let (st, _) = h.hold(&h.token("late"), "k", &["A-1-1"]).await;
    assert_eq!(st, 409);
    // minute 9: every hold (8 min) lapsed unpaid; no sweeper has run
    h.clock.advance_ms(9 * 60 * 1000);
    let late = h.token("late2");
    let (st, b) = h.hold(&late, "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "{b}");
    for i in 2..=10 {
        assert_eq!(h.seat_status(&format!("A-1-{i}")).await, "free");
    }
    let stats = h.stats().await;
    assert_eq!(stats["free"], 9);
    assert_eq!(stats["held"], 1);
}

async fn idempotency_key_replays_and_refuses_a_different_body(b: Backend) {
    let h = Harness::on(b).await;
    let t = h.token("idem");
    let (s1, b1) = h.hold(&t, "same", &["C-1-1", "C-1-2"]).await;
    let (s2, b2) = h.hold(&t, "same", &["C-1-2", "C-1-1"]).await;
    assert_eq!((s1, s2), (201, 201));
    assert_eq!(b1, b2);
    let (s3, b3) = h.hold(&t, "same", &["C-1-3"]).await;
    assert_eq!(s3, 422, "{b3}");
    let r = h
        .http
        .post(format!("{}/api/shows/{SHOW}/holds", h.base))
        .bearer_auth(&t)
        .json(&json!({"seats": ["C-1-4"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
}

async fn bad_seat_requests_are_specific_4xx(b: Backend) {
    let h = Harness::on(b).await;
    let t = h.token("bad");
    let (st, b) = h
        .hold(&t, "a", &["A-1-1", "A-1-2", "A-1-3", "A-1-4", "A-1-5"])
        .await;
    assert_eq!(
        (st, b["type"].as_str()),
        (422, Some("/problems/seat-count"))
    );
    let (st, b) = h.hold(&t, "b", &["Z-9-9"]).await;
    assert_eq!(
        (st, b["type"].as_str()),
        (422, Some("/problems/unknown-seat"))
    );
    let (st, _) = h.hold(&t, "c", &[]).await;
    assert_eq!(st, 422);
    let r = h
        .http
        .get(format!("{}/api/shows/nope/seats", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let v: serde_json::Value = h
        .http
        .get(format!("{}/api/shows/{SHOW}/seats", h.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["capacity"], 600);
    assert_eq!(v["seats"][0]["id"], "A-1-1");
}

/// `?section=` and `GET …/sections` come from the same snapshot as the whole map: after a hold,
/// the held seat shows in its section only, and the overview's counts add up to the map's.
async fn section_views_and_overview_agree_with_the_whole_map(b: Backend) {
    let h = Harness::on(b).await;
    let t = h.token("sections");
    let (st, _) = h.hold(&t, "s1", &["B-1-1", "B-1-2"]).await;
    assert_eq!(st, 201);
    let get = |path: String| {
        let h = &h;
        async move {
            let r = h
                .http
                .get(format!("{}{path}", h.base))
                .send()
                .await
                .unwrap();
            let st = r.status().as_u16();
            (st, r.json::<serde_json::Value>().await.unwrap())
        }
    };
    let (_, whole) = get(format!("/api/shows/{SHOW}/seats")).await;
    let (st, b_map) = get(format!("/api/shows/{SHOW}/seats?section=B")).await;
    assert_eq!(st, 200);
    let seats = b_map["seats"].as_array().unwrap();
    assert!(seats.iter().all(|s| s["section"] == "B"), "{b_map}");
    assert_eq!(b_map["capacity"], 120);
    assert_eq!(b_map["available"], 118);
    assert_eq!(seats[0]["status"], "held");
    let (_, a_map) = get(format!("/api/shows/{SHOW}/seats?section=A")).await;
    assert_eq!(a_map["available"], 120);
    let (st, overview) = get(format!("/api/shows/{SHOW}/sections")).await;
    assert_eq!(st, 200);
    let secs = overview["sections"].as_array().unwrap();
    let names: Vec<_> = secs.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(names, ["A", "B", "C", "D", "E"]);
    let sum = |k: &str| secs.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("capacity"), whole["capacity"].as_u64().unwrap());
    assert_eq!(sum("available"), whole["available"].as_u64().unwrap());
    assert_eq!(overview["available"], 598);
    assert!(
        overview.get("seats").is_none(),
        "the overview names no seats"
    );
    let (st, p) = get(format!("/api/shows/{SHOW}/seats?section=Z")).await;
    assert_eq!(
        (st, p["type"].as_str()),
        (422, Some("/problems/unknown-section"))
    );
    for bad in [
        format!("/api/shows/{SHOW}/seats?row=1"),
        format!("/api/shows/{SHOW}/seats?section=A&section=B"),
        format!("/api/shows/{SHOW}/sections?foo=1"),
    ] {
        let (st, p) = get(bad.clone()).await;
        assert_eq!(
            (st, p["type"].as_str()),
            (422, Some("/problems/invalid-query")),
            "{bad}"
        );
    }
    let (st, _) = get("/api/shows/nope/sections".to_string()).await;
    assert_eq!(st, 404);
}

/// Issue 13, migration `20261205020000_seat_feed_log`: on PostgreSQL a seat's hold, the move of
/// its deadline and its release are HOT updates (no index of `seats` covers a column they
/// change), so a hot seat's lookups do not walk one index entry per past hold; and each change
/// is still logged for the seat map's feed, under the writing transaction's id. Run as the
/// service runs them, in one transaction whose own counts `pg_stat_xact_user_tables` shows.
/// Before the migration: 0 HOT updates of 6 (the feed's `change_seq` and the unsold seats'
/// index covered changed columns).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seat_holds_are_hot_updates_on_postgres() {
    use booking_core::inventory::holds;
    use sale_common::Clock;
    let h = Harness::on(Backend::Postgres).await;
    let now = h.clock.now_ms();
    let seats = vec!["A-1-1".to_owned(), "A-1-2".to_owned()];
    let mut tx = h.state.db.begin().await.unwrap();
    let got = holds::claim(&mut tx, true, SHOW, &seats, "hot-1", now + 60_000, now)
        .await
        .unwrap();
    assert_eq!(got.len(), 2, "both seats held");
    for s in &seats {
        sqlx::query("INSERT INTO hold_seats (hold_id, show_id, seat_id) VALUES ('hot-1', $1, $2)")
            .bind(SHOW)
            .bind(s)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let kept = sqlx::query(holds::KEEP_SEATS)
        .bind(now + 120_000)
        .bind("hot-1")
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(kept, 2, "both deadlines moved");
    let freed = holds::free_seats(&mut tx, true, SHOW, "hot-1")
        .await
        .unwrap();
    assert_eq!(freed, 2, "both seats released");
    let (updated, hot): (i64, i64) = sqlx::query_as(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = 'seats'",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!((updated, hot), (6, 6), "updates of seats, HOT ones");
    let logged: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM seat_changes \
         WHERE change_seq = CAST(CAST(pg_current_xact_id() AS TEXT) AS BIGINT)",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    assert_eq!(logged, 6, "each change in the seat map's feed");
    tx.rollback().await.unwrap();
}

/// The seat map's change log on PostgreSQL is pruned after `FEED_KEPT_MS` of the database's
/// clock and no sooner (a snapshot polled within `FEED_TRUSTED` still finds every change
/// past its cursor); the reconciler's step prunes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seat_change_log_is_pruned_after_its_keep_time() {
    use booking_core::inventory::seatmap::{prune_feed, FEED_KEPT_MS};
    let h = Harness::on(Backend::Postgres).await;
    let db = &h.state.db;
    let now: i64 =
        sqlx::query_scalar("SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)")
            .fetch_one(db)
            .await
            .unwrap();
    for (seat, age_ms) in [
        ("A-1-1", FEED_KEPT_MS + 60_000),
        ("A-1-2", FEED_KEPT_MS - 60_000),
    ] {
        sqlx::query(
            "INSERT INTO seat_changes (show_id, change_seq, seat_id, at_ms) VALUES ($1, 1, $2, $3)",
        )
        .bind(SHOW)
        .bind(seat)
        .bind(now - age_ms)
        .execute(db)
        .await
        .unwrap();
    }
    assert_eq!(
        prune_feed(db).await.unwrap(),
        1,
        "only the row past the keep time"
    );
    let left: Vec<String> =
        sqlx::query_scalar("SELECT seat_id FROM seat_changes WHERE change_seq = 1")
            .fetch_all(db)
            .await
            .unwrap();
    assert_eq!(left, vec!["A-1-2".to_owned()]);
}

/// The booking core times every request by its route, as the server sees it
/// (`bc_request_seconds{route, method}`, `bc_requests_total{route, class}`): the seed rehearsal's
/// fans measure the seat map's latency on a machine they share with the servers, and only the
/// server's own histogram tells its time from theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_is_timed_as_the_server_sees_it() {
    let h = Harness::start().await;
    let (status, _) = h.hold(&h.token("fan-timed"), "timed-1", &["A-1-1"]).await;
    assert_eq!(status, 201);
    let m = h.metrics().await;
    let line = |prefix: &str, label: &str| {
        m.lines()
            .find(|l| {
                l.starts_with(prefix)
                    && l.contains("route=\"/api/shows/{show}/holds\"")
                    && l.contains(label)
            })
            .unwrap_or_else(|| panic!("no {prefix} {label} for the hold route in\n{m}"))
            .to_owned()
    };
    let count = |l: String| -> f64 { l.rsplit(' ').next().unwrap().parse().unwrap() };
    assert!(count(line("bc_request_seconds_count", "method=\"POST\"")) >= 1.0);
    assert!(count(line("bc_requests_total", "class=\"ok\"")) >= 1.0);
}

/// The closed loop's view of a stalled core (CI: a locked seats table read as healthy and the
/// admit rate went up): a hold request waiting on a lock counts in `GET /internal/load`'s
/// `hold_running_counts` at the age it has reached by the service's clock, and leaves them when
/// it is answered (its latency then in `hold_counts`). A test session locks the caps table
/// against writes, which the hold's one statement writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_waiting_on_a_lock_is_reported_running() {
    let h = Harness::on(Backend::Postgres).await;
    let load = || async {
        let doc = h.admin_get("/internal/load").await;
        let counts = |k: &str| -> Vec<u64> {
            serde_json::from_value(doc[k].clone()).unwrap_or_else(|e| panic!("{k}: {e} in {doc}"))
        };
        (counts("hold_counts"), counts("hold_running_counts"))
    };
    let (finished_before, running) = load().await;
    assert_eq!(running.last(), Some(&0), "nothing runs yet: {running:?}");
    let lock = h
        .locking("LOCK TABLE hold_slots IN EXCLUSIVE MODE", &[])
        .await;
    let fan = h.token("fan-stuck");
    let stuck = h.hold(&fan, "stuck-1", &["A-1-1"]);
    let watch = async {
        // Until the request is in (it waits for the lock from then on).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while load().await.1.last() != Some(&1) {
            assert!(
                std::time::Instant::now() < deadline,
                "the hold never showed running"
            );
            tokio::task::yield_now().await;
        }
        h.clock.advance_ms(2_000);
        let (_, running) = load().await;
        // Bounds 5, 10, 25, 50, 100, 250, 500, 1000, 2500, …: over 1 s, within 2.5 s.
        assert_eq!((running[7], running[8]), (0, 1), "{running:?}");
        lock.rollback().await.unwrap();
    };
    let ((status, body), ()) = tokio::join!(stuck, watch);
    assert_eq!(status, 201, "held once the lock went: {body}");
    let (finished, running) = load().await;
    assert_eq!(running.last(), Some(&0), "{running:?}");
    assert_eq!(
        finished.last().unwrap() - finished_before.last().unwrap(),
        1
    );
}

/// A transaction that keeps a seat locked does not take the node down with it (newcomer
/// reviews: one holding seat locks for 25 s left every connection of the holds' pool waiting
/// behind it; every other hold then waited out the pool's 5 s acquire timeout, answered 503,
/// and those timeouts tripped the outage gate; with a lock wait limit alone, 50 requests for
/// the locked seat still took the 8 connections in turns of a second each, and 25 holds of
/// free seats sent with them all got 503 after 6 s). A test session locks seat A-1-1 for as
/// long as the test runs; 50 fans ask for it at once and 10 others for free seats. One
/// statement at a time runs for a seat in the process (`inventory::seatgate`): it ends at the
/// lock wait limit (`hold_lock_wait_ms`, 1 s), and it and the 49 that waited for it in memory
/// get `503` + `Retry-After` with nothing written; the 10 free seats are held meanwhile and the
/// outage gate never trips. Once the lock goes, the same request with the same key is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_locked_for_long_costs_its_holds_a_retry_not_the_node() {
    a_seat_locked_for_long_costs_a_retry(false).await
}

/// The same through the show's hold queue (newcomer review: a seat kept locked stalled every
/// batch of the queued show; cut at 15 s, the gate tripped). A batch skips the locked seat and
/// hands its requests back to run alone, as above; the free seats' requests hold in the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seat_locked_for_long_costs_its_queued_holds_a_retry_not_the_show() {
    a_seat_locked_for_long_costs_a_retry(true).await
}

async fn a_seat_locked_for_long_costs_a_retry(queued: bool) {
    let h = Harness::on_with(Backend::Postgres, |c| {
        if queued {
            c.queued_shows = vec![SHOW.into()];
        }
    })
    .await;
    let lock = h
        .locking(
            "SELECT seat_id FROM seats WHERE seat_id = 'A-1-1' FOR UPDATE",
            &[],
        )
        .await;
    let fans: Vec<String> = (0..50).map(|i| h.token(&format!("locked-{i}"))).collect();
    let ask = |token: &String, key: String| {
        h.http
            .post(format!("{}/api/shows/{SHOW}/holds", h.base))
            .bearer_auth(token)
            .header("Idempotency-Key", key)
            .json(&json!({"seats": ["A-1-1"]}))
            .send()
    };
    let waiting = futures::future::join_all(
        fans.iter()
            .enumerate()
            .map(|(i, t)| ask(t, format!("locked-{i}"))),
    );
    let others: Vec<String> = (0..10)
        .map(|i| h.token(&format!("elsewhere-{i}")))
        .collect();
    let h = &h;
    let elsewhere = futures::future::join_all(others.iter().enumerate().map(|(i, t)| async move {
        let seat = format!("A-2-{}", i + 1);
        let (status, body) = h.hold(t, &format!("free-{i}"), &[seat.as_str()]).await;
        assert!(!h.state.outage.is_down(), "the outage gate tripped");
        (status, body)
    }));
    let (answers, held) = tokio::join!(waiting, elsewhere);
    for (status, body) in held {
        assert_eq!(
            status, 201,
            "a free seat is held while A-1-1 is locked: {body}"
        );
    }
    for r in answers {
        let r = r.unwrap();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-after"], "1");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["type"], "/problems/unavailable", "{body}");
    }
    assert!(!h.state.outage.is_down(), "the outage gate tripped");
    assert_eq!(h.seat_status("A-1-1").await, "free");
    lock.rollback().await.unwrap();
    let (status, held) = h.hold(&fans[0], "locked-0", &["A-1-1"]).await;
    assert_eq!(status, 201, "nothing was written under the key: {held}");
}

/// Copies of one hold (same key, same body) sent at once while its seat is locked share the
/// first one's lock wait (a newcomer review: four copies were answered after 1, 2, 3 and 4 s,
/// each waiting out the lock again in turn): the owner's `503` is published to the copies
/// waiting for it, which answer it as replays. Red without: no replay, each copy ran itself.
/// A show of its own (`copies`): the replay counter is per show, and the tests of this file
/// share one process's metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_a_hold_on_a_locked_seat_share_one_lock_wait() {
    const OWN: &str = "copies";
    let h = Harness::on_with(Backend::Postgres, |c| {
        c.hold_lock_wait_ms = 3_000;
        c.shows[0].id = OWN.into();
    })
    .await;
    let lock = h
        .locking(
            "SELECT seat_id FROM seats WHERE show_id = $1 AND seat_id = 'A-1-1' FOR UPDATE",
            &[OWN],
        )
        .await;
    let replays = || async {
        h.metrics()
            .await
            .lines()
            .filter(|l| l.starts_with(&format!("bc_idempotent_replays_total{{show=\"{OWN}\"}}")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let before = replays().await;
    let token = h
        .signer
        .sign(&support::claims("copies", OWN, "jti-copies", h.now_s()));
    let copy = || {
        h.http
            .post(format!("{}/api/shows/{OWN}/holds", h.base))
            .bearer_auth(&token)
            .header("Idempotency-Key", "copies-1")
            .json(&json!({"seats": ["A-1-1"]}))
            .send()
    };
    let answers = futures::future::join_all((0..4).map(|_| copy())).await;
    for r in answers {
        let r = r.unwrap();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-after"], "1");
    }
    assert_eq!(
        replays().await - before,
        3.0,
        "the copies answered the first one's 503"
    );
    lock.rollback().await.unwrap();
    let r = copy().await.unwrap();
    assert_eq!(r.status(), 201, "held once the lock went");
}

/// A queued show's batch that waits on a lock past the limit hands its requests back to run
/// alone (newcomer review: the worker had no lock wait limit, so one transaction keeping a row
/// locked stalled every batch of the show, and its requests waited out the gate's 15 s). A
/// test session locks the cap slots' table, which every hold writes; 12 fans ask for 12 free
/// seats: the batch gives up after the limit (`hold_lock_wait_ms`, 1 s), each request alone
/// waits the limit once more and is answered `503` + `Retry-After` with nothing written; the
/// gate never trips, and once the lock goes the same keys hold. Red without the worker's
/// limit: the batch waits for as long as the lock is kept (the 30 s bound fails it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_batch_waiting_on_a_lock_hands_its_holds_back() {
    let h = Harness::on_with(Backend::Postgres, |c| c.queued_shows = vec![SHOW.into()]).await;
    let lock = h
        .locking("LOCK TABLE hold_slots IN EXCLUSIVE MODE", &[])
        .await;
    let fans: Vec<String> = (0..12).map(|i| h.token(&format!("slots-{i}"))).collect();
    let seat = |i: usize| format!("A-2-{}", i + 1);
    let ask = |i: usize| {
        h.http
            .post(format!("{}/api/shows/{SHOW}/holds", h.base))
            .bearer_auth(&fans[i])
            .header("Idempotency-Key", format!("slots-{i}"))
            .json(&json!({"seats": [seat(i)]}))
            .send()
    };
    let answers = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        futures::future::join_all((0..fans.len()).map(ask)),
    )
    .await
    .expect("the queue's batch waited on the lock");
    for r in answers {
        let r = r.unwrap();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()["retry-after"], "1");
    }
    assert!(!h.state.outage.is_down(), "the outage gate tripped");
    assert_eq!(h.seat_status(&seat(0)).await, "free");
    lock.rollback().await.unwrap();
    for (i, fan) in fans.iter().enumerate() {
        let (status, held) = h
            .hold(fan, &format!("slots-{i}"), &[seat(i).as_str()])
            .await;
        assert_eq!(status, 201, "nothing was written under the key: {held}");
    }
}

/// A checkout step waits for another transaction's lock at most `checkout_lock_wait_ms`
/// (newcomer review: a release of a hold whose row a session kept locked waited out the 15 s
/// request limit, and that cut-off tripped the outage gate for every request of the node). A
/// test session locks a live hold's row; the fan's release is answered `503` + `Retry-After`
/// after the limit, the hold stays HELD and the gate open; once the lock goes, the same
/// release is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkout_step_waiting_on_a_lock_is_a_retry_not_an_outage() {
    let h = Harness::on_with(Backend::Postgres, |c| c.checkout_lock_wait_ms = 300).await;
    let fan = "fan-release";
    let (status, hold) = h.hold(&h.token(fan), "release-1", &["A-1-1"]).await;
    assert_eq!(status, 201, "{hold}");
    let lock = h
        .locking(
            "SELECT id FROM holds WHERE id = $1 FOR UPDATE",
            &[hold["hold_id"].as_str().unwrap()],
        )
        .await;
    let release = || {
        h.http
            .delete(format!(
                "{}/api/holds/{}",
                h.base,
                hold["hold_id"].as_str().unwrap()
            ))
            .bearer_auth(h.token(fan))
            .send()
    };
    let r = release().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    assert!(!h.state.outage.is_down(), "the outage gate tripped");
    assert_eq!(h.seat_status("A-1-1").await, "held", "nothing was released");
    lock.rollback().await.unwrap();
    let r = release().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(h.seat_status("A-1-1").await, "free");
}

/// A hold request whose client gives up while its work waits on a lock stays counted as
/// running until that work ends (a newcomer review: 32 abandoned holds waiting on a locked
/// seat showed as 1, and the closed loop read the stalled core as healthy). No lock wait limit
/// here (`hold_lock_wait_ms` 0), so the work waits as long as the test keeps the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_whose_client_gave_up_counts_as_running_until_its_work_ends() {
    let h = Harness::on_with(Backend::Postgres, |c| c.hold_lock_wait_ms = 0).await;
    let running = || async {
        let doc = h.admin_get("/internal/load").await;
        doc["hold_running_counts"]
            .as_array()
            .and_then(|a| a.last())
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("no running counts in {doc}"))
    };
    let lock = h
        .locking("LOCK TABLE hold_slots IN EXCLUSIVE MODE", &[])
        .await;
    let gave_up = h
        .http
        .post(format!("{}/api/shows/{SHOW}/holds", h.base))
        .bearer_auth(h.token("fan-gone"))
        .header("Idempotency-Key", "gone-1")
        .timeout(std::time::Duration::from_millis(300))
        .json(&json!({"seats": ["A-1-1"]}))
        .send()
        .await;
    assert!(
        gave_up.is_err_and(|e| e.is_timeout()),
        "the client gives up first"
    );
    // Until the server has dropped the request (its in-flight gauge down to the scrape's own).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let m = h.metrics().await;
        let in_flight: f64 = m
            .lines()
            .find_map(|l| l.strip_prefix("bc_http_in_flight "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(f64::MAX);
        if in_flight <= 1.0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the request was never dropped"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(running().await, 1, "its work still waits on the lock");
    lock.rollback().await.unwrap();
    while running().await != 0 {
        assert!(std::time::Instant::now() < deadline, "the work never ended");
        tokio::task::yield_now().await;
    }
    assert_eq!(
        h.seat_status("A-1-1").await,
        "held",
        "the work went on and held the seat"
    );
}
