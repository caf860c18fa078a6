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

/// Result alias for handlers and services.
pub type ApiResult<T> = Result<T, ApiError>;
