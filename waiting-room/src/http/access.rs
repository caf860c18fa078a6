//! Presale rooms over HTTP (issue 14 item 1; API.md "Access codes"): the operator's access mode
//! and bulk codes (generate → CSV, import CSV, revoke CSV; audited, behind the admin token), and
//! the join's code check ([`check_code`]): a refused code costs no store write, and refusals
//! are limited per address and per identity (`access::limiter`) and counted in
//! `wr_code_failures_total{reason}`.

use super::admin::{operator, record, require_admin};
use super::error::bounded;
use super::{parse_event, private_json, AppState};
use crate::access::invitation::{self, PromoterKey};
use crate::access::limiter::{CodeLimiter, FailKey};
use crate::access::{self, AccessMode, CodeHasher, CodeRecord, Spend};
use crate::domain::{EventId, VisitorId};
use crate::http::openapi::ProblemDoc;
use crate::store::access::AccessStore;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::Router;
use sale_common::body::JsonObject;
use sale_common::Problem;
use serde::Deserialize;
use serde_json::json;
use std::net::IpAddr;

/// Header carrying the access code of a join.
pub const ACCESS_CODE_HEADER: &str = "x-access-code";

/// How long a node trusts its copy of an event's access mode, **ms**: a mode set on another
/// node applies here within this (one set here applies at once).
pub const MODE_CACHE_MS: i64 = 1_000;

/// This node's code hashing key, brute-force limiter and access-mode cache.
#[derive(Debug)]
pub struct AccessGate {
    /// Hashes codes for the store.
    pub hasher: CodeHasher,
    /// Refused codes per address and identity.
    pub limiter: CodeLimiter,
    /// Per event: its access mode and when it was read (epoch ms), so joins and the position
    /// polls of open events cost no extra store read.
    modes: std::sync::Mutex<std::collections::HashMap<EventId, (AccessMode, i64)>>,
}

impl AccessGate {
    /// The gate of a node whose join key is `join_hmac_key`.
    pub fn new(join_hmac_key: &[u8]) -> Self {
        Self {
            hasher: CodeHasher::new(join_hmac_key),
            limiter: CodeLimiter::default(),
            modes: Default::default(),
        }
    }

    fn remember(&self, event: &EventId, mode: AccessMode, now_ms: i64) {
        let mut m = self.modes.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(event.clone(), (mode, now_ms));
    }

    fn cached(&self, event: &EventId, now_ms: i64) -> Option<AccessMode> {
        let m = self.modes.lock().unwrap_or_else(|p| p.into_inner());
        m.get(event)
            .filter(|(_, at)| now_ms - at < MODE_CACHE_MS)
            .map(|(mode, _)| *mode)
    }
}

/// The event's access mode, from this node's copy when it is fresh.
async fn mode_of(
    st: &AppState,
    store: &dyn AccessStore,
    event: &EventId,
) -> Result<AccessMode, Problem> {
    let now_ms = st.0.clock.now_ms();
    if let Some(mode) = st.0.access.cached(event, now_ms) {
        return Ok(mode);
    }
    let mode = bounded(st.store_timeout(), store.access_mode(event)).await?;
    st.0.access.remember(event, mode, now_ms);
    Ok(mode)
}

/// The access routes, behind the admin-token check.
pub fn routes(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/admin/events/{event}/access", put(set_mode).get(get_mode))
        .route(
            "/admin/events/{event}/invitation-key",
            put(set_invitation_key),
        )
        .route("/admin/events/{event}/codes", post(generate))
        .route("/admin/events/{event}/codes/import", post(import))
        .route("/admin/events/{event}/codes/revoke", post(revoke))
        .route_layer(middleware::from_fn_with_state(state, require_admin))
}

fn store(st: &AppState) -> Result<&dyn AccessStore, Problem> {
    st.0.store.access().ok_or_else(|| {
        Problem::new(
            StatusCode::NOT_IMPLEMENTED,
            "access-unsupported",
            "This store keeps no access codes",
        )
    })
}

fn invalid(detail: impl Into<String>) -> Problem {
    Problem::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid-codes",
        "Invalid codes request",
    )
    .detail(detail)
}

