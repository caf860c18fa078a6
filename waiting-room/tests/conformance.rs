//! One conformance suite for every queue-store backend (STYLE.md rule 3): each rule is a
//! generic async fn over `Arc<dyn QueueStore>`, run against the in-memory store, against a
//! real `redis-server` started on a free port, and against a real Redis Cluster (3 masters +
//! 3 replicas, one per test binary, each rule on its own event so its keys land in their own
//! slot). `conformance/lanes.rs` holds the quiet lane's rules (issue 15 item 2),
//! `conformance/leave.rs` people ahead and leaving the line (issue 18 item 5).
//! `conformance/cluster.rs` adds a slot migration and a master failover mid-suite.

use futures::future::join_all;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use waiting_room::admitter::open_event;
use waiting_room::domain::{
    AdmissionTerms, AdvanceParams, ClaimOutcome, EventId, EventMeta, EventState, Liveness,
    VisitorId,
};
use waiting_room::store::{memory::MemoryStore, redis::RedisStore, Advance, QueueStore};

#[path = "conformance/capacity.rs"]
mod capacity;
#[path = "conformance/cluster.rs"]
mod cluster;
#[path = "conformance/fairness.rs"]
mod fairness;
#[path = "conformance/lanes.rs"]
mod lanes;
#[path = "conformance/leave.rs"]
mod leave;
#[path = "conformance/liveness.rs"]
mod liveness;
use capacity::*;
use fairness::*;
use lanes::*;
use leave::*;
use liveness::*;

type Store = Arc<dyn QueueStore>;
const NOW: i64 = 1_764_500_000;
/// Rejoin grace used throughout, ms.
const REJOIN: u64 = 120_000;
/// Admissions live 600 s; their slot ends with them (no clock-skew tail).
const TERMS: AdmissionTerms = AdmissionTerms::new(600, 0);
/// Silence grace used throughout, ms.
const SILENCE: u64 = 30_000;

fn params(n: u64, max_active: u64, now_s: i64, grace: u64) -> AdvanceParams {
    AdvanceParams {
        n,
        max_active,
        now_ms: now_s * 1000,
        invite_grace_secs: grace,
        liveness: Liveness {
            silence_ms: SILENCE,
            ready_window: 100,
            scan_limit: 10_000,
        },
    }
}

/// Every fan in `fans` sends a heartbeat at `now_s`.
async fn beat(s: &Store, fans: &[VisitorId], now_s: i64) {
    for f in fans {
        s.heartbeat(&ev(), f, now_s * 1000, REJOIN)
            .await
            .expect("heartbeat");
    }
}

async fn advance(s: &Store, n: u64, max_active: u64, now_s: i64, grace: u64) -> Advance {
    s.advance_cursor(&ev(), &params(n, max_active, now_s, grace))
        .await
        .expect("advance")
}

tokio::task_local! {
    /// The event a rule runs on: `demo`, or the rule's own event on the shared cluster.
    static EVENT: EventId;
}

fn ev() -> EventId {
    EVENT
        .try_with(EventId::clone)
        .unwrap_or_else(|_| EventId::parse("demo").expect("id"))
}

/// A short event id of its own per rule (FNV-1a of the name): rules share one cluster.
fn event_for(rule: &str) -> EventId {
    let h = rule.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    EventId::parse(&format!("c{:08x}", h as u32)).expect("id")
}

/// The Redis Cluster this test binary shares (started on first use, stopped with the process).
fn shared_cluster() -> &'static sale_common::testsupport::RedisCluster {
    static CLUSTER: std::sync::OnceLock<sale_common::testsupport::RedisCluster> =
        std::sync::OnceLock::new();
    CLUSTER.get_or_init(sale_common::testsupport::RedisCluster::start)
}

async fn cluster_store(urls: &[String]) -> RedisStore {
    RedisStore::connect_cluster(urls, Duration::from_secs(2))
        .await
        .expect("connect to the redis cluster")
}

async fn create(s: &Store, max_active: u64) {
    let meta = EventMeta {
        id: ev(),
        state: EventState::Prequeue,
        opens_at: NOW,
        admit_rate: 10.0,
        max_active,
        admission_ttl_secs: 600,
        booking_url: "http://127.0.0.1:8081".into(),
        pow_bits: 0,
        stock_wait: 0,
        time_zone: "Europe/London".into(),
    };
    assert!(s.create_event(&meta).await.expect("create"));
    let stored = s.event(&ev()).await.expect("read").expect("the event");
    assert_eq!(
        stored.time_zone, "Europe/London",
        "the event keeps its own zone"
    );
    assert!(
        !s.create_event(&meta).await.expect("create again"),
        "create is NX"
    );
}

