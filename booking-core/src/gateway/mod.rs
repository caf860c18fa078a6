//! Client of the (untrusted) payment gateway: create, execute, query, void, refund (API.md).
//! Every call has a timeout and carries the shared access token ([`token::TokenStore`], seed 000
//! Challenge 3); a timed-out execute is reported as [`GatewayError::Timeout`] so the caller can
//! query once.
//!
//! Layer: above `db` (the token's lease row); below `outbox` (refunds) and `payments`.

pub mod token;

use std::sync::Arc;
use std::time::Duration;

pub use token::TokenStore;

use serde::Deserialize;
use serde_json::json;

/// Gateway payment status (API.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PayStatus {
    /// Not decided by the fan yet.
    Created,
    /// The fan paid; execute pending.
    Approved,
    /// Money taken.
    Completed,
    /// The fan cancelled.
    Cancelled,
    /// Execute failed.
    Failed,
    /// Session ran out.
    Expired,
    /// Completed, then refunded in full.
    Refunded,
    /// Completed, then charged back (a dispute).
    Disputed,
}

impl PayStatus {
    /// Terminal without money: the hold may be released.
    pub fn is_dead(self) -> bool {
        matches!(
            self,
            PayStatus::Cancelled | PayStatus::Failed | PayStatus::Expired
        )
    }
}

/// `POST /v1/payments` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Created {
    /// Gateway id.
    pub payment_id: String,
    /// Where to send the fan.
    pub checkout_url: String,
    /// hex HMAC-SHA256(secret, payment_id).
    pub signature: String,
}

/// Status (and transaction id) of a payment.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentState {
    /// Status.
    pub status: PayStatus,
    /// Set when completed.
    #[serde(default)]
    pub transaction_id: Option<String>,
    /// Refunded so far, cents (partial refunds leave the payment `completed`).
    #[serde(default)]
    pub refunded_cents: i64,
}

/// A failed gateway call.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No answer within the timeout (the outcome is unknown).
    #[error("gateway timed out")]
    Timeout,
    /// Execute refused (409): the payment is not approved; carries its status when given.
    #[error("gateway refused: {0:?}")]
    Refused(Option<PayStatus>),
    /// No usable access token for the gateway within the caller's wait: another process holds
    /// the refresh lease and has not stored one yet, or the token store could not be read.
    /// Nothing was sent to the gateway; the caller answers `503` with `Retry-After`.
    #[error("no gateway access token: {0}")]
    NoToken(String),
    /// Transport or unexpected answer.
    #[error("gateway error: {0}")]
    Other(String),
}

/// The error of a call the gateway answered with an unexpected status: `"{call} answered
/// {status}"`, followed by the problem's `type` and `title` when the body is an RFC 9457 problem
/// (`"refund answered 409 Conflict: refund-refused (The gateway refused the refund)"`), each cut
/// to [`SAID_CHARS`] characters, so an alert tells an operator why without a trip to the
/// gateway's logs.
async fn answered(call: &str, r: reqwest::Response) -> GatewayError {
    let status = r.status();
    let body: serde_json::Value = r.json().await.unwrap_or_default();
    let said = |k: &str| -> Option<String> {
        let v = body.get(k)?.as_str()?;
        Some(
            v.chars()
                .filter(|c| !c.is_control())
                .take(SAID_CHARS)
                .collect(),
        )
    };
    let why = match (said("type"), said("title")) {
        (Some(t), Some(title)) => format!(": {t} ({title})"),
        (Some(t), None) | (None, Some(t)) => format!(": {t}"),
        (None, None) => String::new(),
    };
    GatewayError::Other(format!("{call} answered {status}{why}"))
}

/// Characters of a gateway problem's `type` or `title` kept in an error ([`answered`]).
const SAID_CHARS: usize = 120;

impl From<reqwest::Error> for GatewayError {
    fn from(e: reqwest::Error) -> Self {
        if e.is_timeout() {
            GatewayError::Timeout
        } else {
            GatewayError::Other(e.to_string())
        }
    }
}

/// `POST /v1/payments/{id}/refund` answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Refunded {
    /// Gateway refund id (the same for every retry with the same key).
    pub refund_id: String,
}

/// HTTP client of the gateway.
#[derive(Debug, Clone)]
pub struct Gateway {
    base: String,
    http: reqwest::Client,
    timeout: Duration,
    tokens: Arc<TokenStore>,
}

