//! The quiet lane's keys on Redis (issue 15 item 2): `rules` (hash rule id → JSON) and `shadow`
//! (hash visitor → `"number behind at_ms rule address"`), both under the event's `{event}` tag
//! and declared in `rules.lua` / `shadow.lua`, which check the event exists in the same step.
//! The shadow line's counter is `meta` field `shadow_seq`; the fans' `counter` is only read.

use super::parse::{bad, err, key, parse_u64};
use super::RedisStore;
use crate::domain::{EventId, VisitorId};
use crate::lanes::{AddressRule, ShadowEntry};
use crate::store::{RuleAdded, StoreResult};
use redis::{AsyncCommands, Value};

fn missing(v: &Value) -> bool {
    matches!(v, Value::BulkString(b) if b == b"missing")
        || matches!(v, Value::SimpleString(s) if s == "missing")
}

fn text(v: Value) -> StoreResult<String> {
    redis::from_redis_value::<String>(&v).map_err(|_| bad("string"))
}

/// Parses a stored shadow entry of `visitor`.
fn parse_entry(visitor: &str, raw: &str) -> StoreResult<ShadowEntry> {
    let mut it = raw.split(' ');
    let mut next = || it.next().ok_or_else(|| bad("shadow entry"));
    Ok(ShadowEntry {
        visitor: visitor.to_owned(),
        shadow_number: parse_u64(next()?)?,
        behind: parse_u64(next()?)?,
        at_ms: next()?.parse().map_err(|_| bad("shadow at_ms"))?,
        rule: next()?.to_owned(),
        address: next()?.to_owned(),
    })
}

impl RedisStore {
    async fn rules_call(&self, event: &EventId, args: &[&str]) -> StoreResult<Value> {
        let mut call = self.scripts.rules.on(event, &["meta", "rules"]);
        for a in args {
            call.arg(*a);
        }
        let v: Value = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if missing(&v) {
            return Err(self.missing(event));
        }
        Ok(v)
    }

    pub(super) async fn read_rules(&self, event: &EventId) -> StoreResult<Vec<AddressRule>> {
        let v = self.rules_call(event, &["list"]).await?;
        let raw: Vec<String> = redis::from_redis_value(&v).map_err(|_| bad("rules"))?;
        raw.iter()
            .map(|s| serde_json::from_str(s).map_err(|_| bad("rule")))
            .collect()
    }

    pub(super) async fn write_rule(
        &self,
        event: &EventId,
        rule: &AddressRule,
        max: usize,
    ) -> StoreResult<RuleAdded> {
        let json = serde_json::to_string(rule).map_err(|e| bad(&e.to_string()))?;
        let max = max.to_string();
        let args = ["put", &rule.id, &json, &rule.cidr, &max];
        let answer = text(self.rules_call(event, &args).await?)?;
        match answer.as_str() {
            "added" => Ok(RuleAdded::Added),
            "full" => Ok(RuleAdded::Full),
            other => {
                let same = other.strip_prefix("same:").ok_or_else(|| bad("put rule"))?;
                serde_json::from_str(same)
                    .map(RuleAdded::SameRange)
                    .map_err(|_| bad("rule"))
            }
        }
    }

    pub(super) async fn remove_rule(
        &self,
        event: &EventId,
        id: &str,
    ) -> StoreResult<Option<AddressRule>> {
        let old = text(self.rules_call(event, &["del", id]).await?)?;
        if old.is_empty() {
            return Ok(None);
        }
        serde_json::from_str(&old)
            .map(Some)
            .map_err(|_| bad("rule"))
    }

    async fn shadow_call(&self, event: &EventId, args: &[&str]) -> StoreResult<String> {
        let mut call = self.scripts.shadow.on(event, &["meta", "shadow", "pre"]);
        for a in args {
            call.arg(*a);
        }
        let v: Value = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if missing(&v) {
            return Err(self.missing(event));
        }
        text(v)
    }

    pub(super) async fn join_shadow(
        &self,
        event: &EventId,
        e: &ShadowEntry,
    ) -> StoreResult<ShadowEntry> {
        let rest = format!("{} {} {}", e.at_ms, e.rule, e.address);
        if rest.split(' ').count() != 3 {
            return Err(bad("shadow entry with a space"));
        }
        let raw = self
            .shadow_call(event, &["join", &e.visitor, &rest])
            .await?;
        parse_entry(&e.visitor, &raw)
    }

    pub(super) async fn remove_shadow(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>> {
        let raw = self.shadow_call(event, &["del", visitor.as_str()]).await?;
        if raw.is_empty() {
            return Ok(None);
        }
        parse_entry(visitor.as_str(), &raw).map(Some)
    }

    pub(super) async fn read_shadow(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>> {
        let raw: Option<String> = self
            .conn
            .clone()
            .hget(key(event, "shadow"), visitor.as_str())
            .await
            .map_err(err)?;
        raw.map(|r| parse_entry(visitor.as_str(), &r)).transpose()
    }

    /// The whole line in one `HGETALL` (an operator's view; the join rate limit bounds it).
    pub(super) async fn list_shadow(
        &self,
        event: &EventId,
        limit: usize,
    ) -> StoreResult<Vec<ShadowEntry>> {
        let all: Vec<(String, String)> = self
            .conn
            .clone()
            .hgetall(key(event, "shadow"))
            .await
            .map_err(err)?;
        let mut out = all
            .iter()
            .map(|(v, raw)| parse_entry(v, raw))
            .collect::<StoreResult<Vec<_>>>()?;
        out.sort_by_key(|e| e.shadow_number);
        out.truncate(limit);
        Ok(out)
    }
}
