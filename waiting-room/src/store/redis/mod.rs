//! Redis queue store for many waiting-room nodes. Every multi-key change is one Lua script
//! (`*.lua` beside this file); reads of several keys use one `MULTI` pipeline. Every key of an
//! event carries the `{event}` hash tag (`wr:{demo}:meta`, …) so one event lives in one
//! Redis Cluster slot. Connections go through `ConnectionManager` (it reconnects) with
//! response and connection timeouts (DEPENDENCIES.md).
//!
//! Keys per event: `meta` hash (state, knobs, `counter` = last number handed out, `cursor`,
//! `shuffle_next`, `admitted_total`, `max_active_seen`, `skipped_total`, `ended_total`, `win` =
//! ready window, `edge` = last number inside it); `num` hash visitor → number;
//! `byn:{k div 100}` hashes number → visitor in buckets of 100 numbers (small hashes stay
//! listpacks: ~40 B per fan instead of ~96 B in one big hash); `pre` set (pre-queue); `adm` hash
//! visitor → `"jti iat exp"`; `jti` hash jti → visitor; `live` sorted set member → expiry (epoch s; members are visitors or
//! `inv:{number}` invitations); `hb` sorted set of fans in the ready window → last sign of life
//! (epoch ms); `gone` hash skipped visitor → skipped-at ms (or `r` once back); `back` list of
//! returning fans; `audit` list of JSON entries. Plus the global set `wr:events`.

mod latch;
mod parse;
mod queue;

pub use latch::{status_latch_key, status_throttle_key};

use parse::{err, key, parse_meta, parse_u64, state_of};

use super::{Advance, QueueStore, StoreError, StoreResult, AUDIT_KEEP};
use crate::domain::{
    AdmissionTerms, AdvanceParams, AuditEntry, ClaimOutcome, EventId, EventMeta, EventState,
    Figures, Heartbeat, JoinOutcome, Position, SessionEnd, SessionRef, VisitorId,
};
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands, Script};
use std::collections::HashMap;
use std::time::Duration;

const EVENTS_KEY: &str = "wr:events";

#[derive(Debug)]
struct Scripts {
    join: Script,
    begin_open: Script,
    open_chunk: Script,
    advance: Script,
    claim: Script,
    create: Script,
    transition: Script,
    status_latch: Script,
    set_fields: Script,
    lock: Script,
    heartbeat: Script,
    end_session: Script,
    position: Script,
    figures: Script,
}

/// Helpers shared by several scripts (prepended).
const LIB: &str = include_str!("lib.lua");

fn with_lib(body: &str) -> Script {
    Script::new(&format!("{LIB}\n{body}"))
}

/// Scripts that keep the queue moving (advance, claim, heartbeat, transitions, locks, session
/// ends) run at the memory cap too: they update in place or add a bounded entry (at most
/// `max_active` admissions). Only joins and event creation, which grow without bound, meet
/// Redis's `OOM` refusal (case W14). Redis 7 script flags (`#!lua flags=allow-oom`) must be
/// the first line.
const ALLOW_OOM: &str = "#!lua flags=allow-oom";

/// Reads run at the memory cap as well (Redis refuses every command queued in a `MULTI` there).
fn read_only(body: &str) -> Script {
    Script::new(&format!("#!lua flags=no-writes\n{body}"))
}

fn moving(body: &str) -> Script {
    Script::new(&format!("{ALLOW_OOM}\n{body}"))
}

fn moving_with_lib(body: &str) -> Script {
    Script::new(&format!("{ALLOW_OOM}\n{LIB}\n{body}"))
}

/// The only eviction policy a queue may run under (case W14): any other silently deletes events.
pub const REQUIRED_EVICTION_POLICY: &str = "noeviction";

/// `maxmemory_policy` from `INFO memory` (works where `CONFIG GET` is disabled, as on managed
/// Redis services).
pub async fn eviction_policy(conn: &mut ConnectionManager) -> redis::RedisResult<String> {
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    Ok(info
        .lines()
        .find_map(|l| l.strip_prefix("maxmemory_policy:"))
        .map(|p| p.trim().to_owned())
        .unwrap_or_default())
}

fn wrong_policy(policy: &str) -> String {
    format!(
        "Redis maxmemory-policy is {policy:?}: the queue is state, not a cache, and would be \
         evicted silently; set `maxmemory-policy {REQUIRED_EVICTION_POLICY}` (case W14)"
    )
}

/// The Redis backend.
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    scripts: std::sync::Arc<Scripts>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisStore")
    }
}

