//! The per-show hold queue for the hottest shows (seed 002: "send that show's holds through a
//! queue keyed by show, with one worker handling them in order. There are no lock waits").
//!
//! A show is switched on by configuration (`Config::queued_shows`) or at run time (`POST
//! /admin/shows/{show}/hold-queue`). Its hold requests then go to one worker per show (on
//! PostgreSQL a thread with its own runtime and connections, [`db::dedicated`]), which takes every waiting request (up to [`MAX_BATCH`]) and applies them in ONE transaction,
//! each inside its own savepoint through the same [`claim::create_in`] as an unqueued hold: a
//! refused request rolls back to its savepoint, so each is still all-or-nothing and answered on
//! its own (201, or 409 with the asked seats' statuses as the batch read them after its
//! guarded update, [`batch`]; other refusals' availability is read after the commit). Holds of
//! one show never wait on each other's row locks, and a batch of N costs one commit instead of
//! N.
//!
//! If the batch transaction itself fails (begin/commit), every request of it is retried alone
//! through [`claim::create`]; a request that did commit replays its stored answer by its
//! `Idempotency-Key`, so nothing is held twice.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, RwLock};

use tokio::sync::{mpsc, oneshot};

use crate::db::{self, Backend, Db};
use crate::door::Admission;
use crate::error::{ApiError, ApiResult};
use crate::inventory::batch;
use crate::inventory::claim::{self, Ask, HoldAnswer, Lost, Request, Timing};

/// Requests applied in one transaction at most.
pub const MAX_BATCH: usize = 128;
/// Requests waiting per show before senders wait too (back-pressure).
pub const QUEUE_DEPTH: usize = 4096;

/// A hold request that owns its parts (it crosses to the worker task).
#[derive(Debug, Clone)]
pub struct Owned {
    /// The fan's admission.
    pub adm: Admission,
    /// Show id.
    pub show: String,
    /// What to hold.
    pub ask: Ask,
    /// `Idempotency-Key`.
    pub key: String,
    /// Channel name.
    pub channel: String,
    /// Its lifetimes.
    pub timing: Timing,
    /// Live holds per visitor, at most.
    pub visitor_cap: u32,
}

impl Owned {
    /// Copies a borrowed request.
    pub fn of(r: &Request<'_>) -> Self {
        Self {
            adm: r.adm.clone(),
            show: r.show.to_owned(),
            ask: r.ask.clone(),
            key: r.key.to_owned(),
            channel: r.channel.to_owned(),
            timing: r.timing,
            visitor_cap: r.visitor_cap,
        }
    }

    /// The borrowed form [`claim`] takes.
    pub fn request(&self) -> Request<'_> {
        Request {
            adm: &self.adm,
            show: &self.show,
            ask: self.ask.clone(),
            key: &self.key,
            channel: &self.channel,
            timing: self.timing,
            visitor_cap: self.visitor_cap,
        }
    }
}

/// One queued request and where its answer goes.
#[derive(Debug)]
pub struct Job {
    /// The request.
    pub req: Owned,
    /// Its `now`, epoch ms (taken when it arrived).
    pub now_ms: i64,
    /// The answer: a refusal comes back as [`Lost`]; a lost seat request carries its seats'
    /// statuses, read once per batch pass for all of its losers ([`Lost::SeatsSeen`]), and any
    /// other refusal's availability is read by the requester's own task, not the worker.
    pub reply: oneshot::Sender<Outcome>,
    /// When it was queued: the worker records the time to its answer
    /// (`bc_hold_queue_answered_seconds`; the requester's `bc_hold_queue_seconds` adds the wait
    /// for its own task to run again).
    pub queued: std::time::Instant,
}

/// The switch and the workers' inboxes.
#[derive(Debug, Default)]
pub struct HoldQueues {
    enabled: RwLock<HashSet<String>>,
    inboxes: Mutex<HashMap<String, mpsc::Sender<Job>>>,
    /// SQL each worker connection runs once ([`start`]); empty for none.
    session: String,
}

