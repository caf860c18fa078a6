//! Overbooking as a written policy (issue 17 item 5): set and read a pool's oversell
//! allowance with its policy, list what is oversold, and act on an oversold booking. The rules
//! live in `crate::inventory::oversell` and `crate::payments::oversold`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sale_common::Problem;
use serde_json::{json, Value};

use super::admin::{admin, operator};
use super::openapi::ProblemDoc;
use crate::error::{clip, ApiResult};
use crate::inventory::oversell::{self, MoveOrder, Refusal, Written};
use crate::payments::oversold::{self, Action};
use crate::state::AppState;

/// Who is moved first when everyone shows up.
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OrderBody {
    /// The most recent bookings first.
    LatestBookingFirst,
    /// The oldest bookings first.
    EarliestBookingFirst,
}

/// What an affected fan is offered.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Offer {
    /// A place in another pool (section) of the same show.
    Upgrade {
        /// The pool id.
        pool: String,
    },
    /// A refund plus a compensation, in cents.
    RefundPlusCompensation {
        /// Compensation, cents (> 0).
        compensation_cents: u32,
    },
    /// A later date.
    LaterDate {
        /// The show id.
        show: String,
    },
}

/// The written policy: its no-show basis and what happens when everyone shows up.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyBody {
    /// Measured share of bookings that do not show, 0..=1.
    no_show_rate: f64,
    /// What it was measured on, 1 to 200 characters.
    sample: String,
    /// Who is moved first.
    move_order: OrderBody,
    /// What each affected fan is offered (at least one).
    offers: Vec<Offer>,
}

/// Body of `POST /admin/shows/{show}/pools/{pool}/oversell`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OversellBody {
    /// Units a pool may sell beyond its capacity.
    allowance: u32,
    /// Who sets it (1 to 80 characters), kept with the value and audited.
    operator: String,
    /// Required when `allowance` > 0.
    #[serde(default)]
    policy: Option<PolicyBody>,
}

fn unprocessable(kind: &'static str, title: &str) -> Problem {
    Problem::new(StatusCode::UNPROCESSABLE_ENTITY, kind, title.to_owned())
}

fn refused(r: Refusal, capacity: i64, rate: Option<f64>) -> Problem {
    match r {
        Refusal::PolicyRequired => unprocessable(
            "oversell-policy-required",
            "An oversell allowance needs a written policy",
        )
        .detail("give policy {no_show_rate, sample, move_order, offers} in the same request"),
        Refusal::AboveBound { bound } => unprocessable(
            "oversell-above-no-show-bound",
            "The allowance exceeds what the no-show rate justifies",
        )
        .detail(format!("allowance ≤ capacity × no_show_rate = {bound}"))
        .with("bound", bound)
        .with("capacity", capacity)
        .with("no_show_rate", rate),
        Refusal::Invalid(what) => {
            unprocessable("invalid-oversell-policy", "Invalid oversell policy").detail(what)
        }
    }
}

