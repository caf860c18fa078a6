//! One sale in one process: checks every service's `Config` first (nothing starts when one value
//! is refused), binds three listeners (so every service knows the others' URLs), builds each
//! service's `Config`, and runs each `serve` until [`Stack::shutdown`].

use std::net::SocketAddr;
use std::path::PathBuf;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The event created at start (the waiting room's event and the booking core's show share `id`).
#[derive(Debug, Clone)]
pub struct DemoEvent {
    /// Event id, also the show id.
    pub id: String,
    /// Seconds from start until the sale opens.
    pub opens_in_secs: u64,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Live admitted sessions at most.
    pub max_active: u64,
    /// Admission-token lifetime, seconds.
    pub admission_ttl_secs: u64,
}

/// Everything the launcher may set. [`StackOptions::local_random_ports`] gives the embedded
/// defaults on port 0 (tests and `loadtest --spawn`).
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// Waiting room listen address.
    pub waiting_room_addr: SocketAddr,
    /// Booking core listen address.
    pub booking_addr: SocketAddr,
    /// Gateway simulator listen address.
    pub gateway_addr: SocketAddr,
    /// `Some(url)`: the queue lives in Redis; `None`: in memory (embedded default).
    pub redis_url: Option<String>,
    /// Booking database (SQLite by default). Empty: a fresh SQLite file in a temp dir.
    pub database_url: String,
    /// Folder of the fan pages.
    pub static_dir: PathBuf,
    /// Admin bearer token of both services.
    pub admin_token: String,
    /// The event/show created at start.
    pub event: DemoEvent,
    /// Seats in the show's venue (ignored with `venue`).
    pub seats: u32,
    /// Places in a general-admission pool `FLOOR` (6,500 cents) added to the show's venue;
    /// 0: none (a venue file's own `FLOOR`, if any, is kept as it is).
    pub pool_places: u32,
    /// A JSON venue file (booking-core/README.md) for the show instead of the rectangular
    /// venue of `seats` seats.
    pub venue: Option<PathBuf>,
    /// Hold lifetime, seconds (seed 000: 8 minutes against a 7-minute payment session).
    pub hold_ttl_secs: u64,
    /// Payment-session lifetime, seconds; must be shorter than the hold.
    pub payment_session_secs: u64,
    /// Joins per second per client IP (tower-governor), and the burst.
    pub join_rate_per_sec: u32,
    /// Join burst per client IP.
    pub join_burst: u32,
    /// Heartbeats and admission claims per second per client IP, and the burst.
    pub fan_rate_per_sec: u32,
    /// Heartbeat/claim burst per client IP.
    pub fan_burst: u32,
    /// Directory the waiting room publishes status documents to (`{event}.json`, the CDN
    /// origin's files); `None`: a fresh temporary directory, removed on shutdown.
    pub status_dir: Option<PathBuf>,
    /// `Some(bucket)`: also publish status documents to S3 (endpoint, region and credentials
    /// from the standard AWS environment, e.g. `AWS_ENDPOINT_URL` for a local moto_server).
    pub s3_bucket: Option<String>,
    /// Key prefix of the S3 status objects (`{prefix}{event}.json`).
    pub s3_prefix: String,
    /// Hold creations per minute per admission at the booking core (its abuse limit; the
    /// load test and the benchmark lift it).
    pub hold_rate_per_min: u32,
    /// The show's holds go through the booking core's per-show hold queue from the start (seed
    /// 002's answer for the hottest shows; `booking_core::inventory::hotq`).
    pub hold_queue: bool,
    /// Audiences of origins guarded by the edge gate (`infra/gate-start`): added to every
    /// admission token's `aud` by the waiting room, verified at `/gate/{audience}/…` by the
    /// booking core.
    pub gate_audiences: Vec<String>,
    /// The event's closed loop (`events[0].closed_loop`; its figures read from this stack's
    /// booking core unless `load_urls` says otherwise).
    pub closed_loop: Option<waiting_room::closedloop::ClosedLoop>,
    /// How often the sale report samples the event, **seconds** (the waiting room's
    /// `report_sample_secs`, default 10).
    pub report_sample_secs: u64,
    /// What the waiting page says the fan waits for (default: nothing but the opening).
    pub about: EventAbout,
    /// Worker threads of each service's own tokio runtime (one runtime per service, as each
    /// would have in its own process); 0 (the default): the services run on the caller's
    /// runtime. A load generator in the same process (`loadtest bench`,
    /// `loadtest rush --spawn`) gives them their own threads, as their own processes would
    /// have: on one runtime every service task waits in the same run queues as the
    /// generator's thousands of fan tasks, and the figures measure that queue.
    pub service_threads: usize,
    /// Directory the waiting room's keys are kept in across restarts: the Ed25519 signing keys
    /// under `signing/` (`waiting_room::keys` layout, so `keys generate`/`rotate` work on it)
    /// and the join-token HMAC key in `join-hmac.key`, each created (mode 0600, the directory
    /// 0700) on the first start. With a queue that survives a restart (Redis) the fans' join
    /// tokens and admission tokens from before it stay valid. `None`: fresh keys every start.
    pub keys_dir: Option<PathBuf>,
}

