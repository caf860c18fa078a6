//! Fans' releases applied together on SQLite (issue 13: holds at the speed of the database).
//!
//! A fan's release (`DELETE /api/holds/{hold}`) is one guarded status update and one call for
//! everything it frees ([`holds::release_in`]), but as a transaction of its own it also costs a
//! `BEGIN IMMEDIATE`, a `COMMIT` and sqlx's ping of the connection on its return: on SQLite's
//! one writer connection every one of those is a round trip to sqlx's worker thread while every
//! hold waits for the writer. Measured with `loadtest bench` on a 2-vCPU machine (each 201 is
//! released before that fan's next hold), a release waited 24 ms for the writer and a hold
//! queue's batch about 9 ms.
//!
//! [`Releases::release`] hands a release to one worker task per process
//! ([`group`](crate::inventory::group)), which takes every
//! release waiting (up to [`MAX_BATCH`]) and applies them in ONE transaction, one after another
//! through the same [`holds::release_in`] (group commit), then answers each caller. A release
//! whose guard fails writes nothing, so the others of its batch are unaffected; a caller still
//! answers only after its release is committed. If the batch fails (an error in any release, or
//! the commit), the transaction is rolled back whole and each caller releases alone, as before.
//!
//! PostgreSQL keeps one transaction per release: its pool has many connections, and one
//! transaction locking the seats of many holds could deadlock with holds that lock seats in
//! seat order (case B05). There the release is ONE statement ([`at_once`]) when no fan of the
//! show waits on the waitlist, else [`holds::release_in`] in a transaction of its own.

use futures::future::BoxFuture;

use crate::db::{self, Actor, Backend, Db};
use crate::inventory::fast::{self, Fast};
use crate::inventory::group::{OrWriter, Work};
use crate::inventory::holds::{self, Ended};

/// Releases applied in one transaction at most.
pub const MAX_BATCH: usize = 128;

/// A fan's release of a hold.
#[derive(Debug, Clone)]
pub struct Release {
    /// The hold.
    pub hold_id: String,
    /// The hold's show (never changes; the guard of [`at_once`] checks it).
    pub show: String,
    /// The hold's admission `jti` (never changes), for the session end's notice.
    pub jti: String,
    /// The hold's `payment_id` as the caller read it (`""`: none); the release's guard
    /// requires it unchanged, so a payment started meanwhile is never left on a released hold.
    pub payment: String,
    /// The audit row's reason.
    pub reason: String,
    /// When, epoch ms.
    pub now_ms: i64,
}

/// The releases' group commit: every release of a batch in one transaction (SQLite: no row
/// locks to order); each answer is whether that hold was released.
#[derive(Debug)]
pub struct Apply;

impl Work for Apply {
    type Item = Release;
    type Answer = bool;
    const METRIC: &'static str = "bc_release_batch_size";
    const MAX: usize = MAX_BATCH;
    fn apply<'a>(db: &'a Db, batch: &'a [&'a Release]) -> BoxFuture<'a, sqlx::Result<Vec<bool>>> {
        Box::pin(async move {
            let mut tx = db::begin_hold(db).await?;
            let mut released = Vec::with_capacity(batch.len());
            for r in batch {
                released.push(one(&mut tx, false, r).await?);
            }
            tx.commit().await?;
            Ok(released)
        })
    }
}

/// Fans' releases: on SQLite in batches, on its writer thread when there is one
/// ([`crate::db::writer`]), else by this module's worker (started on first use).
pub type Releases = OrWriter<Apply>;

impl OrWriter<Apply> {
    /// Releases `r` on `db` (SQLite: in a batch with whatever other releases are waiting;
    /// PostgreSQL: alone) and returns once it is committed: true when the hold was released,
    /// false when its guard failed (not `HELD`, or its payment changed) and nothing was
    /// written. A release the writer leaves to the sqlx path (a waitlist to offer, an interval
    /// to free: [`fast::release`]) runs alone. Errors: the database's, from releasing alone
    /// after a batch failed (or the writer's, for its batch).
    pub async fn release(&self, db: &Db, r: Release) -> sqlx::Result<bool> {
        if db::backend(db) == Backend::Postgres {
            return Ok(at_once(db, &r).await? || alone(db, &r).await?);
        }
        if let Some(w) = &self.writer {
            return match fast::release(w, r.clone()).await? {
                Fast::Done(released) => Ok(released),
                Fast::Other => alone(db, &r).await,
            };
        }
        match self.batches.submit(db, r.clone()).await {
            Some(released) => Ok(released),
            None => alone(db, &r).await,
        }
    }
}

