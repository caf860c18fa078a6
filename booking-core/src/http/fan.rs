//! Fan-facing handlers: session cookie, `/api/me`, seat map, holds, pay, release, and the
//! browser's return from checkout. Every fan call passes the door first (case W08).

use std::collections::HashMap;

use axum::extract::rejection::{FormRejection, JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use sale_common::Problem;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::door::{token_from_headers, Admission, DoorError};
use crate::error::{clip, rejection, ApiError, ApiResult};
use crate::inventory::claim::{self, unprocessable, Ask, Timing};
use crate::inventory::holds::{self, Hold};
use crate::payments::{self, CallbackOutcome};
use crate::state::AppState;
use crate::telemetry;

/// 401 `admission-required` pointing back to the waiting room (API.md).
fn admission_required(state: &AppState, e: &DoorError) -> ApiError {
    Problem::unauthorized("admission-required", e.to_string())
        .with("waiting_room", state.config.waiting_room_url.clone())
        .into()
}

/// Verifies the request's admission token, for `show` when given (else for any configured show).
pub async fn fan(
    state: &AppState,
    headers: &HeaderMap,
    show: Option<&str>,
) -> ApiResult<Admission> {
    let token = token_from_headers(headers)
        .ok_or_else(|| admission_required(state, &DoorError::Missing))?;
    let adm = state
        .verifier
        .verify(&token, show)
        .await
        .map_err(|e| admission_required(state, &e))?;
    if !state.config.has_show(&adm.event) {
        return Err(admission_required(state, &DoorError::WrongEvent));
    }
    Ok(adm)
}

fn known_show(state: &AppState, show: &str) -> ApiResult<()> {
    if state.config.has_show(show) {
        Ok(())
    } else {
        Err(Problem::not_found(format!("show {}", clip(show))).into())
    }
}

/// The fan's own hold, else 404 (another visitor's hold is not revealed).
async fn own_hold(state: &AppState, adm: &Admission, id: &str) -> ApiResult<Hold> {
    match holds::load(&state.db, id).await? {
        Some(h) if h.visitor_id == adm.sub && h.show_id == adm.event => Ok(h),
        _ => Err(Problem::not_found(format!("hold {}", clip(id))).into()),
    }
}

/// Form of `POST /session`.
#[derive(Debug, Deserialize)]
pub struct SessionForm {
    admission_token: String,
    show: String,
}

/// `POST /session`: verify, set the HttpOnly `admission` cookie, 303 to the booking page.
pub async fn session(
    State(state): State<AppState>,
    form: Result<Form<SessionForm>, FormRejection>,
) -> ApiResult<Response> {
    let Form(f) = form.map_err(|r| rejection(r.status(), "form", &r.body_text()))?;
    known_show(&state, &f.show)?;
    let adm = state
        .verifier
        .verify(&f.admission_token, Some(&f.show))
        .await
        .map_err(|e| admission_required(&state, &e))?;
    let max_age = (adm.exp - state.clock.now_secs()).max(0);
    let cookie = format!(
        "admission={}; HttpOnly; SameSite=Lax; Path=/; Max-Age={max_age}",
        f.admission_token
    );
    let mut resp = Redirect::to(&format!("/book.html?show={}", f.show)).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        cookie.parse().map_err(anyhow::Error::from)?,
    );
    Ok(resp)
}

/// `GET /api/me`: the cheap authenticated endpoint.
pub async fn me(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    Ok(Json(
        json!({"visitor_id": adm.sub, "event": adm.event, "expires_at": adm.exp}),
    ))
}

/// The query as a map, or `422 invalid-query` when it names a parameter outside `known` or
/// one parameter twice (`?section=A&section=B` must not silently mean B).
fn strict_query(
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
    known: &[&str],
) -> Result<HashMap<String, String>, ApiError> {
    let Query(pairs) = q.map_err(|r| rejection(r.status(), "query", &r.body_text()))?;
    let mut out = HashMap::new();
    for (k, v) in pairs {
        if !known.contains(&k.as_str()) {
            return Err(unprocessable("invalid-query", "Unknown query parameter")
                .detail(format!("known here: {known:?}; not {}", clip(&k)))
                .into());
        }
        if out.insert(k.clone(), v).is_some() {
            return Err(unprocessable("invalid-query", "Repeated query parameter")
                .detail(format!("{} is given more than once", clip(&k)))
                .into());
        }
    }
    Ok(out)
}