impl RedisStore {
    /// Connects (fails fast when Redis is not reachable). `timeout` bounds each command and
    /// each connection attempt; after a drop the manager reconnects in the background (attempts
    /// ≤ 500 ms apart) while requests fail fast.
    pub async fn connect(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let cfg = ConnectionManagerConfig::new()
            .set_response_timeout(timeout)
            .set_connection_timeout(timeout)
            .set_number_of_retries(2)
            // redis-rs hands `factor` to backon as a multiplier on a 1 s minimum: the default
            // (100) makes the second reconnect attempt wait a minute. Reconnect every ≤ 500 ms
            // instead, so service resumes promptly when Redis comes back.
            .set_factor(2)
            .set_max_delay(500);
        let mut conn = ConnectionManager::new_with_config(client, cfg).await?;
        let policy = eviction_policy(&mut conn).await?;
        anyhow::ensure!(policy == REQUIRED_EVICTION_POLICY, wrong_policy(&policy));
        let scripts = Scripts {
            join: with_lib(include_str!("join.lua")),
            begin_open: moving_with_lib(include_str!("begin_open.lua")),
            open_chunk: moving_with_lib(include_str!("open_chunk.lua")),
            advance: moving_with_lib(include_str!("advance.lua")),
            claim: moving_with_lib(include_str!("claim.lua")),
            create: with_lib(include_str!("create.lua")),
            transition: moving_with_lib(include_str!("transition.lua")),
            status_latch: moving(include_str!("status_latch.lua")),
            set_fields: moving(include_str!("set_fields.lua")),
            lock: moving(include_str!("lock.lua")),
            heartbeat: moving_with_lib(include_str!("heartbeat.lua")),
            end_session: moving(include_str!("end_session.lua")),
            position: read_only(include_str!("position.lua")),
            figures: read_only(include_str!("figures.lua")),
        };
        Ok(Self {
            conn,
            scripts: std::sync::Arc::new(scripts),
        })
    }

    async fn set_fields(&self, event: &EventId, fields: &[(&str, String)]) -> StoreResult<()> {
        let mut inv = self.scripts.set_fields.key(key(event, "meta"));
        for (k, v) in fields {
            inv.arg(*k).arg(v);
        }
        let found: i64 = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if found == 1 {
            Ok(())
        } else {
            Err(StoreError::NotFound)
        }
    }
}

