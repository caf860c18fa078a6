//! Racing status publishers (seed 000's last bug found before launch: "two concurrent writers
//! could leave the status page showing a full level as open"). A publisher that built an "open"
//! document is held between build and write while the event sells out and another publisher
//! writes "sold_out"; released, the stale writer overwrites it unless the version guard is on.
//! Run in memory and on one Redis shared by two `AppState`s (two processes), then with many
//! concurrent writers flipping states.

use sale_common::testsupport::RedisServer;
use sale_common::{ManualClock, SharedClock};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use waiting_room::domain::{EventId, EventState};
use waiting_room::status::{DirSink, LatchedPublisher, Put, StatusPublisher, StatusSink};
use waiting_room::store::{memory::MemoryStore, redis::RedisStore, QueueStore};
use waiting_room::{AppState, Config};

const T0: i64 = 1_764_500_000;

fn ev() -> EventId {
    EventId::parse("demo").expect("id")
}

/// One "process": an `AppState` on `store` whose publisher writes to `dir`; returns the state
/// and its publisher (to inject a pause).
async fn node(
    store: Arc<dyn QueueStore>,
    dir: &Path,
    guard: bool,
) -> (AppState, Arc<LatchedPublisher>) {
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    let sink = DirSink::new(dir);
    let sink: Arc<dyn StatusSink> = Arc::new(if guard {
        sink
    } else {
        sink.without_version_guard()
    });
    let slot = Arc::new(Mutex::new(None));
    let keep = slot.clone();
    let st = AppState::with_publisher(cfg, store, clock, move |store, board, rules| {
        let p = Arc::new(LatchedPublisher::new(store, board, vec![sink], rules));
        *keep.lock().expect("slot") = Some(p.clone());
        p
    })
    .await
    .expect("state");
    let p = slot.lock().expect("slot").take().expect("publisher");
    (st, p)
}

fn file_state(dir: &Path) -> (String, u64, u64) {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("demo.json")).expect("file")).expect("json");
    let s = v["state"].as_str().expect("state").to_owned();
    (
        s,
        v["version"].as_u64().expect("v"),
        v["cursor"].as_u64().expect("c"),
    )
}

/// The scripted race. A builds "open" and waits at the pause; the event sells out; B publishes;
/// A is released. Returns A's sink answer and the state left in the directory.
async fn stale_builder_race(
    a: (AppState, Arc<LatchedPublisher>),
    b: AppState,
    dir: &Path,
) -> (Put, String) {
    let (st_a, pub_a) = a;
    st_a.0
        .store
        .transition(&ev(), &[EventState::Prequeue], EventState::Open)
        .await
        .expect("open");
    let built = Arc::new(Notify::new());
    let gate = Arc::new(Semaphore::new(0));
    let (bt, gt) = (built.clone(), gate.clone());
    pub_a.set_pause(Some(Arc::new(move |_doc| {
        let (bt, gt) = (bt.clone(), gt.clone());
        Box::pin(async move {
            bt.notify_one();
            gt.acquire().await.expect("gate").forget();
        })
    })));
    let stale = tokio::spawn({
        let p = pub_a.clone();
        async move { p.publish(&ev(), T0 * 1000).await }
    });
    built.notified().await; // A holds an "open" document, latch won, not yet written
    let after =
        b.0.store
            .transition(&ev(), &[EventState::Open], EventState::SoldOut)
            .await
            .expect("sold out");
    assert_eq!(after, (EventState::SoldOut, true));
    let doc = b.refresh_status(&ev()).await.expect("b publishes");
    assert_eq!(doc.state, "sold_out");
    assert_eq!(file_state(dir).0, "sold_out");
    gate.add_permits(1);
    let a_pub = stale.await.expect("join").expect("a publishes");
    assert_eq!(a_pub.doc.expect("doc").state, "open");
    (a_pub.puts[0].1, file_state(dir).0)
}

#[tokio::test]
async fn in_memory_a_stale_builder_reopens_a_sold_out_event_only_without_the_guard() {
    for (guard, want_put, want_state) in [
        (false, Put::Written, "open"),
        (true, Put::Stale, "sold_out"),
    ] {
        let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
        let dir = tempfile::tempdir().expect("dir");
        let a = node(store.clone(), dir.path(), guard).await;
        let (b, _) = node(store.clone(), dir.path(), guard).await;
        let (put, state) = stale_builder_race(a, b, dir.path()).await;
        assert_eq!(
            (put, state.as_str()),
            (want_put, want_state),
            "guard {guard}"
        );
    }
}

#[tokio::test]
async fn two_processes_on_one_redis_a_stale_builder_reopens_sold_out_only_without_the_guard() {
    let redis = RedisServer::start();
    for (guard, want_put, want_state) in [
        (false, Put::Written, "open"),
        (true, Put::Stale, "sold_out"),
    ] {
        let url = redis.url();
        let connect = || RedisStore::connect(&url, Duration::from_secs(2));
        let (sa, sb) = (connect().await.expect("a"), connect().await.expect("b"));
        let _: () = redis::cmd("FLUSHALL")
            .query_async(
                &mut redis::Client::open(redis.url())
                    .expect("c")
                    .get_multiplexed_async_connection()
                    .await
                    .expect("conn"),
            )
            .await
            .expect("flush");
        let dir = tempfile::tempdir().expect("dir");
        let a = node(Arc::new(sa), dir.path(), guard).await;
        let (b, _) = node(Arc::new(sb), dir.path(), guard).await;
        let (put, state) = stale_builder_race(a, b, dir.path()).await;
        assert_eq!(
            (put, state.as_str()),
            (want_put, want_state),
            "guard {guard}"
        );
    }
}