impl Gateway {
    /// A client for `base` with a per-call `timeout` (also the longest wait for a token).
    pub fn new(base: &str, timeout: Duration, tokens: Arc<TokenStore>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            http,
            timeout,
            tokens,
        }
    }

    /// The shared token store.
    pub fn tokens(&self) -> &Arc<TokenStore> {
        &self.tokens
    }

    /// Sends `req` with the shared access token. A 401 means the gateway does not know the token
    /// (it restarted, or the token is from an earlier run: case B10) and did nothing: the token
    /// is dropped everywhere, a new one is granted once through the single refresher, and the
    /// request is sent again. A second 401 is an error.
    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, GatewayError> {
        let again = req.try_clone();
        let token = self.tokens.get(self.timeout).await?;
        let r = req.bearer_auth(&token).send().await?;
        if r.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(r);
        }
        metrics::counter!("bc_gateway_token_refused_total").increment(1);
        self.tokens.invalidate(&token).await;
        let Some(req) = again else {
            return Err(GatewayError::Other(
                "gateway refused the access token".into(),
            ));
        };
        let token = self.tokens.get(self.timeout).await?;
        let r = req.bearer_auth(&token).send().await?;
        if r.status() == reqwest::StatusCode::UNAUTHORIZED {
            self.tokens.invalidate(&token).await;
            return Err(GatewayError::Other(
                "gateway refused a freshly granted access token".into(),
            ));
        }
        Ok(r)
    }

    /// Creates a payment of `amount_cents` in `currency` (ISO 4217); `expires_at` in epoch
    /// seconds; the gateway posts signed events about it to `notify_url`.
    pub async fn create(
        &self,
        amount_cents: i64,
        currency: &str,
        reference: &str,
        return_url: &str,
        notify_url: &str,
        expires_at: i64,
    ) -> Result<Created, GatewayError> {
        let body = json!({"amount_cents": amount_cents, "currency": currency, "reference": reference, "return_url": return_url,
            "notify_url": notify_url, "expires_at": expires_at});
        let r = self
            .send(
                self.http
                    .post(format!("{}/v1/payments", self.base))
                    .json(&body),
            )
            .await?;
        if r.status() != reqwest::StatusCode::CREATED {
            return Err(answered("create", r).await);
        }
        Ok(r.json().await?)
    }

    /// Executes an approved payment.
    pub async fn execute(&self, payment_id: &str) -> Result<PaymentState, GatewayError> {
        let r = self
            .send(
                self.http
                    .post(format!("{}/v1/payments/{payment_id}/execute", self.base)),
            )
            .await?;
        if r.status() == reqwest::StatusCode::CONFLICT {
            let v: serde_json::Value = r.json().await.unwrap_or_default();
            let st = serde_json::from_value(v["status"].clone()).ok();
            return Err(GatewayError::Refused(st));
        }
        if !r.status().is_success() {
            return Err(answered("execute", r).await);
        }
        Ok(r.json().await?)
    }

    /// Queries a payment (the only source of truth).
    pub async fn query(&self, payment_id: &str) -> Result<PaymentState, GatewayError> {
        let r = self
            .send(
                self.http
                    .get(format!("{}/v1/payments/{payment_id}", self.base)),
            )
            .await?;
        if !r.status().is_success() {
            return Err(answered("query", r).await);
        }
        Ok(r.json().await?)
    }

    /// Voids a payment the fan gave up on (created/approved → cancelled); answers the state
    /// after the call (a completed payment stays completed).
    pub async fn void(&self, payment_id: &str) -> Result<PaymentState, GatewayError> {
        let r = self
            .send(
                self.http
                    .post(format!("{}/v1/payments/{payment_id}/void", self.base)),
            )
            .await?;
        if r.status() == reqwest::StatusCode::CONFLICT {
            return self.query(payment_id).await;
        }
        if !r.status().is_success() {
            return Err(answered("void", r).await);
        }
        Ok(r.json().await?)
    }

    /// Refunds `amount_cents` of a completed payment (all that is left when `None`); `key` makes
    /// retries return the same refund.
    pub async fn refund(
        &self,
        payment_id: &str,
        key: &str,
        amount_cents: Option<i64>,
    ) -> Result<Refunded, GatewayError> {
        let mut req = self
            .http
            .post(format!("{}/v1/payments/{payment_id}/refund", self.base))
            .header("Idempotency-Key", key);
        if let Some(a) = amount_cents {
            req = req.json(&json!({ "amount_cents": a }));
        }
        let r = self.send(req).await?;
        if !r.status().is_success() {
            return Err(answered("refund", r).await);
        }
        Ok(r.json().await?)
    }
}