/// The waiting room's display fields of the event (`events[0]`: `name`, `venue`, `starts_at`,
/// `time_zone`), shown on the waiting page.
#[derive(Debug, Clone, Default)]
pub struct EventAbout {
    /// The event's display name.
    pub name: Option<String>,
    /// The venue's name.
    pub venue: Option<String>,
    /// When the event takes place, epoch seconds.
    pub starts_at: Option<i64>,
    /// IANA time zone of the event (`None`: UTC).
    pub time_zone: Option<String>,
}

impl StackOptions {
    /// Embedded defaults on random loopback ports, a random admin token, and a demo event that
    /// opens one minute after start.
    pub fn local_random_ports() -> Self {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("loopback address");
        Self {
            waiting_room_addr: any,
            booking_addr: any,
            gateway_addr: any,
            redis_url: None,
            database_url: String::new(),
            static_dir: default_static_dir(),
            admin_token: format!("{:032x}", rand::random::<u128>()),
            event: DemoEvent {
                id: "demo".into(),
                opens_in_secs: 60,
                admit_rate: 5.0,
                max_active: 100,
                admission_ttl_secs: 600,
            },
            seats: 600,
            pool_places: 0,
            venue: None,
            hold_ttl_secs: 480,
            payment_session_secs: 420,
            join_rate_per_sec: 5,
            join_burst: 20,
            fan_rate_per_sec: 5,
            fan_burst: 20,
            status_dir: None,
            s3_bucket: None,
            s3_prefix: "status/".into(),
            hold_rate_per_min: 10,
            hold_queue: false,
            gate_audiences: Vec::new(),
            closed_loop: None,
            report_sample_secs: 10,
            about: EventAbout::default(),
            service_threads: 0,
            keys_dir: None,
        }
    }
}

/// `static/` next to this crate's manifest when it exists (a checkout), else `./static`.
pub fn default_static_dir() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("static");
    if built.is_dir() {
        built
    } else {
        PathBuf::from("static")
    }
}

/// A running sale.
#[derive(Debug)]
pub struct Stack {
    /// `http://127.0.0.1:PORT` of the waiting room.
    pub waiting_room_url: String,
    /// `http://127.0.0.1:PORT` of the booking core.
    pub booking_url: String,
    /// `http://127.0.0.1:PORT` of the gateway simulator.
    pub gateway_url: String,
    /// Admin bearer token of both services.
    pub admin_token: String,
    /// Where the waiting room writes the status documents.
    pub status_dir: PathBuf,
    /// Where the booking core writes each email as `{kind}-{id}.eml` (its `mail_dir`; the
    /// default is shared by every run on the machine).
    pub mail_dir: PathBuf,
    /// A file (mode 0600, removed on shutdown) holding the key of the gateway's webhook
    /// signatures (HMAC-SHA256, API.md), for integrators who sign test webhooks; the key is
    /// random per run and never printed.
    pub webhook_secret_file: PathBuf,
    /// A file (mode 0600, removed on shutdown) holding the admin token, so that a random one
    /// need not be printed.
    pub admin_token_file: PathBuf,
    /// A file (mode 0600, removed on shutdown) holding the waiting room's service token (its
    /// `/internal/…` API, which the booking core calls), random per run and never printed:
    /// for trying that API against a local sale (newcomer review).
    pub service_token_file: PathBuf,
    stops: Vec<oneshot::Sender<()>>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
    _tmp: Vec<tempfile::TempDir>,
    // Last: dropped after the tasks' handles.
    _runtime: ServiceRuntime,
}