async fn open_with(s: &Store, max_active: u64) {
    create(s, max_active).await;
    open_event(s.as_ref(), &ev()).await.expect("open");
    assert_eq!(
        s.event(&ev()).await.expect("meta").expect("exists").state,
        EventState::Open
    );
}

async fn join(s: &Store, v: &VisitorId) -> Option<u64> {
    s.join(&ev(), v, NOW * 1000, REJOIN)
        .await
        .expect("join")
        .queue_number
}

async fn rejoin_keeps_place(s: Store) {
    open_with(&s, 10).await;
    let (a, b) = (VisitorId::random(), VisitorId::random());
    assert_eq!(join(&s, &a).await, Some(1));
    assert_eq!(join(&s, &b).await, Some(2));
    assert_eq!(
        join(&s, &a).await,
        Some(1),
        "a re-join never moves a visitor back"
    );
    let f = s
        .figures(&ev(), (NOW) * 1000, SILENCE)
        .await
        .expect("figures")
        .expect("exists");
    assert_eq!(f.last_number, 2);
    assert_eq!(f.queue_length(), 2);
    assert!(matches!(
        s.join(&EventId::parse("nope").expect("id"), &a, NOW * 1000, REJOIN)
            .await,
        Err(waiting_room::store::StoreError::NotFound)
    ));
}

/// A thousand different fans joining at once all get a place, 1..=1000 each once: joins in
/// flight move the counter past any fixed window of declared number buckets (Redis Cluster
/// needs every key declared), so the window grows with the joins in flight.
async fn thousand_concurrent_joins_each_get_one_number(s: Store) {
    open_with(&s, 10).await;
    let tasks = (0..1000).map(|_| {
        let (s, e) = (s.clone(), ev());
        tokio::spawn(async move {
            s.join(&e, &VisitorId::random(), NOW * 1000, REJOIN)
                .await
                .expect("join")
                .queue_number
                .expect("open: numbered")
        })
    });
    let numbers: HashSet<u64> = join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();
    assert_eq!(numbers, (1..=1000).collect::<HashSet<u64>>());
}

async fn case_w05_thousand_identical_joins(s: Store) {
    open_with(&s, 10).await;
    assert_eq!(join(&s, &VisitorId::random()).await, Some(1));
    let v = VisitorId::random();
    let tasks = (0..1000).map(|_| {
        let (s, v, e) = (s.clone(), v.clone(), ev());
        tokio::spawn(async move {
            s.join(&e, &v, NOW * 1000, REJOIN)
                .await
                .expect("join")
                .queue_number
        })
    });
    let numbers: HashSet<Option<u64>> = join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();
    assert_eq!(
        numbers,
        HashSet::from([Some(2)]),
        "every response names the first number"
    );
    let f = s
        .figures(&ev(), (NOW) * 1000, SILENCE)
        .await
        .expect("figures")
        .expect("exists");
    assert_eq!(f.last_number, 2, "the queue grew by exactly one");
    assert_eq!(join(&s, &v).await, Some(2));
}

async fn case_w04_same_moment_joins_keep_join_order(s: Store) {
    open_with(&s, 10).await;
    let visitors: Vec<VisitorId> = (0..50).map(|_| VisitorId::random()).collect();
    let mut numbers = Vec::new();
    for v in &visitors {
        numbers.push(join(&s, v).await.expect("numbered"));
    }
    assert_eq!(
        numbers,
        (1..=50).collect::<Vec<u64>>(),
        "order of application, not of ids"
    );
    let base = (1u64 << 33) + 5;
    s.set_counter(&ev(), base).await.expect("set counter");
    let (x, y) = (VisitorId::random(), VisitorId::random());
    assert_eq!(join(&s, &x).await, Some(base + 1), "exact past 2^32");
    assert_eq!(join(&s, &y).await, Some(base + 2));
    let p = s.position(&ev(), &y).await.expect("position");
    assert_eq!(p.queue_number, Some(base + 2));
}

