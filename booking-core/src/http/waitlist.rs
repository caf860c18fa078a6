//! The waitlist's fan endpoints (API.md "Waitlist"): join a sold-out show, and see one's place
//! or the hold offered from a released seat (`crate::inventory::waitlist`).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sale_common::Problem;
use serde_json::Value;

use super::fan::fan;
use super::openapi::ProblemDoc;
use crate::error::ApiResult;
use crate::state::AppState;

/// `POST /api/shows/{show}/waitlist`: 201 with the fan's entry (200 when already on it); 409
/// `seats-available` while a seat is free — hold it instead.
#[utoipa::path(
    post,
    path = "/api/shows/{show}/waitlist",
    tag = "fan",
    summary = "Join a sold-out show's waitlist",
    params(("show" = String, Path, description = "show id (the admission's event)")),
    responses(
        (status = 201, description = "{show, status: waiting, position, joined_at}", body = Object),
        (status = 200, description = "already on it: the entry", body = Object),
        (status = 409, description = "seats-available (with available): hold a free seat instead", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn join(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let adm = fan(&state, &headers, Some(&show)).await?;
    let now = state.clock.now_ms();
    if let Some(v) = crate::inventory::waitlist::status(&state.db, &show, &adm.sub).await? {
        return Ok((StatusCode::OK, Json(v)));
    }
    let free = crate::inventory::waitlist::free_seats(&state.db, &show, now).await?;
    if free > 0 {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "seats-available",
            "Seats are available",
        )
        .detail("the waitlist is for sold-out shows; hold a free seat instead")
        .with("available", free)
        .into());
    }
    let v = crate::inventory::waitlist::join(&state.db, &show, &adm.sub, &adm.jti, now).await?;
    Ok((StatusCode::CREATED, Json(v)))
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
        (status = 404, description = "not on the waitlist", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn status(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, Some(&show)).await?;
    match crate::inventory::waitlist::status(&state.db, &show, &adm.sub).await? {
        Some(v) => Ok(Json(v)),
        None => Err(Problem::not_found("waitlist entry").into()),
    }
}
