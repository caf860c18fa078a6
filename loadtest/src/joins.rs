//! `loadtest joins`: join throughput of the waiting room's Redis store on one Redis server and
//! on a local Redis Cluster (3 masters + 3 replicas), and the cost of the failover guarantee
//! (issue 11 item 5: a join answered only once a replica has it, `WAIT` group-committed), all in
//! one run so the ratios compare like with like. Calls the store directly (no HTTP): this
//! measures the store, the part that changes between the three setups.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sale_common::testsupport::{RedisCluster, RedisServer};
use waiting_room::admitter::open_event;
use waiting_room::domain::{EventId, EventMeta, EventState, VisitorId};
use waiting_room::store::redis::{Durability, RedisStore};
use waiting_room::store::QueueStore;

/// Arguments of `loadtest joins`.
#[derive(Debug, clap::Args)]
pub struct JoinsArgs {
    /// Joins per setup.
    #[arg(long, default_value_t = 20_000)]
    joins: u64,
    /// Joins in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: u64,
}

async fn measure(store: RedisStore, label: &str, args: &JoinsArgs) -> anyhow::Result<f64> {
    let e = EventId::parse(&format!("bench-{}", rand::random::<u32>())).expect("id");
    let meta = EventMeta {
        id: e.clone(),
        state: EventState::Prequeue,
        opens_at: 0,
        admit_rate: 10.0,
        max_active: 10,
        admission_ttl_secs: 600,
        booking_url: "http://127.0.0.1:9".into(),
        pow_bits: 0,
        stock_wait: 0,
        time_zone: "UTC".into(),
    };
    store.create_event(&meta).await?;
    open_event(&store, &e).await?;
    let store = Arc::new(store);
    let per_task = args.joins / args.concurrency.max(1);
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (s, e) = (store.clone(), e.clone());
            tokio::spawn(async move {
                let mut failed = 0u64;
                for _ in 0..per_task {
                    if s.join(&e, &VisitorId::random(), 0, 120_000).await.is_err() {
                        failed += 1;
                    }
                }
                failed
            })
        })
        .collect();
    let mut failed = 0;
    for t in tasks {
        failed += t.await?;
    }
    let secs = started.elapsed().as_secs_f64();
    let done = per_task * args.concurrency;
    let rate = (done - failed) as f64 / secs;
    println!(
        "{label:<34} {rate:>10.0} joins/s  ({done} joins, {failed} failed, {secs:.2} s, {} in flight)",
        args.concurrency
    );
    Ok(rate)
}

/// Runs the three setups and prints joins/s and the ratios (always `Ok(true)`: a measurement,
/// not a check).
pub async fn run(args: JoinsArgs) -> anyhow::Result<bool> {
    let t = Duration::from_secs(2);
    let single = RedisServer::start();
    let cluster = tokio::task::spawn_blocking(RedisCluster::start).await?;
    let one = measure(
        RedisStore::connect(&single.url(), t).await?,
        "one Redis",
        &args,
    )
    .await?;
    let off = measure(
        RedisStore::connect_cluster(&cluster.urls(), t).await?,
        "Redis Cluster",
        &args,
    )
    .await?;
    let guard = Durability {
        min_replicas: 1,
        timeout_ms: 500,
    };
    let on = measure(
        RedisStore::connect_cluster(&cluster.urls(), t)
            .await?
            .with_durability(guard),
        "Redis Cluster + WAIT 1 (guarded)",
        &args,
    )
    .await?;
    println!("ratio cluster / one Redis:         {:.2}", off / one);
    println!("ratio guarded / unguarded cluster: {:.2}", on / off);
    Ok(true)
}
