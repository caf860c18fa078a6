//! A batch of seat holds applied set-based (issue 13 item 4): the per-show hold queue's worker
//! hands its named-seat requests here, in batch order, inside its one transaction.
//!
//! One pass: the requests' keys and cap slots through [`claim::prepare_many`] (the code every
//! hold runs: one round trip for the whole batch), then ONE guarded update of every seat of the
//! batch ([`holds::claim_many`]: the only thing that decides a seat, all or nothing per request;
//! on PostgreSQL it locks the asked seats in seat order first, case B05, in the same
//! statement), then the winners' rows with one insert per table and one update of their keys,
//! and the losers' keys and slots undone ([`claim::write_holds`], [`claim::undo`]). Winners and
//! losers are sorted in memory: a seat asked by two requests goes to the first in batch order
//! (the later one loses at once), and a hold is all or nothing. A visitor's (or admission's)
//! second request in a batch is left to a later pass, after the first one's key and slots, as
//! two transactions would be.
//!
//! A request lost at the guard wrote no seat (the update is all or nothing per request): its key
//! is marked refused and its cap slots freed in the pass, what its own rollback would have left.
//! A request refused by its key or caps, or whose key was no longer in flight, has written rows
//! that only a rollback undoes exactly: each pass runs in a savepoint, and when it ended with
//! such a request, that request's answer is final and the pass is rolled back and run again
//! without it, so what commits is exactly what the winners' own transactions would have
//! written. Each pass that rolls back settles at least one request.

use std::collections::{HashMap, HashSet};

use crate::db::Tx;
use crate::error::ApiResult;
use crate::inventory::claim::{self, Ask, Begun, HoldAnswer, Lost, NewHold, Prepared, Request};
use crate::inventory::holds::{self, SeatAsk};
use crate::inventory::{best, caps, hotq, pools};

/// A request's answer: held, refused with what was lost, or a problem/error.
pub type Answer = ApiResult<Result<HoldAnswer, Lost>>;

/// What a pass settled for a request: its answer, or `None` when the request is to run alone
/// (a best-available party that lost a seat it chose at the guard: see [`create_seats`]).
type Settled = Option<Answer>;

