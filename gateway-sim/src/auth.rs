//! Access tokens (seed 000, Challenge 3): `POST /v1/oauth/token` with HTTP basic client
//! credentials grants a short-lived bearer token, at most `grants_per_hour` times in any sliding
//! hour (429 + Retry-After beyond); `/v1/payments*` calls need a live token when
//! `require_token` is set. `GET /v1/oauth/grants` counts grants (tests, load-test checks).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::Json;
use base64::Engine;
use sale_common::{Problem, SharedClock};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use crate::config::Config;
use crate::AppState;

const HOUR_MS: i64 = 3_600_000;

/// Issued tokens and the grant history.
#[derive(Debug)]
pub struct Auth {
    clock: SharedClock,
    require: bool,
    tokens: Mutex<HashMap<String, i64>>,
    grants: Mutex<VecDeque<i64>>,
    total: Mutex<u64>,
}

impl Auth {
    /// From the config's token settings.
    pub fn new(config: &Config) -> Self {
        Self {
            clock: config.clock.clone(),
            require: config.require_token,
            tokens: Mutex::new(HashMap::new()),
            grants: Mutex::new(VecDeque::new()),
            total: Mutex::new(0),
        }
    }

    /// 401 unless `headers` carry a live bearer token (or tokens are not required).
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Problem> {
        if !self.require {
            return Ok(());
        }
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        let now = self.clock.now_ms();
        let ok = self
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(given)
            .is_some_and(|exp| *exp > now);
        if ok {
            Ok(())
        } else {
            Err(Problem::unauthorized(
                "invalid-token",
                "a live access token is required",
            ))
        }
    }
}

fn client(headers: &HeaderMap) -> Option<(String, String)> {
    let v = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Basic ")?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(v.trim())
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (id, secret) = s.split_once(':')?;
    Some((id.to_owned(), secret.to_owned()))
}

/// `POST /v1/oauth/token` → `{"access_token","token_type":"Bearer","expires_in"}`.
pub async fn grant(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, Problem> {
    let c = &state.config;
    let ok = client(&headers).is_some_and(|(id, secret)| {
        id == c.client_id
            && bool::from(secret.as_bytes().ct_eq(c.client_secret.expose().as_bytes()))
    });
    if !ok {
        return Err(Problem::unauthorized(
            "invalid-client",
            "bad client credentials",
        ));
    }
    let a = &state.auth;
    let now = a.clock.now_ms();
    {
        let mut g = a.grants.lock().unwrap_or_else(|e| e.into_inner());
        while g.front().is_some_and(|t| *t <= now - HOUR_MS) {
            g.pop_front();
        }
        if g.len() >= c.grants_per_hour as usize {
            let retry = g
                .front()
                .map(|t| (t + HOUR_MS - now) / 1000 + 1)
                .unwrap_or(60);
            return Err(Problem::new(
                StatusCode::TOO_MANY_REQUESTS,
                "grant-limit",
                "Too many token grants",
            )
            .detail(format!("at most {} grants per hour", c.grants_per_hour))
            .retry_after(u64::try_from(retry).unwrap_or(60)));
        }
        g.push_back(now);
    }
    *a.total.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let token = format!("at_{}", state.store.rng().hex_id(16));
    a.tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(token.clone(), now + c.token_ttl_secs * 1000);
    tracing::info!("access token granted");
    Ok(Json(
        json!({"access_token": token, "token_type": "Bearer", "expires_in": c.token_ttl_secs}),
    ))
}

/// `GET /v1/oauth/grants` → `{"grants": total since start}`.
pub async fn grants(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"grants": *state.auth.total.lock().unwrap_or_else(|e| e.into_inner())}))
}
