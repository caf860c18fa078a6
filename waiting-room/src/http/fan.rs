//! Per-fan endpoints: join, heartbeat, position, admission (API.md); leaving is `leave.rs`. Tokens are checked before
//! any store call; every answer is `private, no-store`. A join behind a trusted proxy that
//! sets the configured identity header, or carrying a valid signed identity token, gets the
//! visitor id derived from that identity, so one identity holds one place.

use super::access::Entry;
use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::domain::{AdmissionTerms, ClaimOutcome, EventId, EventState, VisitorId};
use crate::http::openapi::ProblemDoc;
use crate::identity::IDENTITY_TOKEN_HEADER;
use crate::ratelimit::{client_ip, peer_ip, TrustedProxyKey};
use crate::screen::Verdict;
use crate::tokens::new_jti;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sale_common::Problem;
use serde_json::json;
use std::net::IpAddr;

/// The verified identity of a join: set by a trusted upstream in `identity_header` (honoured
/// only when the peer is a trusted proxy), else a signed `X-Identity-Token` (honoured from any
/// peer when `identity_token_key` is configured; a bad one is a 401). `Ok(None)` otherwise.
fn upstream_identity(st: &AppState, req: &Request) -> Result<Option<String>, Problem> {
    if let Some(id) = header_identity(st, req)? {
        return Ok(Some(id));
    }
    let (Some(verifier), Some(value)) = (
        st.0.identity.as_ref(),
        req.headers().get(IDENTITY_TOKEN_HEADER),
    ) else {
        return Ok(None);
    };
    let token = value.to_str().unwrap_or_default();
    match verifier.verify(token, st.0.clock.now_secs()) {
        Ok(id) => Ok(Some(id)),
        Err(e) => {
            crate::telemetry::rejected_token("identity", e.reason());
            Err(Problem::unauthorized(
                "invalid-identity-token",
                format!("X-Identity-Token: {}", e.reason()),
            ))
        }
    }
}

fn header_identity(st: &AppState, req: &Request) -> Result<Option<String>, Problem> {
    let Some(name) = st.0.config.identity_header.as_deref() else {
        return Ok(None);
    };
    let Some(value) = req.headers().get(name) else {
        return Ok(None);
    };
    let trusted = TrustedProxyKey::new(st.0.config.trusted_proxies.clone());
    if !peer_ip(req.extensions()).is_some_and(|p| trusted.is_trusted(p)) {
        return Ok(None);
    }
    let id = value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= 256)
        .ok_or_else(|| Problem::bad_request("identity header: 1..=256 visible characters"))?;
    Ok(Some(id.to_owned()))
}

