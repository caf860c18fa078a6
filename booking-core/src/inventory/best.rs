//! "Best available N together" (issue 5): N free adjacent seats in one row of a section, rows
//! nearest the stage (row 1) first, then lowest seat numbers. Expired holds count as free. Each
//! candidate block is claimed with the same guarded update as named seats; on PostgreSQL the
//! block is first locked with `FOR UPDATE SKIP LOCKED` and re-checked, so a block another
//! transaction is taking is skipped (a lost race moves on to the next block, never waits, never
//! deadlocks); only a party about to be refused waits, once, for the best block free then
//! (locked in seat order, in one statement: `lock_waiting`). Each try runs in a savepoint that a skipped block rolls back: `SKIP LOCKED` locks
//! the block's seats that nobody else holds, and a loser that kept those locks until its commit
//! would make a third party skip blocks that are free (PostgreSQL releases a rolled-back
//! savepoint's row locks: "The Locking Clause" in the `SELECT` reference). A party is never
//! split unless the fan asks (`allow_split`).

use std::collections::{BTreeSet, HashSet};

use serde_json::{json, Value};

use crate::db::{self, Db, Tx};
use crate::error::ApiResult;
use crate::inventory::holds;

/// Failed tries before answering 409. The first try locks the best block alone; every later
/// one first asks which seats of the next [`WIDE`] candidate blocks nobody is taking (one
/// locking read, rolled back), passes over every candidate with a seat found gone, and then
/// locks the best candidate found whole. So a failed try passes up to [`WIDE`] blocks that
/// parties in flight are taking, and one fails only when a party took the block between the
/// look and the lock.
pub const MAX_TRIES: usize = 64;

/// Fresh starts (the seats found gone forgotten, the section read again) before a party that
/// may sit apart (`allow_split`) takes the best free seats apart; a party that must sit
/// together starts again until [`MAX_TRIES`] (a seat found locked may be free again, and a
/// look's locks make a try skip seats for a moment).
pub const FRESH_STARTS: usize = 2;

/// Candidate blocks a wide try looks at in one locking read (CI on `526d0c8`: 100 parties of
/// two at once on two pools of 40 connections, 16 refused with 800 seats free: with up to 80
/// parties in flight ahead, a party whose every try looked at one block passed one party's
/// seats a try and ran out of its 64; a pair in flight can spoil two of its windows).
pub const WIDE: usize = 16;

/// Failed tries between two reads of the section's free seats (second review: with 100
/// parties at once, the list read first went stale and a party spent its tries on blocks
/// already taken, refused with whole rows free).
pub const REREAD_EVERY: usize = 8;

/// What the fan asked for.
#[derive(Debug, Clone, Copy)]
pub struct Want<'a> {
    /// Section name.
    pub section: &'a str,
    /// Seats wanted, >= 1.
    pub quantity: usize,
    /// Seats need not be side by side.
    pub allow_split: bool,
}

/// A free seat: id, row, number, price (cents).
pub(crate) type Free = (String, i64, i64, i64);

/// A section's free seats (`$2` show, `$3` section; a hold lapsed by `$1`, epoch ms, counts
/// free), best first, as [`Free`] rows. Served by the partial index `seats_unsold` (migration
/// `20261202060000_seats_unsold`; its condition: [`crate::db::unsold_seat`]), so with a `LIMIT`
/// it reads about that many seats however many in front are sold.
pub const FREE_SQL: &str = concat!(
    "SELECT seat_id, seat_row, number, price_cents FROM seats \
     WHERE show_id = $2 AND section = $3 AND ",
    crate::db::unsold_seat!(),
    " AND (status = 'free' OR (status = 'held' AND hold_expires_at <= $1)) \
     ORDER BY seat_row, number"
);

/// Free seats read first for a party: the best [`PREFIX`] of the section, enough for
/// [`MAX_TRIES`] blocks unless the section is fragmented. Reading every free seat cost 1.05 ms
/// a request in the seed rehearsal (42,683 calls, the second costliest statement).
pub const PREFIX: usize = 256;

/// Free seats of a section, in best-first order; the first `limit` only when `Some`.
async fn free_seats(
    tx: &mut Tx<'_>,
    show: &str,
    section: &str,
    now_ms: i64,
    limit: Option<usize>,
) -> sqlx::Result<Vec<Free>> {
    let sql = match limit {
        Some(n) => format!("{FREE_SQL} LIMIT {n}"),
        None => FREE_SQL.to_owned(),
    };
    sqlx::query_as(&sql)
        .bind(now_ms)
        .bind(show)
        .bind(section)
        .fetch_all(&mut **tx)
        .await
}

