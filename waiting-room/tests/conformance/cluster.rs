//! The store on a Redis Cluster that changes under it (issue 11 item 2): the event's slot moves
//! to another master mid-run (`MOVED`/`ASK` followed), and the event's master fails over in the
//! middle of the suite. Each test starts its own cluster (the shared one stays still for the
//! conformance rules). During a change a call may fail (`Unavailable`, a 503 to a fan); an
//! answer that arrives must be right.

use super::{
    claim_is_idempotent, cluster_store, create, cursor_never_passes_max_active, ev, join,
    open_with, rejoin_keeps_place, Store, EVENT, NOW, REJOIN, SILENCE, TERMS,
};
use sale_common::testsupport::redis_cluster::{cli, ClusterNode};
use sale_common::testsupport::RedisCluster;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use waiting_room::domain::{ClaimOutcome, EventId, Place, VisitorId};
use waiting_room::store::{StoreError, StoreResult};

/// `Some` for an answer, `None` for a refusal the fan would see as 503; anything else fails.
fn answered<T: std::fmt::Debug>(r: StoreResult<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(StoreError::Unavailable(_)) => None,
        Err(e) => panic!("a wrong answer during the change: {e:?}"),
    }
}

fn meta_key(e: &EventId) -> String {
    format!("wr:{{{e}}}:meta")
}

