//! Static files: a request path that cannot name a file is a 404 before the file server sees it.
//!
//! tower-http's `ServeDir` answers an I/O error other than "not found" with a bare 500, and a
//! path segment longer than the file system's name limit is one (`ENAMETOOLONG`, os error 36,
//! past 255 bytes on Linux's file systems; a whole path past 4096 bytes likewise). Newcomer
//! review, 2026-12-05: `GET /` + 300 × `A` + `.html` answered 500 on both services, with no token
//! needed, and the waiting room's 500 carried its static files' `public, max-age=60`.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::problem::Problem;

/// Longest path segment, bytes, that can name a file (`NAME_MAX` of Linux's file systems).
pub const NAME_MAX: usize = 255;
/// Longest path, bytes, that can name a file (`PATH_MAX` on Linux).
pub const PATH_MAX: usize = 4096;

/// Whether `path` (as sent, percent-encoded) may name a file: no segment over [`NAME_MAX`]
/// bytes and the whole under [`PATH_MAX`]. Encoded lengths are at least the decoded ones, so
/// every path the file system would refuse as too long is refused here.
pub fn nameable(path: &str) -> bool {
    path.len() < PATH_MAX && path.split('/').all(|s| s.len() <= NAME_MAX)
}

/// Middleware for a static-file service: a path that is not [`nameable`] is a 404 problem
/// (`no such page`), never passed on.
pub async fn names_fit(req: Request, next: Next) -> Response {
    if nameable(req.uri().path()) {
        next.run(req).await
    } else {
        Problem::not_found("no such page").into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_file_systems_limits_are_not_nameable() {
        assert!(nameable("/index.html"));
        assert!(nameable(&format!("/{}", "a".repeat(NAME_MAX))));
        assert!(!nameable(&format!("/{}.html", "A".repeat(300))));
        assert!(!nameable(&format!("/{}/x.css", "A".repeat(256))));
        assert!(!nameable(&"/a".repeat(PATH_MAX / 2)));
    }
}
