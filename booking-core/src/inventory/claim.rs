//! Creating a hold (DESIGN "Holds", seed 001): one transaction that replays or refuses a used
//! `Idempotency-Key`, takes the caps' slots (one live hold per admission, a cap per visitor),
//! claims the inventory with a guarded update (named seats, "best available N together", or
//! pool units with the conditional counter), writes the hold, its audit row and the stored
//! answer. A seat hold or a pool hold is three statements between `BEGIN` and `COMMIT` (issue
//! 13 item 2; test `statements`): key + cap slots (+ the pool's price) in one round trip
//! ([`prepare_many`]), the guarded update ([`holds::claim_many`], or for a pool the counter
//! update, last), and the rows in one round trip ([`write_holds`]). A pool's conditional counter update is the transaction's last statement, so the
//! pool row is locked only from it to the commit. On SQLite the transaction begins as a writer
//! (`BEGIN IMMEDIATE`, [`db::begin_write`]). Any refusal rolls everything back and is a specific problem: 409 with fresh
//! availability when the inventory is taken.

use std::collections::HashSet;

use axum::http::StatusCode;
use sale_common::Problem;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::db::local::LocalReads;
use crate::db::{self, Actor, Backend, Db, Tx};
use crate::door::Admission;
use crate::error::ApiResult;
use crate::inventory::refusals::Refusals;
use crate::inventory::{best, caps, holds, pools, resources};
use crate::telemetry;

/// What a hold asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// These seats (normalised: sorted, unique, 1..=max).
    Seats(Vec<String>),
    /// `quantity` units of a general-admission pool.
    Pool {
        /// Pool id.
        pool: String,
        /// Units, 1..=max.
        quantity: u32,
    },
    /// The best `quantity` free seats of `section`, adjacent in one row unless `allow_split`.
    Best {
        /// Section name.
        section: String,
        /// Seats, 1..=max.
        quantity: u32,
        /// The fan accepts seats that are not side by side.
        allow_split: bool,
    },
    /// A named resource for `[start, end)` (checked against its kind's grid and windows).
    Interval {
        /// What to claim.
        claim: resources::Claim,
        /// Its price, cents.
        amount: i64,
    },
    /// Several kinds in one all-or-nothing hold (issue 17 item 3): at most one seat part
    /// (`Seats` or `Best`), at most one `Pool` and at most one `Interval`, in that order, at
    /// least two parts, never nested. One transaction claims them all; the amount is the sum.
    Mixed(Vec<Ask>),
}

impl Ask {
    /// Metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Ask::Seats(_) => "seats",
            Ask::Pool { .. } => "pool",
            Ask::Best { .. } => "best",
            Ask::Interval { .. } => "interval",
            Ask::Mixed(_) => "mixed",
        }
    }

    /// The single-kind parts: the mixed order's, or this ask alone.
    pub fn parts(&self) -> &[Ask] {
        match self {
            Ask::Mixed(parts) => parts,
            one => std::slice::from_ref(one),
        }
    }

    /// The pool part, if any: (pool id, units).
    pub fn pool(&self) -> Option<(&str, u32)> {
        self.parts().iter().find_map(|p| match p {
            Ask::Pool { pool, quantity } => Some((pool.as_str(), *quantity)),
            _ => None,
        })
    }

    /// The interval part's claim, if any.
    pub fn interval(&self) -> Option<&resources::Claim> {
        self.parts().iter().find_map(|p| match p {
            Ask::Interval { claim, .. } => Some(claim),
            _ => None,
        })
    }

    /// Whether the per-show hold queue runs this ask: named seats, best available and pool
    /// places, which its batches apply set-based (`inventory::batch`). Interval and mixed
    /// holds go straight to [`create`]. Best available ran alone in the queue once, each party
    /// in a savepoint, one round trip after another while the batch's other requests waited
    /// (a third of the seed rehearsal's holds), and then as concurrent transactions that skip
    /// each other's seats (`FOR UPDATE SKIP LOCKED`): in the seed rehearsal on PostgreSQL the
    /// hold p99 was 1.34–1.42 s with them and 0.53 s with no best-available fans (`rush
    /// --best-available-share 0`); now a batch reads each asked section once and its parties
    /// pick in memory.
    pub fn queueable(&self) -> bool {
        matches!(self, Ask::Seats(_) | Ask::Best { .. } | Ask::Pool { .. })
    }

    /// Hash of the request's canonical text: what the idempotency store compares.
    pub fn request_hash(&self, show: &str, channel: &str) -> String {
        hex::encode(Sha256::digest(self.canonical(show, channel).as_bytes()))
    }

    /// Canonical text of the request, hashed for the idempotency check (a single kind's text
    /// is unchanged since before mixed orders, so stored keys still match).
    fn canonical(&self, show: &str, channel: &str) -> String {
        format!("{show}|{}|{channel}", self.what())
    }

    /// The middle of [`Self::canonical`]: what is asked, kind by kind.
    fn what(&self) -> String {
        match self {
            Ask::Seats(s) => s.join(","),
            Ask::Pool { pool, quantity } => format!("pool:{pool}x{quantity}"),
            Ask::Best {
                section,
                quantity,
                allow_split,
            } => format!("best:{section}x{quantity}:{allow_split}"),
            Ask::Interval { claim, .. } => {
                format!("interval:{}@{}-{}", claim.resource, claim.start, claim.end)
            }
            Ask::Mixed(parts) => format!(
                "mixed:{}",
                parts.iter().map(Ask::what).collect::<Vec<_>>().join("+")
            ),
        }
    }
}

/// Lifetimes of the hold being created, ms (from the request's channel).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Hold lifetime, ms.
    pub hold_ttl_ms: i64,
    /// Payment session from hold creation, ms (shorter than the hold).
    pub payment_session_ms: i64,
}

/// A hold request after the door and the input checks.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The fan's admission.
    pub adm: &'a Admission,
    /// Show id.
    pub show: &'a str,
    /// What to hold.
    pub ask: Ask,
    /// `Idempotency-Key`.
    pub key: &'a str,
    /// Channel name (a key of `config.channels`).
    pub channel: &'a str,
    /// Its lifetimes.
    pub timing: Timing,
    /// Live holds per visitor, at most.
    pub visitor_cap: u32,
}

/// Status and JSON body of the answer (stored for idempotent replay).
#[derive(Debug)]
pub struct HoldAnswer {
    /// 201 on success, or the replayed status.
    pub status: StatusCode,
    /// Body.
    pub body: Value,
    /// The stored answer of an earlier identical request (not a new hold).
    pub replayed: bool,
}