/// `GET /admin/events/{event}/access`: `{"access": mode, "invitation_key": fingerprint or
/// null}` (the console's access panel).
#[utoipa::path(
    get,
    path = "/admin/events/{event}/access",
    tag = "admin",
    summary = "Who may join, and the fingerprint of the invitation key",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    responses(
        (status = 200, description = "{\"access\", \"invitation_key\"}"),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn get_mode(
    State(st): State<AppState>,
    Path(event): Path<String>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let store = store(&st)?;
    let mode = bounded(st.store_timeout(), store.access_mode(&event)).await?;
    let key = bounded(st.store_timeout(), store.promoter_key(&event)).await?;
    let fingerprint = key
        .and_then(|k| serde_json::from_str::<PromoterKey>(&k).ok())
        .map(|k| k.fingerprint());
    Ok(private_json(
        StatusCode::OK,
        json!({"access": mode.as_str(), "invitation_key": fingerprint}),
    ))
}

/// Body of `PUT /admin/events/{event}/access`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetAccessMode {
    /// `open` or `code` (`invitation` is refused until signed invitations exist).
    mode: String,
}

/// `PUT /admin/events/{event}/access`: sets who may join; audited `set_access`.
#[utoipa::path(
    put,
    path = "/admin/events/{event}/access",
    tag = "admin",
    summary = "Set who may join: open or code (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = SetAccessMode,
    responses(
        (status = 200, description = "{\"access\": mode}"),
        (status = 422, description = "invalid-codes: a bad field or CSV line (named)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn set_mode(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<SetAccessMode>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    let mode =
        AccessMode::parse(&b.mode).ok_or_else(|| invalid("mode: open, code or invitation"))?;
    let old = bounded(
        st.store_timeout(),
        store(&st)?.set_access_mode(&event, mode),
    )
    .await?;
    st.0.access.remember(&event, mode, st.0.clock.now_ms());
    record(
        &st,
        &event,
        &who,
        "set_access",
        json!(old.as_str()),
        json!(mode.as_str()),
    )
    .await;
    Ok(private_json(
        StatusCode::OK,
        json!({"access": mode.as_str()}),
    ))
}

/// `PUT /admin/events/{event}/invitation-key` (body: `{"alg": "EdDSA", "public_key_pem": …}`
/// or `{"alg": "HS256", "secret": ≥ 32 bytes}`): the key the promoter signs invitations with.
/// Replaces the one before. Audited `set_invitation_key` with the keys' fingerprints, never the
/// secret.
#[utoipa::path(
    put,
    path = "/admin/events/{event}/invitation-key",
    tag = "admin",
    summary = "Register the promoter's invitation key: Ed25519 public key or HMAC secret (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = Object,
    responses(
        (status = 200, description = "{\"fingerprint\"}"),
        (status = 422, description = "invalid-codes: not a usable key (named)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn set_invitation_key(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<PromoterKey>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(key) = body?;
    key.decoding().map_err(invalid)?;
    let json = serde_json::to_string(&key).map_err(|_| Problem::internal())?;
    let store = store(&st)?;
    let old = bounded(st.store_timeout(), store.promoter_key(&event)).await?;
    bounded(st.store_timeout(), store.set_promoter_key(&event, &json)).await?;
    let fingerprint = |k: &str| {
        serde_json::from_str::<PromoterKey>(k)
            .ok()
            .map(|k| k.fingerprint())
    };
    let new = key.fingerprint();
    let old = old.as_deref().and_then(fingerprint);
    record(
        &st,
        &event,
        &who,
        "set_invitation_key",
        json!(old),
        json!(new),
    )
    .await;
    Ok(private_json(StatusCode::OK, json!({"fingerprint": new})))
}

/// Body of `POST /admin/events/{event}/codes`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Generate {
    /// Codes to make, 1..=100 000.
    count: usize,
    /// Joins each code may start, ≥ 1 (default 1).
    uses: Option<u32>,
    /// Expiry, epoch **milliseconds** (default: never).
    expires_ms: Option<i64>,
    /// Tier the codes carry (`[a-z0-9-]{1,32}`).
    tier: Option<String>,
}

/// `POST /admin/events/{event}/codes`: makes `count` random codes and answers them once, as
/// CSV (`code,uses,expires_ms,tier`); the store keeps only their hashes. Audited `generate_codes`.
#[utoipa::path(
    post,
    path = "/admin/events/{event}/codes",
    tag = "admin",
    summary = "Generate access codes; answers them once as CSV (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = Generate,
    responses(
        (status = 200, description = "text/csv: code,uses,expires_ms,tier"),
        (status = 422, description = "invalid-codes: a bad field or CSV line (named)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn generate(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: Result<JsonObject<Generate>, Problem>,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let JsonObject(b) = body?;
    if !(1..=access::BATCH_MAX).contains(&b.count) {
        return Err(invalid(format!("count: 1..={}", access::BATCH_MAX)));
    }
    let defaults = defaults(b.uses, b.expires_ms, b.tier)?;
    let codes: Vec<String> = (0..b.count).map(|_| access::generate()).collect();
    let records = codes
        .iter()
        .map(|c| defaults.record(&st, &event, &access::normalize(c).unwrap_or_default()))
        .collect::<Vec<_>>();
    let added = bounded(st.store_timeout(), store(&st)?.put_codes(&event, &records)).await?;
    let summary = json!({"count": added, "uses": defaults.uses, "expires_ms": defaults.expires_ms, "tier": defaults.tier});
    record(
        &st,
        &event,
        &who,
        "generate_codes",
        serde_json::Value::Null,
        summary,
    )
    .await;
    let csv = access::to_csv(
        &codes,
        defaults.uses,
        defaults.expires_ms,
        defaults.tier.as_deref(),
    );
    Ok(csv_response(csv))
}

fn csv_response(csv: String) -> Response {
    let mut r = (StatusCode::OK, csv).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        "text/csv; charset=utf-8".parse().expect("static"),
    );
    h.insert(
        header::CACHE_CONTROL,
        "private, no-store".parse().expect("static"),
    );
    r
}

struct Defaults {
    uses: u32,
    expires_ms: i64,
    tier: Option<String>,
}

impl Defaults {
    fn record(&self, st: &AppState, event: &EventId, code: &str) -> CodeRecord {
        CodeRecord {
            hash: st.0.access.hasher.hash(event, code),
            uses: self.uses,
            expires_ms: self.expires_ms,
            tier: self.tier.clone(),
        }
    }
}

fn defaults(
    uses: Option<u32>,
    expires_ms: Option<i64>,
    tier: Option<String>,
) -> Result<Defaults, Problem> {
    let uses = uses.unwrap_or(1);
    if uses == 0 {
        return Err(invalid("uses: at least 1"));
    }
    let expires_ms = expires_ms.unwrap_or(0);
    if expires_ms < 0 {
        return Err(invalid("expires_ms: epoch milliseconds, or 0 for never"));
    }
    if tier.as_deref().is_some_and(|t| !access::valid_tier(t)) {
        return Err(invalid("tier: [a-z0-9-]{1,32}"));
    }
    Ok(Defaults {
        uses,
        expires_ms,
        tier,
    })
}

/// The request body as a CSV of codes (`codes_only`: a revocation list, first column only); a
/// body that is not UTF-8 is a `422 invalid-codes` like any other unreadable file.
fn csv_body(body: &[u8], codes_only: bool) -> Result<Vec<access::CsvRow>, Problem> {
    let body = std::str::from_utf8(body).map_err(|_| invalid("the CSV is not UTF-8 text"))?;
    let rows = access::parse_csv(body, codes_only).map_err(invalid)?;
    if rows.is_empty() {
        return Err(invalid("the CSV holds no codes"));
    }
    Ok(rows)
}

/// `POST /admin/events/{event}/codes/import` (body: CSV `code[,uses[,expires_ms[,tier]]]`, one
/// use and no expiry by default): stores the promoter's own codes, hashed; codes already stored
/// are left as they are. Answers `{"added", "already"}`; audited `import_codes`.
#[utoipa::path(
    post,
    path = "/admin/events/{event}/codes/import",
    tag = "admin",
    summary = "Import the promoter's codes from CSV (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = String,
    responses(
        (status = 200, description = "{\"added\", \"already\"}"),
        (status = 422, description = "invalid-codes: a bad field or CSV line (named)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn import(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let rows = csv_body(&body, false)?;
    let records: Vec<CodeRecord> = rows
        .into_iter()
        .map(|r| defaults(r.uses, r.expires_ms, r.tier).map(|d| d.record(&st, &event, &r.code)))
        .collect::<Result<_, _>>()?;
    let added = bounded(st.store_timeout(), store(&st)?.put_codes(&event, &records)).await?;
    let already = records.len() as u64 - added;
    record(
        &st,
        &event,
        &who,
        "import_codes",
        serde_json::Value::Null,
        json!({"added": added, "already": already}),
    )
    .await;
    Ok(private_json(
        StatusCode::OK,
        json!({"added": added, "already": already}),
    ))
}

/// `POST /admin/events/{event}/codes/revoke` (body: CSV, first column the code): deletes the
/// codes; every fan who joined with one of them loses the place (left the line) and is told on
/// the next position poll (`410 code-revoked`). Audited `revoke_codes` with the count of codes
/// and places.
#[utoipa::path(
    post,
    path = "/admin/events/{event}/codes/revoke",
    tag = "admin",
    summary = "Revoke codes listed in a CSV; their fans lose their places (audited)",
    params(("event" = String, Path, description = "event id, [a-z0-9-]{1,40}")),
    request_body = String,
    responses(
        (status = 200, description = "{\"revoked\", \"places_lost\", \"fans\"}"),
        (status = 422, description = "invalid-codes: a bad field or CSV line (named)", body = ProblemDoc),
        (status = 400, description = "invalid X-Operator", body = ProblemDoc),
        (status = 401, body = ProblemDoc),
        (status = 404, description = "no such event", body = ProblemDoc),
        (status = 503, description = "store unavailable (Retry-After)", body = ProblemDoc)
    ),
    security(("admin_token" = [])),
)]
pub async fn revoke(
    State(st): State<AppState>,
    Path(event): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, Problem> {
    let event = parse_event(&event)?;
    let who = operator(&headers)?;
    let hashes: Vec<String> = csv_body(&body, true)?
        .iter()
        .map(|r| st.0.access.hasher.hash(&event, &r.code))
        .collect();
    let (revoked, visitors) = bounded(
        st.store_timeout(),
        store(&st)?.revoke_codes(&event, &hashes),
    )
    .await?;
    let mut places = 0u64;
    for v in &visitors {
        let left = bounded(st.store_timeout(), st.0.store.leave(&event, v)).await?;
        places += u64::from(!matches!(left, crate::domain::Left::NotWaiting));
    }
    let summary = json!({"revoked": revoked, "places_lost": places, "fans": visitors.len()});
    record(
        &st,
        &event,
        &who,
        "revoke_codes",
        serde_json::Value::Null,
        summary.clone(),
    )
    .await;
    Ok(private_json(StatusCode::OK, summary))
}

/// The limiter keys of a join: its address and its verified identity, if any.
pub fn fail_keys(event: &EventId, ip: Option<IpAddr>, identity: Option<&str>) -> Vec<FailKey> {
    let mut keys: Vec<FailKey> = ip
        .map(|ip| FailKey::Addr(crate::ratelimit::rate_key(ip)))
        .into_iter()
        .collect();
    keys.extend(identity.map(|i| FailKey::Visitor(format!("{event}/{i}"))));
    keys
}

fn refused(st: &AppState, keys: &[FailKey], kind: &'static str) -> Problem {
    metrics::counter!("wr_code_failures_total", "reason" => kind).increment(1);
    st.0.access.limiter.failed(keys);
    let (status, title, detail) = match kind {
        "code-required" => (
            StatusCode::UNAUTHORIZED,
            "An access code is needed to join",
            "this sale is for code holders: send the code in X-Access-Code",
        ),
        "code-used-up" => (
            StatusCode::GONE,
            "This access code has been used up",
            "every use of the code has been taken",
        ),
        "code-expired" => (
            StatusCode::GONE,
            "This access code has expired",
            "the code was valid until its expiry only",
        ),
        "invitation-required" => (
            StatusCode::UNAUTHORIZED,
            "An invitation is needed to join",
            "this sale is by invitation: send it in X-Invitation",
        ),
        "invitation-expired" => (
            StatusCode::GONE,
            "This invitation has expired",
            "ask the organiser for a new one",
        ),
        "invitation-other-event" => (
            StatusCode::FORBIDDEN,
            "This invitation is for another event",
            "open the link of the invitation you received for this event",
        ),
        "invitation-invalid" => (
            StatusCode::FORBIDDEN,
            "This invitation is not valid",
            "its signature or contents do not check out",
        ),
        _ => (
            StatusCode::FORBIDDEN,
            "Unknown access code",
            "no such code for this event: check it for typing mistakes",
        ),
    };
    Problem::new(status, kind, title).detail(detail)
}

/// How a new fan may enter (the result of [`check_access`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// The event is open (or the store keeps no access codes).
    Open,
    /// One use of the code of this hash was taken; its tier.
    Code {
        /// The code's stored hash (for [`refund`]).
        hash: String,
        /// The code's tier.
        tier: Option<String>,
    },
    /// A valid invitation: the place belongs to the visitor derived from its `sub`.
    Invited {
        /// `JoinKeys::identity_visitor` of `"invitation:" + sub`.
        visitor: VisitorId,
        /// The invitation's tier.
        tier: Option<String>,
    },
}

