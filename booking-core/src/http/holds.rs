//! A fan's holds: create one (by seats, pool, best available, interval resource or several of
//! them in one mixed order, with `Idempotency-Key`), read
//! it, pay it and cancel it. Every call passes the door first (`super::fan::fan`); a hold of
//! another visitor is answered 404.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::Value;

use super::fan::{admission_required, fan, known_show};
use super::openapi::ProblemDoc;
use crate::db::{self, Backend};
use crate::door::{token_from_headers, Admission, DoorError};
use crate::error::{clip, ApiError, ApiResult};
use crate::inventory::claim::{self, unprocessable, Ask, HoldAnswer, Lost, Timing};
use crate::inventory::holds::{self, Hold};
use crate::inventory::inflight::{self, Entry};
use crate::inventory::onetrip::{self, OneTrip};
use crate::inventory::preread::{self, Check, Seen};
use crate::inventory::seatgate::{self, Ended, Turn};
use crate::payments;
use crate::state::AppState;
use crate::telemetry;

/// The fan's own hold, else 404 (another visitor's hold is not revealed). Read from a reader
/// (on a SQLite file on this thread: `db::local`), never the writer.
async fn own_hold(state: &AppState, adm: &Admission, id: &str) -> ApiResult<Hold> {
    let hold = match &state.local_reads {
        Some(local) => holds::load_local(local, id)?,
        None => holds::load(&state.reads, id).await?,
    };
    match hold {
        Some(h) if h.visitor_id == adm.sub && h.show_id == adm.event => Ok(h),
        _ => Err(Problem::not_found(format!("hold {}", clip(id))).into()),
    }
}

/// The fan's own hold for the calls on one hold (read, pay, cancel). Paying needs a live hold,
/// not a live admission (DECISIONS): an admission token past its `exp` still opens the holds made
/// with it (same `jti`), and nothing else (401 `admission-required`).
async fn hold_of_fan(state: &AppState, headers: &HeaderMap, id: &str) -> ApiResult<Hold> {
    let (adm, expired) = hold_admission(state, headers).await?;
    own_hold_of(state, &adm, expired, id).await
}

/// The admission a call on one hold comes with, and whether its token is past its `exp` (see
/// [`hold_of_fan`]); 401 `admission-required` without a valid one.
async fn hold_admission(state: &AppState, headers: &HeaderMap) -> ApiResult<(Admission, bool)> {
    let token = token_from_headers(headers).map_err(|e| admission_required(state, &e))?;
    state
        .verifier
        .verify_for_hold(&token)
        .await
        .map_err(|e| admission_required(state, &e))
}

/// [`own_hold`], refused to an expired token of another admission (see [`hold_of_fan`]).
async fn own_hold_of(
    state: &AppState,
    adm: &Admission,
    expired: bool,
    id: &str,
) -> ApiResult<Hold> {
    let h = own_hold(state, adm, id).await?;
    if expired && h.admission_jti != adm.jti {
        return Err(admission_required(state, &DoorError::Expired));
    }
    Ok(h)
}

/// Body of a hold request: `seats` or `best_available`, `pool` (+ `quantity`), `resource`
/// (+ `start`, `end`), one of them or several for one all-or-nothing mixed order (issue 17
/// item 3: one hold, one payment, one booking; seats and places together at most
/// `max_seats_per_hold`).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HoldBody {
    /// These seats (1 to `max_seats_per_hold`, e.g. `"A-1-1"`).
    #[serde(default)]
    seats: Option<Vec<String>>,
    /// Places in this general-admission pool.
    #[serde(default)]
    pool: Option<String>,
    /// With `pool`: how many places (default 1 when left out; `null` is refused, not read
    /// as the default).
    #[serde(default, deserialize_with = "sale_common::body::present")]
    quantity: Option<u32>,
    /// The best free seats side by side in one row (an object; `null` reads as left out).
    #[serde(default, deserialize_with = "sale_common::body::object_member")]
    best_available: Option<BestBody>,
    /// An interval resource (by name), held for `[start, end)`.
    #[serde(default)]
    resource: Option<String>,
    /// With `resource`: the first instant, epoch ms or RFC 3339 with an offset.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    start: Option<super::resources::Instant>,
    /// With `resource`: the first instant after the interval (exclusive).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    end: Option<super::resources::Instant>,
    /// Channel (`web`, `app`, …); the `X-Channel` header wins. Not `null`.
    #[serde(default, deserialize_with = "sale_common::body::present")]
    channel: Option<String>,
}

/// `best_available` member of a hold request.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BestBody {
    /// Section id.
    section: String,
    /// How many seats.
    quantity: u32,
    /// Whether the seats may be apart when no block is free.
    #[serde(default)]
    allow_split: bool,
}