/// `GET /api/shows/{show}/seats[?section=S]`: the seat map, or one section of it; lapsed holds
/// count as free. An unknown section → `422 unknown-section`.
pub async fn seats(
    State(state): State<AppState>,
    Path(show): Path<String>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Response> {
    known_show(&state, &show)?;
    let q = strict_query(q, &["section"])?;
    let views = state
        .seatmaps
        .get(&state.reads, &show, state.clock.now_ms())
        .await?;
    let body = match q.get("section") {
        None => views.whole(),
        Some(sec) => views.sections.get(sec).cloned().ok_or_else(|| {
            unprocessable("unknown-section", "Unknown section")
                .detail(format!("the show has no section {}", clip(sec)))
        })?,
    };
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `GET /api/shows/{show}/sections`: the overview a fan picks a section from — per section
/// `capacity`, `available` and price range (cents), plus the pools; from the same snapshot as
/// the seat map.
pub async fn sections(
    State(state): State<AppState>,
    Path(show): Path<String>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Response> {
    known_show(&state, &show)?;
    strict_query(q, &[])?;
    let views = state
        .seatmaps
        .get(&state.reads, &show, state.clock.now_ms())
        .await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], views.overview).into_response())
}

/// Body of a hold request: exactly one of `seats`, `pool` (+ `quantity`), `best_available`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldBody {
    #[serde(default)]
    seats: Option<Vec<String>>,
    #[serde(default)]
    pool: Option<String>,
    #[serde(default)]
    quantity: Option<u32>,
    #[serde(default)]
    best_available: Option<BestBody>,
    #[serde(default)]
    channel: Option<String>,
}

/// `best_available` member of a hold request.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BestBody {
    section: String,
    quantity: u32,
    #[serde(default)]
    allow_split: bool,
}

fn idempotency_key(headers: &HeaderMap) -> ApiResult<String> {
    Ok(headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| (1..=200).contains(&k.len()))
        .ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "idempotency-key-required",
                "Idempotency-Key required",
            )
            .detail("send an Idempotency-Key header (1 to 200 characters)")
        })?
        .to_owned())
}

/// The request's ask, validated: counts 1..=max, seats normalised.
fn ask_of(body: HoldBody, max: usize) -> Result<Ask, Problem> {
    let count = |n: u32| -> Result<u32, Problem> {
        if n == 0 || n as usize > max {
            Err(unprocessable("seat-count", "Wrong number of seats")
                .detail(format!("a hold takes 1 to {max} seats or places"))
                .with("max_seats", max))
        } else {
            Ok(n)
        }
    };
    match (body.seats, body.pool, body.best_available) {
        (Some(seats), None, None) if body.quantity.is_none() => {
            Ok(Ask::Seats(holds::normalise_seats(seats, max)?))
        }
        (None, Some(pool), None) => Ok(Ask::Pool {
            pool,
            quantity: count(body.quantity.unwrap_or(1))?,
        }),
        (None, None, Some(b)) if body.quantity.is_none() => Ok(Ask::Best {
            section: b.section,
            quantity: count(b.quantity)?,
            allow_split: b.allow_split,
        }),
        _ => Err(
            unprocessable("invalid-hold-request", "Invalid hold request")
                .detail("send exactly one of seats, pool (+ quantity) or best_available"),
        ),
    }
}

/// The channel: `X-Channel` header, else the body's `channel`, else the default; 422 if unknown.
fn channel_of(
    state: &AppState,
    headers: &HeaderMap,
    body: Option<&str>,
) -> ApiResult<(String, Timing)> {
    let name = headers
        .get("x-channel")
        .and_then(|v| v.to_str().ok())
        .or(body)
        .unwrap_or(&state.config.default_channel)
        .to_owned();
    let Some(c) = state.config.channels.get(&name) else {
        return Err(unprocessable("unknown-channel", "Unknown channel")
            .with(
                "channels",
                state.config.channels.keys().cloned().collect::<Vec<_>>(),
            )
            .into());
    };
    let timing = Timing {
        hold_ttl_ms: secs_to_ms(c.hold_secs),
        payment_session_ms: secs_to_ms(c.payment_secs),
    };
    Ok((name, timing))
}