/// Candidate blocks of `n` adjacent free seats (same row, consecutive numbers), best first.
pub fn blocks(free: &[Free], n: usize) -> Vec<Vec<usize>> {
    blocks_among(free, 0..free.len(), n).collect()
}

/// [`blocks`] of the seats `among` (indexes into `free`, best first) only, lazily.
fn blocks_among<'f>(
    free: &'f [Free],
    among: impl IntoIterator<Item = usize> + 'f,
    n: usize,
) -> impl Iterator<Item = Vec<usize>> + 'f {
    let mut run: Vec<usize> = Vec::new();
    among.into_iter().filter_map(move |i| {
        let extends = run
            .last()
            .is_some_and(|&j| free[j].1 == free[i].1 && free[j].2 + 1 == free[i].2);
        if !extends {
            run.clear();
        }
        run.push(i);
        (run.len() >= n).then(|| run[run.len() - n..].to_vec())
    })
}

/// Locks the seats of `ids` that are still free and that no other transaction is taking
/// (PostgreSQL, `FOR UPDATE SKIP LOCKED`) and answers them. With `keep` (a try), all of `ids`
/// answered means the block is claimable, and then its seats stay locked to `tx`. Otherwise
/// (fewer, or a look without `keep`) no lock is left behind: the locks the statement took are
/// rolled back with the try's savepoint, and the seats missing from the answer are being taken
/// or were taken, or were under another party's look for that moment, which [`take`]'s fresh
/// start heals. (A look with `FOR SHARE` locks, which other looks would not skip, was tried: a
/// try skips a seat under any look, and with 100 parties looking the best blocks were nearly
/// always under one: 1 to 20 of 100 refused in 17 of 20 runs.) On SQLite (one writer) every
/// seat, unread.
async fn lock_free(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    ids: &[String],
    now_ms: i64,
    keep: bool,
) -> sqlx::Result<Vec<String>> {
    if !pg {
        return Ok(ids.to_vec());
    }
    lock_seats(tx, show, ids, now_ms, "FOR UPDATE SKIP LOCKED", keep).await
}

/// The free seats of `ids` (sorted) locked with `lock` (a locking clause) in seat order, in a
/// savepoint kept when `keep` and every seat was locked, rolled back otherwise.
async fn lock_seats(
    tx: &mut Tx<'_>,
    show: &str,
    ids: &[String],
    now_ms: i64,
    lock: &str,
    keep: bool,
) -> sqlx::Result<Vec<String>> {
    let sql = format!(
        "SELECT seat_id FROM seats WHERE show_id = $2 AND seat_id IN ({}) \
         AND (status = 'free' OR (status = 'held' AND hold_expires_at <= $1)) \
         ORDER BY seat_id {lock}",
        db::params(3, ids.len())
    );
    let mut q = sqlx::query_scalar::<_, String>(&sql)
        .bind(now_ms)
        .bind(show);
    for s in ids {
        q = q.bind(s);
    }
    let mut try_ = sqlx::Acquire::begin(&mut **tx).await?;
    let locked = q.fetch_all(&mut *try_).await?;
    if keep && locked.len() == ids.len() {
        try_.commit().await?;
    } else {
        try_.rollback().await?;
    }
    Ok(locked)
}

/// Why [`take`] held nothing (a 409 `no-seats-together`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotTaken {
    /// The transaction's first read found no free seat in the section at all: the refusal's
    /// availability is [`none_free`], with no second read.
    NoneFree,
    /// Free seats were read, but no candidate could be taken: the refusal reads the section's
    /// availability afresh ([`section_availability`]).
    NoBlock,
}

/// The availability of a section with no free seat, in [`section_availability`]'s shape.
pub fn none_free(section: &str) -> Value {
    availability_of(section, &[])
}

/// `{"section","free","largest_block"}` of a section whose free seats are `free` (best first):
/// the longest run of them side by side (same row, consecutive numbers).
fn availability_of(section: &str, free: &[Free]) -> Value {
    let mut largest = 0usize;
    let mut run = 0usize;
    for (i, s) in free.iter().enumerate() {
        run = if i > 0 && free[i - 1].1 == s.1 && free[i - 1].2 + 1 == s.2 {
            run + 1
        } else {
            1
        };
        largest = largest.max(run);
    }
    json!({"section": section, "free": free.len(), "largest_block": largest})
}

