//! The operator's side of the quiet lane (issue 15 item 2; API.md "Address rules and the shadow
//! line"): address rules per event (list, add, delete; validated, audited) and the shadow line
//! (who, which rule, when) with a release of a false positive into the fans' line, at the back.
//! Behind the admin token like every admin route.

use super::admin::{operator, record, require_admin};
use super::error::{bounded, query_problem};
use super::{parse_event, private_json, AppState};
use crate::domain::{EventId, VisitorId};
use crate::http::openapi::ProblemDoc;
use crate::lanes::{AddressRule, Cidr, RuleAction, ShadowEntry};
use crate::store::RuleAdded;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::{json, Value};

/// The rule and shadow-line routes, behind the admin-token check.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route(
            "/admin/events/{event}/rules",
            get(list_rules).post(add_rule),
        )
        .route("/admin/events/{event}/rules/{rule}", delete(delete_rule))
        .route("/admin/events/{event}/shadow", get(shadow_line))
        .route(
            "/admin/events/{event}/shadow/{visitor}/release",
            post(release),
        )
        .route_layer(middleware::from_fn_with_state(state, require_admin))
}

/// Most characters of a rule's note.
pub const NOTE_MAX: usize = 200;

fn invalid(kind: &'static str, detail: impl Into<String>) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, kind, "Invalid rule").detail(detail)
}

/// Body of `POST /admin/events/{event}/rules`; unknown fields are refused (422).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRule {
    /// `203.0.113.0/24`, `2001:db8::/32` or one address.
    cidr: String,
    /// `block`, `bypass`, `challenge` or `shadow`.
    action: String,
    /// `challenge` only: leading zero bits, 1..=28 (default 16).
    pow_bits: Option<u32>,
    /// Why (up to 200 characters).
    note: Option<String>,
}

fn check(b: NewRule) -> Result<(Cidr, RuleAction, Option<u32>, String), Problem> {
    let cidr = Cidr::parse(&b.cidr).map_err(|e| invalid("invalid-cidr", super::error::clip(&e)))?;
    let action = RuleAction::parse(&b.action).ok_or_else(|| {
        invalid(
            "invalid-action",
            "action must be one of block, bypass, challenge, shadow",
        )
    })?;
    let pow_bits = match (action, b.pow_bits) {
        (RuleAction::Challenge, Some(p)) if !(1..=crate::pow::MAX_BITS).contains(&p) => {
            return Err(invalid("invalid-pow-bits", "pow_bits: 1..=28"))
        }
        (RuleAction::Challenge, p) => p,
        (_, Some(_)) => {
            return Err(invalid(
                "invalid-pow-bits",
                "pow_bits applies to challenge rules only",
            ))
        }
        (_, None) => None,
    };
    let note = b.note.unwrap_or_default();
    if note.chars().count() > NOTE_MAX || note.chars().any(char::is_control) {
        return Err(invalid(
            "invalid-note",
            "note: at most 200 characters, no control characters",
        ));
    }
    Ok((cidr, action, pow_bits, note))
}

async fn sorted_rules(st: &AppState, event: &EventId) -> Result<Vec<AddressRule>, Problem> {
    let mut rules = bounded(st.store_timeout(), st.0.store.rules(event)).await?;
    rules.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
    Ok(rules)
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}/rules",
    tag = "admin",
    summary = "The event's address rules, oldest first",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "rules", body = Vec<AddressRule>),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn list_rules(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let rules = sorted_rules(&st, &event).await?;
    let body = serde_json::to_value(rules).map_err(|_| Problem::internal())?;
    Ok(private_json(StatusCode::OK, body))
}

#[utoipa::path(
    post,
    path = "/admin/events/{event}/rules",
    tag = "admin",
    summary = "Add an address rule (audited): block, bypass, challenge or shadow",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = NewRule,
    responses(
        (status = 201, description = "the rule", body = AddressRule),
        (status = 422, description = "invalid-cidr, invalid-action, invalid-pow-bits, invalid-note, too-many-rules, or a malformed body", body = ProblemDoc),
        (status = 409, description = "rule-exists: a rule on this range exists (`rule` names it)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn add_rule(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<NewRule>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    let (cidr, action, pow_bits, note) = check(b)?;
    let rule = AddressRule {
        id: format!("r{:08x}", rand::random::<u32>()),
        cidr: cidr.to_string(),
        action,
        pow_bits,
        note,
        created_by: who.clone(),
        created_at: st.0.clock.now_secs(),
    };
    let call = st.0.store.put_rule(&event, &rule, crate::store::RULES_MAX);
    match bounded(st.store_timeout(), call).await? {
        RuleAdded::Added => {}
        RuleAdded::Full => {
            return Err(invalid("too-many-rules", "at most 1000 rules per event"));
        }
        // Two rules on one range would leave which applies to chance (same prefix, same
        // second): change a range's action by deleting its rule first.
        RuleAdded::SameRange(same) => {
            return Err(Problem::new(
                StatusCode::CONFLICT,
                "rule-exists",
                "A rule on this address range exists",
            )
            .detail(format!(
                "rule {} already applies {} to {}; delete it first to change it",
                same.id,
                same.action.as_str(),
                same.cidr
            ))
            .with("rule", same.id));
        }
    }
    st.0.screen.forget_rules(&event);
    let v = serde_json::to_value(&rule).map_err(|_| Problem::internal())?;
    record(&st, &event, &who, "add_rule", Value::Null, v.clone()).await;
    Ok(private_json(StatusCode::CREATED, v))
}

#[utoipa::path(
    delete,
    path = "/admin/events/{event}/rules/{rule}",
    tag = "admin",
    summary = "Delete an address rule (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}"), ("rule" = String, Path, description = "rule id")),
    responses(
        (status = 204, description = "deleted"),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event or no such rule", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn delete_rule(
    State(st): State<AppState>,
    Path((event, rule)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let call = st.0.store.delete_rule(&event, &rule);
    let Some(old) = bounded(st.store_timeout(), call).await? else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no-such-rule",
            "No such rule",
        ));
    };
    st.0.screen.forget_rules(&event);
    let v = serde_json::to_value(&old).map_err(|_| Problem::internal())?;
    record(&st, &event, &who, "delete_rule", v, Value::Null).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Query of `GET /admin/events/{event}/shadow`.
