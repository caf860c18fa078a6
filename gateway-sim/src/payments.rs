//! The `/v1/payments` API handlers: create, query, execute, void, refund, plus the simulator's
//! own listing. Every call passes the access-token check and the API faults (slow answers, 5xx).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use sale_common::Problem;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::faults::Faults;
use crate::store::{ExecuteOutcome, Payment, PaymentStatus, RefundRefused};
use crate::AppState;

/// Body of `POST /v1/payments`.
#[derive(Debug, Deserialize)]
pub struct CreatePayment {
    amount_cents: i64,
    reference: String,
    return_url: String,
    /// Where signed events go (optional).
    #[serde(default)]
    notify_url: Option<String>,
    /// Epoch seconds.
    expires_at: i64,
    /// ISO 4217 code the checkout page shows the amount in (default EUR).
    #[serde(default)]
    currency: Option<String>,
}

/// Answer of `POST /v1/payments`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Created {
    /// Gateway id.
    pub payment_id: String,
    /// Absolute URL of the checkout page.
    pub checkout_url: String,
    /// hex HMAC-SHA256(secret, payment_id).
    pub signature: String,
}

/// Token check, then the API faults of `faults`: `delay_ms`, then 503 at `error_rate`.
async fn gate(state: &AppState, headers: &HeaderMap, faults: Faults) -> Result<(), Problem> {
    state.auth.check(headers)?;
    if faults.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(faults.delay_ms)).await;
    }
    if state.store.rng().fires(faults.error_rate) {
        return Err(Problem::unavailable("simulated gateway error", 1));
    }
    Ok(())
}

pub(crate) fn unknown(id: &str) -> Problem {
    Problem::not_found(format!("payment {id}"))
}

fn state_body(p: &Payment) -> Value {
    let mut body = json!({"status": p.status});
    if let Some(t) = &p.transaction_id {
        body["transaction_id"] = t.clone().into();
    }
    body
}

/// `POST /v1/payments` → 201 `{payment_id, checkout_url, signature}`.
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Json<CreatePayment>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Created>), Problem> {
    let Json(b) = body?;
    gate(&state, &headers, state.store.faults()).await?;
    let absolute = |u: &str| u.starts_with("http://") || u.starts_with("https://");
    let currency = b.currency.unwrap_or_else(|| "EUR".into());
    let iso_4217 = |c: &str| c.len() == 3 && c.bytes().all(|x| x.is_ascii_uppercase());
    if b.amount_cents < 0
        || !iso_4217(&currency)
        || !absolute(&b.return_url)
        || !b.notify_url.as_deref().is_none_or(absolute)
    {
        return Err(Problem::bad_request(
            "amount_cents must be >= 0, currency three capital letters and URLs absolute",
        ));
    }
    let p = state.store.create(
        b.amount_cents,
        currency,
        b.reference,
        b.return_url,
        b.notify_url,
        b.expires_at,
    );
    let created = Created {
        checkout_url: format!("{}/checkout/{}", state.config.base(), p.payment_id),
        signature: state.store.sign(&p.payment_id),
        payment_id: p.payment_id,
    };
    Ok((StatusCode::CREATED, Json(created)))
}

/// `GET /v1/payments/{id}`; the query-timeout fault answers only after the timeout sleep.
pub async fn query(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Payment>, Problem> {
    let f = state.store.faults_for(&id);
    gate(&state, &headers, f).await?;
    if state.store.rng().fires(f.query_timeout_rate) {
        tokio::time::sleep(state.config.execute_timeout_sleep).await;
    }
    state.store.get(&id).map(Json).ok_or_else(|| unknown(&id))
}

/// `POST /v1/payments/{id}/execute` → `{status, transaction_id?}`; 409 when not approved.
pub async fn execute(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let faults = state.store.faults_for(&id);
    gate(&state, &headers, faults).await?;
    let out = if faults.execute_delay_ms > 0 {
        // A slow capture completes whether or not the caller waits for it (a real gateway's
        // does): the delayed execute runs on its own task, which the caller giving up (its
        // timeout closing the connection) does not cancel.
        let (done, answer) = tokio::sync::oneshot::channel();
        let (st, pid) = (state.clone(), id.clone());
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(faults.execute_delay_ms)).await;
            let _ = done.send(st.store.execute(&pid));
        });
        answer.await.ok().flatten()
    } else {
        state.store.execute(&id)
    };
    let out = out.ok_or_else(|| unknown(&id))?;
    let p = match out {
        Ok(ExecuteOutcome::Now(p)) => p,
        Ok(ExecuteOutcome::Late(p)) => {
            tokio::time::sleep(state.config.execute_timeout_sleep).await;
            p
        }
        Err(status) => return Err(not_allowed(status, "not-approved", "Payment not approved")),
    };
    Ok(Json(state_body(&p)))
}

