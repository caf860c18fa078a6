//! The back office answers "who had my seat" (issue 5): a seat's history across holds, a hold's
//! history, and holds filtered and paged, all behind the admin token, on SQLite and PostgreSQL.

mod support;

use serde_json::Value;
use support::{Backend, Harness, ADMIN, SHOW};

on_both!(seat_and_hold_history_and_paged_holds);

async fn get(h: &Harness, path: &str, token: &str) -> (u16, Value) {
    let r = h
        .http
        .get(format!("{}{path}", h.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

async fn seat_and_hold_history_and_paged_holds(b: Backend) {
    let h = Harness::on(b).await;
    let t1 = h.token("first");
    let (_, h1) = h.hold(&t1, "k", &["A-1-1", "A-1-2"]).await;
    let first = h1["hold_id"].as_str().unwrap().to_owned();
    let r = h
        .http
        .delete(format!("{}/api/holds/{first}", h.base))
        .bearer_auth(&t1)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let second = h.buy("second", "A-1-1").await;
    let (st, v) = get(
        &h,
        &format!("/admin/shows/{SHOW}/seats/A-1-1/history"),
        ADMIN,
    )
    .await;
    assert_eq!(st, 200, "{v}");
    let hist: Vec<(String, String, String)> = v["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (s("visitor_id"), s("action"), s("actor"))
        })
        .filter(|e| e.1 != "payment-created")
        .collect();
    let row = |v: &str, a: &str, w: &str| (v.to_owned(), a.to_owned(), w.to_owned());
    assert_eq!(
        hist,
        vec![
            row("first", "held", "api"),
            row("first", "released", "api"),
            row("second", "held", "api"),
            row("second", "paid", "callback"),
        ]
    );
    assert_eq!(v["history"][1]["reason"], "released by fan");
    let (st, v) = get(&h, &format!("/admin/holds/{second}/history"), ADMIN).await;
    assert_eq!((st, v["status"].as_str()), (200, Some("PAID")));
    assert_eq!(
        v["history"].as_array().unwrap().len(),
        3,
        "held, payment-created, paid: {v}"
    );
    let (_, v) = get(
        &h,
        &format!("/admin/shows/{SHOW}/holds?status=RELEASED"),
        ADMIN,
    )
    .await;
    assert_eq!(v["holds"].as_array().unwrap().len(), 1);
    assert_eq!(v["holds"][0]["hold_id"], first.as_str());
    let (_, v) = get(
        &h,
        &format!("/admin/shows/{SHOW}/holds?limit=1&offset=1"),
        ADMIN,
    )
    .await;
    assert_eq!(
        v["holds"][0]["hold_id"],
        first.as_str(),
        "newest first, paged: {v}"
    );
    let (_, v) = get(
        &h,
        &format!("/admin/shows/{SHOW}/holds?visitor=second"),
        ADMIN,
    )
    .await;
    assert_eq!(v["holds"][0]["seats"], serde_json::json!(["A-1-1"]));
    assert_eq!(
        get(&h, &format!("/admin/shows/{SHOW}/holds"), "wrong")
            .await
            .0,
        401
    );
    assert_eq!(get(&h, "/admin/holds/nope/history", ADMIN).await.0, 404);
}
