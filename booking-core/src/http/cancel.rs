//! The back office's refunds and cancels (issue 13 item 5): `POST /admin/bookings/{booking}/cancel`
//! behind the admin token, in full or by seat, with or without a refund, through the same code
//! as a refund made at the gateway ([`crate::payments::cancel`]); and `GET /office`, the small
//! page operators use for it (it asks for the admin token and keeps it in the tab only).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use sale_common::Problem;
use serde_json::Value;

use super::admin::{admin, operator};
use super::openapi::ProblemDoc;
use crate::error::ApiResult;
use crate::payments::cancel::{self, Cancelled, Origin};
use crate::state::AppState;

/// Body of a cancel.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelBody {
    /// These seats of the booking (each once, at least one); left out: all that is left (a
    /// pool booking is cancelled whole). Not `null`: that is not "every seat".
    #[serde(default, deserialize_with = "sale_common::body::present")]
    seats: Option<Vec<String>>,
    /// Give the cancelled seats' price back at the gateway (default true).
    #[serde(default = "yes")]
    refund: bool,
    /// Who (1 to 80 characters), kept with the cancellation and audited.
    operator: String,
    /// Why (up to 200 characters), audited and told to the fan.
    #[serde(default)]
    reason: Option<String>,
}

fn yes() -> bool {
    true
}

/// `POST /admin/bookings/{booking}/cancel`.
#[utoipa::path(
    post,
    path = "/admin/bookings/{booking}/cancel",
    tag = "admin",
    summary = "Refund or cancel a booking, in full or by seat (back office)",
    params(("booking" = String, Path, description = "booking id")),
    request_body(content = CancelBody, description = "{seats?, refund (default true), operator, reason?}"),
    responses(
        (status = 200, description = "{cancellation_id, booking_id, hold_id, seats, quantity, amount_cents, refund: pending/none, booking_status: active/cancelled, offered_to_waitlist}", body = Object),
        (status = 400, description = "bad-request: operator 1 to 80 characters, reason up to 200, neither with a control character; invalid-body", body = ProblemDoc),
        (status = 404, description = "no such booking", body = ProblemDoc),
        (status = 409, description = "nothing-to-cancel: the booking or these seats are cancelled already", body = ProblemDoc),
        (status = 415, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 422, description = "seats-not-in-booking (seats), pool-booking (seats asked of a pool booking); invalid-body (a JSON array, `seats` empty, null or naming a seat twice)", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn cancel_booking(
    State(state): State<AppState>,
    Path(booking): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let b: CancelBody = sale_common::body::object(&headers, body)?;
    let who = operator(&b.operator)?;
    let reason = b.reason.as_deref().unwrap_or("").trim();
    // The reason is audited and written to the fan's email: no control character there either.
    if !super::admin::plain_text(reason, 200) {
        let detail = "reason: up to 200 characters, no control character";
        return Err(Problem::bad_request(detail).into());
    }
    if let Some(seats) = &b.seats {
        // A seat named twice would be cancelled and refunded once but read as two; none is
        // not "every seat" (leave `seats` out for that).
        let mut seen = std::collections::HashSet::with_capacity(seats.len());
        if seats.is_empty() || !seats.iter().all(|s| seen.insert(s.as_str())) {
            let detail = "seats: at least one, each once (leave seats out to cancel them all)";
            return Err(
                sale_common::body::rejection(StatusCode::UNPROCESSABLE_ENTITY, detail).into(),
            );
        }
    }
    let reason = if reason.is_empty() {
        if b.refund {
            "refunded by the box office"
        } else {
            "cancelled by the box office"
        }
    } else {
        reason
    };
    let ask = cancel::Ask {
        booking_id: &booking,
        seats: b.seats,
        origin: Origin::Operator {
            name: who,
            refund: b.refund,
        },
        reason,
    };
    match cancel::cancel(&state.db, &ask, state.clock.now_ms()).await? {
        Cancelled::Done(v) => Ok(Json(v)),
        Cancelled::Nothing | Cancelled::DuplicateEvent => Err(Problem::new(
            StatusCode::CONFLICT,
            "nothing-to-cancel",
            "Nothing left to cancel",
        )
        .detail("the booking, or these seats of it, are cancelled already")
        .into()),
    }
}

/// `GET /office`: the back-office page (bookings of a show; refund or cancel, whole or by seat).
#[utoipa::path(
    get,
    path = "/office",
    tag = "admin",
    summary = "Back-office page: bookings, refunds and cancels (asks for the admin token)",
    responses((status = 200, description = "text/html", content_type = "text/html", body = String)),
)]
pub async fn office_page() -> Response {
    (
        [(header::CACHE_CONTROL, "private, no-store")],
        Html(include_str!("office.html")),
    )
        .into_response()
}