impl Entry {
    /// The visitor an invitation fixes.
    pub fn visitor(&self) -> Option<&VisitorId> {
        match self {
            Self::Invited { visitor, .. } => Some(visitor),
            _ => None,
        }
    }
}

/// A join's access check for a new visitor of `event` (`visitor`: the id it would get). Open
/// events: [`Entry::Open`]. `code`: spends one use of the code in `X-Access-Code` for `visitor`
/// (one atomic store step). `invitation`: verifies `X-Invitation` against the event's promoter
/// key (a store read, no write). Refusals write nothing; a key past its refusal allowance is
/// answered 429 before any store call.
pub async fn check_access(
    st: &AppState,
    event: &EventId,
    headers: &HeaderMap,
    keys: &[FailKey],
    visitor: &VisitorId,
) -> Result<Entry, Problem> {
    let Some(store) = st.0.store.access() else {
        return Ok(Entry::Open);
    };
    if let Some(wait) = st.0.access.limiter.wait_secs(keys) {
        metrics::counter!("wr_code_failures_total", "reason" => "limited").increment(1);
        return Err(Problem::new(
            StatusCode::TOO_MANY_REQUESTS,
            "code-attempts-limited",
            "Too many wrong codes",
        )
        .detail("wait before trying another code")
        .retry_after(wait));
    }
    let header = |name: &str| {
        let v = headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        Some(v.trim()).filter(|v| !v.is_empty())
    };
    match mode_of(st, store, event).await? {
        AccessMode::Open => Ok(Entry::Open),
        AccessMode::Code => {
            let Some(raw) = header(ACCESS_CODE_HEADER) else {
                return Err(refused(st, keys, "code-required"));
            };
            spend(st, store, event, raw, keys, visitor).await
        }
        AccessMode::Invitation => {
            let Some(token) = header(invitation::INVITATION_HEADER) else {
                return Err(refused(st, keys, "invitation-required"));
            };
            invited(st, store, event, token, keys).await
        }
    }
}