impl HoldQueues {
    /// Queues with `shows` switched on, whose workers' connections run `session` (SQL, `""`
    /// for none: the hold requests' [`db::lock_wait_session`]).
    pub fn new(shows: &[String], session: &str) -> Self {
        let q = Self {
            session: session.to_owned(),
            ..Self::default()
        };
        for s in shows {
            q.set(s, true);
        }
        q
    }

    /// Switches the queue of `show` on or off (requests already queued are still applied).
    pub fn set(&self, show: &str, on: bool) {
        let mut e = self.enabled.write().expect("hold queue switch");
        if on {
            e.insert(show.to_owned());
        } else {
            e.remove(show);
        }
    }

    /// Whether holds of `show` go through the queue.
    pub fn is_on(&self, show: &str) -> bool {
        self.enabled
            .read()
            .map(|e| e.contains(show))
            .unwrap_or(false)
    }

    /// Whether a hold of `show` asking for `ask` goes through the queue (the caller's store
    /// has no writer thread of its own: on a SQLite file that thread is the queue already).
    /// Named seats, best available and pool places only ([`Ask::queueable`]), and of those:
    /// every ask of a show switched on, and a pool-only ask always. A pool is one counter row that every hold of it updates; through
    /// concurrent transactions each waits for the row's lock held to the last one's commit
    /// (`loadtest bench` on PostgreSQL: 1,836 pool holds/s with 4.5 lock waits on average),
    /// while the queue takes a whole batch of places in one update (4,183/s in the same run):
    /// issue 13 item 3, "let the hold queue take a batch of pool places in one update".
    pub fn routes(&self, show: &str, ask: &Ask) -> bool {
        ask.queueable() && (matches!(ask, Ask::Pool { .. }) || self.is_on(show))
    }

    /// Queues `r` and waits for its answer (the worker of the show is started on first use);
    /// a refusal's fresh availability is read from `reads` (as [`claim::create`]), unless the
    /// batch read it already ([`Lost::SeatsSeen`]). `None`: not decided, the caller runs `r`
    /// alone, as an unqueued hold: a row it needs was locked outside the batch
    /// ([`Lost::Locked`]), or the show's worker stopped before answering `r` (before `r` was
    /// queued, or with `r` in its batch: the batch may have committed, and the key then
    /// replays its stored answer).
    pub async fn submit(
        &self,
        db: &Db,
        reads: &Db,
        r: &Request<'_>,
        now_ms: i64,
    ) -> Option<ApiResult<HoldAnswer>> {
        let tx = {
            let mut m = self.inboxes.lock().expect("hold queue inboxes");
            let alive = m.get(r.show).filter(|t| !t.is_closed()).cloned();
            alive.unwrap_or_else(|| {
                let t = start(db, &self.session);
                m.insert(r.show.to_owned(), t.clone());
                t
            })
        };
        let (reply, answer) = oneshot::channel();
        let queued = std::time::Instant::now();
        let job = Job {
            req: Owned::of(r),
            now_ms,
            reply,
            queued,
        };
        if tx.send(job).await.is_err() {
            return None;
        }
        let answer = answer.await;
        // From queueing to the answer (waiting for earlier batches, then its own).
        metrics::histogram!("bc_hold_queue_seconds").record(queued.elapsed().as_secs_f64());
        Some(match answer {
            Ok(Ok(Ok(a))) => Ok(a),
            Ok(Ok(Err(Lost::Locked))) => {
                metrics::counter!("bc_hold_queue_handed_back_total").increment(1);
                return None;
            }
            Ok(Ok(Err(lost))) => match lost.problem(reads, None, r.show, now_ms).await {
                Ok(p) => Err(p.into()),
                Err(e) => Err(e.into()),
            },
            Ok(Err(e)) => Err(e),
            // The worker stopped with `r` in its batch (its reply dropped): whether or not the
            // batch committed, running `r` alone is safe: the key's stored answer, if the batch
            // stored one, is found and replayed (case B12), else `r` is decided afresh.
            Err(_) => {
                metrics::counter!("bc_hold_queue_handed_back_total").increment(1);
                tracing::warn!(
                    show = r.show,
                    "hold queue worker stopped with a hold in its batch; running it alone"
                );
                return None;
            }
        })
    }
}