/// Longest `Idempotency-Key` accepted, bytes.
const KEY_MAX: usize = 200;

fn idempotency_key(headers: &HeaderMap) -> ApiResult<String> {
    // Two keys (two header lines, or one repeated by a proxy): which one the fan meant to
    // replay is unknown, so neither is used (the field is a single Structured Field string,
    // draft-ietf-httpapi-idempotency-key-header; RFC 9110 §5.3: a singleton field repeated).
    if headers.get_all("idempotency-key").iter().nth(1).is_some() {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-idempotency-key",
            "Two Idempotency-Key headers",
        )
        .detail("send exactly one Idempotency-Key header")
        .into());
    }
    let raw = headers.get("idempotency-key");
    // A key with a byte outside printable ASCII (`HeaderValue::to_str`: visible ASCII, space
    // and tab; newcomer review: Latin-1 bytes were told to "send an Idempotency-Key header").
    // Control characters never get here: the HTTP server refuses the request first.
    // A tab passes both the HTTP server and `to_str`, but is no printable ASCII either.
    let printable =
        |v: &axum::http::HeaderValue| v.as_bytes().iter().all(|b| (0x20..=0x7e).contains(b));
    if raw.is_some_and(|v| !printable(v)) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-idempotency-key",
            "Idempotency-Key not ASCII",
        )
        .detail("the Idempotency-Key must be printable ASCII characters (a UUID, for example)")
        .into());
    }
    // A comma: a proxy may join two header lines into one, separated by a comma (RFC 9110
    // §5.3), so `a, b` may be two keys; refused like two lines (newcomer review: `a, b` was
    // held as the key "a, b" while two lines were refused).
    if raw.is_some_and(|v| v.as_bytes().contains(&b',')) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid-idempotency-key",
            "Idempotency-Key with a comma",
        )
        .detail("a comma joins repeated header lines (RFC 9110 §5.3): send one key with no comma")
        .into());
    }
    let sent = raw.and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(k) = sent.filter(|k| k.len() > KEY_MAX) {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "idempotency-key-too-long",
            "Idempotency-Key too long",
        )
        .detail(format!(
            "the Idempotency-Key has {} characters; at most {KEY_MAX}",
            k.chars().count()
        ))
        .with("max_length", KEY_MAX)
        .into());
    }
    Ok(sent
        .filter(|k| !k.is_empty())
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

/// The request's ask, validated: counts 1..=max, seats normalised, an interval against its
/// kind's grid and windows in `venue`. Any combination of one seat part (`seats` or
/// `best_available`), `pool` and `resource` is one mixed order (issue 17 item 3) whose seats
/// and pool places together stay within `max`; a single part is the single-kind ask it always was.
fn ask_of(body: HoldBody, max: usize, venue: &crate::venue::Venue) -> Result<Ask, Problem> {
    let count = |n: usize| -> Result<u32, Problem> {
        if n == 0 || n > max {
            Err(unprocessable("seat-count", "Wrong number of seats")
                .detail(format!("a hold takes 1 to {max} seats or places"))
                .with("max_seats", max))
        } else {
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        }
    };
    let mut parts = Vec::new();
    match (body.seats, body.best_available) {
        (Some(_), Some(_)) => return Err(invalid_request()),
        (Some(seats), None) => parts.push(Ask::Seats(holds::normalise_seats(seats, max)?)),
        (None, Some(b)) => parts.push(Ask::Best {
            section: b.section,
            quantity: count(b.quantity as usize)?,
            allow_split: b.allow_split,
        }),
        (None, None) => {}
    }
    match (body.pool, body.quantity) {
        (Some(pool), q) => parts.push(Ask::Pool {
            pool,
            quantity: count(q.unwrap_or(1) as usize)?,
        }),
        (None, Some(_)) => return Err(invalid_request()),
        (None, None) => {}
    }
    match body.resource {
        Some(resource) => parts.push(super::resources::interval_ask(
            venue, &resource, body.start, body.end,
        )?),
        None if body.start.is_some() || body.end.is_some() => return Err(invalid_request()),
        None => {}
    }
    if let Some(p) = parts.iter().find_map(nul_name) {
        return Err(p);
    }
    match parts.len() {
        0 => Err(invalid_request()),
        1 => Ok(parts.remove(0)),
        _ => {
            let places: usize = parts.iter().map(places_of).sum();
            if places > 0 {
                count(places)?;
            }
            Ok(Ask::Mixed(parts))
        }
    }
}

/// The problem of a seat, pool or section name holding a NUL character (U+0000): no name of a
/// venue has one, so it is unknown on every store, told before any statement (PostgreSQL text
/// cannot hold one: the statement would fail, and in the hold queue its whole batch with it;
/// newcomer review).
fn nul_name(part: &Ask) -> Option<Problem> {
    let nul = |s: &str| s.contains('\0');
    match part {
        Ask::Seats(seats) => {
            let bad: Vec<String> = seats.iter().filter(|s| nul(s)).cloned().collect();
            claim::unknown_seat(&bad, &[])
        }
        Ask::Pool { pool, .. } if nul(pool) => {
            Some(unprocessable("unknown-pool", "Unknown pool").with("pool", clip(pool)))
        }
        Ask::Best { section, .. } if nul(section) => {
            Some(unprocessable("unknown-section", "Unknown section").with("section", clip(section)))
        }
        Ask::Mixed(parts) => parts.iter().find_map(nul_name),
        _ => None,
    }
}

/// Seats or places a part takes (an interval takes none).
fn places_of(part: &Ask) -> usize {
    match part {
        Ask::Seats(s) => s.len(),
        Ask::Pool { quantity, .. } | Ask::Best { quantity, .. } => *quantity as usize,
        Ask::Interval { .. } | Ask::Mixed(_) => 0,
    }
}

fn invalid_request() -> Problem {
    unprocessable("invalid-hold-request", "Invalid hold request").detail(
        "send seats or best_available, pool (+ quantity), resource (+ start, end), \
         or several of them for one order (at most one of seats and best_available)",
    )
}

/// The channel: `X-Channel` header, else the body's `channel`, else the default; 422 if unknown.
fn channel_of(
    state: &AppState,
    headers: &HeaderMap,
    body: Option<&str>,
) -> ApiResult<(String, Timing)> {
    // A header that is there but not visible ASCII names no channel: refused as unknown, not
    // ignored for the body's or the default (newcomer review).
    let header = match headers.get("x-channel").map(|v| v.to_str()) {
        Some(Ok(v)) => Some(v),
        Some(Err(_)) => Some(""),
        None => None,
    };
    let name = header
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
#[utoipa::path(
    post,
    path = "/api/shows/{show}/holds",
    tag = "fan",
    summary = "Hold seats, pool places, the best seats together, an interval resource, or several of them in one order (all or nothing)",
    params(
        ("show" = String, Path, description = "show id (the admission's event)"),
        ("Idempotency-Key" = String, Header, description = "1 to 200 characters; same key + same body → the stored answer"),
        ("X-Channel" = Option<String>, Header, description = "channel (wins over the body's); default web"),
    ),
    request_body(content = HoldBody, description = "seats or best_available, pool (+ quantity), resource (+ start, end: epoch ms or RFC 3339): one, or several for one all-or-nothing mixed order (a refused part refuses the whole hold with its 409); optional channel"),
    responses(
        (status = 201, description = "{hold_id, show, seats, status: HELD, expires_at, payment_expires_at, amount_cents, currency (the venue's, ISO 4217), channel, pool?, quantity?, interval? {kind, resource, start, end, start_at, end_at, blocked_until, start_local, end_local (the venue's local time with offset and zone)}}", body = Object),
        (status = 400, description = "idempotency-key-required; idempotency-key-too-long (over 200 bytes); invalid-idempotency-key (not printable ASCII); invalid-body (not JSON)", body = ProblemDoc),
        (status = 403, description = "tier-required: seats of a tier-only section (the venue's restricted tiers) and the admission carries none of its tiers (section, tiers)", body = ProblemDoc),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 409, description = "seats-unavailable, pool-unavailable, no-seats-together (each with fresh availability), interval-unavailable (free: the resource's fresh free intervals), hold-exists (hold_id), visitor-hold-cap (max_holds), admission-ended (waiting_room), concurrent-request (Retry-After)", body = ProblemDoc,
            headers(("Retry-After" = u64, description = "concurrent-request only"))),
        (status = 415, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 422, description = "seat-count, duplicate-seats, unknown-seat, unknown-pool, unknown-section, unknown-channel, invalid-hold-request, idempotency-key-reused, unknown-resource, invalid-interval (end not after start, or start/end missing), off-granularity, outside-windows; invalid-body (unknown member; a JSON array or any body that is not an object)", body = ProblemDoc),
        (status = 429, description = "hold-rate-limited: more than hold_rate_per_min requests a minute for this admission", body = ProblemDoc),
        (status = 503, description = "database busy or conflict", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn create_hold(
    State(state): State<AppState>,
    Path(show): Path<String>,
    running: Option<axum::Extension<super::load::RunningHold>>,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<Response> {
    state
        .clone()
        .on_holds(move |state| async move {
            // Counted as running until the work ends, whether or not its client waits for it.
            let _running = running;
            create_hold_here(state, show, headers, body).await
        })
        .await
}

/// [`create_hold`] on the holds' thread ([`AppState::on_holds`]).
async fn create_hold_here(
    state: AppState,
    show: String,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<Response> {
    known_show(&state, &show)?;
    let adm = telemetry::hold_phase("door", fan(&state, &headers, Some(&show))).await?;
    let key = idempotency_key(&headers)?;
    let body: HoldBody = sale_common::body::object(&headers, body)?;
    let (channel, timing) = channel_of(&state, &headers, body.channel.as_deref())?;
    let venue = &super::resources::show_config(&state, &show)?.venue;
    let ask = ask_of(body, state.config.max_seats_per_hold, venue)?;
    tier_allows(venue, &ask, adm.tier.as_deref())?;
    telemetry::hold_attempt(&show, ask.kind());
    let now = state.clock.now_ms();
    let hash = ask.request_hash(&show, &channel);
    // Identical requests (same visitor, key and body) in flight here: one runs, the others wait
    // for it and answer what it answered (its 201 or its refusal); a duplicate is not a new
    // request and never counts against the rate limit or the caps (case B12). The read before
    // the transaction (`preread`: the key's stored answer, and the asked seats' statuses, the
    // pool's places left or the section's free seats) goes to the reader connections (SQLite:
    // the writer is kept for the transactions); an interval or a mixed order reads nothing
    // first: its transaction's key statement finds a stored answer (a retry, or an identical
    // request on another node) and replays it (`HoldAnswer::replayed`: the rate-limit slot is
    // given back).
    // The owner reads (the duplicates wait for its answer, from the read or the hold): on
    // PostgreSQL the read stores the refusal it makes, so twenty identical requests reading
    // side by side would each store or meet it and then each reach the rate limiter (B12).
    let mut waited = false;
    let owner = loop {
        match state.in_flight.enter(&adm.sub, &key) {
            Entry::Owner(owner) => break owner,
            Entry::Wait(rx) => {
                match telemetry::hold_phase("in_flight", inflight::wait(rx, IN_FLIGHT_WAIT)).await {
                    None => return Err(claim::concurrent_request().into()),
                    Some(Some(done)) if done.hash == hash => {
                        telemetry::replay(&show);
                        return match &done.answer {
                            Ok((status, body)) => Ok((*status, Json(body.clone())).into_response()),
                            Err(p) => Err(p.clone().into()),
                        };
                    }
                    // The owner failed unexpectedly, or its body was another: read, then run.
                    Some(_) => waited = true,
                }
            }
        }
    };
    let owned = Owned {
        state: &state,
        show: &show,
        adm: &adm,
        key: &key,
        hash: &hash,
        venue,
        now,
    };
    let outcome = owned.read_then_hold(ask, waited, &channel, timing).await;
    owner.finish(&hash, &outcome);
    let (status, body) = outcome?;
    Ok((status, Json(body)).into_response())
}

/// Turns at the seat gates a plain named-seat hold takes at most, its own statements and the
/// waits for others' together (`inventory::seatgate`); then the full path decides.
const GATE_TURNS: usize = 16;

/// One-round-trip attempts of a plain named-seat hold on PostgreSQL while the read after each
/// loss sees every asked seat free again (`Owned::one_trip`: their holder let go between the
/// statement and the read, as the bench's fans release each 201 at once); then the full path
/// decides.
const ONE_TRIPS: usize = 3;

/// A hold request whose owner this request is ([`inflight::Owner`]): the fan's admission, the
/// key and the request's hash, its show's venue, and `now` (epoch ms).
struct Owned<'a> {
    state: &'a AppState,
    show: &'a str,
    adm: &'a Admission,
    key: &'a str,
    hash: &'a str,
    venue: &'a crate::config::Venue,
    now: i64,
}

impl Owned<'_> {
    /// The read before a hold of this request ([`preread::read`]) of the key and `check`;
    /// `record`: it may store the refusal it makes.
    async fn read(&self, check: Check<'_>, record: bool) -> ApiResult<Seen> {
        let state = self.state;
        preread::read(
            &state.reads,
            state.local_reads.as_ref(),
            &self.adm.sub,
            &self.adm.jti,
            self.key,
            self.hash,
            self.show,
            check,
            self.now,
            record,
        )
        .await
    }

    /// The read before the hold (a stored answer is replayed from it), then [`Owned::hold`].
    /// The read checks the key and what `ask` names ([`Check::of`]); it is skipped for an ask
    /// of no seats or pool unless `waited` (an identical request's owner ended without an
    /// answer for this one: the key may be stored now).
    async fn read_then_hold(
        &self,
        ask: Ask,
        waited: bool,
        channel: &str,
        timing: Timing,
    ) -> ApiResult<(StatusCode, Value)> {
        // A pool hold reads first only when this node's seat map says the pool is short (the
        // read then decides): a read before every pool hold cost `loadtest bench` a third of
        // its pool holds a second (5,413 in the one run with it, 7,197–9,993 in the runs without),
        // for a refusal only a sold-out pool needs.
        let check = match Check::of(&ask) {
            Check::Pool(pool, n) if !self.state.seatmaps.pool_short(self.show, pool, n) => {
                Check::Key
            }
            check => check,
        };
        let key_read = waited || check != Check::Key;
        let (state, jti) = (self.state, &self.adm.jti);
        let per_min = state.config.hold_rate_per_min;
        // The rate limit first, so that nothing is written for a request it refuses (on
        // PostgreSQL the read below stores the refusal it makes: a newcomer review found a
        // 429 using up its key, the same key with another body 422 a minute later).
        if let Err(wait) = state.limiter.check(jti, per_min, self.now) {
            return self.over_limit(check, key_read, wait).await;
        }
        let (mut lost, mut plain) = (None, false);
        if key_read {
            let seen = telemetry::hold_phase("preread", self.read(check, true)).await?;
            if let Some(a) = seen.answer {
                // A replay is not a new request: it never counts against the limit (B12).
                state.limiter.give_back(jti, per_min);
                telemetry::replay(self.show);
                return Ok((a.status, with_currency(a.body, self.venue)));
            }
            if seen.lost.is_some() && seen.repeated {
                // The same refusal of the same request again: not a new attempt either.
                state.limiter.give_back(jti, per_min);
            }
            (lost, plain) = (seen.lost.map(|l| (l, seen.recorded)), seen.plain);
        }
        self.hold(ask, channel, timing, lost, plain).await
    }

    /// A request over its admission's hold rate limit (`wait`: seconds until a token): an
    /// identical request's stored answer is still replayed (or 422 for a reused key), and a
    /// refusal of this same request that still holds is answered again, neither counting
    /// (B12: a newcomer review sent 25 identical requests at once with one token left, and the
    /// ones after the first's quick 409 were answered 429); anything else is `429
    /// hold-rate-limited` with `Retry-After`. Nothing is written but a refusal's own record
    /// (none: the key holds it already).
    async fn over_limit(
        &self,
        check: Check<'_>,
        key_read: bool,
        wait: u64,
    ) -> ApiResult<(StatusCode, Value)> {
        let (state, show) = (self.state, self.show);
        let stored = if key_read {
            let seen = telemetry::hold_phase("preread", self.read(check, false)).await?;
            if let (None, Some(lost), true) = (&seen.answer, &seen.lost, seen.repeated) {
                telemetry::hold_refused(show, 409, lost.kind());
                return Err(self.refuse(lost.clone(), true).await);
            }
            seen.answer
        } else {
            claim::stored_answer(&state.reads, &self.adm.sub, self.key, self.hash).await?
        };
        if let Some(a) = stored {
            telemetry::replay(show);
            return Ok((a.status, with_currency(a.body, self.venue)));
        }
        telemetry::hold_refused(show, 429, "hold-rate-limited");
        Err(Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "hold-rate-limited",
            "Too many hold requests",
        )
        .detail("hold creation is rate-limited per admission")
        .retry_after(wait)
        .into())
    }

    /// The hold of `ask`, its rate-limit token taken (refused from the read before it when
    /// `lost` says what it saw short, seats taken or a pool, and whether the refusal is stored;
    /// `plain`: that read found nothing the transaction would refuse before the guarded update,
    /// `preread::Seen::plain`): the answer's status and body, or the refusal.
    async fn hold(
        &self,
        ask: Ask,
        channel: &str,
        timing: Timing,
        lost: Option<(Lost, bool)>,
        plain: bool,
    ) -> ApiResult<(StatusCode, Value)> {
        let Owned {
            state,
            show,
            adm,
            key,
            hash,
            venue,
            now,
        } = *self;
        let per_min = state.config.hold_rate_per_min;
        // Seats the read showed taken, a pool or section it showed short: refused without a
        // transaction or the hold queue (the guarded update decides only grants).
        if let Some((lost, recorded)) = lost {
            telemetry::hold_refused(show, 409, lost.kind());
            return Err(self.refuse(lost, recorded).await);
        }
        let kind = ask.kind();
        // The queue's batches are for named seats, best available and pools (a pool-only ask
        // always goes there, `HoldQueues::routes`). On a SQLite file the writer thread is the queue already (one
        // thread applies every hold waiting in one transaction, `db::writer`): a queued show's
        // holds go there too.
        let queued = state.writer.is_none() && state.hold_queues.routes(show, &ask);
        let req = claim::Request {
            adm,
            show,
            ask,
            key,
            channel,
            timing,
            visitor_cap: state.config.max_holds_per_visitor,
        };
        // Not decided by the queue (a row it needed was locked outside its batch, or its
        // worker stopped): run alone, as an unqueued hold.
        let from_queue = if queued {
            telemetry::hold_phase(
                "queue",
                state.hold_queues.submit(&state.db, &state.reads, &req, now),
            )
            .await
        } else {
            None
        };
        let created = if let Some(decided) = from_queue {
            decided
        } else if let Some(decided) =
            telemetry::hold_phase("one_trip", self.one_trip(&req, plain)).await
        {
            decided
        } else {
            telemetry::hold_phase(
                "transaction",
                crate::inventory::fast::create(
                    state.writer.as_deref(),
                    state.local_reads.as_ref(),
                    &state.db,
                    &state.reads,
                    Some(&state.refusals),
                    &req,
                    now,
                ),
            )
            .await
        };
        match created {
            Ok(answer) => {
                if answer.replayed {
                    // Another node's identical request won while this one waited on the key.
                    state.limiter.give_back(&adm.jti, per_min);
                } else {
                    telemetry::hold_created(show, kind);
                }
                Ok((answer.status, with_currency(answer.body, venue)))
            }
            Err(ApiError::Problem(mut p)) => {
                telemetry::hold_refused(show, p.status.as_u16(), p.kind);
                if p.kind == "admission-ended" {
                    p = p.with("waiting_room", state.config.waiting_room_url.clone());
                }
                if let (true, Some(claim)) = (p.kind == "interval-unavailable", req.ask.interval())
                {
                    p = super::resources::with_fresh_free(state, show, claim, p, now).await?;
                }
                if p.status == StatusCode::CONFLICT
                    && p.kind != "concurrent-request"
                    && !claim::LOST_KINDS.contains(&p.kind)
                {
                    // Remember the refused request's hash: the key cannot be reused for another
                    // (a lost hold's key was recorded where it lost).
                    let row = claim::Refused::of(&adm.sub, key, hash, now);
                    if !telemetry::hold_phase("refusal", state.refusals.record(&state.db, row))
                        .await?
                    {
                        return Err(claim::key_reused().into());
                    }
                }
                Err(p.into())
            }
            Err(e) => Err(e),
        }
    }

    /// A plain hold of named seats on PostgreSQL in one round trip (`inventory::onetrip`):
    /// the 201 when it held them; when it lost, the answer of a fresh read of the key and the
    /// seats (an identical request's stored 201, or the 409 with the seats' statuses); when
    /// that read sees every seat free again (their holder let go meanwhile), the statement
    /// again, [`ONE_TRIPS`] times at most; `None` when the full path must decide. Only for a
    /// hold the read before it called `plain` (so the one statement's refusals stay rare), and
    /// not on SQLite, whose writer thread has a path of its own.
    async fn one_trip(
        &self,
        req: &claim::Request<'_>,
        plain: bool,
    ) -> Option<ApiResult<HoldAnswer>> {
        let state = self.state;
        let Ask::Seats(seats) = &req.ask else {
            return None;
        };
        if !plain || state.writer.is_some() || db::backend(&state.db) != Backend::Postgres {
            return None;
        }
        let (mut tries, mut turns) = (0, 0);
        while tries < ONE_TRIPS && turns < GATE_TURNS {
            turns += 1;
            // One statement at a time per seat in this process (`inventory::seatgate`): a
            // request for a seat another request's statement is running for waits here, not
            // on the row's lock with a connection of the pool, and then reads again.
            match state.seat_gates.enter(self.show, seats) {
                Turn::Mine(pass) => {
                    tries += 1;
                    let tried = onetrip::hold(&state.db, req, self.now).await;
                    let lock_wait = tried.as_ref().is_err_and(crate::error::lock_waited);
                    pass.finish(if lock_wait {
                        Ended::LockWait
                    } else {
                        Ended::Done
                    });
                    match tried {
                        Ok(OneTrip::Held(answer)) => return Some(Ok(answer)),
                        Ok(OneTrip::Other) => return None,
                        Err(e) => return Some(Err(e.into())),
                        Ok(OneTrip::Lost) => {}
                    }
                }
                Turn::Wait(rx) => {
                    let waited =
                        telemetry::hold_phase("seat_gate", seatgate::wait(rx, IN_FLIGHT_WAIT))
                            .await;
                    match waited {
                        Some(Ended::Done) => {}
                        Some(Ended::LockWait) => {
                            return Some(Err(crate::error::lock_wait().into()))
                        }
                        None => {
                            return Some(Err(Problem::unavailable(
                                "another request for these seats is still running; try again",
                                1,
                            )
                            .into()))
                        }
                    }
                }
            }
            // A new snapshot: another node's identical request may have stored its 201 while
            // the statement waited on the seats' locks (case B12).
            let seen = self.read(Check::Seats(seats), true).await;
            match seen {
                Err(e) => return Some(Err(e)),
                Ok(Seen {
                    answer: Some(stored),
                    ..
                }) => return Some(Ok(stored)),
                Ok(Seen {
                    lost: Some(lost),
                    recorded,
                    ..
                }) => return Some(Err(self.refuse(lost, recorded).await)),
                // Every seat free again: try again while `plain` (else a cap appeared: the
                // full path decides).
                Ok(Seen { plain, .. }) if plain => {}
                Ok(_) => return None,
            }
        }
        None
    }

    /// The refusal of a hold that a read refused (`lost`: the asked seats seen taken with
    /// their statuses, or the pool seen short): its 409 (`seats-unavailable`,
    /// `pool-unavailable`) once the key is recorded as refused (the key cannot be reused for
    /// another request), as after a lost transaction; `recorded`: the read stored it already
    /// (`preread::Seen::recorded`), else it is stored here; 422 when another request stored
    /// the key first; the database's error when the record failed.
    async fn refuse(&self, lost: Lost, recorded: bool) -> ApiError {
        let state = self.state;
        if !recorded {
            let row = claim::Refused::of(&self.adm.sub, self.key, self.hash, self.now);
            match telemetry::hold_phase("refusal", state.refusals.record(&state.db, row)).await {
                Ok(true) => {}
                Ok(false) => return claim::key_reused().into(),
                Err(e) => return e.into(),
            }
        }
        let local = state.local_reads.as_ref();
        match lost.problem(&state.reads, local, self.show, self.now).await {
            Ok(p) => p.into(),
            Err(e) => e.into(),
        }
    }
}

/// Refuses a hold of seats in a tier-only section (`Tier::restricted`, issue 14 item 3) unless
/// the admission's `tier` is one of that section's tiers: `403 tier-required`, naming the
/// section and its tiers, before any database call.
fn tier_allows(venue: &crate::venue::Venue, ask: &Ask, tier: Option<&str>) -> Result<(), Problem> {
    if !venue.tiers.iter().any(|t| t.restricted) {
        return Ok(());
    }
    let mut sections: Vec<&str> = Vec::new();
    for part in ask.parts() {
        match part {
            Ask::Seats(seats) => sections.extend(seats.iter().filter_map(|s| s.split('-').next())),
            Ask::Best { section, .. } => sections.push(section),
            _ => {}
        }
    }
    for section in sections {
        let only = crate::venue::extras::tiers_only(&venue.tiers, section);
        if !only.is_empty() && !tier.is_some_and(|t| only.contains(&t)) {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "tier-required",
                "These seats are for another tier",
            )
            .detail(format!(
                "section {section} is reserved for fans of tier {}; your admission {}",
                only.join(" or "),
                tier.map_or("carries no tier".to_owned(), |t| format!("is for tier {t}"))
            ))
            .with("section", section)
            .with("tiers", only));
        }
    }
    Ok(())
}

