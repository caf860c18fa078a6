//! Interval resources over HTTP (issue 17 item 2): the free intervals of a kind
//! (`GET /api/shows/{show}/resources/{kind}`), and the edge checks of an interval hold (which
//! `POST /api/shows/{show}/holds` takes with `resource`, `start`, `end`): instants as epoch ms or
//! RFC 3339, end after start, on the kind's slot grid, inside one bookable window, a resource
//! the venue names. Each refusal is its own 422 problem; a lost claim is 409 with the
//! resource's fresh free intervals.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::Value;

use super::fan::{known_show, strict_query};
use super::openapi::ProblemDoc;
use crate::config::ShowConfig;
use crate::error::{clip, ApiResult};
use crate::inventory::claim::{unprocessable, Ask};
use crate::inventory::resources::{self, Claim};
use crate::state::AppState;
use crate::venue::resources::parse_instant;
use crate::venue::{IntervalError, Venue};

/// An instant in a request: epoch milliseconds or an RFC 3339 string with an offset.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Instant {
    /// Epoch ms.
    Millis(i64),
    /// `2026-12-31T18:00:00Z`, `2026-12-31T19:00:00+01:00`.
    Text(String),
}

impl Instant {
    fn ms(&self, field: &str) -> Result<i64, Problem> {
        match self {
            Instant::Millis(ms) => Ok(*ms),
            Instant::Text(t) => parse_instant(t).map_err(|e| {
                unprocessable("invalid-interval", "Invalid interval")
                    .detail(format!("{field}: {}", clip(&e)))
            }),
        }
    }
}

/// The show's configuration (404 when unknown).
pub(super) fn show_config<'a>(state: &'a AppState, show: &str) -> ApiResult<&'a ShowConfig> {
    known_show(state, show)?;
    state
        .config
        .shows
        .iter()
        .find(|s| s.id == show)
        .ok_or_else(|| Problem::not_found(format!("show {}", clip(show))).into())
}

/// The ask of an interval hold, checked at the edge.
pub(super) fn interval_ask(
    venue: &Venue,
    resource: &str,
    start: Option<Instant>,
    end: Option<Instant>,
) -> Result<Ask, Problem> {
    let Some(k) = venue.resource_kind_of(resource) else {
        return Err(unprocessable("unknown-resource", "Unknown resource")
            .detail(format!("the venue has no resource {}", clip(resource)))
            .with(
                "resources",
                venue
                    .resources
                    .iter()
                    .flat_map(|k| k.resources.clone())
                    .collect::<Vec<_>>(),
            ));
    };
    let (Some(start), Some(end)) = (start, end) else {
        return Err(unprocessable("invalid-interval", "Invalid interval")
            .detail("an interval hold needs start and end"));
    };
    let (start, end) = (start.ms("start")?, end.ms("end")?);
    k.check(start, end).map_err(|e| match e {
        IntervalError::Empty => unprocessable("invalid-interval", "Invalid interval")
            .detail("end must be after start (intervals are [start, end))"),
        IntervalError::OffGrid => unprocessable("off-granularity", "Not on the slot grid")
            .detail(format!(
                "start and end must fall on the {}-minute slots of a bookable window",
                k.slot_minutes
            ))
            .with("slot_minutes", k.slot_minutes),
        IntervalError::OutsideWindows => {
            unprocessable("outside-windows", "Outside the bookable windows")
                .detail("the interval must lie inside one bookable window")
                .with(
                    "windows",
                    serde_json::to_value(&k.windows).unwrap_or_default(),
                )
        }
    })?;
    Ok(Ask::Interval {
        claim: Claim {
            kind: k.kind.clone(),
            resource: resource.to_owned(),
            start,
            end,
            until: end + k.buffer_ms(),
        },
        amount: k.price(start, end),
    })
}

/// `p` (a lost interval claim) with the resource's fresh free intervals, read after the
/// rollback.
pub(super) async fn with_fresh_free(
    state: &AppState,
    show: &str,
    claim: &Claim,
    p: Problem,
    now_ms: i64,
) -> ApiResult<Problem> {
    let venue = &show_config(state, show)?.venue;
    let Some(k) = venue.resource_kind(&claim.kind) else {
        return Ok(p);
    };
    let fresh = resources::free(
        &state.db,
        show,
        k,
        Some(&claim.resource),
        (i64::MIN, i64::MAX),
        now_ms,
    )
    .await?;
    Ok(p.with("free", fresh["resources"][0]["free"].clone()))
}

/// Query of the free-interval search (its parameters, for the OpenAPI document: the handler
/// reads them through `strict_query`, so another or a repeated parameter is
/// `422 invalid-query`, as on the seat map).
#[derive(Debug, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FreeQuery {
    /// Only intervals from this instant (epoch ms or RFC 3339).
    #[param(value_type = Option<String>)]
    from: Option<String>,
    /// Only intervals up to this instant.
    #[param(value_type = Option<String>)]
    to: Option<String>,
    /// Only this resource of the kind.
    resource: Option<String>,
}

