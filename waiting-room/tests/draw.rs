//! The verifiable pre-queue draw (issue 15 item 1, must show): a 10,000-fan pre-queue opened
//! over real HTTP, its publication read from `GET /api/events/{event}/draw` and recomputed by
//! the built `waiting-room verify-draw` (`CARGO_BIN_EXE_waiting-room`), which must fail when
//! one position is changed or the seed does not match the commitment; the published list holds
//! no visitor id. The store-level rule (every backend numbers the pre-queue in draw order) is
//! in the conformance suite (`prequeue_numbers_follow_the_published_draw`).

use sale_common::{ManualClock, SharedClock};
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;
use waiting_room::domain::{EventId, VisitorId};
use waiting_room::draw::{public_id, visitors_hash, DrawSeed};
use waiting_room::store::memory::MemoryStore;
use waiting_room::store::redis::RedisStore;
use waiting_room::store::QueueStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;
const FANS: usize = 10_000;

fn demo() -> EventId {
    EventId::parse("demo").expect("id")
}

/// Serves the router on a random local port; returns its base URL.
async fn serve(state: AppState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Runs the built `waiting-room verify-draw` with `args`.
async fn verify_draw(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_waiting-room"))
            .arg("verify-draw")
            .args(&args)
            .output()
            .expect("run waiting-room verify-draw")
    })
    .await
    .expect("join")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `true` when `s` has the shape of a UUID (the visitor ids' shape).
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

async fn get_json(url: &str) -> (String, Value) {
    let r = reqwest::get(url).await.expect("get");
    assert_eq!(r.status(), 200, "{url}");
    let body = r.text().await.expect("body");
    let v = serde_json::from_str(&body).expect("json");
    (body, v)
}

/// A copy of the publication written to a file, after `change` edited it.
fn write_changed(
    dir: &tempfile::TempDir,
    name: &str,
    p: &Value,
    change: impl Fn(&mut Value),
) -> String {
    let mut p = p.clone();
    change(&mut p);
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_vec(&p).expect("json")).expect("write");
    path.display().to_string()
}

/// `verify-draw` on a copy of `published` edited by `change` exits 1 naming `why`.
async fn refused(
    dir: &tempfile::TempDir,
    published: &Value,
    change: impl Fn(&mut Value),
    why: &str,
) {
    let file = write_changed(dir, &format!("{why}.json"), published, change);
    let out = verify_draw(vec![file]).await;
    assert_eq!(out.status.code(), Some(1), "{why}: {}", text(&out.stdout));
    assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
}

