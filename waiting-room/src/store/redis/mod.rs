//! Redis queue store for many waiting-room nodes, on one server or on a Redis Cluster
//! (`conn.rs`: `ConnectionManager` or the `redis` crate's cluster connection, both with
//! response and connection timeouts, DEPENDENCIES.md). Every multi-key change is one Lua script
//! (`*.lua` beside this file, called by `script.rs`); reads of several keys use one `MULTI`
//! pipeline or a read-only script. Every key of an event carries the `{event}` hash tag
//! (`wr:{demo}:meta`, …) so one event lives in one cluster slot, and every script declares in
//! `KEYS` every key it touches — the number buckets too (`numbers.rs` says how the caller
//! knows which) — so the cluster can route it and check the slot's migration state.
//!
//! Keys per event: `meta` hash (state, knobs, `counter` = last number handed out, `cursor`,
//! `shuffle_next`, `admitted_total`, `max_active_seen`, `skipped_total`, `ended_total`, `win` =
//! ready window, `edge` = last number inside it, `draw_seed` = the draw's secret seed in hex,
//! `draw_from`/`draw_n` = the numbers the pre-queue got); `num` hash visitor → number;
//! `byn:{k div 100}` hashes number → visitor in buckets of 100 numbers (small hashes stay
//! listpacks: ~40 B per fan instead of ~96 B in one big hash); `pre` sorted set (pre-queue:
//! members `{public id}:{visitor}` scored by the draw rank, `crate::draw`); `adm` hash
//! visitor → `"jti iat exp"`; `jti` hash jti → visitor; `live` sorted set member → expiry (epoch
//! s; members are visitors or `inv:{number}` invitations); `hb` sorted set of fans in the ready
//! window → last sign of life (epoch ms); `gone` hash skipped visitor → skipped-at ms (or `r`
//! once back); `back` list of returning fans; `audit` list of JSON entries; `report` list of JSON
//! sale-report samples; `rules` hash rule id → JSON and `shadow` hash visitor → shadow entry (the
//! quiet lane, `lanes.rs`; `meta` field `shadow_seq` is the shadow line's own counter);
//! `admitter` owner-token
//! lock; `status:throttle` and `status:latch`. Plus the registry set `wr:events` (its own slot:
//! listing events reads one key, no `SCAN` over every master).
//!
//! Replication is asynchronous: a write acknowledged by a master can be lost when its replica
//! takes over. Joins, claims and the opening chunks therefore answer only once
//! [`Durability::min_replicas`] replicas confirmed them (`durable.rs`: `WAIT`, group-committed);
//! unconfirmed, they answer 503 and hand out nothing (issue 11 item 5).

mod access;
mod breaker;
mod conn;
mod draw;
mod durable;
mod lanes;
mod latch;
mod numbers;
mod parse;
mod queue;
mod script;

pub use durable::Durability;
pub use latch::{status_latch_key, status_throttle_key};

use conn::Conn;
use parse::{err, key, parse_meta, parse_u64, state_of};
use script::Lua;

use super::{Advance, QueueStore, StoreError, StoreResult, AUDIT_KEEP, REPORT_KEEP};
use crate::domain::{
    AdmissionTerms, AdvanceParams, AuditEntry, ClaimOutcome, EventId, EventMeta, EventState,
    Figures, Heartbeat, JoinOutcome, Left, Position, ReportSample, SessionEnd, SessionRef,
    VisitorId,
};
use crate::draw::{Draw, DrawSeed};
use crate::lanes::{AddressRule, ShadowEntry};
use crate::mode::QueueMode;
use async_trait::async_trait;
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const EVENTS_KEY: &str = "wr:events";

#[derive(Debug)]
struct Scripts {
    join: Lua,
    begin_open: Lua,
    open_chunk: Lua,
    advance: Lua,
    claim: Lua,
    create: Lua,
    transition: Lua,
    status_latch: Lua,
    set_fields: Lua,
    lock: Lua,
    heartbeat: Lua,
    end_session: Lua,
    position: Lua,
    leave: Lua,
    figures: Lua,
    draw: Lua,
    rules: Lua,
    shadow: Lua,
    published_field: Lua,
    phases: Lua,
    phase_done: Lua,
}

