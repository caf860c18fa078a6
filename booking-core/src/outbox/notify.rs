//! Telling the waiting room (API.md "Waiting room / internal"): when a hold becomes PAID or is
//! released, or the fan leaves, the admission's session is over (`POST
//! /internal/events/{event}/sessions/end {"jti"}` frees its `max_active` place); when nothing
//! is left to sell the show is sold out (`POST /internal/events/{event}/sold-out`), and when
//! something is freed after that it is open again (`POST …/reopen`). All are
//! outbox messages written in the transaction that changed the hold, sent at least once by the
//! outbox worker; the waiting room's side is idempotent.
//!
//! Sold out means every seat sold and every pool booked to capacity + oversell. Seats that are
//! only held are not "sold out": about a third of holds lapse and are resold (DESIGN figures),
//! and the waiting room stops admitting for good once told.

use std::time::Duration;

use serde_json::{json, Value};

use super::enqueue;
use crate::db::{Binds, Tx};

/// Outbox kind of a session end (ref_id = the admission `jti`: one message per admission).
pub const SESSION_END: &str = "session-end";
/// Outbox kind of the sold-out report (ref_id `{show}#{n}`, the show's n-th report counted
/// from 0; a report from before reopens existed has the bare show id).
pub const SOLD_OUT: &str = "sold-out";
/// Outbox kind of the reopen report, the undo of a sold-out report when something is freed
/// after it (`POST /internal/events/{event}/reopen`; seed 000: "a freed seat reopens the
/// level"); ref_id `{show}#{n}` as the report it undoes.
pub const REOPEN: &str = "reopen";

/// The show's sold-out and reopen reports so far: `(sold out, reopened)`. It stands reported
/// sold out while the first is larger. Read through the partial index `outbox_availability`
/// (migration `20261202050000`), whose predicate this `IN` list repeats word for word.
async fn reports(tx: &mut Tx<'_>, show: &str) -> sqlx::Result<(i64, i64)> {
    sqlx::query_as(
        "SELECT CAST(COALESCE(SUM(CASE WHEN kind = 'sold-out' THEN 1 ELSE 0 END), 0) AS BIGINT), \
         CAST(COALESCE(SUM(CASE WHEN kind = 'reopen' THEN 1 ELSE 0 END), 0) AS BIGINT) \
         FROM outbox WHERE show_id = $1 AND kind IN ('sold-out', 'reopen')",
    )
    .bind(show)
    .fetch_one(&mut **tx)
    .await
}

/// Whether an outbox message `(show, id)` of kind [`SOLD_OUT`] or [`REOPEN`] is superseded: a
/// later one of the show exists, so only that one is sent (the waiting room ends in the state
/// of the last report, whatever order retries come in).
pub async fn superseded(db: &crate::db::Db, show: &str, id: i64) -> sqlx::Result<bool> {
    let later: i64 = sqlx::query_scalar(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM outbox \
         WHERE show_id = $1 AND kind IN ('sold-out', 'reopen') AND id > $2",
    )
    .bind(show)
    .bind(id)
    .fetch_one(db)
    .await?;
    Ok(later > 0)
}

/// Queues the end of admission `jti`'s session (idempotent per jti) and records the admission
/// as ended in the same transaction: it may no longer create holds (409 `admission-ended`).
pub async fn session_end(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    jti: &str,
    now_ms: i64,
) -> sqlx::Result<()> {
    let mut b = Binds::default();
    let (s, j, at) = (
        b.push(show.to_owned()),
        b.push(jti.to_owned()),
        b.push(now_ms),
    );
    let sql = session_end_sql(&mut b, show, &s, jti, &j, &at);
    crate::db::write_all(tx, pg, b, Vec::new(), sql).await
}

/// The statements of [`session_end`] (the admission recorded as ended, the notice queued, its
/// cap slot closed: [`SLOT_CLOSED`]), for [`crate::db::write_all`]: `s`, `j` and `at` are the
/// placeholders of `show`, `jti` and the time (epoch ms), already bound in `b`.
pub fn session_end_sql(
    b: &mut Binds,
    show: &str,
    s: &str,
    jti: &str,
    j: &str,
    at: &str,
) -> Vec<String> {
    let mut sql = session_end_when_sql(b, show, s, jti, j, at, "1 = 1").to_vec();
    sql.push(format!(
        "INSERT INTO hold_slots (scope, owner, slot, hold_id, live_until) \
         VALUES ({}, {j}, 0, '', {SLOT_CLOSED}) ON CONFLICT (scope, owner, slot) \
         DO UPDATE SET live_until = {SLOT_CLOSED}",
        b.push(ADMISSION_SCOPE)
    ));
    sql
}

