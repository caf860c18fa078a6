//! Admission that follows the booking core (issue "closed loop and report", item 1): a sale on
//! PostgreSQL with the event's closed loop on, fans holding and releasing seats all along; the
//! booking core is slowed mid-sale by real means (DECISIONS: a lock from the test's own SQL
//! session: `LOCK TABLE seats` held for 2 s at a time, four times), and the admit rate follows
//! it without a human: raised while healthy, lowered with "hold p99 … above 1000 ms" while slow,
//! raised again afterwards, every change an audited `closed-loop` action. The threshold leaves a
//! debug build on a busy machine room to be healthy; a 2 s lock does not.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;

use sale_common::testsupport::postgres::PostgresServer;
use serde_json::Value;
use support::{claim, join};
use ticket_sale::stack::{self, DemoEvent, StackOptions};

/// A stack whose event `id` opens now at `admit_rate`, with the closed loop `closed_loop`
/// (JSON), fan limits lifted.
fn options(id: &str, admit_rate: f64, closed_loop: Value) -> StackOptions {
    let mut opts = StackOptions::local_random_ports();
    opts.event = DemoEvent {
        id: id.into(),
        opens_in_secs: 0,
        admit_rate,
        max_active: 1000,
        admission_ttl_secs: 600,
    };
    (opts.join_rate_per_sec, opts.join_burst) = (1000, 1000);
    (opts.fan_rate_per_sec, opts.fan_burst) = (1000, 1000);
    opts.hold_rate_per_min = 100_000;
    opts.closed_loop = Some(serde_json::from_value(closed_loop).expect("closed loop"));
    opts
}