async fn spend(
    st: &AppState,
    store: &dyn AccessStore,
    event: &EventId,
    raw: &str,
    keys: &[FailKey],
    visitor: &VisitorId,
) -> Result<Entry, Problem> {
    let Some(code) = access::normalize(raw) else {
        return Err(refused(st, keys, "code-unknown"));
    };
    let hash = st.0.access.hasher.hash(event, &code);
    let now_ms = st.0.clock.now_ms();
    let spent = store.spend_code(event, &hash, visitor, now_ms);
    match bounded(st.store_timeout(), spent).await? {
        Spend::Spent(tier) => Ok(Entry::Code { hash, tier }),
        other => Err(refused(st, keys, other.refusal().unwrap_or("code-unknown"))),
    }
}

async fn invited(
    st: &AppState,
    store: &dyn AccessStore,
    event: &EventId,
    token: &str,
    keys: &[FailKey],
) -> Result<Entry, Problem> {
    let stored = bounded(st.store_timeout(), store.promoter_key(event)).await?;
    let key: PromoterKey = stored
        .and_then(|k| serde_json::from_str(&k).ok())
        .ok_or_else(|| {
            Problem::new(
                StatusCode::CONFLICT,
                "invitation-key-missing",
                "Invitations cannot be checked yet",
            )
            .detail("the organiser has not registered the invitation key of this event")
        })?;
    let inv = key
        .verify(token, event, st.0.clock.now_secs())
        .map_err(|e| refused(st, keys, e.kind()))?;
    let visitor =
        st.0.join_keys
            .identity_visitor(event, &format!("invitation:{}", inv.sub));
    Ok(Entry::Invited {
        visitor,
        tier: inv.tier,
    })
}