/// The statements of [`session_end`] for the end of hold `h` that is paid (placeholders `s`,
/// `j`, `at`, `h` bound in `b`), beside `inventory::caps::free_slots_ending_sql` with
/// the condition `1 = 1` in the same [`crate::db::write_all`] call: that statement closes the
/// admission's slot where the hold owns it, so the slot's upsert here only writes it where it
/// does not (another hold of the admission took it over, or it is missing). On PostgreSQL all
/// run on one snapshot as CTEs, so two of them must never write one row.
pub fn session_end_after_paid_sql(
    b: &mut Binds,
    show: &str,
    s: &str,
    jti: &str,
    (j, at, h): (&str, &str, &str),
) -> Vec<String> {
    let mut sql = session_end_when_sql(b, show, s, jti, j, at, "1 = 1").to_vec();
    let scope = b.push(ADMISSION_SCOPE);
    sql.push(format!(
        "INSERT INTO hold_slots (scope, owner, slot, hold_id, live_until) \
         SELECT {scope}, {j}, 0, '', {SLOT_CLOSED} WHERE NOT EXISTS (SELECT 1 FROM hold_slots o \
         WHERE o.scope = {scope} AND o.owner = {j} AND o.slot = 0 AND o.hold_id = {h}) \
         ON CONFLICT (scope, owner, slot) DO UPDATE SET live_until = {SLOT_CLOSED}"
    ));
    sql
}

/// `live_until` of the admission's cap slot (scope [`ADMISSION_SCOPE`], slot 0) once its
/// session ended: a slot never free again. A hold takes a slot only where it is new or
/// `live_until <= now` (`inventory::caps`), after waiting for a concurrent writer of the row
/// and re-reading its newest version; the check that the session has not ended reads the hold
/// statement's snapshot. So a session end that frees the slot (a release, a payment) and ends
/// the session in one transaction must close the slot rather than free it: else a second tab's
/// hold that waited on the slot took it over without seeing the end (newcomer review: a `HELD`
/// hold on an ended admission, 3 in 29 tries of a release racing a new hold).
pub const SLOT_CLOSED: i64 = i64::MAX;

/// [`session_end_sql`], both statements written only when `condition` (SQL) holds.
fn session_end_when_sql(
    b: &mut Binds,
    show: &str,
    s: &str,
    jti: &str,
    j: &str,
    at: &str,
    condition: &str,
) -> [String; 2] {
    [
        format!(
            "INSERT INTO admissions_ended (jti, at) SELECT {j}, {at} WHERE {condition} \
             ON CONFLICT (jti) DO NOTHING"
        ),
        crate::outbox::enqueue_when_sql(
            b,
            j,
            SESSION_END,
            s,
            &session_end_payload(show, jti),
            at,
            condition,
        ),
    ]
}

/// The body of a `session-end` notice to the waiting room: the event and the admission's
/// `jti`, `{"event": …, "jti": …}`.
pub fn session_end_payload(show: &str, jti: &str) -> Value {
    json!({"event": show, "jti": jti})
}

/// The `hold_slots` scope of an admission's slot (one live hold per admission), kept here so
/// the session end can read it; `inventory::caps::JTI` is this.
pub const ADMISSION_SCOPE: &str = "jti";

/// [`session_end_sql`] for the end of hold `h` (placeholder): the session ends only if no
/// other hold of the admission is live at `at` (its slot 0 held by another hold: the same
/// admission may hold again once a hold lapsed, before the reconciler sweeps that one), so a
/// lapsed hold swept late never ends the session of the live hold that followed it (newcomer
/// review: a HELD hold on an ended admission, the fan's waiting-room slot freed under it).
/// `ends`: [`ends_after_hold_sql`], with any condition the caller adds. The caller closes the
/// admission's slot under the same condition where it frees the hold's slots
/// (`inventory::caps::free_slots_ending_sql`, [`SLOT_CLOSED`]).
#[allow(clippy::too_many_arguments)]
pub fn session_end_after_hold_sql(
    b: &mut Binds,
    show: &str,
    s: &str,
    jti: &str,
    j: &str,
    at: &str,
    ends: &str,
) -> [String; 2] {
    session_end_when_sql(b, show, s, jti, j, at, ends)
}