/// Applies `jobs` (each a named-seat or best-available request of one show and its `now`,
/// epoch ms) in `tx`, in order. Per job: `Some(answer)`, or `None` when the job is to run
/// alone ([`claim::create_in`], the caller's): a best-available party whose chosen seats the
/// guarded update refused (a writer outside the queue took one between the batch's read and
/// its update). `Err` only when the transaction itself failed (the caller retries each
/// request alone).
///
/// Best available in the batch (issue 13 item 4; in the seed rehearsal a third of the hot
/// show's hold requests, each a concurrent transaction of several locking reads that skip
/// each other's seats): each asked section's free seats are read once for the pass
/// ([`best::section_free`]), and each party, after every named-seat request of the pass (a
/// valid order for requests that were in flight together), takes the best block nobody of the
/// pass took ([`best::pick`]), then the one guarded update decides it with the named seats.
pub async fn create_seats(
    tx: &mut Tx<'_>,
    pg: bool,
    jobs: &[(Request<'_>, i64)],
) -> sqlx::Result<Vec<Option<Answer>>> {
    let mut done: Vec<Option<Settled>> = jobs.iter().map(|_| None).collect();
    // The sections' reads outlive a pass that rolled back (it wrote nothing), not one that
    // committed.
    let mut sections = Sections::new();
    loop {
        let mut sp = sqlx::Acquire::begin(&mut **tx).await?;
        match pass(&mut sp, pg, jobs, &mut done, &mut sections).await? {
            Pass::Commit(held) => {
                sp.commit().await?;
                sections.clear();
                for (i, answer) in held {
                    done[i] = Some(Some(Ok(Ok(answer))));
                }
                // A visitor's second request is left for another pass.
                if done.iter().all(Option::is_some) {
                    return Ok(done.into_iter().flatten().collect());
                }
            }
            Pass::Again => {
                metrics::counter!("bc_hold_queue_passes_rolled_back_total").increment(1);
                sp.rollback().await?;
            }
        }
    }
}

/// How a pass ended.
enum Pass {
    /// Keep it: these jobs held (every other job it ran is settled in `done`).
    Commit(Vec<(usize, HoldAnswer)>),
    /// Roll it back and run again (new answers were settled in `done`).
    Again,
}

/// The free seats of each section the batch's best-available requests ask for, best first,
/// and whether they are all of the section's (else its best [`best::PREFIX`]).
type Sections = HashMap<String, (Vec<best::Free>, bool)>;

/// A best-available request's ask, `None` for any other.
fn best_of<'a>(r: &'a Request<'_>) -> Option<best::Want<'a>> {
    match &r.ask {
        Ask::Best {
            section,
            quantity,
            allow_split,
        } => Some(best::Want {
            section,
            quantity: *quantity as usize,
            allow_split: *allow_split,
        }),
        _ => None,
    }
}

/// One pass over the jobs not settled yet (see the module's doc).
async fn pass(
    tx: &mut Tx<'_>,
    pg: bool,
    jobs: &[(Request<'_>, i64)],
    done: &mut [Option<Settled>],
    sections: &mut Sections,
) -> sqlx::Result<Pass> {
    let Some(show) = jobs.first().map(|(r, _)| r.show) else {
        return Ok(Pass::Commit(Vec::new()));
    };
    // The best free seats of each section a best-available job asks for, read once for the
    // pass as of its earliest `now` (a hold lapsing later in the batch counts as held), the
    // whole section only when a party finds nothing in them. A party asking for a section
    // without seats runs alone, which answers it exactly as without the queue: the session and
    // caps first (`admission-ended`, …), then `422 unknown-section` (a newcomer review: an
    // ended admission got the 422 in a batch, the 409 alone). Bad input: rare, and alone cheap.
    let earliest = jobs.iter().map(|(_, now)| *now).min().unwrap_or(0);
    for (i, (r, _)) in jobs.iter().enumerate() {
        let Some(want) = best_of(r).filter(|_| done[i].is_none()) else {
            continue;
        };
        if !sections.contains_key(want.section) {
            let read = best::section_free(tx, show, want.section, earliest, false);
            match hotq::timed("sections", read).await? {
                Some(free) => {
                    let whole = free.len() < best::PREFIX;
                    sections.insert(want.section.to_owned(), (free, whole));
                }
                None => {
                    for (j, (o, _)) in jobs.iter().enumerate() {
                        if done[j].is_none()
                            && best_of(o).is_some_and(|w| w.section == want.section)
                        {
                            done[j] = Some(None);
                        }
                    }
                }
            }
        }
    }
    // First in batch order takes a seat; a later job asking for one is lost (settled now: its
    // seat goes to the earlier job, or the pass is run again without that one), and never
    // prepared, so it writes nothing.
    let mut owner: HashMap<&str, usize> = HashMap::new();
    let mut fans: HashSet<&str> = HashSet::new();
    let (mut claiming, mut outbid) = (Vec::new(), Vec::new());
    for (i, (r, _)) in jobs.iter().enumerate().filter(|(i, _)| done[*i].is_none()) {
        let seats = seats_of(r);
        if fans.contains(r.adm.sub.as_str()) || fans.contains(r.adm.jti.as_str()) {
            // A visitor's or admission's second request waits for the next pass (its key and
            // cap slots are taken after the first one's, as two transactions would).
            continue;
        }
        let by: Vec<usize> = seats
            .iter()
            .filter_map(|s| owner.get(s.as_str()).copied())
            .collect();
        if !by.is_empty() {
            outbid.push((i, by));
        } else {
            owner.extend(seats.iter().map(|s| (s.as_str(), i)));
            fans.extend([r.adm.sub.as_str(), r.adm.jti.as_str()]);
            claiming.push(i);
        }
    }
    // A best-available party whose section's read (the whole section's free seats) has no
    // block for it even with nothing else of the pass taken is lost whatever the batch does:
    // settled now, without its key and cap slots written and undone, unless its key is stored
    // or a cap or an ended session would refuse it first (then `prepare` answers it, as its
    // own transaction would). In the seed rehearsal nine in ten of the queue's requests were
    // such parties, after their sections had sold out.
    let doomed: Vec<usize> = claiming
        .iter()
        .copied()
        .filter(|i| {
            best_of(&jobs[*i].0).is_some_and(|want| {
                sections.get(want.section).is_some_and(|(free, whole)| {
                    *whole && best::pick(free, &want, |_| false).is_none()
                })
            })
        })
        .collect();
    let held_back = held_back(tx, &doomed, jobs, earliest).await?;
    for i in doomed.iter().filter(|i| !held_back.contains(i)) {
        let want = best_of(&jobs[*i].0).expect("a best-available party");
        let free = sections
            .get(want.section)
            .map_or(&[][..], |(f, _)| f.as_slice());
        let lost = Lost::Section(
            want.section.to_owned(),
            want.quantity,
            want.allow_split,
            best::not_taken(free),
        );
        done[*i] = Some(Some(Ok(Err(lost))));
    }
    claiming.retain(|i| done[*i].is_none());
    metrics::counter!("bc_hold_queue_settled_before_keys_total")
        .increment((doomed.len() - held_back.len()) as u64);
    let reqs: Vec<(&Request<'_>, i64)> =
        claiming.iter().map(|i| (&jobs[*i].0, jobs[*i].1)).collect();
    let mut ready: Vec<(usize, Prepared)> = Vec::new();
    let mut refused = false;
    for (i, begun) in claiming
        .iter()
        .zip(hotq::timed("prepare", claim::prepare_many(tx, pg, &reqs)).await?)
    {
        match begun {
            Ok(Begun::Ready(p)) => ready.push((*i, p)),
            // A replay wrote nothing but kept seats out of this pass's order; a refusal wrote
            // its key or a slot. Either way: settled, and the pass runs again without it.
            Ok(Begun::Replay(a)) => (done[*i], refused) = (Some(Some(Ok(Ok(a)))), true),
            Err(e) => (done[*i], refused) = (Some(Some(Err(e))), true),
        }
    }
    if refused {
        return Ok(Pass::Again);
    }
    // Each best-available party, in batch order after the named seats, takes the best block
    // no job of the pass asked for; a party with none left is refused here (its key and
    // slots undone below, as a loser at the guard).
    let mut chosen: HashMap<usize, Vec<String>> = HashMap::new();
    let mut losers: Vec<(&Request<'_>, &Prepared)> = Vec::new();
    // Seats asked or chosen so far in this pass (owned: the sections' reads may grow below).
    let mut claimed: HashSet<String> = owner.keys().map(|s| s.to_string()).collect();
    for (i, p) in &ready {
        let r = &jobs[*i].0;
        let Some(want) = best_of(r) else { continue };
        let mut at = sections
            .get(want.section)
            .and_then(|(free, _)| best::pick(free, &want, |s| claimed.contains(s)));
        if at.is_none() && sections.get(want.section).is_some_and(|(_, whole)| !whole) {
            // Nothing in the best seats read: the whole section, once for the batch.
            if let Some(free) = best::section_free(tx, show, want.section, earliest, true).await? {
                at = best::pick(&free, &want, |s| claimed.contains(s));
                sections.insert(want.section.to_owned(), (free, true));
            }
        }
        let free = sections
            .get(want.section)
            .map_or(&[][..], |(f, _)| f.as_slice());
        match at {
            Some(at) => {
                let mut ids: Vec<String> = at.iter().map(|&k| free[k].0.clone()).collect();
                ids.sort();
                claimed.extend(ids.iter().cloned());
                chosen.insert(*i, ids);
            }
            None => {
                let why = best::not_taken(free);
                let lost = Lost::Section(
                    want.section.to_owned(),
                    want.quantity,
                    want.allow_split,
                    why,
                );
                done[*i] = Some(Some(Ok(Err(lost))));
                losers.push((r, p));
            }
        }
    }
    let asking: Vec<&(usize, Prepared)> = ready
        .iter()
        .filter(|(i, _)| best_of(&jobs[*i].0).is_none() || chosen.contains_key(i))
        .collect();
    let asked = |i: &usize| -> &[String] {
        chosen
            .get(i)
            .map_or_else(|| seats_of(&jobs[*i].0), Vec::as_slice)
    };
    let asks: Vec<SeatAsk<'_>> = asking
        .iter()
        .map(|(i, p)| SeatAsk {
            hold_id: &p.hold_id,
            expires_at: p.expires_at,
            seats: asked(i),
            now_ms: jobs[*i].1,
        })
        .collect();
    // On PostgreSQL a seat locked outside the batch is skipped, not waited for (see below).
    let taken = hotq::timed("claim", holds::claim_many(tx, pg, show, &asks, pg)).await?;
    let mut amount: HashMap<&str, (usize, i64)> = HashMap::new();
    for t in &taken {
        let e = amount.entry(t.hold_id.as_str()).or_default();
        (e.0, e.1) = (e.0 + 1, e.1 + t.price_cents);
    }
    let (mut winners, mut lost_at, mut again) = (Vec::new(), Vec::new(), false);
    let mut guard_losers: Vec<(&Request<'_>, &Prepared)> = Vec::new();
    for (i, p) in asking {
        let (r, now) = &jobs[*i];
        let seats = asked(i);
        let best = chosen.contains_key(i);
        match amount.get(p.hold_id.as_str()) {
            Some((n, cents)) if *n == seats.len() => {
                winners.push((*i, NewHold::of(r, p, seats.to_vec(), *cents, *now)));
            }
            // The seats a best-available party chose from the pass's read were taken by a
            // writer outside the queue: it runs alone, where its own tries decide (its key
            // and slots go with the rollback).
            _ if best => (done[*i], again) = (Some(None), true),
            // Nothing of it was written (all or nothing): settled here, its key and slots undone.
            Some(_) => (done[*i], again) = (Some(Some(lost(r))), true),
            None => {
                done[*i] = Some(Some(lost(r)));
                guard_losers.push((r, p));
                lost_at.push(*i);
            }
        }
    }
    if again {
        // A partial claim (the guard said otherwise between the lock and the update): only a
        // rollback undoes it. The outbid jobs are not settled: their seats may be free next.
        return Ok(Pass::Again);
    }
    // The seats of every job that lost (at the guard, or outbid in this pass), read once here,
    // after the guarded update in this transaction: their 409s carry these statuses and need
    // no read after the commit (in `loadtest bench`'s queued hot show that read was a round
    // trip for each of about 1,650 refusals a second). A loser asking for a seat that does not
    // exist is a 422, as an unqueued hold answers (newcomer review: the queue said 409
    // seats-unavailable, which a client retries forever).
    let outbid_at: Vec<usize> = outbid.iter().map(|(i, _)| *i).collect();
    let mut asked: Vec<String> = lost_at
        .iter()
        .chain(&outbid_at)
        .flat_map(|i| seats_of(&jobs[*i].0).iter().cloned())
        .collect();
    asked.sort();
    asked.dedup();
    let latest = jobs.iter().map(|(_, now)| *now).max().unwrap_or(0);
    let seen = holds::availability(&mut **tx, show, &asked, latest).await?;
    // A loser at the guard whose seats all read free lost to a lock, not to a holder (the
    // guarded update skips locked seats on PostgreSQL): not decided, nothing of it kept (the
    // pass runs again without it), and its requester runs it alone, where it waits for the
    // lock as long as an unqueued hold would.
    let mut locked = false;
    for i in lost_at.iter() {
        let free = |s: &String| seen.get(s).and_then(|v| v.as_str()) == Some("free");
        if pg && seats_of(&jobs[*i].0).iter().all(free) {
            (done[*i], locked) = (Some(Some(Ok(Err(Lost::Locked)))), true);
        }
    }
    if locked {
        return Ok(Pass::Again);
    }
    let known: Vec<String> = seen.keys().cloned().collect();
    let settle = |r: &Request<'_>| match claim::unknown_seat(seats_of(r), &known) {
        Some(p) => Err(p.into()),
        None => lost_seen(r, &seen),
    };
    for (i, (r, _)) in lost_at.iter().zip(&guard_losers) {
        done[*i] = Some(Some(settle(r)));
    }
    losers.extend(guard_losers);
    claim::undo(tx, pg, &losers).await?;
    let rows: Vec<(&Request<'_>, &NewHold)> =
        winners.iter().map(|(i, h)| (&jobs[*i].0, h)).collect();
    let stored = hotq::timed("write", claim::write_holds(tx, pg, &rows)).await?;
    for ((i, _), ok) in winners.iter().zip(&stored) {
        if !ok {
            (done[*i], again) = (Some(Some(Err(claim::concurrent_request().into()))), true);
        }
    }
    if again {
        return Ok(Pass::Again);
    }
    // An outbid job lost to an earlier job that won; outbid only by jobs that lost at the
    // guard, it is left for the next pass (its seats may be free: as the next transaction).
    let won: HashSet<usize> = winners.iter().map(|(i, _)| *i).collect();
    // An outbid job naming a seat that does not exist is a 422 too (newcomer review: two
    // fans asking for C-3-2 and C-3-99 in one batch got 409 seats-unavailable).
    let beaten: Vec<usize> = outbid
        .into_iter()
        .filter(|(_, by)| by.iter().any(|o| won.contains(o)))
        .map(|(i, _)| i)
        .collect();
    // One whose session ended or who holds a live cap slot is left for the next pass, where
    // its key and caps are taken first and refuse it as its own transaction would
    // (`admission-ended`, `hold-exists`, …) or it loses at the guard (a newcomer review: with
    // the queue on, 2–7 of 20 ended admissions outbid in a batch were told
    // `seats-unavailable`).
    let capped = capped_fans(tx, &beaten, jobs, earliest).await?;
    for i in beaten {
        let r = &jobs[i].0;
        if !capped.contains(r.adm.jti.as_str()) && !capped.contains(r.adm.sub.as_str()) {
            done[i] = Some(Some(settle(r)));
        }
    }
    Ok(Pass::Commit(
        winners.into_iter().map(|(i, h)| (i, h.answer())).collect(),
    ))
}

/// The jobs among `idx` that their own transaction would not simply refuse for want of seats:
/// whose key is stored (a replay, `409 concurrent-request`, or `422` for another body, a
/// refusal of the same request decided anew), whose admission or visitor holds a live cap
/// slot at `now_ms`, or whose session ended (`capped_fans`'s rule). One statement; none
/// when `idx` is empty.
async fn held_back(
    tx: &mut Tx<'_>,
    idx: &[usize],
    jobs: &[(Request<'_>, i64)],
    now_ms: i64,
) -> sqlx::Result<HashSet<usize>> {
    if idx.is_empty() {
        return Ok(HashSet::new());
    }
    let mut b = crate::db::Binds::default();
    let capped = capped_sql(&mut b, idx, jobs, now_ms);
    let keys: Vec<String> = idx
        .iter()
        .map(|i| {
            let r = &jobs[*i].0;
            format!(
                "(visitor_id = {} AND key = {})",
                b.push(r.adm.sub.as_str()),
                b.push(r.key)
            )
        })
        .collect();
    let sql = format!(
        "SELECT 'o' AS t, owner AS a, '' AS k FROM ({capped}) c \
         UNION ALL SELECT 'k', visitor_id, key FROM idempotency WHERE {}",
        keys.join(" OR ")
    );
    let rows: Vec<(String, String, String)> = sqlx::query_as_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await?;
    let (mut capped, mut stored) = (HashSet::new(), HashSet::new());
    for (t, a, k) in rows {
        if t == "k" {
            stored.insert((a, k));
        } else {
            capped.insert(a);
        }
    }
    Ok(idx
        .iter()
        .copied()
        .filter(|i| {
            let r = &jobs[*i].0;
            capped.contains(r.adm.jti.as_str())
                || capped.contains(r.adm.sub.as_str())
                || stored.contains(&(r.adm.sub.clone(), r.key.to_owned()))
        })
        .collect())
}

/// The admissions (`jti`) and visitors (`sub`) among `idx`'s jobs that a transaction's key and
/// caps would refuse or hold back before its guarded update: an ended session, or a live cap
/// slot at `now_ms` (the read before a hold calls such a request not `plain` for the same
/// reasons, `preread`). One statement; none when `idx` is empty.
async fn capped_fans(
    tx: &mut Tx<'_>,
    idx: &[usize],
    jobs: &[(Request<'_>, i64)],
    now_ms: i64,
) -> sqlx::Result<HashSet<String>> {
    if idx.is_empty() {
        return Ok(HashSet::new());
    }
    let mut b = crate::db::Binds::default();
    let sql = capped_sql(&mut b, idx, jobs, now_ms);
    let rows: Vec<(String,)> = sqlx::query_as_with(&sql, b.args())
        .fetch_all(&mut **tx)
        .await?;
    Ok(rows.into_iter().map(|(o,)| o).collect())
}

/// The statement of [`capped_fans`] (its rows: one column, `owner`), its values pushed on `b`;
/// `idx` not empty.
fn capped_sql(
    b: &mut crate::db::Binds,
    idx: &[usize],
    jobs: &[(Request<'_>, i64)],
    now_ms: i64,
) -> String {
    let (now, jti_scope, visitor_scope) =
        (b.push(now_ms), b.push(caps::JTI), b.push(caps::VISITOR));
    let jtis: Vec<String> = idx
        .iter()
        .map(|i| b.push(jobs[*i].0.adm.jti.as_str()))
        .collect();
    let subs: Vec<String> = idx
        .iter()
        .map(|i| b.push(jobs[*i].0.adm.sub.as_str()))
        .collect();
    let (jtis, subs) = (jtis.join(", "), subs.join(", "));
    format!(
        "SELECT owner FROM hold_slots WHERE live_until > {now} AND \
         ((scope = {jti_scope} AND owner IN ({jtis})) OR (scope = {visitor_scope} AND owner IN ({subs}))) \
         UNION SELECT jti FROM admissions_ended WHERE jti IN ({jtis})"
    )
}

/// The answer of a request that lost some of its seats.
fn lost(r: &Request<'_>) -> Answer {
    Ok(Err(Lost::Seats(seats_of(r).to_vec())))
}

/// The answer of a request that lost some of its seats, with their statuses from `seen` (read
/// in the batch's transaction); a seat `seen` lacks leaves the 409 to read them all again.
fn lost_seen(r: &Request<'_>, seen: &serde_json::Map<String, serde_json::Value>) -> Answer {
    let mine: Option<serde_json::Map<String, serde_json::Value>> = seats_of(r)
        .iter()
        .map(|s| seen.get(s).map(|v| (s.clone(), v.clone())))
        .collect();
    match mine {
        Some(a) => Ok(Err(Lost::SeatsSeen(a))),
        None => lost(r),
    }
}

/// The seats a named-seat request asks for (empty for any other ask).
fn seats_of<'a>(r: &'a Request<'_>) -> &'a [String] {
    match &r.ask {
        Ask::Seats(s) => s,
        _ => &[],
    }
}

/// Applies `jobs` (each a pool request of one show and its `now`, epoch ms) in `tx` set-based
/// (issue 13 item 3, "let the hold queue take a batch of pool places in one update"): per
/// pass, the keys and cap slots of every job in one round trip ([`claim::prepare_many`]), the
/// winners' rows in one round trip ([`claim::write_holds`]), then ONE guarded counter update
/// per pool for the sum of its jobs' places ([`pools::claim`], last, as in a single hold), so
/// the pool row is locked once per batch instead of once per hold. Per job: `Some(answer)`
/// (`409 pool-unavailable` for all of a pool's jobs when not even the smallest ask fits), or
/// `None` when its pool had fewer places left than the batch's sum but some fit (the caller
/// runs those jobs one by one, where the guarded update decides each). Each pass runs in a savepoint, as
/// [`create_seats`]'s. `Err` only when the transaction itself failed.
pub async fn create_pools(
    tx: &mut Tx<'_>,
    pg: bool,
    jobs: &[(Request<'_>, i64)],
) -> sqlx::Result<Vec<Option<Answer>>> {
    let mut done: Vec<Option<Option<Answer>>> = jobs.iter().map(|_| None).collect();
    while done.iter().any(Option::is_none) {
        let mut sp = sqlx::Acquire::begin(&mut **tx).await?;
        match pool_pass(&mut sp, pg, jobs, &mut done).await? {
            Some(held) => {
                sp.commit().await?;
                for (i, answer) in held {
                    done[i] = Some(Some(Ok(Ok(answer))));
                }
            }
            None => {
                metrics::counter!("bc_hold_queue_passes_rolled_back_total").increment(1);
                sp.rollback().await?;
            }
        }
    }
    Ok(done.into_iter().flatten().collect())
}

/// One pass of [`create_pools`] over the jobs not settled yet: `Some(held)` to keep, `None` to
/// roll back and run again (new answers were settled in `done`).
async fn pool_pass(
    tx: &mut Tx<'_>,
    pg: bool,
    jobs: &[(Request<'_>, i64)],
    done: &mut [Option<Option<Answer>>],
) -> sqlx::Result<Option<Vec<(usize, HoldAnswer)>>> {
    let mut fans: HashSet<&str> = HashSet::new();
    let mut claiming = Vec::new();
    for (i, (r, _)) in jobs.iter().enumerate().filter(|(i, _)| done[*i].is_none()) {
        // A visitor's or admission's second request waits for the next pass.
        if !fans.contains(r.adm.sub.as_str()) && !fans.contains(r.adm.jti.as_str()) {
            fans.extend([r.adm.sub.as_str(), r.adm.jti.as_str()]);
            claiming.push(i);
        }
    }
    let reqs: Vec<(&Request<'_>, i64)> =
        claiming.iter().map(|i| (&jobs[*i].0, jobs[*i].1)).collect();
    let mut ready: Vec<(usize, Prepared)> = Vec::new();
    let mut again = false;
    for (i, begun) in claiming
        .iter()
        .zip(claim::prepare_many(tx, pg, &reqs).await?)
    {
        match begun {
            Ok(Begun::Ready(p)) if p.pool_price.is_some() => ready.push((*i, p)),
            Ok(Begun::Ready(_)) => {
                let p = claim::unprocessable("unknown-pool", "Unknown pool");
                (done[*i], again) = (Some(Some(Err(p.into()))), true);
            }
            Ok(Begun::Replay(a)) => (done[*i], again) = (Some(Some(Ok(Ok(a)))), true),
            Err(e) => (done[*i], again) = (Some(Some(Err(e))), true),
        }
    }
    if again || ready.is_empty() {
        return Ok(None);
    }
    let mut winners = Vec::new();
    let mut per_pool: Vec<(&str, i64, Vec<usize>)> = Vec::new();
    for (i, p) in &ready {
        let (r, now) = &jobs[*i];
        let Some((pool, quantity)) = r.ask.pool() else {
            continue;
        };
        let amount = p.pool_price.unwrap_or(0) * i64::from(quantity);
        winners.push((*i, NewHold::of(r, p, Vec::new(), amount, *now)));
        match per_pool.iter_mut().find(|(name, _, _)| *name == pool) {
            Some((_, total, members)) => {
                *total += i64::from(quantity);
                members.push(*i);
            }
            None => per_pool.push((pool, i64::from(quantity), vec![*i])),
        }
    }
    let rows: Vec<(&Request<'_>, &NewHold)> =
        winners.iter().map(|(i, h)| (&jobs[*i].0, h)).collect();
    for ((i, _), ok) in winners.iter().zip(claim::write_holds(tx, pg, &rows).await?) {
        if !ok {
            (done[*i], again) = (Some(Some(Err(claim::concurrent_request().into()))), true);
        }
    }
    if again {
        return Ok(None);
    }
    // Lapsed holds are reclaimed (only if the update fails) as of the batch's earliest `now`.
    let show = jobs[ready[0].0].0.show;
    let now = ready.iter().map(|(i, _)| jobs[*i].1).min().unwrap_or(0);
    for (pool, total, members) in &per_pool {
        if !pools::claim(tx, pg, show, pool, *total, now).await? {
            // Fewer places left than the batch's sum. When not even the smallest ask fits (a
            // sold-out pool, most of the time), every one of them is refused here; else each
            // alone decides. (Each ran alone, a savepoint and several round trips apiece, while
            // the show's other holds waited: in the seed rehearsal, after the 2,000-place pool
            // sold out, every batch's pool requests did.) The pass is rolled back either way.
            let least = members
                .iter()
                .filter_map(|i| jobs[*i].0.ask.pool())
                .map(|(_, q)| i64::from(q))
                .min()
                .unwrap_or(*total);
            let none_fit = least == *total || !pools::claim(tx, pg, show, pool, least, now).await?;
            for i in members {
                done[*i] = Some(none_fit.then(|| Ok(Err(Lost::Pool((*pool).to_owned())))));
            }
            again = true;
        }
    }
    if again {
        return Ok(None);
    }
    Ok(Some(
        winners.into_iter().map(|(i, h)| (i, h.answer())).collect(),
    ))
}