/// Starts a show's worker ([`run`]) and answers its inbox. On PostgreSQL the worker runs on a
/// thread of its own with connections of its own ([`db::dedicated`]: every hold of a queued
/// show waits for it, and a batch is about ten round trips one after another; in the seed
/// rehearsal its batches took 0.25–0.5 s as a task of the shared runtime, 2.5 ms (median) on
/// its own thread).
///
/// Its connections run `session` (the hold requests' [`db::lock_wait_session`], their
/// `lock_timeout`): a batch waits for a row locked outside it at most that long, then its
/// requests run alone ([`step`]).
fn start(db: &Db, session: &str) -> mpsc::Sender<Job> {
    let (t, rx) = mpsc::channel(QUEUE_DEPTH);
    db::dedicated::spawn_with(
        db,
        "hold-queue",
        db::dedicated::CONNECTIONS,
        std::sync::Arc::from(session),
        move |db| async move {
            let _ = run(db, rx).await;
        },
    );
    t
}

/// What a worker did until its inbox closed ([`run`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ran {
    /// Batches applied (each one transaction, or its requests alone, or refused whole).
    pub batches: usize,
    /// Requests refused without a batch: waiting when a batch found the database unreachable.
    pub refused_waiting: usize,
}

/// The worker of one show: waits for a request, takes every other waiting one, applies them.
/// When a batch finds the database unreachable, the requests that queued meanwhile are
/// answered with the same 503 at once: they came before anyone knew, and a next batch would
/// wait as long again for a connection (a second newcomer review: with PostgreSQL stopped, 60
/// pool holds were answered in two batches, at 5 and 10 s, and 200 in three, up to 15 s).
/// Requests after that start a batch again, so the worker finds the database back by itself.
pub async fn run(db: Db, mut rx: mpsc::Receiver<Job>) -> Ran {
    let mut ran = Ran::default();
    while let Some(batch) = next_batch(&mut rx, MAX_BATCH).await {
        ran.batches += 1;
        if step(&db, batch).await.unreachable == 0 {
            continue;
        }
        while let Ok(job) = rx.try_recv() {
            let _ = job.reply.send(Err(sqlx::Error::PoolTimedOut.into()));
            ran.refused_waiting += 1;
        }
    }
    ran
}

/// Waits for one item of `rx`, then takes every other item already waiting, up to `max` in
/// all (a batch that grows with the load and never waits for more); `None` once every sender
/// is gone. Shared with [`crate::inventory::group`].
pub async fn next_batch<T>(rx: &mut mpsc::Receiver<T>, max: usize) -> Option<Vec<T>> {
    let mut batch = vec![rx.recv().await?];
    while batch.len() < max {
        match rx.try_recv() {
            Ok(item) => batch.push(item),
            Err(_) => break,
        }
    }
    Some(batch)
}

/// How [`step`] answered a batch: request counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stepped {
    /// Answered from the batch's one transaction.
    pub in_batch: usize,
    /// Retried alone after the batch failed ([`claim::create`]).
    pub alone: usize,
    /// Answered with the batch's own failure: the database did not answer.
    pub unreachable: usize,
    /// Handed back to their requesters to run alone ([`Lost::Locked`]): the batch waited
    /// past its `lock_timeout` for a row another transaction held.
    pub handed_back: usize,
}

