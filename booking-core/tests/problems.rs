//! Every error is `application/problem+json` (unknown routes, wrong methods, oversized bodies,
//! bad queries), problem details never echo long input or library internals, and the
//! idempotency store is consulted before the rate limiter and remembers refused requests.

mod support;

use serde_json::Value;
use support::{Backend, Harness, ADMIN, SHOW};

on_both!(
    history_paging_status_and_unknown_seat_are_problems,
    idempotent_replay_does_not_count_against_rate_limit,
    refused_key_reused_with_other_body_is_422,
    every_json_body_is_an_object_and_null_is_not_left_out,
    operator_names_and_texts_refuse_control_characters,
    nul_characters_are_named_problems_on_every_store,
);

async fn problem(r: reqwest::Response, status: u16) -> Value {
    assert_eq!(r.status().as_u16(), status);
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    r.json().await.unwrap()
}

#[tokio::test]
async fn unknown_route_and_wrong_method_are_problems() {
    let h = Harness::start().await;
    let r = h.http.get(format!("{}/nope", h.base)).send().await.unwrap();
    problem(r, 404).await;
    let r = h
        .http
        .put(format!("{}/api/me", h.base))
        .send()
        .await
        .unwrap();
    problem(r, 405).await;
    let r = h
        .http
        .get(format!(
            "{}/payment/callback?paymentID=a&paymentID[x]=b",
            h.base
        ))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error() || r.status().is_redirection());
}

