//! The hold path below HTTP: the booking core's own hold code called in this process on the
//! bench's database, with no door, no HTTP and no JSON over a socket — what the per-show hold
//! queue is meant to change (issue 13 item 4: "it must beat concurrent transactions on a hot
//! show on both stores"). In a debug build the door's EdDSA check bounds the HTTP hold figures
//! far below the database, so only these figures show the queue's effect there.
//!
//! Each of `connections` workers holds 2 random seats of a 100-seat block again and again (a
//! fresh admission each time, as the HTTP phases do), releasing its previous 201 first
//! (untimed): first as concurrent transactions (`claim::create`), then through the show's hold
//! queue (`HoldQueues::submit`: one worker, a batch per transaction, applied set-based). The
//! show `bench-db` is seeded on the bench's database (PostgreSQL) or on a fresh SQLite file.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use booking_core::door::Admission;
use booking_core::inventory::claim::{self, Ask, Request, Timing};
use booking_core::inventory::releases::{Release, Releases};
use booking_core::inventory::{fast, holds, hotq::HoldQueues};
use booking_core::{db, ShowConfig, Venue};
use rand::seq::SliceRandom;

use super::gen::{closed_loop, Measured, Sample, Workload};

/// The show these figures hold on.
const SHOW: &str = "bench-db";
/// Seats of its hot block.
const SEATS: u32 = 100;

/// How a figure's holds are applied.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// `claim::create`: a transaction per hold through sqlx.
    Concurrent,
    /// `fast::create` on SQLite's writer thread.
    Writer,
    /// The show's hold queue.
    Queued,
}

/// A worker's live hold, released before its next hold: (hold id, admission `jti`).
type LiveHold = (String, String);

