//! One order, several kinds (issue 17 item 3) on SQLite and PostgreSQL: seats, pool places and an
//! interval resource in one all-or-nothing hold. A refused part refuses the whole hold with that
//! part's 409 and nothing written (on PostgreSQL the exclusion constraint's 23P01 aborts the one
//! transaction, taking the seats and pool places with it); an accepted order is one hold, one
//! payment, one booking and one email, and an operator's cancel frees every kind. A payment that
//! completes after the reconciler released a mixed hold retakes every kind, or, when one part
//! was taken meanwhile, none (refunded once).

mod support;

use booking_core::venue::resources::parse_instant;
use booking_core::{PoolSpec, ResourceKind, Window};
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, SHOW};

on_both!(
    mixed_order_is_all_or_nothing,
    a_cancelled_mixed_booking_frees_every_kind,
    a_late_success_of_a_mixed_hold_retakes_every_kind_or_nothing,
    a_released_mixed_hold_offers_its_seats_and_places_to_the_waitlists,
    joins_that_raced_a_mixed_release_are_offered_its_seats_and_places_by_the_reconciler,
);

fn at(hhmm: &str) -> i64 {
    parse_instant(&format!("2030-06-01T{hhmm}:00Z")).unwrap()
}

/// Four seats at 5,000 cents (`A-1-1`…), pool `FLOOR` (5 places at 3,000) and parking `P1`
/// (30-minute slots at 250, no buffer, 18:00–22:00).
async fn venue(b: Backend) -> Harness {
    Harness::on_with(b, |c| {
        Harness::small_venue(c, 4);
        let v = &mut c.shows[0].venue;
        v.pools.push(PoolSpec {
            id: "FLOOR".into(),
            price_cents: 3_000,
            capacity: 5,
        });
        v.resources.push(ResourceKind {
            kind: "parking".into(),
            resources: vec!["P1".into()],
            windows: vec![Window {
                start: "2030-06-01T18:00:00Z".into(),
                end: "2030-06-01T22:00:00Z".into(),
            }],
            slot_minutes: 30,
            buffer_minutes: 0,
            price_cents_per_slot: 250,
        });
    })
    .await
}

/// Two seats, two pool places and P1 from `start` to `end`.
fn order(seats: &[&str], start: &str, end: &str) -> Value {
    json!({"seats": seats, "pool": "FLOOR", "quantity": 2,
           "resource": "P1", "start": at(start), "end": at(end)})
}

/// Asserts a problem answer of `status` and `kind`.
fn refused((st, p): &(u16, Value), status: u16, kind: &str) {
    let want = format!("/problems/{kind}");
    assert_eq!(
        (*st, p["type"].as_str()),
        (status, Some(want.as_str())),
        "{p}"
    );
}

async fn hold(h: &Harness, fan: &str, key: &str, body: Value) -> (u16, Value) {
    h.hold_with(&h.token(fan), key, body, &[]).await
}