/// Gives back the code use of `entry` (taken for `visitor`) whose join failed.
pub async fn refund(st: &AppState, event: &EventId, entry: &Entry, visitor: &VisitorId) {
    let (Some(store), Entry::Code { hash, .. }) = (st.0.store.access(), entry) else {
        return;
    };
    if let Err(e) = bounded(st.store_timeout(), store.refund_code(event, hash, visitor)).await {
        tracing::error!(event = %event, error = %e.title, "access code use not given back");
    }
}

/// After a successful join: records the tier of the fan's code or invitation for its admission
/// token (a failure is logged: the fan keeps the place, without the tier).
pub async fn joined(st: &AppState, event: &EventId, entry: &Entry, visitor: &VisitorId) {
    let tier = match entry {
        Entry::Code { tier: Some(t), .. } | Entry::Invited { tier: Some(t), .. } => t,
        _ => return,
    };
    let Some(store) = st.0.store.access() else {
        return;
    };
    if let Err(e) = bounded(st.store_timeout(), store.set_tier(event, visitor, tier)).await {
        tracing::error!(event = %event, error = %e.title, "tier not recorded");
    }
}

/// The tier an admission token carries for `visitor` (one store read per claim).
pub async fn tier_of(
    st: &AppState,
    event: &EventId,
    visitor: &VisitorId,
) -> Result<Option<String>, Problem> {
    match st.0.store.access() {
        Some(store) => bounded(st.store_timeout(), store.tier(event, visitor)).await,
        None => Ok(None),
    }
}

