//! The event opening an operator gives to `POST /admin/events` (issue 17 item 4): Unix seconds,
//! an RFC 3339 instant, or a local wall-clock time read in the event's IANA `time_zone`
//! (`sale_common::localtime`: a time in a spring-forward gap or an ambiguous fall-back hour
//! without an offset is a 422 naming the gap or both candidate offsets).

use axum::http::StatusCode;
use sale_common::localtime::{self, LocalTimeError};
use sale_common::Problem;
use serde::Deserialize;

/// `opens_at` as given: Unix seconds, or text (`2026-10-25T19:00`, `2026-10-25T19:00+01:00`).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum OpensAt {
    /// Unix seconds.
    Unix(i64),
    /// RFC 3339 instant with an offset, or a local wall-clock time `YYYY-MM-DDTHH:MM[:SS]`.
    Text(String),
}

/// The zone an event's local times are read in: `given` (checked), else the configured
/// event's `time_zone`, else UTC. Unknown name → 422 `invalid-time-zone`.
pub fn zone_of(given: Option<&str>, configured: Option<&str>) -> Result<String, Problem> {
    let zone = given.or(configured).unwrap_or("UTC");
    localtime::zone(zone).map_err(|e| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-time-zone",
            "Unknown time zone",
        )
        .detail(e.to_string())
    })?;
    Ok(zone.to_owned())
}

/// `opens_at` in Unix seconds, reading a local time in `zone`; 422 problem+json kinds
/// `nonexistent-local-time`, `ambiguous-local-time` (with `candidate_offsets`) or
/// `invalid-local-time`.
pub fn to_unix(opens_at: &OpensAt, zone: &str) -> Result<i64, Problem> {
    match opens_at {
        OpensAt::Unix(s) => Ok(*s),
        OpensAt::Text(t) => localtime::to_instant(t, zone)
            .map(|ts| ts.as_second())
            .map_err(|e| problem(&e, zone)),
    }
}

fn problem(e: &LocalTimeError, zone: &str) -> Problem {
    let title = match e {
        LocalTimeError::Nonexistent { .. } => "This local time does not exist",
        LocalTimeError::Ambiguous { .. } => "This local time happens twice",
        LocalTimeError::Invalid(_) => "Invalid opening time",
    };
    let p = Problem::new(StatusCode::UNPROCESSABLE_ENTITY, e.kind(), title)
        .detail(format!("opens_at: {e}"))
        .with("time_zone", zone);
    match e.candidate_offsets() {
        Some(offsets) => p.with("candidate_offsets", offsets.to_vec()),
        None => p,
    }
}