/// Helpers shared by several scripts (prepended).
const LIB: &str = include_str!("lib.lua");

fn with_lib(body: &str) -> Lua {
    Lua::new(format!("{LIB}\n{body}"))
}

/// Scripts that keep the queue moving (advance, claim, heartbeat, transitions, locks, session
/// ends) run at the memory cap too: they update in place or add a bounded entry (at most
/// `max_active` admissions). Only joins and event creation, which grow without bound, meet
/// Redis's `OOM` refusal (case W14). Redis 7 script flags (`#!lua flags=allow-oom`) must be
/// the first line.
const ALLOW_OOM: &str = "#!lua flags=allow-oom";

/// Reads run at the memory cap as well (Redis refuses every command queued in a `MULTI` there).
fn read_only(body: &str) -> Lua {
    Lua::new(format!("#!lua flags=no-writes\n{body}"))
}

fn moving(body: &str) -> Lua {
    Lua::new(format!("{ALLOW_OOM}\n{body}"))
}

fn moving_with_lib(body: &str) -> Lua {
    Lua::new(format!("{ALLOW_OOM}\n{LIB}\n{body}"))
}

/// The only eviction policy a queue may run under (case W14): any other silently deletes events.
pub const REQUIRED_EVICTION_POLICY: &str = "noeviction";

/// `maxmemory_policy` from `INFO memory` of every master (one server: of it), as (node,
/// policy) pairs (`INFO` works where `CONFIG GET` is disabled, as on managed Redis services).
async fn eviction_policies(conn: &mut Conn) -> redis::RedisResult<Vec<(String, String)>> {
    let infos = conn.info_of_masters("memory").await?;
    Ok(infos
        .into_iter()
        .map(|(node, info)| {
            let policy = info
                .lines()
                .find_map(|l| l.strip_prefix("maxmemory_policy:"))
                .map(|p| p.trim().to_owned())
                .unwrap_or_default();
            (node, policy)
        })
        .collect())
}

/// The first master whose policy is not `noeviction`, as an operator's message (case W14).
async fn check_eviction_policy(conn: &mut Conn) -> redis::RedisResult<Result<(), String>> {
    let policies = eviction_policies(conn).await?;
    Ok(
        match policies.iter().find(|(_, p)| p != REQUIRED_EVICTION_POLICY) {
            None => Ok(()),
            Some((node, p)) if node.is_empty() => Err(wrong_policy(p)),
            Some((node, p)) => Err(format!("{} (master {node})", wrong_policy(p))),
        },
    )
}

/// What `/readyz` says when events this process has seen are gone from Redis.
fn lost_events(ids: &[String]) -> String {
    format!(
        "Redis no longer holds event(s) {}: it restarted without its data, was flushed or \
         failed over to an empty replica, and their lines are lost; restore Redis from its \
         append-only file or replica, or restart the waiting room to begin new lines",
        ids.join(", ")
    )
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
    conn: Conn,
    scripts: Arc<Scripts>,
    /// Per event, the next queue number this process expects a join to hand out (numbers.rs).
    hints: Arc<Mutex<HashMap<String, u64>>>,
    /// Replication waits of joins, claims and opening chunks (`durable.rs`).
    acks: Arc<durable::Acks>,
    /// Joins of this process in flight (numbers.rs sizes the declared buckets by it).
    joins_in_flight: Arc<std::sync::atomic::AtomicU64>,
    /// Per event, its draw seed (never changes once stored: joins rank pre-queued fans by it).
    seeds: Arc<Mutex<HashMap<String, DrawSeed>>>,
    /// Events this process has seen in the store (created or read). `ping` checks each is still
    /// there: a Redis restarted without its data, flushed or failed over to an empty replica
    /// has lost their lines, and the node must say so instead of answering 404 "no such event".
    seen: Arc<Mutex<std::collections::BTreeSet<EventId>>>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisStore")
    }
}

