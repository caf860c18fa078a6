//! The booking core tells the waiting room (issue 4): a session ends when its hold is PAID or
//! released or the fan leaves, and the show is reported sold out when nothing is left to sell.
//! A tiny axum stub stands in for the waiting room's internal API and records every call.

mod support;

use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Json;
use sale_common::{Clock, Secret};
use serde_json::{json, Value};
use support::{analyse, Analysed, Backend, Harness, SHOW};

on_both!(
    sessions_end_and_sold_out_reach_the_waiting_room,
    session_ends_go_in_one_call_per_event_and_one_by_one_to_an_older_waiting_room,
    the_outbox_poll_reads_one_batch_whatever_the_backlog,
    the_sold_out_check_stops_at_the_first_unsold_seat,
    a_cancelled_booking_reopens_a_sold_out_show_and_it_sells_out_again,
    an_allowance_raised_after_a_sell_out_reopens_the_show_and_lowered_sells_it_out,
    session_ends_a_stopping_node_cannot_send_stay_queued_without_a_warning
);

type Calls = Arc<Mutex<Vec<(String, String, Value)>>>;

/// Which waiting room the stub plays.
#[derive(Clone, Copy, PartialEq)]
enum Stub {
    /// Today's: `sessions/end-batch` answers.
    Batch,
    /// One from before `sessions/end-batch` (a rolling upgrade): the route is a 404.
    Old,
    /// `sessions/end-batch` answers 503.
    Failing,
}

/// Starts today's stub; returns its base URL and the recorded `(path, authorization, body)`.
async fn stub() -> (String, Calls) {
    stub_as(Stub::Batch).await
}

/// Starts a stub playing `kind`.
async fn stub_as(kind: Stub) -> (String, Calls) {
    let calls: Calls = Arc::default();
    fn record(c: &Calls, path: String, h: &HeaderMap, body: Value) {
        let auth = h["authorization"].to_str().unwrap().to_owned();
        c.lock().unwrap().push((path, auth, body));
    }
    async fn end(
        State(c): State<Calls>,
        Path(ev): Path<String>,
        h: HeaderMap,
        Json(b): Json<Value>,
    ) -> Json<Value> {
        record(&c, format!("{ev}/sessions/end"), &h, b);
        Json(json!({"ended": true, "already_ended": false}))
    }
    async fn end_batch(
        State(c): State<Calls>,
        Path(ev): Path<String>,
        h: HeaderMap,
        Json(b): Json<Value>,
    ) -> Json<Value> {
        let n = b["jtis"].as_array().map_or(0, Vec::len);
        record(&c, format!("{ev}/sessions/end-batch"), &h, b);
        Json(json!({"ended": n, "already_ended": 0, "unknown": 0}))
    }
    async fn failing(State(c): State<Calls>, Path(ev): Path<String>, h: HeaderMap) -> StatusCode {
        record(&c, format!("{ev}/sessions/end-batch"), &h, Value::Null);
        StatusCode::SERVICE_UNAVAILABLE
    }
    /// `sold-out` and `reopen`, recorded as `{event}/{transition}`.
    async fn transition(
        State(c): State<Calls>,
        Path((ev, what)): Path<(String, String)>,
        h: HeaderMap,
    ) -> Json<Value> {
        record(&c, format!("{ev}/{what}"), &h, Value::Null);
        Json(json!({"event": ev}))
    }
    let batch = "/internal/events/{event}/sessions/end-batch";
    let app = axum::Router::new()
        .route("/internal/events/{event}/sessions/end", post(end))
        .route("/internal/events/{event}/{transition}", post(transition));
    let app = match kind {
        Stub::Batch => app.route(batch, post(end_batch)),
        Stub::Old => app,
        Stub::Failing => app.route(batch, post(failing)),
    };
    let app = app.with_state(calls.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    (url, calls)
}

async fn sessions_end_and_sold_out_reach_the_waiting_room(b: Backend) {
    let (wr, calls) = stub().await;
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, 2);
        c.waiting_room_url = wr.clone();
        c.service_token = Some(Secret::new("svc-token"));
    })
    .await;
    let outbox = h.state.outbox();
    let sent = |calls: &Calls| calls.lock().unwrap().clone();
    // paid → the session ends
    h.buy("payer", "A-1-1").await;
    let out = outbox.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.notices, 1, "{out:?}");
    assert_eq!(
        sent(&calls),
        vec![(
            "demo/sessions/end-batch".into(),
            "Bearer svc-token".into(),
            json!({"jtis": ["jti-payer"]})
        )]
    );
    // released by the fan → the session ends
    let t = h.token("quitter");
    let (_, hold) = h.hold(&t, "k", &["A-1-2"]).await;
    let r = h
        .http
        .delete(format!(
            "{}/api/holds/{}",
            h.base,
            hold["hold_id"].as_str().unwrap()
        ))
        .bearer_auth(&t)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // the fan leaves without holding anything
    let r = h
        .http
        .post(format!("{}/api/leave", h.base))
        .bearer_auth(h.token("browser"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    outbox.step(h.clock.now_ms()).await.unwrap();
    let bodies: Vec<Value> = sent(&calls).into_iter().map(|c| c.2).collect();
    assert_eq!(
        bodies[1..],
        [json!({"jtis": ["jti-quitter", "jti-browser"]})],
        "both in one call, in their order"
    );
    assert!(
        !sent(&calls).iter().any(|c| c.0.ends_with("sold-out")),
        "a seat is left"
    );
    // the last seat sells → sold out, reported once
    h.buy("last", "A-1-2").await;
    outbox.step(h.clock.now_ms()).await.unwrap();
    outbox.step(h.clock.now_ms()).await.unwrap();
    let sold: Vec<_> = sent(&calls)
        .into_iter()
        .filter(|c| c.0 == "demo/sold-out")
        .collect();
    assert_eq!(sold.len(), 1, "{:?}", sent(&calls));
    assert_eq!(sold[0].1, "Bearer svc-token");
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND sent_at IS NULL",
            "session-end"
        )
        .await,
        0
    );
}

