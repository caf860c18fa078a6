//! The S3 publisher against a real S3-compatible server (`moto_server`, PyPI `moto[server]`,
//! started on a free port by `MotoServer`): the waiting room configured with `s3_bucket` /
//! `s3_prefix` and the standard AWS environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, …)
//! publishes `{prefix}{event}.json` with `Content-Type` and `Cache-Control` on the object; then
//! the stale-builder race on S3 with and without the version guard (conditional PUTs).
//!
//! One test function: it sets process environment variables, which must not race with other
//! threads of this test binary reading them.

use aws_sdk_s3::Client;
use sale_common::testsupport::MotoServer;
use sale_common::{ManualClock, SharedClock};
use std::sync::Arc;
use tokio::sync::{Notify, Semaphore};
use waiting_room::domain::{EventId, EventState};
use waiting_room::status::{LatchedPublisher, Put, S3Sink, StatusPublisher, StatusSink};
use waiting_room::store::{memory::MemoryStore, QueueStore};
use waiting_room::{AppState, Config};

const T0: i64 = 1_764_500_000;
const BUCKET: &str = "sale-status";

fn ev() -> EventId {
    EventId::parse("demo").expect("id")
}

async fn object(client: &Client, key: &str) -> (serde_json::Value, String, String) {
    let o = client
        .get_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .expect("get object");
    let ct = o.content_type().unwrap_or_default().to_owned();
    let cc = o.cache_control().unwrap_or_default().to_owned();
    let body = o.body.collect().await.expect("body").into_bytes();
    (serde_json::from_slice(&body).expect("json"), ct, cc)
}

/// A node publishing only to `sink` on `store`, and its publisher.
async fn node(store: Arc<dyn QueueStore>, sink: S3Sink) -> (AppState, Arc<LatchedPublisher>) {
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    let slot = Arc::new(std::sync::Mutex::new(None));
    let keep = slot.clone();
    let sink: Arc<dyn StatusSink> = Arc::new(sink);
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

/// A builds "open" and is held; the event sells out and B publishes; A is released. Returns
/// A's answer and the state on S3.
async fn race(sink_a: S3Sink, sink_b: S3Sink, client: &Client, key: &str) -> (Put, String) {
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let (_, pub_a) = node(store.clone(), sink_a).await;
    let (b, _) = node(store.clone(), sink_b).await;
    store
        .transition(&ev(), &[EventState::Prequeue], EventState::Open)
        .await
        .expect("open");
    let (built, gate) = (Arc::new(Notify::new()), Arc::new(Semaphore::new(0)));
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
    built.notified().await;
    store
        .transition(&ev(), &[EventState::Open], EventState::SoldOut)
        .await
        .expect("sold out");
    b.refresh_status(&ev()).await.expect("b publishes");
    assert_eq!(object(client, key).await.0["state"], "sold_out");
    gate.add_permits(1);
    let a = stale.await.expect("join").expect("a publishes");
    let state = object(client, key).await.0["state"]
        .as_str()
        .expect("state")
        .to_owned();
    (a.puts[0].1, state)
}

#[tokio::test]
async fn s3_publisher_writes_the_document_with_headers_and_never_goes_back() {
    let moto = MotoServer::start();
    std::env::set_var("AWS_ENDPOINT_URL", moto.url());
    std::env::set_var("AWS_ACCESS_KEY_ID", "test-key");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "test-secret");
    std::env::set_var("AWS_REGION", "us-east-1");
    let sink = S3Sink::from_env(BUCKET, "status/", 1).await;
    let client = sink.client().clone();
    client
        .create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("create bucket");

    // Configured like production: s3_bucket + s3_prefix, AWS settings from the environment.
    let store: Arc<dyn QueueStore> = Arc::new(MemoryStore::new());
    let clock: SharedClock = Arc::new(ManualClock::new(T0 * 1000));
    let mut cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    cfg.s3_bucket = Some(BUCKET.into());
    cfg.s3_prefix = "edge/status/".into();
    cfg.status_max_age_secs = 2;
    let st = AppState::new(cfg, store.clone(), clock)
        .await
        .expect("state");
    let (doc, ct, cc) = object(&client, "edge/status/demo.json").await;
    assert_eq!(
        (doc["event"].as_str(), doc["state"].as_str()),
        (Some("demo"), Some("prequeue"))
    );
    assert_eq!(ct, "application/json");
    assert_eq!(cc, "public, max-age=2, stale-while-revalidate=1");
    store
        .transition(&ev(), &[EventState::Prequeue], EventState::Closed)
        .await
        .expect("close");
    let published = st.refresh_status(&ev()).await.expect("doc");
    let (doc, ..) = object(&client, "edge/status/demo.json").await;
    assert_eq!(doc, serde_json::to_value(&published).expect("json"));
    assert_eq!(doc["state"], "closed");

    // Two publishers racing on S3: the stale "open" lands only without the guard.
    let key = "status/demo.json";
    let unguarded = || {
        let s = sink.clone();
        s.without_version_guard()
    };
    let (put, state) = race(unguarded(), unguarded(), &client, key).await;
    assert_eq!(
        (put, state.as_str()),
        (Put::Written, "open"),
        "the seed's bug"
    );
    client
        .delete_object()
        .bucket(BUCKET)
        .key(key)
        .send()
        .await
        .expect("delete");
    let (put, state) = race(sink.clone(), sink.clone(), &client, key).await;
    assert_eq!((put, state.as_str()), (Put::Stale, "sold_out"), "guarded");
}
