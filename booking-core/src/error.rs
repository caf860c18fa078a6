//! One error type for the booking API (STYLE.md rule 6): client errors are specific problems;
//! database and unexpected errors are logged once and answered without details.
//!
//! Layer: the bottom; imports nothing from the crate.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sale_common::Problem;

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A specific client-facing problem (4xx, or a deliberate 502/503).
    #[error("{}", .0.title)]
    Problem(Problem),
    /// Database failure: 503 + Retry-After on pool timeout, else 500.
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    /// Anything else: 500.
    #[error("unexpected: {0}")]
    Unexpected(#[from] anyhow::Error),
}

impl From<Problem> for ApiError {
    fn from(p: Problem) -> Self {
        ApiError::Problem(p)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Problem(p) => p.into_response(),
            ApiError::Db(sqlx::Error::PoolTimedOut) => {
                tracing::warn!("database pool timed out");
                unreachable_db(Problem::unavailable(
                    "the booking database did not answer in time (down, or busy)",
                    1,
                ))
            }
            ApiError::Db(sqlx::Error::Database(e)) if is_lock_wait(&*e) => {
                // A row or table lock not granted within the session's `lock_timeout` (the
                // hold requests' connections, `db::lock_wait_session`), or SQLite's write
                // lock past `busy_timeout`: the statement wrote nothing. Not an outage: the
                // gate stays open.
                tracing::warn!(error = %e, "a lock wait timed out; client asked to retry");
                lock_wait().into_response()
            }
            ApiError::Db(sqlx::Error::Database(e)) if retryable(e.code().as_deref()) => {
                // PostgreSQL serialization failure (40001) or deadlock (40P01): nothing was
                // committed; the client may simply retry.
                tracing::warn!(error = %e, "database conflict; client asked to retry");
                Problem::unavailable("the booking database had a conflict; try again", 1)
                    .into_response()
            }
            ApiError::Db(e) if connection_lost(&e) => {
                // The database went away under the request (a restart, a failover): the
                // transaction rolled back, or committed and only its answer was lost, which the
                // retry finds (idempotency keys, guarded updates). Another connection will do.
                tracing::warn!(error = %e, "database connection lost; client asked to retry");
                unreachable_db(Problem::unavailable(
                    "the booking database is not answering (restarting?); try again",
                    1,
                ))
            }
            ApiError::Db(sqlx::Error::Database(e)) if e.code().as_deref() == Some("22021") => {
                // PostgreSQL text cannot hold a NUL character (U+0000): a statement given one
                // fails before it reads anything (newcomer review: a hold id, a payment id or
                // a visitor with `%00` answered 500 on PostgreSQL). No name or id of this
                // service holds one, so it is the request's fault on every store.
                nul_text().into_response()
            }
            ApiError::Db(sqlx::Error::Database(e)) if e.code().as_deref() == Some("54000") => {
                // PostgreSQL's program_limit_exceeded: a value past what it can index (a btree
                // entry over about 2,700 bytes). Inputs are capped where they are read; this
                // is the backstop, the request's fault, with nothing written.
                tracing::warn!(error = %e, "a value past the database's limits");
                Problem::new(
                    StatusCode::BAD_REQUEST,
                    "value-too-long",
                    "A value is too long",
                )
                .detail("a value of the request is longer than the booking core can store")
                .into_response()
            }
            ApiError::Db(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => {
                tracing::warn!(error = %e, "concurrent duplicate request");
                Problem::new(
                    axum::http::StatusCode::CONFLICT,
                    "concurrent-request",
                    "The same request is being processed",
                )
                .retry_after(1)
                .into_response()
            }
            ApiError::Db(e) => {
                tracing::error!(error = %e, "database error");
                Problem::internal().into_response()
            }
            ApiError::Unexpected(e) => {
                tracing::error!(error = ?e, "unexpected error");
                Problem::internal().into_response()
            }
        }
    }
}

/// Whether a database error is a lock not granted in time: PostgreSQL's `lock_timeout`
/// (SQLSTATE 55P03), or SQLite's write lock still held by another connection or process when
/// the connection's `busy_timeout` ran out (`SQLITE_BUSY`, `SQLITE_LOCKED` and their extended
/// codes, <https://www.sqlite.org/rescode.html>: a newcomer review held `BEGIN IMMEDIATE` in
/// the `sqlite3` shell and pay, the callback, a paid hold's release, leave and an operator's
/// cancel answered 500). Either way the statement wrote nothing and a retry may succeed.
pub fn is_lock_wait(e: &(dyn sqlx::error::DatabaseError + 'static)) -> bool {
    e.code().as_deref().is_some_and(|c| {
        c == "55P03"
            // SQLite's result codes are numbers (an extended code keeps its primary code in
            // the low byte); PostgreSQL's SQLSTATEs are always five characters.
            || (c.len() < 5 && c.parse::<u32>().is_ok_and(|n| matches!(n & 0xff, 5 | 6)))
    })
}

/// Whether `e` is a statement's lock wait past the session's `lock_timeout` ([`is_lock_wait`]).
pub fn lock_waited(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if is_lock_wait(&**d))
}

