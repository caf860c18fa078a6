//! Access codes on Redis (`store::access`): one script, `access.lua`, whose keys all carry the
//! event's `{event}` hash tag (`access` hash of mode and promoter key, `codes`, `revoked`, `tiers`, `codeu:{hash}` per code), so one
//! event's codes live in its cluster slot and every key the script touches is in `KEYS`.

use super::parse::{bad, err, key};
use super::script::Lua;
use super::RedisStore;
use crate::access::{AccessMode, CodeRecord, Spend};
use crate::domain::{EventId, VisitorId};
use crate::store::access::AccessStore;
use crate::store::StoreResult;
use async_trait::async_trait;
use std::sync::LazyLock;

static SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("access.lua").to_owned()));

impl RedisStore {
    /// Runs `op` with `args`; `hashes` name the `codeu:{hash}` sets declared after the fixed keys.
    async fn access_call(
        &self,
        event: &EventId,
        hashes: &[&str],
        args: &[&str],
    ) -> StoreResult<Vec<String>> {
        let mut call = SCRIPT.on(event, &["meta", "access", "codes", "revoked", "tiers"]);
        call.keys(hashes.iter().map(|h| key(event, &format!("codeu:{h}"))));
        for a in args {
            call.arg(*a);
        }
        let out: Vec<String> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if out.first().map(String::as_str) == Some("missing") {
            return Err(self.missing(event));
        }
        Ok(out)
    }

    async fn access_one(&self, event: &EventId, args: &[&str]) -> StoreResult<String> {
        let out = self.access_call(event, &[], args).await?;
        out.into_iter().next().ok_or_else(|| bad("access reply"))
    }
}

fn mode(s: &str) -> StoreResult<AccessMode> {
    AccessMode::parse(s).ok_or_else(|| bad(s))
}

#[async_trait]
impl AccessStore for RedisStore {
    async fn access_mode(&self, event: &EventId) -> StoreResult<AccessMode> {
        mode(&self.access_one(event, &["mode"]).await?)
    }

    async fn set_access_mode(&self, event: &EventId, m: AccessMode) -> StoreResult<AccessMode> {
        mode(&self.access_one(event, &["set_mode", m.as_str()]).await?)
    }

    async fn put_codes(&self, event: &EventId, codes: &[CodeRecord]) -> StoreResult<u64> {
        let mut added = 0;
        // Chunks keep one script call short (a few ms) however large the import.
        for chunk in codes.chunks(1000) {
            let values: Vec<String> = chunk
                .iter()
                .map(|r| {
                    format!(
                        "{} {} {}",
                        r.uses,
                        r.expires_ms,
                        r.tier.as_deref().unwrap_or("")
                    )
                })
                .collect();
            let mut args = vec!["put"];
            for (r, v) in chunk.iter().zip(&values) {
                args.push(&r.hash);
                args.push(v);
            }
            let n = self.access_one(event, &args).await?;
            added += n.parse::<u64>().map_err(|_| bad(&n))?;
        }
        Ok(added)
    }

    async fn spend_code(
        &self,
        event: &EventId,
        hash: &str,
        visitor: &VisitorId,
        now_ms: i64,
    ) -> StoreResult<Spend> {
        let now = now_ms.to_string();
        let args = ["spend", hash, visitor.as_str(), &now];
        let out = self.access_call(event, &[hash], &args).await?;
        match out.first().map(String::as_str) {
            Some("unknown") => Ok(Spend::Unknown),
            Some("expired") => Ok(Spend::Expired),
            Some("used-up") => Ok(Spend::UsedUp),
            Some("spent") => Ok(Spend::Spent(out.get(1).filter(|t| !t.is_empty()).cloned())),
            _ => Err(bad("spend reply")),
        }
    }

    async fn refund_code(
        &self,
        event: &EventId,
        hash: &str,
        visitor: &VisitorId,
    ) -> StoreResult<()> {
        let args = ["refund", hash, visitor.as_str()];
        self.access_call(event, &[hash], &args).await.map(drop)
    }

    async fn revoke_codes(
        &self,
        event: &EventId,
        hashes: &[String],
    ) -> StoreResult<(u64, Vec<VisitorId>)> {
        let (mut deleted, mut visitors) = (0, Vec::new());
        for chunk in hashes.chunks(1000) {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let mut args = vec!["revoke"];
            args.extend(&refs);
            let out = self.access_call(event, &refs, &args).await?;
            let n = out.first().ok_or_else(|| bad("revoke reply"))?;
            deleted += n.parse::<u64>().map_err(|_| bad(n))?;
            visitors.extend(out.into_iter().skip(1).map(VisitorId::from_verified));
        }
        Ok((deleted, visitors))
    }

    async fn revoked(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<bool> {
        Ok(self
            .access_one(event, &["revoked", visitor.as_str()])
            .await?
            == "1")
    }

    async fn set_promoter_key(&self, event: &EventId, key_json: &str) -> StoreResult<()> {
        self.access_one(event, &["set_key", key_json])
            .await
            .map(drop)
    }

    async fn promoter_key(&self, event: &EventId) -> StoreResult<Option<String>> {
        let k = self.access_one(event, &["key"]).await?;
        Ok(Some(k).filter(|k| !k.is_empty()))
    }

    async fn set_tier(&self, event: &EventId, visitor: &VisitorId, tier: &str) -> StoreResult<()> {
        let args = ["set_tier", visitor.as_str(), tier];
        self.access_one(event, &args).await.map(drop)
    }

    async fn tier(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Option<String>> {
        let t = self.access_one(event, &["tier", visitor.as_str()]).await?;
        Ok(Some(t).filter(|t| !t.is_empty()))
    }
}