/// `POST /api/events/{event}/join`: a new place, or the same place for a valid join token (or
/// the same verified identity).
#[tracing::instrument(skip_all, fields(event = %event))]
#[utoipa::path(
    post,
    path = "/api/events/{event}/join",
    tag = "fan",
    summary = "Join the queue (or re-join with a join token)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "visitor_id, join_token, queue_number (null while pre-queued), state", body = Object),
        (status = 403, description = "proof of work required or invalid (pow-required), the client's address range is blocked by the operator (address-blocked), or the X-Access-Code is not a code of this event (code-unknown)", body = ProblemDoc),
        (status = 401, description = "missing, malformed, forged or expired token; or the event needs an access code and none was sent (code-required)", body = ProblemDoc),
        (status = 410, description = "the access code has no uses left (code-used-up) or has expired (code-expired); the fan's code was revoked (code-revoked)", body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 429, description = "rate-limited per client IP, or too many wrong access codes from this address or identity (code-attempts-limited) (Retry-After)", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security((), ("join_token" = [])),
)]
pub async fn join(
    State(st): State<AppState>,
    Path(event): Path<String>,
    req: Request,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let by_token = st.join_identity(req.headers(), &event)?;
    if let Some(v) = &by_token {
        if let Some(entry) = shadow_entry(&st, &event, v).await? {
            return Ok(super::shadow::joined(&st, &event, v, &entry));
        }
    }
    let identity = upstream_identity(&st, &req)?;
    let ip = client_addr(&st, &req);
    let headers = req.into_parts().0.headers;
    let keys = super::access::fail_keys(&event, ip, identity.as_deref());
    let (visitor, entry) = match (by_token, identity) {
        (_, Some(identity)) => {
            if let Some(Verdict::Block(_)) = screen(&st, &event, ip).await? {
                return Err(blocked());
            }
            let v = st.0.join_keys.identity_visitor(&event, &identity);
            let entry = super::access::check_access(&st, &event, &headers, &keys, &v).await?;
            (entry.visitor().cloned().unwrap_or(v), entry)
        }
        (Some(v), None) => {
            // A fan whose code was revoked does not come back with the join token alone.
            super::access::revoked_problem(&st, &event, &v).await?;
            (v, Entry::Open)
        }
        (None, None) => {
            let fresh = VisitorId::random();
            let entry = super::access::check_access(&st, &event, &headers, &keys, &fresh).await?;
            let fresh = entry.visitor().cloned().unwrap_or(fresh);
            match new_visitor(&st, &event, &headers, ip, fresh.clone()).await {
                Ok(NewVisitor::Fan(v)) => (v, entry),
                Ok(NewVisitor::Shadow(v, shadow)) => {
                    super::access::refund(&st, &event, &entry, &fresh).await;
                    return Ok(super::shadow::joined(&st, &event, &v, &shadow));
                }
                Err(e) => {
                    super::access::refund(&st, &event, &entry, &fresh).await;
                    return Err(e);
                }
            }
        }
    };
    let now_ms = st.0.clock.now_ms();
    let rejoin = st.0.config.rejoin_grace_ms();
    let store = &st.0.store;
    let joined = store.join(&event, &visitor, now_ms, rejoin);
    let out = match bounded(st.store_timeout(), joined).await {
        Ok(out) => out,
        Err(e) => {
            super::access::refund(&st, &event, &entry, &visitor).await;
            return Err(e);
        }
    };
    // A closed or sold-out event takes no new fan: the code's use is given back.
    if matches!(out.state, EventState::Closed | EventState::SoldOut) && out.queue_number.is_none() {
        super::access::refund(&st, &event, &entry, &visitor).await;
    } else {
        super::access::joined(&st, &event, &entry, &visitor).await;
    }
    crate::telemetry::count_event("wr_joins_total", event.as_str());
    if out.queue_number.is_some() && out.state == EventState::Open {
        super::mode::after_join(&st, &event, now_ms).await;
    }
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

/// The client address, as the trusted-proxy rules find it (`X-Forwarded-For` believed only
/// from `trusted_proxies`, case W03).
fn client_addr(st: &AppState, req: &Request) -> Option<IpAddr> {
    peer_ip(req.extensions()).map(|p| client_ip(p, req.headers(), &st.0.config.trusted_proxies))
}

/// The verdict of the event's address rules and this node's proof-of-work failure count for a
/// new join (`None` when the client address is unknown).
async fn screen(
    st: &AppState,
    event: &EventId,
    ip: Option<IpAddr>,
) -> Result<Option<Verdict>, Problem> {
    let Some(ip) = ip else {
        return Ok(None);
    };
    let now_ms = st.0.clock.now_ms();
    let call = st.0.screen.rules(&*st.0.store, event, now_ms);
    let rules = bounded(st.store_timeout(), call).await?;
    Ok(Some(st.0.screen.verdict(event, &rules, ip, now_ms)))
}

fn blocked() -> Problem {
    Problem::new(
        StatusCode::FORBIDDEN,
        "address-blocked",
        "Joins from your network are not accepted for this event",
    )
    .detail("the organiser blocked this address range; contact the organiser if this is a mistake")
}

/// A shadowed visitor's entry (an id not minted for the shadow line costs no store call).
pub(super) async fn shadow_entry(
    st: &AppState,
    event: &EventId,
    visitor: &VisitorId,
) -> Result<Option<crate::lanes::ShadowEntry>, Problem> {
    if !st.0.screen.tag().is_shadow(visitor.as_str()) {
        return Ok(None);
    }
    let call = st.0.store.shadow_entry(event, visitor);
    bounded(st.store_timeout(), call).await
}

enum NewVisitor {
    Fan(VisitorId),
    Shadow(VisitorId, crate::lanes::ShadowEntry),
}

/// A join without a token or identity: the address rules, the proof of work (failures counted
/// per address), then a fresh visitor id, in the fans' line or the shadow line.
async fn new_visitor(
    st: &AppState,
    event: &EventId,
    headers: &HeaderMap,
    ip: Option<IpAddr>,
    fresh: VisitorId,
) -> Result<NewVisitor, Problem> {
    let verdict = screen(st, event, ip).await?.unwrap_or(Verdict::Normal);
    let bits = st.0.status.pow_bits(event).unwrap_or(0);
    let now_ms = st.0.clock.now_ms();
    let checked = |bits| async move {
        let r = check_pow(st, event, headers, bits).await;
        if let (Err(_), Some(ip)) = (&r, ip) {
            st.0.screen.pow_failed(ip, now_ms);
        }
        r
    };
    let shadow_reason = match verdict {
        Verdict::Block(_) => return Err(blocked()),
        Verdict::Bypass(_) => None,
        Verdict::Normal => checked(bits).await.map(|_| None)?,
        Verdict::Challenge(_, rule_bits) => checked(bits.max(rule_bits)).await.map(|_| None)?,
        // Flagged by its own failures: its next join is quietly accepted into the shadow line.
        Verdict::Shadow(reason) if reason == crate::lanes::POW_FAILURES => Some(reason),
        Verdict::Shadow(reason) => checked(bits).await.map(|_| Some(reason))?,
    };
    let Some(reason) = shadow_reason else {
        return Ok(NewVisitor::Fan(fresh));
    };
    let visitor = VisitorId::from_verified(st.0.screen.tag().mint());
    let entry = crate::lanes::ShadowEntry {
        visitor: visitor.as_str().to_owned(),
        shadow_number: 0,
        behind: 0,
        rule: reason.clone(),
        address: ip.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string()),
        at_ms: now_ms,
    };
    let entry = bounded(st.store_timeout(), st.0.store.shadow_join(event, &entry)).await?;
    crate::screen::shadow_joined(event, &reason);
    Ok(NewVisitor::Shadow(visitor, entry))
}

