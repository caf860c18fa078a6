//! The gateway access token, shared by every booking-core process through the database (seed
//! 000, Challenge 3). The grant endpoint allows only a couple of grants per hour, so:
//! - one refresher at a time: a lease row `gateway-token-refresh` held [`LOCK_TTL_MS`] (45 s);
//!   only its holder calls the grant endpoint, the others poll for the new token within their own
//!   request deadline;
//! - the token is refreshed [`REFRESH_MARGIN_MS`] (5 min) before it expires;
//! - the grant call runs in its own spawned task with its own [`GRANT_TIMEOUT`] (30 s), so a
//!   fan's request timeout cannot cut it short;
//! - a failed grant keeps the lease for [`FAILED_HOLD_MS`] (60 s) so the fleet does not burn the
//!   hourly allowance.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sale_common::{Secret, SharedClock};
use serde::Deserialize;

use super::GatewayError;
use crate::db::{lease, Db};

/// Lease of the single refresher, ms (seed: 45 s).
pub const LOCK_TTL_MS: i64 = 45_000;
/// How long a failed grant keeps the lease, ms (seed: 60 s).
pub const FAILED_HOLD_MS: i64 = 60_000;
/// Refresh this long before expiry, ms ("a few minutes").
pub const REFRESH_MARGIN_MS: i64 = 5 * 60_000;
/// Deadline of the grant call itself (seed: 30 s).
pub const GRANT_TIMEOUT: Duration = Duration::from_secs(30);
const LEASE: &str = "gateway-token-refresh";
const POLL: Duration = Duration::from_millis(25);

#[derive(Debug, Deserialize)]
struct Grant {
    access_token: String,
    /// Seconds.
    expires_in: i64,
}

/// Shared token cache: this process's copy, backed by the `gateway_token` row.
#[derive(Debug)]
pub struct TokenStore {
    db: Db,
    clock: SharedClock,
    grant_url: String,
    client_id: String,
    client_secret: Secret,
    http: reqwest::Client,
    cache: Mutex<Option<(String, i64)>>,
}

impl TokenStore {
    /// A store granting at `{gateway}/v1/oauth/token` with HTTP basic client credentials.
    pub fn new(
        db: Db,
        clock: SharedClock,
        gateway: &str,
        client_id: &str,
        client_secret: Secret,
    ) -> Self {
        let http = reqwest::Client::builder()
            .timeout(GRANT_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            db,
            clock,
            grant_url: format!("{}/v1/oauth/token", gateway.trim_end_matches('/')),
            client_id: client_id.to_owned(),
            client_secret,
            http,
            cache: Mutex::new(None),
        }
    }

    fn cached(&self, now: i64) -> Option<String> {
        let c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        c.as_ref()
            .filter(|(_, exp)| exp - REFRESH_MARGIN_MS > now)
            .map(|(t, _)| t.clone())
    }

    /// Forgets `token` because the gateway refused it (case B10: the gateway restarted, or this
    /// is a new run on an old database): drops this process's copy and the shared row if it
    /// still holds that token, so the next [`TokenStore::get`] grants a new one through the
    /// single refresher. A row another process already replaced is left alone.
    pub async fn invalidate(&self, token: &str) {
        {
            let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if c.as_ref().is_some_and(|(t, _)| t == token) {
                *c = None;
            }
        }
        let dropped = sqlx::query("DELETE FROM gateway_token WHERE id = 1 AND token = $1")
            .bind(token)
            .execute(&self.db)
            .await;
        match dropped {
            Ok(r) if r.rows_affected() > 0 => {
                tracing::warn!("the gateway refused the stored access token; granting a new one")
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "could not drop the refused gateway token"),
        }
    }

    async fn shared(&self) -> Result<Option<(String, i64)>, GatewayError> {
        sqlx::query_as("SELECT token, expires_at FROM gateway_token WHERE id = 1")
            .fetch_optional(&self.db)
            .await
            .map_err(|e| GatewayError::NoToken(format!("token store: {e}")))
    }