/// Applies one batch and answers every request of it. When the batch fails, each request is
/// retried alone, unless the database did not answer (a pool timeout, a refused or lost
/// connection, `error::is_unreachable`): then every request of the batch gets that 503 at once
/// and the outage gate trips on the first. Retried alone, each waited as long again for a
/// connection, one after another (newcomer review: with PostgreSQL stopped, 60 queued pool
/// holds got their 503 after 15 s, the gate's cut-off).
pub async fn step(db: &Db, batch: Vec<Job>) -> Stepped {
    metrics::histogram!("bc_hold_queue_batch_size").record(batch.len() as f64);
    let started = std::time::Instant::now();
    let applied = apply(db, &batch).await;
    metrics::histogram!("bc_hold_queue_batch_seconds").record(started.elapsed().as_secs_f64());
    let n = batch.len();
    match applied {
        Ok(outcomes) => {
            for (job, out) in batch.into_iter().zip(outcomes) {
                metrics::histogram!("bc_hold_queue_answered_seconds")
                    .record(job.queued.elapsed().as_secs_f64());
                let _ = job.reply.send(out);
            }
            Stepped {
                in_batch: n,
                ..Stepped::default()
            }
        }
        Err(e) if crate::error::lock_waited(&e) => {
            // A row the batch needed (a key's, a cap slot's, a pool's) stayed locked past the
            // worker's `lock_timeout`: nothing of the batch was written, and each request runs
            // alone at its requester's, side by side, where only those that need the locked
            // row wait for it (run alone here, one after another, each would wait again).
            tracing::warn!(error = %e, requests = n, "hold queue batch: a lock wait timed out; its requests run alone");
            for job in batch {
                let _ = job.reply.send(Ok(Err(Lost::Locked)));
            }
            Stepped {
                handed_back: n,
                ..Stepped::default()
            }
        }
        Err(e) if crate::error::is_unreachable(&e) => {
            tracing::warn!(error = %e, requests = n, "hold queue batch: the database did not answer");
            for job in batch {
                let _ = job.reply.send(Err(same_failure(&e).into()));
            }
            Stepped {
                unreachable: n,
                ..Stepped::default()
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "hold queue batch failed; retrying each request alone");
            for job in batch {
                let answer = claim::create(db, db, None, &job.req.request(), job.now_ms).await;
                let _ = job.reply.send(answer.map(Ok));
            }
            Stepped {
                alone: n,
                ..Stepped::default()
            }
        }
    }
}

/// An unreachable database's error again, for each request of a batch (`sqlx::Error` is not
/// `Clone`): a pool timeout as itself, a refused or lost connection as a lost connection with
/// the same message; both answer `503` + `Retry-After` marked `error::DbUnreachable`.
pub(crate) fn same_failure(e: &sqlx::Error) -> sqlx::Error {
    match e {
        sqlx::Error::PoolTimedOut => sqlx::Error::PoolTimedOut,
        other => sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            other.to_string(),
        )),
    }
}

/// What the worker answers: held, refused (with what was lost), or an error.
pub type Outcome = ApiResult<Result<HoldAnswer, Lost>>;

