//! `GET /api/shows/{show}/venue`: the venue file's descriptive fields as configured (name,
//! currency, time zone, each section's price and fee, layout, tiers, interval-resource kinds), for pages and apps. Nothing is
//! read from the database; availability lives in the seat map and the free-interval search.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use super::openapi::ProblemDoc;
use super::resources::show_config;
use crate::error::ApiResult;
use crate::state::AppState;

/// `GET /api/shows/{show}/venue` (API.md).
#[utoipa::path(
    get,
    path = "/api/shows/{show}/venue",
    tag = "fan",
    summary = "The venue's name, currency, time zone, layout, tiers and interval-resource kinds",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{show, name, currency, time_zone, sections: [{name, price_cents, fee_cents}] (a seat costs price + fee), layout (null or {stage?, sections}), tiers, resources: [{kind, resources, windows, slot_minutes, buffer_minutes, price_cents_per_slot}], waiting_room (the waiting room's base URL: pages read its status document for the operator's broadcast message)}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
    ),
)]
pub async fn venue(
    State(state): State<AppState>,
    Path(show): Path<String>,
) -> ApiResult<Json<Value>> {
    let v = &show_config(&state, &show)?.venue;
    let sections: Vec<Value> = v
        .sections
        .iter()
        .map(|s| json!({"name": s.name, "price_cents": s.price_cents, "fee_cents": s.fee_cents}))
        .collect();
    Ok(Json(json!({
        "show": show, "name": v.name, "currency": v.currency, "time_zone": v.time_zone,
        "sections": sections,
        "layout": v.layout, "tiers": v.tiers, "resources": v.resources,
        "waiting_room": state.config.waiting_room_url,
    })))
}