impl RedisStore {
    /// Connects to one server (fails fast when Redis is not reachable). `timeout` bounds each
    /// command and each connection attempt; after a drop the manager reconnects in the
    /// background while requests fail fast.
    pub async fn connect(url: &str, timeout: Duration) -> anyhow::Result<Self> {
        Self::start(Conn::single(url, timeout).await?).await
    }

    /// Connects to a Redis Cluster through any of `urls` (`redis://host:port`, one or more
    /// nodes; the others are discovered). Every master must run `noeviction`.
    pub async fn connect_cluster(urls: &[String], timeout: Duration) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !urls.is_empty(),
            "a Redis Cluster store needs at least one url"
        );
        Self::start(Conn::cluster(urls, timeout).await?).await
    }

    async fn start(mut conn: Conn) -> anyhow::Result<Self> {
        if let Err(msg) = check_eviction_policy(&mut conn).await? {
            anyhow::bail!(msg);
        }
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
            leave: moving(include_str!("leave.lua")),
            figures: read_only(include_str!("figures.lua")),
            draw: moving(include_str!("draw.lua")),
            rules: Lua::new(include_str!("rules.lua").to_owned()),
            shadow: Lua::new(include_str!("shadow.lua").to_owned()),
            published_field: moving_with_lib(include_str!("published_field.lua")),
            phases: moving(include_str!("phases.lua")),
            phase_done: moving(include_str!("phase_done.lua")),
        };
        Ok(Self {
            conn,
            scripts: Arc::new(scripts),
            hints: Arc::default(),
            acks: Arc::new(durable::Acks::new(Durability::OFF)),
            joins_in_flight: Arc::default(),
            seeds: Arc::default(),
            seen: Arc::default(),
        })
    }

    fn saw(&self, event: &EventId) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.contains(event) {
            seen.insert(event.clone());
        }
    }

    /// What a call that found no event `event` answers: `NotFound` (404 "no such event") for
    /// an event this process never saw; for one it saw, `Unavailable` (503 + `Retry-After`):
    /// Redis has lost its line (restarted without its data, flushed, failed over to an empty
    /// replica), and a fan told "no such event" would give up a sale that exists. `/readyz`
    /// names the lost events ([`QueueStore::ping`]).
    fn missing(&self, event: &EventId) -> StoreError {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(event) {
            StoreError::Unavailable(lost_events(&[event.as_str().to_owned()]))
        } else {
            StoreError::NotFound
        }
    }

    /// Joins, claims and the opening chunks answer only once `d.min_replicas` replicas
    /// confirmed them (default [`Durability::OFF`]; `open_store` sets 1 for a cluster).
    pub fn with_durability(mut self, d: Durability) -> Self {
        self.acks = Arc::new(durable::Acks::new(d));
        self
    }

    /// The replication rule in force.
    pub fn durability(&self) -> Durability {
        self.acks.config()
    }

    /// After a write for `event`: waits for its replication (no-op when durability is off).
    async fn replicated(&self, event: &EventId) -> StoreResult<()> {
        self.acks.replicated(&self.conn, event).await
    }

    /// Sets (or with `""` clears) one field the status document publishes, bumping the
    /// generation when it changes; returns the old value (`""` when none).
    async fn set_published(
        &self,
        event: &EventId,
        field: &str,
        value: &str,
    ) -> StoreResult<String> {
        let (found, old): (i64, String) = self
            .scripts
            .published_field
            .key(key(event, "meta"))
            .arg(field)
            .arg(value)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if found == 1 {
            Ok(old)
        } else {
            Err(self.missing(event))
        }
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
            Err(self.missing(event))
        }
    }
}