/// Finds and claims the seats; `Ok(Err(_))` when no candidate could be taken (409, and
/// whether the section had no free seat at all), 422 for an unknown section. Returns the seat
/// ids (sorted) and the amount in cents.
#[allow(clippy::too_many_arguments)]
pub async fn take(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    want: &Want<'_>,
    hold_id: &str,
    expires_at: i64,
    now_ms: i64,
) -> ApiResult<Result<(Vec<String>, i64), NotTaken>> {
    // The best seats first: the blocks found in a prefix are the first blocks of the whole
    // section (a block is found where it ends), so its candidates are tried first, and the
    // whole section is read only when they are all tried or passed over (or there are none).
    let (mut free, mut candidates, mut whole, _) = reread(tx, show, want, now_ms).await?;
    if free.is_empty() {
        if !section_known(tx, show, want.section).await? {
            return Err(crate::inventory::claim::unprocessable(
                "unknown-section",
                "Unknown section",
            )
            .with("section", crate::error::clip(want.section))
            .into());
        }
        // Nothing free to try (the loop below would find no candidate and no seat apart).
        // The refusal's availability is this read's: in the seed rehearsal the refusal's own
        // read of a held-up section cost 0.39 ms × 17,589 calls, returning 86 rows in all.
        return Ok(Err(NotTaken::NoneFree));
    }
    // Seats a try found taken or being taken by another party: every later candidate with one
    // of them is passed over. All parties read the same best-first candidates, and the
    // windows overlap (a party of four in flight spoils up to seven), so trying them blindly
    // refused parties with whole rows free (newcomer review: 12 of 20 parties of four at once,
    // `no-seats-together` beside `largest_block: 65`).
    let mut gone: HashSet<String> = HashSet::new();
    let (mut failed, mut next, mut fresh) = (0, 0, 0);
    while failed < MAX_TRIES {
        let pick: Vec<usize> = if next < candidates.len() {
            next += 1;
            if spoiled(&candidates[next - 1], &free, &gone) {
                continue;
            }
            if failed == 0 || !pg {
                candidates[next - 1].clone()
            } else {
                // Contended: look at this and the next candidates at once, so one try passes
                // every block being taken among them (see [`WIDE`]).
                let mut wide = vec![next - 1];
                while wide.len() < WIDE && next < candidates.len() {
                    next += 1;
                    if !spoiled(&candidates[next - 1], &free, &gone) {
                        wide.push(next - 1);
                    }
                }
                let ids: Vec<String> = wide
                    .iter()
                    .flat_map(|&c| candidates[c].iter().map(|&i| free[i].0.clone()))
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let open: HashSet<String> = lock_free(tx, pg, show, &ids, now_ms, false)
                    .await?
                    .into_iter()
                    .collect();
                gone.extend(ids.into_iter().filter(|s| !open.contains(s)));
                let whole_one = wide
                    .iter()
                    .find(|&&c| candidates[c].iter().all(|&i| open.contains(&free[i].0)));
                match whole_one {
                    // The best whole one; if it is lost, the candidates after it are looked
                    // at again.
                    Some(&c) => {
                        next = c + 1;
                        candidates[c].clone()
                    }
                    None => {
                        if failed_try(&mut failed) {
                            (free, candidates, whole, next) =
                                reread(tx, show, want, now_ms).await?;
                        }
                        continue;
                    }
                }
            }
        } else if !whole {
            // The prefix's blocks were all tried or passed over: on with the whole section's.
            free = free_seats(tx, show, want.section, now_ms, None).await?;
            candidates = blocks(&free, want.quantity);
            (whole, next) = (true, 0);
            continue;
        } else if !gone.is_empty() && (!want.allow_split || fresh < FRESH_STARTS) {
            // Every candidate was tried or passed over, some for seats found locked that may
            // be free again (a party that lost, another's look): once more from a fresh read,
            // with the seats found gone forgotten, as a failed try. A look's locks make a try
            // skip seats for a moment, so two parties looking at once can each pass over the
            // other's seats; at most twice was too few (CI-like load: one of four parties on
            // two rows of five refused with a pair free, 1 in 10 runs).
            (failed, fresh) = (failed + 1, fresh + 1);
            gone.clear();
            (free, candidates, whole, next) = reread(tx, show, want, now_ms).await?;
            continue;
        } else if want.allow_split {
            // No block could be taken: the best free seats apart, those found gone left out.
            let apart: Vec<usize> = (0..free.len())
                .filter(|&i| !gone.contains(&free[i].0))
                .take(want.quantity)
                .collect();
            if apart.len() < want.quantity {
                break;
            }
            apart
        } else {
            break;
        };
        let mut ids: Vec<String> = pick.iter().map(|&i| free[i].0.clone()).collect();
        ids.sort();
        let locked = lock_free(tx, pg, show, &ids, now_ms, true).await?;
        if locked.len() < ids.len() {
            gone.extend(ids.into_iter().filter(|s| !locked.contains(s)));
            if failed_try(&mut failed) {
                (free, candidates, whole, next) = reread(tx, show, want, now_ms).await?;
            }
            continue;
        }
        let n = holds::claim(tx, pg, show, &ids, hold_id, expires_at, now_ms)
            .await?
            .len() as u64;
        if n == ids.len() as u64 {
            let amount = pick.iter().map(|&i| free[i].3).sum();
            return Ok(Ok((ids, amount)));
        }
        // Not reachable under the lock; never keep a partial claim.
        return Err(
            anyhow::anyhow!("best-available claimed {n} of {} locked seats", ids.len()).into(),
        );
    }
    // Last, on PostgreSQL: the best block free now, locked waiting rather than skipping. Two
    // parties after the last pair can each skip the other's look, in step, until both run
    // out of tries (CI, `best::parties_at_once_are_refused_only_when_no_pair_is_left`: two
    // refused with a pair free, once in six runs). Waiting for a lock in seat order, in one
    // statement, cannot close a cycle with another party (which holds no other lock then) or
    // a hold (which locks seats in the same order); the guard is read again after the wait.
    if pg {
        let (free, candidates, _, _) = reread(tx, show, want, now_ms).await?;
        for block in candidates.iter().take(WAITED_BLOCKS) {
            let mut ids: Vec<String> = block.iter().map(|&i| free[i].0.clone()).collect();
            ids.sort();
            if lock_waiting(tx, show, &ids, now_ms).await? {
                let n = holds::claim(tx, pg, show, &ids, hold_id, expires_at, now_ms)
                    .await?
                    .len();
                if n == ids.len() {
                    let amount = block.iter().map(|&i| free[i].3).sum();
                    return Ok(Ok((ids, amount)));
                }
                return Err(anyhow::anyhow!(
                    "best-available claimed {n} of {} locked seats",
                    ids.len()
                )
                .into());
            }
        }
    }
    Ok(Err(NotTaken::NoBlock))
}

