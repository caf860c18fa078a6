//! Issue 17 item 6 "Expired is its own fact", on SQLite and PostgreSQL: a hold that lapses is
//! recorded as `expired` (by the reconciler, the sweeper of lapsed holds), one the fan lets go
//! as `released`, one whose payment failed as `failed`: in `holds.ended_as`, in the audit
//! action, in `GET /api/holds/{hold}`, in the back office's hold list, and in the figures
//! (`/admin/shows/{show}/stats`, `/internal/load`), where a lapsed hold not yet swept already
//! counts as expired.

mod support;

use booking_core::Reconciler;
use sale_common::Clock;
use serde_json::{json, Value};
use support::{Backend, Harness, ADMIN, SHOW};

on_both!(
    expired_hold_is_recorded_as_expired_not_released,
    released_hold_stays_released,
    a_fan_release_names_the_voided_payment_in_the_view,
    failed_payments_hold_is_failed,
    hold_ends_are_counted_apart,
    holds_released_before_the_column_are_classified_from_their_audit,
);

/// The web channel's hold lifetime (480 s) and a second more, ms.
const PAST_DEADLINE_MS: i64 = 481_000;
/// Past the last moment to start paying (420 s session − 60 s checkout) but before the
/// hold's deadline, ms.
const PAST_PAY_BY_MS: i64 = 370_000;

async fn hold(h: &Harness, fan: &str, seat: &str) -> String {
    let (st, b) = h.hold(&h.token(fan), &format!("k-{fan}"), &[seat]).await;
    assert_eq!(st, 201, "{b}");
    b["hold_id"].as_str().unwrap().to_owned()
}

async fn view(h: &Harness, fan: &str, hold: &str) -> Value {
    let r = h
        .http
        .get(format!("{}/api/holds/{hold}", h.base))
        .bearer_auth(h.token(fan))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

/// The hold's audit actions, oldest first.
async fn actions(h: &Harness, hold: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT action FROM audit WHERE hold_id = $1 ORDER BY id")
        .bind(hold)
        .fetch_all(&h.state.db)
        .await
        .unwrap()
}

/// Hold ids of the back office's list filtered by `ended_as`.
async fn listed(h: &Harness, ended_as: &str) -> Vec<String> {
    let v: Value = h
        .http
        .get(format!(
            "{}/admin/shows/{SHOW}/holds?ended_as={ended_as}",
            h.base
        ))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = v["holds"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["ended_as"] == ended_as), "{v}");
    rows.iter()
        .map(|r| r["hold_id"].as_str().unwrap().to_owned())
        .collect()
}

/// `(holds_expired, holds_released, holds_failed)` of the show's stats.
async fn ends(h: &Harness) -> (i64, i64, i64) {
    let s = h.stats().await;
    let n = |k: &str| s[k].as_i64().unwrap_or_else(|| panic!("{k} in {s}"));
    (n("holds_expired"), n("holds_released"), n("holds_failed"))
}

async fn step(h: &Harness) -> booking_core::Outcome {
    Reconciler::new(h.state.clone())
        .step(h.clock.now_ms())
        .await
        .unwrap()
}

