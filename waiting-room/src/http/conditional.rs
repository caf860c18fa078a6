//! Conditional GET (RFC 9110 §13): a `GET`/`HEAD` whose `If-None-Match` matches the answer's
//! `ETag` (weak comparison, §13.1.2) gets `304 Not Modified` with the validators and caching
//! headers but no body, so a CDN revalidating its copy costs the origin a few header bytes.
//! Static files get an `ETag` here from the `Last-Modified` and length that `ServeDir` gives
//! (tower-http's `ServeDir` answers `If-Modified-Since` but writes no `ETag`). Counted in
//! `wr_http_not_modified_total{route}`.

use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
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

/// The middleware: answers `304` when the request's `If-None-Match` matches the response's
/// `ETag`. When `If-None-Match` is present, `If-Modified-Since` is removed before the handler
/// sees it (§13.2.2: the entity tag decides).
pub async fn not_modified(mut req: Request, next: Next) -> Response {
    let conditional = matches!(*req.method(), Method::GET | Method::HEAD);
    let inm = conditional
        .then(|| req.headers().get(header::IF_NONE_MATCH).cloned())
        .flatten();
    if inm.is_some() {
        req.headers_mut().remove(header::IF_MODIFIED_SINCE);
    }
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("other", |p| p.as_str())
        .to_owned();
    let resp = next.run(req).await;
    let Some(inm) = inm else { return resp };
    let hit = resp.status() == StatusCode::OK
        && resp
            .headers()
            .get(header::ETAG)
            .is_some_and(|e| none_match_hits(&inm, e));
    if !hit {
        return resp;
    }
    metrics::counter!("wr_http_not_modified_total", "route" => route).increment(1);
    let mut headers = HeaderMap::new();
    for name in [
        header::ETAG,
        header::CACHE_CONTROL,
        header::LAST_MODIFIED,
        header::VARY,
        header::EXPIRES,
        header::CONTENT_LOCATION,
    ] {
        if let Some(v) = resp.headers().get(&name) {
            headers.insert(name, v.clone());
        }
    }
    (StatusCode::NOT_MODIFIED, headers).into_response()
}

/// Adds a strong `ETag` to a static file's `200`/`206` from its `Last-Modified` and length (the
/// way nginx makes one): the same file answers the same tag on every node.
pub fn static_etag<B>(mut resp: axum::http::Response<B>) -> axum::http::Response<B> {
    let h = resp.headers();
    if resp.status() != StatusCode::OK || h.contains_key(header::ETAG) {
        return resp;
    }
    let (Some(lm), Some(len)) = (h.get(header::LAST_MODIFIED), h.get(header::CONTENT_LENGTH))
    else {
        return resp;
    };
    let mut seed = lm.as_bytes().to_vec();
    seed.push(b'/');
    seed.extend_from_slice(len.as_bytes());
    let etag = crate::status::etag_of(&seed);
    resp.headers_mut().insert(header::ETAG, etag);
    resp
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