/// One transaction for the whole batch: the named-seat requests set-based
/// ([`batch::create_seats`]: one guarded update, one insert per table), every other request
/// but pools (best available) in its own savepoint through [`claim::create_in`], then the pool
/// requests set-based ([`batch::create_pools`]: one counter update per pool for the batch) and
/// those whose sum did not fit one by one; one commit.
async fn apply(db: &Db, batch: &[Job]) -> sqlx::Result<Vec<Outcome>> {
    let pg = db::backend(db) == Backend::Postgres;
    let mut tx = timed("begin", db::begin_hold(db)).await?;
    let of = |pick: &dyn Fn(&Ask) -> bool| -> Vec<usize> {
        (0..batch.len())
            .filter(|i| pick(&batch[*i].req.ask))
            .collect()
    };
    let seat_jobs = of(&|a| matches!(a, Ask::Seats(_) | Ask::Best { .. }));
    let pool_jobs = of(&|a| matches!(a, Ask::Pool { .. }));
    let requests = |idx: &[usize]| -> Vec<(Request<'_>, i64)> {
        idx.iter()
            .map(|i| (batch[*i].req.request(), batch[*i].now_ms))
            .collect()
    };
    let mut out: Vec<Option<Outcome>> = batch.iter().map(|_| None).collect();
    for (i, answer) in seat_jobs.iter().zip(
        timed(
            "seats",
            batch::create_seats(&mut tx, pg, &requests(&seat_jobs)),
        )
        .await?,
    ) {
        out[*i] = answer;
    }
    // A best-available party the batch sent to run alone (and any other kind) before the pools: a pool's row stays locked from
    // its guarded update to the commit, so the pools go last.
    let other: Vec<usize> = (0..batch.len())
        .filter(|i| out[*i].is_none() && !pool_jobs.contains(i))
        .collect();
    timed("alone", one_by_one(&mut tx, pg, batch, &other, &mut out)).await?;
    for (i, answer) in pool_jobs.iter().zip(
        timed(
            "pools",
            batch::create_pools(&mut tx, pg, &requests(&pool_jobs)),
        )
        .await?,
    ) {
        out[*i] = answer;
    }
    // Pool requests the batch's sum did not fit: each alone decides.
    let left: Vec<usize> = pool_jobs
        .iter()
        .copied()
        .filter(|i| out[*i].is_none())
        .collect();
    timed(
        "pools_alone",
        one_by_one(&mut tx, pg, batch, &left, &mut out),
    )
    .await?;
    // Every lost request's key recorded as refused in the batch's transaction, one statement
    // for the batch (a loser at the guard already is: no-op); the handler records none.
    let lost: Vec<(Request<'_>, i64)> = batch
        .iter()
        .zip(&out)
        .filter(|(_, o)| matches!(o, Some(Ok(Err(l))) if !matches!(l, Lost::Locked)))
        .map(|(j, _)| (j.req.request(), j.now_ms))
        .collect();
    let lost: Vec<(&Request<'_>, i64)> = lost.iter().map(|(r, now)| (r, *now)).collect();
    timed("refusals", claim::record_refusals(&mut *tx, &lost)).await?;
    timed("commit", tx.commit()).await?;
    Ok(out.into_iter().flatten().collect())
}

/// Awaits `work`, one part of a batch, and records how long it took in
/// `bc_hold_queue_part_seconds{part}` (where a batch's time goes: the seats' set-based pass,
/// the pools', requests run alone, the commit, …).
pub(crate) async fn timed<T>(part: &'static str, work: impl std::future::Future<Output = T>) -> T {
    crate::telemetry::timed("bc_hold_queue_part_seconds", "part", part, work).await
}

/// Runs the jobs `idx` of `batch` one by one in `tx`, each in its own savepoint through
/// [`claim::create_in`] (kept when it held, rolled back otherwise).
async fn one_by_one(
    tx: &mut db::Tx<'_>,
    pg: bool,
    batch: &[Job],
    idx: &[usize],
    out: &mut [Option<Outcome>],
) -> sqlx::Result<()> {
    for &i in idx {
        let job = &batch[i];
        let mut sp = sqlx::Acquire::begin(&mut **tx).await?;
        let mut r = claim::create_in(&mut sp, pg, &job.req.request(), job.now_ms).await;
        if r.as_ref().is_err_and(ApiError::is_lock_wait) {
            // Past the worker's lock wait limit: its requester runs it alone.
            r = Ok(Err(Lost::Locked));
        }
        if matches!(r, Ok(Ok(_))) {
            sp.commit().await?;
        } else {
            sp.rollback().await?;
        }
        out[i] = Some(r);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that stops with a hold in its batch (its reply dropped) hands the hold back to
    /// its handler, which runs it alone; it answered 500 before.
    #[tokio::test]
    async fn a_worker_that_stops_with_a_hold_in_its_batch_hands_it_back() {
        sqlx::any::install_default_drivers();
        let db = sqlx::AnyPool::connect_lazy("sqlite::memory:").expect("lazy pool");
        let queues = HoldQueues::new(&["s".to_owned()], "");
        let (inbox, mut jobs) = mpsc::channel::<Job>(1);
        queues
            .inboxes
            .lock()
            .expect("inboxes")
            .insert("s".to_owned(), inbox);
        // Takes the job, then stops without answering.
        tokio::spawn(async move { drop(jobs.recv().await) });
        let adm = Admission {
            iss: "waiting-room".into(),
            aud: "booking-core".into(),
            sub: "visitor".into(),
            event: "s".into(),
            jti: "jti".into(),
            iat: 0,
            nbf: 0,
            exp: i64::MAX,
            tier: None,
        };
        let r = Request {
            adm: &adm,
            show: "s",
            ask: Ask::Seats(vec!["A-1-1".into()]),
            key: "k",
            channel: "web",
            timing: Timing {
                hold_ttl_ms: 1,
                payment_session_ms: 1,
            },
            visitor_cap: 1,
        };
        assert!(queues.submit(&db, &db, &r, 0).await.is_none());
    }
}