/// Blocks [`take`] tries last with a waiting lock ([`lock_waiting`]), at most.
pub const WAITED_BLOCKS: usize = 4;

/// Locks every seat of `ids` (sorted) that is still free, waiting for another transaction's
/// lock rather than skipping it (PostgreSQL rechecks the row after the wait): true, with the
/// locks kept, when every seat was; else nothing is kept.
async fn lock_waiting(
    tx: &mut Tx<'_>,
    show: &str,
    ids: &[String],
    now_ms: i64,
) -> sqlx::Result<bool> {
    let locked = lock_seats(tx, show, ids, now_ms, "FOR UPDATE", true).await?;
    Ok(locked.len() == ids.len())
}

/// Whether `block` (indices into `free`) has a seat found gone.
fn spoiled(block: &[usize], free: &[Free], gone: &HashSet<String>) -> bool {
    block.iter().any(|&i| gone.contains(&free[i].0))
}

/// Counts a failed try (metric `bc_best_available_retries_total`); true when the free seats
/// are to be read again ([`REREAD_EVERY`]).
fn failed_try(failed: &mut usize) -> bool {
    metrics::counter!("bc_best_available_retries_total").increment(1);
    *failed += 1;
    failed.is_multiple_of(REREAD_EVERY)
}

/// The section's best [`PREFIX`] free seats (read first, and again), as `(free, candidates, whole, next)`
/// for [`take`]'s loop: the list read first goes stale while parties ahead commit, so the next
/// tries skip what they took (the seats found being taken stay out through `gone`).
async fn reread(
    tx: &mut Tx<'_>,
    show: &str,
    want: &Want<'_>,
    now_ms: i64,
) -> sqlx::Result<(Vec<Free>, Vec<Vec<usize>>, bool, usize)> {
    let free = free_seats(tx, show, want.section, now_ms, Some(PREFIX)).await?;
    let candidates = blocks(&free, want.quantity);
    let whole = free.len() < PREFIX;
    Ok((free, candidates, whole, 0))
}