/// `POST /admin/shows/{show}/pools/{pool}/oversell`
/// `{"allowance","operator","policy"?:{"no_show_rate","sample","move_order","offers"}}`: sets
/// the pool's oversell allowance (units beyond capacity) with its written policy (seed 001
/// "Overbooking Is a Policy"): a new policy version, audited. Allowance 0 needs no policy.
/// The current policy sent again by its operator is answered with its version, unwritten.
#[utoipa::path(
    post,
    path = "/admin/shows/{show}/pools/{pool}/oversell",
    tag = "admin",
    summary = "Set a pool's oversell allowance with its written policy (versioned, audited)",
    params(("show" = String, Path, description = "show id"),
        ("pool" = String, Path, description = "pool id")),
    request_body(content = OversellBody),
    responses(
        (status = 200, description = "{show, pool, oversell, set_by, set_at (s), policy_version}; the current policy again (same allowance, policy and operator): its version and set_at, nothing written", body = Object),
        (status = 400, description = "bad-request: operator must be 1 to 80 characters, no control character; invalid-body", body = ProblemDoc),
        (status = 404, description = "no such pool of this show (seats and interval resources have no allowance)", body = ProblemDoc),
        (status = 415, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 422, description = "oversell-policy-required, oversell-above-no-show-bound (with bound), invalid-oversell-policy; invalid-body", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn set(
    State(state): State<AppState>,
    Path((show, pool)): Path<(String, String)>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let b: OversellBody = sale_common::body::object(&headers, body)?;
    let who = operator(&b.operator)?;
    let Some(capacity) = oversell::capacity(&state.db, &show, &pool).await? else {
        return Err(
            Problem::not_found(format!("pool {} of show {}", clip(&pool), clip(&show))).into(),
        );
    };
    let written = b
        .policy
        .map(|p| written(&state, &show, &pool, p))
        .transpose()?;
    let allowance = i64::from(b.allowance);
    oversell::check(allowance, capacity, written.as_ref())
        .map_err(|r| refused(r, capacity, written.as_ref().map(|w| w.no_show_rate)))?;
    let now = state.clock.now_ms();
    let (version, set_at) = oversell::set(
        &state.db,
        &show,
        &pool,
        allowance,
        written.as_ref(),
        who,
        now,
    )
    .await?;
    Ok(Json(
        json!({"show": show, "pool": pool, "oversell": allowance, "set_by": who,
        "set_at": set_at / 1000, "policy_version": version}),
    ))
}

/// The policy body as the domain's [`Written`], its offers checked (an upgrade names another
/// pool of this show, a later date another show, a compensation is above 0).
fn written(state: &AppState, show: &str, pool: &str, p: PolicyBody) -> ApiResult<Written> {
    for o in &p.offers {
        let bad = match o {
            Offer::Upgrade { pool: to } => {
                to == pool
                    || !state
                        .config
                        .shows
                        .iter()
                        .any(|s| s.id == show && s.venue.pools.iter().any(|x| &x.id == to))
            }
            Offer::RefundPlusCompensation { compensation_cents } => *compensation_cents == 0,
            Offer::LaterDate { show: later } => later == show || !state.config.has_show(later),
        };
        if bad {
            return Err(unprocessable("invalid-oversell-policy", "Invalid oversell policy")
                .detail("offers: an upgrade names another pool of this show, a later date another show, a compensation is above 0")
                .with("offer", serde_json::to_value(o).unwrap_or_default())
                .into());
        }
    }
    Ok(Written {
        no_show_rate: p.no_show_rate,
        sample: p.sample,
        move_order: match p.move_order {
            OrderBody::LatestBookingFirst => MoveOrder::LatestFirst,
            OrderBody::EarliestBookingFirst => MoveOrder::EarliestFirst,
        },
        offers: p
            .offers
            .iter()
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .collect(),
    })
}

/// `GET /admin/shows/{show}/pools/{pool}/oversell`: the allowance and every policy version,
/// newest first (`current` is the one not superseded).
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/pools/{pool}/oversell",
    tag = "admin",
    summary = "A pool's oversell allowance and its policy versions",
    params(("show" = String, Path, description = "show id"),
        ("pool" = String, Path, description = "pool id")),
    responses(
        (status = 200, description = "{show, pool, capacity, oversell, current, history:[{version, allowance, capacity, no_show_rate, sample, move_order, offers, operator, set_at (ms), superseded_at}]}", body = Object),
        (status = 404, description = "no such pool of this show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn get(
    State(state): State<AppState>,
    Path((show, pool)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let row: Option<(i64, i64)> =
        sqlx::query_as("SELECT capacity, oversell FROM pools WHERE show_id = $1 AND pool_id = $2")
            .bind(&show)
            .bind(&pool)
            .fetch_optional(&state.db)
            .await?;
    let Some((capacity, over)) = row else {
        return Err(
            Problem::not_found(format!("pool {} of show {}", clip(&pool), clip(&show))).into(),
        );
    };
    let history = oversell::history(&state.db, &show, &pool).await?;
    let current = history.first().cloned().unwrap_or(Value::Null);
    Ok(Json(
        json!({"show": show, "pool": pool, "capacity": capacity, "oversell": over,
        "current": current, "history": history}),
    ))
}

/// `GET /admin/shows/{show}/oversold`: the pools whose active bookings exceed their physical
/// capacity, each with its bookings to move in the policy's order.
#[utoipa::path(
    get,
    path = "/admin/shows/{show}/oversold",
    tag = "admin",
    summary = "Oversold pools and the bookings to move, in the policy's order",
    params(("show" = String, Path, description = "show id")),
    responses(
        (status = 200, description = "{show, pools:[{pool, capacity, oversell, booked, excess, policy_version, move_order, offers, bookings:[{booking_id, hold_id, visitor_id, quantity, amount_cents, booked_at (ms), to_move, resolution}]}]}", body = Object),
        (status = 404, description = "no such show", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn list(
    State(state): State<AppState>,
    Path(show): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    if !state.config.has_show(&show) {
        return Err(Problem::not_found(format!("show {}", clip(&show))).into());
    }
    let mut conn = state.db.acquire().await?;
    let pools = oversell::oversold(&mut conn, &show, None).await?;
    Ok(Json(json!({"show": show, "pools": pools})))
}

/// What the operator does.
#[derive(Debug, Clone, Copy, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ActionName {
    /// Move to `to_pool`.
    Move,
    /// Give `amount_cents` back; the booking stays.
    Compensate,
    /// Cancel and refund in full.
    Refund,
}

/// Body of `POST /admin/bookings/{booking}/oversell-resolution`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolutionBody {
    /// move, compensate or refund.
    action: ActionName,
    /// Who (1 to 80 characters), audited.
    operator: String,
    /// For `move`: another pool of the same show.
    #[serde(default)]
    to_pool: Option<String>,
    /// For `compensate`: cents (> 0) given back on the fan's payment.
    #[serde(default)]
    amount_cents: Option<u32>,
}

/// `POST /admin/bookings/{booking}/oversell-resolution`: move, compensate or refund an oversold
/// booking, once (the same action again replays the answer), audited with the policy version.
#[utoipa::path(
    post,
    path = "/admin/bookings/{booking}/oversell-resolution",
    tag = "admin",
    summary = "Move, compensate or refund an oversold booking (once, audited)",
    params(("booking" = String, Path, description = "booking id")),
    request_body(content = ResolutionBody),
    responses(
        (status = 200, description = "{booking_id, show, pool, action, to_pool, amount_cents, cancellation_id, policy_version, operator, decided_at (ms), replayed}", body = Object),
        (status = 400, description = "bad-request: operator 1 to 80 characters, no control character; invalid-body", body = ProblemDoc),
        (status = 404, description = "no such booking", body = ProblemDoc),
        (status = 409, description = "already-resolved (another action), pool-full (the target pool has no free places)", body = ProblemDoc),
        (status = 415, description = "invalid-body: not JSON", body = ProblemDoc),
        (status = 422, description = "not-oversold, invalid-resolution (to_pool / amount_cents missing), unknown-pool, compensation-above-paid; invalid-body", body = ProblemDoc),
        (status = 503, description = "database busy", body = ProblemDoc),
    ),
    security(("admin_token" = [])),
)]
pub async fn resolve(
    State(state): State<AppState>,
    Path(booking): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    admin(&state, &headers)?;
    let b: ResolutionBody = sale_common::body::object(&headers, body)?;
    let who = operator(&b.operator)?;
    let missing = |what: &str| {
        unprocessable("invalid-resolution", "Incomplete oversell resolution")
            .detail(what.to_owned())
    };
    let action = match (b.action, b.to_pool, b.amount_cents) {
        (ActionName::Move, Some(to), None) => Action::Move(to),
        (ActionName::Compensate, None, Some(c)) if c > 0 => Action::Compensate(i64::from(c)),
        (ActionName::Refund, None, None) => Action::Refund,
        _ => {
            return Err(missing(
                "move takes to_pool, compensate takes amount_cents > 0, refund takes neither",
            )
            .into())
        }
    };
    let v = oversold::resolve(&state.db, &booking, &action, who, state.clock.now_ms()).await?;
    Ok(Json(v))
}
