//! One in-process request against a router (`tower::ServiceExt::oneshot`), shared by the
//! router-level test files: method, URI, headers and an optional JSON body in; status and JSON
//! body (`Null` when the body is not JSON) out.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt;

/// Sends one request to `app` and reads the whole answer (at most 1 MiB).
pub async fn call(
    app: &Router,
    m: &str,
    uri: &str,
    h: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut b = Request::builder().method(m).uri(uri);
    for (k, v) in h {
        b = b.header(*k, *v);
    }
    let body = match body {
        Some(v) => {
            b = b.header("content-type", "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    let r = app
        .clone()
        .oneshot(b.body(body).expect("req"))
        .await
        .expect("call");
    let s = r.status();
    let bytes = axum::body::to_bytes(r.into_body(), 1 << 20)
        .await
        .expect("body");
    (s, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}