/// With the booking page's directory served (as the service runs), a path no route has is a
/// 404 problem whatever the method: `DELETE /api/holds/{hold}/` (trailing slash) was a 405
/// from the file server; a wrong method on a real route stays 405.
#[tokio::test]
async fn an_unknown_path_is_404_for_every_method_with_static_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("book.html"), "<!doctype html>").unwrap();
    let files = dir.path().to_owned();
    let h = Harness::start_with(move |c| c.static_dir = Some(files)).await;
    let r = h
        .http
        .get(format!("{}/book.html", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    for method in [
        reqwest::Method::DELETE,
        reqwest::Method::POST,
        reqwest::Method::GET,
    ] {
        let r = h
            .http
            .request(method.clone(), format!("{}/api/holds/h1/", h.base))
            .bearer_auth(h.token("fan"))
            .send()
            .await
            .unwrap();
        let p = problem(r, 404).await;
        assert_eq!(p["type"], "/problems/not-found", "{method}");
    }
    let r = h
        .http
        .put(format!("{}/api/me", h.base))
        .send()
        .await
        .unwrap();
    problem(r, 405).await;
}

#[tokio::test]
async fn oversized_session_form_is_413_problem() {
    let h = Harness::start().await;
    let big = "a".repeat(5 * 1024 * 1024);
    let r = h
        .http
        .post(format!("{}/session", h.base))
        .form(&[("admission_token", big.as_str()), ("show", SHOW)])
        .send()
        .await
        .unwrap();
    let p = problem(r, 413).await;
    assert_eq!(p["type"], "/problems/payload-too-large");
    let r = h
        .http
        .post(format!("{}/api/shows/{SHOW}/holds", h.base))
        .bearer_auth(h.token("big"))
        .header("Idempotency-Key", "k")
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    problem(r, 413).await;
}

#[tokio::test]
async fn problem_details_clip_input_and_hide_jwt_internals() {
    let h = Harness::start().await;
    let long = "x".repeat(5000);
    let r = h
        .http
        .get(format!("{}/api/shows/{long}/seats", h.base))
        .send()
        .await
        .unwrap();
    let p = problem(r, 404).await;
    assert!(p["detail"].as_str().unwrap().chars().count() < 120, "{p}");
    for (token, want) in [
        ("not-a-jwt", "malformed token"),
        ("e30.e30.e30", "malformed token"),
    ] {
        let r = h
            .http
            .get(format!("{}/api/me", h.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        let p = problem(r, 401).await;
        let d = p["detail"].as_str().unwrap();
        assert!(d.ends_with(want), "{d}");
    }
    // a valid token with its signature swapped for another token's
    let a = h.token("a");
    let b = h.token("b");
    let forged = format!(
        "{}.{}",
        a.rsplit_once('.').unwrap().0,
        b.rsplit_once('.').unwrap().1
    );
    let r = h
        .http
        .get(format!("{}/api/me", h.base))
        .bearer_auth(forged)
        .send()
        .await
        .unwrap();
    let p = problem(r, 401).await;
    assert!(
        p["detail"].as_str().unwrap().ends_with("bad signature"),
        "{p}"
    );
    // an HS256 header
    let hs = format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6ImsifQ.{}",
        a.split('.').nth(1).unwrap()
    ) + ".c2ln";
    let r = h
        .http
        .get(format!("{}/api/me", h.base))
        .bearer_auth(hs)
        .send()
        .await
        .unwrap();
    let p = problem(r, 401).await;
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .ends_with("unsupported algorithm"),
        "{p}"
    );
}

async fn history_paging_status_and_unknown_seat_are_problems(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 4)).await;
    let get = |path: String| {
        h.http
            .get(format!("{}{path}", h.base))
            .bearer_auth(ADMIN)
            .send()
    };
    let r = get(format!("/admin/shows/{SHOW}/holds?status=BOGUS"))
        .await
        .unwrap();
    problem(r, 422).await;
    let r = get(format!("/admin/shows/{SHOW}/holds?limit=0"))
        .await
        .unwrap();
    problem(r, 422).await;
    let r = get(format!("/admin/shows/{SHOW}/holds?offset=-1"))
        .await
        .unwrap();
    problem(r, 422).await;
    let r = get(format!("/admin/shows/{SHOW}/holds?limit=abc"))
        .await
        .unwrap();
    problem(r, 400).await;
    let r = get(format!("/admin/shows/{SHOW}/holds?status=HELD"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = get(format!("/admin/shows/{SHOW}/seats/Z-9-9/history"))
        .await
        .unwrap();
    problem(r, 404).await;
    let r = get(format!("/admin/shows/{SHOW}/seats/A-1-1/history"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

async fn idempotent_replay_does_not_count_against_rate_limit(b: Backend) {
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, 4);
        c.hold_rate_per_min = 2;
    })
    .await;
    let t = h.token("replayer");
    let (st, first) = h.hold(&t, "same", &["A-1-1"]).await;
    assert_eq!(st, 201, "{first}");
    for _ in 0..5 {
        let (st, again) = h.hold(&t, "same", &["A-1-1"]).await;
        assert_eq!(st, 201, "{again}");
        assert_eq!(again["hold_id"], first["hold_id"]);
    }
    // the limit still has room for one new request (which is refused: one hold per admission)
    let (st, body) = h.hold(&t, "new", &["A-1-2"]).await;
    assert_eq!(st, 409, "{body}");
}

async fn refused_key_reused_with_other_body_is_422(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 4)).await;
    let first = h.token("first");
    let (st, held) = h.hold(&first, "k1", &["A-1-1"]).await;
    assert_eq!(st, 201);
    let t = h.token("second");
    let (st, body) = h.hold(&t, "k2", &["A-1-1"]).await;
    assert_eq!(st, 409, "{body}");
    let (st, body) = h.hold(&t, "k2", &["A-1-2"]).await;
    assert_eq!(st, 422, "{body}");
    assert_eq!(body["type"], "/problems/idempotency-key-reused");
    // the same refused request is recomputed on retry: it succeeds once the seat is free
    let r = h
        .http
        .delete(format!(
            "{}/api/holds/{}",
            h.base,
            held["hold_id"].as_str().unwrap()
        ))
        .bearer_auth(&first)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, body) = h.hold(&t, "k2", &["A-1-1"]).await;
    assert_eq!(st, 201, "{body}");
    let (st, again) = h.hold(&t, "k2", &["A-1-1"]).await;
    assert_eq!((st, &again["hold_id"]), (201, &body["hold_id"]));
}