/// A hold answer with the venue's `currency` (ISO 4217) beside its `amount_cents`, and an
/// interval's local times in the venue's `time_zone`; stored answers are kept as they were and
/// get both on the way out, so a replay says them too.
fn with_currency(mut body: Value, venue: &crate::config::Venue) -> Value {
    if body.get("hold_id").is_some() {
        body["currency"] = venue.currency.clone().into();
        super::resources::localise_interval(&mut body, &venue.time_zone);
    }
    body
}

/// How long an identical request waits for the one in flight before `409 concurrent-request`.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn secs_to_ms(secs: u64) -> i64 {
    i64::try_from(secs).unwrap_or(i64::MAX / 2000) * 1000
}

/// `GET /api/holds/{hold}`.
#[utoipa::path(
    get,
    path = "/api/holds/{hold}",
    tag = "fan",
    summary = "The fan's hold",
    params(("hold" = String, Path, description = "hold id (the fan's own; another's is 404)")),
    responses(
        (status = 200, description = "{hold_id, show, seats, status: HELD/PAID/RELEASED, expires_at, payment_expires_at, pay_by (the last moment to start paying, epoch s), amount_cents, currency (the venue's, ISO 4217), payment_id?, payment? {attempt, gateway_status: null or cancelled/failed/expired}, booking_id?, booking_status? (active/cancelled), cancelled_seats? (cancelled from the booking)}", body = Object),
        (status = 404, description = "no such hold for this fan", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn get_hold(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    state
        .clone()
        .on_checkout(move |state| async move {
            let h = hold_of_fan(&state, &headers, &id).await?;
            let mut v = holds::view(&state.db, &h).await?;
            if let Ok(show) = super::resources::show_config(&state, &h.show_id) {
                v["currency"] = show.venue.currency.clone().into();
                super::resources::localise_interval(&mut v, &show.venue.time_zone);
            }
            v["pay_by"] = (payments::pay_by_ms(&state.config, &h) / 1000).into();
            Ok(Json(v))
        })
        .await
}

/// Optional body of `POST /api/holds/{hold}/pay`: pay again after a cancelled or failed payment.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayBody {
    /// The payment id this new attempt replaces (the hold's current one, which the gateway must
    /// say can no longer complete).
    /// Left out (`{}`): the current payment, as with no body. Not `null`.
    #[serde(default, deserialize_with = "sale_common::body::present")]
    replaces: Option<String>,
}

/// `POST /api/holds/{hold}/pay`.
#[utoipa::path(
    post,
    path = "/api/holds/{hold}/pay",
    tag = "fan",
    summary = "Create the hold's gateway payment (once; again while HELD → the same), or pay again with {replaces}",
    params(("hold" = String, Path, description = "hold id (the fan's own; another's is 404)")),
    request_body(content = Option<PayBody>, description = "none or {}: the current payment (created once); {replaces: payment_id}: a new attempt after that payment was cancelled or failed (two calls replacing the same attempt make one)"),
    responses(
        (status = 200, description = "{payment_id, checkout_url, attempt}", body = Object),
        (status = 400, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 404, description = "no such hold for this fan", body = ProblemDoc),
        (status = 409, description = "hold-paid, hold-not-held (hold_status), payment-session-over (pay_by), payment-in-progress (Retry-After: being created, or the replaced payment may still complete)", body = ProblemDoc,
            headers(("Retry-After" = u64, description = "payment-in-progress only"))),
        (status = 422, description = "unknown-attempt: replaces names no payment of this hold; invalid-body: not an object (a JSON array), an unknown member, `replaces` null", body = ProblemDoc),
        (status = 502, description = "gateway-unavailable: the payment could not be created", body = ProblemDoc),
        (status = 503, description = "gateway-unavailable (Retry-After): no gateway access token yet (nothing was sent), or the replaced payment could not be voided yet; database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn pay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    state
        .clone()
        .on_checkout(move |state| async move {
            let h = hold_of_fan(&state, &headers, &id).await?;
            // No body, or an empty JSON object (what most HTTP clients send for "no fields"): the
            // current payment; `{"replaces"}`: a new attempt.
            let again = match sale_common::body::optional::<PayBody>(&body)? {
                None | Some(PayBody { replaces: None }) => {
                    return Ok(Json(payments::start(&state, &h).await?));
                }
                Some(PayBody {
                    replaces: Some(again),
                }) => again,
            };
            Ok(Json(
                payments::attempts::pay_again(&state, &h, &again).await?,
            ))
        })
        .await
}

/// `DELETE /api/holds/{hold}`.
#[utoipa::path(
    delete,
    path = "/api/holds/{hold}",
    tag = "fan",
    summary = "Cancel: release at once, or after the gateway voids the payment",
    params(("hold" = String, Path, description = "hold id (the fan's own; another's is 404)")),
    responses(
        (status = 200, description = "{hold_id, status: RELEASED}", body = Object),
        (status = 404, description = "no such hold for this fan", body = ProblemDoc),
        (status = 409, description = "hold-paid (also when the payment completed meanwhile); payment-in-progress (being created, or may still complete)", body = ProblemDoc),
        (status = 503, description = "gateway-unavailable: the payment could not be voided yet; database busy", body = ProblemDoc),
    ),
    security(("admission_token" = []), ("admission_cookie" = [])),
)]
pub async fn delete_hold(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    state
        .clone()
        .on_checkout(move |state| async move {
            let (adm, expired) = hold_admission(&state, &headers).await?;
            if let Some(done) = payments::release_own_plain(&state, &adm, &id).await? {
                return Ok(Json(done));
            }
            let h = own_hold_of(&state, &adm, expired, &id).await?;
            Ok(Json(payments::release_by_fan(&state, &h).await?))
        })
        .await
}
