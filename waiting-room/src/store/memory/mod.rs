//! In-memory queue store, the embedded single-node default. Every operation is one critical
//! section of one `std::sync::Mutex` (never held across an `.await`), which makes each multi-key
//! change atomic exactly like the Redis backend's Lua scripts.

mod access;
mod event;
mod live;

use super::{
    Advance, QueueStore, StoreError, StoreResult, AUDIT_KEEP, NUMBERED_CHUNK, REPORT_KEEP,
};
use crate::domain::{
    AdmissionTerms, AdvanceParams, AuditEntry, ClaimOutcome, EventId, EventMeta, EventState,
    Figures, Heartbeat, JoinOutcome, Left, Position, ReportSample, SessionEnd, SessionRef,
    VisitorId,
};
use crate::draw::Draw;
use crate::lanes::{AddressRule, ShadowEntry};
use async_trait::async_trait;
use event::Ev;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Inner {
    events: HashMap<EventId, Ev>,
    locks: HashMap<String, (String, Instant)>,
    /// Status throttle latch: event → end of the window, epoch ms.
    throttle: HashMap<EventId, i64>,
    /// Status transition latch: event → (highest generation latched, its public state).
    latch: HashMap<EventId, (u64, String)>,
    /// Access codes per event (issue 14 item 1, `access.rs`).
    access: HashMap<EventId, access::Codes>,
}

/// The in-memory backend. Cheap to create; one per process.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_event<T>(&self, event: &EventId, f: impl FnOnce(&mut Ev) -> T) -> StoreResult<T> {
        let mut g = self
            .inner
            .lock()
            .map_err(|_| StoreError::Unavailable("memory store poisoned".into()))?;
        g.events.get_mut(event).map(f).ok_or(StoreError::NotFound)
    }

    fn with_inner<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> StoreResult<T> {
        let mut g = self
            .inner
            .lock()
            .map_err(|_| StoreError::Unavailable("memory store poisoned".into()))?;
        Ok(f(&mut g))
    }
}

#[async_trait]
impl QueueStore for MemoryStore {
    async fn ping(&self) -> StoreResult<()> {
        self.with_inner(|_| ())
    }

    async fn create_event(&self, meta: &EventMeta) -> StoreResult<bool> {
        self.with_inner(|i| {
            if i.events.contains_key(&meta.id) {
                return false;
            }
            let mut meta = meta.clone();
            meta.state = EventState::Prequeue;
            i.events.insert(meta.id.clone(), Ev::new(meta));
            true
        })
    }

    async fn event(&self, event: &EventId) -> StoreResult<Option<EventMeta>> {
        self.with_inner(|i| i.events.get(event).map(|e| e.meta.clone()))
    }

    async fn list_events(&self) -> StoreResult<Vec<EventId>> {
        self.with_inner(|i| {
            let mut v: Vec<EventId> = i.events.keys().cloned().collect();
            v.sort();
            v
        })
    }

    async fn set_knobs(
        &self,
        event: &EventId,
        admit_rate: Option<f64>,
        max_active: Option<u64>,
    ) -> StoreResult<()> {
        self.with_event(event, |e| {
            if let Some(r) = admit_rate {
                e.meta.admit_rate = r;
            }
            if let Some(m) = max_active {
                e.meta.max_active = m;
            }
        })
    }

    async fn set_pow(&self, event: &EventId, bits: u32) -> StoreResult<()> {
        self.with_event(event, |e| e.meta.pow_bits = bits)
    }

    async fn set_stock_wait(&self, event: &EventId, in_play: u64) -> StoreResult<()> {
        self.with_event(event, |e| e.meta.stock_wait = in_play)
    }

    async fn set_broadcast(
        &self,
        event: &EventId,
        message: Option<&crate::broadcast::Broadcast>,
    ) -> StoreResult<Option<crate::broadcast::Broadcast>> {
        self.with_event(event, |e| {
            let old = std::mem::replace(&mut e.broadcast, message.cloned());
            if old.as_ref() != message {
                e.bump_gen();
            }
            old
        })
    }

    async fn set_mode(
        &self,
        event: &EventId,
        mode: crate::mode::QueueMode,
    ) -> StoreResult<crate::mode::QueueMode> {
        self.with_event(event, |e| {
            let old = std::mem::replace(&mut e.mode, mode);
            if old != mode {
                e.bump_gen();
            }
            old
        })
    }

    async fn mode(&self, event: &EventId) -> StoreResult<crate::mode::QueueMode> {
        self.with_event(event, |e| e.mode)
    }

    async fn set_phases(
        &self,
        event: &EventId,
        phases: Option<&crate::phases::Phases>,
    ) -> StoreResult<Option<crate::phases::Phases>> {
        self.with_event(event, |e| {
            if let Some(p) = phases {
                e.meta.opens_at = p.sale_opens_at;
            }
            e.phase_done = 0;
            std::mem::replace(&mut e.phases, phases.copied())
        })
    }

