//! The hot-show figures with and without the booking core's per-show hold queue (issue 7 "The
//! hottest shows", seed 002): the same hold workload runs twice — row locks taken by concurrent
//! transactions, then the show switched to its queue (`POST /admin/shows/{show}/hold-queue`) —
//! on separate admission tokens and a separate hot block, so the first run's live holds do not
//! block the second. On PostgreSQL, lock waits are sampled every 20 ms during each run
//! (`pg_locks` rows not granted): the mean and peak waiting lock requests are in the note.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::phases::Ctx;

/// Lock waits seen while a run went on: samples, sum and peak of ungranted `pg_locks` rows.
#[derive(Debug, Default)]
pub struct LockWaits {
    samples: AtomicU64,
    sum: AtomicU64,
    peak: AtomicU64,
    stop: AtomicBool,
}

impl LockWaits {
    /// "lock waits: mean X, peak Y waiting (N samples)", or why none were taken.
    pub fn describe(&self) -> String {
        let n = self.samples.load(Ordering::Relaxed);
        if n == 0 {
            return "lock waits: not sampled (SQLite has one writer: it queues, never waits on a row lock)"
                .into();
        }
        format!(
            "PostgreSQL lock waits (pg_locks not granted, every 20 ms): mean {:.2}, peak {} ({n} samples)",
            self.sum.load(Ordering::Relaxed) as f64 / n as f64,
            self.peak.load(Ordering::Relaxed)
        )
    }
}

/// Starts sampling `pg_locks` on `database` (PostgreSQL only) until [`stop`] is called.
pub async fn sample(database: Option<&str>) -> Arc<LockWaits> {
    let w = Arc::new(LockWaits::default());
    let Some(url) = database.filter(|u| u.starts_with("postgres")) else {
        return w;
    };
    let Ok(pool) = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
    else {
        return w;
    };
    let w2 = w.clone();
    tokio::spawn(async move {
        while !w2.stop.load(Ordering::Relaxed) {
            let n: Result<i64, _> =
                sqlx::query_scalar("SELECT COUNT(*) FROM pg_locks WHERE NOT granted")
                    .fetch_one(&pool)
                    .await;
            if let Ok(n) = n {
                let n = u64::try_from(n).unwrap_or(0);
                w2.samples.fetch_add(1, Ordering::Relaxed);
                w2.sum.fetch_add(n, Ordering::Relaxed);
                w2.peak.fetch_max(n, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    w
}

/// Stops a sampler.
pub fn stop(w: &LockWaits) {
    w.stop.store(true, Ordering::Relaxed);
}

/// Switches the bench show's hold queue on or off on the booking core.
pub async fn switch(ctx: &Ctx, on: bool) -> anyhow::Result<()> {
    let r = ctx
        .client()
        .post(format!(
            "{}/admin/shows/{}/hold-queue",
            ctx.booking(),
            ctx.show()
        ))
        .bearer_auth(ctx.admin_token())
        .json(&serde_json::json!({ "enabled": on }))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "hold-queue switch: {}", r.status());
    Ok(())
}