/// A fan's release on PostgreSQL in ONE statement (and its transaction's `BEGIN` and
/// `COMMIT`: 3 round trips, where [`holds::release_in`] takes 4 and its caller's read of the hold a
/// fifth; issue 13, "fewer round trips per granted hold and release"). The guarded
/// HELD→RELEASED update of `r`'s hold is the CTE `h`; every write of [`holds::release_in`] is a CTE
/// after it that changes only rows of `(SELECT id FROM h)` or inserts only when `h` has a row,
/// the pool's places returned as [`crate::inventory::pools::release_of`] does and an interval claim cleared as
/// [`resources::release`](crate::inventory::resources::release) does, whatever the hold has
/// (none of them then match a row). The hold row is locked first, then its seats in seat order,
/// as in [`holds::release_in`]. The guard also requires that no fan of the show is waiting on the
/// waitlist: a release that must offer what it frees goes through [`holds::release_in`]. False when the
/// guard failed: nothing was written, and the caller releases through [`holds::release_in`], which
/// tells a hold no longer HELD.
pub async fn at_once(db: &Db, r: &Release) -> sqlx::Result<bool> {
    crate::inventory::seatmap::touch();
    let (sql, b) = at_once_sql(r);
    let mut tx = db::begin_hold(db).await?;
    let released: Option<String> = sqlx::query_scalar_with(&sql, b.args())
        .fetch_optional(&mut *tx)
        .await?;
    tx.commit().await?;
    if released.is_some() {
        holds::count_release(&r.show, Actor::Api, Ended::Released);
    }
    Ok(released.is_some())
}

/// The SQL of [`at_once`] and its values; one row, the hold's id, when released.
fn at_once_sql(r: &Release) -> (String, db::Binds) {
    let mut b = db::Binds::default();
    let (h, s, j, at) = (
        b.push(r.hold_id.as_str()),
        b.push(r.show.as_str()),
        b.push(r.jti.as_str()),
        b.push(r.now_ms),
    );
    let (e, p) = (b.push(Ended::Released.as_str()), b.push(r.payment.as_str()));
    let guard = format!(
        "h AS (UPDATE holds SET status = 'RELEASED', ended_as = {e}, released_at = {at} \
         WHERE id = {h} AND show_id = {s} AND status = 'HELD' AND COALESCE(payment_id, '') = {p} \
         AND NOT EXISTS (SELECT 1 FROM waitlist w WHERE w.show_id = {s} AND w.status = 'waiting') \
         RETURNING id)"
    );
    let writes = holds::Writes {
        hold: &h,
        of_hold: "(SELECT id FROM h)",
        when: "EXISTS (SELECT 1 FROM h)",
        show: &r.show,
        s: &s,
        jti: &r.jti,
        j: &j,
        at: &at,
    };
    let (locks, mut statements) =
        writes.sql(&mut b, true, true, Actor::Api, Ended::Released, &r.reason);
    let [uncount, returned] = crate::inventory::pools::release_pg_sql(writes.of_hold, &h);
    statements.push(returned);
    statements.push(crate::inventory::resources::release_sql(writes.of_hold));
    let mut with = vec![guard];
    with.extend(locks);
    with.push(format!("pc AS ({uncount})"));
    with.extend(
        statements
            .iter()
            .enumerate()
            .map(|(i, s)| format!("w{i} AS ({s})")),
    );
    (format!("WITH {} SELECT id FROM h", with.join(", ")), b)
}

/// `r` in a transaction of its own: committed when released, rolled back otherwise.
pub async fn alone(db: &Db, r: &Release) -> sqlx::Result<bool> {
    let mut tx = db::begin_hold(db).await?;
    let released = one(&mut tx, db::backend(db) == Backend::Postgres, r).await?;
    if released {
        tx.commit().await?;
    } else {
        tx.rollback().await?;
    }
    Ok(released)
}

/// `r` inside the caller's transaction.
async fn one(tx: &mut db::Tx<'_>, pg: bool, r: &Release) -> sqlx::Result<bool> {
    holds::release_in(
        tx,
        pg,
        &r.hold_id,
        Some(&r.payment),
        Actor::Api,
        Ended::Released,
        &r.reason,
        r.now_ms,
    )
    .await
}