#[async_trait]
impl QueueStore for RedisStore {
    /// `PING` (on a cluster: every master, through `INFO`), and the eviction policy still
    /// `noeviction` on every master (an operator may change it at run time: `/readyz` then
    /// answers 503, and `wr_store_eviction_policy_ok` drops to 0).
    async fn ping(&self) -> StoreResult<()> {
        let mut conn = self.conn.clone();
        let checked = check_eviction_policy(&mut conn).await.map_err(err)?;
        metrics::gauge!("wr_store_eviction_policy_ok").set(if checked.is_ok() { 1.0 } else { 0.0 });
        checked.map_err(StoreError::Unavailable)?;
        let mut missing = Vec::new();
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for id in seen {
            // One key per call: the events live in different cluster slots.
            let there: bool = conn.exists(key(&id, "meta")).await.map_err(err)?;
            if !there {
                missing.push(id.as_str().to_owned());
            }
        }
        metrics::gauge!("wr_store_events_missing").set(missing.len() as f64);
        if missing.is_empty() {
            return Ok(());
        }
        let msg = lost_events(&missing);
        tracing::error!("{msg}");
        Err(StoreError::Unavailable(msg))
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
            .arg("time_zone")
            .arg(&meta.time_zone)
            .arg("draw_seed")
            .arg(DrawSeed::random().to_hex())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let _: i64 = self
            .conn
            .clone()
            .sadd(EVENTS_KEY, meta.id.as_str())
            .await
            .map_err(err)?;
        self.saw(&meta.id);
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
            return match self.missing(event) {
                StoreError::NotFound => Ok(None),
                lost => Err(lost),
            };
        }
        self.saw(event);
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

    async fn set_stock_wait(&self, event: &EventId, in_play: u64) -> StoreResult<()> {
        self.set_fields(event, &[("stock_wait", in_play.to_string())])
            .await
    }

    async fn set_broadcast(
        &self,
        event: &EventId,
        message: Option<&crate::broadcast::Broadcast>,
    ) -> StoreResult<Option<crate::broadcast::Broadcast>> {
        let json = match message {
            Some(m) => serde_json::to_string(m).map_err(|_| parse::bad("broadcast"))?,
            None => String::new(),
        };
        let old = self.set_published(event, "broadcast", &json).await?;
        parse::broadcast_of(Some(&old))
    }

    async fn set_mode(&self, event: &EventId, mode: QueueMode) -> StoreResult<QueueMode> {
        let old = self.set_published(event, "mode", mode.as_str()).await?;
        parse::mode_of(Some(&old))
    }

    async fn mode(&self, event: &EventId) -> StoreResult<QueueMode> {
        let (exists, mode): (bool, Option<String>) = redis::pipe()
            .exists(key(event, "meta"))
            .hget(key(event, "meta"), "mode")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if !exists {
            return Err(self.missing(event));
        }
        parse::mode_of(mode.as_ref())
    }

    async fn set_phases(
        &self,
        event: &EventId,
        phases: Option<&crate::phases::Phases>,
    ) -> StoreResult<Option<crate::phases::Phases>> {
        let (json, opens_at) = match phases {
            Some(p) => (
                serde_json::to_string(p).map_err(|_| parse::bad("phases"))?,
                p.sale_opens_at.to_string(),
            ),
            None => (String::new(), String::new()),
        };
        let (found, old): (i64, String) = self
            .scripts
            .phases
            .key(key(event, "meta"))
            .arg(json)
            .arg(opens_at)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if found != 1 {
            return Err(self.missing(event));
        }
        parse::phases_of(Some(&old))
    }

    async fn phases(&self, event: &EventId) -> StoreResult<(Option<crate::phases::Phases>, u8)> {
        let (exists, phases, done): (bool, Option<String>, Option<String>) = redis::pipe()
            .exists(key(event, "meta"))
            .hget(key(event, "meta"), "phases")
            .hget(key(event, "meta"), "phase_done")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if !exists {
            return Err(self.missing(event));
        }
        let done = done
            .as_deref()
            .unwrap_or("0")
            .parse()
            .map_err(|_| parse::bad("phase_done"))?;
        Ok((parse::phases_of(phases.as_ref())?, done))
    }

    async fn phase_done(&self, event: &EventId, from: u8, to: u8) -> StoreResult<bool> {
        let moved: i64 = self
            .scripts
            .phase_done
            .key(key(event, "meta"))
            .arg(from)
            .arg(to)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(moved == 1)
    }

    async fn transition(
        &self,
        event: &EventId,
        from: &[EventState],
        to: EventState,
    ) -> StoreResult<(EventState, bool)> {
        let mut inv = self.scripts.transition.key(key(event, "meta"));
        inv.arg(to.as_str());
        for f in from {
            inv.arg(f.as_str());
        }
        let (s, moved): (String, i64) = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if s.is_empty() {
            return Err(self.missing(event));
        }
        Ok((state_of(&s)?, moved == 1))
    }