/// Newcomer review: a JSON array was read as a positional hold body (`[["A-1-1"]]` held a
/// seat) and a too-long `Idempotency-Key` was told to send one. An array is `422 invalid-body`
/// (nothing held); a key over 200 bytes is `400 idempotency-key-too-long` with the limit, one
/// that is not printable ASCII, or sent twice, `400 invalid-idempotency-key`.
#[tokio::test]
async fn array_body_and_overlong_key_are_named_problems() {
    let h = Harness::start().await;
    let url = format!("{}/api/shows/{SHOW}/holds", h.base);
    let t = h.token("arrays");
    // (a `null` quantity or channel was read as left out; a member given twice, as its last)
    let null_quantity = r#"{"pool":"FLOOR","quantity":null}"#;
    let null_channel = r#"{"seats":["A-1-1"],"channel":null}"#;
    let twice = r#"{"seats":["A-1-1"],"seats":["A-1-2"]}"#;
    // (a later review: `best_available` as an array of its fields held a seat)
    let best_array = r#"{"best_available":["A",1]}"#;
    let bodies = [r#"[["A-1-1"]]"#, "[]", r#"[{"seats":["A-1-1"]}]"#];
    for body in bodies
        .into_iter()
        .chain([null_quantity, null_channel, twice, best_array])
    {
        let r = h
            .http
            .post(&url)
            .bearer_auth(&t)
            .header("Idempotency-Key", format!("k-{}", body.len()))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let p = problem(r, 422).await;
        assert_eq!(p["type"], "/problems/invalid-body", "{body}: {p}");
    }
    assert_eq!(h.seat_status("A-1-1").await, "free");
    assert_eq!(h.seat_status("A-1-2").await, "free");
    // A hold of A-1-1 sent with these `Idempotency-Key` header values: its 400 problem.
    let keyed = |keys: Vec<reqwest::header::HeaderValue>| {
        let mut req = h.http.post(&url).bearer_auth(&t);
        for k in keys {
            req = req.header("Idempotency-Key", k);
        }
        let req = req.json(&serde_json::json!({"seats": ["A-1-1"]}));
        async move { problem(req.send().await.unwrap(), 400).await }
    };
    let value = |k: &str| reqwest::header::HeaderValue::from_str(k).unwrap();
    let p = keyed(vec![value(&"k".repeat(10_000))]).await;
    assert_eq!(p["type"], "/problems/idempotency-key-too-long", "{p}");
    assert_eq!(p["max_length"], 200, "{p}");
    // A key of bytes that are not printable ASCII was told to "send an Idempotency-Key header".
    let latin1 = reqwest::header::HeaderValue::from_bytes(&[0xe9; 150]).unwrap();
    let p = keyed(vec![latin1]).await;
    assert_eq!(p["type"], "/problems/invalid-idempotency-key", "{p}");
    assert_eq!(h.seat_status("A-1-1").await, "free");
    // A tab passes the HTTP server, and was taken as part of the key.
    let p = keyed(vec![value("a\tb")]).await;
    assert_eq!(p["type"], "/problems/invalid-idempotency-key", "{p}");
    // Two keys: the first one used to be taken silently.
    let p = keyed(vec![value("first"), value("second")]).await;
    assert_eq!(p["type"], "/problems/invalid-idempotency-key", "{p}");
    assert_eq!(p["title"], "Two Idempotency-Key headers", "{p}");
    // Two lines a proxy joined into one (RFC 9110 §5.3): held as the key "a, b" before.
    let p = keyed(vec![value("a, b")]).await;
    assert_eq!(p["type"], "/problems/invalid-idempotency-key", "{p}");
    assert_eq!(p["title"], "Idempotency-Key with a comma", "{p}");
    assert_eq!(h.seat_status("A-1-1").await, "free");
}

/// A body that is not JSON is `400 invalid-body` wherever its first mistyped member is: serde
/// stops at its first error, so a truncated body whose first member had the wrong type was a
/// `422` (newcomer review: `{"replaces":5` on `/pay`), one whose first member was right a `400`.
/// A whole body with a mistyped member stays `422`.
#[tokio::test]
async fn a_truncated_body_is_400_whatever_its_first_member() {
    let h = Harness::start().await;
    let url = format!("{}/api/shows/{SHOW}/holds", h.base);
    let t = h.token("truncated");
    let cases = [
        (r#"{"seats":5"#, 400),
        (r#"{"pool":7,"quantity":"#, 400),
        (r#"{"seats":["A-1-1"]"#, 400),
        (r#"{"seats":5}"#, 422),
    ];
    for (i, (body, status)) in cases.into_iter().enumerate() {
        let r = h
            .http
            .post(&url)
            .bearer_auth(&t)
            .header("Idempotency-Key", format!("trunc-{i}"))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let p = problem(r, status).await;
        assert_eq!(p["type"], "/problems/invalid-body", "{body}: {p}");
    }
    assert_eq!(h.seat_status("A-1-1").await, "free");
}

/// A venue of 4 seats and a FLOOR pool of 10, with seat A-1-1 bought: the booking's id.
async fn with_a_booking_of_a_1_1(b: Backend) -> (Harness, String) {
    let h = Harness::on_with(b, |c| Harness::venue_with_floor(c, 4, 10)).await;
    let hold = h.buy("buyer", "A-1-1").await;
    let booking = sqlx::query_scalar("SELECT id FROM bookings WHERE hold_id = $1")
        .bind(&hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    (h, booking)
}

/// Newcomer review: serde reads a derived struct from a JSON array by position, so the
/// endpoints that took axum's `Json` acted on arrays: `["x"]` replaced a payment, `["FLOOR"]`
/// joined a pool's waitlist, `[0, "op", null]` set an oversell allowance to 0. And a `null`
/// member was read as left out: `"seats": null` in a cancel would cancel every seat. Every JSON
/// body is now read by `sale_common::body`: an array or a `null` member is `422 invalid-body`,
/// and nothing is written. A seat listed twice in a cancel, or none, is 422 too.
async fn every_json_body_is_an_object_and_null_is_not_left_out(b: Backend) {
    let (h, booking) = with_a_booking_of_a_1_1(b).await;
    let fan = h.token("payer");
    let (st, held) = h.hold(&fan, "pay-me", &["A-1-2"]).await;
    assert_eq!(st, 201, "{held}");
    let held = held["hold_id"].as_str().unwrap();
    let payments = h.sim_payments().await.len();
    // (path, who: fan or admin, body): each must be refused with nothing done.
    let cases = [
        (format!("/api/holds/{held}/pay"), &fan, r#"["x"]"#),
        (
            format!("/api/holds/{held}/pay"),
            &fan,
            r#"{"replaces":null}"#,
        ),
        (format!("/api/shows/{SHOW}/waitlist"), &fan, r#"["FLOOR"]"#),
        (
            format!("/api/shows/{SHOW}/waitlist"),
            &fan,
            r#"{"pool":null}"#,
        ),
        (
            format!("/admin/shows/{SHOW}/pools/FLOOR/oversell"),
            &ADMIN.to_owned(),
            r#"[0,"op",null]"#,
        ),
        (
            format!("/admin/bookings/{booking}/cancel"),
            &ADMIN.to_owned(),
            r#"[null,true,"op"]"#,
        ),
        (
            format!("/admin/bookings/{booking}/cancel"),
            &ADMIN.to_owned(),
            r#"{"seats":null,"operator":"op"}"#,
        ),
        (
            format!("/admin/bookings/{booking}/cancel"),
            &ADMIN.to_owned(),
            r#"{"seats":[],"operator":"op"}"#,
        ),
        (
            format!("/admin/bookings/{booking}/cancel"),
            &ADMIN.to_owned(),
            r#"{"seats":["A-1-1","A-1-1"],"operator":"op"}"#,
        ),
        (
            format!("/admin/bookings/{booking}/oversell-resolution"),
            &ADMIN.to_owned(),
            r#"["refund","op"]"#,
        ),
        (
            format!("/admin/shows/{SHOW}/hold-queue"),
            &ADMIN.to_owned(),
            "[true]",
        ),
    ];
    for (path, who, body) in &cases {
        let r = h
            .http
            .post(format!("{}{path}", h.base))
            .bearer_auth(who)
            .header("content-type", "application/json")
            .body(*body)
            .send()
            .await
            .unwrap();
        let p = problem(r, 422).await;
        assert_eq!(p["type"], "/problems/invalid-body", "{path} {body}: {p}");
    }
    // Nothing was done: no payment, not on the waitlist, no policy, the seat still sold.
    assert_eq!(h.sim_payments().await.len(), payments);
    assert_eq!(h.hold_view("payer", held).await["status"], "HELD");
    let r = h
        .http
        .get(format!("{}/api/shows/{SHOW}/waitlist", h.base))
        .bearer_auth(&fan)
        .send()
        .await
        .unwrap();
    problem(r, 404).await;
    let policies = "SELECT COUNT(*) FROM oversell_policies WHERE show_id = $1";
    assert_eq!(h.count(policies, SHOW).await, 0);
    assert_eq!(h.seat_status("A-1-1").await, "sold");
    let cancels = "SELECT COUNT(*) FROM cancellations WHERE booking_id = $1";
    assert_eq!(h.count(cancels, &booking).await, 0);
    assert!(!h.state.hold_queues.is_on(SHOW));
    // The same endpoints still take their objects (and the optional bodies none at all).
    let r = h
        .http
        .post(format!("{}/api/holds/{held}/pay", h.base))
        .bearer_auth(&fan)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, v) = h
        .cancel_booking(
            &booking,
            serde_json::json!({"seats": ["A-1-1"], "operator": "op"}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(h.count(cancels, &booking).await, 1);
}

/// Newcomer review: a back-office cancel with `"operator": "\u0000"` cancelled and refunded a
/// seat with a NUL as the operator's name, and the oversell endpoint stored one as `set_by` and
/// in a policy's `sample`. An operator's name, a cancel's reason and a policy's sample refuse
/// control characters now (the waiting room's `X-Operator` already did), and nothing is written.
async fn operator_names_and_texts_refuse_control_characters(b: Backend) {
    let (h, booking) = with_a_booking_of_a_1_1(b).await;
    let cancel = format!("/admin/bookings/{booking}/cancel");
    let oversell = format!("/admin/shows/{SHOW}/pools/FLOOR/oversell");
    let policy = |sample: &str| {
        serde_json::json!({"no_show_rate": 0.3, "sample": sample, "move_order": "latest-booking-first",
            "offers": [{"kind": "refund-plus-compensation", "compensation_cents": 500}]})
    };
    let cases = [
        (
            &cancel,
            serde_json::json!({"seats": ["A-1-1"], "operator": "\u{0}"}),
            400,
        ),
        (
            &cancel,
            serde_json::json!({"seats": ["A-1-1"], "operator": "ops\u{1b}[2J"}),
            400,
        ),
        (
            &cancel,
            serde_json::json!({"seats": ["A-1-1"], "operator": "ops", "reason": "a\u{0}b"}),
            400,
        ),
        // A right-to-left override would reorder the fan's email (third review, 2026-12-07).
        (
            &cancel,
            serde_json::json!({"seats": ["A-1-1"], "operator": "ops", "reason": "ok\u{202e}gnp.exe"}),
            400,
        ),
        (
            &oversell,
            serde_json::json!({"allowance": 0, "operator": "\u{0}"}),
            400,
        ),
        (
            &oversell,
            serde_json::json!({"allowance": 1, "operator": "ops", "policy": policy("a\u{0}b")}),
            422,
        ),
    ];
    for (path, body, status) in cases {
        let (st, p) = h.admin_post(path, body.clone()).await;
        assert_eq!(st, status, "{path} {body}: {p}");
    }
    assert_eq!(h.seat_status("A-1-1").await, "sold");
    let cancels = "SELECT COUNT(*) FROM cancellations WHERE booking_id = $1";
    assert_eq!(h.count(cancels, &booking).await, 0);
    let policies = "SELECT COUNT(*) FROM oversell_policies WHERE show_id = $1";
    assert_eq!(h.count(policies, SHOW).await, 0);
    // Printable names and texts, any script, still pass.
    let body = serde_json::json!({"allowance": 1, "operator": "Zoë Ørsted", "policy": policy("tour 2026 — 12 shows")});
    let (st, p) = h.admin_post(&oversell, body).await;
    assert_eq!(st, 200, "{p}");
    // A reason of 200 characters is 200 characters, not bytes (150 `é` were refused).
    let body =
        serde_json::json!({"seats": ["A-1-1"], "operator": "Zoë", "reason": "é".repeat(200)});
    let (st, p) = h.admin_post(&cancel, body).await;
    assert_eq!(st, 200, "{p}");
}

/// Newcomer review: the booking core had no `/readyz` (404), though the README says every
/// service has one. It is 200 `ready` while the database answers and a fast `503 unavailable`
/// with `Retry-After` once it does not (here: its pool closed).
#[tokio::test]
async fn readyz_follows_the_database() {
    let h = Harness::start().await;
    let url = format!("{}/readyz", h.base);
    let r = h.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "ready");
    h.state.reads.close().await;
    let r = h.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(
        r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["type"], "/problems/unavailable", "{body}");
}

/// Newcomer review: on PostgreSQL, whose text cannot hold a NUL character, a NUL in a hold's
/// seat, pool or section name, a hold id, a payment id or an operator's visitor filter made the
/// statement fail: 500, counted as a server error (which slows the admit rate), and in the hold
/// queue the whole batch failed with it. A name with a NUL is unknown (422, the same kind as on
/// SQLite, told before any statement); in a URL's path or query it is 400 `invalid-text` on
/// both stores, before any handler (`error::refuse_nul`; SQLite, which stores it, answered 404
/// or an empty list, a newcomer review found). Never a 500, and nothing held.
async fn nul_characters_are_named_problems_on_every_store(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::venue_with_floor(c, 4, 10)).await;
    let t = h.token("nul");
    let bodies = [
        (
            serde_json::json!({"pool": "FL\u{0}OOR", "quantity": 1}),
            "unknown-pool",
        ),
        (serde_json::json!({"seats": ["A-1-\u{0}"]}), "unknown-seat"),
        (
            serde_json::json!({"best_available": {"section": "A\u{0}", "quantity": 1}}),
            "unknown-section",
        ),
        (
            serde_json::json!({"pool": "FL\u{0}", "quantity": 1, "seats": ["A-1-1"]}),
            "unknown-pool",
        ),
    ];
    for (i, (body, kind)) in bodies.into_iter().enumerate() {
        let (st, p) = h
            .hold_with(&t, &format!("nul-{i}"), body.clone(), &[])
            .await;
        assert_eq!(
            (st, p["type"].as_str()),
            (422, Some(&*format!("/problems/{kind}"))),
            "{body}: {p}"
        );
    }
    let urls = [
        (format!("{}/api/holds/x%00", h.base), Some(t.clone())),
        (
            format!(
                "{}/payment/callback?paymentID=a%00b&status=success&signature=00",
                h.base
            ),
            None,
        ),
        (
            format!("{}/admin/shows/{SHOW}/holds?visitor=a%00b", h.base),
            Some(ADMIN.to_owned()),
        ),
    ];
    for (url, bearer) in urls {
        let mut req = h.http.get(&url);
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        let r = req.send().await.unwrap();
        let st = r.status().as_u16();
        let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        // The same answer on both stores (it was 400 on PostgreSQL, and 404 or an empty page
        // on SQLite, which found no such id).
        assert_eq!(
            (st, body["type"].as_str()),
            (400, Some("/problems/invalid-text")),
            "{b:?} {url}: {body}"
        );
        assert_eq!(kind, "application/problem+json", "{url}");
    }
    // Nothing was held, and the pool and the seats are whole: a fair hold still succeeds.
    assert_eq!(
        h.count("SELECT COUNT(*) FROM holds WHERE show_id = $1", SHOW)
            .await,
        0
    );
    let (st, p) = h
        .hold_with(
            &t,
            "fair",
            serde_json::json!({"pool": "FLOOR", "quantity": 1}),
            &[],
        )
        .await;
    assert_eq!(st, 201, "{p}");
}