async fn prequeue_shuffle_numbers_everyone_once(s: Store) {
    create(&s, 10).await;
    let early: Vec<VisitorId> = (0..200).map(|_| VisitorId::random()).collect();
    for v in &early {
        assert_eq!(join(&s, v).await, None, "no number before opening");
    }
    assert_eq!(join(&s, &early[0]).await, None, "pre-queue join is NX too");
    assert_eq!(s.begin_open(&ev()).await.expect("begin"), 200);
    let late = VisitorId::random();
    assert_eq!(
        join(&s, &late).await,
        Some(201),
        "joins during opening go behind the pre-queue"
    );
    assert_eq!(
        join(&s, &early[1]).await,
        None,
        "pre-queued fans wait for their shuffled number"
    );
    while s.open_chunk(&ev(), 64).await.expect("chunk") > 0 {}
    assert_eq!(
        s.event(&ev()).await.expect("meta").expect("exists").state,
        EventState::Open
    );
    let mut got = Vec::new();
    for v in &early {
        got.push(
            s.position(&ev(), v)
                .await
                .expect("pos")
                .queue_number
                .expect("numbered"),
        );
    }
    let set: HashSet<u64> = got.iter().copied().collect();
    assert_eq!(
        set,
        (1..=200).collect::<HashSet<u64>>(),
        "each of 1..=n exactly once"
    );
    assert_ne!(
        got,
        (1..=200).collect::<Vec<u64>>(),
        "the order is shuffled"
    );
    assert_eq!(join(&s, &VisitorId::random()).await, Some(202));
}

async fn cursor_never_passes_max_active(s: Store) {
    open_with(&s, 10).await;
    let fans: Vec<VisitorId> = (0..30).map(|_| VisitorId::random()).collect();
    for f in &fans {
        join(&s, f).await;
    }
    let a = advance(&s, 100, 10, NOW, 60).await;
    assert_eq!((a.cursor, a.moved), (10, 10));
    let a = advance(&s, 100, 10, NOW, 60).await;
    assert_eq!(a.cursor, 10, "unclaimed invitations hold their slots");
    for f in &fans[..10] {
        let c = s
            .claim(&ev(), f, (NOW) * 1000, TERMS, "j", REJOIN)
            .await
            .expect("claim");
        assert!(matches!(c, ClaimOutcome::Admitted(_)));
    }
    let a = advance(&s, 100, 10, NOW + 1, 60).await;
    assert_eq!(a.cursor, 10, "live admissions hold their slots");
    let f = s
        .figures(&ev(), (NOW + 1) * 1000, SILENCE)
        .await
        .expect("figures")
        .expect("exists");
    assert_eq!(
        (f.active, f.admitted_total, f.max_active_seen),
        (10, 10, 10)
    );
    beat(&s, &fans[10..], NOW + 600).await;
    let a = advance(&s, 100, 10, NOW + 601, 60).await;
    assert_eq!(a.cursor, 20, "expired admissions free their slots");
    beat(&s, &fans[20..], NOW + 1999).await;
    let a = advance(&s, 100, 1000, NOW + 2000, 60).await;
    assert_eq!(a.cursor, 30, "never past the last number");
}

async fn claim_is_idempotent(s: Store) {
    open_with(&s, 10).await;
    let (a, b) = (VisitorId::random(), VisitorId::random());
    join(&s, &a).await;
    join(&s, &b).await;
    let c = s
        .claim(&ev(), &a, (NOW) * 1000, TERMS, "early", REJOIN)
        .await
        .expect("claim");
    assert_eq!(
        c,
        ClaimOutcome::NotYourTurn {
            queue_number: Some(1),
            cursor: 0
        }
    );
    advance(&s, 1, 10, NOW, 60).await;
    let first = s
        .claim(&ev(), &a, (NOW) * 1000, TERMS, "jti-1", REJOIN)
        .await
        .expect("claim");
    let again = s
        .claim(&ev(), &a, (NOW + 5) * 1000, TERMS, "jti-2", REJOIN)
        .await
        .expect("claim");
    assert_eq!(first, again, "same jti and expiry");
    match first {
        ClaimOutcome::Admitted(adm) => {
            assert_eq!((adm.jti.as_str(), adm.exp), ("jti-1", NOW + 600))
        }
        other => panic!("not admitted: {other:?}"),
    }
    let f = s
        .figures(&ev(), (NOW + 5) * 1000, SILENCE)
        .await
        .expect("figures")
        .expect("exists");
    assert_eq!((f.active, f.admitted_total), (1, 1), "no second slot");
    assert!(s.position(&ev(), &a).await.expect("pos").admitted);
    let c = s
        .claim(&ev(), &b, (NOW) * 1000, TERMS, "x", REJOIN)
        .await
        .expect("claim");
    assert_eq!(
        c,
        ClaimOutcome::NotYourTurn {
            queue_number: Some(2),
            cursor: 1
        }
    );
}