/// The services' own runtimes ([`StackOptions::service_threads`]), if any: one per service,
/// named after it (`gateway-sim`, `waiting-room`, `booking-core`), each with that many worker
/// threads, as each service's own process would have. One runtime shared by the three (until
/// the seventeenth session) gave all of them together the threads one process has: under a
/// rush on a 2-CPU machine, the waiting room's joins and polls and the booking core's seat-map
/// reads queued behind each other on two threads that the database's processes and the fans
/// outnumbered. Shut down in the background when the stack goes: a runtime may not be dropped
/// inside another one's task.
#[derive(Debug, Default)]
struct ServiceRuntime(Vec<tokio::runtime::Runtime>);

impl Drop for ServiceRuntime {
    fn drop(&mut self) {
        for rt in self.0.drain(..) {
            rt.shutdown_background();
        }
    }
}

/// The services of a stack, in the order of [`ServiceRuntime`]'s runtimes.
const SERVICES: [&str; 3] = ["gateway-sim", "waiting-room", "booking-core"];

impl ServiceRuntime {
    fn new(threads: usize) -> anyhow::Result<Self> {
        if threads == 0 {
            return Ok(Self(Vec::new()));
        }
        let runtimes = SERVICES
            .iter()
            .map(|name| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name(*name)
                    .enable_all()
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self(runtimes))
    }

    /// Runs `serve(listener)` on the runtime of `service` (one of [`SERVICES`]; the listener
    /// moved to it first), or on the caller's.
    fn serve<F, Fut>(
        &self,
        service: &str,
        l: TcpListener,
        serve: F,
    ) -> anyhow::Result<JoinHandle<anyhow::Result<()>>>
    where
        F: FnOnce(TcpListener) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let at = SERVICES.iter().position(|s| *s == service);
        let Some(rt) = at.and_then(|i| self.0.get(i)) else {
            return Ok(tokio::spawn(serve(l)));
        };
        let l = l.into_std()?;
        Ok(rt.spawn(async move { serve(TcpListener::from_std(l)?).await }))
    }
}

impl Stack {
    /// Stops the waiting room alone, as its SIGTERM would (the booking core and the gateway
    /// keep running), and waits for it to finish: for tests of what works while it is down.
    ///
    /// # Errors
    /// The waiting room's own error, if it stopped with one.
    pub async fn stop_waiting_room(&mut self) -> anyhow::Result<()> {
        // The slots keep a stopped sender and a finished task, so `shutdown` stays the same.
        let (done, _) = oneshot::channel();
        let stop = std::mem::replace(&mut self.stops[WAITING_ROOM], done);
        let _ = stop.send(());
        let task = std::mem::replace(
            &mut self.tasks[WAITING_ROOM],
            tokio::spawn(async { Ok(()) }),
        );
        task.await?
    }

    /// Stops the three services and waits for them to finish: the waiting room and the booking
    /// core first, together (each through its lame duck and drain, so each answers as long as
    /// the other; one after the other, the first refused fans while the second still admitted
    /// or served them, newcomer review), the gateway last, once nothing can call it any more.
    /// Stopped with them, a pay in the booking core's lame duck found the gateway gone: `502
    /// gateway-unavailable` for 7 of ~30 pays in that second (newcomer review). The booking
    /// core's outbox logs the session ends it cannot deliver to the stopping waiting room at
    /// info level (`Outbox::stopping`); they stay queued for the next process.
    pub async fn shutdown(self) {
        let (mut stops, mut tasks) = (self.stops, self.tasks);
        let (gw_stop, gw_task) = (stops.remove(GATEWAY), tasks.remove(GATEWAY));
        for s in stops {
            let _ = s.send(());
        }
        for t in tasks {
            ended(t.await);
        }
        let _ = gw_stop.send(());
        ended(gw_task.await);
    }
}

