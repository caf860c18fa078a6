//! Global fault injection (`POST /v1/faults`) and the seedable randomness that decides when a
//! fault fires, so tests can make faults certain (rate 1.0) or reproducible (seed).

use std::sync::Mutex;

use axum::extract::State;
use axum::Json;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sale_common::Problem;
use serde::{Deserialize, Serialize};

use crate::AppState;

/// Fault rates, each a probability in `0.0..=1.0`, plus a fixed delay.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Faults {
    /// Probability that an execute of an approved payment ends `failed`.
    #[serde(default)]
    pub fail_rate: f64,
    /// Probability that a fan's **Pay** click ends `cancelled` instead of `approved`.
    #[serde(default)]
    pub cancel_rate: f64,
    /// Probability that an execute completes the payment but answers only after
    /// `Config::execute_timeout_sleep` (longer than any sane client timeout).
    #[serde(default)]
    pub execute_timeout_rate: f64,
    /// Delay added to every `/v1/*` API call, milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
}

/// Body of `POST /v1/faults`: every member optional; absent members keep their value.
#[derive(Debug, Deserialize)]
pub struct FaultsPatch {
    fail_rate: Option<f64>,
    cancel_rate: Option<f64>,
    execute_timeout_rate: Option<f64>,
    delay_ms: Option<u64>,
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
    /// A random alphanumeric-ish hex string of `n` bytes (ids).
    pub fn hex_id(&self, n: usize) -> String {
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
        hex::encode(bytes)
    }
}

fn valid_rate(r: Option<f64>) -> bool {
    r.is_none_or(|r| (0.0..=1.0).contains(&r))
}

/// `POST /v1/faults`: updates the global faults and answers the whole set.
pub async fn set_faults(
    State(state): State<AppState>,
    body: Result<Json<FaultsPatch>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Faults>, Problem> {
    let Json(p) = body?;
    if ![p.fail_rate, p.cancel_rate, p.execute_timeout_rate]
        .into_iter()
        .all(valid_rate)
    {
        return Err(Problem::bad_request("rates must be within 0.0..=1.0"));
    }
    let mut f = state.store.faults();
    if let Some(v) = p.fail_rate {
        f.fail_rate = v;
    }
    if let Some(v) = p.cancel_rate {
        f.cancel_rate = v;
    }
    if let Some(v) = p.execute_timeout_rate {
        f.execute_timeout_rate = v;
    }
    if let Some(v) = p.delay_ms {
        f.delay_ms = v;
    }
    state.store.set_faults(f);
    Ok(Json(f))
}

/// `GET /v1/faults`: the current faults.
pub async fn get_faults(State(state): State<AppState>) -> Json<Faults> {
    Json(state.store.faults())
}