/// A new join (no join token) must carry a proof of work of `bits` when above 0: the event's
/// difficulty (from the published status document: no store call), or a `challenge` rule's.
///
/// A challenge is spent once across every node: the node's own replay cache first (no store
/// call), then one `SET NX PX` on `wr:{event}:pow:{mac}` for the challenge's remaining life
/// (issue 11 item 6). A bad proof never reaches the store.
async fn check_pow(
    st: &AppState,
    event: &EventId,
    headers: &HeaderMap,
    bits: u32,
) -> Result<(), Problem> {
    if bits == 0 {
        return Ok(());
    }
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok());
    let proof = h("x-pow-challenge").zip(h("x-pow-solution"));
    let now = st.0.clock.now_secs();
    let refuse = |e: crate::pow::PowError| {
        crate::telemetry::rejected_token("pow", e.reason());
        Problem::new(StatusCode::FORBIDDEN, "pow-required", e.to_string())
            .detail("GET /api/events/{event}/pow, solve, send X-Pow-Challenge and X-Pow-Solution")
            .with("difficulty", bits)
    };
    let expires = st.0.pow.verify(event, now, bits, proof).map_err(refuse)?;
    let challenge = proof.map(|(c, _)| c).unwrap_or_default();
    let mac = challenge.rsplit_once('.').map_or(challenge, |(_, m)| m);
    let key = format!("wr:{{{event}}}:pow:{mac}");
    let ttl_ms = (expires - now).max(1) as u64 * 1000;
    let first = bounded(
        st.store_timeout(),
        st.0.store.try_lock(&key, "spent", ttl_ms),
    )
    .await?;
    if first {
        Ok(())
    } else {
        Err(refuse(crate::pow::PowError::Replayed))
    }
}