/// The outbox poll (`worker::DUE`) behind a backlog: 5,000 sent and then 5,000 unsent
/// messages (after a bench run of releases, each queueing a session end, 4,964 were unsent).
/// It answers the oldest batch, and its plan reads about one batch: no sort and no node with
/// more rows than the batch, none read and dropped beyond it. Over the old `(sent_at, id)`
/// index PostgreSQL either read and sorted every unsent row (stale statistics, as after the
/// bench) or, here with fresh ones, walked the primary key past all 5,000 sent rows ("Rows
/// Removed by Filter: 5000"): fails without migration `20261202030000_outbox_unsent`. SQLite
/// took `sent_at IS NULL` as an equality and never sorted, so there this shows only that the
/// partial index serves it as well.
async fn the_outbox_poll_reads_one_batch_whatever_the_backlog(b: Backend) {
    use booking_core::outbox::worker::{BATCH, DUE};
    let h = Harness::on(b).await;
    let db = &h.state.db;
    let rows = "SELECT 'r' || CAST(n AS TEXT), 'session-end', 'demo', '{}', 0, \
                CASE WHEN n <= 5000 THEN 1 ELSE NULL END FROM g";
    let insert = "INSERT INTO outbox (ref_id, kind, show_id, payload, created_at, sent_at) ";
    let sql = match b {
        Backend::Postgres => {
            format!("{insert} WITH g (n) AS (SELECT generate_series(1, 10000)) {rows}")
        }
        Backend::Sqlite => format!(
            "{insert} WITH RECURSIVE g (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g \
             WHERE n < 10000) {rows}"
        ),
    };
    sqlx::query(&sql).execute(db).await.unwrap();
    sqlx::query("ANALYZE outbox").execute(db).await.unwrap();
    let first: i64 = sqlx::query_scalar("SELECT MIN(id) FROM outbox WHERE sent_at IS NULL")
        .fetch_one(db)
        .await
        .unwrap();
    let due: Vec<(i64, String, String, String)> = sqlx::query_as(DUE)
        .bind(0_i64)
        .bind(BATCH)
        .fetch_all(db)
        .await
        .unwrap();
    let ids: Vec<i64> = due.iter().map(|m| m.0).collect();
    let want: Vec<i64> = (first..first + BATCH).collect();
    assert_eq!(ids, want, "the oldest unsent batch, in id order");
    match b {
        Backend::Postgres => {
            let sql = DUE.replace("$1", "0").replace("$2", &BATCH.to_string());
            let Analysed {
                plan,
                read,
                dropped,
            } = analyse(db, &sql).await;
            assert!(
                plan.iter().all(|l| !l.contains("Sort")),
                "no sort of the backlog: {plan:#?}"
            );
            assert!(
                read.iter().all(|rows| *rows <= BATCH) && dropped <= BATCH,
                "no node reads more than a batch: {plan:#?}"
            );
        }
        Backend::Sqlite => {
            let plan: Vec<(i64, i64, i64, String)> =
                sqlx::query_as(&format!("EXPLAIN QUERY PLAN {DUE}"))
                    .bind(0_i64)
                    .bind(BATCH)
                    .fetch_all(db)
                    .await
                    .unwrap();
            let details: Vec<&str> = plan.iter().map(|r| r.3.as_str()).collect();
            assert!(
                details.iter().all(|d| !d.contains("TEMP B-TREE")),
                "no sort of the backlog: {details:?}"
            );
            assert!(
                details.iter().any(|d| d.contains("USING INDEX")),
                "served by an index: {details:?}"
            );
        }
    }
}