/// The condition (SQL) under which the session of admission `j` ends with the end of its hold
/// `h` at `at` (placeholders): no other hold of the admission is live (its slot 0 held by
/// another hold).
pub fn ends_after_hold_sql(b: &mut Binds, j: &str, at: &str, h: &str) -> String {
    format!(
        "NOT EXISTS (SELECT 1 FROM hold_slots WHERE scope = {} AND owner = {j} \
         AND hold_id <> {h} AND live_until > {at})",
        b.push(ADMISSION_SCOPE)
    )
}

/// How many times admission `$1`'s session was ended (0 or 1): [`admission_ended`]'s read.
pub const ENDED_SQL: &str = "SELECT CAST(COUNT(*) AS BIGINT) FROM admissions_ended WHERE jti = $1";

/// Whether admission `jti`'s session was ended by [`session_end`].
pub async fn admission_ended(tx: &mut Tx<'_>, jti: &str) -> sqlx::Result<bool> {
    let n: i64 = sqlx::query_scalar(ENDED_SQL)
        .bind(jti)
        .fetch_one(&mut **tx)
        .await?;
    Ok(n > 0)
}

/// What [`sold_out_if_done`] counts as left to sell in show `$1`: 1 as soon as one seat is
/// unsold or one pool has fewer places taken than `capacity + oversell` (`taken` counts every
/// counted hold, paid or not, so it is never below the paid places); only when neither holds,
/// the exact count, the unsold seats plus each pool's places less its paid ones. Every
/// confirmation runs it: counting the whole show each time, it was the seed rehearsal's costliest
/// statement (32 ms mean over 4,419 calls, 513 ms at most, `pg_stat_statements`), and the first
/// answer is one index probe.
pub const LEFT_TO_SELL: &str = concat!(
    "SELECT CAST(CASE \
     WHEN EXISTS (SELECT 1 FROM seats WHERE show_id = $1 AND ",
    crate::db::unsold_seat!(),
    ") THEN 1 \
     WHEN EXISTS (SELECT 1 FROM pools WHERE show_id = $1 AND taken < capacity + oversell) THEN 1 \
     ELSE COALESCE((SELECT SUM(p.capacity + p.oversell - COALESCE((SELECT SUM(hp.quantity) FROM hold_pools hp \
     JOIN holds h ON h.id = hp.hold_id WHERE hp.show_id = p.show_id AND hp.pool_id = p.pool_id \
     AND h.status = 'PAID' AND hp.counted = 1), 0)) FROM pools p WHERE p.show_id = $1), 0) END AS BIGINT)"
);

/// Whether anything of `show` is left to sell ([`LEFT_TO_SELL`]).
async fn left_to_sell(tx: &mut Tx<'_>, show: &str) -> sqlx::Result<bool> {
    let left: i64 = sqlx::query_scalar(LEFT_TO_SELL)
        .bind(show)
        .fetch_one(&mut **tx)
        .await?;
    Ok(left > 0)
}

/// Whether outbox messages of `kind` go to the waiting room (session end, sold out, reopen)
/// rather than to a fan or the gateway.
pub fn is_notice(kind: &str) -> bool {
    matches!(kind, SESSION_END | SOLD_OUT | REOPEN)
}

/// After a sale: queues the sold-out report when no seat is unsold and every pool is booked
/// ([`LEFT_TO_SELL`]).
pub async fn sold_out_if_done(tx: &mut Tx<'_>, show: &str, now_ms: i64) -> sqlx::Result<bool> {
    if left_to_sell(tx, show).await? {
        return Ok(false);
    }
    let (sold, reopened) = reports(tx, show).await?;
    if sold > reopened {
        return Ok(false);
    }
    // Two confirmations at once write one report: the same ref_id, unique with its kind.
    let ref_id = format!("{show}#{sold}");
    enqueue(tx, &ref_id, SOLD_OUT, show, &json!({"event": show}), now_ms).await
}

/// After something of `show` was freed (a booking cancelled in full or by seat, case B14 and
/// the back office): queues the reopen report when the show stands reported sold out and
/// something is now left to sell ([`LEFT_TO_SELL`]; a seat offered to the waitlist is held,
/// so it counts, as it does for the sold-out report). True when queued.
pub async fn reopen_if_freed(tx: &mut Tx<'_>, show: &str, now_ms: i64) -> sqlx::Result<bool> {
    let (sold, reopened) = reports(tx, show).await?;
    if sold <= reopened {
        return Ok(false);
    }
    if !left_to_sell(tx, show).await? {
        return Ok(false);
    }
    let ref_id = format!("{show}#{}", sold - 1);
    enqueue(tx, &ref_id, REOPEN, show, &json!({"event": show}), now_ms).await
}