fn list_of(p: &Value) -> Vec<String> {
    p["visitors"]
        .as_array()
        .expect("visitors")
        .iter()
        .map(|v| v.as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_draw_recomputes_a_10000_fan_prequeue_and_fails_on_one_changed_position() {
    draw_round_trip(Arc::new(MemoryStore::new())).await;
}

/// The same on Redis: the sorted-set pre-queue popped in chunks, the list read back from the
/// number buckets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_draw_recomputes_a_10000_fan_prequeue_on_redis() {
    let server = sale_common::testsupport::RedisServer::start();
    let store = RedisStore::connect(&server.url(), Duration::from_secs(2))
        .await
        .expect("connect to redis");
    draw_round_trip(Arc::new(store)).await;
}

async fn draw_round_trip(store: Arc<dyn QueueStore>) {
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    let state = AppState::new(cfg, store.clone(), clock)
        .await
        .expect("state");
    let base = serve(state).await;
    let draw_url = format!("{base}/api/events/demo/draw");

    // Before opening: the commitment only.
    let (_, before) = get_json(&draw_url).await;
    let commitment = before["commitment"]
        .as_str()
        .expect("commitment")
        .to_owned();
    assert_eq!(commitment.len(), 64);
    assert!(before.get("seed").is_none() && before.get("visitors").is_none());

    let fans: Vec<VisitorId> = (0..FANS).map(|_| VisitorId::random()).collect();
    for f in &fans {
        let j = store
            .join(&demo(), f, T0 * 1000, 60_000)
            .await
            .expect("join");
        assert_eq!(j.queue_number, None, "pre-queued");
    }
    let r = reqwest::Client::new()
        .post(format!("{base}/admin/events/demo/open"))
        .bearer_auth("demo-admin-token")
        .header("x-operator", "test")
        .send()
        .await
        .expect("open");
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());

    // After opening: seed, list and hash; the commitment did not change.
    let (body, published) = get_json(&draw_url).await;
    assert_eq!(published["commitment"], commitment.as_str());
    let list = list_of(&published);
    assert_eq!(list.len(), FANS);
    assert_eq!(published["first_number"], 1);
    let ids: std::collections::HashSet<&str> = fans.iter().map(VisitorId::as_str).collect();
    assert!(
        list.iter()
            .all(|p| p.len() == 64 && !ids.contains(p.as_str())),
        "the list holds public ids (SHA-256), never visitor ids"
    );
    assert!(
        !body
            .split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
            .any(is_uuid),
        "no visitor id anywhere in the publication"
    );

    // The built binary recomputes every position, and they are the store's numbers.
    let ok = verify_draw(vec![draw_url.clone()]).await;
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let printed: HashMap<String, u64> = text(&ok.stdout)
        .lines()
        .skip(1)
        .map(|l| {
            let (n, id) = l.split_once(' ').expect("number id");
            (id.to_owned(), n.parse().expect("number"))
        })
        .collect();
    assert_eq!(printed.len(), FANS);
    for f in &fans {
        let n = store.position(&demo(), f).await.expect("pos").queue_number;
        assert_eq!(
            Some(printed[&public_id(f.as_str())]),
            n,
            "fan {}",
            f.as_str()
        );
    }
    // Join order does not predict the number (the rush's check, here as Spearman's ρ between
    // join order and number: under independence its standard error is 1/√(n−1)).
    let d2: f64 = fans
        .iter()
        .enumerate()
        .map(|(i, f)| (printed[&public_id(f.as_str())] as f64 - (i + 1) as f64).powi(2))
        .sum();
    let n = FANS as f64;
    let rho = 1.0 - 6.0 * d2 / (n * (n * n - 1.0));
    assert!(
        rho.abs() < 4.0 / (n - 1.0).sqrt(),
        "join order predicts the number: ρ = {rho:.4}"
    );
    let one = &fans[FANS / 2];
    let mine = verify_draw(vec![
        draw_url.clone(),
        "--visitor".into(),
        one.as_str().into(),
    ])
    .await;
    let n = store
        .position(&demo(), one)
        .await
        .expect("pos")
        .queue_number;
    assert!(
        text(&mine.stdout).contains(&format!("queue number {}", n.expect("numbered"))),
        "{}",
        text(&mine.stdout)
    );

    let dir = tempfile::tempdir().expect("dir");
    let same = write_changed(&dir, "same.json", &published, |_| {});
    assert!(
        verify_draw(vec![same]).await.status.success(),
        "a saved copy verifies"
    );

    // One position changed (two neighbours swapped), the hash recomputed to match the list:
    // only the recomputed order can catch it.
    let swapped = |p: &mut Value| {
        let mut l = list_of(p);
        l.swap(4_999, 5_000);
        p["visitors_hash"] = visitors_hash(&l).into();
        p["visitors"] = l.into();
    };
    refused(&dir, &published, swapped, "number 5000").await;
    // The list changed but not its hash.
    let unhashed = |p: &mut Value| {
        let mut l = list_of(p);
        l.swap(0, 1);
        p["visitors"] = l.into();
    };
    refused(&dir, &published, unhashed, "visitors_hash").await;
    // A seed that does not match the commitment.
    let reseeded = |p: &mut Value| p["seed"] = DrawSeed::random().to_hex().into();
    refused(&dir, &published, reseeded, "commitment").await;

    // The publication is in the audit trail.
    let audit = store.audit(&demo(), 50).await.expect("audit");
    let entry = audit
        .iter()
        .find(|e| e.action == "draw_published")
        .expect("draw_published audited");
    assert_eq!(entry.old["commitment"], commitment.as_str());
    assert_eq!(entry.new["visitors_hash"], published["visitors_hash"]);
    assert_eq!(entry.new["prequeued"], FANS);
}
