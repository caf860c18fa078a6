//! Operator API (API.md "admin"): bearer admin token compared in constant time; create events,
//! change admit rate and `max_active` live, pause/resume/open/close/sold-out, read figures and
//! the audit trail. Every change is recorded in the store's audit trail (who = `X-Operator`,
//! what, old value, new value, when) and republishes the status document at once.

use super::error::{bounded, query_problem};
use super::{parse_event, private_json, transitions, AppState};
use crate::domain::{AuditEntry, EventId, EventMeta, EventState};
use crate::http::openapi::ProblemDoc;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The admin routes, behind the admin-token check.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin/events", get(list).post(create))
        .route("/admin/events/{event}", get(figures).patch(patch))
        .route("/admin/events/{event}/audit", get(audit))
        .route(
            "/admin/events/{event}/broadcast",
            axum::routing::put(super::broadcast::set).delete(super::broadcast::clear),
        )
        .route(
            "/admin/events/{event}/mode",
            axum::routing::put(super::mode::set),
        )
        .route(
            "/admin/events/{event}/phases",
            axum::routing::put(super::phases::set).delete(super::phases::clear),
        )
        .route("/admin/events/{event}/report", get(super::report::json))
        .route("/admin/events/{event}/report.csv", get(super::report::csv))
        .route("/admin/events/{event}/report.png", get(super::report::png))
        .route("/admin/events/{event}/pause", post(transitions::pause))
        .route("/admin/events/{event}/resume", post(transitions::resume))
        .route("/admin/events/{event}/open", post(transitions::open))
        .route("/admin/events/{event}/close", post(transitions::close))
        .route(
            "/admin/events/{event}/sold-out",
            post(transitions::sold_out),
        )
        .route_layer(middleware::from_fn_with_state(state, require_admin))
}

/// Constant-time comparison of a bearer token with the expected one (hashing both sides makes
/// the time independent of the lengths). An empty token never matches.
pub fn token_matches(given: &str, expected: &str) -> bool {
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    !given.is_empty() && bool::from(a.ct_eq(&b))
}

pub(crate) async fn require_admin(
    State(st): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let given = sale_common::secret::bearer(req.headers());
    if !token_matches(given, st.0.config.admin_token.expose()) {
        return axum::response::IntoResponse::into_response(Problem::unauthorized(
            "admin-token-required",
            "send Authorization: Bearer <admin token>",
        ));
    }
    next.run(req).await
}

/// The operator's name from `X-Operator` (1..=64 visible ASCII chars); `unnamed` when the
/// header is absent; 400 when present but not such a name.
pub(crate) fn operator(headers: &HeaderMap) -> Result<String, Problem> {
    let Some(v) = headers.get("x-operator") else {
        return Ok("unnamed".to_owned());
    };
    let b = v.as_bytes();
    if b.is_empty() || b.len() > 64 || !b.iter().all(u8::is_ascii_graphic) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-operator",
            "Invalid X-Operator",
        )
        .detail("X-Operator must be 1..=64 visible ASCII characters"));
    }
    Ok(String::from_utf8_lossy(b).into_owned())
}

/// Records one action; a failure to record is logged (the change itself is already done).
pub async fn record(st: &AppState, event: &EventId, who: &str, what: &str, old: Value, new: Value) {
    let entry = AuditEntry {
        at: st.0.clock.now_secs(),
        operator: who.to_owned(),
        action: what.to_owned(),
        old,
        new,
    };
    tracing::info!(event = %event, operator = who, action = what, old = %entry.old, new = %entry.new, "operator change");
    let write = st.0.store.audit_append(event, &entry);
    if let Err(e) = bounded(st.store_timeout(), write).await {
        tracing::error!(event = %event, action = what, error = %e.title, "audit entry not stored");
    }
}

pub(crate) async fn figures_json(st: &AppState, event: &EventId) -> Result<Value, Problem> {
    let f = st
        .figures(event)
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    let doc = st.publish(&f);
    let mut v = serde_json::to_value(doc).map_err(|_| Problem::internal())?;
    v["admitted_total"] = f.admitted_total.into();
    v["max_active_seen"] = f.max_active_seen.into();
    v["last_number"] = f.last_number.into();
    v["prequeued"] = f.prequeued.into();
    v["silent_in_window"] = f.silent.into();
    v["returning"] = f.returning.into();
    v["skipped_total"] = f.skipped_total.into();
    v["sessions_ended_total"] = f.ended_total.into();
    v["internal_state"] = f.meta.state.as_str().into();
    // The zone the console shows the opening in: the configured event's, else the event's own
    // (given at creation; API.md "Events").
    let configured = st.0.config.events.iter().find(|e| &e.id == event);
    v["time_zone"] = configured
        .map_or(f.meta.time_zone.as_str(), |e| e.time_zone.as_str())
        .into();
    Ok(v)
}

