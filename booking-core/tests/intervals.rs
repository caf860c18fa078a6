//! Interval resources (issue 17 items 1 and 2) on SQLite and PostgreSQL: the overlap race (the
//! unguarded check-then-insert lets two claims in; through the API, with PostgreSQL's exclusion
//! constraint or SQLite's check under the single writer, exactly one of N concurrent holders
//! wins), back-to-back intervals, the buffer inside the range, an expired hold not blocking,
//! SQLSTATE 23P01 answered 409 with fresh free intervals, and bad input as specific 422s. On
//! PostgreSQL, claims that waited together on a claim being released are one winner and 409s,
//! never a deadlock.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use booking_core::inventory::resources::{INSERT, OVERLAP};
use booking_core::venue::resources::parse_instant;
use booking_core::{ResourceKind, Window};
use serde_json::{json, Value};
use support::{Backend, Harness, SHOW};
use tokio::sync::Barrier;

on_both!(
    interval_overlap_race_two_winners_unguarded_one_with_the_guard,
    back_to_back_intervals_both_succeed_and_the_buffer_is_in_the_range,
    an_expired_interval_hold_does_not_block,
    an_overlap_is_409_with_fresh_free_intervals,
    bad_interval_input_is_a_specific_422,
    a_paid_interval_keeps_blocking_and_a_released_one_frees_at_once,
);

fn at(hhmm: &str) -> i64 {
    parse_instant(&format!("2030-06-01T{hhmm}:00Z")).unwrap()
}

fn kind(name: &str, resources: &[&str], buffer: u32) -> ResourceKind {
    ResourceKind {
        kind: name.into(),
        resources: resources.iter().map(|r| (*r).to_owned()).collect(),
        windows: vec![Window {
            start: "2030-06-01T18:00:00Z".into(),
            end: "2030-06-01T22:00:00Z".into(),
        }],
        slot_minutes: 30,
        buffer_minutes: buffer,
        price_cents_per_slot: 250,
    }
}

/// A show with `parking` (P1, P2; no buffer) and `boxes` (B1; a 30-minute buffer).
async fn with_resources(b: Backend) -> Harness {
    Harness::on_with(b, |c| {
        Harness::small_venue(c, 4);
        let v = &mut c.shows[0].venue;
        v.resources.push(kind("parking", &["P1", "P2"], 0));
        v.resources.push(kind("boxes", &["B1"], 30));
    })
    .await
}

async fn hold_interval(h: &Harness, fan: &str, key: &str, body: Value) -> (u16, Value) {
    h.hold_with(&h.token(fan), key, body, &[]).await
}

async fn free(h: &Harness, kind: &str, query: &str) -> (u16, Value) {
    let r = h
        .http
        .get(format!(
            "{}/api/shows/{SHOW}/resources/{kind}{query}",
            h.base
        ))
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap())
}

fn runs(v: &Value) -> Vec<(i64, i64)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| (r["start"].as_i64().unwrap(), r["end"].as_i64().unwrap()))
        .collect()
}