fn conflict(kind: &'static str, title: &str) -> Problem {
    Problem::new(StatusCode::CONFLICT, kind, title)
}

/// Creates the hold at `now_ms` (epoch ms) in one transaction on `db` (the writer). Only 201
/// answers are stored: a refusal is recomputed on retry. A refusal's fresh availability is read
/// after the rollback from `reads` (`AppState::reads`: SQLite's reader connections, so the
/// single writer goes on to the next hold; on PostgreSQL the same pool). A lost hold's key is
/// recorded as refused after the rollback: through `refusals` when given (one insert for every
/// refusal waiting, so a loser costs the writer no transaction of its own; a key another body
/// stored first is then 422 `idempotency-key-reused`), else alone.
pub async fn create(
    db: &Db,
    reads: &Db,
    refusals: Option<&Refusals>,
    r: &Request<'_>,
    now_ms: i64,
) -> ApiResult<HoldAnswer> {
    let pg = db::backend(db) == Backend::Postgres;
    let mut tx = db::begin_hold(db).await?;
    match create_in(&mut tx, pg, r, now_ms).await? {
        Ok(answer) => {
            tx.commit().await?;
            Ok(answer)
        }
        Err(lost) => {
            // Roll back first: on SQLite the transaction holds the only writer connection.
            tx.rollback().await?;
            // The refused key recorded here (the key cannot be reused for another request);
            // the handler records only the other refusals ([`LOST_KINDS`]).
            match refusals {
                Some(batched) => {
                    let hash = r.ask.request_hash(r.show, r.channel);
                    let row = Refused::of(&r.adm.sub, r.key, &hash, now_ms);
                    if !batched.record(db, row).await? {
                        return Err(key_reused().into());
                    }
                }
                None => record_refusals(db, &[(r, now_ms)]).await?,
            }
            Err(lost.problem(reads, None, r.show, now_ms).await?.into())
        }
    }
}

/// The body of [`create`] inside the caller's transaction (or savepoint: the per-show hold
/// queue runs pool and best-available requests this way). `Ok(Err(lost))` and `Err(_)` mean
/// the caller must roll back what this wrote; after the rollback, [`Lost::problem`] is the 409.
pub async fn create_in(
    tx: &mut Tx<'_>,
    pg: bool,
    r: &Request<'_>,
    now_ms: i64,
) -> ApiResult<Result<HoldAnswer, Lost>> {
    let p = match prepare(tx, pg, r, now_ms).await? {
        Begun::Replay(answer) => return Ok(Ok(answer)),
        Begun::Ready(p) => p,
    };
    let (seats, amount) = match take_inventory(tx, pg, r, &p, now_ms).await? {
        Ok(taken) => taken,
        Err(lost) => return Ok(Err(lost)),
    };
    let hold = NewHold::of(r, &p, seats, amount, now_ms);
    if !write_holds(tx, pg, &[(r, &hold)]).await?[0] {
        return Err(concurrent_request().into());
    }
    // A pool's places last: its one guarded update decides, and the pool row is locked only
    // from here to the commit (issue 13 item 3: no hot row held across the transaction).
    if let Some((pool, quantity)) = r.ask.pool() {
        let qty = i64::from(quantity);
        if !pools::claim(tx, pg, r.show, pool, qty, now_ms).await? {
            return Ok(Err(Lost::Pool(pool.to_owned())));
        }
    }
    // An interval's claim likewise last: on PostgreSQL the exclusion constraint decides at the
    // insert (a 23P01 aborts the transaction, which the caller rolls back: a mixed order's
    // seats and pool places go with it, no savepoint).
    if let Some(claim) = r.ask.interval() {
        if !resources::claim(tx, pg, r.show, &hold.id, claim, now_ms).await? {
            return Ok(Err(Lost::Interval(
                claim.kind.clone(),
                claim.resource.clone(),
            )));
        }
    }
    Ok(Ok(hold.answer()))
}

/// A request whose key and cap slots [`prepare`] took: the hold it will be.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The new hold's id (UUID v7).
    pub hold_id: String,
    /// Its deadline, epoch ms.
    pub expires_at: i64,
    /// The price of the asked pool's place, cents (`None` without a pool part, or when the
    /// pool does not exist: 422 `unknown-pool`), read in the same round trip as the key.
    pub pool_price: Option<i64>,
}

impl Prepared {
    /// The cap slots the hold `r` takes as this prepared hold: its admission's and its
    /// visitor's, until its deadline.
    pub fn slots<'a>(&'a self, r: &'a Request<'_>) -> caps::HoldSlots<'a> {
        caps::HoldSlots {
            jti: &r.adm.jti,
            visitor: &r.adm.sub,
            key: r.key,
            hold_id: &self.hold_id,
            live_until: self.expires_at,
        }
    }
}

/// What [`prepare`] found.
#[derive(Debug)]
pub enum Begun {
    /// The key's stored 201: nothing was written, answer it.
    Replay(HoldAnswer),
    /// The key is this request's (in flight) and the cap slots are the new hold's.
    Ready(Prepared),
}

/// The part of a hold before its inventory, in the caller's transaction: the key's row first
/// (an identical request in another transaction waits on it, on PostgreSQL the unique index,
/// and replays the stored 201 once this one commits: case B12), then the admission's slot
/// (only while its session has not ended) and the visitor's cap slot in one statement. `Err`
/// is the refusal (422, `admission-ended`, `hold-exists`, `visitor-hold-cap`,
/// `concurrent-request`); the caller rolls back what this wrote.
pub async fn prepare(tx: &mut Tx<'_>, pg: bool, r: &Request<'_>, now_ms: i64) -> ApiResult<Begun> {
    prepare_many(tx, pg, &[(r, now_ms)]).await?.remove(0)
}

