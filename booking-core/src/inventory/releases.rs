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
//! On PostgreSQL a fan's release of its own plain seat hold (no read of the hold first,
//! [`onetrip::release_own`]) goes to [`OwnReleases`], the same group commit: every release
//! waiting is applied in ONE statement ([`onetrip::release_own_many`]), which locks the seats
//! of all of them in (show, seat) order, the order every hold locks seats in, so a batch never
//! deadlocks with holds (case B05). Any other release on PostgreSQL is one transaction of its
//! own.

use futures::future::BoxFuture;

use crate::db::{self, Actor, Backend, Db};
use crate::inventory::fast::{self, Fast};
use crate::inventory::group::Group;
use crate::inventory::group::{OrWriter, Work};
use crate::inventory::holds::{self, Ended};
use crate::inventory::onetrip::{self, OwnRelease};

/// Releases applied in one transaction at most.
pub const MAX_BATCH: usize = 128;

/// A fan's release of a hold.
#[derive(Debug, Clone)]
pub struct Release {
    /// The hold.
    pub hold_id: String,
    /// Its show, as the caller read it (the release's guard requires it).
    pub show: String,
    /// Its admission `jti`, as the caller read it (the release's guard requires it).
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
    /// PostgreSQL: alone, a plain seat hold's in one statement,
    /// [`crate::inventory::onetrip::release`]) and returns once it is committed: true when the hold was released,
    /// false when its guard failed (not `HELD`, or its payment changed) and nothing was
    /// written. A release the writer leaves to the sqlx path (a waitlist to offer, an interval
    /// to free: [`fast::release`]) runs alone. Errors: the database's (the batch's when it did not
    /// answer), from releasing alone
    /// after a batch failed (or the writer's, for its batch).
    pub async fn release(&self, db: &Db, r: Release) -> sqlx::Result<bool> {
        if db::backend(db) == Backend::Postgres {
            if crate::inventory::onetrip::release(db, &r).await? {
                return Ok(true);
            }
            return alone(db, &r).await;
        }
        if let Some(w) = &self.writer {
            return match fast::release(w, r.clone()).await? {
                Fast::Done(released) => Ok(released),
                Fast::Other => alone(db, &r).await,
            };
        }
        match self.batches.submit(db, r.clone()).await? {
            Some(released) => Ok(released),
            None => alone(db, &r).await,
        }
    }
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

/// Fans' releases of their own plain seat holds on PostgreSQL, many in one statement
/// ([`onetrip::release_own_many`]); each answer is whether that hold was released.
#[derive(Debug)]
pub struct OwnBatch;

impl Work for OwnBatch {
    type Item = OwnRelease;
    type Answer = bool;
    const METRIC: &'static str = "bc_own_release_batch_size";
    const MAX: usize = MAX_BATCH;
    fn apply<'a>(
        db: &'a Db,
        batch: &'a [&'a OwnRelease],
    ) -> BoxFuture<'a, sqlx::Result<Vec<bool>>> {
        Box::pin(onetrip::release_own_many(db, batch))
    }
}

/// The group commit of fans' releases of their own plain seat holds on PostgreSQL.
pub type OwnReleases = Group<OwnBatch>;

impl Group<OwnBatch> {
    /// Releases `r` (the fan's own plain seat hold, as its admission says: see
    /// [`onetrip::release_own`]) in a batch with whatever other such releases are waiting, and
    /// returns once it is committed: true when released, false when its guard failed and
    /// nothing was written. When the batch fails (a deadlock or serialization failure among
    /// them), `r` runs alone. Errors: the database's: the batch's when it did not answer (no second
    /// wait alone: a 503 at once), else from running alone.
    pub async fn release(&self, db: &Db, r: OwnRelease) -> sqlx::Result<bool> {
        if let Some(released) = self.submit(db, r.clone()).await? {
            return Ok(released);
        }
        onetrip::release_own(db, &r.release, &r.visitor).await
    }
}
