//! The waitlist's fan endpoints (API.md "Waitlist"): join a sold-out show, and see one's place
//! or the hold offered from a released seat (`crate::inventory::waitlist`).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sale_common::Problem;
use serde_json::Value;

use super::fan::{fan, known_show};
use super::openapi::ProblemDoc;
use crate::error::{clip, ApiResult};
use crate::inventory::waitlist;
use crate::state::AppState;

/// Body of a waitlist join (optional: no body waits for seats).
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinBody {
    /// Wait for places in this general-admission pool instead of seats. Not `null`.
    #[serde(default, deserialize_with = "sale_common::body::present")]
    pool: Option<String>,
}

/// `POST /api/shows/{show}/waitlist` (`{"pool"?}`): 201 with the fan's entry (200 when already
/// on it); the waitlist opens only when nothing of the kind the fan asked for is left: 409
/// `seats-available` while a seat is free, `places-available` while the asked pool has places.
#[utoipa::path(
    post,
    path = "/api/shows/{show}/waitlist",
    tag = "fan",
    summary = "Join a sold-out show's (or pool's) waitlist",
    params(("show" = String, Path, description = "show id (the admission's event)")),
    request_body(content = JoinBody, description = "optional; {pool} waits for that pool's places, else seats"),
    responses(
        (status = 201, description = "{show, status: waiting, position, joined_at, pool?}", body = Object),
        (status = 200, description = "already on it: the entry", body = Object),
        (status = 400, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 404, description = "no such show, or no such pool", body = ProblemDoc),
        (status = 409, description = "seats-available / places-available (with available): hold instead; admission-ended: the admission's session ended (paid, released or left), join the waiting room again", body = ProblemDoc),
        (status = 422, description = "invalid-body: not an object (a JSON array), an unknown member, `pool` null", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn join(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    // An unknown show is 404 before the token's check (which would call it another event's).
    known_show(&state, &show)?;
    let adm = fan(&state, &headers, Some(&show)).await?;
    let body: JoinBody = sale_common::body::optional(&body)?.unwrap_or_default();
    let now = state.clock.now_ms();
    if let Some(v) = waitlist::status(&state.db, &show, &adm.sub).await? {
        return Ok((StatusCode::OK, Json(v)));
    }
    // An ended admission (paid, released, or the fan left) books nothing more, an offer
    // included: every offer to it would be skipped (newcomer review: joined `waiting`, then
    // `skipped` at the first release).
    if waitlist::admission_ended(&state.reads, &adm.jti).await? {
        return Err(crate::inventory::claim::admission_ended()
            .with("waiting_room", state.config.waiting_room_url.clone())
            .into());
    }
    let (free, kind, what) = match &body.pool {
        Some(pool) => {
            let Some(n) = waitlist::free_places(&state.db, &show, pool, now).await? else {
                return Err(Problem::not_found(format!("pool {}", clip(pool))).into());
            };
            (n, "places-available", "places are available in this pool")
        }
        None => {
            let n = waitlist::free_seats(&state.db, &show, now).await?;
            (n, "seats-available", "seats are available")
        }
    };
    if free > 0 {
        return Err(Problem::new(StatusCode::CONFLICT, kind, "Still available")
            .detail(format!(
                "the waitlist opens when nothing is left; {what}: hold instead"
            ))
            .with("available", free)
            .into());
    }
    let pool = body.pool.as_deref();
    let (joined, v) = waitlist::join(&state.db, &show, &adm.sub, &adm.jti, pool, now).await?;
    // A join racing one of the same fan (another tab, another node) that wrote the row first.
    let status = if joined {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(v)))
}

/// `GET /api/shows/{show}/waitlist`: the fan's entry, or 404 when not on the waitlist.
#[utoipa::path(
    get,
    path = "/api/shows/{show}/waitlist",
    tag = "fan",
    summary = "The fan's waitlist entry",
    params(("show" = String, Path, description = "show id (the admission's event)")),
    responses(
        (status = 200, description = "{show, status: waiting/offered/lapsed/skipped, position?, hold_id?, joined_at}", body = Object),
        (status = 404, description = "no such show, or not on the waitlist", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn status(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    known_show(&state, &show)?;
    let adm = fan(&state, &headers, Some(&show)).await?;
    match waitlist::status(&state.db, &show, &adm.sub).await? {
        Some(v) => Ok(Json(v)),
        None => Err(Problem::not_found("waitlist entry").into()),
    }
}