    /// A valid token, waiting at most `wait` (the caller's own deadline) for a refresh by this
    /// or another process. A token inside the refresh margin but not expired is still returned
    /// while the refresh runs in the background.
    pub async fn get(self: &Arc<Self>, wait: Duration) -> Result<String, GatewayError> {
        let started = Instant::now();
        loop {
            let now = self.clock.now_ms();
            if let Some(t) = self.cached(now) {
                return Ok(t);
            }
            let shared = self.shared().await?;
            if let Some((t, exp)) = &shared {
                if exp - REFRESH_MARGIN_MS > now {
                    *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((t.clone(), *exp));
                    return Ok(t.clone());
                }
            }
            let usable = shared.filter(|(_, exp)| *exp > now + 1_000).map(|(t, _)| t);
            let owner = uuid::Uuid::new_v4().to_string();
            let mine = lease::acquire(&self.db, LEASE, &owner, now, now + LOCK_TTL_MS)
                .await
                .map_err(|e| GatewayError::NoToken(format!("token lease: {e}")))?;
            if mine {
                // Double check: another process may have stored a token between our read and
                // our lease (it gives the lease back right after storing).
                if let Some((t, exp)) = self.shared().await? {
                    if exp - REFRESH_MARGIN_MS > now {
                        let _ = lease::set_until(&self.db, LEASE, &owner, 0).await;
                        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some((t.clone(), exp));
                        return Ok(t);
                    }
                }
                let me = Arc::clone(self);
                let refresh = tokio::spawn(async move { me.refresh(&owner).await });
                if let Some(t) = usable {
                    return Ok(t);
                }
                let left = wait.saturating_sub(started.elapsed());
                return match tokio::time::timeout(left, refresh).await {
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) => Err(GatewayError::Other(format!("token refresh task: {e}"))),
                    Err(_) => Err(GatewayError::Timeout),
                };
            }
            if let Some(t) = usable {
                return Ok(t);
            }
            if started.elapsed() + POLL >= wait {
                return Err(GatewayError::NoToken(
                    "none stored yet by the refresh lease's holder".into(),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The lease holder's grant call: store the token and give the lease back, or keep the
    /// lease for [`FAILED_HOLD_MS`] after a failure.
    async fn refresh(&self, owner: &str) -> Result<String, GatewayError> {
        let res = self.grant().await;
        let now = self.clock.now_ms();
        match &res {
            Ok((token, exp)) => {
                let stored = sqlx::query(
                    "INSERT INTO gateway_token (id, token, expires_at, fetched_at) VALUES (1, $1, $2, $3) \
                     ON CONFLICT (id) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at, \
                     fetched_at = excluded.fetched_at",
                )
                .bind(token)
                .bind(exp)
                .bind(now)
                .execute(&self.db)
                .await;
                if let Err(e) = stored {
                    tracing::error!(error = %e, "could not store the gateway token");
                }
                *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((token.clone(), *exp));
                let _ = lease::set_until(&self.db, LEASE, owner, 0).await;
                tracing::info!(expires_at_ms = exp, "gateway access token granted");
            }
            Err(e) => {
                tracing::error!(error = %e, "gateway token grant failed; lease kept 60 s");
                let _ = lease::set_until(&self.db, LEASE, owner, now + FAILED_HOLD_MS).await;
            }
        }
        res.map(|(t, _)| t)
    }

    async fn grant(&self) -> Result<(String, i64), GatewayError> {
        let r = self
            .http
            .post(&self.grant_url)
            .basic_auth(&self.client_id, Some(self.client_secret.expose()))
            .send()
            .await?;
        if !r.status().is_success() {
            return Err(GatewayError::Other(format!(
                "grant answered {}",
                r.status()
            )));
        }
        let g: Grant = r.json().await?;
        Ok((g.access_token, self.clock.now_ms() + g.expires_in * 1000))
    }
}