fn other_master(cluster: &RedisCluster, not: &ClusterNode) -> ClusterNode {
    cluster
        .cluster_nodes()
        .into_iter()
        .find(|n| n.master && n.id != not.id && !n.slots.is_empty())
        .expect("another master")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_moved_after_slot_migration() {
    let cluster = RedisCluster::start();
    let s: Store = Arc::new(cluster_store(&cluster.urls()).await);
    let event = EventId::parse("moving").expect("id");
    EVENT
        .scope(event.clone(), async {
            // An opening caught by a reshard: 150 pre-queued fans, 120 numbered (buckets 0 and 1).
            create(&s, 1000).await;
            let fans: Vec<VisitorId> = (0..150).map(|_| VisitorId::random()).collect();
            for f in &fans {
                assert_eq!(join(&s, f).await, None);
            }
            assert_eq!(s.begin_open(&ev()).await.expect("begin"), 150);
            assert_eq!(s.open_chunk(&ev(), 120).await.expect("chunk"), 30);
            let slot = cluster.slot_of(&meta_key(&event));
            let from = cluster.master_of(&meta_key(&event));
            let to = other_master(&cluster, &from);
            let moved_before = cluster.error_count(from.port, "MOVED");
            let ask_before = cluster.error_count(from.port, "ASK");

            cluster.begin_slot_move(slot, &from, &to);
            // Half-way: the number buckets moved, the rest not yet. Declared, the bucket makes the
            // chunk wait (TRYAGAIN, a 503) until the move ends. A script that wrote a bucket it had
            // not declared would fail there after numbering a fan (Redis has no rollback) and the
            // next chunk would hand the same number out again.
            let buckets = cluster.move_slot_keys_where(slot, &from, &to, |k| k.contains(":byn:"));
            assert_eq!(buckets, 2, "numbers 1..=120 sit in buckets 0 and 1");
            let mid = answered(s.open_chunk(&ev(), 30).await);
            assert!(mid.is_none_or(|left| left == 0), "{mid:?}");
            let keys = cluster.move_slot_keys(slot, &from, &to);
            assert!(keys >= 3, "the event's other keys moved ({keys})");
            // Keys on the new owner, the slot still migrating: the old owner answers ASK.
            let meta = answered(s.event(&ev()).await).expect("a one-key read follows ASK");
            assert!(meta.is_some());
            assert!(
                cluster.error_count(from.port, "ASK") > ask_before,
                "the old owner sent ASK and the store followed it"
            );
            cluster.end_slot_move(slot, &to);

            assert_eq!(
                cluster.master_of(&meta_key(&event)).id,
                to.id,
                "the slot really moved"
            );
            let left = cli(
                from.port,
                &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
            );
            assert_eq!(left.trim(), "0", "no key left behind");
            while s.open_chunk(&ev(), 7).await.expect("chunk after the move") > 0 {}
            assert!(
                cluster.error_count(from.port, "MOVED") > moved_before,
                "the old owner answered MOVED and the store followed it"
            );
            let mut numbered = Vec::new();
            for f in &fans {
                let p = s.position(&ev(), f).await.expect("position");
                numbered.push((p.queue_number.expect("numbered"), f));
            }
            numbered.sort_unstable_by_key(|(n, _)| *n);
            let numbers: Vec<u64> = numbered.iter().map(|(n, _)| *n).collect();
            assert_eq!(numbers, (1..=150).collect::<Vec<u64>>(), "each number once");
            assert_eq!(join(&s, &VisitorId::random()).await, Some(151));
            // A ready window over every number: each fan is found through the number buckets.
            let mut p = super::params(10, 1000, NOW, 60);
            p.liveness.ready_window = 1000;
            let a = s.advance_cursor(&ev(), &p).await.expect("advance");
            assert_eq!(
                (a.cursor, a.moved),
                (10, 10),
                "the cursor moves on the new owner"
            );
            for (n, f) in &numbered {
                let hb = s
                    .heartbeat(&ev(), f, NOW * 1000, REJOIN)
                    .await
                    .expect("beat");
                let want = if *n <= 10 {
                    Place::YourTurn
                } else {
                    Place::Ready
                };
                assert_eq!(hb.place, want, "number {n} is in the number index");
            }
            let c = s
                .claim(&ev(), numbered[0].1, NOW * 1000, TERMS, "j", REJOIN)
                .await
                .expect("claim");
            assert!(matches!(c, ClaimOutcome::Admitted(_)), "{c:?}");
            let f = s
                .figures(&ev(), NOW * 1000, SILENCE)
                .await
                .expect("figures")
                .expect("exists");
            assert_eq!((f.last_number, f.cursor, f.admitted_total), (151, 10, 1));
        })
        .await;
}

/// Event ids whose keys live on `master` (to run rules on the shard that fails over).
fn events_on(cluster: &RedisCluster, master: &ClusterNode, count: usize) -> Vec<EventId> {
    let owner: HashMap<u16, String> = cluster
        .cluster_nodes()
        .iter()
        .filter(|n| n.master)
        .flat_map(|n| {
            n.slots
                .iter()
                .flat_map(|&(a, b)| a..=b)
                .map(|s| (s, n.id.clone()))
        })
        .collect();
    (0..10_000)
        .map(|i| EventId::parse(&format!("fo-{i}")).expect("id"))
        .filter(|e| owner.get(&cluster.slot_of(&meta_key(e))) == Some(&master.id))
        .take(count)
        .collect()
}

/// Fans joining and reading their place on `event` until `stop`; each fan's answers.
async fn traffic(
    s: Store,
    event: EventId,
    stop: Arc<AtomicBool>,
) -> (Vec<(VisitorId, Option<u64>)>, usize) {
    let (mut fans, mut refused) = (Vec::new(), 0);
    while !stop.load(Ordering::Relaxed) {
        let f = VisitorId::random();
        match answered(s.join(&event, &f, NOW * 1000, REJOIN).await) {
            Some(j) => fans.push((f, j.queue_number)),
            None => {
                refused += 1;
                fans.push((f, None));
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (fans, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cluster_master_failover_mid_suite() {
    let cluster = RedisCluster::start();
    let s: Store = Arc::new(cluster_store(&cluster.urls()).await);
    let event = EventId::parse("failover").expect("id");
    let old = cluster.master_of(&meta_key(&event));
    let rule_events = events_on(&cluster, &old, 3);
    EVENT
        .scope(rule_events[0].clone(), rejoin_keeps_place(s.clone()))
        .await;

    EVENT.scope(event.clone(), open_with(&s, 1000)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn(traffic(s.clone(), event.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let new = tokio::task::spawn_blocking({
        let old = old.clone();
        move || {
            let new = cluster.failover(&old);
            (cluster, new)
        }
    });
    let (cluster, new) = new.await.expect("failover");
    assert_eq!(
        cluster.role(new.port),
        "master",
        "the replica really took over"
    );
    assert_eq!(
        cluster.role(old.port),
        "slave",
        "the old master is a replica now"
    );
    assert_eq!(cluster.master_of(&meta_key(&event)).id, new.id);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (fans, refused) = load.await.expect("traffic");
    let answered_joins = fans.iter().filter(|(_, n)| n.is_some()).count();
    assert!(
        answered_joins > 20,
        "joins answered around the failover ({answered_joins})"
    );

    // Refused joins may or may not have been applied: a re-join (NX) says which number, if any.
    let mut numbers = Vec::new();
    for (f, n) in &fans {
        let again = s
            .join(&event, f, NOW * 1000, REJOIN)
            .await
            .expect("re-join");
        if let Some(n) = n {
            assert_eq!(
                again.queue_number,
                Some(*n),
                "a fan keeps the number it was told"
            );
        }
        let p = s.position(&event, f).await.expect("position");
        assert_eq!(p.queue_number, again.queue_number);
        numbers.push(again.queue_number.expect("numbered"));
    }
    numbers.sort_unstable();
    let last = s
        .figures(&event, NOW * 1000, SILENCE)
        .await
        .expect("figures")
        .expect("exists")
        .last_number;
    assert_eq!(
        numbers,
        (1..=last).collect::<Vec<u64>>(),
        "every number held by exactly one fan, none lost ({refused} refused mid-failover)"
    );

    // The rest of the suite runs on the promoted master.
    assert_eq!(cluster.master_of(&meta_key(&rule_events[1])).id, new.id);
    EVENT
        .scope(rule_events[1].clone(), claim_is_idempotent(s.clone()))
        .await;
    EVENT
        .scope(
            rule_events[2].clone(),
            cursor_never_passes_max_active(s.clone()),
        )
        .await;
}
