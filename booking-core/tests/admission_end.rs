//! Leaving (or a PAID / released hold) ends the admission's booking rights: the admission is
//! recorded as ended with the `session-end` message and can no longer create holds, while the
//! fan's own holds stay readable.

mod support;

use serde_json::Value;
use support::{Backend, Harness};

on_both!(
    left_admission_cannot_hold_again,
    paid_admission_cannot_hold_again
);

async fn left_admission_cannot_hold_again(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 4)).await;
    let t = h.token("leaver");
    let r = h
        .http
        .post(format!("{}/api/leave", h.base))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (st, body) = h.hold(&t, "after-leave", &["A-1-1"]).await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(body["type"], "/problems/admission-ended");
    assert!(body["waiting_room"].is_string(), "{body}");
    assert_eq!(h.seat_status("A-1-1").await, "free");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM admissions_ended WHERE jti = $1",
            "jti-leaver"
        )
        .await,
        1
    );
    // another admission still books
    let (st, body) = h.hold(&h.token("other"), "k", &["A-1-1"]).await;
    assert_eq!(st, 201, "{body}");
}

async fn paid_admission_cannot_hold_again(b: Backend) {
    let h = Harness::on_with(b, |c| Harness::small_venue(c, 4)).await;
    let hold = h.buy("payer", "A-1-1").await;
    let t = h.token("payer");
    let (st, body) = h.hold(&t, "second", &["A-1-2"]).await;
    assert_eq!(st, 409, "{body}");
    assert_eq!(body["type"], "/problems/admission-ended");
    // the fan's own hold is still readable
    let r = h
        .http
        .get(format!("{}/api/holds/{hold}", h.base))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "PAID", "{v}");
}