/// The sold-out check every confirmation runs (`notify::LEFT_TO_SELL`) decides as the exact
/// count did, and while a seat is unsold it reads one seat, not the show: counting all of them
/// on each confirmation, it was the seed rehearsal's costliest statement (32 ms mean, 513 ms at
/// most) and ran under the pool row's lock. On PostgreSQL the analysed plan of a 500-seat show
/// reads at most one row per node (without the early answers it counts all 500: fails).
async fn the_sold_out_check_stops_at_the_first_unsold_seat(b: Backend) {
    use booking_core::outbox::notify::LEFT_TO_SELL;
    let h = Harness::on_with(b, |c| {
        Harness::venue_with_floor(c, 500, 2);
    })
    .await;
    let db = &h.state.db;
    let left = || async {
        sqlx::query_scalar::<_, i64>(LEFT_TO_SELL)
            .bind(SHOW)
            .fetch_one(db)
            .await
            .unwrap()
    };
    let exec = |sql: &'static str| async move {
        sqlx::query(sql).bind(SHOW).execute(db).await.unwrap();
    };
    assert!(left().await > 0, "500 seats unsold");
    if b == Backend::Postgres {
        let sql = LEFT_TO_SELL.replace("$1", &format!("'{SHOW}'"));
        let Analysed { plan, read, .. } = analyse(db, &sql).await;
        assert!(
            read.iter().all(|rows| *rows <= 1),
            "one seat read, not the show: {plan:#?}"
        );
    }
    exec("UPDATE seats SET status = 'sold' WHERE show_id = $1").await;
    assert!(
        left().await > 0,
        "every seat sold, the pool's 2 places free"
    );
    // Every place taken by live holds, none paid: the exact count, 2 places left.
    exec("UPDATE pools SET taken = capacity + oversell WHERE show_id = $1").await;
    assert_eq!(left().await, 2, "places held are not sold");
    exec("DELETE FROM pools WHERE show_id = $1").await;
    assert_eq!(left().await, 0, "every seat sold and no pool: sold out");
}

/// A show reported sold out is reopened when a booking is cancelled and its seat is left to
/// sell (newcomer review: the seats came back, the waiting room stayed sold out, and the
/// booking core had no reopen at all), and a second sell-out is reported again. A report
/// still queued behind a later one of the show is marked sent without being posted, so the
/// waiting room ends in the last report's state.
async fn a_cancelled_booking_reopens_a_sold_out_show_and_it_sells_out_again(b: Backend) {
    let (wr, calls) = stub().await;
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, 1);
        c.waiting_room_url = wr.clone();
        c.service_token = Some(Secret::new("svc-token"));
    })
    .await;
    let outbox = h.state.outbox();
    let reports = |calls: &Calls| -> Vec<String> {
        calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.0.clone())
            .filter(|p| !p.contains("sessions/end"))
            .collect()
    };
    let drain = || async {
        for _ in 0..3 {
            outbox.step(h.clock.now_ms()).await.unwrap();
        }
    };
    let hold = h.buy("first", "A-1-1").await;
    drain().await;
    assert_eq!(reports(&calls), ["demo/sold-out"]);
    let booking: String = sqlx::query_scalar("SELECT id FROM bookings WHERE hold_id = $1")
        .bind(&hold)
        .fetch_one(&h.state.db)
        .await
        .unwrap();
    let (st, body) = h
        .cancel_booking(&booking, json!({"operator": "ops", "refund": false}))
        .await;
    assert_eq!(st, 200, "{body}");
    drain().await;
    assert_eq!(
        reports(&calls),
        ["demo/sold-out", "demo/reopen"],
        "the freed seat reopens the show"
    );
    h.buy("second", "A-1-1").await;
    drain().await;
    assert_eq!(
        reports(&calls),
        ["demo/sold-out", "demo/reopen", "demo/sold-out"],
        "sold out again, reported again"
    );
    // A reopen and a later sell-out queued together (the waiting room unreachable for a
    // while): only the later one is posted.
    let hold = sqlx::query_scalar::<_, String>(
        "SELECT b.id FROM bookings b JOIN holds h ON h.id = b.hold_id WHERE h.visitor_id = $1",
    )
    .bind("second")
    .fetch_one(&h.state.db)
    .await
    .unwrap();
    let (st, _) = h
        .cancel_booking(&hold, json!({"operator": "ops", "refund": false}))
        .await;
    assert_eq!(st, 200);
    h.buy("third", "A-1-1").await;
    drain().await;
    assert_eq!(
        reports(&calls),
        [
            "demo/sold-out",
            "demo/reopen",
            "demo/sold-out",
            "demo/sold-out"
        ],
        "the reopen queued behind the third sell-out is not posted"
    );
    assert_eq!(
        h.count(
            "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND sent_at IS NULL",
            "reopen"
        )
        .await,
        0,
        "the superseded reopen is marked sent"
    );
}