    async fn phases(&self, event: &EventId) -> StoreResult<(Option<crate::phases::Phases>, u8)> {
        self.with_event(event, |e| (e.phases, e.phase_done))
    }

    async fn phase_done(&self, event: &EventId, from: u8, to: u8) -> StoreResult<bool> {
        self.with_event(event, |e| {
            let moved = e.phase_done == from;
            if moved {
                e.phase_done = to;
            }
            moved
        })
    }

    async fn transition(
        &self,
        event: &EventId,
        from: &[EventState],
        to: EventState,
    ) -> StoreResult<(EventState, bool)> {
        self.with_event(event, |e| {
            let moved = from.contains(&e.meta.state) && e.meta.state != to;
            if moved {
                e.meta.state = to;
                e.bump_gen();
            }
            (e.meta.state, moved)
        })
    }

    async fn join(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<JoinOutcome> {
        self.with_event(event, |e| e.join(visitor.as_str(), now_ms, rejoin_grace_ms))
    }

    async fn heartbeat(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_grace_ms: u64,
    ) -> StoreResult<Heartbeat> {
        self.with_event(event, |e| {
            e.heartbeat(visitor.as_str(), now_ms, rejoin_grace_ms)
        })
    }

    async fn position(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Position> {
        self.with_event(event, |e| {
            let queue_number = e.numbers.get(visitor.as_str()).copied();
            Position {
                queue_number,
                cursor: e.cursor,
                state: e.meta.state,
                admitted: e.admissions.contains_key(visitor.as_str()),
                ahead: e.ahead(queue_number),
            }
        })
    }

    async fn leave(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Left> {
        self.with_event(event, |e| e.leave(visitor.as_str()))
    }

    async fn begin_open(&self, event: &EventId) -> StoreResult<u64> {
        self.with_event(event, |e| {
            if e.meta.state != EventState::Prequeue {
                return 0;
            }
            e.meta.state = EventState::Opening;
            e.bump_gen();
            let n = e.pre.len() as u64;
            e.shuffle_next = e.counter;
            e.drawn = Some((e.counter + 1, n));
            e.counter += n;
            n
        })
    }

    async fn open_chunk(&self, event: &EventId, max: u64) -> StoreResult<u64> {
        self.with_event(event, |e| {
            let mut done = 0;
            while done < max {
                let Some((_, v)) = e.pre.pop_first() else {
                    break;
                };
                e.pre_set.remove(&v);
                e.shuffle_next += 1;
                e.by_number.insert(e.shuffle_next, v.clone());
                e.numbers.insert(v, e.shuffle_next);
                done += 1;
            }
            if e.pre.is_empty() && e.meta.state == EventState::Opening {
                e.meta.state = EventState::Open;
            }
            e.pre.len() as u64
        })
    }

    async fn draw(&self, event: &EventId) -> StoreResult<Draw> {
        self.with_event(event, |e| Draw {
            seed: e.seed.clone(),
            state: e.meta.state,
            numbered: e.drawn,
        })
    }

    async fn numbered(
        &self,
        event: &EventId,
        first: u64,
        count: u64,
    ) -> StoreResult<Vec<Option<String>>> {
        self.with_event(event, |e| {
            (first..first + count.min(NUMBERED_CHUNK))
                .map(|k| e.by_number.get(&k).cloned())
                .collect()
        })
    }

    async fn advance_cursor(&self, event: &EventId, p: &AdvanceParams) -> StoreResult<Advance> {
        self.with_event(event, |e| e.advance(p))
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
        self.with_event(event, |e| {
            e.claim(visitor.as_str(), now_ms, terms, new_jti, rejoin_grace_ms)
        })
    }

    async fn figures(
        &self,
        event: &EventId,
        now_ms: i64,
        silence_ms: u64,
    ) -> StoreResult<Option<Figures>> {
        let now = now_ms.div_euclid(1000);
        self.with_inner(|i| {
            i.events.get_mut(event).map(|e| Figures {
                cursor: e.cursor,
                last_number: e.counter,
                prequeued: e.pre.len() as u64,
                active: e.live_count(now),
                admitted_total: e.admitted_total,
                max_active_seen: e.max_active_seen,
                silent: e.silent(now_ms, silence_ms),
                returning: e.back.len() as u64,
                left: e.vacated.len() as u64,
                skipped_total: e.skipped_total,
                ended_total: e.ended_total,
                ready_window: e.window,
                state_gen: e.gen,
                broadcast: e.broadcast.clone(),
                mode: e.mode,
                phases: e.phases,
                meta: e.meta.clone(),
            })
        })
    }

    async fn end_session(
        &self,
        event: &EventId,
        session: &SessionRef,
        now: i64,
    ) -> StoreResult<SessionEnd> {
        self.with_event(event, |e| e.end_session(session, now))
    }

    async fn audit_append(&self, event: &EventId, entry: &AuditEntry) -> StoreResult<()> {
        self.with_event(event, |e| {
            e.audit.push_back(entry.clone());
            while e.audit.len() > AUDIT_KEEP {
                e.audit.pop_front();
            }
        })
    }

    async fn audit(&self, event: &EventId, limit: usize) -> StoreResult<Vec<AuditEntry>> {
        self.with_event(event, |e| {
            let skip = e.audit.len().saturating_sub(limit);
            e.audit.iter().skip(skip).cloned().collect()
        })
    }

    async fn rules(&self, event: &EventId) -> StoreResult<Vec<AddressRule>> {
        self.with_event(event, |e| e.rules.values().cloned().collect())
    }

    async fn put_rule(
        &self,
        event: &EventId,
        rule: &AddressRule,
        max: usize,
    ) -> StoreResult<super::RuleAdded> {
        self.with_event(event, |e| {
            if let Some(same) = e.rules.values().find(|r| r.cidr == rule.cidr) {
                return super::RuleAdded::SameRange(same.clone());
            }
            if e.rules.len() >= max {
                return super::RuleAdded::Full;
            }
            e.rules.insert(rule.id.clone(), rule.clone());
            super::RuleAdded::Added
        })
    }

    async fn delete_rule(&self, event: &EventId, id: &str) -> StoreResult<Option<AddressRule>> {
        self.with_event(event, |e| e.rules.remove(id))
    }

    async fn shadow_join(&self, event: &EventId, entry: &ShadowEntry) -> StoreResult<ShadowEntry> {
        self.with_event(event, |e| {
            if let Some(old) = e.shadow.get(&entry.visitor) {
                return old.clone();
            }
            e.shadow_seq += 1;
            let new = ShadowEntry {
                shadow_number: e.shadow_seq,
                behind: e.counter + e.pre.len() as u64,
                ..entry.clone()
            };
            e.shadow.insert(new.visitor.clone(), new.clone());
            new
        })
    }

    async fn shadow_entry(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>> {
        self.with_event(event, |e| e.shadow.get(visitor.as_str()).cloned())
    }

    async fn shadow_list(&self, event: &EventId, limit: usize) -> StoreResult<Vec<ShadowEntry>> {
        self.with_event(event, |e| {
            let mut all: Vec<ShadowEntry> = e.shadow.values().cloned().collect();
            all.sort_by_key(|s| s.shadow_number);
            all.truncate(limit);
            all
        })
    }

    async fn shadow_remove(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Option<ShadowEntry>> {
        self.with_event(event, |e| e.shadow.remove(visitor.as_str()))
    }

    async fn report_append(&self, event: &EventId, sample: &ReportSample) -> StoreResult<()> {
        self.with_event(event, |e| {
            e.report.push_back(sample.clone());
            while e.report.len() > REPORT_KEEP {
                e.report.pop_front();
            }
        })
    }

    async fn report_samples(&self, event: &EventId) -> StoreResult<Vec<ReportSample>> {
        self.with_event(event, |e| e.report.iter().cloned().collect())
    }

    async fn set_counter(&self, event: &EventId, value: u64) -> StoreResult<()> {
        self.with_event(event, |e| {
            e.counter = value;
            e.cursor = e.cursor.min(value);
        })
    }

    async fn status_throttle(
        &self,
        event: &EventId,
        now_ms: i64,
        throttle_ms: u64,
    ) -> StoreResult<bool> {
        self.with_inner(|i| {
            let until = i.throttle.entry(event.clone()).or_insert(i64::MIN);
            if *until > now_ms {
                return false;
            }
            *until = now_ms.saturating_add(throttle_ms.max(1) as i64);
            true
        })
    }

    async fn status_transition(&self, event: &EventId, state: &str, gen: u64) -> StoreResult<bool> {
        self.with_inner(|i| match i.latch.get(event) {
            Some((top, _)) if *top >= gen => false,
            _ => {
                i.latch.insert(event.clone(), (gen, state.to_owned()));
                true
            }
        })
    }

    async fn try_lock(&self, key: &str, token: &str, ttl_ms: u64) -> StoreResult<bool> {
        self.with_inner(|i| {
            let now = Instant::now();
            match i.locks.get(key) {
                Some((_, until)) if *until > now => false,
                _ => {
                    let until = now + Duration::from_millis(ttl_ms);
                    i.locks.insert(key.to_owned(), (token.to_owned(), until));
                    true
                }
            }
        })
    }

    async fn renew_lock(&self, key: &str, token: &str, ttl_ms: u64) -> StoreResult<bool> {
        self.with_inner(|i| match i.locks.get_mut(key) {
            Some((t, until)) if t == token => {
                *until = Instant::now() + Duration::from_millis(ttl_ms);
                true
            }
            _ => false,
        })
    }

    async fn release_lock(&self, key: &str, token: &str) -> StoreResult<bool> {
        self.with_inner(|i| match i.locks.get(key) {
            Some((t, _)) if t == token => {
                i.locks.remove(key);
                true
            }
            _ => false,
        })
    }

    fn access(&self) -> Option<&dyn crate::store::access::AccessStore> {
        Some(self)
    }
}