/// FLOOR's free places (expiry on read).
async fn floor_available(h: &Harness) -> i64 {
    let v: Value = h
        .http
        .get(format!("{}/api/shows/{SHOW}/seats", h.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["pools"][0]["available"].as_i64().unwrap()
}

/// Nothing of `fan`'s refused order was written: no hold, the seats free, FLOOR whole.
async fn nothing_written(h: &Harness, fan: &str, seats: &[&str]) {
    let holds = h
        .count("SELECT COUNT(*) FROM holds WHERE visitor_id = $1", fan)
        .await;
    assert_eq!(holds, 0, "no hold row for {fan}");
    for s in seats {
        assert_eq!(h.seat_status(s).await, "free", "{s} stays free");
    }
    assert_eq!(floor_available(h).await, 5, "the pool places stay free");
    let rows = h
        .count(
            "SELECT COUNT(*) FROM hold_pools WHERE show_id = $1 AND counted = 1",
            SHOW,
        )
        .await;
    assert_eq!(rows, 0);
}

async fn mixed_order_is_all_or_nothing(b: Backend) {
    let h = venue(b).await;
    let (st, blocker) = hold(
        &h,
        "blocker",
        "k",
        json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")}),
    )
    .await;
    assert_eq!(st, 201, "{blocker}");
    // Seats and places free, the interval taken: the whole order is refused with the
    // interval's 409 and its fresh free intervals.
    let got = hold(
        &h,
        "mixer",
        "k1",
        order(&["A-1-1", "A-1-2"], "19:30", "20:30"),
    )
    .await;
    refused(&got, 409, "interval-unavailable");
    let p = got.1;
    assert_eq!(p["free"][1]["start"], at("20:00"), "{p}");
    nothing_written(&h, "mixer", &["A-1-1", "A-1-2"]).await;
    if b == Backend::Postgres {
        // Refused by the exclusion constraint inside the order's one transaction.
        assert!(h
            .metrics()
            .await
            .contains("bc_interval_overlaps_refused_total"));
    }
    // A seat taken: the seats' 409, and the pool and the interval untouched.
    let (st, other) = h.hold(&h.token("seated"), "k", &["A-1-3"]).await;
    assert_eq!(st, 201, "{other}");
    let got = hold(
        &h,
        "mixer",
        "k2",
        order(&["A-1-2", "A-1-3"], "20:00", "21:00"),
    )
    .await;
    refused(&got, 409, "seats-unavailable");
    let p = got.1;
    assert_eq!(p["availability"]["A-1-3"], "held", "{p}");
    nothing_written(&h, "mixer", &["A-1-2"]).await;
    let blocking = h
        .count(
            "SELECT COUNT(*) FROM hold_resources WHERE show_id = $1 AND blocking = 1",
            SHOW,
        )
        .await;
    assert_eq!(blocking, 1, "only the blocker's interval");
    // More seats and places than a hold takes: 422 seat-count.
    let too_many = json!({"seats": ["A-1-1", "A-1-2", "A-1-4"], "pool": "FLOOR", "quantity": 2});
    let got = hold(&h, "mixer", "k3", too_many).await;
    refused(&got, 422, "seat-count");
    // All free: one hold with every kind, the amount the sum.
    let ok = order(&["A-1-1", "A-1-2"], "20:00", "21:00");
    let (st, a) = hold(&h, "mixer", "k4", ok.clone()).await;
    assert_eq!(st, 201, "{a}");
    assert_eq!(a["seats"], json!(["A-1-1", "A-1-2"]));
    assert_eq!((&a["pool"], &a["quantity"]), (&json!("FLOOR"), &json!(2)));
    assert_eq!(a["interval"]["resource"], "P1");
    assert_eq!(a["amount_cents"], 2 * 5_000 + 2 * 3_000 + 2 * 250, "{a}");
    let (st, again) = hold(&h, "mixer", "k4", ok).await;
    assert_eq!((st, &again["hold_id"]), (201, &a["hold_id"]), "replayed");
    assert_eq!(floor_available(&h).await, 3);
    // Paid: one booking holding every kind, one email.
    let id = a["hold_id"].as_str().unwrap();
    pay(&h, "mixer", id).await;
    assert_eq!(
        h.count("SELECT COUNT(*) FROM bookings WHERE hold_id = $1", id)
            .await,
        1
    );
    assert_eq!(h.seat_status("A-1-1").await, "sold");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM hold_resources WHERE hold_id = $1 AND blocking = 1",
            id
        )
        .await,
        1
    );
    h.clock.advance_ms(481_000); // past the hold's deadline: the booking keeps every kind
    assert_eq!(floor_available(&h).await, 3);
    // The back office lists both blocking claims of P1: the blocker's lapsed hold (not live,
    // not yet cleared) and the booking's.
    let c = claims(&h).await;
    let p1 = &c["resources"][0];
    assert_eq!(
        (&p1["resource"], &p1["kind"]),
        (&json!("P1"), &json!("parking")),
        "{c}"
    );
    let seen: Vec<(&str, bool, i64)> = p1["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["status"].as_str().unwrap(),
                x["live"] == true,
                x["start"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![("HELD", false, at("19:00")), ("PAID", true, at("20:00"))],
        "{c}"
    );
    assert_eq!(h.seat_status("A-1-2").await, "sold");
    for _ in 0..2 {
        h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    }
    let mails = h.mail_files();
    let confirmations = mails
        .iter()
        .filter(|m| m.starts_with("confirmation-email-"))
        .count();
    assert_eq!(confirmations, 1, "{mails:?}");
}

/// `GET /admin/shows/{show}/resources/claims` (and refused without the admin token).
async fn claims(h: &Harness) -> Value {
    let url = format!("{}/admin/shows/{SHOW}/resources/claims", h.base);
    let r = h.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = h
        .http
        .get(&url)
        .bearer_auth(support::ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// Creates `hold`'s payment, pays at the gateway and follows the callback to the confirmation.
async fn pay(h: &Harness, fan: &str, hold: &str) {
    let (_, back) = h.approve(&h.token(fan), hold).await;
    let r = h.http.get(back).send().await.unwrap();
    let to = r.headers()["location"].to_str().unwrap();
    assert!(to.starts_with("/confirmation.html"), "{r:?}");
}

async fn a_cancelled_mixed_booking_frees_every_kind(b: Backend) {
    let h = venue(b).await;
    let (st, a) = hold(
        &h,
        "buyer",
        "k",
        order(&["A-1-1", "A-1-2"], "19:00", "20:00"),
    )
    .await;
    assert_eq!(st, 201, "{a}");
    let id = a["hold_id"].as_str().unwrap();
    pay(&h, "buyer", id).await;
    let v = h.hold_view("buyer", id).await;
    assert_eq!(
        (&v["pool"], &v["interval"]["resource"]),
        (&json!("FLOOR"), &json!("P1")),
        "{v}"
    );
    let booking = v["booking_id"].as_str().expect("a booking");
    // Part of a mixed booking cannot be cancelled alone (its places and interval go whole).
    let part = json!({"refund": true, "operator": "ops", "seats": ["A-1-1"]});
    let (st, c) = h.cancel_booking(booking, part).await;
    assert_eq!(st / 100, 4, "a partial cancel is refused: {c}");
    let whole = json!({"refund": true, "operator": "ops"});
    let (st, c) = h.cancel_booking(booking, whole).await;
    assert_eq!(
        (st, c["booking_status"].as_str()),
        (200, Some("cancelled")),
        "{c}"
    );
    assert_eq!(c["amount_cents"], a["amount_cents"], "the whole sum: {c}");
    assert_eq!(h.seat_status("A-1-1").await, "free");
    assert_eq!(h.seat_status("A-1-2").await, "free");
    assert_eq!(floor_available(&h).await, 5, "the places are back");
    // Every kind can be held again, by another fan, in one order.
    let (st, again) = hold(
        &h,
        "next",
        "k",
        order(&["A-1-1", "A-1-2"], "19:00", "20:00"),
    )
    .await;
    assert_eq!(st, 201, "the interval, seats and places are free: {again}");
}

/// Holds `body` for `fan`, creates the payment and clicks Pay at a gateway that completes it
/// late (the callback finds it not done). Returns the hold's id.
async fn approved_late(h: &Harness, fan: &str, body: Value) -> String {
    let (st, a) = hold(h, fan, "k", body).await;
    assert_eq!(st, 201, "{a}");
    let id = a["hold_id"].as_str().unwrap().to_owned();
    let (_, back) = h.approve(&h.token(fan), &id).await;
    let r = h.http.get(back).send().await.unwrap();
    let to = r.headers()["location"].to_str().unwrap();
    assert!(to.starts_with("/book.html"), "not completed yet: {to}");
    id
}

async fn a_late_success_of_a_mixed_hold_retakes_every_kind_or_nothing(b: Backend) {
    let h = venue(b).await;
    h.faults(json!({"late_success_rate": 1.0})).await;
    let taken = approved_late(&h, "late-taken", order(&["A-1-1"], "19:00", "20:00")).await;
    let free = approved_late(&h, "late-free", order(&["A-1-3"], "20:00", "21:00")).await;
    let rec = booking_core::Reconciler::new(h.state.clone());
    h.clock.advance_ms(8 * 60_000 + 1_000);
    let out = rec.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.released, 2, "{out:?}");
    assert_eq!(floor_available(&h).await, 5, "released: every place back");
    h.clock.advance_ms(29_000); // 8:30: someone else takes P1 19:00-20:00
    let (st, c) = hold(
        &h,
        "taker",
        "k",
        json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")}),
    )
    .await;
    assert_eq!(st, 201, "{c}");
    h.clock.advance_ms(31_000); // 9:01: the gateway completes both and sends the webhooks
    h.wait_count("SELECT COUNT(*) FROM refunds WHERE hold_id = $1", &taken, 1)
        .await;
    h.wait_count("SELECT COUNT(*) FROM bookings WHERE hold_id = $1", &free, 1)
        .await;
    // The one whose interval was taken: nothing retaken (its seat and places stay free).
    assert_eq!(
        h.count("SELECT COUNT(*) FROM bookings WHERE hold_id = $1", &taken)
            .await,
        0
    );
    assert_eq!(h.seat_status("A-1-1").await, "free");
    // The other: every kind retaken.
    assert_eq!(h.seat_status("A-1-3").await, "sold");
    assert_eq!(floor_available(&h).await, 3, "only late-free's two places");
    let blocking = "SELECT COUNT(*) FROM hold_resources WHERE hold_id = $1 AND blocking = 1";
    assert_eq!(h.count(blocking, &free).await, 1);
    assert_eq!(h.count(blocking, &taken).await, 0);
}

/// Every seat and place in holds, the first fan's a mixed one (two seats, two of FLOOR's
/// places, P1 19:00–20:00): the show is sold out for both waitlists. Returns the first hold.
async fn sold_out(h: &Harness) -> Value {
    let (st, a) = hold(
        h,
        "first",
        "k",
        order(&["A-1-1", "A-1-2"], "19:00", "20:00"),
    )
    .await;
    assert_eq!(st, 201, "{a}");
    let rest = json!({"seats": ["A-1-3", "A-1-4"], "pool": "FLOOR", "quantity": 2});
    let (st, r) = hold(h, "second", "k", rest).await;
    assert_eq!(st, 201, "{r}");
    let (st, r) = hold(h, "third", "k", json!({"pool": "FLOOR"})).await;
    assert_eq!(st, 201, "{r}");
    a
}

/// `seat-fan` was offered the first fan's two seats and `pool-fan` its two places, as new holds.
async fn offered_what_the_first_fan_held(h: &Harness) {
    for (fan, what) in [("seat-fan", "seats"), ("pool-fan", "pool")] {
        let e = h.fan_get(fan, &format!("/api/shows/{SHOW}/waitlist")).await;
        assert_eq!(e["status"], "offered", "{what}: {e}");
        let offer = h.hold_view(fan, e["hold_id"].as_str().unwrap()).await;
        assert_eq!(offer["status"], "HELD", "{offer}");
        if what == "seats" {
            assert_eq!(offer["seats"], json!(["A-1-1", "A-1-2"]), "{offer}");
        } else {
            assert_eq!(
                (&offer["pool"], &offer["quantity"]),
                (&json!("FLOOR"), &json!(2)),
                "{offer}"
            );
        }
    }
}

/// Joins the show's waitlist (`{"pool"}` for a pool's places): (status, entry).
async fn join_waitlist(h: &Harness, fan: &str, body: Value) -> (u16, Value) {
    let r = h
        .http
        .post(format!("{}/api/shows/{SHOW}/waitlist", h.base))
        .bearer_auth(h.token(fan))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn a_released_mixed_hold_offers_its_seats_and_places_to_the_waitlists(b: Backend) {
    let h = venue(b).await;
    let a = sold_out(&h).await;
    let (st, w) = join_waitlist(&h, "seat-fan", json!({})).await;
    assert_eq!(st, 201, "{w}");
    let (st, w) = join_waitlist(&h, "pool-fan", json!({"pool": "FLOOR"})).await;
    assert_eq!(st, 201, "{w}");
    // The first fan cancels: the seats go to the seat waitlist, the places to the pool's, each
    // as a new hold; the interval is free at once.
    assert_eq!(h.cancel_hold("first", &a["hold_id"]).await, 200);
    offered_what_the_first_fan_held(&h).await;
    let (st, p) = hold(
        &h,
        "parker",
        "k",
        json!({"resource": "P1", "start": at("19:00"), "end": at("20:00")}),
    )
    .await;
    assert_eq!(st, 201, "{p}");
}

/// The waitlist's write skew (`waitlist::sweep`) for both kinds: the first fan's mixed hold is
/// released while nobody waits, and then a fan's row for seats and one for FLOOR's places are
/// written, as two joins do whose "nothing left" checks ran before the release committed. Both
/// wait with their kind free until the next reconciler step, which offers each what the
/// release freed, once. Without the sweep: both still waiting.
async fn joins_that_raced_a_mixed_release_are_offered_its_seats_and_places_by_the_reconciler(
    b: Backend,
) {
    let h = venue(b).await;
    let a = sold_out(&h).await;
    assert_eq!(h.cancel_hold("first", &a["hold_id"]).await, 200);
    h.clock.advance_ms(5);
    let now = h.clock.now_ms();
    for (fan, pool) in [("seat-fan", None), ("pool-fan", Some("FLOOR"))] {
        let jti = format!("jti-{fan}");
        booking_core::inventory::waitlist::join(&h.state.db, SHOW, fan, &jti, pool, now)
            .await
            .unwrap();
        let e = h.fan_get(fan, &format!("/api/shows/{SHOW}/waitlist")).await;
        assert_eq!(
            e["status"], "waiting",
            "the race: {fan} waits, its kind free: {e}"
        );
    }
    let step = booking_core::Reconciler::new(h.state.clone())
        .step(now)
        .await
        .unwrap();
    assert_eq!(step.waitlist_offers, 2, "{step:?}");
    offered_what_the_first_fan_held(&h).await;
    let again = booking_core::Reconciler::new(h.state.clone())
        .step(now)
        .await
        .unwrap();
    assert_eq!(again.waitlist_offers, 0, "once: {again:?}");
    assert_eq!(floor_available(&h).await, 0);
}
