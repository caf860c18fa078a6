//! Failover that loses nothing (issue 11 item 5). Redis replicates asynchronously: the test pauses
//! the replica of the event's master (SIGSTOP) and cuts its link, shows the master running ahead
//! of it, lets fans
//! join, then kills the master (SIGKILL) so the stale replica takes over. Without the guard
//! (answer as soon as the master applied the join) fans were told places that are gone, and the
//! new master hands their numbers out again. With the guard (`WAIT` for one replica, else 503)
//! every place a fan was told survives and no number is held twice.

use sale_common::testsupport::redis_cluster::cli;
use sale_common::testsupport::RedisCluster;
use std::time::{Duration, Instant};
use waiting_room::admitter::open_event;
use waiting_room::domain::{EventId, EventMeta, EventState, VisitorId};
use waiting_room::store::redis::{Durability, RedisStore};
use waiting_room::store::{QueueStore, StoreError};

const NOW_MS: i64 = 1_764_500_000_000;
const REJOIN: u64 = 120_000;

async fn store(cluster: &RedisCluster, d: Durability) -> RedisStore {
    RedisStore::connect_cluster(&cluster.urls(), Duration::from_secs(2))
        .await
        .expect("connect")
        .with_durability(d)
}

/// Joins `v`, retrying what fails while the cluster changes, until `limit`.
async fn join_until(s: &RedisStore, e: &EventId, v: &VisitorId, limit: Duration) -> u64 {
    let start = Instant::now();
    loop {
        match s.join(e, v, NOW_MS, REJOIN).await {
            Ok(j) => return j.queue_number.expect("open: numbered"),
            Err(StoreError::Unavailable(_)) if start.elapsed() < limit => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(err) => panic!("join: {err:?}"),
        }
    }
}

async fn number_of(s: &RedisStore, e: &EventId, v: &VisitorId) -> Option<u64> {
    let start = Instant::now();
    loop {
        match s.position(e, v).await {
            Ok(p) => return p.queue_number,
            Err(_) if start.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(err) => panic!("position: {err:?}"),
        }
    }
}

/// `master_repl_offset` of a master: the end of its replication stream.
fn master_offset(master_port: u16) -> u64 {
    cli(master_port, &["INFO", "replication"])
        .lines()
        .find_map(|l| l.strip_prefix("master_repl_offset:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("master_repl_offset")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_after_writes_the_replica_never_received_loses_no_place() {
    let mut cluster = RedisCluster::start();
    let guard = Durability {
        min_replicas: 1,
        timeout_ms: 300,
    };
    let guarded = store(&cluster, guard).await;
    let unguarded = store(&cluster, Durability::OFF).await;
    let e = EventId::parse("failover").expect("id");
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
    guarded.create_event(&meta).await.expect("create");
    // A replica may still be in its first sync right after the cluster starts (the WAIT then
    // times out on a busy machine): opening is retried until the deadline, as joins are.
    let start = Instant::now();
    while let Err(err) = open_event(&guarded, &e).await {
        assert!(
            matches!(err, StoreError::Unavailable(_)) && start.elapsed() < Duration::from_secs(30),
            "open: {err:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let limit = Duration::from_secs(10);
    let mut told = Vec::new();
    for _ in 0..20 {
        let v = VisitorId::random();
        let n = join_until(&guarded, &e, &v, limit).await;
        told.push((v, n));
    }

    let master = cluster.master_of(&format!("wr:{{{e}}}:meta"));
    let replica = cluster.replica_of(&master.id);
    // The replica stops reading and the master drops its link (bytes already in the replica's
    // socket buffer would still arrive after SIGCONT): from now on nothing reaches it.
    cluster.signal(replica.port, "STOP");
    cli(master.port, &["CLIENT", "KILL", "TYPE", "replica"]);
    let replica_has_at_most = master_offset(master.port);
    // Without the guard the master answers at once: these fans are told places…
    let mut unguarded_told = Vec::new();
    for _ in 0..10 {
        let v = VisitorId::random();
        let j = unguarded.join(&e, &v, NOW_MS, REJOIN).await.expect("join");
        unguarded_told.push((v, j.queue_number.expect("numbered")));
    }
    // …with the guard the same joins are refused: nobody is told a place that may vanish.
    for _ in 0..5 {
        let r = guarded.join(&e, &VisitorId::random(), NOW_MS, REJOIN).await;
        assert!(
            matches!(r, Err(StoreError::Unavailable(_))),
            "an unreplicated join must not be answered: {r:?}"
        );
    }
    let m = master_offset(master.port);
    assert!(
        m > replica_has_at_most,
        "the replica lags the master (master {m}, replica at most {replica_has_at_most})"
    );

    // The master dies before the replica caught up; the stale replica takes over.
    cluster.signal(master.port, "KILL");
    cluster.signal(replica.port, "CONT");
    let start = Instant::now();
    while cluster.role(replica.port) != "master" {
        assert!(start.elapsed() < Duration::from_secs(60), "no failover");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The old master comes back as the new master's replica (what `infra/cluster/ctl
    // failover-redis --kill` does): until then the guard refuses joins on this shard.
    cluster.restart(master.port);
    let start = Instant::now();
    while !cli(replica.port, &["INFO", "replication"]).contains("connected_slaves:1") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no replica again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // With the guard: every place a fan was told is still theirs.
    for (v, n) in &told {
        assert_eq!(
            number_of(&guarded, &e, v).await,
            Some(*n),
            "a confirmed place survives"
        );
    }
    // Without the guard: told places are gone (the race this guards against)…
    let mut lost = 0;
    for (v, n) in &unguarded_told {
        if number_of(&guarded, &e, v).await != Some(*n) {
            lost += 1;
        }
    }
    assert!(lost > 0, "without the guard a failover loses told places");
    // …and the new master hands those numbers out again, while no confirmed number repeats.
    let mut again = Vec::new();
    for _ in 0..10 {
        again.push(join_until(&guarded, &e, &VisitorId::random(), Duration::from_secs(30)).await);
    }
    assert!(
        again.iter().all(|n| !told.iter().any(|(_, t)| t == n)),
        "no confirmed number is held twice: {again:?}"
    );
    assert!(
        again
            .iter()
            .any(|n| unguarded_told.iter().any(|(_, t)| t == n)),
        "without the guard, a number told to a fan goes to another fan: {again:?}"
    );
}
