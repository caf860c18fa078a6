//! Per-fan endpoints: join, position, admission (API.md). Tokens are checked before any store
//! call; every answer is `private, no-store`.

use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::domain::{ClaimOutcome, EventState, VisitorId};
use crate::tokens::new_jti;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::Problem;
use serde_json::json;

/// `POST /api/events/{event}/join`: a new place, or the same place for a valid join token.
#[tracing::instrument(skip_all, fields(event = %event))]
pub async fn join(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = st
        .join_identity(&headers, &event)?
        .unwrap_or_else(VisitorId::random);
    let out = bounded(st.store_timeout(), st.0.store.join(&event, &visitor)).await?;
    let now = st.0.clock.now_secs();
    let token =
        st.0.join_keys
            .issue(&event, &visitor, now, st.0.config.join_token_ttl_secs);
    Ok(private_json(
        StatusCode::OK,
        json!({
            "visitor_id": visitor.as_str(),
            "join_token": token,
            "queue_number": out.queue_number,
            "state": out.state.public(),
        }),
    ))
}

fn require_identity(
    st: &AppState,
    headers: &HeaderMap,
    event: &crate::domain::EventId,
) -> Result<VisitorId, Problem> {
    st.join_identity(headers, event)?.ok_or_else(|| {
        Problem::unauthorized(
            "join-token-required",
            "send Authorization: Bearer <join_token>",
        )
    })
}

/// `GET /api/events/{event}/position`.
#[tracing::instrument(skip_all, fields(event = %event))]
pub async fn position(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = require_identity(&st, &headers, &event)?;
    let p = bounded(st.store_timeout(), st.0.store.position(&event, &visitor)).await?;
    Ok(private_json(
        StatusCode::OK,
        json!({
            "visitor_id": visitor.as_str(),
            "queue_number": p.queue_number,
            "cursor": p.cursor,
            "state": p.state.public(),
            "admitted": p.admitted,
        }),
    ))
}

/// `POST /api/events/{event}/admission`: the admission token once the cursor has reached the
/// fan; the same token again on every retry (case W08).
#[tracing::instrument(skip_all, fields(event = %event))]
pub async fn admission(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = require_identity(&st, &headers, &event)?;
    let limit = st.store_timeout();
    let meta = bounded(limit, st.0.store.event(&event))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    let now = st.0.clock.now_secs();
    let ttl = meta.admission_ttl_secs;
    let jti = new_jti();
    let outcome = bounded(limit, st.0.store.claim(&event, &visitor, now, ttl, &jti)).await?;
    match outcome {
        ClaimOutcome::Admitted(a) => {
            let claims = st.0.signer.claims(&event, visitor.as_str(), &a);
            let token = st.0.signer.sign(&claims).map_err(|e| {
                tracing::error!(error = %e, "signing an admission token failed");
                Problem::internal()
            })?;
            Ok(private_json(
                StatusCode::OK,
                json!({
                    "admission_token": token,
                    "expires_at": a.exp,
                    "booking_url": meta.booking_url,
                    "event": event.as_str(),
                }),
            ))
        }
        ClaimOutcome::NotYourTurn {
            queue_number,
            cursor,
        } => Err(
            Problem::new(StatusCode::CONFLICT, "not-your-turn", "Not your turn yet")
                .with("queue_number", queue_number)
                .with("cursor", cursor),
        ),
        ClaimOutcome::Refused(state) => Err(refused(state)),
    }
}

fn refused(state: EventState) -> Problem {
    let kind = match state {
        EventState::Paused => "event-paused",
        EventState::SoldOut => "event-sold_out",
        _ => "event-closed",
    };
    Problem::new(
        StatusCode::CONFLICT,
        kind,
        format!("The event is {}", state.public()),
    )
}