/// The figures: concurrent transactions (`db-hold`), on SQLite also SQLite's writer thread
/// (`db-writer`), then the hold queue (`db-queue`).
pub async fn measure(
    database: Option<&str>,
    connections: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Vec<(Measured, String)>> {
    let dir = tempfile::tempdir()?;
    let url = match database.filter(|u| u.starts_with("postgres")) {
        Some(u) => u.to_owned(),
        None => format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("dbpath.db").display()
        ),
    };
    let db = db::connect(&url).await?;
    let show = ShowConfig {
        id: SHOW.into(),
        name: "bench: hold path below HTTP".into(),
        venue: Venue::small(SEATS),
    };
    db::seed_show(&db, &show).await?;
    release_leftovers(&url, SHOW).await?;
    let seats: Arc<Vec<String>> = Arc::new((1..=SEATS).map(|n| format!("A-1-{n}")).collect());
    let queues = Arc::new(HoldQueues::new(
        &[SHOW.to_owned()],
        &db::lock_wait_session(booking_core::config::HOLD_LOCK_WAIT_MS),
    ));
    let next = Arc::new(AtomicU64::new(0));
    let run = now_ms();
    // SQLite's writer thread (`db::writer`): the hot path a SQLite file takes in the service.
    let writer = match db::single::sqlite_file(&url) {
        Some(file) => Some(Arc::new(db::writer::Writer::open(&file, db.clone())?)),
        None => None,
    };
    let releases = Arc::new(Releases::new(writer.clone()));
    let mut modes = vec![("db-hold", Mode::Concurrent), ("db-queue", Mode::Queued)];
    if writer.is_some() {
        modes.insert(1, ("db-writer", Mode::Writer));
    }
    let mut out = Vec::new();
    for (name, mode) in modes {
        let live: Arc<Vec<Mutex<Option<LiveHold>>>> =
            Arc::new((0..connections).map(|_| Mutex::new(None)).collect());
        let (db2, seats2, queues2, next2) =
            (db.clone(), seats.clone(), queues.clone(), next.clone());
        let (writer2, releases2) = (writer.clone(), releases.clone());
        let work: Workload = Arc::new(move |w, _| {
            let (db, seats, queues, live) =
                (db2.clone(), seats2.clone(), queues2.clone(), live.clone());
            let (writer, releases) = (writer2.clone(), releases2.clone());
            let n = next2.fetch_add(1, Ordering::Relaxed);
            Box::pin(async move {
                let prev = live[w].lock().expect("hold slot").take();
                if let Some((h, jti)) = prev {
                    let now = now_ms();
                    let _ = match mode {
                        Mode::Writer => {
                            let r = Release {
                                hold_id: h,
                                show: SHOW.to_owned(),
                                jti,
                                payment: String::new(),
                                reason: "bench".into(),
                                now_ms: now,
                            };
                            releases.release(&db, r).await
                        }
                        _ => {
                            holds::release(
                                &db,
                                &h,
                                db::Actor::Api,
                                holds::Ended::Released,
                                "bench",
                                now,
                            )
                            .await
                        }
                    };
                }
                let mut pick: Vec<String> = seats
                    .choose_multiple(&mut rand::thread_rng(), 2)
                    .cloned()
                    .collect();
                pick.sort();
                let adm = admission(run, n);
                let key = format!("k{run}-{n}");
                let r = Request {
                    adm: &adm,
                    show: SHOW,
                    ask: Ask::Seats(pick),
                    key: &key,
                    channel: "web",
                    timing: Timing {
                        hold_ttl_ms: 600_000,
                        payment_session_ms: 300_000,
                    },
                    visitor_cap: 4,
                };
                let (t, now) = (Instant::now(), now_ms());
                let answer = match mode {
                    Mode::Queued => match queues.submit(&db, &db, &r, now).await {
                        Some(answer) => answer,
                        // Not decided (a lock outside the batch): alone, as the service does.
                        None => claim::create(&db, &db, None, &r, now).await,
                    },
                    Mode::Concurrent => claim::create(&db, &db, None, &r, now).await,
                    Mode::Writer => {
                        fast::create(writer.as_deref(), None, &db, &db, None, &r, now).await
                    }
                };
                let took = t.elapsed();
                let status = match answer {
                    Ok(a) => {
                        *live[w].lock().expect("hold slot") = a.body["hold_id"]
                            .as_str()
                            .map(|h| (h.to_owned(), adm.jti.clone()));
                        201
                    }
                    Err(booking_core::error::ApiError::Problem(p)) => p.status.as_u16(),
                    Err(_) => 500,
                };
                Sample { status, took }
            })
        });
        let m = closed_loop(name, connections, warmup, duration, &[201], work).await;
        println!(
            "  {name:<10} {:>9.0} req/s  {:>6.0} held/s  p50 {:.2} ms  p99 {:.2} ms  ({} errors)",
            m.rps, m.ok_rps, m.p50_ms, m.p99_ms, m.errors
        );
        let how = match mode {
            Mode::Queued => "through the show's hold queue (one worker, batches applied set-based)",
            Mode::Concurrent => "as concurrent transactions through sqlx (claim::create)",
            Mode::Writer => {
                "on SQLite's writer thread (fast::create: rusqlite, group commit of every \
                 hold and release waiting; releases there too)"
            }
        };
        let note = format!(
            "hold path below HTTP (no door): {connections} workers, 2 random seats of a \
             {SEATS}-seat block per hold, {how}; 201 = held ({:.0}/s), 409 = taken; each 201 \
             released (untimed) before that worker's next hold",
            m.ok_rps
        );
        out.push((m, note));
    }
    db.close().await;
    Ok(out)
}

/// Releases, through the booking core's one release path, every live hold an earlier bench
/// run left on `show` in the database at `url` (a PostgreSQL database is kept between runs);
/// nothing on a database without the show.
pub async fn release_leftovers(url: &str, show: &str) -> anyhow::Result<()> {
    let db = db::connect(url).await?;
    let live: Vec<String> =
        sqlx::query_scalar("SELECT id FROM holds WHERE show_id = $1 AND status = 'HELD'")
            .bind(show)
            .fetch_all(&db)
            .await
            .unwrap_or_default();
    for id in &live {
        holds::release(
            &db,
            id,
            db::Actor::Api,
            holds::Ended::Released,
            "bench: an earlier run's hold",
            now_ms(),
        )
        .await?;
    }
    if !live.is_empty() {
        println!(
            "released {} live holds an earlier run left on {show}",
            live.len()
        );
    }
    db.close().await;
    Ok(())
}

/// A fresh admission for hold number `n` of run `run` (a released hold ends its admission; a
/// kept PostgreSQL database still has every earlier run's admissions and keys, whose ended
/// sessions and stored answers made one run's `db-hold` 5,620 requests/s with 5 held/s).
fn admission(run: i64, n: u64) -> Admission {
    let now_s = now_ms() / 1000;
    Admission {
        iss: "waiting-room".into(),
        aud: "booking-core".into(),
        sub: format!("v{run}-{n}"),
        event: SHOW.into(),
        jti: format!("j{run}-{n}"),
        iat: now_s,
        nbf: now_s,
        exp: now_s + 3600,
        tier: None,
    }
}

fn now_ms() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
