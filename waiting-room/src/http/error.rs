//! Mapping store failures to problem+json: unknown event → 404, store trouble or a store call
//! past its time bound → 503 with `Retry-After` (DESIGN.md "When the store fails"). Causes are
//! logged once here and never echoed to the client.

use crate::store::{StoreError, StoreResult};
use sale_common::Problem;
use std::future::Future;
use std::time::Duration;

/// `Retry-After` on store trouble, seconds.
pub const RETRY_AFTER_SECS: u64 = 2;

/// The problem for a store error.
pub fn store_problem(e: StoreError) -> Problem {
    match e {
        StoreError::NotFound => Problem::not_found("no such event"),
        StoreError::Unavailable(cause) => {
            tracing::warn!(%cause, "queue store unavailable");
            crate::telemetry::store_error("request");
            Problem::unavailable(
                "the queue is unavailable for a moment, retry shortly",
                RETRY_AFTER_SECS,
            )
        }
        StoreError::Full(cause) => {
            tracing::warn!(%cause, "queue store at its memory cap: new places refused");
            metrics::counter!("wr_store_full_total").increment(1);
            Problem::unavailable(
                "the queue is full for now, retry shortly",
                RETRY_AFTER_SECS * 5,
            )
        }
    }
}

/// Runs a store call within `limit`; a timeout is a 503 like any store failure.
pub async fn bounded<T>(
    limit: Duration,
    fut: impl Future<Output = StoreResult<T>>,
) -> Result<T, Problem> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r.map_err(store_problem),
        Err(_) => Err(store_problem(StoreError::Unavailable(format!(
            "store call exceeded {} ms",
            limit.as_millis()
        )))),
    }
}

pub use sale_common::problem::{clip, ECHO_MAX};

/// A query-string rejection as a 400 problem, its detail clipped to [`ECHO_MAX`] characters.
pub fn query_problem(r: axum::extract::rejection::QueryRejection) -> Problem {
    let mut p = Problem::from(r);
    p.detail = p.detail.as_deref().map(clip);
    p
}