/// [`prepare`] for many requests at once (the hold queue's batch): ONE round trip takes every
/// request's key, the admission and visitor cap slot 0 of those whose key it took, and reads
/// the price of every pool asked for ([`take_keys_and_slots`]); a visitor whose slot 0 is live
/// tries slot 1, 2, … in one more statement each ([`caps::take_later_slots`]). The requests'
/// visitors and admissions must be distinct. A cap slot whose hold lapsed is taken over only if
/// it lapsed by the earliest `now` of the requests. Per request, as [`prepare`]; `Err` only for
/// a failed statement.
pub async fn prepare_many(
    tx: &mut Tx<'_>,
    pg: bool,
    reqs: &[(&Request<'_>, i64)],
) -> sqlx::Result<Vec<ApiResult<Begun>>> {
    let hashes: Vec<String> = reqs
        .iter()
        .map(|(r, _)| r.ask.request_hash(r.show, r.channel))
        .collect();
    let now_ms = reqs.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let prepared: Vec<Prepared> = reqs
        .iter()
        .map(|(r, now)| Prepared {
            hold_id: uuid::Uuid::now_v7().to_string(),
            expires_at: now + r.timing.hold_ttl_ms,
            pool_price: None,
        })
        .collect();
    let slots: Vec<caps::HoldSlots<'_>> = reqs
        .iter()
        .zip(&prepared)
        .map(|((r, _), p)| p.slots(r))
        .collect();
    let rows = take_keys_and_slots(tx, pg, reqs, &hashes, &slots, now_ms).await?;
    let tagged = |tag: &str| -> Vec<(String, String)> {
        rows.iter()
            .filter(|(t, _, _)| t == tag)
            .map(|(_, a, b)| (a.clone(), b.clone()))
            .collect()
    };
    let (keys, slot_rows, prices) = (tagged("k"), tagged("s"), tagged("p"));
    // One cap per call: every request of one show's batch has the same.
    let cap = reqs.first().map_or(1, |(r, _)| r.visitor_cap);
    let mut got = caps::slots_got(&slots, &slot_rows);
    caps::take_later_slots(tx, &slots, &mut got, cap, now_ms).await?;
    let mut out = Vec::with_capacity(reqs.len());
    for (i, ((r, _), mut p)) in reqs.iter().zip(prepared).enumerate() {
        let taken = keys.iter().any(|(v, k)| *v == r.adm.sub && k == r.key);
        out.push(if !taken {
            match stored_in(tx, r, &hashes[i]).await {
                Ok(Some(answer)) => {
                    telemetry::replay(r.show);
                    Ok(Begun::Replay(answer))
                }
                // Neither taken nor stored: the row changed under us; the client retries.
                Ok(None) => Err(concurrent_request().into()),
                Err(e) => Err(e),
            }
        } else if !got[i].0 {
            Err(admission_refused(tx, &r.adm.jti).await?.into())
        } else if !got[i].1 {
            Err(conflict("visitor-hold-cap", "Too many live holds")
                .detail(format!("a visitor may have {cap} live holds at once"))
                .with("max_holds", cap)
                .into())
        } else {
            p.pool_price = r.ask.pool().and_then(|(pool, _)| {
                let name = format!("{}|{pool}", r.show);
                prices
                    .iter()
                    .find(|(n, _)| *n == name)
                    .and_then(|(_, price)| price.parse().ok())
            });
            Ok(Begun::Ready(p))
        });
    }
    Ok(out)
}

/// Why an admission's slot was refused: its session ended, or it holds a live hold.
async fn admission_refused(tx: &mut Tx<'_>, jti: &str) -> sqlx::Result<Problem> {
    if crate::outbox::notify::admission_ended(tx, jti).await? {
        return Ok(admission_ended());
    }
    let live: Option<String> = sqlx::query_scalar(
        "SELECT hold_id FROM hold_slots WHERE scope = $1 AND owner = $2 AND slot = 0",
    )
    .bind(caps::JTI)
    .bind(jti)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(conflict("hold-exists", "You already hold seats")
        .detail("one live hold per admission")
        .with("hold_id", live))
}

/// A hold whose inventory is claimed (or, for a pool, about to be by its guarded update), as
/// [`write_holds`] stores it: the hold row, its seats or pool row, the audit row, the 201.
#[derive(Debug, Clone)]
pub struct NewHold {
    id: String,
    amount: i64,
    expires_at: i64,
    payment_expires_at: i64,
    created_at: i64,
    seats: Vec<String>,
    reason: String,
    body: Value,
}

impl NewHold {
    /// The hold `r` becomes with `seats` (empty for a pool) worth `amount` cents, at `now_ms`.
    pub fn of(r: &Request<'_>, p: &Prepared, seats: Vec<String>, amount: i64, now_ms: i64) -> Self {
        let payment_expires_at = now_ms + r.timing.payment_session_ms;
        let what: Vec<String> = r
            .ask
            .parts()
            .iter()
            .map(|part| match part {
                Ask::Pool { pool, quantity } => format!("{pool} x{quantity}"),
                Ask::Interval { claim: c, .. } => {
                    format!("{} [{}, {})", c.resource, c.start, c.end)
                }
                _ => seats.join(","),
            })
            .collect();
        let what = what.join(" + ");
        let mut body = json!({
            "hold_id": p.hold_id, "show": r.show, "seats": seats, "status": "HELD",
            "expires_at": p.expires_at / 1000, "payment_expires_at": payment_expires_at / 1000,
            "amount_cents": amount, "channel": r.channel,
        });
        if let Some((pool, quantity)) = r.ask.pool() {
            body["pool"] = pool.into();
            body["quantity"] = quantity.into();
        }
        if let Some(c) = r.ask.interval() {
            body["interval"] =
                resources::interval_json(&c.kind, &c.resource, c.start, c.end, c.until);
        }
        Self {
            id: p.hold_id.clone(),
            amount,
            expires_at: p.expires_at,
            payment_expires_at,
            created_at: now_ms,
            seats,
            reason: format!("{what} ({})", r.channel),
            body,
        }
    }

    /// The 201's body as the key's row stores it (compact JSON).
    pub(crate) fn body_text(&self) -> String {
        self.body.to_string()
    }

    /// The 201 this hold answers (and stores).
    pub fn answer(self) -> HoldAnswer {
        HoldAnswer {
            status: StatusCode::CREATED,
            body: self.body,
            replayed: false,
        }
    }
}

/// Stores `holds` (each with its request): one multi-row `INSERT` per table (holds, their seats
/// and pool rows, audit) and one `UPDATE` of their keys' rows to the stored 201; on PostgreSQL
/// all of it one data-modifying CTE, one round trip (every part runs; foreign keys are checked
/// at the end of the statement). A single hold is a batch of one; the per-show hold queue
/// stores a whole batch's winners. Returns, per hold, whether its key's row was still in flight
/// (false: the caller rolls back that hold and answers `concurrent-request`).
pub async fn write_holds(
    tx: &mut Tx<'_>,
    pg: bool,
    holds: &[(&Request<'_>, &NewHold)],
) -> sqlx::Result<Vec<bool>> {
    if holds.is_empty() {
        return Ok(Vec::new());
    }
    let (sql, b) = write_holds_sql(pg, holds);
    let done: Vec<(String, String)> = sqlx::query_as_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await?;
    Ok(holds
        .iter()
        .map(|(r, _)| done.iter().any(|(v, k)| *v == r.adm.sub && k == r.key))
        .collect())
}

/// The SQL of [`write_holds`] (SQLite: statements joined by `"; "`) and its values; `holds` not
/// empty. Rows `(visitor, key)` of the keys stored. Also run by SQLite's writer thread.
pub(crate) fn write_holds_sql(pg: bool, holds: &[(&Request<'_>, &NewHold)]) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    let parts = write_parts(&mut b, holds, None);
    let (hold_rows, audit) = (parts.holds.values(), parts.audit.values());
    let sql = if pg {
        let mut with: Vec<String> = hold_rows
            .map(|h| format!("h AS ({h})"))
            .into_iter()
            .collect();
        with.extend(parts.seats.values().map(|s| format!("s AS ({s})")));
        with.extend(parts.pools.values().map(|s| format!("p AS ({s})")));
        with.extend(audit.map(|a| format!("a AS ({a})")));
        with.push(format!(
            "i AS ({} RETURNING idempotency.visitor_id, idempotency.key)",
            parts.keys
        ));
        format!("WITH {} SELECT visitor_id, key FROM i", with.join(", "))
    } else {
        // SQLite: one statement per table in one call (placeholders are numbered, so every
        // statement binds its own from the shared list); in process, no round trips to save.
        let mut sqls: Vec<String> = hold_rows.into_iter().collect();
        sqls.extend(parts.seats.values());
        sqls.extend(parts.pools.values());
        sqls.extend(audit);
        sqls.push(format!("{} RETURNING visitor_id, key", parts.keys));
        sqls.join("; ")
    };
    (sql, b)
}

/// Undoes, in one round trip, what [`prepare_many`] took for requests that then lost at the
/// guarded update and wrote no inventory: their cap slots are freed (`live_until = 0`, as a
/// release frees them) and their keys' rows marked refused (what [`record_refusal`] writes
/// after a rollback). The per-show hold queue's batch settles such a loser this way instead of
/// rolling back the whole pass (issue 13 item 4).
pub async fn undo(
    tx: &mut Tx<'_>,
    pg: bool,
    losers: &[(&Request<'_>, &Prepared)],
) -> sqlx::Result<()> {
    if losers.is_empty() {
        return Ok(());
    }
    let mut b = db::Binds::default();
    let (in_flight, refused) = (b.push(IN_FLIGHT), b.push(REFUSED));
    let holds: Vec<String> = losers
        .iter()
        .map(|(_, p)| b.push(p.hold_id.clone()))
        .collect();
    let keys: Vec<String> = losers
        .iter()
        .map(|(r, _)| {
            format!(
                "({}, {})",
                b.push(r.adm.sub.clone()),
                b.push(r.key.to_owned())
            )
        })
        .collect();
    let slots = format!(
        "UPDATE hold_slots SET live_until = 0 WHERE hold_id IN ({})",
        holds.join(", ")
    );
    let refuse = format!(
        "UPDATE idempotency SET status = {refused} FROM ({}) AS w \
         WHERE idempotency.visitor_id = w.v AND idempotency.key = w.k AND idempotency.status = {in_flight}",
        db::values_as(&["v", "k"], &keys)
    );
    let sql = if pg {
        format!("WITH s AS ({slots}) {refuse}")
    } else {
        format!("{slots}; {refuse}")
    };
    sqlx::query_with(&sql, b.args()).execute(&mut **tx).await?;
    Ok(())
}

/// One multi-row `INSERT`: its head (`INSERT INTO table (columns)`) and its `VALUES` rows.
pub(crate) struct Insert {
    head: &'static str,
    rows: Vec<String>,
}

impl Insert {
    /// `head VALUES rows`, or `None` without rows.
    pub(crate) fn values(&self) -> Option<String> {
        (!self.rows.is_empty()).then(|| format!("{} VALUES {}", self.head, self.rows.join(", ")))
    }

    /// The same rows inserted only when the CTE `gate` has a row (it has at most one): `head
    /// SELECT v.* FROM (VALUES rows) AS v, gate`; `None` without rows.
    pub(crate) fn values_if(&self, gate: &str) -> Option<String> {
        (!self.rows.is_empty()).then(|| {
            format!(
                "{} SELECT v.* FROM (VALUES {}) AS v, {gate}",
                self.head,
                self.rows.join(", ")
            )
        })
    }
}

/// The SQL of [`write_holds`], every statement's placeholders bound once in `b`.
pub(crate) struct WriteParts {
    pub(crate) holds: Insert,
    pub(crate) seats: Insert,
    pub(crate) pools: Insert,
    pub(crate) audit: Insert,
    /// The keys' rows set to the stored 201 (each still [`IN_FLIGHT`]).
    keys: String,
}

/// The parts of [`write_holds_sql`] for `holds`, bound into `b`. `amount`: a SQL expression
/// written as every hold's `amount_cents` instead of its own (the one-round-trip hold on
/// PostgreSQL sums the prices its guarded update returned, [`crate::inventory::onetrip`]).
pub(crate) fn write_parts(
    b: &mut db::Binds,
    holds: &[(&Request<'_>, &NewHold)],
    amount: Option<&str>,
) -> WriteParts {
    let (mut hold_rows, mut seat_rows, mut pool_rows, mut audit_rows, mut key_rows) =
        (vec![], vec![], vec![], vec![], vec![]);
    let actor = b.push(Actor::Api.as_str().to_owned());
    let in_flight = b.push(IN_FLIGHT);
    for (r, h) in holds {
        let (id, show) = (b.push(h.id.clone()), b.push(r.show.to_owned()));
        let (created, expires) = (b.push(h.created_at), b.push(h.expires_at));
        let amount = amount.map_or_else(|| b.push(h.amount), str::to_owned);
        hold_rows.push(format!(
            "({id}, {show}, {}, {}, 'HELD', {amount}, {expires}, {}, {created}, {})",
            b.push(r.adm.sub.clone()),
            b.push(r.adm.jti.clone()),
            b.push(h.payment_expires_at),
            b.push(r.channel.to_owned()),
        ));
        for s in &h.seats {
            seat_rows.push(format!("({id}, {show}, {})", b.push(s.clone())));
        }
        if let Some((pool, quantity)) = r.ask.pool() {
            let (p, q) = (b.push(pool.to_owned()), b.push(i64::from(quantity)));
            // The hold's deadline: the lower bound of when its places lapse (pools::LAPSED).
            pool_rows.push(format!("({id}, {show}, {p}, {q}, 1, {expires})"));
        }
        audit_rows.push(format!(
            "({created}, {show}, {id}, 'held', {actor}, {})",
            b.push(h.reason.clone())
        ));
        key_rows.push(format!(
            "({}, {}, {})",
            b.push(r.adm.sub.clone()),
            b.push(r.key.to_owned()),
            b.push(h.body_text())
        ));
    }
    WriteParts {
        holds: Insert {
            head: "INSERT INTO holds (id, show_id, visitor_id, admission_jti, status, amount_cents, \
                   expires_at, payment_expires_at, created_at, channel)",
            rows: hold_rows,
        },
        seats: Insert {
            head: "INSERT INTO hold_seats (hold_id, show_id, seat_id)",
            rows: seat_rows,
        },
        pools: Insert {
            head: "INSERT INTO hold_pools (hold_id, show_id, pool_id, quantity, counted, lapses_at)",
            rows: pool_rows,
        },
        audit: Insert {
            head: "INSERT INTO audit (at, show_id, hold_id, action, actor, reason)",
            rows: audit_rows,
        },
        keys: format!(
            "UPDATE idempotency SET status = 201, body = w.body FROM ({}) AS w \
             WHERE idempotency.visitor_id = w.v AND idempotency.key = w.k AND idempotency.status = {in_flight}",
            db::values_as(&["v", "k", "body"], &key_rows)
        ),
    }
}

/// Status stored for a refused request (only its hash matters: the refusal is recomputed on
/// retry, but the key cannot be reused with another request).
pub(crate) const REFUSED: i64 = 409;
/// Status of a key taken by a transaction that has not ended (only that transaction sees it).
const IN_FLIGHT: i64 = 0;

/// Records that `(visitor, key)` was refused for the request hashed `hash` (no-op when the
/// key already has a stored row), alone in its own statement; true when the key's row is this
/// request's (written now, or an identical request's), false when another request stored the
/// key first (its answer is then 422 [`key_reused`]). The handler's refusals go through
/// [`crate::inventory::refusals::Refusals`], which stores them in batches.
pub async fn record_refusal(
    db: &Db,
    visitor: &str,
    key: &str,
    hash: &str,
    now_ms: i64,
) -> sqlx::Result<bool> {
    let ours = record_refused_rows(db, &[&Refused::of(visitor, key, hash, now_ms)]).await?;
    Ok(ours[0])
}

/// A refused request's idempotency row: visitor (`sub`), `Idempotency-Key`, the request's
/// hash, and when (epoch ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The visitor (`sub` of the admission).
    pub visitor: String,
    /// The `Idempotency-Key`.
    pub key: String,
    /// The request's hash ([`Ask::request_hash`]).
    pub hash: String,
    /// When it was refused, epoch ms.
    pub now_ms: i64,
}

impl Refused {
    /// The row of `visitor`'s request hashed `hash` with `key`, refused at `now_ms`.
    pub fn of(visitor: &str, key: &str, hash: &str, now_ms: i64) -> Self {
        Self {
            visitor: visitor.to_owned(),
            key: key.to_owned(),
            hash: hash.to_owned(),
            now_ms,
        }
    }
}

/// [`record_refusal`] of every row of `rows` in one statement on `db` (one commit); a key
/// already stored, or twice in `rows`, keeps its first row. Per row of `rows`: whether the
/// key's stored row has that row's hash (inserted now, or an identical request's); rows that
/// met a key stored before cost one more read, of those keys only. (Concurrent requests with
/// one key and two bodies had both been answered 409, and the later one's retry 422: found by
/// a newcomer.)
pub async fn record_refused_rows(db: &Db, rows: &[&Refused]) -> sqlx::Result<Vec<bool>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let (sql, b) = refused_rows_sql(rows);
    let inserted: KeyRows = sqlx::query_as_with(&sql, b.args())
        .fetch_all(db)
        .await?
        .into_iter()
        .collect();
    let Some((sql, b)) = met_keys_sql(rows, &inserted) else {
        return Ok(vec![true; rows.len()]);
    };
    let stored: KeyRows = sqlx::query_as_with(&sql, b.args())
        .fetch_all(db)
        .await?
        .into_iter()
        .collect();
    Ok(refused_ours(rows, &inserted, &stored))
}

/// Stored keys' rows `(visitor, key, request hash)`.
pub(crate) type KeyRows = HashSet<(String, String, String)>;

/// The insert of [`record_refused_rows`], returning the [`KeyRows`] it inserted; `rows` not
/// empty.
pub(crate) fn refused_rows_sql(rows: &[&Refused]) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    let values: Vec<String> = rows
        .iter()
        .map(|r| refusal_row(&mut b, &r.visitor, &r.key, r.hash.clone(), r.now_ms))
        .collect();
    let sql = format!(
        "{} RETURNING visitor_id, key, request_hash",
        refusals_sql(&values)
    );
    (sql, b)
}

/// The read of the [`KeyRows`] of those of `rows` that `inserted` lacks (their keys were stored
/// before); `None` when every row was inserted.
pub(crate) fn met_keys_sql(rows: &[&Refused], inserted: &KeyRows) -> Option<(String, db::Binds)> {
    let mut b = db::Binds::default();
    let wanted: Vec<String> = rows
        .iter()
        .filter(|r| !inserted.contains(&key_row(r)))
        .map(|r| {
            format!(
                "(visitor_id = {} AND key = {})",
                b.push(r.visitor.clone()),
                b.push(r.key.clone())
            )
        })
        .collect();
    (!wanted.is_empty()).then(|| {
        let sql = format!(
            "SELECT visitor_id, key, request_hash FROM idempotency WHERE {}",
            wanted.join(" OR ")
        );
        (sql, b)
    })
}

/// Per row of `rows`, whether its key's stored row is that row's (in `inserted` or `stored`).
pub(crate) fn refused_ours(rows: &[&Refused], inserted: &KeyRows, stored: &KeyRows) -> Vec<bool> {
    rows.iter()
        .map(|r| inserted.contains(&key_row(r)) || stored.contains(&key_row(r)))
        .collect()
}

fn key_row(r: &Refused) -> (String, String, String) {
    (r.visitor.clone(), r.key.clone(), r.hash.clone())
}

/// The problem kinds of a lost hold ([`Lost::kind`]): whoever answers one has recorded the
/// refused key already ([`create`] after its rollback, the hold queue in its batch's
/// transaction), so the handler records only other refusals.
pub const LOST_KINDS: [&str; 4] = [
    "seats-unavailable",
    "pool-unavailable",
    "no-seats-together",
    "interval-unavailable",
];

/// [`record_refusal`] of every request of `refused` (each with its `now`, epoch ms) in one
/// statement, on `conn` (a pool, or the hold queue's transaction: a batch's losers cost one
/// statement, not a commit each).
pub async fn record_refusals<'c, E>(conn: E, refused: &[(&Request<'_>, i64)]) -> sqlx::Result<()>
where
    E: sqlx::Executor<'c, Database = sqlx::Any>,
{
    if refused.is_empty() {
        return Ok(());
    }
    let mut b = db::Binds::default();
    let rows: Vec<String> = refused
        .iter()
        .map(|(r, now)| {
            let hash = r.ask.request_hash(r.show, r.channel);
            refusal_row(&mut b, &r.adm.sub, r.key, hash, *now)
        })
        .collect();
    sqlx::query_with(&refusals_sql(&rows), b.args())
        .execute(conn)
        .await?;
    Ok(())
}

/// One `VALUES` row of [`refusals_sql`].
fn refusal_row(b: &mut db::Binds, visitor: &str, key: &str, hash: String, now_ms: i64) -> String {
    format!(
        "({}, {}, {}, {}, '', {})",
        b.push(visitor.to_owned()),
        b.push(key.to_owned()),
        b.push(hash),
        b.push(REFUSED),
        b.push(now_ms)
    )
}

/// The insert of refused keys' rows (`rows` from [`refusal_row`]); a key already stored stays.
fn refusals_sql(rows: &[String]) -> String {
    format!(
        "INSERT INTO idempotency (visitor_id, key, request_hash, status, body, created_at) VALUES {} \
         ON CONFLICT (visitor_id, key) DO NOTHING",
        rows.join(", ")
    )
}

/// The stored answer of `(visitor, key)` read outside any transaction (before the rate
/// limiter: a replay is not a new request), or 422 when the key came with another request.
pub async fn stored_answer(
    db: &Db,
    visitor: &str,
    key: &str,
    hash: &str,
) -> ApiResult<Option<HoldAnswer>> {
    let stored: Option<(String, i64, String)> = sqlx::query_as(
        "SELECT request_hash, status, body FROM idempotency WHERE visitor_id = $1 AND key = $2",
    )
    .bind(visitor)
    .bind(key)
    .fetch_optional(db)
    .await?;
    answer_of(stored, hash)
}

/// Takes `(visitor, key)` of every request in `tx`: a new row, or a stored refusal of the same
/// request (`hashes[i]`), becomes [`IN_FLIGHT`] (a concurrent transaction that took a key first
/// makes this one wait until it ends: case B12); in the same round trip, slot 0 of the caps
/// ([`caps::first_slots_sql`]) for the requests whose key was taken, and the price of every
/// pool asked for. PostgreSQL: one data-modifying CTE (the slots' upsert reads the keys'
/// `RETURNING`); SQLite: three statements in one call (under `BEGIN IMMEDIATE` the only
/// [`IN_FLIGHT`] rows are this transaction's). Rows `(tag, a, b)`: `("k", visitor, key)` per
/// key taken, `("s", scope, owner)` per slot taken, `("p", "{show}|{pool}", price)` per pool.
/// A key not taken: [`stored_in`] tells the stored answer or 422.
async fn take_keys_and_slots(
    tx: &mut Tx<'_>,
    pg: bool,
    reqs: &[(&Request<'_>, i64)],
    hashes: &[String],
    slots: &[caps::HoldSlots<'_>],
    now_ms: i64,
) -> sqlx::Result<Vec<(String, String, String)>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    let (sql, b) = keys_and_slots_sql(pg, reqs, hashes, slots, now_ms);
    sqlx::query_as_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await
}

/// The SQL of [`take_keys_and_slots`] (SQLite: statements joined by `"; "`) and its values;
/// `reqs` not empty. Also run by SQLite's writer thread ([`crate::inventory::fast`]).
pub(crate) fn keys_and_slots_sql(
    pg: bool,
    reqs: &[(&Request<'_>, i64)],
    hashes: &[String],
    slots: &[caps::HoldSlots<'_>],
    now_ms: i64,
) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    let (in_flight, refused) = (b.push(IN_FLIGHT), b.push(REFUSED));
    let rows: Vec<String> = reqs
        .iter()
        .zip(hashes)
        .map(|((r, now), hash)| {
            format!(
                "({}, {}, {}, {in_flight}, '', {})",
                b.push(r.adm.sub.clone()),
                b.push(r.key.to_owned()),
                b.push(hash.clone()),
                b.push(*now)
            )
        })
        .collect();
    let keys = format!(
        "INSERT INTO idempotency (visitor_id, key, request_hash, status, body, created_at) VALUES {} \
         ON CONFLICT (visitor_id, key) DO UPDATE SET status = excluded.status, created_at = excluded.created_at \
         WHERE idempotency.status = {refused} AND idempotency.request_hash = excluded.request_hash",
        rows.join(", ")
    );
    let key_taken = if pg {
        "EXISTS (SELECT 1 FROM k WHERE k.visitor_id = w.kv AND k.key = w.kk)".to_owned()
    } else {
        format!(
            "EXISTS (SELECT 1 FROM idempotency i WHERE i.visitor_id = w.kv AND i.key = w.kk \
             AND i.status = {in_flight})"
        )
    };
    let returning = if pg {
        "scope, owner"
    } else {
        "'s', scope, owner"
    };
    let slots_sql = caps::first_slots_sql(&mut b, slots, now_ms, &key_taken, returning);
    // Each pool once: a batch's pool requests mostly ask for the same few pools.
    let mut asked: Vec<(&str, &str)> = reqs
        .iter()
        .filter_map(|(r, _)| r.ask.pool().map(|(pool, _)| (r.show, pool)))
        .collect();
    asked.sort_unstable();
    asked.dedup();
    let pools: Vec<String> = asked
        .into_iter()
        .map(|(show, pool)| {
            format!(
                "(show_id = {} AND pool_id = {})",
                b.push(show.to_owned()),
                b.push(pool.to_owned())
            )
        })
        .collect();
    let prices = (!pools.is_empty()).then(|| {
        format!(
            "SELECT 'p', show_id || '|' || pool_id, CAST(price_cents AS TEXT) FROM pools WHERE {}",
            pools.join(" OR ")
        )
    });
    let sql = if pg {
        let mut with = vec![format!(
            "k AS ({keys} RETURNING idempotency.visitor_id, idempotency.key)"
        )];
        let mut select = vec!["SELECT 'k' AS t, visitor_id AS a, key AS b FROM k".to_owned()];
        if let Some(s) = slots_sql {
            with.push(format!("s AS ({s})"));
            select.push("SELECT 's', scope, owner FROM s".to_owned());
        }
        select.extend(prices);
        format!("WITH {} {}", with.join(", "), select.join(" UNION ALL "))
    } else {
        let mut sqls = vec![format!("{keys} RETURNING 'k', visitor_id, key")];
        sqls.extend(slots_sql);
        sqls.extend(prices);
        sqls.join("; ")
    };
    (sql, b)
}

/// The stored answer of a key [`take_keys_and_slots`] did not take: replay, 422, or `None`.
async fn stored_in(tx: &mut Tx<'_>, r: &Request<'_>, hash: &str) -> ApiResult<Option<HoldAnswer>> {
    let stored: Option<(String, i64, String)> = sqlx::query_as(
        "SELECT request_hash, status, body FROM idempotency WHERE visitor_id = $1 AND key = $2",
    )
    .bind(&r.adm.sub)
    .bind(r.key)
    .fetch_optional(&mut **tx)
    .await?;
    answer_of(stored, hash)
}

/// 409 `concurrent-request`: an identical request is being processed; retry for its answer.
pub fn concurrent_request() -> Problem {
    conflict("concurrent-request", "The same request is being processed")
        .detail("a request with this Idempotency-Key is in flight; retry to get its answer")
        .retry_after(1)
}

/// `422 idempotency-key-reused`: the key was used with a different request.
pub fn key_reused() -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency-key-reused",
        "Idempotency key reused",
    )
    .detail("this Idempotency-Key was used with a different request")
}

/// A stored `(hash, status, body)` against this request's hash: replay, 422, or `None` (no
/// row, or a refusal of this same request: recompute).
pub(crate) fn answer_of(
    stored: Option<(String, i64, String)>,
    hash: &str,
) -> ApiResult<Option<HoldAnswer>> {
    let Some((h, st, body)) = stored else {
        return Ok(None);
    };
    if h != hash {
        return Err(key_reused().into());
    }
    if st == REFUSED {
        return Ok(None);
    }
    if st == IN_FLIGHT {
        return Err(concurrent_request().into());
    }
    let status =
        StatusCode::from_u16(u16::try_from(st).unwrap_or(201)).unwrap_or(StatusCode::CREATED);
    let body = serde_json::from_str(&body).map_err(anyhow::Error::from)?;
    Ok(Some(HoldAnswer {
        status,
        body,
        replayed: true,
    }))
}

/// Inventory that was not there: what the 409 reports fresh availability for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// Some of these seats are taken.
    Seats(Vec<String>),
    /// Some of the asked seats are taken, with each asked seat's effective status (`{seat:
    /// status}`) as the deciding transaction read it after its guarded update: the 409's
    /// availability needs no read of its own (the hold queue's losers, [`crate::inventory::batch`]).
    SeatsSeen(serde_json::Map<String, Value>),
    /// The pool has fewer free units than asked.
    Pool(String),
    /// The pool has fewer free units than asked, with its entry of
    /// [`pools::availability`] as the read that refused it saw it (`{"id","price_cents",
    /// "capacity","oversell","available"}`): the 409 needs no read of its own (the read before
    /// a hold, [`crate::inventory::preread`]).
    PoolSeen(Value),
    /// No block of the asked size is free in the section: (section, seats asked, whether
    /// the party accepted seats apart, in which case fewer seats than asked are free, and
    /// why: with [`best::NotTaken::NoneFree`] the 409's availability is known without a read).
    Section(String, usize, bool, best::NotTaken),
    /// The interval overlaps a live claim of the resource: (kind, resource).
    Interval(String, String),
    /// Not decided: a row the request needs was locked by a transaction outside the hold
    /// queue's batch, which skipped it rather than wait (its seats, `FOR UPDATE SKIP LOCKED`,
    /// or any lock past the worker's `lock_timeout`). Nothing of it was written; the requester
    /// runs it alone, where it waits for the lock like an unqueued hold
    /// ([`crate::inventory::hotq::HoldQueues::submit`]). Never answered to a fan as such.
    Locked,
}

/// 409 `seats-unavailable` with the asked seats' fresh effective statuses (`{seat: status}`).
pub fn seats_unavailable(availability: serde_json::Map<String, Value>) -> Problem {
    conflict(LOST_KINDS[0], "Seats unavailable")
        .detail("some of the asked seats are taken; nothing was held")
        .with("availability", Value::Object(availability))
}

/// 409 `pool-unavailable` with the pool's entries of [`pools::availability`].
fn pool_unavailable(availability: Vec<Value>) -> Problem {
    conflict(LOST_KINDS[1], "Not enough places left")
        .detail("the pool has fewer free places than asked; nothing was held")
        .with("availability", Value::Array(availability))
}

impl Lost {
    /// The problem kind of [`Lost::problem`]: one of [`LOST_KINDS`], or `seats-locked` for
    /// [`Lost::Locked`] (not a refusal).
    pub fn kind(&self) -> &'static str {
        LOST_KINDS[match self {
            Lost::Seats(_) | Lost::SeatsSeen(_) => 0,
            Lost::Pool(_) | Lost::PoolSeen(_) => 1,
            Lost::Section(..) => 2,
            Lost::Interval(..) => 3,
            Lost::Locked => return "seats-locked",
        }]
    }

    /// The 409 problem with fresh availability, read after the rollback from `db`, or for
    /// seats on a SQLite file on this thread through `local` when given (`db::local`).
    pub async fn problem(
        &self,
        db: &Db,
        local: Option<&LocalReads>,
        show: &str,
        now_ms: i64,
    ) -> sqlx::Result<Problem> {
        Ok(match self {
            Lost::Seats(seats) => seats_unavailable(match local {
                Some(local) => holds::availability_local(local, show, seats, now_ms)?,
                None => holds::availability(db, show, seats, now_ms).await?,
            }),
            Lost::SeatsSeen(availability) => seats_unavailable(availability.clone()),
            Lost::Pool(pool) => {
                let fresh = pools::availability(db, show, now_ms).await?;
                let mine: Vec<Value> = fresh.into_iter().filter(|p| p["id"] == *pool).collect();
                pool_unavailable(mine)
            }
            Lost::PoolSeen(entry) => pool_unavailable(vec![entry.clone()]),
            Lost::Section(section, n, split, why) => {
                let fresh = match why {
                    best::NotTaken::NoneFree => best::none_free(section),
                    best::NotTaken::NoBlock => {
                        best::section_availability(db, show, section, now_ms).await?
                    }
                };
                let section = crate::error::clip(section);
                // Worded by what was asked (newcomer review: "no 1 free seats side by side",
                // and "side by side" for a party that accepted seats apart).
                let detail = match (n, split) {
                    (1, _) => format!("no free seat in section {section}"),
                    (_, true) => format!("fewer than {n} free seats in section {section}"),
                    (_, false) => format!("no {n} free seats side by side in section {section}"),
                };
                conflict(self.kind(), "No seats together")
                    .detail(detail)
                    .with("availability", fresh)
            }
            Lost::Interval(..) => conflict(self.kind(), "Interval taken").detail(
                "the resource is held or booked for part of this interval; nothing was held",
            ),
            // Its requester runs it alone; were it answered, it is a lock wait.
            Lost::Locked => crate::error::lock_wait(),
        })
    }
}

/// Claims what `r.ask` names, part by part (a mixed order's seat part first): the seats (empty
/// without a seat part) and the amount in cents (the parts' sum), or what was lost (the caller
/// rolls back and answers 409).
async fn take_inventory(
    tx: &mut Tx<'_>,
    pg: bool,
    r: &Request<'_>,
    p: &Prepared,
    now_ms: i64,
) -> ApiResult<Result<(Vec<String>, i64), Lost>> {
    let (mut seats, mut amount) = (Vec::new(), 0);
    for part in r.ask.parts() {
        match take_part(tx, pg, r.show, part, p, now_ms).await? {
            Ok((s, a)) => {
                seats.extend(s);
                amount += a;
            }
            Err(lost) => return Ok(Err(lost)),
        }
    }
    Ok(Ok((seats, amount)))
}

/// One single-kind part of [`take_inventory`].
async fn take_part(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    part: &Ask,
    p: &Prepared,
    now_ms: i64,
) -> ApiResult<Result<(Vec<String>, i64), Lost>> {
    match part {
        Ask::Seats(seats) => {
            let prices =
                holds::claim(tx, pg, show, seats, &p.hold_id, p.expires_at, now_ms).await?;
            if prices.len() != seats.len() {
                // Unknown seats are a 422 (this read runs only on the refusal path).
                check_known(tx, show, seats).await?;
                return Ok(Err(Lost::Seats(seats.clone())));
            }
            Ok(Ok((seats.clone(), prices.iter().sum())))
        }
        Ask::Pool { quantity, .. } => {
            // Read with the key (see `take_keys_and_slots`).
            let Some(price) = p.pool_price else {
                return Err(unprocessable("unknown-pool", "Unknown pool").into());
            };
            // The places are claimed by the last statement of the hold (see `create_in`).
            Ok(Ok((Vec::new(), price * i64::from(*quantity))))
        }
        Ask::Best {
            section,
            quantity,
            allow_split,
        } => {
            let want = best::Want {
                section,
                quantity: *quantity as usize,
                allow_split: *allow_split,
            };
            let taken = best::take(tx, pg, show, &want, &p.hold_id, p.expires_at, now_ms).await?;
            Ok(taken
                .map_err(|why| Lost::Section(section.clone(), want.quantity, *allow_split, why)))
        }
        // The claim is the last statement of the hold (see `create_in`).
        Ask::Interval { amount, .. } => Ok(Ok((Vec::new(), *amount))),
        // Never nested (see `Ask::Mixed`): nothing of its own to take.
        Ask::Mixed(_) => Ok(Ok((Vec::new(), 0))),
    }
}

/// 422 `unknown-seat` when some of the seats do not exist.
async fn check_known(tx: &mut Tx<'_>, show: &str, seats: &[String]) -> ApiResult<()> {
    let known = known_seats(tx, show, seats).await?;
    match unknown_seat(seats, &known) {
        Some(p) => Err(p.into()),
        None => Ok(()),
    }
}

/// Those of `seats` that exist in `show` (one read; the refusal paths only).
pub async fn known_seats(
    tx: &mut Tx<'_>,
    show: &str,
    seats: &[String],
) -> sqlx::Result<Vec<String>> {
    if seats.is_empty() {
        return Ok(Vec::new());
    }
    let (sql, b) = known_seats_sql(show, seats);
    sqlx::query_scalar_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await
}

/// The SQL of [`known_seats`] (rows: seat ids) and its values; `seats` not empty.
pub(crate) fn known_seats_sql(show: &str, seats: &[String]) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    let show = b.push(show);
    let ids: Vec<String> = seats.iter().map(|s| b.push(s.as_str())).collect();
    let sql = format!(
        "SELECT seat_id FROM seats WHERE show_id = {show} AND seat_id IN ({})",
        ids.join(", ")
    );
    (sql, b)
}

/// 422 `unknown-seat` naming those of `seats` not in `known`, if any.
pub fn unknown_seat(seats: &[String], known: &[String]) -> Option<Problem> {
    let unknown: Vec<String> = seats
        .iter()
        .filter(|s| !known.contains(s))
        .map(|s| crate::error::clip(s))
        .collect();
    (!unknown.is_empty())
        .then(|| unprocessable("unknown-seat", "Unknown seat").with("seats", json!(unknown)))
}

/// 409 `admission-ended`: the admission's session was ended (the fan left, or its hold was
/// paid or released); the handler adds the waiting-room URL.
pub fn admission_ended() -> Problem {
    conflict("admission-ended", "Admission ended").detail(
        "this admission's session has ended; to book again, join the waiting room again \
             without your join token (a new place at the end of the queue)",
    )
}

/// A 422 problem.
pub fn unprocessable(kind: &'static str, title: &str) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, kind, title)
}