/// The race without the guard: `fans` tasks each run the overlap check, pause (barrier), and
/// insert when it found nothing, every statement on its own (no writer transaction around the
/// check and the insert), into a copy of the table without the exclusion constraint. Returns
/// how many inserted.
async fn check_then_insert_unguarded(h: &Harness, fans: usize) -> usize {
    let db = h.state.db.clone();
    sqlx::query(
        "CREATE TABLE hold_resources_unguarded AS SELECT * FROM hold_resources WHERE 1 = 0",
    )
    .execute(&db)
    .await
    .unwrap();
    let overlap = OVERLAP.replace("hold_resources", "hold_resources_unguarded");
    let insert = INSERT.replace("hold_resources", "hold_resources_unguarded");
    let (winners, barrier) = (Arc::new(AtomicUsize::new(0)), Arc::new(Barrier::new(fans)));
    let tasks: Vec<_> = (0..fans)
        .map(|i| {
            let (db, winners, barrier) = (db.clone(), winners.clone(), barrier.clone());
            let (overlap, insert) = (overlap.clone(), insert.clone());
            tokio::spawn(async move {
                let found: Option<String> = sqlx::query_scalar(&overlap)
                    .bind(SHOW)
                    .bind("P1")
                    .bind(at("19:00"))
                    .bind(at("20:00"))
                    .fetch_optional(&db)
                    .await
                    .unwrap();
                barrier.wait().await;
                if found.is_none() {
                    sqlx::query(&insert)
                        .bind(format!("h{i}"))
                        .bind(SHOW)
                        .bind("parking")
                        .bind("P1")
                        .bind(at("19:00"))
                        .bind(at("20:00"))
                        .bind(at("20:00"))
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

async fn interval_overlap_race_two_winners_unguarded_one_with_the_guard(b: Backend) {
    let h = with_resources(b).await;
    let unguarded = check_then_insert_unguarded(&h, 2).await;
    assert_eq!(
        unguarded, 2,
        "unguarded: both claims of P1 19:00-20:00 got in"
    );
    // With the guard, over real HTTP: 8 fans ask overlapping intervals of P1 at once (all
    // contain 19:00-19:30), exactly one wins.
    let fans = 8;
    let tries = (0..fans).map(|i| {
        let h = &h;
        async move {
            let end = at("19:30") + i64::from(i % 4) * 30 * 60_000;
            let body = json!({"resource": "P1", "start": at("19:00"), "end": end});
            hold_interval(h, &format!("racer{i}"), "k", body).await
        }
    });
    let results = futures::future::join_all(tries).await;
    let winners: Vec<&(u16, Value)> = results.iter().filter(|r| r.0 == 201).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for (st, body) in results.iter().filter(|r| r.0 != 201) {
        assert_eq!(
            (*st, body["type"].as_str()),
            (409, Some("/problems/interval-unavailable")),
            "{body}"
        );
        assert_eq!(runs(&body["free"])[0], (at("18:00"), at("19:00")), "{body}");
    }
    let blocking = h
        .count(
            "SELECT COUNT(*) FROM hold_resources WHERE resource = $1 AND blocking = 1",
            "P1",
        )
        .await;
    assert_eq!(blocking, 1);
}

async fn back_to_back_intervals_both_succeed_and_the_buffer_is_in_the_range(b: Backend) {
    let h = with_resources(b).await;
    let first = json!({"resource": "P2", "start": "2030-06-01T19:00:00Z", "end": at("20:00")});
    let (st, a) = hold_interval(&h, "f1", "k1", first.clone()).await;
    assert_eq!(st, 201, "{a}");
    assert_eq!(a["amount_cents"], 500);
    assert_eq!(a["interval"]["resource"], "P2");
    // RFC 3339 with an offset is the same instant as 20:00Z.
    let second =
        json!({"resource": "P2", "start": "2030-06-01T22:00:00+02:00", "end": at("21:00")});
    let (st, b2) = hold_interval(&h, "f2", "k2", second).await;
    assert_eq!(st, 201, "back to back with buffer 0: {b2}");
    // The same key and body replay the stored answer.
    let (st, again) = hold_interval(&h, "f1", "k1", first).await;
    assert_eq!((st, &again["hold_id"]), (201, &a["hold_id"]));
    // Read back.
    let hold = a["hold_id"].as_str().unwrap();
    let v: Value = h
        .http
        .get(format!("{}/api/holds/{hold}", h.base))
        .bearer_auth(h.token("f1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            v["status"].as_str(),
            v["interval"]["start"].as_i64(),
            v["interval"]["end"].as_i64()
        ),
        (Some("HELD"), Some(at("19:00")), Some(at("20:00"))),
        "{v}"
    );
    let (_, f) = free(&h, "parking", "?resource=P2").await;
    assert_eq!(
        runs(&f["resources"][0]["free"]),
        vec![(at("18:00"), at("19:00")), (at("21:00"), at("22:00"))]
    );
    // B1 has a 30-minute buffer: 20:00 right after 19:00-20:00 is refused, 20:30 is not.
    let (st, _) = hold_interval(
        &h,
        "f3",
        "k3",
        json!({"resource": "B1", "start": at("19:00"), "end": at("20:00")}),
    )
    .await;
    assert_eq!(st, 201);
    let (st, body) = hold_interval(
        &h,
        "f4",
        "k4",
        json!({"resource": "B1", "start": at("20:00"), "end": at("21:00")}),
    )
    .await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(
        runs(&body["free"]),
        vec![(at("18:00"), at("18:30")), (at("20:30"), at("22:00"))]
    );
    let (st, body) = hold_interval(
        &h,
        "f5",
        "k5",
        json!({"resource": "B1", "start": at("20:30"), "end": at("21:00")}),
    )
    .await;
    assert_eq!(st, 201, "{body}");
}

async fn an_expired_interval_hold_does_not_block(b: Backend) {
    let h = with_resources(b).await;
    let ask = json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")});
    let (st, a) = hold_interval(&h, "early", "k", ask.clone()).await;
    assert_eq!(st, 201, "{a}");
    let (st, _) = hold_interval(&h, "late", "k", ask.clone()).await;
    assert_eq!(st, 409, "a live hold blocks");
    h.clock.advance_ms(481_000); // past the web channel's 480 s hold
    let (_, f) = free(&h, "parking", "?resource=P1").await;
    assert_eq!(
        runs(&f["resources"][0]["free"]),
        vec![(at("18:00"), at("22:00"))],
        "expiry on read: the lapsed hold is free"
    );
    let (st, b2) = hold_interval(&h, "late2", "k", ask).await;
    assert_eq!(st, 201, "an expired hold does not block: {b2}");
    let dead = h
        .count(
            "SELECT COUNT(*) FROM hold_resources WHERE hold_id = $1 AND blocking = 0",
            a["hold_id"].as_str().unwrap(),
        )
        .await;
    assert_eq!(
        dead, 1,
        "the dead claim was cleared in the new hold's transaction"
    );
}

async fn an_overlap_is_409_with_fresh_free_intervals(b: Backend) {
    let h = with_resources(b).await;
    let (st, a) = hold_interval(
        &h,
        "a",
        "k",
        json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")}),
    )
    .await;
    assert_eq!(st, 201, "{a}");
    let r = h
        .http
        .post(format!("{}/api/shows/{SHOW}/holds", h.base))
        .bearer_auth(h.token("b"))
        .header("Idempotency-Key", "k")
        .json(&json!({"resource": "P1", "start": at("19:30"), "end": at("20:30")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "/problems/interval-unavailable", "{body}");
    assert_eq!(
        runs(&body["free"]),
        vec![(at("18:00"), at("19:00")), (at("20:00"), at("22:00"))]
    );
    if b == Backend::Postgres {
        // The refusal came from the exclusion constraint (no check before the insert on
        // PostgreSQL): counted from SQLSTATE 23P01, and the constraint refuses a direct insert.
        assert!(h
            .metrics()
            .await
            .contains("bc_interval_overlaps_refused_total"));
        sqlx::query("INSERT INTO holds (id, show_id, visitor_id, admission_jti, status, amount_cents, expires_at, payment_expires_at, created_at) \
             SELECT 'copy', show_id, visitor_id, admission_jti, status, amount_cents, expires_at, payment_expires_at, created_at FROM holds WHERE id = $1")
            .bind(a["hold_id"].as_str().unwrap())
            .execute(&h.state.db)
            .await
            .unwrap();
        let err = sqlx::query("INSERT INTO hold_resources (hold_id, show_id, kind, resource, start_ms, end_ms, until_ms) VALUES ('copy', $1, 'parking', 'P1', $2, $3, $3)")
            .bind(SHOW)
            .bind(at("19:30"))
            .bind(at("20:30"))
            .execute(&h.state.db)
            .await
            .unwrap_err();
        assert!(
            booking_core::inventory::resources::is_overlap(&err),
            "{err}"
        );
    }
}

async fn bad_interval_input_is_a_specific_422(b: Backend) {
    let h = with_resources(b).await;
    let cases = [
        (
            json!({"resource": "P1", "start": at("20:00"), "end": at("19:00")}),
            "invalid-interval",
        ),
        (
            json!({"resource": "P1", "start": at("19:00"), "end": at("19:00")}),
            "invalid-interval",
        ),
        (
            json!({"resource": "P1", "start": at("19:00")}),
            "invalid-interval",
        ),
        (
            json!({"resource": "P1", "start": "tomorrow", "end": at("20:00")}),
            "invalid-interval",
        ),
        (
            json!({"resource": "P1", "start": at("19:10"), "end": at("20:00")}),
            "off-granularity",
        ),
        (
            json!({"resource": "P1", "start": at("21:30"), "end": at("22:30")}),
            "outside-windows",
        ),
        (
            json!({"resource": "P1", "start": at("17:00"), "end": at("18:30")}),
            "outside-windows",
        ),
        (
            json!({"resource": "P9", "start": at("19:00"), "end": at("20:00")}),
            "unknown-resource",
        ),
        (
            json!({"seats": ["A-1-1"], "best_available": {"section": "A", "quantity": 1}}),
            "invalid-hold-request",
        ),
        (
            json!({"seats": ["A-1-1"], "start": at("19:00")}),
            "invalid-hold-request",
        ),
    ];
    for (i, (body, kind)) in cases.into_iter().enumerate() {
        let (st, p) = hold_interval(&h, &format!("bad{i}"), "k", body.clone()).await;
        assert_eq!(
            (st, p["type"].as_str()),
            (422, Some(format!("/problems/{kind}").as_str())),
            "{body}: {p}"
        );
    }
    let (st, p) = free(&h, "rooms", "").await;
    assert_eq!(
        (st, p["type"].as_str()),
        (404, Some("/problems/not-found")),
        "{p}"
    );
    let (st, p) = free(&h, "parking", "?from=yesterday").await;
    assert_eq!(
        (st, p["type"].as_str()),
        (422, Some("/problems/invalid-interval")),
        "{p}"
    );
    let (st, p) = free(&h, "parking", "?resource=B1").await;
    assert_eq!(
        (st, p["type"].as_str()),
        (422, Some("/problems/unknown-resource")),
        "{p}"
    );
    // Another or a repeated parameter is refused as on the seat map (it was a 400 here).
    for query in ["?x=1", "?resource=P1&resource=P2", "?from=0&from=1"] {
        let (st, p) = free(&h, "parking", query).await;
        assert_eq!(
            (st, p["type"].as_str()),
            (422, Some("/problems/invalid-query")),
            "{query}: {p}"
        );
    }
    let (st, p) = free(
        &h,
        "parking",
        "?from=2030-06-01T19:00:00Z&to=2030-06-01T20:00:00Z",
    )
    .await;
    assert_eq!(st, 200, "{p}");
    assert_eq!(
        runs(&p["resources"][1]["free"]),
        vec![(at("19:00"), at("20:00"))]
    );
}

async fn a_paid_interval_keeps_blocking_and_a_released_one_frees_at_once(b: Backend) {
    let h = with_resources(b).await;
    let ask = json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")});
    let (st, a) = hold_interval(&h, "payer", "k", ask.clone()).await;
    assert_eq!(st, 201, "{a}");
    let hold = a["hold_id"].as_str().unwrap();
    let (_, back) = h.approve(&h.token("payer"), hold).await;
    let r = h.http.get(back).send().await.unwrap();
    assert!(
        r.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/confirmation.html"),
        "{r:?}"
    );
    // The confirmation email names the interval in the venue's local time and its price.
    let booking: String = sqlx::query_scalar("SELECT id FROM bookings WHERE hold_id = $1")
        .bind(hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    let now = sale_common::Clock::now_ms(&h.clock);
    h.state.outbox().step(now).await.unwrap();
    let mail = std::fs::read_to_string(
        h.mail
            .path()
            .join(format!("confirmation-email-{booking}.eml")),
    )
    .unwrap();
    assert!(
        mail.contains("parking P1: from 2030-06-01 19:00 UTC to 2030-06-01 20:00 UTC")
            && mail.contains("Paid: 5.00 EUR"),
        "{b:?}\n{mail}"
    );
    h.clock.advance_ms(481_000); // past the hold's deadline: a booking still blocks
    let (st, body) = hold_interval(&h, "other", "k", ask).await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(
        runs(&body["free"]),
        vec![(at("18:00"), at("19:00")), (at("20:00"), at("22:00"))]
    );
    // An operator's refund of the booking frees the interval.
    let v = h.hold_view("payer", hold).await;
    let booking = v["booking_id"].as_str().expect("a booking");
    // The back office lists the booking with its interval (newcomer review: `seats: []` alone,
    // nothing to say what was booked).
    let list = h.admin_get(&format!("/admin/shows/{SHOW}/bookings")).await;
    let row = list
        .as_array()
        .and_then(|a| a.iter().find(|r| r["booking_id"] == booking))
        .unwrap_or_else(|| panic!("the booking is listed: {list}"));
    assert_eq!(
        (
            &row["interval"]["resource"],
            &row["interval"]["start"],
            &row["interval"]["end"]
        ),
        (&json!("P1"), &json!(at("19:00")), &json!(at("20:00"))),
        "{row}"
    );
    let (st, c) = h
        .cancel_booking(booking, json!({"refund": true, "operator": "ops"}))
        .await;
    assert_eq!(
        (st, c["booking_status"].as_str()),
        (200, Some("cancelled")),
        "{c}"
    );
    assert_eq!(c["amount_cents"], 500, "{c}");
    let (st, body) = hold_interval(
        &h,
        "other2",
        "k",
        json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")}),
    )
    .await;
    assert_eq!(st, 201, "the cancelled booking's interval is free: {body}");
    // A hold the fan cancels frees its interval at once.
    let later = json!({"resource": "P1", "start": at("20:00"), "end": at("21:00")});
    let (st, c) = hold_interval(&h, "canceller", "k", later.clone()).await;
    assert_eq!(st, 201, "{c}");
    assert_eq!(h.cancel_hold("canceller", &c["hold_id"]).await, 200);
    let (st, d) = hold_interval(&h, "next", "k", later).await;
    assert_eq!(st, 201, "released at once: {d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_venue_endpoint_shows_the_venue_files_new_fields() {
    let h = Harness::on_with(Backend::Sqlite, |c| {
        Harness::small_venue(c, 4);
        let v = &mut c.shows[0].venue;
        v.resources.push(kind("parking", &["P1"], 15));
        v.time_zone = "Europe/London".into();
    })
    .await;
    let v: Value = h
        .http
        .get(format!("{}/api/shows/{SHOW}/venue", h.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (&v["currency"], &v["time_zone"], &v["layout"]),
        (&json!("EUR"), &json!("Europe/London"), &Value::Null),
        "{v}"
    );
    assert_eq!(v["resources"][0]["buffer_minutes"], 15, "{v}");
    let r = h
        .http
        .get(format!("{}/api/shows/nope/venue", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// Issue 17 item 4: free runs carry the venue's local time with its offset and zone, so the
/// two 01:30s of London's fall-back night (2026-10-25) read apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_intervals_name_the_venues_local_time_across_the_fall_back() {
    let h = Harness::on_with(Backend::Sqlite, |c| {
        Harness::small_venue(c, 4);
        let v = &mut c.shows[0].venue;
        let mut k = kind("parking", &["P1"], 0);
        k.windows = vec![Window {
            start: "2026-10-25T00:00:00Z".into(),
            end: "2026-10-25T03:00:00Z".into(),
        }];
        v.resources.push(k);
        v.time_zone = "Europe/London".into();
    })
    .await;
    let (st, v) = free(&h, "parking", "").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["time_zone"], "Europe/London", "{v}");
    let run = &v["resources"][0]["free"][0];
    assert_eq!(
        (&run["start_local"], &run["end_local"]),
        (
            &json!("2026-10-25T01:00+01:00[Europe/London]"),
            &json!("2026-10-25T03:00+00:00[Europe/London]")
        ),
        "{v}"
    );
    // The two 01:30s of the fall-back night: a hold from the first to the second names both
    // apart, in its 201, its replay and its view.
    let body =
        json!({"resource": "P1", "start": "2026-10-25T00:30:00Z", "end": "2026-10-25T01:30:00Z"});
    let want = (
        json!("2026-10-25T01:30+01:00[Europe/London]"),
        json!("2026-10-25T01:30+00:00[Europe/London]"),
    );
    let local = |v: &Value| {
        (
            v["interval"]["start_local"].clone(),
            v["interval"]["end_local"].clone(),
        )
    };
    let (st, created) = hold_interval(&h, "fan-tz", "k-tz", body.clone()).await;
    assert_eq!(st, 201, "{created}");
    assert_eq!(local(&created), want, "{created}");
    let (st, replay) = hold_interval(&h, "fan-tz", "k-tz", body).await;
    assert_eq!((st, local(&replay)), (201, want.clone()), "{replay}");
    let id = created["hold_id"].as_str().expect("hold id");
    let view = h.hold_view("fan-tz", id).await;
    assert_eq!(local(&view), want, "{view}");
}

/// Newcomer review: interval holds racing the release of a claim of the same range. Every
/// claim's insert waits at the exclusion check for the release's transaction (here the one
/// release code, `holds::release_in`, left open until all of them wait); when it commits they
/// wake together. Without the resource's lock (`resources::lock_resource`) each found the
/// others' rows in progress and waited for them: PostgreSQL aborted one as a deadlock and its
/// fan got 503. With it they claim one after another: one 201, the others 409
/// `interval-unavailable`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_claims_waiting_on_a_release_are_one_winner_never_a_deadlock() {
    use booking_core::db::Actor;
    use booking_core::inventory::holds::{self, Ended};
    let h = with_resources(Backend::Postgres).await;
    let body = json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")});
    let (st, first) = hold_interval(&h, "leaves", "k", body.clone()).await;
    assert_eq!(st, 201, "{first}");
    let released = first["hold_id"].as_str().unwrap().to_owned();
    let mut release = h.state.db.begin().await.unwrap();
    let now = sale_common::Clock::now_ms(&h.clock);
    let done = holds::release_in(
        &mut release,
        true,
        &released,
        None,
        Actor::Api,
        Ended::Released,
        "fan",
        now,
    )
    .await
    .unwrap();
    assert!(done);
    let fans: i64 = 6;
    let racing = futures::future::join_all((0..fans).map(|i| {
        let (h, body) = (&h, body.clone());
        async move { hold_interval(h, &format!("racer{i}"), "k", body).await }
    }));
    // The release commits once every racer's transaction waits on a lock (the release's, or
    // with the fix the resource's), polled every 10 ms.
    let commit_when_all_wait = async {
        let t = std::time::Instant::now();
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND wait_event_type = 'Lock' AND state = 'active'",
            )
            .fetch_one(&h.state.db)
            .await
            .unwrap();
            if waiting >= fans {
                break;
            }
            assert!(
                t.elapsed() < std::time::Duration::from_secs(20),
                "only {waiting} of the {fans} racers waited"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        release.commit().await.unwrap();
    };
    let (results, ()) = tokio::join!(racing, commit_when_all_wait);
    let winners = results.iter().filter(|r| r.0 == 201).count();
    assert_eq!(winners, 1, "{results:?}");
    for (st, body) in results.iter().filter(|r| r.0 != 201) {
        assert_eq!(
            (*st, body["type"].as_str()),
            (409, Some("/problems/interval-unavailable")),
            "{body}"
        );
    }
}
