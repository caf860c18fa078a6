//! Fan-facing handlers outside the holds (`super::holds`): the session cookie, `/api/me`, the
//! seat map and section overview, leaving, and the browser's return from checkout. Every call
//! that acts for a fan passes the door first (case W08); the seat map and overview are public.

use std::collections::HashMap;

use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use sale_common::Problem;
use serde::Deserialize;
use serde_json::{json, Value};

use super::openapi::ProblemDoc;
use crate::door::{token_from_headers, Admission, DoorError};
use crate::error::{clip, rejection, ApiError, ApiResult};
use crate::inventory::claim::unprocessable;
use crate::payments::{self, CallbackOutcome};
use crate::state::AppState;

/// 401 `admission-required` pointing back to the waiting room (API.md).
pub(super) fn admission_required(state: &AppState, e: &DoorError) -> ApiError {
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
    let token = token_from_headers(headers).map_err(|e| admission_required(state, &e))?;
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

pub(super) fn known_show(state: &AppState, show: &str) -> ApiResult<()> {
    if state.config.has_show(show) {
        Ok(())
    } else {
        Err(Problem::not_found(format!("show {}", clip(show))).into())
    }
}

/// Form of `POST /session`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct SessionForm {
    /// The admission token from the waiting room.
    admission_token: String,
    /// The show (the token's event).
    show: String,
}

