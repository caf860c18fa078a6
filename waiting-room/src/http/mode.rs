//! Queue modes over HTTP (issue 14 item 2; API.md "Queue modes"): `PUT
//! /admin/events/{event}/mode` switches the mode, audited (`set_mode`), and republishes the
//! status document; [`after_join`] lets a joining fan straight through in `always_on` and
//! `pass_through`; [`refuse_in_maintenance`] keeps claims shut in `maintenance`. The fan
//! endpoints read the mode from this node's status document, never from the store.

use super::admin::{figures_json, operator, record};
use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::domain::{AdvanceParams, EventId};
use crate::http::openapi::ProblemDoc;
use crate::mode::{through_window_ms, QueueMode};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde::Deserialize;

/// `Retry-After` of a claim refused in maintenance, seconds.
pub const MAINTENANCE_RETRY_SECS: u64 = 5;

/// Body of `PUT /admin/events/{event}/mode`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetMode {
    /// `scheduled`, `always_on`, `pass_through` or `maintenance`.
    mode: String,
}

#[utoipa::path(
    put,
    path = "/admin/events/{event}/mode",
    tag = "admin",
    summary = "Switch the queue mode (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = SetMode,
    responses(
        (status = 200, description = "figures, with `mode`", body = Object),
        (status = 422, description = "unknown mode (invalid-mode) or unknown field", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn set(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<SetMode>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    let mode = QueueMode::parse(&b.mode).ok_or_else(|| {
        let names: Vec<&str> = QueueMode::ALL.iter().map(|m| m.as_str()).collect();
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-mode",
            "Unknown queue mode",
        )
        .detail(format!("mode must be one of {}", names.join(", ")))
        .with("allowed", names)
    })?;
    let old = bounded(st.store_timeout(), st.0.store.set_mode(&event, mode)).await?;
    if old != mode {
        record(
            &st,
            &event,
            &who,
            "set_mode",
            old.as_str().into(),
            mode.as_str().into(),
        )
        .await;
        metrics::counter!("wr_mode_changes_total",
            "event" => event.to_string(), "mode" => mode.as_str())
        .increment(1);
    }
    st.refresh_status(&event).await;
    Ok(private_json(
        StatusCode::OK,
        figures_json(&st, &event).await?,
    ))
}

/// This node's view of `event`'s mode (its status document; `scheduled` before one exists).
pub fn mode_of(st: &AppState, event: &EventId) -> QueueMode {
    st.0.status.mode(event).unwrap_or_default()
}

/// 503 `maintenance` (with `Retry-After`) while `event` is in maintenance: nobody is let in.
pub fn refuse_in_maintenance(st: &AppState, event: &EventId) -> Result<(), Problem> {
    if mode_of(st, event) != QueueMode::Maintenance {
        return Ok(());
    }
    Err(Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "maintenance",
        "The waiting room is in maintenance",
    )
    .detail("nobody is let in during maintenance; your place is kept")
    .retry_after(MAINTENANCE_RETRY_SECS))
}

/// After a numbered join of an open event: in `pass_through` invites everyone waiting; in
/// `always_on` invites the head of the line when the straight-through window is free (one fan
/// per `1 / admit_rate` s across nodes, a store latch) and `max_active` has room. Failures are
/// logged: the admitter's next tick catches up.
pub async fn after_join(st: &AppState, event: &EventId, now_ms: i64) {
    let mode = mode_of(st, event);
    let Some((rate, max_active)) = st.0.status.knobs(event) else {
        return;
    };
    let liveness = st.0.config.liveness_rules().at_rate(rate);
    let grace = st.0.config.invite_grace_secs;
    let p = match mode {
        QueueMode::PassThrough => crate::admitter::pass_through_params(now_ms, grace, liveness),
        QueueMode::AlwaysOn => {
            let key = format!("wr:{{{event}}}:through");
            let token = uuid::Uuid::new_v4().to_string();
            let latch = st.0.store.try_lock(&key, &token, through_window_ms(rate));
            if !matches!(bounded(st.store_timeout(), latch).await, Ok(true)) {
                return;
            }
            AdvanceParams {
                n: 1,
                max_active,
                now_ms,
                invite_grace_secs: grace,
                liveness,
            }
        }
        QueueMode::Scheduled | QueueMode::Maintenance => return,
    };
    let advance = st.0.store.advance_cursor(event, &p);
    match bounded(st.store_timeout(), advance).await {
        Ok(a) => {
            metrics::counter!("wr_straight_through_total",
                "event" => event.to_string(), "mode" => mode.as_str())
            .increment(a.moved + a.returned);
        }
        Err(e) => {
            tracing::warn!(event = %event, error = %e.title, "straight-through advance failed")
        }
    }
}