impl ApiError {
    /// Whether this is a database lock wait past the session's `lock_timeout` ([`lock_waited`]):
    /// answered [`lock_wait`], nothing written.
    pub fn is_lock_wait(&self) -> bool {
        matches!(self, ApiError::Db(e) if lock_waited(e))
    }
}

/// `503` + `Retry-After: 1`: another transaction holds a lock the request waited for past the
/// limit (`Config::hold_lock_wait_ms` on PostgreSQL, the 5 s `busy_timeout` on SQLite),
/// nothing written.
pub fn lock_wait() -> Problem {
    Problem::unavailable(
        "another transaction holds a lock this request waits for (its seats, its key); try again",
        1,
    )
}

/// A response extension: this 503 came from a database that did not answer (the pool timed
/// out, or the connection was refused, lost or shut down). The HTTP layer's outage gate trips
/// on it.
#[derive(Debug, Clone, Copy)]
pub struct DbUnreachable;

fn unreachable_db(p: Problem) -> Response {
    let mut r = p.into_response();
    r.extensions_mut().insert(DbUnreachable);
    r
}

/// Whether `e` means the database did not answer ([`DbUnreachable`]).
pub fn is_unreachable(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::PoolTimedOut) || connection_lost(e)
}

/// 400 `invalid-text`: a value of the request holds a NUL character (U+0000), which no name
/// or id of the booking core holds and PostgreSQL text cannot (SQLSTATE 22021).
pub fn nul_text() -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid-text",
        "Text with a NUL character",
    )
    .detail("a value of the request holds a NUL character (U+0000); no name or id has one")
}

/// PostgreSQL SQLSTATEs that mean "nothing happened, try again" (serialization failure,
/// deadlock detected), answered 503 + Retry-After, never 500.
fn retryable(code: Option<&str>) -> bool {
    matches!(code, Some("40001") | Some("40P01"))
}

/// The connection to the database broke (reset, closed) or the server is shutting down or
/// starting (SQLSTATE class 08 connection exception, 57P01 admin shutdown, 57P02 crash
/// shutdown, 57P03 cannot connect now): answered 503 + Retry-After, never 500.
fn connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03")),
        _ => false,
    }
}

/// Result alias for handlers and services.
pub type ApiResult<T> = Result<T, ApiError>;

pub use sale_common::problem::{clip, ECHO_MAX};

/// A problem for an extractor rejection (`Query`, `Form`, `Path`, `Json`, `Bytes`) with its
/// status: 413 `payload-too-large` for a body over the limit, else `invalid-{what}` with the
/// rejection's text clipped to [`ECHO_MAX`] characters.
pub fn rejection(status: StatusCode, what: &'static str, text: &str) -> Problem {
    if status == StatusCode::PAYLOAD_TOO_LARGE || what == "body" {
        return sale_common::body::rejection(status, text);
    }
    let kind = match what {
        "query" => "invalid-query",
        "path" => "invalid-path",
        "form" => "invalid-form",
        _ => "invalid-body",
    };
    Problem::new(status, kind, format!("Invalid request {what}")).detail(clip(text))
}

/// Middleware: a request whose path or query holds a NUL character (`%00`) is
/// `400 invalid-text` ([`nul_text`]) before any handler reads it. Without it a NUL in a hold or
/// payment id was `400` on PostgreSQL (its text refuses the character) and `404` on SQLite
/// (no such id): the same request now answers the same on both stores (newcomer review).
pub async fn refuse_nul(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let has_nul = |t: &str| {
        t.as_bytes()
            .windows(3)
            .any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0')
    };
    let uri = req.uri();
    if has_nul(uri.path()) || uri.query().is_some_and(has_nul) {
        return nul_text().into_response();
    }
    next.run(req).await
}

/// Router fallback: 404 problem for an unknown route.
pub async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::not_found(format!("no route {}", clip(uri.path())))
}

/// Router method fallback: 405 problem.
pub async fn method_not_allowed(method: axum::http::Method) -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
    )
    .detail(format!(
        "{} is not allowed on this route",
        clip(method.as_str())
    ))
}

/// Safety net for every answer: [`sale_common::problem::problems_only`].
pub use sale_common::problem::problems_only;
