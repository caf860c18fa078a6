//! The service state handlers and loops share ([`AppState`]): the validated configuration, the
//! database pools, the door's verifier, the gateway client, the clock, and the inventory's
//! in-process parts (rate limiter, seat-map snapshots, hold queues). [`AppState::build`] opens
//! and migrates the database and seeds the shows; it spawns nothing.
//!
//! Layer: above every part it holds (`config`, `db`, `door`, `gateway`, `outbox`, `inventory`);
//! below `payments` and `http`, which take it. Lower layers take the narrower parts they need
//! (a `Db`, a `Tx`, an `Admission`), never the whole state.

use std::sync::Arc;
use std::time::Duration;

use sale_common::SharedClock;

use crate::config::Config;
use crate::door::Verifier;
use crate::gateway::{Gateway, TokenStore};
use crate::inventory::{caps, hotq, inflight, refusals, releases, seatmap};
use crate::outbox::Outbox;
use crate::{db, telemetry};

/// Shared service state: one [`Arc`] around [`Shared`], so a clone is one reference count.
/// Every request clones it several times (each `State` extractor and each middleware given
/// the state); as a struct of some twenty `Arc`s and a `String` it was cloned and dropped field
/// by field, 17–20 % of the service's CPU samples on `/healthz` and `GET /api/me` (`perf`
/// during `loadtest bench`'s door phase).
#[derive(Debug, Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares, field by field.
#[derive(Debug, Clone)]
pub struct Shared {
    /// Validated configuration.
    pub config: Arc<Config>,
    /// The booking database.
    pub db: db::Db,
    /// Admission-token verifier.
    pub verifier: Arc<Verifier>,
    /// The edge gate's verifiers, one per guarded origin's audience (`gate_audiences`).
    pub gates: Arc<std::collections::HashMap<String, Arc<Verifier>>>,
    /// What this process measured for the waiting room's closed loop (`GET /internal/load`).
    pub load: Arc<crate::load::Load>,
    /// This process's random id in its load figures (a new id: the counters restarted).
    pub node_id: String,
    /// Payment gateway client.
    pub gateway: Gateway,
    /// Time source (`config.clock`).
    pub clock: SharedClock,
    /// Per-admission rate limit on hold creation (in this process).
    pub limiter: Arc<caps::RateLimiter>,
    /// Reads that may trail a concurrent write by one commit (seat maps, hold views): extra
    /// SQLite reader connections, or `db` itself ([`db::connect_reads`]).
    pub reads: db::Db,
    /// The pool of the gateway's access token, on PostgreSQL its own
    /// ([`db::connect_tokens`]): a payment never waits for its token behind the rush's holds.
    pub token_db: db::Db,
    /// The thread fans' checkout steps run on, with a pool of its own ([`AppState::on_checkout`]).
    pub checkout_runner: Arc<db::dedicated::Runner>,
    /// The thread fans' hold requests run on, with a pool of its own ([`AppState::on_holds`]).
    pub holds_runner: Arc<db::dedicated::Runner>,
    /// The pool the seat maps poll their change feed with: on PostgreSQL a small pool of its
    /// own, so a poll never queues behind the fans' holds; else `reads`
    /// ([`db::connect_feed`]).
    pub feed: db::Db,
    /// Cached seat maps ([`seatmap`]).
    pub seatmaps: Arc<seatmap::SeatMaps>,
    /// The PostgreSQL outage gate: fast 503s while the database is unreachable
    /// ([`db::outage`]).
    pub outage: Arc<db::outage::Outage>,
    /// The per-show hold queues of the hottest shows ([`hotq`]).
    pub hold_queues: Arc<hotq::HoldQueues>,
    /// Hold requests in flight here, by visitor and `Idempotency-Key` ([`inflight`]).
    pub in_flight: Arc<inflight::InFlight>,
    /// The seats a one-statement hold is running for in this process
    /// ([`crate::inventory::seatgate`]).
    pub seat_gates: Arc<crate::inventory::seatgate::SeatGates>,
    /// Refused keys stored in batches ([`refusals`]).
    pub refusals: Arc<refusals::Refusals>,
    /// Fans' releases applied in batches on SQLite ([`releases`]).
    pub releases: Arc<releases::Releases>,
    /// Fans' releases of their own plain seat holds on PostgreSQL, in batches
    /// ([`releases::OwnReleases`]).
    pub own_releases: Arc<releases::OwnReleases>,
    /// SQLite's writer thread (a SQLite file only): the plain holds, releases and refusals
    /// ([`db::writer`], `inventory::fast`).
    pub writer: Option<Arc<db::writer::Writer>>,
    /// Reads of a SQLite file on the calling thread (the read before a hold, a lost hold's
    /// availability: [`db::local`]).
    pub local_reads: Option<db::local::LocalReads>,
}