/// Four publishers step as fast as they can while a fifth flips the state and publishes after
/// each flip (as the admin handlers do); a reader checks the directory never goes back in
/// `(version, cursor)` and, at the end, shows the store's state.
async fn concurrent_writers(stores: Vec<Arc<dyn QueueStore>>) {
    let dir = tempfile::tempdir().expect("dir");
    let mut nodes = Vec::new();
    for s in &stores {
        nodes.push(node(s.clone(), dir.path(), true).await.0);
    }
    let store = stores[0].clone();
    store
        .transition(&ev(), &[EventState::Prequeue], EventState::Open)
        .await
        .expect("open");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (i, n) in nodes.iter().enumerate().skip(1) {
        let (n, stop) = (n.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut k = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n.refresh_status(&ev()).await;
                k += 1;
                if (k + i as u64).is_multiple_of(3) {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    let reader = {
        let (stop, path) = (stop.clone(), dir.path().to_path_buf());
        tokio::task::spawn_blocking(move || {
            let mut last = (0, 0);
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(bytes) = std::fs::read(path.join("demo.json")) {
                    let v: serde_json::Value = serde_json::from_slice(&bytes).expect("whole json");
                    let now = (
                        v["version"].as_u64().expect("v"),
                        v["cursor"].as_u64().expect("c"),
                    );
                    assert!(now >= last, "document went back: {last:?} -> {now:?}");
                    last = now;
                    reads += 1;
                }
            }
            reads
        })
    };
    use EventState::*;
    let flips = [
        (Open, SoldOut),
        (SoldOut, Open),
        (Open, Paused),
        (Paused, Open),
        (Open, SoldOut),
    ];
    for round in 0..8 {
        for (from, to) in flips {
            store.transition(&ev(), &[from], to).await.expect("flip");
            nodes[0]
                .refresh_status(&ev())
                .await
                .expect("flip published");
            // Whoever won this transition's latch (this step or a racing one) writes it now.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while file_state(dir.path()).0 != to.as_str() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "round {round}: {to:?} never published"
                );
                tokio::task::yield_now().await;
            }
        }
        store
            .transition(&ev(), &[SoldOut], Open)
            .await
            .expect("reopen");
        nodes[0].refresh_status(&ev()).await;
    }
    store
        .transition(&ev(), &[Open], Closed)
        .await
        .expect("close");
    nodes[0].refresh_status(&ev()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.await.expect("publisher");
    }
    assert!(reader.await.expect("reader") > 0);
    assert_eq!(file_state(dir.path()).0, "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_publishers_in_memory_never_leave_a_closed_event_open() {
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    concurrent_writers(vec![store.clone(), store.clone(), store.clone(), store]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_publishers_on_redis_never_leave_a_closed_event_open() {
    let redis = RedisServer::start();
    let mut stores: Vec<Arc<dyn QueueStore>> = Vec::new();
    for _ in 0..4 {
        stores.push(Arc::new(
            RedisStore::connect(&redis.url(), Duration::from_secs(2))
                .await
                .expect("redis"),
        ));
    }
    concurrent_writers(stores).await;
}

#[tokio::test]
async fn on_redis_a_burst_of_steps_in_two_processes_publishes_once_per_throttle_window() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("dir");
    let mut pubs = Vec::new();
    for _ in 0..2 {
        let s = RedisStore::connect(&redis.url(), Duration::from_secs(2))
            .await
            .expect("redis");
        pubs.push(node(Arc::new(s), dir.path(), true).await.1);
    }
    // Node start-up published (the creation transition, then a throttled step): let that
    // window end, then 2 × 20 steps at once, well inside the next one.
    let key = waiting_room::store::redis::status_throttle_key(&ev());
    let mut conn = redis::Client::open(redis.url())
        .expect("c")
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let _: i64 = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("del");
    let e = ev();
    let steps = pubs
        .iter()
        .flat_map(|p| (0..20).map(|_| p.publish(&e, T0 * 1000)));
    let decisions: Vec<_> = futures::future::join_all(steps)
        .await
        .into_iter()
        .map(|r| r.expect("step").decision)
        .collect();
    let writes = decisions
        .iter()
        .filter(|d| **d == waiting_room::status::Decision::Throttle)
        .count();
    assert_eq!((writes, decisions.len()), (1, 40), "{decisions:?}");
    // The latch is a SET NX PX key that expires by itself within the configured interval.
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("pttl");
    let throttle = Config::demo("demo", T0, "x").status_throttle_ms as i64;
    assert!(
        pttl > 0 && pttl <= throttle,
        "PTTL {pttl} ms, throttle {throttle} ms"
    );
}