/// Most admissions one `sessions/end-batch` call ends: the waiting room's `END_BATCH_MAX`.
pub const END_BATCH: usize = 256;

/// The `(event, jti)` of a `session-end` message's payload when the waiting room's
/// `sessions/end-batch` takes them (an event id, a jti of 1..=128 characters: the waiting
/// room's `JTI_MAX`), else `None`:
/// such a message is sent alone, so a malformed one fails and is retried alone instead of
/// having the batch refused with it.
pub fn end_of(payload: &str) -> Option<(String, String)> {
    let p: Value = serde_json::from_str(payload).ok()?;
    let (event, jti) = (p["event"].as_str()?, p["jti"].as_str()?);
    let ok = !event.is_empty() && (1..=128).contains(&jti.len());
    ok.then(|| (event.to_owned(), jti.to_owned()))
}

/// Ends the sessions of admissions `jtis` (1..=[`END_BATCH`]) of `event` in one call:
/// `POST /internal/events/{event}/sessions/end-batch {"jtis": [...]}` (API.md). That route
/// never answers 404 (unknown jtis are counted, not refused), so a 404 is a waiting room from
/// before it, during a rolling upgrade: the ends are then sent one by one through [`send`],
/// [`super::worker::SENDERS`] at a time. `Ok(false)`: not configured (no service token),
/// nothing sent. `Err`: not all delivered; ending a session is idempotent, so the caller
/// retries the whole batch.
pub async fn send_ends(
    http: &reqwest::Client,
    waiting_room_url: &str,
    token: Option<&str>,
    event: &str,
    jtis: &[&str],
) -> anyhow::Result<bool> {
    use futures::{StreamExt, TryStreamExt};
    let Some(token) = token else {
        return Ok(false);
    };
    let base = waiting_room_url.trim_end_matches('/');
    let resp = http
        .post(format!("{base}/internal/events/{event}/sessions/end-batch"))
        .json(&json!({ "jtis": jtis }))
        .bearer_auth(token)
        .timeout(Duration::from_secs(5))
        .send()
        .await?;
    let st = resp.status();
    if st.is_success() {
        metrics::counter!("bc_waiting_room_calls_total", "kind" => "session-end-batch")
            .increment(1);
        return Ok(true);
    }
    if st.as_u16() != 404 {
        anyhow::bail!("waiting room answered {st} to session-end-batch");
    }
    // Owned parts: the futures are `Send` whatever the caller's lifetimes.
    let one_by_one: Vec<_> = jtis
        .iter()
        .map(|j| {
            let (http, url, token) = (http.clone(), base.to_owned(), token.to_owned());
            let one = json!({"event": event, "jti": j});
            async move { send(&http, &url, Some(&token), SESSION_END, &one).await }
        })
        .collect();
    futures::stream::iter(one_by_one)
        .buffer_unordered(super::worker::SENDERS)
        .try_collect::<Vec<bool>>()
        .await?;
    Ok(true)
}

/// Sends one waiting-room message. `Ok(false)`: not configured (no service token), nothing
/// sent. 2xx, 404 (unknown jti or event: nothing to end) and 409 count as delivered.
pub async fn send(
    http: &reqwest::Client,
    waiting_room_url: &str,
    token: Option<&str>,
    kind: &str,
    payload: &Value,
) -> anyhow::Result<bool> {
    let Some(token) = token else {
        return Ok(false);
    };
    let event = payload["event"].as_str().unwrap_or_default();
    let base = waiting_room_url.trim_end_matches('/');
    let req = match kind {
        SESSION_END => http
            .post(format!("{base}/internal/events/{event}/sessions/end"))
            .json(&json!({"jti": payload["jti"]})),
        REOPEN => http.post(format!("{base}/internal/events/{event}/reopen")),
        _ => http.post(format!("{base}/internal/events/{event}/sold-out")),
    };
    let resp = req
        .bearer_auth(token)
        .timeout(Duration::from_secs(5))
        .send()
        .await?;
    let st = resp.status();
    if st.is_success() || st.as_u16() == 404 || st.as_u16() == 409 {
        metrics::counter!("bc_waiting_room_calls_total", "kind" => kind.to_owned()).increment(1);
        Ok(true)
    } else {
        anyhow::bail!("waiting room answered {st} to {kind}")
    }
}
