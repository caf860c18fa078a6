//! The PostgreSQL outage gate: once a request finds the database unreachable (its pool timed
//! out, or its connection was refused, reset or shut down: [`crate::error::DbUnreachable`]),
//! requests that need the database are answered `503` with `Retry-After: 1` at once instead of
//! each waiting out the pool's acquire timeout (5 s; a newcomer review measured 5 s per call
//! with PostgreSQL stopped, and ten seat-map polls answered one after another, 5 to 50 s).
//! README "Store outages": fast 503 with `Retry-After`.
//!
//! While the gate is down one prober task asks the server, over a connection of its own (not
//! the pool, whose waits are what the gate avoids), for `SELECT 1` within [`PROBE_WITHIN`],
//! first after [`COOL_OFF_MIN`] and then at twice the interval up to [`COOL_OFF_MAX`]; its first
//! answer opens the gate again. A pool timeout under load alone trips it too; the probe then
//! answers at once and the gate opens again within [`COOL_OFF_MIN`]: a quarter second of fast
//! 503s, not an outage. The same shape as the waiting room's Redis breaker
//! (`waiting-room/src/store/redis/breaker.rs`), where no request is the probe: a request never
//! waits on a server that may be hung.
//!
//! SQLite has no outage of this kind (the file is in process): the gate is never tripped there.
//!
//! Layer: db.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Connection;

/// First wait before a probe.
pub const COOL_OFF_MIN: Duration = Duration::from_millis(250);
/// Longest wait between probes.
pub const COOL_OFF_MAX: Duration = Duration::from_secs(2);
/// How long a probe may take (connect and `SELECT 1`).
pub const PROBE_WITHIN: Duration = Duration::from_secs(1);
/// Longest a request that needs the database may take on PostgreSQL before it is answered
/// `503` + `Retry-After` and the gate trips: a hung server (frozen, a dead link with no reset)
/// answers nothing, and the pool's connections have no timeout of their own, so a request
/// holding one waited until the server came back (a newcomer review: 60 s). Above the pool's
/// acquire timeout (5 s) plus a gateway call (5 s); what was cut off is rolled back, or
/// committed and found again by its `Idempotency-Key` on the client's retry.
pub const REQUEST_WITHIN: Duration = Duration::from_secs(15);

/// Whether the database is taken as unreachable, and whether a prober runs.
#[derive(Debug)]
pub struct Outage {
    /// The database URL the prober connects to (`None`: SQLite, never tripped).
    url: Option<String>,
    down: AtomicBool,
    /// When the last [`Outage::suspect`] probe began.
    probed_at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// Least time between two [`Outage::suspect`] probes (1 s, not less than [`PROBE_WITHIN`], so
/// two never run at once): reads keep failing for a while after one slow poll, and each probe
/// is a new connection to the server.
pub const SUSPECT_EVERY: Duration = Duration::from_secs(1);
const _: () = assert!(SUSPECT_EVERY.as_millis() >= PROBE_WITHIN.as_millis());

impl Outage {
    /// The gate for the database at `url`; only a PostgreSQL URL can trip.
    pub fn new(url: &str) -> Self {
        metrics::gauge!("bc_db_outage").set(0.0);
        Self {
            url: url.starts_with("postgres").then(|| url.to_owned()),
            down: AtomicBool::new(false),
            probed_at: std::sync::Mutex::new(None),
        }
    }

    /// Something was slow without saying why (a seat-map poll past its limit: the pool kept
    /// trying to connect), so the database is probed once ([`probe`]: a connection of its own
    /// and `SELECT 1` within [`PROBE_WITHIN`]); a failed probe trips the gate. True when it
    /// tripped. At most one probe per [`SUSPECT_EVERY`] (so one at a time): a call within that
    /// time of the last probe, or while the gate is down, does nothing. A newcomer review: with
    /// PostgreSQL stopped and no idle connection in the pool, every seat-map read waited the
    /// poll's 3 s, until a hold request tripped the gate.
    pub async fn suspect(self: std::sync::Arc<Self>) -> bool {
        let Some(url) = self.url.clone() else {
            return false;
        };
        if self.is_down() {
            return false;
        }
        {
            let mut last = self
                .probed_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_some_and(|t| t.elapsed() < SUSPECT_EVERY) {
                return false;
            }
            *last = Some(std::time::Instant::now());
        }
        let answered = probe(&url).await;
        if !answered {
            self.trip();
        }
        !answered
    }

    /// Whether this gate can trip (PostgreSQL).
    pub fn guards(&self) -> bool {
        self.url.is_some()
    }

    /// Whether requests that need the database are refused at once.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// A request found the database unreachable: refuse the next ones at once and start the
    /// prober (one at a time; a no-op while one runs, and on SQLite).
    pub fn trip(self: &std::sync::Arc<Self>) {
        let Some(url) = self.url.clone() else {
            return;
        };
        if self.down.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!("booking database unreachable: answering 503 at once until it answers");
        metrics::gauge!("bc_db_outage").set(1.0);
        metrics::counter!("bc_db_outages_total").increment(1);
        let me = self.clone();
        tokio::spawn(async move {
            let mut wait = COOL_OFF_MIN;
            loop {
                tokio::time::sleep(wait).await;
                if probe(&url).await {
                    break;
                }
                wait = (wait * 2).min(COOL_OFF_MAX);
            }
            me.down.store(false, Ordering::Release);
            metrics::gauge!("bc_db_outage").set(0.0);
            tracing::info!("booking database answers again");
        });
    }
}

/// One probe: a connection of its own and `SELECT 1`, within [`PROBE_WITHIN`].
async fn probe(url: &str) -> bool {
    // As `db::connect` does before any connection (idempotent).
    sqlx::any::install_default_drivers();
    let attempt = async {
        let mut c = sqlx::AnyConnection::connect(url).await?;
        sqlx::query("SELECT 1").execute(&mut c).await?;
        c.close().await
    };
    matches!(
        tokio::time::timeout(PROBE_WITHIN, attempt).await,
        Ok(Ok(()))
    )
}