#[derive(Debug, Deserialize)]
pub struct ShadowQuery {
    limit: Option<usize>,
}

/// One row of the operator's view of the shadow line.
fn row(e: &ShadowEntry) -> Value {
    json!({
        "visitor_id": e.visitor,
        "shadow_number": e.shadow_number,
        "shown_number": e.shown_number(),
        "rule": e.rule,
        "address": e.address,
        "at_ms": e.at_ms,
    })
}

#[utoipa::path(
    get,
    path = "/admin/events/{event}/shadow",
    tag = "admin",
    summary = "The shadow line (who, which rule, when), oldest first",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}"), ("limit" = Option<usize>, Query, description = "first N entries (default 500, at most 10000)")),
    responses(
        (status = 200, description = "entries: visitor_id, shadow_number, shown_number, rule, address, at_ms", body = Object),
        (status = 400, description = "malformed query", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn shadow_line(
    State(st): State<AppState>,
    Path(event): Path<String>,
    q: Result<Query<ShadowQuery>, QueryRejection>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let Query(q) = q.map_err(query_problem)?;
    let limit = q.limit.unwrap_or(500).clamp(1, 10_000);
    let limit_t = st.store_timeout();
    bounded(limit_t, st.0.store.event(&event))
        .await?
        .ok_or_else(|| Problem::not_found("no such event"))?;
    let entries = bounded(limit_t, st.0.store.shadow_list(&event, limit)).await?;
    let rows: Vec<Value> = entries.iter().map(row).collect();
    Ok(private_json(StatusCode::OK, json!({ "entries": rows })))
}

#[utoipa::path(
    post,
    path = "/admin/events/{event}/shadow/{visitor}/release",
    tag = "admin",
    summary = "Release a false positive into the fans' line, at the back (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}"), ("visitor" = String, Path, description = "visitor id from the shadow line")),
    responses(
        (status = 200, description = "visitor_id, queue_number (null while pre-queued), state", body = Object),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event, or not in the shadow line (not-in-shadow-line)", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
async fn release(
    State(st): State<AppState>,
    Path((event, visitor)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let not_there = || {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not-in-shadow-line",
            "No such visitor in the shadow line",
        )
    };
    if uuid::Uuid::parse_str(&visitor).is_err() {
        return Err(not_there());
    }
    let visitor = VisitorId::from_verified(visitor);
    let limit = st.store_timeout();
    let Some(entry) = bounded(limit, st.0.store.shadow_entry(&event, &visitor)).await? else {
        return Err(not_there());
    };
    // Into the fans' line first, then out of the shadow line: a crash between the two leaves
    // the visitor shadowed, and releasing again returns the same place (joins are `NX`).
    let (now_ms, rejoin) = (st.0.clock.now_ms(), st.0.config.rejoin_grace_ms());
    let out = bounded(limit, st.0.store.join(&event, &visitor, now_ms, rejoin)).await?;
    // Concurrent releases of one visitor all join the same place (joins are per visitor); only
    // the one whose removal took the entry out answers 200 and writes the audit entry (found by
    // the newcomer review: 20 concurrent releases on Redis answered 20 × 200 and audited 20).
    let removed = bounded(limit, st.0.store.shadow_remove(&event, &visitor)).await?;
    if removed.is_none() {
        return Err(not_there());
    }
    let new = json!({"queue_number": out.queue_number});
    record(&st, &event, &who, "release_shadow", row(&entry), new).await;
    Ok(private_json(
        StatusCode::OK,
        json!({
            "visitor_id": visitor.as_str(),
            "queue_number": out.queue_number,
            "state": out.state.public(),
        }),
    ))
}