#[utoipa::path(
    get,
    path = "/admin/events",
    tag = "admin",
    summary = "Figures of every event",
    responses(
        (status = 200, description = "list of figures", body = Vec<Object>),
        (status = 401, body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn list(State(st): State<AppState>) -> Result<Response, Problem> {
    let ids = bounded(st.store_timeout(), st.0.store.list_events()).await?;
    let mut out = Vec::new();
    for id in ids {
        out.push(figures_json(&st, &id).await?);
    }
    Ok(private_json(StatusCode::OK, Value::Array(out)))
}

/// Body of `POST /admin/events`; unknown fields are refused (422).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEvent {
    id: String,
    /// Unix seconds, an RFC 3339 instant, or a local wall-clock time read in `time_zone`.
    opens_at: super::opening::OpensAt,
    /// IANA zone of a local `opens_at` (default: the configured event's `time_zone`, else UTC).
    time_zone: Option<String>,
    admit_rate: f64,
    max_active: u64,
    admission_ttl_secs: Option<u64>,
    booking_url: Option<String>,
}

fn unprocessable(detail: impl Into<String>) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid-body",
        "Invalid request body",
    )
    .detail(detail)
}

/// Highest admit rate, fans per second.
pub const MAX_ADMIT_RATE: f64 = 1_000_000.0;
/// Longest admission-token lifetime, seconds (one day).
pub const MAX_ADMISSION_TTL_SECS: u64 = 86_400;
/// How far `opens_at` may lie from now, seconds (one year).
pub const OPENS_AT_SPAN_SECS: i64 = 366 * 86_400;

fn check_rate(r: f64) -> Result<f64, Problem> {
    if r.is_finite() && r > 0.0 && r <= MAX_ADMIT_RATE {
        Ok(r)
    } else {
        Err(unprocessable("admit_rate must be a number in (0, 1000000]"))
    }
}

fn check_max_active(m: u64) -> Result<u64, Problem> {
    if m >= 1 {
        Ok(m)
    } else {
        Err(unprocessable("max_active must be >= 1"))
    }
}

fn check_ttl(t: u64) -> Result<u64, Problem> {
    if (1..=MAX_ADMISSION_TTL_SECS).contains(&t) {
        Ok(t)
    } else {
        Err(unprocessable("admission_ttl_secs must be in 1..=86400"))
    }
}

fn check_opens_at(opens_at: i64, now: i64) -> Result<i64, Problem> {
    let lo = now.saturating_sub(OPENS_AT_SPAN_SECS);
    let hi = now.saturating_add(OPENS_AT_SPAN_SECS);
    if (lo..=hi).contains(&opens_at) {
        Ok(opens_at)
    } else {
        Err(unprocessable(
            "opens_at (Unix seconds) must be within one year of now",
        ))
    }
}

/// An absolute `http`/`https` URL with a host (it becomes a form action on fans' pages).
fn check_booking_url(u: &str) -> Result<String, Problem> {
    let bad = || unprocessable("booking_url must be an absolute http(s) URL");
    let parsed = reqwest::Url::parse(u).map_err(|_| bad())?;
    let ok = matches!(parsed.scheme(), "http" | "https")
        && parsed.host_str().is_some_and(|h| !h.is_empty())
        && u.len() <= 2048;
    if ok {
        Ok(u.to_owned())
    } else {
        Err(bad())
    }
}