impl AppState {
    /// Validates `config`, opens and migrates the database, seeds the shows (idempotent).
    /// Spawns nothing: [`crate::serve`] starts the reconciler and outbox loops.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        config.validate()?;
        telemetry::init();
        let db = db::connect(&config.database_url).await?;
        let reads = db::connect_reads(&config.database_url, &db).await?;
        let feed = db::connect_feed(&config.database_url, &reads).await?;
        let token_db = db::connect_tokens(&config.database_url, &db)?;
        for show in &config.shows {
            db::seed_show(&db, show).await?;
        }
        let door = |audience: &str| {
            Arc::new(Verifier::new(
                Some(config.jwks_url.clone()),
                &config.issuer,
                audience,
                config.leeway_secs,
                Duration::from_secs(config.jwks_refresh_cooldown_secs),
                config.clock.clone(),
            ))
        };
        let verifier = door(&config.audience);
        let gates = config
            .gate_audiences
            .iter()
            .map(|aud| (aud.clone(), door(aud)))
            .collect();
        let tokens = Arc::new(TokenStore::new(
            token_db.clone(),
            config.clock.clone(),
            &config.gateway_url,
            &config.gateway_client_id,
            config.gateway_client_secret.clone(),
        ));
        let gateway = Gateway::new(&config.gateway_url, config.gateway_timeout, tokens);
        let holds_session = db::lock_wait_session(config.hold_lock_wait_ms);
        let checkout_session = db::lock_wait_session(config.checkout_lock_wait_ms);
        let hold_queues = Arc::new(hotq::HoldQueues::new(&config.queued_shows, &holds_session));
        let (writer, local_reads) = match db::single::sqlite_file(&config.database_url) {
            Some(file) if db::is_sqlite_file(&config.database_url) => (
                Some(Arc::new(db::writer::Writer::open(&file, db.clone())?)),
                Some(db::local::LocalReads::new(&file)),
            ),
            _ => (None, None),
        };
        let outage = Arc::new(db::outage::Outage::new(&config.database_url));
        Ok(Self(Arc::new(Shared {
            clock: config.clock.clone(),
            config: Arc::new(config),
            db,
            verifier,
            gates: Arc::new(gates),
            load: Arc::default(),
            node_id: uuid::Uuid::new_v4().to_string(),
            gateway,
            limiter: Arc::new(caps::RateLimiter::default()),
            reads,
            feed,
            token_db,
            checkout_runner: Arc::new(db::dedicated::Runner::with_session(
                "checkout",
                db::PG_CHECKOUT_POOL,
                checkout_session.clone(),
            )),
            holds_runner: Arc::new(db::dedicated::Runner::with_session(
                "holds",
                db::PG_HOLDS_POOL,
                holds_session,
            )),
            seatmaps: Arc::default(),
            outage,
            hold_queues,
            in_flight: Arc::default(),
            seat_gates: Arc::default(),
            refusals: Arc::new(refusals::Refusals::new(writer.clone())),
            releases: Arc::new(releases::Releases::new(writer.clone())),
            own_releases: Arc::new(releases::OwnReleases::with_session(&checkout_session)),
            writer,
            local_reads,
        })))
    }

    /// Runs a fan's checkout step (reading the hold, paying, the gateway's callback and
    /// webhook, cancelling): on PostgreSQL on the checkout's thread
    /// ([`db::dedicated::Runner`]), given this state with the thread's own pool as `db` and
    /// `reads`; else here, given this state. So a step waits between its round trips only
    /// behind other checkout steps, never for a turn behind every hold request of the shared
    /// runtime or for a connection they all hold. `step`'s answer, or a 500 when the step
    /// panicked or the thread is gone.
    pub async fn on_checkout<T, F, Fut>(&self, step: F) -> crate::error::ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(AppState) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = crate::error::ApiResult<T>> + Send + 'static,
    {
        self.on(&self.checkout_runner, "the checkout step", step)
            .await
    }

    /// Runs a fan's hold request (`POST /api/shows/{show}/holds`) as [`AppState::on_checkout`]
    /// runs a checkout step, on the holds' thread with its own pool ([`db::PG_HOLDS_POOL`]
    /// connections). In the seed rehearsal a hold's read before its transaction (one statement
    /// of about 30 µs at the database) took 67 ms on average, more than 100 ms for 22 % of the
    /// holds and 480 ms at the 99th percentile on the shared runtime
    /// (`bc_hold_phase_seconds{phase="preread"}`, r52), behind the 4,000 seat-map and section
    /// reads a second it also runs; here 6.5–18 ms, p99 92–226 ms (r53–r55). A 500 when the
    /// request panicked or the thread is gone.
    pub async fn on_holds<T, F, Fut>(&self, request: F) -> crate::error::ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(AppState) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = crate::error::ApiResult<T>> + Send + 'static,
    {
        self.on(&self.holds_runner, "the hold request", request)
            .await
    }

    /// Runs `work` on `runner` given this state with the runner's pool as `db` and `reads` (on
    /// PostgreSQL; else here, given this state): its answer, or a 500 saying `what` did not
    /// finish when it panicked or the thread is gone.
    async fn on<T, F, Fut>(
        &self,
        runner: &db::dedicated::Runner,
        what: &str,
        work: F,
    ) -> crate::error::ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(AppState) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = crate::error::ApiResult<T>> + Send + 'static,
    {
        let me = self.clone();
        let ran = runner
            .run(&self.db, move |pool| {
                let state = if db::backend(&me.db) == db::Backend::Postgres {
                    AppState(Arc::new(Shared {
                        db: pool.clone(),
                        reads: pool,
                        ..(*me.0).clone()
                    }))
                } else {
                    me
                };
                work(state)
            })
            .await;
        ran.unwrap_or_else(|| Err(anyhow::anyhow!("{what} did not finish").into()))
    }

    /// The outbox worker over this state's database, configuration, gateway and clock.
    pub fn outbox(&self) -> Outbox {
        Outbox::new(
            self.db.clone(),
            self.config.clone(),
            self.gateway.clone(),
            self.clock.clone(),
        )
    }
}
