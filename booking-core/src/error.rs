//! One error type for the booking API (STYLE.md rule 6): client errors are specific problems;
//! database and unexpected errors are logged once and answered without details.

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
                Problem::unavailable("the booking database is busy", 1).into_response()
            }
            ApiError::Db(sqlx::Error::Database(e)) if retryable(e.code().as_deref()) => {
                // PostgreSQL serialization failure (40001) or deadlock (40P01): nothing was
                // committed; the client may simply retry.
                tracing::warn!(error = %e, "database conflict; client asked to retry");
                Problem::unavailable("the booking database had a conflict; try again", 1)
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

/// PostgreSQL SQLSTATEs that mean "nothing happened, try again" (serialization failure,
/// deadlock detected), answered 503 + Retry-After, never 500.
fn retryable(code: Option<&str>) -> bool {
    matches!(code, Some("40001") | Some("40P01"))
}

/// Result alias for handlers and services.
pub type ApiResult<T> = Result<T, ApiError>;