pub(crate) fn not_allowed(status: PaymentStatus, kind: &'static str, title: &str) -> Problem {
    Problem::new(StatusCode::CONFLICT, kind, title)
        .detail(format!("payment is {status:?}").to_lowercase())
        .with("status", serde_json::to_value(status).unwrap_or_default())
}

/// `POST /v1/payments/{id}/void` → `{status, transaction_id?}`: created/approved → cancelled;
/// any other state is answered as it is.
pub async fn void(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, Problem> {
    gate(&state, &headers, state.store.faults_for(&id)).await?;
    let p = state.store.cancel(&id).ok_or_else(|| unknown(&id))?;
    Ok(Json(state_body(&p)))
}

/// Body of a refund (optional: no body refunds all that is left).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefundBody {
    /// Cents to refund (1 to what is left).
    #[serde(default)]
    pub amount_cents: Option<i64>,
}

/// The refund body, when there is one.
pub fn refund_body(raw: &[u8]) -> Result<RefundBody, Problem> {
    if raw.iter().all(u8::is_ascii_whitespace) {
        return Ok(RefundBody::default());
    }
    serde_json::from_slice(raw).map_err(|e| Problem::bad_request(format!("refund body: {e}")))
}

/// Refunds `amount` of payment `id` under `key` → `{refund_id, status, amount_cents,
/// refunded_cents}` (the payment's status; the refund's amount; the sum so far).
pub fn do_refund(
    state: &AppState,
    id: &str,
    key: &str,
    amount: Option<i64>,
) -> Result<Json<Value>, Problem> {
    match state
        .store
        .refund(id, key, amount)
        .ok_or_else(|| unknown(id))?
    {
        Ok((r, p)) => Ok(Json(json!({"refund_id": r.refund_id, "status": p.status,
            "amount_cents": r.amount_cents, "refunded_cents": p.refunded_cents}))),
        Err(RefundRefused::Status(s)) => {
            Err(not_allowed(s, "not-completed", "Payment not completed"))
        }
        Err(RefundRefused::TooMuch { left }) => Err(Problem::new(
            StatusCode::CONFLICT,
            "refund-too-large",
            "Refund larger than what is left",
        )
        .with("refundable_cents", left)),
    }
}

/// `POST /v1/payments/{id}/refund` (header `Idempotency-Key`, body `{"amount_cents"?}`) → the
/// refund; the same key answers the same refund; 409 when the payment is not completed or the
/// amount is more than what is left, and `409 refund-refused` (nothing refunded) when the
/// `refuse_refund_rate` fault fires.
pub async fn refund(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, Problem> {
    let faults = state.store.faults_for(&id);
    gate(&state, &headers, faults).await?;
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty())
    else {
        return Err(Problem::bad_request("Idempotency-Key header required"));
    };
    let b = refund_body(&body)?;
    if state.store.rng().fires(faults.refuse_refund_rate) {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            "refund-refused",
            "The gateway refused the refund",
        ));
    }
    do_refund(&state, &id, key, b.amount_cents)
}

/// `GET /v1/sim/payments`: every payment (simulator back office, no token; for load-test
/// checks).
pub async fn list(State(state): State<AppState>) -> Json<Vec<Payment>> {
    Json(state.store.all())
}