async fn paused_holds_the_cursor(s: Store) {
    open_with(&s, 10).await;
    let v = VisitorId::random();
    join(&s, &v).await;
    let st = s
        .transition(&ev(), &[EventState::Open], EventState::Paused)
        .await
        .expect("pause");
    assert_eq!(st, (EventState::Paused, true), "this call moved it");
    // The same call again (a concurrent identical pause that lost): the state is `to`, but
    // this call did not move it, so its caller neither succeeds nor audits.
    let again = s
        .transition(&ev(), &[EventState::Open], EventState::Paused)
        .await
        .expect("pause again");
    assert_eq!(
        again,
        (EventState::Paused, false),
        "already moved by another"
    );
    let a = advance(&s, 5, 10, NOW, 60).await;
    assert_eq!(a.moved, 0);
    let c = s
        .claim(&ev(), &v, (NOW) * 1000, TERMS, "j", REJOIN)
        .await
        .expect("claim");
    assert_eq!(c, ClaimOutcome::Refused(EventState::Paused));
    let st = s
        .transition(&ev(), &[EventState::Prequeue], EventState::Open)
        .await
        .expect("cas");
    assert_eq!(
        st,
        (EventState::Paused, false),
        "compare-and-set refuses a wrong 'from'"
    );
}

async fn owner_lock_has_one_holder(s: Store) {
    let k = &waiting_room::store::redis::admitter_lock_key(&ev());
    assert!(s.try_lock(k, "a", 5000).await.expect("lock"));
    assert!(!s.try_lock(k, "b", 5000).await.expect("lock"));
    assert!(!s.renew_lock(k, "b", 5000).await.expect("renew"));
    assert!(s.renew_lock(k, "a", 5000).await.expect("renew"));
    assert!(!s.release_lock(k, "b").await.expect("release"));
    assert!(s.release_lock(k, "a").await.expect("release"));
    assert!(s.try_lock(k, "b", 5000).await.expect("lock"));
}

macro_rules! conformance {
    ($($rule:ident),* $(,)?) => {
        mod memory_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    let s: super::Store = std::sync::Arc::new(super::MemoryStore::new());
                    super::$rule(s).await;
                }
            )*
        }
        mod redis_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    let server = sale_common::testsupport::RedisServer::start();
                    let store = super::RedisStore::connect(&server.url(), super::Duration::from_secs(2))
                        .await
                        .expect("connect to redis");
                    super::$rule(super::Arc::new(store)).await;
                }
            )*
        }
        mod redis_cluster_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $rule() {
                    let urls = super::shared_cluster().urls();
                    let store = super::cluster_store(&urls).await;
                    let event = super::event_for(stringify!($rule));
                    super::EVENT.scope(event, super::$rule(super::Arc::new(store))).await;
                }
            )*
        }
    };
}

conformance!(
    rejoin_keeps_place,
    case_w05_thousand_identical_joins,
    thousand_concurrent_joins_each_get_one_number,
    case_w04_same_moment_joins_keep_join_order,
    prequeue_shuffle_numbers_everyone_once,
    cursor_never_passes_max_active,
    claim_is_idempotent,
    paused_holds_the_cursor,
    owner_lock_has_one_holder,
    case_w06_abandoned_places_are_skipped,
    skipped_fan_back_in_time_is_admitted_next_tick,
    fans_behind_the_ready_window_need_not_heartbeat,
    session_end_frees_the_slot_once,
    audit_trail_keeps_actions_in_order,
    report_samples_keep_their_order,
    prequeue_shuffle_is_uniform,
    prequeue_numbers_follow_the_published_draw,
    admission_order_equals_queue_order_after_opening,
    case_w10_slot_ends_after_exp_plus_skew,
    case_w10_lapsed_invitation_never_overshoots,
    address_rules_are_stored_per_event,
    the_shadow_line_has_its_own_numbers,
    people_ahead_excludes_vacated_places,
    leaving_the_prequeue,
);