fn bound(v: Option<&str>, field: &str, default: i64) -> Result<i64, Problem> {
    match v {
        None => Ok(default),
        Some(t) => t.parse::<i64>().or_else(|_| parse_instant(t)).map_err(|e| {
            unprocessable("invalid-interval", "Invalid interval")
                .detail(format!("{field}: {}", clip(&e)))
        }),
    }
}

/// `GET /api/shows/{show}/resources/{kind}` (API.md).
#[utoipa::path(
    get,
    path = "/api/shows/{show}/resources/{kind}",
    tag = "fan",
    summary = "Free intervals of a kind of interval resource, per resource",
    params(
        ("show" = String, Path, description = "show id"),
        ("kind" = String, Path, description = "resource kind (venue file `resources[].kind`)"),
        FreeQuery,
    ),
    responses(
        (status = 200, description = "{kind, slot_minutes, buffer_minutes, price_cents_per_slot, time_zone (the venue's IANA zone), resources: [{resource, free: [{start, end, start_at, end_at, start_local, end_local}]}]}: maximal free runs on the slot grid inside the bookable windows; *_local: the venue's local time with offset and zone", body = Object),
        (status = 404, description = "no such show or kind", body = ProblemDoc),
        (status = 422, description = "invalid-interval: from/to not an instant; unknown-resource; invalid-query", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
)]
pub async fn free(
    State(state): State<AppState>,
    Path((show, kind)): Path<(String, String)>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Json<Value>> {
    let mut q = strict_query(q, &["from", "to", "resource"])?;
    let q = FreeQuery {
        from: q.remove("from"),
        to: q.remove("to"),
        resource: q.remove("resource"),
    };
    let venue = &show_config(&state, &show)?.venue;
    let Some(k) = venue.resource_kind(&kind) else {
        return Err(Problem::not_found(format!("resource kind {}", clip(&kind))).into());
    };
    if let Some(r) = q
        .resource
        .as_deref()
        .filter(|r| !k.resources.iter().any(|n| n == r))
    {
        return Err(unprocessable("unknown-resource", "Unknown resource")
            .detail(format!("kind {} has no resource {}", clip(&kind), clip(r)))
            .into());
    }
    let from = bound(q.from.as_deref(), "from", i64::MIN)?;
    let to = bound(q.to.as_deref(), "to", i64::MAX)?;
    let now = state.clock.now_ms();
    let mut v =
        resources::free(&state.db, &show, k, q.resource.as_deref(), (from, to), now).await?;
    localise(&mut v, &venue.time_zone);
    Ok(Json(v))
}

/// `GET /admin/shows/{show}/resources/claims`: every blocking interval claim of the show, per
/// resource (API.md). The rush reads it to check that no two claims of a resource overlap,
/// buffer included (DECISIONS "The rush checks interval claims through a back-office endpoint").
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/resources/claims",
    tag = "admin",
    summary = "Blocking interval claims per resource (no two of one resource may overlap)",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{show, now (epoch ms), resources:[{resource, kind, claims:[{hold_id, status: HELD/PAID, start, end, until (end + buffer, epoch ms), live}]}]}: claims with blocking = 1 in start order; live = false for a lapsed HELD hold not yet cleared", body = Object),
        (status = 401, description = "admin-required", body = ProblemDoc),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn claims(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Json<Value>> {
    super::admin::admin(&state, &headers)?;
    show_config(&state, &show)?;
    let now = state.clock.now_ms();
    let resources = resources::blocking_claims(&state.db, &show, now).await?;
    Ok(Json(
        serde_json::json!({"show": show, "now": now, "resources": resources}),
    ))
}

/// `ms` (epoch milliseconds) as the venue's local wall-clock time with its offset and zone
/// (`2026-10-25T01:30+00:00[Europe/London]`), or `null` when it is not an instant or the zone
/// is unknown (issue 17 item 4: fans are shown local times that name their zone).
pub(super) fn local_time(ms: &Value, zone: &str) -> Value {
    let t = ms
        .as_i64()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    t.and_then(|t| sale_common::localtime::show_in(t, zone).ok())
        .into()
}

/// Adds `start_local`/`end_local` (see [`local_time`]) to a hold answer's `interval` member,
/// if it has one; the stored answer stays as it was, so a replay gets them on the way out too.
pub(super) fn localise_interval(body: &mut Value, zone: &str) {
    if let Some(i) = body.get_mut("interval").filter(|i| i.is_object()) {
        i["start_local"] = local_time(&i["start"], zone);
        i["end_local"] = local_time(&i["end"], zone);
    }
}

/// Adds the venue's `time_zone` and, to every free run, `start_local`/`end_local` (see
/// [`local_time`]), so a page shows fans local times that name their zone, the fall-back hour's
/// two 01:30s apart (issue 17 item 4).
fn localise(v: &mut Value, zone: &str) {
    for r in v["resources"].as_array_mut().into_iter().flatten() {
        for run in r["free"].as_array_mut().into_iter().flatten() {
            run["start_local"] = local_time(&run["start"], zone);
            run["end_local"] = local_time(&run["end"], zone);
        }
    }
    v["time_zone"] = zone.into();
}