/// `GET /api/events/{event}/pow`: a fresh challenge and the current difficulty (no store call).
#[utoipa::path(
    get,
    path = "/api/events/{event}/pow",
    tag = "fan",
    summary = "A proof-of-work challenge and the current difficulty",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "challenge, difficulty (bits), expires_at", body = Object),
        (status = 404, description = "no such event", body = ProblemDoc)
    ),
)]
pub async fn pow_challenge(
    State(st): State<AppState>,
    Path(event): Path<String>,
    req: Request,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let doc =
        st.0.status
            .get(&event)
            .ok_or_else(|| Problem::not_found("no such event"))?;
    // A `challenge` rule's address is asked for its harder proof (no rule hit counted here).
    let mut difficulty = doc.pow_difficulty;
    let ip = client_addr(&st, &req);
    drop(req);
    if let Some(ip) = ip {
        let call = st.0.screen.rules(&*st.0.store, &event, st.0.clock.now_ms());
        let rules = bounded(st.store_timeout(), call).await?;
        if let Some(r) = crate::lanes::rule_for(&rules, ip)
            .filter(|r| r.action == crate::lanes::RuleAction::Challenge)
        {
            let bits = r.pow_bits.unwrap_or(crate::screen::CHALLENGE_DEFAULT_BITS);
            difficulty = difficulty.max(bits);
        }
    }
    let (challenge, expires_at) = st.0.pow.issue(&event, st.0.clock.now_secs());
    Ok(private_json(
        StatusCode::OK,
        json!({"challenge": challenge, "difficulty": difficulty, "expires_at": expires_at}),
    ))
}

pub(super) fn require_identity(
    st: &AppState,
    headers: &HeaderMap,
    event: &EventId,
) -> Result<VisitorId, Problem> {
    st.join_identity(headers, event)?.ok_or_else(|| {
        crate::telemetry::rejected_token("join", "missing");
        Problem::unauthorized(
            "join-token-required",
            "send Authorization: Bearer <join_token>",
        )
    })
}

/// `POST /api/events/{event}/heartbeat`: a fan in the ready window says it is still there (one
/// store call); also brings a skipped fan back within the rejoin grace.
#[tracing::instrument(skip_all, fields(event = %event))]
#[utoipa::path(
    post,
    path = "/api/events/{event}/heartbeat",
    tag = "fan",
    summary = "Sign of life from a fan in the ready window (one store call)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "queue_number, cursor, state, place, heartbeat_interval_ms", body = Object),
        (status = 401, description = "missing, malformed, forged or expired token", body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 429, description = "rate-limited per client IP (Retry-After)", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("join_token" = [])),
)]
pub async fn heartbeat(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = require_identity(&st, &headers, &event)?;
    if let Some(entry) = shadow_entry(&st, &event, &visitor).await? {
        return Ok(super::shadow::heartbeat(&st, &event, &entry));
    }
    let now_ms = st.0.clock.now_ms();
    let rejoin = st.0.config.rejoin_grace_ms();
    let call = st.0.store.heartbeat(&event, &visitor, now_ms, rejoin);
    let h = bounded(st.store_timeout(), call).await?;
    crate::telemetry::count_event("wr_heartbeats_total", event.as_str());
    Ok(private_json(
        StatusCode::OK,
        json!({
            "queue_number": h.queue_number,
            "cursor": h.cursor,
            "state": h.state.public(),
            "place": h.place.as_str(),
            "heartbeat_interval_ms": st.0.config.heartbeat_interval_ms,
        }),
    ))
}