/// Slots of [`Stack`]'s stops and tasks, in the order [`start`] starts the services (the
/// booking core is the last).
const GATEWAY: usize = 0;
/// See [`GATEWAY`].
const WAITING_ROOM: usize = 1;

/// Logs how a service task ended, if not cleanly.
fn ended(r: Result<anyhow::Result<()>, tokio::task::JoinError>) {
    match r {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::error!(error = %e, "service ended with an error"),
        Err(e) => tracing::error!(error = %e, "service task panicked"),
    }
}

/// Binds `service`'s listener on `addr`; the error names the service, the address and the
/// `up` flag that sets it (an address in use is the usual cause: another `up`, or a server of
/// its own on the default port).
async fn bind(addr: SocketAddr, service: &str, flag: &str) -> anyhow::Result<TcpListener> {
    use anyhow::Context;
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {service} on {addr} (choose another with {flag})"))
}

fn url_of(l: &TcpListener) -> anyhow::Result<String> {
    Ok(format!("http://{}", l.local_addr()?))
}

fn stopper() -> (
    oneshot::Sender<()>,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let (tx, rx) = oneshot::channel::<()>();
    (tx, async move {
        let _ = rx.await;
    })
}

/// Checks every service's configuration (with the requested addresses standing in for the
/// bound ones, so nothing is bound when a value is refused), binds the three listeners, builds
/// the configs and starts the services.
pub async fn start(opts: StackOptions) -> anyhow::Result<Stack> {
    let gateway_secret = format!("{:032x}", rand::random::<u128>());
    let service_token = format!("{:032x}", rand::random::<u128>());
    let keys = match &opts.keys_dir {
        Some(dir) => configs::persisted_keys(dir)?,
        None => configs::Keys::fresh(),
    };
    let planned = |a: SocketAddr| format!("http://{a}");
    let (wr_plan, bc_plan, gw_plan) = (
        planned(opts.waiting_room_addr),
        planned(opts.booking_addr),
        planned(opts.gateway_addr),
    );
    configs::checked(
        &opts,
        &Wiring {
            wr_url: &wr_plan,
            bc_url: &bc_plan,
            gw_url: &gw_plan,
            database_url: if opts.database_url.is_empty() {
                "sqlite::memory:"
            } else {
                &opts.database_url
            },
            gateway_secret: &gateway_secret,
            service_token: &service_token,
            status_dir: opts
                .status_dir
                .as_deref()
                .unwrap_or(std::path::Path::new(".")),
            keys: &keys,
        },
    )?;
    let wr_l = bind(opts.waiting_room_addr, "the waiting room", "--waiting-room").await?;
    let bc_l = bind(opts.booking_addr, "the booking core", "--booking").await?;
    let gw_l = bind(opts.gateway_addr, "the gateway simulator", "--gateway").await?;
    let (wr_url, bc_url, gw_url) = (url_of(&wr_l)?, url_of(&bc_l)?, url_of(&gw_l)?);
    let mut tmp = Vec::new();
    let database_url = if opts.database_url.is_empty() {
        let dir = tempfile::tempdir()?;
        let url = format!(
            "sqlite://{}?mode=rwc",
            dir.path().join("booking.db").display()
        );
        tmp.push(dir);
        url
    } else {
        opts.database_url.clone()
    };
    let status_dir = match &opts.status_dir {
        Some(d) => d.clone(),
        None => {
            let dir = tempfile::tempdir()?;
            let path = dir.path().to_path_buf();
            tmp.push(dir);
            path
        }
    };
    let secrets = tempfile::tempdir()?;
    let webhook_secret_file =
        configs::write_secret(secrets.path(), "webhook-secret", &gateway_secret)?;
    let admin_token_file = configs::write_secret(secrets.path(), "admin-token", &opts.admin_token)?;
    let service_token_file =
        configs::write_secret(secrets.path(), "service-token", &service_token)?;
    tmp.push(secrets);
    let wiring = Wiring {
        wr_url: &wr_url,
        bc_url: &bc_url,
        gw_url: &gw_url,
        database_url: &database_url,
        gateway_secret: &gateway_secret,
        service_token: &service_token,
        status_dir: &status_dir,
        keys: &keys,
    };
    let (gw_cfg, wr_cfg, bc_cfg) = configs::checked(&opts, &wiring)?;
    let runtime = ServiceRuntime::new(opts.service_threads)?;
    let mut stops = Vec::new();
    let mut tasks = Vec::new();
    let (tx, stop) = stopper();
    stops.push(tx);
    tasks.push(runtime.serve("gateway-sim", gw_l, move |l| {
        gateway_sim::serve(l, gw_cfg, stop)
    })?);
    let (tx, stop) = stopper();
    stops.push(tx);
    tasks.push(runtime.serve("waiting-room", wr_l, move |l| {
        waiting_room::serve(l, wr_cfg, stop)
    })?);
    let (tx, stop) = stopper();
    stops.push(tx);
    let mail_dir = bc_cfg.mail_dir.clone();
    tasks.push(runtime.serve("booking-core", bc_l, move |l| {
        booking_core::serve(l, bc_cfg, stop)
    })?);
    let mut stack = Stack {
        waiting_room_url: wr_url,
        booking_url: bc_url,
        gateway_url: gw_url,
        admin_token: opts.admin_token.clone(),
        status_dir: status_dir.clone(),
        mail_dir,
        webhook_secret_file,
        admin_token_file,
        service_token_file,
        stops,
        tasks,
        _tmp: tmp,
        _runtime: runtime,
    };
    wait_healthy(&mut stack).await?;
    Ok(stack)
}