/// Fans `first..first + n` leave, each queueing a session end.
async fn leave(h: &Harness, first: usize, n: usize) {
    for i in first..first + n {
        let r = h
            .http
            .post(format!("{}/api/leave", h.base))
            .bearer_auth(h.token(&format!("fan{i}")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
}

/// A step's session ends go to the waiting room in one `sessions/end-batch` call per event
/// (posted one per admission: 11,630 POSTs in one PostgreSQL bench run); a waiting room
/// without that route (404, a rolling upgrade) gets them one by one and none is lost; a failed
/// call leaves them all queued for a retry.
async fn session_ends_go_in_one_call_per_event_and_one_by_one_to_an_older_waiting_room(b: Backend) {
    let unsent = "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND sent_at IS NULL";
    for (kind, n) in [(Stub::Batch, 100), (Stub::Old, 5), (Stub::Failing, 3)] {
        let (wr, calls) = stub_as(kind).await;
        let h = Harness::on_with(b, |c| {
            Harness::small_venue(c, 2);
            c.waiting_room_url = wr.clone();
            c.service_token = Some(Secret::new("svc-token"));
        })
        .await;
        leave(&h, 0, n).await;
        if kind == Stub::Batch {
            // a malformed session end (no jti) goes alone, not refusing the batch with it
            let mut tx = booking_core::db::begin_write(&h.state.db).await.unwrap();
            let payload = json!({"event": "demo"});
            booking_core::outbox::enqueue(&mut tx, "bad", "session-end", SHOW, &payload, 0)
                .await
                .unwrap();
            tx.commit().await.unwrap();
        }
        let out = h.state.outbox().step(h.clock.now_ms()).await.unwrap();
        let calls = calls.lock().unwrap().clone();
        let paths: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        let left = h.count(unsent, "session-end").await;
        match kind {
            Stub::Batch => {
                let batch: Vec<_> = calls
                    .iter()
                    .filter(|c| c.0.ends_with("end-batch"))
                    .collect();
                assert_eq!(batch.len(), 1, "one call: {paths:?}");
                let jtis: Vec<String> = (0..n).map(|i| format!("jti-fan{i}")).collect();
                assert_eq!(batch[0].2, json!({ "jtis": jtis }));
                let alone: Vec<_> = calls
                    .iter()
                    .filter(|c| c.0 == "demo/sessions/end")
                    .collect();
                assert_eq!(alone.len(), 1, "{paths:?}");
                assert_eq!(alone[0].2, json!({"jti": null}), "the malformed one, alone");
                assert_eq!((out.notices, out.failed, left), (n + 1, 0, 0), "{out:?}");
            }
            Stub::Old => {
                // the batch's 404 is not recorded: the old waiting room has no such route
                assert_eq!(paths.len(), n, "one by one: {paths:?}");
                assert!(paths.iter().all(|p| *p == "demo/sessions/end"), "{paths:?}");
                let mut jtis: Vec<Value> = calls.iter().map(|c| c.2["jti"].clone()).collect();
                jtis.sort_by_key(|j| j.to_string());
                let want: Vec<Value> = (0..n).map(|i| json!(format!("jti-fan{i}"))).collect();
                assert_eq!(jtis, want);
                assert_eq!((out.notices, out.failed, left), (n, 0, 0), "{out:?}");
            }
            Stub::Failing => {
                assert_eq!(paths, ["demo/sessions/end-batch"]);
                assert_eq!((out.notices, out.failed, left), (0, n, n as i64), "{out:?}");
                let errors = h
                    .count(
                        "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND last_error LIKE '%503%'",
                        "session-end",
                    )
                    .await;
                assert_eq!(errors, n as i64, "each told why");
            }
        }
    }
}

/// An operator's oversell allowance (`POST /admin/shows/{show}/pools/{pool}/oversell`) changes
/// what is left to sell: raised after a sell-out, the places it adds reopen the waiting room;
/// lowered back to what is booked, the show is sold out again. Before, only a cancellation
/// reopened a show, so places an operator added after a sell-out were never offered to the line.
async fn an_allowance_raised_after_a_sell_out_reopens_the_show_and_lowered_sells_it_out(
    b: Backend,
) {
    let (wr, calls) = stub().await;
    let h = Harness::on_with(b, |c| {
        Harness::venue_with_floor(c, 1, 2);
        c.waiting_room_url = wr.clone();
        c.service_token = Some(Secret::new("svc-token"));
    })
    .await;
    let outbox = h.state.outbox();
    let reports = || -> Vec<String> {
        let calls = calls.lock().unwrap();
        let paths = calls.iter().map(|c| c.0.clone());
        paths.filter(|p| !p.contains("sessions/end")).collect()
    };
    let drain = || async {
        for _ in 0..3 {
            outbox.step(h.clock.now_ms()).await.unwrap();
        }
    };
    let allow = |n: u32| {
        let policy = json!({"no_show_rate": 0.5, "sample": "last tour, 12 shows",
            "move_order": "latest-booking-first",
            "offers": [{"kind": "refund-plus-compensation", "compensation_cents": 500}]});
        let body = json!({"allowance": n, "operator": "ops-anna", "policy": policy});
        let path = format!("/admin/shows/{SHOW}/pools/FLOOR/oversell");
        let h = &h;
        async move {
            let (st, v) = h.admin_post(&path, body).await;
            assert_eq!(st, 200, "{v}");
        }
    };
    h.buy("seat", "A-1-1").await;
    h.buy_places("floor", "FLOOR", 2).await;
    drain().await;
    assert_eq!(reports(), ["demo/sold-out"]);
    allow(1).await;
    drain().await;
    assert_eq!(
        reports(),
        ["demo/sold-out", "demo/reopen"],
        "one place added"
    );
    allow(0).await;
    drain().await;
    let again = ["demo/sold-out", "demo/reopen", "demo/sold-out"];
    assert_eq!(reports(), again, "the place taken away again");
    allow(0).await;
    drain().await;
    assert_eq!(reports(), again, "no change, no report");
    allow(1).await;
    drain().await;
    h.buy_places("late", "FLOOR", 1).await;
    drain().await;
    assert_eq!(
        reports(),
        [
            "demo/sold-out",
            "demo/reopen",
            "demo/sold-out",
            "demo/reopen",
            "demo/sold-out"
        ],
        "the added place sold: sold out once more"
    );
}

/// Counts WARN events of the outbox worker on this thread (installed with
/// `tracing::subscriber::set_default`, so other tests' threads are not counted).
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Warnings {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *e.metadata().level() == tracing::Level::WARN
            && e.metadata().target().starts_with("booking_core::outbox")
        {
            self.0.lock().unwrap().push(e.metadata().name().to_owned());
        }
    }
}

/// `up` and `rush --spawn` stop the waiting room and the booking core together; the booking
/// core's outbox then failed to deliver its last session ends and logged "session ends failed;
/// will retry" every tick until it stopped (every rehearsal ended with such lines). A worker
/// told its node is stopping (`Outbox::stopping`) logs that at info; the ends stay queued for
/// the next process either way, and a running node still warns.
async fn session_ends_a_stopping_node_cannot_send_stay_queued_without_a_warning(b: Backend) {
    use tracing_subscriber::layer::SubscriberExt;
    let (wr, _calls) = stub_as(Stub::Failing).await;
    let h = Harness::on_with(b, |c| {
        Harness::small_venue(c, 2);
        c.waiting_room_url = wr.clone();
        c.service_token = Some(Secret::new("svc-token"));
    })
    .await;
    let unsent = "SELECT COUNT(*) FROM outbox WHERE kind = $1 AND sent_at IS NULL";
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let warnings = Warnings::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(warnings.clone()));
    leave(&h, 0, 2).await;
    let running = h.state.outbox().stopping(stop_rx.clone());
    let out = running.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.failed, 2, "{out:?}");
    assert_eq!(warnings.0.lock().unwrap().len(), 1, "a running node warns");
    stop_tx.send(true).unwrap();
    // Due again after the retry delay.
    h.clock.advance_ms(600_000);
    let out = running.step(h.clock.now_ms()).await.unwrap();
    assert_eq!(out.failed, 2, "{out:?}");
    assert_eq!(
        warnings.0.lock().unwrap().len(),
        1,
        "no warning once the node is stopping"
    );
    assert_eq!(h.count(unsent, "session-end").await, 2, "both stay queued");
}