#[utoipa::path(
    post,
    path = "/admin/events",
    tag = "admin",
    summary = "Create an event",
    request_body = CreateEvent,
    responses(
        (status = 201, description = "figures", body = Object),
        (status = 409, description = "exists", body = ProblemDoc),
        (status = 422, description = "value out of range or unknown field (invalid-body); opens_at a local time in a DST gap (nonexistent-local-time) or an ambiguous fall-back hour without an offset (ambiguous-local-time, with candidate_offsets), or unreadable (invalid-local-time); unknown time_zone (invalid-time-zone)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn create(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<JsonObject<CreateEvent>, Problem>,
) -> Result<Response, Problem> {
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    let id = EventId::parse(&b.id).ok_or_else(|| unprocessable("id must match [a-z0-9-]{1,40}"))?;
    let default_url = st.0.config.events.first().map(|e| e.booking_url.clone());
    let booking_url = match b.booking_url {
        Some(u) => check_booking_url(&u)?,
        None => default_url.unwrap_or_default(),
    };
    let configured = st.0.config.events.iter().find(|e| e.id == id);
    let zone = super::opening::zone_of(
        b.time_zone.as_deref(),
        configured.map(|e| e.time_zone.as_str()),
    )?;
    let opens_at = super::opening::to_unix(&b.opens_at, &zone)?;
    let meta = EventMeta {
        id: id.clone(),
        state: EventState::Prequeue,
        opens_at: check_opens_at(opens_at, st.0.clock.now_secs())?,
        admit_rate: check_rate(b.admit_rate)?,
        max_active: check_max_active(b.max_active)?,
        admission_ttl_secs: check_ttl(b.admission_ttl_secs.unwrap_or(600))?,
        booking_url,
        pow_bits: 0,
        stock_wait: 0,
        time_zone: zone.clone(),
    };
    if !bounded(st.store_timeout(), st.0.store.create_event(&meta)).await? {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "event-exists",
            "Event exists",
        ));
    }
    let new = json!({"opens_at": meta.opens_at, "time_zone": zone, "admit_rate": meta.admit_rate,
        "max_active": meta.max_active, "admission_ttl_secs": meta.admission_ttl_secs});
    record(&st, &id, &who, "create", Value::Null, new).await;
    Ok(private_json(
        StatusCode::CREATED,
        figures_json(&st, &id).await?,
    ))
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}",
    tag = "admin",
    summary = "Live figures: the status document plus counters",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn figures(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}

/// Query of `GET /admin/events/{event}/audit`.
#[derive(Debug, Deserialize)]
pub struct AuditQuery {
    limit: Option<usize>,
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}/audit",
    tag = "admin",
    summary = "The audit trail, oldest first",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}"), ("limit" = Option<usize>, Query, description = "last N entries (default 100)")),
    responses(
        (status = 200, description = "entries", body = Vec<AuditEntry>),
        (status = 400, description = "malformed query", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn audit(
    State(st): State<AppState>,
    Path(event): Path<String>,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let Query(q) = q.map_err(query_problem)?;
    let limit = q.limit.unwrap_or(100).clamp(1, crate::store::AUDIT_KEEP);
    let entries = bounded(st.store_timeout(), st.0.store.audit(&event, limit)).await?;
    let body = serde_json::to_value(entries).map_err(|_| Problem::internal())?;
    Ok(private_json(StatusCode::OK, body))
}

/// Body of `PATCH /admin/events/{event}`: each member left out keeps its value; unknown
/// members and `null` are refused (422: `"admit_rate": null` used to be read as left out).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchEvent {
    /// Admissions per second, in (0, 1000000].
    #[serde(default, deserialize_with = "sale_common::body::present")]
    admit_rate: Option<f64>,
    /// Most live admissions at once.
    #[serde(default, deserialize_with = "sale_common::body::present")]
    max_active: Option<u64>,
    /// Proof-of-work difficulty, leading zero bits.
    #[serde(default, deserialize_with = "sale_common::body::present")]
    pow_difficulty: Option<u32>,
}

#[utoipa::path(
    patch,
    path = "/admin/events/{event}",
    tag = "admin",
    summary = "Change admit rate, max_active, proof-of-work difficulty (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = PatchEvent,
    responses(
        (status = 200, description = "figures", body = Object),
        (status = 422, description = "value out of range or unknown field", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn patch(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<PatchEvent>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    let rate = b.admit_rate.map(check_rate).transpose()?;
    let max_active = b.max_active.map(check_max_active).transpose()?;
    let limit = st.store_timeout();
    let old = bounded(limit, st.0.store.event(&event))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    if b.pow_difficulty.is_some_and(|d| d > crate::pow::MAX_BITS) {
        return Err(unprocessable("pow_difficulty: 0..=28 bits"));
    }
    bounded(limit, st.0.store.set_knobs(&event, rate, max_active)).await?;
    // A value set to what it already is changes nothing, so it leaves no audit entry.
    if let Some(d) = b.pow_difficulty.filter(|d| *d != old.pow_bits) {
        bounded(limit, st.0.store.set_pow(&event, d)).await?;
        record(
            &st,
            &event,
            &who,
            "set_pow_difficulty",
            old.pow_bits.into(),
            d.into(),
        )
        .await;
    }
    if let Some(r) = rate.filter(|r| *r != old.admit_rate) {
        record(
            &st,
            &event,
            &who,
            "set_admit_rate",
            old.admit_rate.into(),
            r.into(),
        )
        .await;
    }
    if let Some(m) = max_active.filter(|m| *m != old.max_active) {
        record(
            &st,
            &event,
            &who,
            "set_max_active",
            old.max_active.into(),
            m.into(),
        )
        .await;
    }
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}
