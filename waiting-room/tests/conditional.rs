//! Conditional GET at the origin: the status document and the static files carry an `ETag` and
//! answer `304 Not Modified` to a matching `If-None-Match` (weak comparison, lists, `*`); an
//! unchanged status document keeps its tag when rebuilt a second later, a changed one gets a
//! new tag. Through `oneshot` with a `ManualClock`.

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use sale_common::{ManualClock, SharedClock};
use std::net::SocketAddr;
use std::sync::Arc;
use tower::ServiceExt;
use waiting_room::store::memory::MemoryStore;
use waiting_room::{router, AppState, Config};

const T0: i64 = 1_764_500_000;

async fn app() -> (Router, ManualClock, AppState) {
    let clock = ManualClock::new(T0 * 1000);
    let shared: SharedClock = Arc::new(clock.clone());
    let mut cfg = Config::demo("demo", T0 + 3600, "http://127.0.0.1:8081");
    cfg.static_dir = Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../static"));
    let st = AppState::new(cfg, Arc::new(MemoryStore::new()), shared)
        .await
        .expect("state");
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("addr");
    (router(st.clone()).layer(MockConnectInfo(peer)), clock, st)
}

async fn get(app: &Router, uri: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, usize) {
    let mut req = Request::get(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let r = app
        .clone()
        .oneshot(req.body(Body::empty()).expect("req"))
        .await
        .expect("call");
    let (status, headers) = (r.status(), r.headers().clone());
    let body = axum::body::to_bytes(r.into_body(), 1 << 20)
        .await
        .expect("body");
    (status, headers, body.len())
}

fn etag(h: &HeaderMap) -> String {
    h.get(header::ETAG)
        .expect("an ETag")
        .to_str()
        .expect("ascii")
        .to_owned()
}

/// 304 with the tag as sent, weak, in a list and `*`; 200 with the whole body otherwise.
async fn answers_304_to_matching_tags(app: &Router, uri: &str) -> String {
    let (s, h, len) = get(app, uri, &[]).await;
    assert_eq!(s, StatusCode::OK, "{uri}");
    assert!(len > 0);
    let tag = etag(&h);
    assert!(
        tag.starts_with('"') && tag.ends_with('"'),
        "strong tag: {tag}"
    );
    let weak = format!("W/{tag}");
    let list = format!("\"other\", {weak}");
    for inm in [tag.as_str(), weak.as_str(), list.as_str(), "*"] {
        let (s, h, len) = get(app, uri, &[("if-none-match", inm)]).await;
        assert_eq!(s, StatusCode::NOT_MODIFIED, "{uri} If-None-Match: {inm}");
        assert_eq!(
            (len, etag(&h)),
            (0, tag.clone()),
            "{uri}: no body, same tag"
        );
        assert!(
            h.contains_key(header::CACHE_CONTROL),
            "{uri}: 304 keeps Cache-Control"
        );
    }
    let (s, _, len) = get(app, uri, &[("if-none-match", "\"other\", W/\"x\"")]).await;
    assert_eq!(s, StatusCode::OK, "{uri}: a tag that does not match");
    assert!(len > 0);
    tag
}

async fn not_modified_count(app: &Router) -> f64 {
    let r = app
        .clone()
        .oneshot(Request::get("/metrics").body(Body::empty()).expect("req"))
        .await
        .expect("metrics");
    let text = axum::body::to_bytes(r.into_body(), 1 << 22)
        .await
        .expect("body");
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| l.starts_with("wr_http_not_modified_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn status_document_answers_304_to_a_matching_if_none_match() {
    let (app, clock, st) = app().await;
    let before = not_modified_count(&app).await;
    let tag = answers_304_to_matching_tags(&app, "/status/demo.json").await;
    assert!(
        not_modified_count(&app).await >= before + 4.0,
        "304s counted"
    );

    // Rebuilt a few seconds later with nothing changed: the same document and tag.
    let event = waiting_room::domain::EventId::parse("demo").expect("id");
    clock.advance_ms(5000);
    st.refresh_status(&event).await.expect("rebuilt");
    let (s, _, _) = get(&app, "/status/demo.json", &[("if-none-match", &tag)]).await;
    assert_eq!(
        s,
        StatusCode::NOT_MODIFIED,
        "an unchanged document keeps its tag"
    );

    // A state change: a new tag, and the old one gets the whole new document.
    let close = Request::post("/admin/events/demo/close")
        .header(header::AUTHORIZATION, "Bearer demo-admin-token")
        .body(Body::empty())
        .expect("req");
    let r = app.clone().oneshot(close).await.expect("close");
    assert_eq!(r.status(), StatusCode::OK, "closed");
    let (s, h, _) = get(&app, "/status/demo.json", &[("if-none-match", &tag)]).await;
    assert_eq!(s, StatusCode::OK, "a changed document is sent whole");
    assert_ne!(etag(&h), tag, "a changed document has a new tag");
}

#[tokio::test]
async fn static_files_answer_304_to_a_matching_if_none_match() {
    let (app, _, _) = app().await;
    for uri in ["/wait.js", "/clock.js", "/index.html"] {
        let tag = answers_304_to_matching_tags(&app, uri).await;
        let (_, h, _) = get(&app, uri, &[]).await;
        assert!(
            h.contains_key(header::LAST_MODIFIED),
            "{uri}: Last-Modified"
        );
        // If-None-Match decides over If-Modified-Since (RFC 9110 §13.2.2).
        let lm = h[header::LAST_MODIFIED].to_str().expect("ascii").to_owned();
        let (s, _, _) = get(
            &app,
            uri,
            &[("if-none-match", "\"other\""), ("if-modified-since", &lm)],
        )
        .await;
        assert_eq!(
            s,
            StatusCode::OK,
            "{uri}: a non-matching tag wins over the date"
        );
        let (s, _, _) = get(
            &app,
            uri,
            &[("if-none-match", &tag), ("if-modified-since", &lm)],
        )
        .await;
        assert_eq!(s, StatusCode::NOT_MODIFIED, "{uri}");
    }
}

/// Newcomer review: a path segment past the file system's name limit answered 500 (the file
/// server's `ENAMETOOLONG`), with the static files' `public, max-age=60`; it is a 404 problem,
/// and a real page is still served.
#[tokio::test]
async fn a_file_name_past_the_limit_is_a_404() {
    let (app, _, _) = app().await;
    for uri in [
        format!("/{}.html", "A".repeat(300)),
        format!("/{}/x.css", "A".repeat(256)),
    ] {
        let (s, h, _) = get(&app, &uri, &[]).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{uri}");
        assert_eq!(h[header::CONTENT_TYPE], "application/problem+json");
    }
    let (s, _, _) = get(&app, "/index.html", &[]).await;
    assert_eq!(s, StatusCode::OK);
}