/// `POST /session`: verify, set the HttpOnly `admission` cookie, 303 to the booking page.
#[utoipa::path(
    post,
    path = "/session",
    tag = "fan",
    summary = "Trade an admission token for the HttpOnly admission cookie",
    request_body(content = SessionForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "cookie `admission` set (HttpOnly; SameSite=Lax; Path=/); Location /book.html?show={show}",
            headers(("Set-Cookie" = String), ("Location" = String))),
        (status = 400, description = "invalid-form", body = ProblemDoc),
        (status = 401, description = "admission-required (with waiting_room): missing, invalid, expired or for another show", body = ProblemDoc),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 415, description = "invalid-form: not a form", body = ProblemDoc),
    ),
)]
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
    // The cookie outlives the admission by the longest hold: the fan's own hold stays payable
    // after the admission ends (DECISIONS), and the door accepts the expired token for it only.
    let longest_hold = state
        .config
        .channels
        .values()
        .map(|c| i64::try_from(c.hold_secs).unwrap_or(i64::MAX / 2))
        .max()
        .unwrap_or(0);
    let max_age = (adm.exp - state.clock.now_secs()).max(0) + longest_hold;
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
#[utoipa::path(
    get,
    path = "/api/me",
    tag = "fan",
    summary = "The cheap authenticated call",
    responses(
        (status = 200, description = "{visitor_id, event, expires_at}", body = Object),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn me(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    Ok(Json(
        json!({"visitor_id": adm.sub, "event": adm.event, "expires_at": adm.exp}),
    ))
}

/// The query as a map, or `422 invalid-query` when it names a parameter outside `known` or
/// one parameter twice (`?section=A&section=B` must not silently mean B); a query that does not
/// parse as `key=value` pairs is `400 invalid-query` (API.md, "Errors").
pub(super) fn strict_query(
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
#[utoipa::path(
    get,
    path = "/api/shows/{show}/seats",
    tag = "fan",
    summary = "Seat map (or one section of it); lapsed holds count free",
    params(
        ("show" = String, Path, description = "show id = the waiting room's event id"),
        ("section" = Option<String>, Query, description = "only this section's seats"),
    ),
    responses(
        (status = 200, description = "{show, capacity, available, seats:[{id, section, row, number, price_cents, status}], pools:[{id, price_cents, capacity, oversell, available}]}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 422, description = "unknown-section; invalid-query (another or a repeated parameter)", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
)]
pub async fn seats(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Response> {
    known_show(&state, &show)?;
    let q = strict_query(q, &["section"])?;
    let served = snapshot(&state, &show, &headers).await?;
    let views = &served.views;
    let answer = match q.get("section") {
        None => views.whole(),
        Some(sec) => views.sections.get(sec).cloned().ok_or_else(|| {
            unprocessable("unknown-section", "Unknown section")
                .detail(format!("the show has no section {}", clip(sec)))
        })?,
    };
    Ok(map_answer(&served, answer))
}

/// The seat map's snapshot of `show`, polled from the change feed; while the database does not
/// answer (the outage gate is down, or this request's poll failed, which trips it) the last
/// snapshot, its age growing, and without one `503` at once (README "Store outages"). A fan
/// that sends its admission token (bearer or cookie) and has just held or released through this
/// process reads its own write ([`crate::inventory::seatmap::SeatMaps::wrote`]).
async fn snapshot(
    state: &AppState,
    show: &str,
    headers: &HeaderMap,
) -> ApiResult<crate::inventory::seatmap::Served> {
    let now = state.clock.now_ms();
    if state.outage.is_down() {
        return state
            .seatmaps
            .last(show, now)
            .ok_or_else(|| super::db_not_answering().into());
    }
    let reader = token_from_headers(headers).ok();
    let served = state
        .seatmaps
        .get(&state.feed, show, now, reader.as_deref())
        .await?;
    if served.unreachable {
        state.outage.trip();
    } else if served.stale {
        // Failed or slow without a sign of why: the gate probes the database once.
        tokio::spawn(state.outage.clone().suspect());
    }
    Ok(served)
}

/// Notes a fan's write for its next map read (read-your-writes): after a hold or a release
/// that answered 2xx, the token it came with ([`crate::inventory::seatmap::SeatMaps::wrote`]).
pub async fn notes_map_write(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let token = token_from_headers(req.headers()).ok();
    let resp = next.run(req).await;
    if let (true, Some(t)) = (resp.status().is_success(), token) {
        state.seatmaps.wrote(&t);
    }
    resp
}

/// A map answer (`200`) with `Content-Type`, `Seat-Map-Age-Ms` (how old the snapshot is: real
/// time since the poll of the change feed it reflects, which the booking page shows the fan), a
/// strong `ETag` (the rendered bytes' tag, [`crate::inventory::seatmap::Tagged`]) and
/// `Cache-Control: no-cache` (a browser or CDN may keep it but asks again each time, with
/// `If-None-Match`: a `304` with the age and no body when the map did not change, answered by
/// [`super::NOT_MODIFIED`]'s middleware).
fn map_answer(
    served: &crate::inventory::seatmap::Served,
    answer: crate::inventory::seatmap::Tagged,
) -> Response {
    let etag = HeaderValue::from_str(&format!("\"{:016x}\"", answer.tag))
        .unwrap_or(HeaderValue::from_static("\"\""));
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (header::ETAG, etag),
        (
            header::HeaderName::from_static(SEAT_MAP_AGE),
            HeaderValue::from(u64::try_from(served.age.as_millis()).unwrap_or(u64::MAX)),
        ),
    ];
    (headers, answer.body).into_response()
}

/// The header that carries a seat map's age, in milliseconds.
pub const SEAT_MAP_AGE: &str = "seat-map-age-ms";

/// `GET /api/shows/{show}/sections`: the overview a fan picks a section from — per section
/// `capacity`, `available` and price range (cents), plus the pools; from the same snapshot as
/// the seat map.
#[utoipa::path(
    get,
    path = "/api/shows/{show}/sections",
    tag = "fan",
    summary = "Section overview, from the seat map's snapshot",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{show, capacity, available, sections:[{id, capacity, available, held, price_cents_min, price_cents_max}], pools}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 422, description = "invalid-query: this route takes no parameter", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
)]
pub async fn sections(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> ApiResult<Response> {
    known_show(&state, &show)?;
    strict_query(q, &[])?;
    let served = snapshot(&state, &show, &headers).await?;
    Ok(map_answer(&served, served.views.overview.clone()))
}

/// `POST /api/leave`: the fan is done; the waiting room is told the admission's session is
/// over (through the outbox). A live hold stays until it is paid, cancelled or lapses.
#[utoipa::path(
    post,
    path = "/api/leave",
    tag = "fan",
    summary = "The fan is done: the waiting room is told the session ended",
    responses(
        (status = 200, description = "{left: true}", body = Object),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn leave(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Json<Value>> {
    let adm = fan(&state, &headers, None).await?;
    let mut tx = crate::db::begin_write(&state.db).await?;
    let pg = crate::db::backend(&state.db) == crate::db::Backend::Postgres;
    crate::outbox::notify::session_end(&mut tx, pg, &adm.event, &adm.jti, state.clock.now_ms())
        .await?;
    tx.commit().await?;
    Ok(Json(json!({"left": true})))
}

/// `GET /payment/callback?paymentID=&status=&signature=`; `status` is ignored.
#[utoipa::path(
    get,
    path = "/payment/callback",
    tag = "payment",
    summary = "The browser's return from checkout (status is ignored; the gateway is asked)",
    params(
        ("paymentID" = String, Query, description = "a payment id this booking core issued"),
        ("signature" = String, Query, description = "the gateway's per-payment signature"),
        ("status" = Option<String>, Query, description = "ignored (anyone can forge it)"),
    ),
    responses(
        (status = 303, description = "Location /confirmation.html?hold={hold} when paid, else /book.html?show=…&hold=…", headers(("Location" = String))),
        (status = 400, description = "bad-request (paymentID or signature missing), bad-signature", body = ProblemDoc),
        (status = 404, description = "unknown-payment", body = ProblemDoc),
        (status = 409, description = "hold-expired (with hold_id): the reconciler settles it", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
)]
pub async fn callback(
    State(state): State<AppState>,
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> ApiResult<Response> {
    state
        .clone()
        .on_checkout(move |state| async move {
            let Query(q) = q.map_err(|r| rejection(r.status(), "query", &r.body_text()))?;
            let (Some(pid), Some(sig)) = (q.get("paymentID"), q.get("signature")) else {
                return Err(Problem::bad_request("paymentID and signature are required").into());
            };
            let to = match payments::callback(&state, pid, sig).await? {
                CallbackOutcome::Confirmed(hold) => format!("/confirmation.html?hold={hold}"),
                CallbackOutcome::Back { show, hold } => {
                    format!("/book.html?show={show}&hold={hold}")
                }
            };
            Ok(Redirect::to(&to).into_response())
        })
        .await
}