/// Pays `hold` at the gateway with a payment that fails on execute (the fan's Pay click and
/// the browser's return): the hold stays HELD, its payment `failed`.
async fn pay_and_fail(h: &Harness, fan: &str, hold: &str) {
    let p = h.pay(&h.token(fan), hold).await;
    h.payment_faults(p["payment_id"].as_str().unwrap(), json!({"fail_rate": 1.0}))
        .await;
    let back = h
        .http
        .post(format!("{}/pay", p["checkout_url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    h.http
        .get(back.headers()["location"].to_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        view(h, fan, hold).await["payment"]["gateway_status"],
        "failed"
    );
}

async fn expired_hold_is_recorded_as_expired_not_released(b: Backend) {
    let h = Harness::on(b).await;
    let id = hold(&h, "walks-away", "A-1-1").await;
    h.clock.advance_ms(PAST_DEADLINE_MS);
    assert_eq!(
        ends(&h).await,
        (1, 0, 0),
        "lapsed, not swept: already expired"
    );
    assert_eq!(view(&h, "walks-away", &id).await["ended_as"], Value::Null);
    assert_eq!(step(&h).await.released, 1);
    let v = view(&h, "walks-away", &id).await;
    assert_eq!(
        (&v["status"], &v["ended_as"]),
        (&json!("RELEASED"), &json!("expired")),
        "{v}"
    );
    assert_eq!(actions(&h, &id).await, ["held", "expired"]);
    assert_eq!(listed(&h, "expired").await, [id]);
    assert!(listed(&h, "released").await.is_empty());
    assert_eq!(ends(&h).await, (1, 0, 0));
    assert_eq!(h.seat_status("A-1-1").await, "free");
}

/// A fan who started paying and then cancels the hold: the release voids the payment at the
/// gateway, and the hold's view says so (`payment.gateway_status` "cancelled", API.md "the
/// gateway's last final answer"), not `null` (newcomer review: only a settle recorded it).
async fn a_fan_release_names_the_voided_payment_in_the_view(b: Backend) {
    let h = Harness::on(b).await;
    let id = hold(&h, "changes-mind", "A-1-2").await;
    let p = h.pay(&h.token("changes-mind"), &id).await;
    assert!(p["payment_id"].is_string(), "{p}");
    assert_eq!(h.cancel_hold("changes-mind", &json!(id)).await, 200);
    let v = view(&h, "changes-mind", &id).await;
    assert_eq!(v["status"], "RELEASED", "{v}");
    assert_eq!(
        v["payment"],
        json!({"attempt": 1, "gateway_status": "cancelled"}),
        "{v}"
    );
}

async fn released_hold_stays_released(b: Backend) {
    let h = Harness::on(b).await;
    let id = hold(&h, "says-no", "A-1-1").await;
    assert_eq!(h.cancel_hold("says-no", &json!(id)).await, 200);
    h.clock.advance_ms(PAST_DEADLINE_MS);
    assert_eq!(
        step(&h).await.released,
        0,
        "a released hold is never swept again"
    );
    let v = view(&h, "says-no", &id).await;
    assert_eq!(
        (&v["status"], &v["ended_as"]),
        (&json!("RELEASED"), &json!("released")),
        "{v}"
    );
    assert_eq!(actions(&h, &id).await, ["held", "released"]);
    assert_eq!(listed(&h, "released").await, [id]);
    assert_eq!(ends(&h).await, (0, 1, 0));
}

async fn failed_payments_hold_is_failed(b: Backend) {
    let h = Harness::on(b).await;
    let id = hold(&h, "refused", "A-1-1").await;
    pay_and_fail(&h, "refused", &id).await;
    h.clock.advance_ms(PAST_PAY_BY_MS);
    assert_eq!(
        ends(&h).await,
        (0, 0, 0),
        "not lapsed yet: the hold is live"
    );
    assert_eq!(step(&h).await.released, 1);
    let v = view(&h, "refused", &id).await;
    assert_eq!(
        (&v["status"], &v["ended_as"]),
        (&json!("RELEASED"), &json!("failed")),
        "{v}"
    );
    let acts = actions(&h, &id).await;
    assert_eq!(acts.last().map(String::as_str), Some("failed"), "{acts:?}");
    assert!(
        !acts.iter().any(|a| a == "released" || a == "expired"),
        "{acts:?}"
    );
    assert_eq!(listed(&h, "failed").await, [id]);
    assert_eq!(ends(&h).await, (0, 0, 1));
}

async fn hold_ends_are_counted_apart(b: Backend) {
    let h = Harness::on(b).await;
    let let_go = hold(&h, "a", "A-1-1").await;
    let refused = hold(&h, "b", "A-1-2").await;
    hold(&h, "c", "A-1-3").await;
    hold(&h, "d", "A-1-4").await;
    h.http
        .delete(format!("{}/api/holds/{let_go}", h.base))
        .bearer_auth(h.token("a"))
        .send()
        .await
        .unwrap();
    pay_and_fail(&h, "b", &refused).await;
    h.clock.advance_ms(PAST_PAY_BY_MS);
    assert_eq!(step(&h).await.released, 1, "the failed one");
    h.clock.advance_ms(PAST_DEADLINE_MS - PAST_PAY_BY_MS);
    // c and d lapsed; the reconciler has swept neither: both count as expired already.
    assert_eq!(ends(&h).await, (2, 1, 1));
    let load: Value = h
        .http
        .get(format!("{}/internal/load", h.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let show = load["shows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["show"] == SHOW)
        .unwrap();
    assert_eq!(
        show["ended"],
        json!({"expired": 2, "released": 1, "failed": 1}),
        "{load}"
    );
    assert_eq!(step(&h).await.released, 2);
    assert_eq!(
        ends(&h).await,
        (2, 1, 1),
        "sweeping moves nothing between the counts"
    );
    let metrics = h.metrics().await;
    for end in ["expired", "released", "failed"] {
        assert!(
            metrics.contains(&format!("ended_as=\"{end}\"")),
            "bc_holds_ended_total for {end}"
        );
    }
}

/// The migration's backfill (20261201010000_hold_end_reason), run again over rows written the
/// old way (RELEASED, `ended_as` NULL, audit action `released`): the reconciler's releases
/// become expired (failed when the reason is "payment failed"), the fan's released (also a cancel
/// after a failed payment); HELD rows stay NULL.
async fn holds_released_before_the_column_are_classified_from_their_audit(b: Backend) {
    let h = Harness::on(b).await;
    let file = match b {
        Backend::Sqlite => include_str!("../migrations/sqlite/20261201010000_hold_end_reason.sql"),
        Backend::Postgres => {
            include_str!("../migrations/postgres/20261201010000_hold_end_reason.sql")
        }
    };
    let backfill = &file[file.find("UPDATE holds").expect("the backfill")..];
    let old = [
        (
            "lapsed",
            "RELEASED",
            "reconciler",
            "expired without payment",
        ),
        ("refused", "RELEASED", "reconciler", "payment failed"),
        ("let-go", "RELEASED", "api", "released by fan"),
        (
            "let-go-too",
            "RELEASED",
            "api",
            "released by fan; payment failed",
        ),
        ("live", "HELD", "api", ""),
    ];
    for (id, status, actor, reason) in old {
        sqlx::query(
            "INSERT INTO holds (id, show_id, visitor_id, admission_jti, status, amount_cents, \
             expires_at, payment_expires_at, created_at) VALUES ($1, $2, $1, $1, $3, 0, 0, 0, 0)",
        )
        .bind(id)
        .bind(SHOW)
        .bind(status)
        .execute(&h.state.db)
        .await
        .unwrap();
        if status == "RELEASED" {
            sqlx::query(
                "INSERT INTO audit (at, show_id, hold_id, action, actor, reason) \
                 VALUES (0, $1, $2, 'released', $3, $4)",
            )
            .bind(SHOW)
            .bind(id)
            .bind(actor)
            .bind(reason)
            .execute(&h.state.db)
            .await
            .unwrap();
        }
    }
    sqlx::query(backfill).execute(&h.state.db).await.unwrap();
    let got: Vec<(String, Option<String>)> =
        sqlx::query_as("SELECT id, ended_as FROM holds ORDER BY id")
            .fetch_all(&h.state.db)
            .await
            .unwrap();
    let want = [
        ("lapsed", Some("expired")),
        ("let-go", Some("released")),
        ("let-go-too", Some("released")),
        ("live", None),
        ("refused", Some("failed")),
    ];
    let want: Vec<(String, Option<String>)> = want
        .iter()
        .map(|(i, e)| ((*i).to_owned(), e.map(str::to_owned)))
        .collect();
    assert_eq!(got, want);
}
