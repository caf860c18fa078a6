//! Payments and their state machine: `created` → `approved` (fan clicked Pay) → `completed`
//! (merchant executed), or `cancelled` / `failed` / `expired`. Plus the `/v1/payments` handlers.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hmac::{Hmac, Mac};
use sale_common::{Problem, Secret, SharedClock};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::faults::{FaultRng, Faults};
use crate::AppState;

/// Where a payment stands at the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentStatus {
    /// Created by the merchant; the fan has not decided.
    Created,
    /// The fan clicked Pay; the merchant must execute.
    Approved,
    /// Executed: money taken; has a transaction id.
    Completed,
    /// The fan clicked Cancel.
    Cancelled,
    /// Execute failed (fault injection).
    Failed,
    /// Not paid before `expires_at`.
    Expired,
}

/// One payment held by the simulator.
#[derive(Debug, Clone, Serialize)]
pub struct Payment {
    /// Gateway payment id (`pay_<hex>`).
    pub payment_id: String,
    /// Current status.
    pub status: PaymentStatus,
    /// Present once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    /// Amount, cents.
    pub amount_cents: i64,
    /// Merchant reference (the hold id).
    pub reference: String,
    /// Where the browser goes after Pay/Cancel.
    #[serde(skip)]
    pub return_url: String,
    /// Deadline to pay, epoch seconds.
    pub expires_at: i64,
}

/// The in-memory payment store, its faults and its randomness.
#[derive(Debug)]
pub struct Store {
    payments: Mutex<HashMap<String, Payment>>,
    faults: Mutex<Faults>,
    rng: FaultRng,
    clock: SharedClock,
    secret: Secret,
}

/// What an execute decided.
#[derive(Debug)]
pub enum ExecuteOutcome {
    /// Answer now with this payment.
    Now(Payment),
    /// Completed, but answer only after the timeout sleep (fault).
    Late(Payment),
}

impl Store {
    /// An empty store.
    pub fn new(clock: SharedClock, rng: FaultRng, secret: Secret) -> Self {
        Self {
            payments: Mutex::new(HashMap::new()),
            faults: Mutex::new(Faults::default()),
            rng,
            clock,
            secret,
        }
    }

    /// Current faults.
    pub fn faults(&self) -> Faults {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the faults.
    pub fn set_faults(&self, f: Faults) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }

    /// hex HMAC-SHA256(secret, payment_id) (API.md).
    pub fn sign(&self, payment_id: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.expose().as_bytes())
            .expect("HMAC takes any key length");
        mac.update(payment_id.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    fn with<R>(&self, id: &str, f: impl FnOnce(&mut Payment, i64) -> R) -> Option<R> {
        let now = self.clock.now_secs();
        let mut map = self.payments.lock().unwrap_or_else(|e| e.into_inner());
        let p = map.get_mut(id)?;
        if p.status == PaymentStatus::Created && now >= p.expires_at {
            p.status = PaymentStatus::Expired;
        }
        Some(f(p, now))
    }

    /// Creates a payment and returns it.
    pub fn create(
        &self,
        amount_cents: i64,
        reference: String,
        return_url: String,
        expires_at: i64,
    ) -> Payment {
        let p = Payment {
            payment_id: format!("pay_{}", self.rng.hex_id(12)),
            status: PaymentStatus::Created,
            transaction_id: None,
            amount_cents,
            reference,
            return_url,
            expires_at,
        };
        let mut map = self.payments.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(p.payment_id.clone(), p.clone());
        p
    }

    /// The payment as it stands now (expiry applied).
    pub fn get(&self, id: &str) -> Option<Payment> {
        self.with(id, |p, _| p.clone())
    }

    /// The fan's Pay click: `created` → `approved` (or `cancelled` when the cancel fault fires).
    /// Other states are left alone. Returns the payment after the click.
    pub fn pay(&self, id: &str) -> Option<Payment> {
        let cancel = self.rng.fires(self.faults().cancel_rate);
        self.with(id, |p, _| {
            if p.status == PaymentStatus::Created {
                p.status = if cancel {
                    PaymentStatus::Cancelled
                } else {
                    PaymentStatus::Approved
                };
            }
            p.clone()
        })
    }

    /// The fan's Cancel click: `created`/`approved` → `cancelled`.
    pub fn cancel(&self, id: &str) -> Option<Payment> {
        self.with(id, |p, _| {
            if matches!(p.status, PaymentStatus::Created | PaymentStatus::Approved) {
                p.status = PaymentStatus::Cancelled;
            }
            p.clone()
        })
    }

    /// Merchant execute: `approved` → `completed` (or `failed` by fault); `completed` stays
    /// completed with the same transaction id. `Err` carries the status that forbids executing.
    pub fn execute(&self, id: &str) -> Option<Result<ExecuteOutcome, PaymentStatus>> {
        let f = self.faults();
        let fail = self.rng.fires(f.fail_rate);
        let late = self.rng.fires(f.execute_timeout_rate);
        let txn = format!("txn_{}", self.rng.hex_id(10));
        self.with(id, |p, _| match p.status {
            PaymentStatus::Approved if fail => {
                p.status = PaymentStatus::Failed;
                Ok(ExecuteOutcome::Now(p.clone()))
            }
            PaymentStatus::Approved => {
                p.status = PaymentStatus::Completed;
                p.transaction_id = Some(txn);
                Ok(if late {
                    ExecuteOutcome::Late(p.clone())
                } else {
                    ExecuteOutcome::Now(p.clone())
                })
            }
            PaymentStatus::Completed | PaymentStatus::Failed => Ok(ExecuteOutcome::Now(p.clone())),
            other => Err(other),
        })
    }
}

/// Body of `POST /v1/payments`.
#[derive(Debug, Deserialize)]
pub struct CreatePayment {
    amount_cents: i64,
    reference: String,
    return_url: String,
    /// Epoch seconds.
    expires_at: i64,
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

async fn api_delay(state: &AppState) {
    let ms = state.store.faults().delay_ms;
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

fn unknown(id: &str) -> Problem {
    Problem::not_found(format!("payment {id}"))
}

/// `POST /v1/payments` → 201 `{payment_id, checkout_url, signature}`.
pub async fn create(
    State(state): State<AppState>,
    body: Result<Json<CreatePayment>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Created>), Problem> {
    let Json(b) = body?;
    api_delay(&state).await;
    if b.amount_cents < 0
        || !(b.return_url.starts_with("http://") || b.return_url.starts_with("https://"))
    {
        return Err(Problem::bad_request(
            "amount_cents must be >= 0 and return_url absolute",
        ));
    }
    let p = state
        .store
        .create(b.amount_cents, b.reference, b.return_url, b.expires_at);
    let created = Created {
        checkout_url: format!("{}/checkout/{}", state.config.base(), p.payment_id),
        signature: state.store.sign(&p.payment_id),
        payment_id: p.payment_id,
    };
    Ok((StatusCode::CREATED, Json(created)))
}

/// `GET /v1/payments/{id}`.
pub async fn query(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Payment>, Problem> {
    api_delay(&state).await;
    state.store.get(&id).map(Json).ok_or_else(|| unknown(&id))
}

/// `POST /v1/payments/{id}/execute` → `{status, transaction_id?}`; 409 when not approved.
pub async fn execute(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, Problem> {
    api_delay(&state).await;
    let out = state.store.execute(&id).ok_or_else(|| unknown(&id))?;
    let p = match out {
        Ok(ExecuteOutcome::Now(p)) => p,
        Ok(ExecuteOutcome::Late(p)) => {
            tokio::time::sleep(state.config.execute_timeout_sleep).await;
            p
        }
        Err(status) => {
            return Err(
                Problem::new(StatusCode::CONFLICT, "not-approved", "Payment not approved")
                    .detail(format!("payment is {status:?}").to_lowercase())
                    .with("status", serde_json::to_value(status).unwrap_or_default()),
            );
        }
    };
    let mut body = serde_json::json!({"status": p.status});
    if let Some(t) = p.transaction_id {
        body["transaction_id"] = t.into();
    }
    Ok(Json(body))
}