/// Before a claim: `410 code-revoked` for a fan whose code was revoked and who has not claimed
/// its admission yet (a fan the cursor had reached kept its invitation, so a revoked code still
/// let it in); an admitted fan keeps its admission and gets it again (W08). One store read per
/// claim on a presale event, one more only for a revoked fan.
pub async fn refuse_revoked_claim(
    st: &AppState,
    event: &EventId,
    visitor: &VisitorId,
) -> Result<(), Problem> {
    let Err(revoked) = revoked_problem(st, event, visitor).await else {
        return Ok(());
    };
    let p = bounded(st.store_timeout(), st.0.store.position(event, visitor)).await?;
    if p.admitted {
        Ok(())
    } else {
        Err(revoked)
    }
}

/// The answer of a position poll for a visitor without a place: `410 code-revoked` when the
/// fan's code was revoked.
pub async fn revoked_problem(
    st: &AppState,
    event: &EventId,
    visitor: &VisitorId,
) -> Result<(), Problem> {
    let Some(store) = st.0.store.access() else {
        return Ok(());
    };
    if mode_of(st, store, event).await? == AccessMode::Open {
        return Ok(());
    }
    if bounded(st.store_timeout(), store.revoked(event, visitor)).await? {
        return Err(Problem::new(
            StatusCode::GONE,
            "code-revoked",
            "Your access code was withdrawn",
        )
        .detail("the organiser revoked the code you joined with, so your place was released"));
    }
    Ok(())
}
