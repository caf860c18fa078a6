//! Key names and reply parsing of the Redis backend (replies travel as strings: numbers stay
//! exact integers, states and admissions are parsed here, anything unexpected is `Unavailable`).

use crate::domain::{Admission, EventId, EventMeta, EventState};
use crate::store::{StoreError, StoreResult};
use std::collections::HashMap;

pub(super) fn err(e: redis::RedisError) -> StoreError {
    if e.code() == Some("OOM") {
        return StoreError::Full(e.to_string());
    }
    StoreError::Unavailable(e.to_string())
}

pub(super) fn bad(what: &str) -> StoreError {
    StoreError::Unavailable(format!("unexpected store reply: {what}"))
}

pub(super) fn key(event: &EventId, part: &str) -> String {
    format!("wr:{{{event}}}:{part}")
}

pub(super) fn parse_u64(s: &str) -> StoreResult<u64> {
    s.parse().map_err(|_| bad(s))
}

pub(super) fn opt_number(s: &str) -> StoreResult<Option<u64>> {
    if s.is_empty() {
        Ok(None)
    } else {
        parse_u64(s).map(Some)
    }
}

pub(super) fn state_of(s: &str) -> StoreResult<EventState> {
    EventState::parse(s).ok_or_else(|| bad(s))
}

pub(super) fn parse_admission(rec: &str) -> StoreResult<Admission> {
    let mut it = rec.split(' ');
    let (Some(jti), Some(iat), Some(exp)) = (it.next(), it.next(), it.next()) else {
        return Err(bad(rec));
    };
    Ok(Admission {
        jti: jti.to_owned(),
        iat: iat.parse().map_err(|_| bad(rec))?,
        exp: exp.parse().map_err(|_| bad(rec))?,
    })
}

pub(super) fn parse_meta(id: &EventId, h: &HashMap<String, String>) -> StoreResult<EventMeta> {
    let get = |k: &str| h.get(k).map(String::as_str).ok_or_else(|| bad(k));
    Ok(EventMeta {
        id: id.clone(),
        state: state_of(get("state")?)?,
        opens_at: get("opens_at")?.parse().map_err(|_| bad("opens_at"))?,
        admit_rate: get("admit_rate")?.parse().map_err(|_| bad("admit_rate"))?,
        max_active: parse_u64(get("max_active")?)?,
        admission_ttl_secs: parse_u64(get("ttl")?)?,
        booking_url: get("booking_url")?.to_owned(),
        pow_bits: h
            .get("pow")
            .map_or(Ok(0), |p| p.parse().map_err(|_| bad("pow")))?,
        stock_wait: h
            .get("stock_wait")
            .map_or(Ok(0), |p| p.parse().map_err(|_| bad("stock_wait")))?,
        // Events created before the field read as UTC, its default.
        time_zone: h.get("time_zone").map_or("UTC", String::as_str).to_owned(),
    })
}

/// The broadcast message stored as JSON in the meta hash (`None` when absent or empty).
pub(super) fn broadcast_of(
    json: Option<&String>,
) -> StoreResult<Option<crate::broadcast::Broadcast>> {
    match json.filter(|j| !j.is_empty()) {
        Some(j) => serde_json::from_str(j)
            .map(Some)
            .map_err(|_| bad("broadcast")),
        None => Ok(None),
    }
}

/// The queue mode stored in the meta hash (`scheduled` when absent or empty).
pub(super) fn mode_of(s: Option<&String>) -> StoreResult<crate::mode::QueueMode> {
    match s.filter(|s| !s.is_empty()) {
        Some(m) => crate::mode::QueueMode::parse(m).ok_or_else(|| bad("mode")),
        None => Ok(crate::mode::QueueMode::Scheduled),
    }
}

/// The schedule stored as JSON in the meta hash (`None` when absent or empty).
pub(super) fn phases_of(json: Option<&String>) -> StoreResult<Option<crate::phases::Phases>> {
    match json.filter(|j| !j.is_empty()) {
        Some(j) => serde_json::from_str(j).map(Some).map_err(|_| bad("phases")),
        None => Ok(None),
    }
}