    async fn join(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<JoinOutcome> {
        let out = self
            .join_fan(event, visitor, now_ms, rejoin_grace_ms)
            .await?;
        self.replicated(event).await?;
        Ok(out)
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
        let (state, cursor, n, admitted, between): (String, String, String, bool, u64) = self
            .scripts
            .position
            .on(event, &["meta", "num", "adm", "vac"])
            .arg(visitor.as_str())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if state.is_empty() {
            return Err(self.missing(event));
        }
        let opt = |s: String| (!s.is_empty()).then_some(s);
        let queue_number = opt(n).as_deref().map(parse_u64).transpose()?;
        let cursor = parse_u64(opt(cursor).as_deref().unwrap_or("0"))?;
        Ok(Position {
            queue_number,
            cursor,
            state: state_of(&state)?,
            admitted,
            ahead: Position::ahead_of(queue_number, cursor, between),
        })
    }

    async fn leave(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Left> {
        self.leave_line(event, visitor).await
    }

    async fn begin_open(&self, event: &EventId) -> StoreResult<u64> {
        let n = self
            .scripts
            .begin_open
            .key(key(event, "meta"))
            .key(key(event, "pre"))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        self.replicated(event).await?;
        Ok(n)
    }

    async fn open_chunk(&self, event: &EventId, max: u64) -> StoreResult<u64> {
        let left = self.number_chunk(event, max).await?;
        self.replicated(event).await?;
        Ok(left)
    }

    async fn draw(&self, event: &EventId) -> StoreResult<Draw> {
        self.read_draw(event).await
    }

    async fn numbered(
        &self,
        event: &EventId,
        first: u64,
        count: u64,
    ) -> StoreResult<Vec<Option<String>>> {
        self.read_numbered(event, first, count).await
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
        let out = self
            .claim_fan(event, visitor, now_ms, terms, new_jti, rejoin_grace_ms)
            .await?;
        if matches!(out, ClaimOutcome::Admitted(_)) {
            self.replicated(event).await?;
        }
        Ok(out)
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

    async fn rules(&self, event: &EventId) -> StoreResult<Vec<AddressRule>> {
        self.read_rules(event).await
    }

    async fn put_rule(
        &self,
        event: &EventId,
        rule: &AddressRule,
        max: usize,
    ) -> StoreResult<super::RuleAdded> {
        self.write_rule(event, rule, max).await
    }

    async fn delete_rule(&self, event: &EventId, id: &str) -> StoreResult<Option<AddressRule>> {
        self.remove_rule(event, id).await
    }

    async fn shadow_join(&self, event: &EventId, entry: &ShadowEntry) -> StoreResult<ShadowEntry> {
        self.join_shadow(event, entry).await
    }

    async fn shadow_entry(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>> {
        self.read_shadow(event, visitor).await
    }

    async fn shadow_list(&self, event: &EventId, limit: usize) -> StoreResult<Vec<ShadowEntry>> {
        self.list_shadow(event, limit).await
    }

    async fn shadow_remove(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>> {
        self.remove_shadow(event, visitor).await
    }

    async fn report_append(&self, event: &EventId, sample: &ReportSample) -> StoreResult<()> {
        self.append_report(event, sample).await
    }

    async fn report_samples(&self, event: &EventId) -> StoreResult<Vec<ReportSample>> {
        self.read_report(event).await
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

    fn access(&self) -> Option<&dyn crate::store::access::AccessStore> {
        Some(self)
    }
}

/// The lock key of an event's admitter, inside the event's hash slot.
pub fn admitter_lock_key(event: &EventId) -> String {
    key(event, "admitter")
}

/// The owner-token lock of an event's report sampler (the `report` module's runner).
pub fn report_lock_key(event: &EventId) -> String {
    key(event, "report-lock")
}

/// The owner-token lock of an event's closed loop (the `closedloop` module's runner).
pub fn closed_loop_lock_key(event: &EventId) -> String {
    key(event, "closed-loop")
}