/// `GET /api/events/{event}/position`.
#[tracing::instrument(skip_all, fields(event = %event))]
#[utoipa::path(
    get,
    path = "/api/events/{event}/position",
    tag = "fan",
    summary = "A fan's place",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "visitor_id, queue_number, cursor, ahead (people ahead: queue_number - cursor - 1 minus places vacated between them; 0 once reached; null without a number), state, admitted", body = Object),
        (status = 401, description = "missing, malformed, forged or expired token", body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 410, description = "code-revoked: the organiser revoked the fan's access code and the place was released", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("join_token" = [])),
)]
pub async fn position(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = require_identity(&st, &headers, &event)?;
    if let Some(entry) = shadow_entry(&st, &event, &visitor).await? {
        return Ok(super::shadow::position(&st, &event, &visitor, &entry));
    }
    let p = bounded(st.store_timeout(), st.0.store.position(&event, &visitor)).await?;
    if p.queue_number.is_none() {
        super::access::revoked_problem(&st, &event, &visitor).await?;
    }
    Ok(private_json(
        StatusCode::OK,
        json!({
            "visitor_id": visitor.as_str(),
            "queue_number": p.queue_number,
            "cursor": p.cursor,
            "ahead": p.ahead,
            "state": p.state.public(),
            "admitted": p.admitted,
        }),
    ))
}

/// `POST /api/events/{event}/admission`: the admission token once the cursor has reached the
/// fan; the same token again on every retry (case W08).
#[tracing::instrument(skip_all, fields(event = %event))]
#[utoipa::path(
    post,
    path = "/api/events/{event}/admission",
    tag = "fan",
    summary = "Claim the admission token (idempotent)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "admission_token, expires_at, booking_url, event", body = Object),
        (status = 409, description = "not-your-turn, returning (Retry-After) or event-<state>", body = ProblemDoc),
        (status = 410, description = "place-lost: skipped and back after the rejoin grace; admission-expired: the admission was not used in time (join again without the join token)", body = ProblemDoc),
        (status = 401, description = "missing, malformed, forged or expired token", body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 429, description = "rate-limited per client IP (Retry-After)", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("join_token" = [])),
)]
pub async fn admission(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let visitor = require_identity(&st, &headers, &event)?;
    if let Some(entry) = shadow_entry(&st, &event, &visitor).await? {
        return Err(super::shadow::claim(&st, &event, &entry));
    }
    super::mode::refuse_in_maintenance(&st, &event)?;
    let limit = st.store_timeout();
    let meta = st.event_constants(&event).await?;
    let now_ms = st.0.clock.now_ms();
    let terms = AdmissionTerms::new(meta.admission_ttl_secs, st.0.config.max_clock_skew_secs);
    let (jti, rejoin) = (new_jti(), st.0.config.rejoin_grace_ms());
    super::access::refuse_revoked_claim(&st, &event, &visitor).await?;
    let call =
        st.0.store
            .claim(&event, &visitor, now_ms, terms, &jti, rejoin);
    match bounded(limit, call).await? {
        // Claiming again returns the same admission (W08), but not once it has expired: the
        // booking core would refuse it and send the fan back here in a loop.
        ClaimOutcome::Admitted(a) if a.exp <= now_ms.div_euclid(1000) => Err(Problem::new(
            StatusCode::GONE,
            "admission-expired",
            "Your admission expired",
        )
        .detail(
            "it was not used in time; join again without your join token for a new place at \
             the end of the queue",
        )
        .with("expired_at", a.exp)),
        ClaimOutcome::Admitted(a) => {
            let mut claims = st.0.signer.claims(&event, visitor.as_str(), &a);
            claims.tier = super::access::tier_of(&st, &event, &visitor).await?;
            let token = st.0.signer.sign(&claims).map_err(|e| {
                tracing::error!(error = %e, "signing an admission token failed");
                Problem::internal()
            })?;
            Ok(private_json(
                StatusCode::OK,
                json!({
                    "admission_token": token,
                    "expires_at": a.exp,
                    "booking_url": &*meta.booking_url,
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
        ClaimOutcome::Returning { queue_number } => Err(Problem::new(
            StatusCode::CONFLICT,
            "returning",
            "Welcome back: you keep your place and are let in at the next tick",
        )
        .with("queue_number", queue_number)
        .retry_after(1)),
        ClaimOutcome::Lost { queue_number } => Err(Problem::new(
            StatusCode::GONE,
            "place-lost",
            "Your place was skipped and the rejoin grace has passed; join again",
        )
        .with("queue_number", queue_number)),
        ClaimOutcome::Refused(state) => Err(refused(state)),
    }
}

pub(super) fn refused(state: EventState) -> Problem {
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
