//! In-memory queue store, the embedded single-node default. Every operation is one critical
//! section of one `std::sync::Mutex` (never held across an `.await`), which makes each multi-key
//! change atomic exactly like the Redis backend's Lua scripts.

use super::{Advance, QueueStore, StoreError, StoreResult};
use crate::domain::{
    Admission, ClaimOutcome, EventId, EventMeta, EventState, Figures, JoinOutcome, Position,
    VisitorId,
};
use async_trait::async_trait;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Ev {
    meta: EventMeta,
    numbers: HashMap<String, u64>,
    pre: Vec<String>,
    pre_set: HashSet<String>,
    shuffle_next: u64,
    counter: u64,
    cursor: u64,
    admissions: HashMap<String, Admission>,
    /// Member (visitor id, or `inv:{number}` for an unclaimed invitation) → expiry, epoch secs.
    live: HashMap<String, i64>,
    admitted_total: u64,
    max_active_seen: u64,
}

impl Ev {
    fn new(meta: EventMeta) -> Self {
        Self {
            meta,
            numbers: HashMap::new(),
            pre: Vec::new(),
            pre_set: HashSet::new(),
            shuffle_next: 0,
            counter: 0,
            cursor: 0,
            admissions: HashMap::new(),
            live: HashMap::new(),
            admitted_total: 0,
            max_active_seen: 0,
        }
    }
    fn live_count(&mut self, now: i64) -> u64 {
        self.live.retain(|_, exp| *exp > now);
        self.live.len() as u64
    }
}

#[derive(Debug, Default)]
struct Inner {
    events: HashMap<EventId, Ev>,
    locks: HashMap<String, (String, Instant)>,
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

    async fn transition(
        &self,
        event: &EventId,
        from: &[EventState],
        to: EventState,
    ) -> StoreResult<EventState> {
        self.with_event(event, |e| {
            if from.contains(&e.meta.state) {
                e.meta.state = to;
            }
            e.meta.state
        })
    }

    async fn join(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<JoinOutcome> {
        self.with_event(event, |e| {
            let state = e.meta.state;
            let v = visitor.as_str();
            if let Some(n) = e.numbers.get(v) {
                return JoinOutcome {
                    queue_number: Some(*n),
                    state,
                };
            }
            let queue_number = match state {
                EventState::Closed | EventState::SoldOut => None,
                _ if e.pre_set.contains(v) => None,
                EventState::Prequeue => {
                    e.pre_set.insert(v.to_owned());
                    e.pre.push(v.to_owned());
                    None
                }
                EventState::Opening | EventState::Open | EventState::Paused => {
                    e.counter += 1;
                    e.numbers.insert(v.to_owned(), e.counter);
                    Some(e.counter)
                }
            };
            JoinOutcome {
                queue_number,
                state,
            }
        })
    }

    async fn position(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Position> {
        self.with_event(event, |e| Position {
            queue_number: e.numbers.get(visitor.as_str()).copied(),
            cursor: e.cursor,
            state: e.meta.state,
            admitted: e.admissions.contains_key(visitor.as_str()),
        })
    }

    async fn begin_open(&self, event: &EventId) -> StoreResult<u64> {
        self.with_event(event, |e| {
            if e.meta.state != EventState::Prequeue {
                return 0;
            }
            e.meta.state = EventState::Opening;
            let n = e.pre.len() as u64;
            e.shuffle_next = e.counter;
            e.counter += n;
            n
        })
    }

    async fn open_chunk(&self, event: &EventId, max: u64, seed: u64) -> StoreResult<u64> {
        self.with_event(event, |e| {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut done = 0;
            while done < max && !e.pre.is_empty() {
                let i = rng.gen_range(0..e.pre.len());
                let v = e.pre.swap_remove(i);
                e.pre_set.remove(&v);
                e.shuffle_next += 1;
                e.numbers.insert(v, e.shuffle_next);
                done += 1;
            }
            if e.pre.is_empty() && e.meta.state == EventState::Opening {
                e.meta.state = EventState::Open;
            }
            e.pre.len() as u64
        })
    }

    async fn advance_cursor(
        &self,
        event: &EventId,
        n: u64,
        max_active: u64,
        now: i64,
        invite_grace_secs: u64,
    ) -> StoreResult<Advance> {
        self.with_event(event, |e| {
            let start = e.cursor;
            if e.meta.state != EventState::Open {
                return Advance {
                    cursor: start,
                    moved: 0,
                };
            }
            let free = max_active.saturating_sub(e.live_count(now));
            let target = start.saturating_add(n.min(free)).min(e.counter).max(start);
            let until = now + invite_grace_secs as i64;
            for k in start + 1..=target {
                e.live.insert(format!("inv:{k}"), until);
            }
            e.cursor = target;
            Advance {
                cursor: target,
                moved: target - start,
            }
        })
    }

    async fn claim(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now: i64,
        ttl_secs: u64,
        new_jti: &str,
    ) -> StoreResult<ClaimOutcome> {
        self.with_event(event, |e| {
            let v = visitor.as_str();
            if let Some(a) = e.admissions.get(v) {
                return ClaimOutcome::Admitted(a.clone());
            }
            let state = e.meta.state;
            if matches!(
                state,
                EventState::Paused | EventState::Closed | EventState::SoldOut
            ) {
                return ClaimOutcome::Refused(state);
            }
            let number = e.numbers.get(v).copied();
            match number {
                Some(q) if q <= e.cursor => {
                    let a = Admission {
                        jti: new_jti.to_owned(),
                        iat: now,
                        exp: now + ttl_secs as i64,
                    };
                    e.admissions.insert(v.to_owned(), a.clone());
                    e.live.remove(&format!("inv:{q}"));
                    e.live.insert(v.to_owned(), a.exp);
                    e.admitted_total += 1;
                    let active = e.live_count(now);
                    e.max_active_seen = e.max_active_seen.max(active);
                    ClaimOutcome::Admitted(a)
                }
                _ => ClaimOutcome::NotYourTurn {
                    queue_number: number,
                    cursor: e.cursor,
                },
            }
        })
    }

    async fn figures(&self, event: &EventId, now: i64) -> StoreResult<Option<Figures>> {
        self.with_inner(|i| {
            i.events.get_mut(event).map(|e| Figures {
                cursor: e.cursor,
                last_number: e.counter,
                prequeued: e.pre.len() as u64,
                active: e.live_count(now),
                admitted_total: e.admitted_total,
                max_active_seen: e.max_active_seen,
                meta: e.meta.clone(),
            })
        })
    }

    async fn set_counter(&self, event: &EventId, value: u64) -> StoreResult<()> {
        self.with_event(event, |e| {
            e.counter = value;
            e.cursor = e.cursor.min(value);
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
}