/// `POST /api/shows/{show}/holds` with `Idempotency-Key` (API.md).
pub async fn create_hold(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
    body: Result<Json<HoldBody>, JsonRejection>,
) -> ApiResult<Response> {
    known_show(&state, &show)?;
    let adm = fan(&state, &headers, Some(&show)).await?;
    let key = idempotency_key(&headers)?;
    let Json(body) = body.map_err(|r| rejection(r.status(), "body", &r.body_text()))?;
    let (channel, timing) = channel_of(&state, &headers, body.channel.as_deref())?;
    let ask = ask_of(body, state.config.max_seats_per_hold)?;
    telemetry::hold_attempt(&show, ask.kind());
    let now = state.clock.now_ms();
    // A replay of a stored answer is not a new request: it does not count against the limit.
    let hash = ask.request_hash(&show, &channel);
    if let Some(answer) = claim::stored_answer(&state.db, &adm.sub, &key, &hash).await? {
        telemetry::replay(&show);
        return Ok((answer.status, Json(answer.body)).into_response());
    }
    if let Err(wait) = state
        .limiter
        .check(&adm.jti, state.config.hold_rate_per_min, now)
    {
        telemetry::hold_refused(&show, 429, "hold-rate-limited");
        return Err(Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "hold-rate-limited",
            "Too many hold requests",
        )
        .detail("hold creation is rate-limited per admission")
        .retry_after(wait)
        .into());
    }
    let kind = ask.kind();
    let req = claim::Request {
        adm: &adm,
        show: &show,
        ask,
        key: &key,
        channel: &channel,
        timing,
        visitor_cap: state.config.max_holds_per_visitor,
    };
    let created = if state.hold_queues.is_on(&show) {
        state.hold_queues.submit(&state.db, &req, now).await
    } else {
        claim::create(&state.db, &req, now).await
    };
    match created {
        Ok(answer) => {
            telemetry::hold_created(&show, kind);
            Ok((answer.status, Json(answer.body)).into_response())
        }
        Err(ApiError::Problem(mut p)) => {
            telemetry::hold_refused(&show, p.status.as_u16(), p.kind);
            if p.kind == "admission-ended" {
                p = p.with("waiting_room", state.config.waiting_room_url.clone());
            }
            if p.status == StatusCode::CONFLICT && p.kind != "concurrent-request" {
                // Remember the refused request's hash: the key cannot be reused for another.
                claim::record_refusal(&state.db, &adm.sub, &key, &hash, now).await?;
            }
            Err(p.into())
        }
        Err(e) => Err(e),
    }
}

/// `POST /api/leave`: the fan is done; the waiting room is told the admission's session is
/// over (through the outbox). A live hold stays until it is paid, cancelled or lapses.
pub async fn leave(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    let mut tx = state.db.begin().await?;
    crate::outbox::notify::session_end(&mut tx, &adm.event, &adm.jti, state.clock.now_ms()).await?;
    tx.commit().await?;
    Ok(Json(json!({"left": true})))
}

fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs).unwrap_or(i64::MAX / 2000) * 1000
}

/// `GET /api/holds/{hold}`.
pub async fn get_hold(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    let h = own_hold(&state, &adm, &id).await?;
    Ok(Json(holds::view(&state.db, &h).await?))
}

/// `POST /api/holds/{hold}/pay`.
pub async fn pay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    let h = own_hold(&state, &adm, &id).await?;
    Ok(Json(payments::start(&state, &h).await?))
}

/// `DELETE /api/holds/{hold}`.
pub async fn delete_hold(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    let h = own_hold(&state, &adm, &id).await?;
    Ok(Json(payments::release_by_fan(&state, &h).await?))
}

/// `GET /payment/callback?paymentID=&status=&signature=`; `status` is ignored.
pub async fn callback(
    State(state): State<AppState>,
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q.map_err(|r| rejection(r.status(), "query", &r.body_text()))?;
    let (Some(pid), Some(sig)) = (q.get("paymentID"), q.get("signature")) else {
        return Err(Problem::bad_request("paymentID and signature are required").into());
    };
    let to = match payments::callback(&state, pid, sig).await? {
        CallbackOutcome::Confirmed(hold) => format!("/confirmation.html?hold={hold}"),
        CallbackOutcome::Back { show, hold } => format!("/book.html?show={show}&hold={hold}"),
    };
    Ok(Redirect::to(&to).into_response())
}
