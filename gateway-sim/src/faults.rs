//! Fault injection, global (`POST /v1/faults`) or per payment (`POST /v1/faults/payments/{id}`,
//! which replaces the global set for that payment), and the seedable randomness that decides
//! when a fault fires, so tests can make faults certain (rate 1.0) or reproducible (seed).

use std::sync::Mutex;

use axum::extract::{Path, State};
use axum::Json;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sale_common::Problem;
use serde::{Deserialize, Serialize};

use crate::AppState;

/// Fault rates, each a probability in `0.0..=1.0`, plus a fixed delay.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Faults {
    /// An execute of an approved payment ends `failed`.
    pub fail_rate: f64,
    /// A fan's **Pay** click ends `cancelled` instead of `approved`.
    pub cancel_rate: f64,
    /// An execute completes the payment but answers only after `execute_timeout_sleep`.
    pub execute_timeout_rate: f64,
    /// A query answers only after `execute_timeout_sleep` (the client times out).
    pub query_timeout_rate: f64,
    /// An API call answers 503 without doing anything.
    pub error_rate: f64,
    /// A webhook is delivered twice.
    pub duplicate_webhook_rate: f64,
    /// A webhook is held back so later events overtake it.
    pub reorder_webhook_rate: f64,
    /// A webhook is never sent.
    pub drop_webhook_rate: f64,
    /// A Pay click approves, execute never completes it, and the gateway completes it by itself
    /// `late_success_delay_secs` after the session deadline (success after the deadline).
    pub late_success_rate: f64,
    /// A refund answers `409 refund-refused` and refunds nothing, the payment still
    /// `completed` (the gateway's own refusal, as real ones refuse a refund past their refund
    /// window or beyond the merchant's balance).
    pub refuse_refund_rate: f64,
    /// Delay added to every `/v1/*` API call, milliseconds (slow answers).
    pub delay_ms: u64,
    /// Delay before an execute takes effect, milliseconds, on top of `delay_ms`: queries
    /// meanwhile still say `approved` (a slow capture, while another request asks); it takes
    /// effect also when the caller gave up waiting (its timeout).
    pub execute_delay_ms: u64,
}

impl Faults {
    fn rates(&self) -> [f64; 10] {
        [
            self.fail_rate,
            self.cancel_rate,
            self.execute_timeout_rate,
            self.query_timeout_rate,
            self.error_rate,
            self.duplicate_webhook_rate,
            self.reorder_webhook_rate,
            self.drop_webhook_rate,
            self.late_success_rate,
            self.refuse_refund_rate,
        ]
    }

    /// Whether every rate is within `0.0..=1.0`.
    pub fn valid(&self) -> bool {
        self.rates().iter().all(|r| (0.0..=1.0).contains(r))
    }

    /// Applies a JSON patch: members present replace, others stay.
    pub fn patched(&self, patch: &serde_json::Value) -> Result<Self, Problem> {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        let Some(p) = patch.as_object() else {
            return Err(Problem::bad_request("a JSON object is required"));
        };
        for (k, val) in p {
            if v.get(k).is_none() {
                return Err(Problem::bad_request(format!("unknown fault {k}")));
            }
            v[k] = val.clone();
        }
        let f: Faults =
            serde_json::from_value(v).map_err(|e| Problem::bad_request(e.to_string()))?;
        if !f.valid() {
            return Err(Problem::bad_request("rates must be within 0.0..=1.0"));
        }
        Ok(f)
    }
}

/// A seedable RNG behind a mutex.
#[derive(Debug)]
pub struct FaultRng(Mutex<StdRng>);

impl FaultRng {
    /// Seeded when `seed` is given, else from entropy.
    pub fn new(seed: Option<u64>) -> Self {
        let rng = match seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_entropy(),
        };
        Self(Mutex::new(rng))
    }
    /// True with probability `rate` (clamped to 0..=1; 0 never fires, 1 always fires).
    pub fn fires(&self, rate: f64) -> bool {
        if rate <= 0.0 {
            return false;
        }
        if rate >= 1.0 {
            return true;
        }
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        rng.gen_bool(rate)
    }
    /// A random hex string of `n` bytes (ids).
    pub fn hex_id(&self, n: usize) -> String {
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        hex::encode(bytes)
    }
}

/// `POST /v1/faults`: updates the global faults and answers the whole set.
pub async fn set_faults(
    State(state): State<AppState>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Faults>, Problem> {
    let Json(p) = body?;
    let f = state.store.faults().patched(&p)?;
    state.store.set_faults(f);
    Ok(Json(f))
}

/// `GET /v1/faults`: the current global faults.
pub async fn get_faults(State(state): State<AppState>) -> Json<Faults> {
    Json(state.store.faults())
}

/// `POST /v1/faults/payments/{id}`: faults for one payment (patched over the global set).
pub async fn set_payment_faults(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Faults>, Problem> {
    let Json(p) = body?;
    let f = state.store.faults_for(&id).patched(&p)?;
    state.store.set_payment_faults(&id, f);
    Ok(Json(f))
}
