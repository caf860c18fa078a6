//! Conditional GET for the waiting room: the `304` itself is answered by
//! [`sale_common::conditional::not_modified`] (weak comparison of `If-None-Match` with the
//! answer's `ETag`, RFC 9110 §13.1.2), counted in `wr_http_not_modified_total{route}` ([`CONFIG`]).
//! Static files get an `ETag` here from the `Last-Modified` and length that `ServeDir` gives
//! (tower-http's `ServeDir` answers `If-Modified-Since` but writes no `ETag`).

use axum::http::{header, StatusCode};
use sale_common::conditional::NotModified;

/// The shared middleware's settings for the waiting room.
pub const CONFIG: NotModified = NotModified {
    metric: "wr_http_not_modified_total",
    keep: &[],
};

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