#[async_trait]
impl QueueStore for RedisStore {
    /// `PING`, and the eviction policy still `noeviction` (an operator may change it at run
    /// time: `/readyz` then answers 503, and `wr_store_eviction_policy_ok` drops to 0).
    async fn ping(&self) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(err)?;
        let policy = eviction_policy(&mut conn).await.map_err(err)?;
        let ok = policy == REQUIRED_EVICTION_POLICY;
        metrics::gauge!("wr_store_eviction_policy_ok").set(if ok { 1.0 } else { 0.0 });
        if !ok {
            return Err(StoreError::Unavailable(wrong_policy(&policy)));
        }
        Ok(())
    }

    async fn create_event(&self, meta: &EventMeta) -> StoreResult<bool> {
        let created: i64 = self
            .scripts
            .create
            .key(key(&meta.id, "meta"))
            .arg("opens_at")
            .arg(meta.opens_at)
            .arg("admit_rate")
            .arg(meta.admit_rate.to_string())
            .arg("max_active")
            .arg(meta.max_active)
            .arg("ttl")
            .arg(meta.admission_ttl_secs)
            .arg("booking_url")
            .arg(&meta.booking_url)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let _: i64 = self
            .conn
            .clone()
            .sadd(EVENTS_KEY, meta.id.as_str())
            .await
            .map_err(err)?;
        Ok(created == 1)
    }

    async fn event(&self, event: &EventId) -> StoreResult<Option<EventMeta>> {
        let h: HashMap<String, String> = self
            .conn
            .clone()
            .hgetall(key(event, "meta"))
            .await
            .map_err(err)?;
        if h.is_empty() {
            return Ok(None);
        }
        parse_meta(event, &h).map(Some)
    }

    async fn list_events(&self) -> StoreResult<Vec<EventId>> {
        let ids: Vec<String> = self.conn.clone().smembers(EVENTS_KEY).await.map_err(err)?;
        let mut v: Vec<EventId> = ids.iter().filter_map(|s| EventId::parse(s)).collect();
        v.sort();
        Ok(v)
    }

    async fn set_knobs(
        &self,
        event: &EventId,
        admit_rate: Option<f64>,
        max_active: Option<u64>,
    ) -> StoreResult<()> {
        let mut fields = Vec::new();
        if let Some(r) = admit_rate {
            fields.push(("admit_rate", r.to_string()));
        }
        if let Some(m) = max_active {
            fields.push(("max_active", m.to_string()));
        }
        self.set_fields(event, &fields).await
    }

    async fn set_pow(&self, event: &EventId, bits: u32) -> StoreResult<()> {
        self.set_fields(event, &[("pow", bits.to_string())]).await
    }

    async fn transition(
        &self,
        event: &EventId,
        from: &[EventState],
        to: EventState,
    ) -> StoreResult<EventState> {
        let mut inv = self.scripts.transition.key(key(event, "meta"));
        inv.arg(to.as_str());
        for f in from {
            inv.arg(f.as_str());
        }
        let s: String = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if s.is_empty() {
            return Err(StoreError::NotFound);
        }
        state_of(&s)
    }

    async fn join(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<JoinOutcome> {
        self.join_fan(event, visitor, now_ms, rejoin_grace_ms).await
    }

    async fn heartbeat(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<Heartbeat> {
        self.heartbeat_fan(event, visitor, now_ms, rejoin_grace_ms)
            .await
    }

    async fn position(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Position> {
        let (state, cursor, n, admitted): (String, String, String, bool) = self
            .scripts
            .position
            .key(key(event, "meta"))
            .key(key(event, "num"))
            .key(key(event, "adm"))
            .arg(visitor.as_str())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if state.is_empty() {
            return Err(StoreError::NotFound);
        }
        let opt = |s: String| (!s.is_empty()).then_some(s);
        Ok(Position {
            queue_number: opt(n).as_deref().map(parse_u64).transpose()?,
            cursor: parse_u64(opt(cursor).as_deref().unwrap_or("0"))?,
            state: state_of(&state)?,
            admitted,
        })
    }

    async fn begin_open(&self, event: &EventId) -> StoreResult<u64> {
        self.scripts
            .begin_open
            .key(key(event, "meta"))
            .key(key(event, "pre"))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)
    }

    async fn open_chunk(&self, event: &EventId, max: u64, _seed: u64) -> StoreResult<u64> {
        self.scripts
            .open_chunk
            .key(key(event, "meta"))
            .key(key(event, "pre"))
            .key(key(event, "num"))
            .key(key(event, "byn"))
            .arg(max)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)
    }

    async fn advance_cursor(&self, event: &EventId, p: &AdvanceParams) -> StoreResult<Advance> {
        self.advance(event, p).await
    }

    async fn claim(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        terms: AdmissionTerms,
        new_jti: &str,
        rejoin_grace_ms: u64,
    ) -> StoreResult<ClaimOutcome> {
        self.claim_fan(event, visitor, now_ms, terms, new_jti, rejoin_grace_ms)
            .await
    }

    async fn figures(
        &self,
        event: &EventId,
        now_ms: i64,
        silence_ms: u64,
    ) -> StoreResult<Option<Figures>> {
        self.read_figures(event, now_ms, silence_ms).await
    }

    async fn end_session(
        &self,
        event: &EventId,
        session: &SessionRef,
        now: i64,
    ) -> StoreResult<SessionEnd> {
        self.end(event, session, now).await
    }

    async fn audit_append(&self, event: &EventId, entry: &AuditEntry) -> StoreResult<()> {
        self.append_audit(event, entry).await
    }

    async fn audit(&self, event: &EventId, limit: usize) -> StoreResult<Vec<AuditEntry>> {
        self.read_audit(event, limit).await
    }

    async fn set_counter(&self, event: &EventId, value: u64) -> StoreResult<()> {
        self.set_fields(event, &[("counter", value.to_string())])
            .await
    }

    async fn try_lock(&self, key: &str, token: &str, ttl_ms: u64) -> StoreResult<bool> {
        let r: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(r.is_some())
    }

    async fn renew_lock(&self, key: &str, token: &str, ttl_ms: u64) -> StoreResult<bool> {
        let r: i64 = self
            .scripts
            .lock
            .key(key)
            .arg(token)
            .arg("renew")
            .arg(ttl_ms)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(r == 1)
    }

    async fn status_throttle(&self, event: &EventId, _now: i64, ms: u64) -> StoreResult<bool> {
        self.throttle_latch(event, ms).await
    }

    async fn status_transition(&self, e: &EventId, state: &str, gen: u64) -> StoreResult<bool> {
        self.transition_latch(e, state, gen).await
    }

    async fn release_lock(&self, key: &str, token: &str) -> StoreResult<bool> {
        let r: i64 = self
            .scripts
            .lock
            .key(key)
            .arg(token)
            .arg("release")
            .arg(0)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(r == 1)
    }
}

/// The lock key of an event's admitter, inside the event's hash slot.
pub fn admitter_lock_key(event: &EventId) -> String {
    key(event, "admitter")
}
