//! Conditional GET (RFC 9110 §13), for both services: a `GET`/`HEAD` whose `If-None-Match`
//! matches the answer's `ETag` (weak comparison, §13.1.2) gets `304 Not Modified` with the
//! validators and caching headers but no body, so a CDN or a browser revalidating its copy
//! costs the origin a few header bytes. A handler opts in by writing an `ETag` on its `200`;
//! the middleware [`not_modified`] does the rest. Counted in the service's counter named by
//! [`NotModified::metric`], labelled by route.

use axum::body::HttpBody;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Whether an `If-None-Match` value matches `etag` under the weak comparison: `*`, or any
/// listed entity tag whose opaque part equals the ETag's, ignoring `W/` on either side.
pub fn none_match_hits(if_none_match: &HeaderValue, etag: &HeaderValue) -> bool {
    let (Ok(list), Ok(etag)) = (if_none_match.to_str(), etag.to_str()) else {
        return false;
    };
    let opaque = |t: &str| -> String {
        let t = t.trim();
        t.strip_prefix("W/").unwrap_or(t).to_owned()
    };
    let ours = opaque(etag);
    list.trim() == "*" || list.split(',').any(|t| opaque(t) == ours)
}

/// The middleware's settings (its state): the counter a `304` increments, and the service's
/// own headers a `304` keeps beside the standard ones (§15.4.5: `ETag`, `Cache-Control`,
/// `Expires`, `Vary`, `Content-Location`, plus `Last-Modified`), for headers that guide a
/// cache's update of what it holds (the booking core's `Seat-Map-Age-Ms`).
#[derive(Debug, Clone, Copy)]
pub struct NotModified {
    /// Prometheus counter name, e.g. `wr_http_not_modified_total`.
    pub metric: &'static str,
    /// Extra headers (lower-case names) copied from the `200` into the `304`.
    pub keep: &'static [&'static str],
}

/// The standard headers a `304` carries over from the `200` it stands for (RFC 9110 §15.4.5).
const STANDARD: [HeaderName; 6] = [
    header::ETAG,
    header::CACHE_CONTROL,
    header::LAST_MODIFIED,
    header::VARY,
    header::EXPIRES,
    header::CONTENT_LOCATION,
];

/// The middleware: answers `304` when the request's `If-None-Match` matches the response's
/// `ETag`. When `If-None-Match` is present, `If-Modified-Since` is removed before the handler
/// sees it (§13.2.2: the entity tag decides). Use with
/// `axum::middleware::from_fn_with_state(NotModified { … }, not_modified)`.
pub async fn not_modified(
    State(cfg): State<NotModified>,
    mut req: Request,
    next: Next,
) -> Response {
    let conditional = matches!(*req.method(), Method::GET | Method::HEAD);
    let head = req.method() == Method::HEAD;
    // Every `If-None-Match` line: two lines mean their comma-joined list (RFC 9110 §5.3).
    let inm: Vec<HeaderValue> = if conditional {
        req.headers()
            .get_all(header::IF_NONE_MATCH)
            .iter()
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    if !inm.is_empty() {
        req.headers_mut().remove(header::IF_MODIFIED_SINCE);
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("other", |p| p.as_str())
        .to_owned();
    let resp = next.run(req).await;
    if inm.is_empty() {
        return resp;
    }
    let hit = resp.status() == StatusCode::OK
        && resp
            .headers()
            .get(header::ETAG)
            .is_some_and(|e| inm.iter().any(|line| none_match_hits(line, e)));
    if !hit {
        return resp;
    }
    metrics::counter!(cfg.metric, "route" => route).increment(1);
    let mut headers = HeaderMap::new();
    for name in STANDARD {
        if let Some(v) = resp.headers().get(&name) {
            headers.insert(name, v.clone());
        }
    }
    for name in cfg.keep {
        if let (Some(v), Ok(name)) = (
            resp.headers().get(*name),
            HeaderName::from_bytes(name.as_bytes()),
        ) {
            headers.insert(name, v.clone());
        }
    }
    // A `HEAD`'s `304` carries the `200`'s length (RFC 9110 §8.6 allows no other value):
    // without it axum's router writes the empty `304`'s own `Content-Length: 0`, which hyper
    // sends for a `HEAD`. For a `GET` hyper drops that `0` (and warns of any other value).
    if head {
        let length = resp
            .headers()
            .get(header::CONTENT_LENGTH)
            .cloned()
            .or_else(|| resp.body().size_hint().exact().map(HeaderValue::from));
        if let Some(length) = length {
            headers.insert(header::CONTENT_LENGTH, length);
        }
    }
    (StatusCode::NOT_MODIFIED, headers).into_response()
}

#[cfg(test)]
mod tests {
    use super::none_match_hits;
    use axum::http::HeaderValue;

    fn hits(inm: &str, etag: &str) -> bool {
        none_match_hits(
            &HeaderValue::from_str(inm).expect("inm"),
            &HeaderValue::from_str(etag).expect("etag"),
        )
    }

    #[test]
    fn weak_comparison_of_entity_tags() {
        assert!(hits("\"abc\"", "\"abc\""));
        assert!(hits("W/\"abc\"", "\"abc\""));
        assert!(hits("\"abc\"", "W/\"abc\""));
        assert!(hits("W/\"abc\"", "W/\"abc\""));
        assert!(hits("\"x\", W/\"abc\" ,\"y\"", "\"abc\""));
        assert!(hits("*", "\"abc\""));
        assert!(!hits("\"abd\"", "\"abc\""));
        assert!(!hits("\"x\", \"y\"", "\"abc\""));
        assert!(
            !hits("abc", "\"abc\""),
            "an unquoted tag is not the same tag"
        );
    }
}