/// URLs and secrets that tie the three services together.
#[derive(Debug)]
pub(crate) struct Wiring<'a> {
    pub wr_url: &'a str,
    pub bc_url: &'a str,
    pub gw_url: &'a str,
    pub database_url: &'a str,
    pub gateway_secret: &'a str,
    /// Random bearer token of the waiting room's internal API, given to both sides.
    pub service_token: &'a str,
    /// The waiting room's status-document directory.
    pub status_dir: &'a std::path::Path,
    /// The waiting room's signing and join-token keys.
    pub keys: &'a configs::Keys,
}

/// Waits until each service answers `/healthz`; a service that stops while starting (its
/// database is in use by another process, unreachable, …) fails start-up with its own error,
/// not a timeout.
async fn wait_healthy(s: &mut Stack) -> anyhow::Result<()> {
    let urls = [
        s.waiting_room_url.clone(),
        s.booking_url.clone(),
        s.gateway_url.clone(),
    ];
    for url in &urls {
        let mut ok = false;
        for _ in 0..100 {
            // The tasks were started gateway, waiting room, booking core.
            let names = [
                "the gateway simulator",
                "the waiting room",
                "the booking core",
            ];
            for (i, t) in s.tasks.iter_mut().enumerate() {
                if t.is_finished() {
                    let why = match t.await {
                        Ok(Ok(())) => anyhow::anyhow!("it stopped"),
                        Ok(Err(e)) => e,
                        Err(e) => anyhow::anyhow!("it panicked: {e}"),
                    };
                    let name = names.get(i).copied().unwrap_or("a service");
                    return Err(why.context(format!("{name} could not start")));
                }
            }
            if let Ok(mut stream) =
                tokio::net::TcpStream::connect(url.trim_start_matches("http://")).await
            {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let _ = stream.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await;
                let mut buf = [0u8; 12];
                if stream.read_exact(&mut buf).await.is_ok() && buf.ends_with(b"200") {
                    ok = true;
                    break;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        anyhow::ensure!(ok, "{url}/healthz did not answer 200 within 5 s");
    }
    Ok(())
}

mod configs;
