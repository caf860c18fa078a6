//! Overbooking as a written policy (issue 17 item 5, seed 001 "Overbooking Is a Policy") on
//! SQLite and PostgreSQL: an allowance needs a written policy within the no-show bound
//! (versioned, audited), the oversold list follows the policy's order, an operator moves,
//! compensates or refunds each affected booking once (through the cancel's refund path), and
//! seats and interval resources have no allowance to raise.

mod support;

use booking_core::{PoolSpec, ResourceKind, Window};
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, ADMIN, SHOW};

on_both!(
    oversell_needs_a_written_policy,
    oversold_bookings_are_listed_in_policy_order,
    an_operator_moves_compensates_or_refunds_an_oversold_booking,
    seats_and_intervals_are_never_oversold,
    the_same_policy_sent_ten_times_at_once_is_one_version,
);

async fn venue(b: Backend) -> Harness {
    Harness::on_with(b, |c| {
        Harness::small_venue(c, 4);
        let v = &mut c.shows[0].venue;
        v.pools.push(PoolSpec {
            id: "FLOOR".into(),
            price_cents: 3_000,
            capacity: 10,
        });
        v.pools.push(PoolSpec {
            id: "BALCONY".into(),
            price_cents: 5_000,
            capacity: 1,
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

fn policy(rate: f64, order: &str) -> Value {
    json!({"no_show_rate": rate, "sample": "spring tour 2026, 12 shows, 41,000 tickets", "move_order": order,
        "offers": [{"kind": "upgrade", "pool": "BALCONY"}, {"kind": "refund-plus-compensation", "compensation_cents": 1_000}]})
}

async fn get(h: &Harness, path: &str) -> (u16, Value) {
    let r = h
        .http
        .get(format!("{}{path}", h.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

async fn set(h: &Harness, pool: &str, body: Value) -> (u16, Value) {
    h.admin_post(&format!("/admin/shows/{SHOW}/pools/{pool}/oversell"), body)
        .await
}

async fn resolve(h: &Harness, booking: &str, body: Value) -> (u16, Value) {
    h.admin_post(
        &format!("/admin/bookings/{booking}/oversell-resolution"),
        body,
    )
    .await
}

async fn buy_places(h: &Harness, fan: &str, pool: &str, qty: u32) -> String {
    h.buy_places(fan, pool, qty).await
}

/// FLOOR (10 places) with allowance 3 (no-show rate 0.3) sold to 13: six bookings of
/// 4, 4, 2, 1, 1, 1 places, one second apart. Their ids, oldest first.
async fn oversold_floor(h: &Harness) -> Vec<String> {
    let (st, v) = set(h, "FLOOR", json!({"allowance": 3, "operator": "ops-anna", "policy": policy(0.3, "latest-booking-first")})).await;
    assert_eq!(st, 200, "{v}");
    let mut ids = Vec::new();
    for (i, q) in [4, 4, 2, 1, 1, 1].into_iter().enumerate() {
        ids.push(buy_places(h, &format!("f{i}"), "FLOOR", q).await);
    }
    ids
}

fn to_move(list: &Value) -> Vec<String> {
    list["pools"][0]["bookings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["to_move"] == true)
        .map(|b| b["booking_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn oversell_needs_a_written_policy(b: Backend) {
    let h = venue(b).await;
    let ops = |allowance: u32, p: Option<Value>| match p {
        Some(p) => json!({"allowance": allowance, "operator": "ops-anna", "policy": p}),
        None => json!({"allowance": allowance, "operator": "ops-anna"}),
    };
    let (st, v) = set(&h, "FLOOR", ops(2, None)).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (422, Some("/problems/oversell-policy-required")),
        "{v}"
    );
    let (st, v) = set(
        &h,
        "FLOOR",
        ops(3, Some(policy(0.2, "latest-booking-first"))),
    )
    .await;
    assert_eq!(
        (st, v["type"].as_str(), v["bound"].as_i64()),
        (422, Some("/problems/oversell-above-no-show-bound"), Some(2)),
        "{v}"
    );
    let mut bad = policy(1.5, "latest-booking-first");
    let (st, v) = set(&h, "FLOOR", ops(1, Some(bad.clone()))).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (422, Some("/problems/invalid-oversell-policy")),
        "{v}"
    );
    bad["no_show_rate"] = 0.2.into();
    bad["offers"] = json!([{"kind": "upgrade", "pool": "NOPE"}]);
    let (st, v) = set(&h, "FLOOR", ops(1, Some(bad.clone()))).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (422, Some("/problems/invalid-oversell-policy")),
        "{v}"
    );
    bad["offers"] = json!([]);
    let (st, _) = set(&h, "FLOOR", ops(1, Some(bad))).await;
    assert_eq!(st, 422);
    let (st, v) = set(
        &h,
        "FLOOR",
        json!({"allowance": 1, "operator": "ops-anna", "policy": {"no_show_rate": 0.2}}),
    )
    .await;
    assert_eq!(st, 422, "a member missing: {v}");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM oversell_policies WHERE show_id = $1",
            SHOW
        )
        .await,
        0
    );
    // within the bound: stored, then superseded by a second version, then back to 0 with no policy
    let (st, v) = set(
        &h,
        "FLOOR",
        ops(2, Some(policy(0.2, "latest-booking-first"))),
    )
    .await;
    assert_eq!(
        (st, v["policy_version"].as_i64(), v["oversell"].as_i64()),
        (200, Some(1), Some(2)),
        "{v}"
    );
    let (st, v) = set(
        &h,
        "FLOOR",
        ops(1, Some(policy(0.15, "earliest-booking-first"))),
    )
    .await;
    assert_eq!((st, v["policy_version"].as_i64()), (200, Some(2)), "{v}");
    let (st, v) = set(&h, "FLOOR", json!({"allowance": 0, "operator": "ops-ben"})).await;
    assert_eq!((st, v["policy_version"].as_i64()), (200, Some(3)), "{v}");
    let (st, v) = get(&h, &format!("/admin/shows/{SHOW}/pools/FLOOR/oversell")).await;
    assert_eq!(
        (st, v["oversell"].as_i64(), v["capacity"].as_i64()),
        (200, Some(0), Some(10)),
        "{v}"
    );
    let hist = v["history"].as_array().unwrap();
    assert_eq!(hist.len(), 3, "{v}");
    assert_eq!(
        (
            &v["current"]["version"],
            &v["current"]["operator"],
            &v["current"]["superseded_at"]
        ),
        (&json!(3), &json!("ops-ben"), &Value::Null)
    );
    assert_eq!(
        (
            &hist[1]["version"],
            &hist[1]["move_order"],
            &hist[1]["no_show_rate"]
        ),
        (&json!(2), &json!("earliest-booking-first"), &json!(0.15))
    );
    assert!(
        hist[1]["superseded_at"].as_i64().is_some() && hist[2]["superseded_at"].as_i64().is_some()
    );
    assert_eq!(
        hist[2]["sample"],
        "spring tour 2026, 12 shows, 41,000 tickets"
    );
    assert_eq!(
        hist[2]["offers"][1],
        json!({"kind": "refund-plus-compensation", "compensation_cents": 1_000})
    );
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM audit WHERE action = 'oversell-set' AND show_id = $1",
            SHOW
        )
        .await,
        3
    );
    let (st, _) = get(&h, &format!("/admin/shows/{SHOW}/pools/NOPE/oversell")).await;
    assert_eq!(st, 404);
}

async fn oversold_bookings_are_listed_in_policy_order(b: Backend) {
    let h = venue(b).await;
    let (_, v) = get(&h, &format!("/admin/shows/{SHOW}/oversold")).await;
    assert_eq!(v["pools"], json!([]), "nothing sold yet");
    let ids = oversold_floor(&h).await;
    let (st, list) = get(&h, &format!("/admin/shows/{SHOW}/oversold")).await;
    assert_eq!(st, 200, "{list}");
    let p = &list["pools"][0];
    assert_eq!(
        (
            &p["pool"],
            &p["booked"],
            &p["excess"],
            &p["policy_version"],
            &p["move_order"]
        ),
        (
            &json!("FLOOR"),
            &json!(13),
            &json!(3),
            &json!(1),
            &json!("latest-booking-first")
        ),
        "{list}"
    );
    assert_eq!(
        p["offers"][0],
        json!({"kind": "upgrade", "pool": "BALCONY"})
    );
    // the latest three single places cover the excess of 3, newest first
    assert_eq!(
        to_move(&list),
        vec![ids[5].clone(), ids[4].clone(), ids[3].clone()]
    );
    // a new policy version with the other order: the oldest booking (4 places) covers it
    let (st, v) = set(&h, "FLOOR", json!({"allowance": 3, "operator": "ops-ben", "policy": policy(0.3, "earliest-booking-first")})).await;
    assert_eq!((st, v["policy_version"].as_i64()), (200, Some(2)), "{v}");
    let (_, list) = get(&h, &format!("/admin/shows/{SHOW}/oversold")).await;
    assert_eq!(
        (
            &list["pools"][0]["policy_version"],
            &list["pools"][0]["move_order"]
        ),
        (&json!(2), &json!("earliest-booking-first"))
    );
    assert_eq!(to_move(&list), vec![ids[0].clone()]);
    let (st, _) = get(&h, "/admin/shows/nope/oversold").await;
    assert_eq!(st, 404);
    // the back office lists it, with its three actions in English and French
    let page = h
        .http
        .get(format!("{}/office", h.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for text in [
        "/oversold\"",
        "/oversell-resolution\"",
        "Oversold pools",
        "Jauges en survente",
        "Dédommager",
        "Rembourser",
        "Déplacer",
    ] {
        assert!(page.contains(text), "office page lacks {text}");
    }
}

async fn an_operator_moves_compensates_or_refunds_an_oversold_booking(b: Backend) {
    let h = venue(b).await;
    let ids = oversold_floor(&h).await;
    let (f3, f4, f5) = (&ids[3], &ids[4], &ids[5]);
    // bad input
    let (st, v) = resolve(&h, f5, json!({"action": "move", "operator": "ops-anna"})).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (422, Some("/problems/invalid-resolution")),
        "{v}"
    );
    let (st, v) = resolve(
        &h,
        &ids[0],
        json!({"action": "refund", "operator": "ops-anna"}),
    )
    .await;
    assert_eq!(
        (st, v["type"].as_str()),
        (422, Some("/problems/not-oversold")),
        "the oldest is not to move: {v}"
    );
    let (st, _) = resolve(
        &h,
        "nope",
        json!({"action": "refund", "operator": "ops-anna"}),
    )
    .await;
    assert_eq!(st, 404);
    // move the newest (1 place) to BALCONY's one free place, once
    let (st, mv) = resolve(
        &h,
        f5,
        json!({"action": "move", "operator": "ops-anna", "to_pool": "BALCONY"}),
    )
    .await;
    assert_eq!(
        (st, &mv["action"], &mv["policy_version"], &mv["replayed"]),
        (200, &json!("move"), &json!(1), &json!(false)),
        "{mv}"
    );
    let (st, again) = resolve(
        &h,
        f5,
        json!({"action": "move", "operator": "ops-anna", "to_pool": "BALCONY"}),
    )
    .await;
    assert_eq!(
        (st, &again["replayed"], &again["decided_at"]),
        (200, &json!(true), &mv["decided_at"]),
        "{again}"
    );
    let (st, v) = resolve(
        &h,
        f5,
        json!({"action": "compensate", "operator": "ops-anna", "amount_cents": 500}),
    )
    .await;
    assert_eq!(
        (st, v["type"].as_str()),
        (409, Some("/problems/already-resolved")),
        "{v}"
    );
    // BALCONY is full now
    let (st, v) = resolve(
        &h,
        f4,
        json!({"action": "move", "operator": "ops-anna", "to_pool": "BALCONY"}),
    )
    .await;
    assert_eq!(
        (st, v["type"].as_str()),
        (409, Some("/problems/pool-full")),
        "{v}"
    );
    // compensate the next one: money back through the cancel's refund path, the booking stays
    // the whole payment is refused too: its full-refund webhook would cancel the booking
    for cents in [3_001, 3_000] {
        let (st, v) = resolve(
            &h,
            f4,
            json!({"action": "compensate", "operator": "ops-anna", "amount_cents": cents}),
        )
        .await;
        assert_eq!(
            (st, v["type"].as_str(), &v["max_cents"]),
            (
                422,
                Some("/problems/compensation-above-paid"),
                &json!(2_999)
            ),
            "{v}"
        );
    }
    let (st, comp) = resolve(
        &h,
        f4,
        json!({"action": "compensate", "operator": "ops-anna", "amount_cents": 1_000}),
    )
    .await;
    assert_eq!((st, &comp["amount_cents"]), (200, &json!(1_000)), "{comp}");
    let (st, again) = resolve(
        &h,
        f4,
        json!({"action": "compensate", "operator": "ops-anna", "amount_cents": 1_000}),
    )
    .await;
    assert_eq!(
        (st, &again["cancellation_id"]),
        (200, &comp["cancellation_id"])
    );
    // refund the third through the existing cancel: three identical requests at once decide once
    let body = json!({"action": "refund", "operator": "ops-anna"});
    let (a, b, c) = tokio::join!(
        resolve(&h, f3, body.clone()),
        resolve(&h, f3, body.clone()),
        resolve(&h, f3, body)
    );
    let answers = [a, b, c];
    assert!(
        answers
            .iter()
            .all(|(st, v)| *st == 200 && v["amount_cents"] == 3_000),
        "{answers:?}"
    );
    assert_eq!(
        answers
            .iter()
            .filter(|(_, v)| v["replayed"] == false)
            .count(),
        1,
        "{answers:?}"
    );
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    h.state.outbox().step(h.clock.now_ms()).await.unwrap();
    for (booking, status, cents) in [(f4, "active", 1_000), (f3, "cancelled", 3_000)] {
        let st: String = sqlx::query_scalar("SELECT status FROM bookings WHERE id = $1")
            .bind(booking)
            .fetch_one(&h.state.db)
            .await
            .unwrap();
        assert_eq!(st, status);
        let (refund, amount): (String, i64) =
            sqlx::query_as("SELECT refund, amount_cents FROM cancellations WHERE booking_id = $1")
                .bind(booking)
                .fetch_one(&h.state.db)
                .await
                .unwrap();
        assert_eq!(
            (refund.as_str(), amount),
            ("refunded", cents),
            "{booking}: refunded once at the gateway"
        );
    }
    let mails = h.mail_files();
    for kind in [
        "oversell-moved-email-",
        "compensation-email-",
        "cancellation-email-",
    ] {
        assert_eq!(
            mails.iter().filter(|m| m.starts_with(kind)).count(),
            1,
            "{kind}: {mails:?}"
        );
    }
    let refunded: Vec<i64> = h
        .sim_payments()
        .await
        .iter()
        .filter_map(|p| p["refunded_cents"].as_i64())
        .filter(|c| *c > 0)
        .collect();
    let mut refunded = refunded;
    refunded.sort();
    assert_eq!(refunded, vec![1_000, 3_000], "one gateway refund each");
    // every decision audited with the operator and the policy version
    let audits: Vec<(String, String)> = sqlx::query_as("SELECT action, reason FROM audit WHERE action LIKE 'oversell-%' AND action <> 'oversell-set' ORDER BY id")
        .fetch_all(&h.state.db).await.unwrap();
    assert_eq!(
        audits.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(),
        ["oversell-move", "oversell-compensate", "oversell-refund"]
    );
    assert!(
        audits
            .iter()
            .all(|a| a.1.contains("ops-anna") && a.1.contains("policy v1")),
        "{audits:?}"
    );
    // the pool: 13 − 1 moved − 1 refunded = 11 booked, the excess of 1 settled by the compensation
    let (_, list) = get(&h, &format!("/admin/shows/{SHOW}/oversold")).await;
    let p = &list["pools"][0];
    assert_eq!(
        (&p["booked"], &p["excess"]),
        (&json!(11), &json!(1)),
        "{list}"
    );
    assert_eq!(to_move(&list), Vec::<String>::new());
    assert_eq!(p["bookings"][0]["resolution"]["action"], "compensate");
    let (_, d) = get(&h, &format!("/admin/shows/{SHOW}/pools/drift")).await;
    assert_eq!(d["drifting"], 0, "{d}");
}

async fn seats_and_intervals_are_never_oversold(b: Backend) {
    let h = venue(b).await;
    // only pools carry an allowance: a seat, a resource or its kind is no pool
    for id in ["A-1-1", "P1", "parking"] {
        let (st, v) = set(&h, id, json!({"allowance": 1, "operator": "ops", "policy": policy(0.5, "latest-booking-first")})).await;
        assert_eq!(st, 404, "{id}: {v}");
        let (st, _) = get(&h, &format!("/admin/shows/{SHOW}/pools/{id}/oversell")).await;
        assert_eq!(st, 404);
    }
    let (st, _) = set(
        &h,
        "FLOOR",
        json!({"allowance": 3, "operator": "ops", "policy": policy(0.3, "latest-booking-first")}),
    )
    .await;
    assert_eq!(st, 200);
    // with a pool oversold, a seat and an interval still have exactly one holder
    h.buy("s1", "A-1-1").await;
    let (st, v) = h.hold(&h.token("s2"), "k", &["A-1-1"]).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (409, Some("/problems/seats-unavailable")),
        "{v}"
    );
    let slot =
        json!({"resource": "P1", "start": "2030-06-01T18:00:00Z", "end": "2030-06-01T19:00:00Z"});
    let (st, v) = h.hold_with(&h.token("i1"), "k", slot.clone(), &[]).await;
    assert_eq!(st, 201, "{v}");
    let (st, v) = h.hold_with(&h.token("i2"), "k", slot, &[]).await;
    assert_eq!(
        (st, v["type"].as_str()),
        (409, Some("/problems/interval-unavailable")),
        "{v}"
    );
    // nothing in the schema gives seats or resources an allowance
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM oversell_policies WHERE pool_id <> $1",
            "FLOOR"
        )
        .await,
        0
    );
}

/// Newcomer review: ten identical oversell calls at once (a doubled click, a client's retries)
/// made ten policy versions and ten audit rows. The current policy sent again by its operator
/// now writes nothing and answers the current version; a change of allowance, policy or
/// operator is still a new version.
async fn the_same_policy_sent_ten_times_at_once_is_one_version(b: Backend) {
    let h = venue(b).await;
    let body = json!({"allowance": 2, "operator": "ops-anna", "policy": policy(0.2, "latest-booking-first")});
    let calls = (0..10).map(|_| set(&h, "FLOOR", body.clone()));
    let answers = futures::future::join_all(calls).await;
    let first_set_at = answers[0].1["set_at"].clone();
    for (st, v) in &answers {
        assert_eq!((*st, &v["policy_version"]), (200, &json!(1)), "{v}");
        assert_eq!(v["set_at"], first_set_at, "{v}");
    }
    let versions = "SELECT COUNT(*) FROM oversell_policies WHERE show_id = $1";
    let audits = "SELECT COUNT(*) FROM audit WHERE action = 'oversell-set' AND show_id = $1";
    assert_eq!(h.count(versions, SHOW).await, 1);
    assert_eq!(h.count(audits, SHOW).await, 1);
    // Any difference is a new version: another operator, another rate, another allowance.
    let changes = [
        json!({"allowance": 2, "operator": "ops-ben", "policy": policy(0.2, "latest-booking-first")}),
        json!({"allowance": 2, "operator": "ops-ben", "policy": policy(0.25, "latest-booking-first")}),
        json!({"allowance": 1, "operator": "ops-ben", "policy": policy(0.25, "latest-booking-first")}),
        json!({"allowance": 0, "operator": "ops-ben"}),
    ];
    for (n, change) in changes.into_iter().enumerate() {
        h.clock.advance_ms(1_000);
        let (st, v) = set(&h, "FLOOR", change.clone()).await;
        assert_eq!(
            (st, v["policy_version"].as_i64()),
            (200, Some(n as i64 + 2)),
            "{v}"
        );
        let (st, again) = set(&h, "FLOOR", change).await;
        assert_eq!((st, &again["policy_version"]), (200, &v["policy_version"]));
    }
    assert_eq!(h.count(versions, SHOW).await, 5);
    assert_eq!(h.count(audits, SHOW).await, 5);
    let (_, v) = get(&h, &format!("/admin/shows/{SHOW}/pools/FLOOR/oversell")).await;
    assert_eq!(
        (&v["oversell"], &v["current"]["version"]),
        (&json!(0), &json!(5)),
        "{v}"
    );
}