/// The free seats of `section` (best first) for a batch of the per-show hold queue, whose
/// parties then take their blocks from it in memory ([`pick`]): the best [`PREFIX`] when
/// `whole` is false (the whole section was read for every pass at first: in the seed
/// rehearsal's opening, with every section nearly free, that was ~1,400 rows a section a pass
/// and the queue fell 6 s behind), every one when true. `None` when the section has no seat at
/// all (a 422, as [`take`] answers). One read for the batch, where each party alone reads at
/// least once and locks at least once ([`take`]).
pub(crate) async fn section_free(
    tx: &mut Tx<'_>,
    show: &str,
    section: &str,
    now_ms: i64,
    whole: bool,
) -> sqlx::Result<Option<Vec<Free>>> {
    let limit = (!whole).then_some(PREFIX);
    let free = free_seats(tx, show, section, now_ms, limit).await?;
    if free.is_empty() && !section_known(tx, show, section).await? {
        return Ok(None);
    }
    Ok(Some(free))
}

/// The seats [`take`] would choose for `want` from `free` (best first) when the seats for which
/// `taken` says yes are gone: the best block of `want.quantity` side by side, else, for a party
/// that accepts seats apart, the best free seats apart; `None` when neither is there. Indexes
/// into `free`.
pub(crate) fn pick(
    free: &[Free],
    want: &Want<'_>,
    taken: impl Fn(&str) -> bool,
) -> Option<Vec<usize>> {
    let open: Vec<usize> = (0..free.len()).filter(|&i| !taken(&free[i].0)).collect();
    if let Some(block) = blocks_among(free, open.iter().copied(), want.quantity).next() {
        return Some(block);
    }
    (want.allow_split && open.len() >= want.quantity).then(|| open[..want.quantity].to_vec())
}

/// Why a party found nothing in `free`, its section's free seats as its batch read them: none
/// free at all, or no block.
pub(crate) fn not_taken(free: &[Free]) -> NotTaken {
    if free.is_empty() {
        NotTaken::NoneFree
    } else {
        NotTaken::NoBlock
    }
}

/// Whether `section` of `show` has seats: one index probe (`seats_layout`), asked only when
/// the read of its free seats found none (counting its seats cost 0.8 ms a request in the seed
/// rehearsal, 10,346 calls; the probe before every read 0.2 ms, 29,247 calls,
/// `pg_stat_statements`).
async fn section_known(tx: &mut Tx<'_>, show: &str, section: &str) -> sqlx::Result<bool> {
    let known: i64 = sqlx::query_scalar(
        "SELECT CAST(CASE WHEN EXISTS (SELECT 1 FROM seats WHERE show_id = $1 AND section = $2) \
         THEN 1 ELSE 0 END AS BIGINT)",
    )
    .bind(show)
    .bind(section)
    .fetch_one(&mut **tx)
    .await?;
    Ok(known == 1)
}

/// Fresh availability of a section: `{"section","free","largest_block"}`.
pub async fn section_availability(
    db: &Db,
    show: &str,
    section: &str,
    now_ms: i64,
) -> sqlx::Result<Value> {
    let free: Vec<Free> = sqlx::query_as(FREE_SQL)
        .bind(now_ms)
        .bind(show)
        .bind(section)
        .fetch_all(db)
        .await?;
    Ok(availability_of(section, &free))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(row: i64, n: i64) -> Free {
        (format!("A-{row}-{n}"), row, n, 100)
    }

    /// A batch's pick is the first block [`blocks`] finds once the taken seats are gone, and
    /// seats apart only for a party that accepts them.
    #[test]
    fn a_batch_picks_the_best_block_left() {
        let free = vec![seat(1, 1), seat(1, 2), seat(1, 4), seat(2, 1), seat(2, 2)];
        let want = |quantity, allow_split| Want {
            section: "A",
            quantity,
            allow_split,
        };
        assert_eq!(pick(&free, &want(2, false), |_| false), Some(vec![0, 1]));
        assert_eq!(
            pick(&free, &want(2, false), |s| s == "A-1-2"),
            Some(vec![3, 4])
        );
        let gone = |s: &str| s == "A-1-2" || s == "A-2-1";
        assert_eq!(pick(&free, &want(2, false), gone), None);
        assert_eq!(pick(&free, &want(2, true), gone), Some(vec![0, 2]));
        assert_eq!(pick(&free, &want(4, true), gone), None);
        assert_eq!(not_taken(&free), NotTaken::NoBlock);
        assert_eq!(not_taken(&[]), NotTaken::NoneFree);
    }

    #[test]
    fn blocks_are_adjacent_in_one_row_best_first() {
        let free = vec![
            seat(1, 1),
            seat(1, 3),
            seat(1, 4),
            seat(2, 1),
            seat(2, 2),
            seat(2, 3),
        ];
        let b = blocks(&free, 2);
        assert_eq!(b, vec![vec![1, 2], vec![3, 4], vec![4, 5]]);
        assert!(
            blocks(&[seat(1, 9), seat(2, 10)], 2).is_empty(),
            "never across rows"
        );
    }
}