/// One fan: joins, claims the admission when its turn comes, then holds one seat (best
/// available) and releases it, again and again until `stop`.
async fn fan(c: reqwest::Client, wr: String, bc: String, stop: Arc<AtomicBool>) {
    let Ok(r) = c.post(format!("{wr}/api/events/loop/join")).send().await else {
        return;
    };
    let Ok(j) = r.json::<Value>().await else {
        return;
    };
    let join = j["join_token"].as_str().unwrap_or_default().to_owned();
    let token = loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(r) = c
            .post(format!("{wr}/api/events/loop/admission"))
            .bearer_auth(&join)
            .send()
            .await
        {
            if r.status().is_success() {
                let a: Value = r.json().await.unwrap_or_default();
                break a["admission_token"].as_str().unwrap_or_default().to_owned();
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = format!("{}-{n}", &token[token.len() - 12..]);
        let held = c
            .post(format!("{bc}/api/shows/loop/holds"))
            .bearer_auth(&token)
            .header("Idempotency-Key", key)
            .json(&serde_json::json!({"best_available": {"section": "A", "quantity": 1}}))
            .send()
            .await;
        let Ok(r) = held else { continue };
        let h: Value = r.json().await.unwrap_or_default();
        if let Some(id) = h["hold_id"].as_str() {
            let _ = c
                .delete(format!("{bc}/api/holds/{id}"))
                .bearer_auth(&token)
                .send()
                .await;
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The loop's audit entries so far: `(old rate, new rate, reason)`.
async fn changes(c: &reqwest::Client, wr: &str, admin: &str) -> Vec<(f64, f64, String)> {
    let a: Value = c
        .get(format!("{wr}/admin/events/loop/audit"))
        .bearer_auth(admin)
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("audit json");
    let entries = a
        .as_array()
        .or_else(|| a["entries"].as_array())
        .cloned()
        .unwrap_or_default();
    let mut out: Vec<(i64, f64, f64, String)> = entries
        .iter()
        .filter(|e| e["operator"] == "closed-loop" && e["action"] == "auto_admit_rate")
        .map(|e| {
            (
                e["at"].as_i64().unwrap_or(0),
                e["old"].as_f64().unwrap_or(f64::NAN),
                e["new"]["admit_rate"].as_f64().unwrap_or(f64::NAN),
                e["new"]["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.sort_by_key(|e| e.0);
    out.into_iter().map(|(_, o, n, r)| (o, n, r)).collect()
}

/// Polls `changes` until `want` holds for them; panics with what was seen after `limit`.
async fn until(
    c: &reqwest::Client,
    wr: &str,
    admin: &str,
    limit: Duration,
    what: &str,
    want: impl Fn(&[(f64, f64, String)]) -> bool,
) -> Vec<(f64, f64, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let seen = changes(c, wr, admin).await;
        if want(&seen) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {limit:?}; seen {seen:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_admit_rate_follows_a_booking_core_slowed_mid_sale() {
    let pg = PostgresServer::shared();
    let db = pg.create_database();
    let mut opts = options(
        "loop",
        4.0,
        serde_json::json!({
            "min_rate": 1.0, "max_rate": 24.0, "hold_p99_ms": 1000, "interval_secs": 1,
            "min_samples": 5
        }),
    );
    opts.database_url = db.clone();
    opts.report_sample_secs = 1;
    let s = stack::start(opts).await.expect("stack starts");
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let (wr, admin) = (s.waiting_room_url.clone(), s.admin_token.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let fans: Vec<_> = (0..16)
        .map(|_| {
            tokio::spawn(fan(
                c.clone(),
                wr.clone(),
                s.booking_url.clone(),
                stop.clone(),
            ))
        })
        .collect();

    // Healthy: the loop raises the rate from 4/s.
    let seen = until(
        &c,
        &wr,
        &admin,
        Duration::from_secs(60),
        "a raise while healthy",
        |s| s.iter().any(|(o, n, r)| n > o && r.contains("within")),
    )
    .await;
    let before = seen.len();
    let at_slowdown = seen.last().map_or(4.0, |(_, n, _)| *n);

    // Slow the booking core: the seats table locked 2 s out of every 2.05 s, four times.
    let slow = std::thread::spawn({
        let db = db.clone();
        move || {
            let pulse = "BEGIN; LOCK TABLE seats IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(2); \
                         COMMIT; SELECT pg_sleep(0.05);";
            pg.psql_in(&db, &pulse.repeat(4));
        }
    });
    // Until a cut takes the rate below where it was. Once an interval read as healthy while
    // the stalled holds finished too few for a p99 (CI: 6.3 → 8.6 → 10.9, then the first cut
    // to 7.63); the holds still running now count at their age (`hold_running_counts`), and
    // the first read here cut at once (6.3 → 4.41, "13 holds still running"). A read in the
    // lock's first second may still see no hold over the threshold and raise: the 8 s of
    // slowness leave several more intervals that cut.
    let seen = until(
        &c,
        &wr,
        &admin,
        Duration::from_secs(60),
        "a cut below the rate before the slowdown while slow",
        |s| {
            s[before..].iter().any(|(o, n, r)| {
                n < o && *n < at_slowdown && r.contains("hold p99") && r.contains("above 1000 ms")
            })
        },
    )
    .await;
    slow.join().expect("the slowdown ran");
    let cut = seen.len();
    let lowest = seen[before..]
        .iter()
        .map(|(_, n, _)| *n)
        .fold(f64::INFINITY, f64::min);
    assert!(
        lowest < at_slowdown,
        "the rate never went below its {at_slowdown}/s from before the slowdown: {seen:#?}"
    );

    // Recovered: raised again without anyone touching it.
    until(
        &c,
        &wr,
        &admin,
        Duration::from_secs(60),
        "a raise after the slowdown",
        |s| {
            s.len() > cut
                && s[cut..]
                    .iter()
                    .any(|(o, n, r)| n > o && r.contains("within"))
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    for f in fans {
        let _ = f.await;
    }

    // The sale report shows it (issue item 2): the slow hold p99 and the rate's curve, as the
    // PNG's admit-rate chart right above the hold-p99 chart (kept in target/screenshots).
    let get = |path: &str| c.get(format!("{wr}{path}")).bearer_auth(&admin).send();
    let report: serde_json::Value = get("/admin/events/loop/report")
        .await
        .expect("report")
        .json()
        .await
        .expect("report json");
    let minutes = report["minutes"].as_array().cloned().unwrap_or_default();
    let worst = minutes
        .iter()
        .filter_map(|m| m["hold_p99_worst_ms"].as_u64())
        .max();
    assert!(
        worst.is_some_and(|ms| ms >= 1000),
        "the slowdown is in the report's hold p99: {report}"
    );
    let png = get("/admin/events/loop/report.png")
        .await
        .expect("png")
        .bytes()
        .await
        .expect("png bytes");
    assert_eq!(&png[1..4], b"PNG");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("closed-loop-report.png"), &png);
    s.shutdown().await;
}

/// Polls `probe` every 100 ms until it gives `Some`, at most `limit`.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    what: &str,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The stock rule: on a four-seat show, once every seat is in a live hold the line waits (the
/// status document says how many are in play) and nobody else is admitted to an empty map;
/// when one hold is released, admissions resume. Both changes audited as `closed-loop`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_line_waits_while_every_seat_left_is_in_a_live_hold() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let venue = tmp.path().join("venue.json");
    std::fs::write(
        &venue,
        r#"{"name": "Four", "rows": 1, "seats_per_row": 4,
            "sections": [{"name": "A", "price_cents": 5000}]}"#,
    )
    .expect("venue");
    let mut opts = options(
        "stock",
        20.0,
        serde_json::json!({
            "min_rate": 1.0, "max_rate": 20.0, "hold_p99_ms": 10000, "interval_secs": 1
        }),
    );
    opts.venue = Some(venue);
    let s = stack::start(opts).await.expect("stack starts");
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client");
    let (wr, bc) = (s.waiting_room_url.clone(), s.booking_url.clone());
    let status = |c: reqwest::Client, wr: String| async move {
        let v: Value = c
            .get(format!("{wr}/status/stock.json"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        Some(v)
    };

    // Four fans take the four seats.
    let mut holds = Vec::new();
    for _ in 0..4 {
        let j = join(&c, &wr, "stock").await;
        let token = eventually(Duration::from_secs(30), "admitted", || {
            claim(&c, &wr, "stock", &j)
        })
        .await;
        let r: Value = c
            .post(format!("{bc}/api/shows/stock/holds"))
            .bearer_auth(&token)
            .header("Idempotency-Key", format!("k-{}", holds.len()))
            .json(&serde_json::json!({"best_available": {"section": "A", "quantity": 1}}))
            .send()
            .await
            .expect("hold")
            .json()
            .await
            .expect("hold json");
        let id = r["hold_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_owned();
        holds.push((token, id));
    }
    // The loop sees nothing left but live holds: the line waits and says why.
    let doc = eventually(Duration::from_secs(30), "waiting_for_stock = 4", || {
        let (c, wr) = (c.clone(), wr.clone());
        async move { status(c, wr).await.filter(|d| d["waiting_for_stock"] == 4) }
    })
    .await;
    assert_eq!(doc["state"], "open");

    // Three more fans: none is admitted while every seat is in a hold, over ten loop intervals.
    let late: Vec<String> = join_many(&c, &wr, 3).await;
    let watch_until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < watch_until {
        for j in &late {
            assert!(
                claim(&c, &wr, "stock", j).await.is_none(),
                "a fan was admitted to an empty map"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // One basket is emptied: admissions resume, and the first late fan gets in.
    let (token, id) = &holds[0];
    let r = c
        .delete(format!("{bc}/api/holds/{id}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("release");
    assert!(r.status().is_success(), "release: {}", r.status());
    eventually(Duration::from_secs(30), "a late fan admitted", || {
        claim(&c, &wr, "stock", &late[0])
    })
    .await;
    let doc = status(c.clone(), wr.clone()).await.expect("status");
    assert_eq!(doc["waiting_for_stock"], 0);
    let audit: Value = c
        .get(format!("{wr}/admin/events/stock/audit"))
        .bearer_auth(&s.admin_token)
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("audit json");
    let stock: Vec<&Value> = audit
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["operator"] == "closed-loop" && e["action"] == "stock_wait")
        .collect();
    assert!(
        stock.iter().any(|e| e["new"]["in_play"] == 4)
            && stock.iter().any(|e| e["new"]["in_play"] == 0),
        "{audit:#}"
    );
    s.shutdown().await;
}

/// `n` fans join one after the other; their join tokens.
async fn join_many(c: &reqwest::Client, wr: &str, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(join(c, wr, "stock").await);
    }
    out
}
