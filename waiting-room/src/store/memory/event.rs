//! One event's queue in memory and its rules, mirroring the Redis Lua scripts step for step
//! (join, heartbeat, advance, claim, session end). Called inside the store's one critical
//! section, so each method is atomic.

use super::live::Live;
use crate::domain::{
    Admission, AdmissionTerms, AdvanceParams, AuditEntry, ClaimOutcome, EventMeta, EventState,
    Heartbeat, JoinOutcome, Place, SessionEnd, SessionRef,
};
use crate::draw::{public_id, DrawSeed};
use crate::store::Advance;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

/// A skipped fan: skipped at (epoch ms), or back and waiting for the next tick.
#[derive(Debug, Clone, Copy)]
pub(super) enum Gone {
    Skipped(i64),
    Returning,
}

#[derive(Debug)]
pub(super) struct Ev {
    pub meta: EventMeta,
    pub numbers: HashMap<String, u64>,
    /// Number → visitor (the cursor looks fans up by number).
    pub by_number: HashMap<u64, String>,
    /// The pre-queue in draw order: (rank, public id) → visitor (`crate::draw`).
    pub pre: BTreeMap<(u64, String), String>,
    pub pre_set: HashSet<String>,
    /// The event's secret draw seed, created with it.
    pub seed: DrawSeed,
    /// Once opening began: first number of the pre-queue and how many fans it held.
    pub drawn: Option<(u64, u64)>,
    pub shuffle_next: u64,
    pub counter: u64,
    pub cursor: u64,
    pub admissions: HashMap<String, Admission>,
    pub jtis: HashMap<String, String>,
    /// Member (visitor id, or `inv:{number}` for an unclaimed invitation) → expiry, epoch secs.
    pub live: Live,
    /// Fans in the ready window above the cursor → last sign of life, epoch ms.
    pub hb: HashMap<String, i64>,
    pub gone: HashMap<String, Gone>,
    pub back: VecDeque<String>,
    /// Numbers above the cursor whose fans left the line (`QueueStore::leave`).
    pub vacated: BTreeSet<u64>,
    /// Highest number whose silence clock was started (entered the ready window).
    pub edge: u64,
    pub window: u64,
    pub admitted_total: u64,
    pub max_active_seen: u64,
    pub skipped_total: u64,
    pub ended_total: u64,
    pub audit: VecDeque<AuditEntry>,
    /// Sale-report samples, oldest first (at most `REPORT_KEEP`).
    pub report: VecDeque<crate::domain::ReportSample>,
    /// State generation (`Figures::state_gen`).
    pub gen: u64,
    /// Address rules by id (issue 15 item 2).
    pub rules: BTreeMap<String, crate::lanes::AddressRule>,
    /// The shadow line: visitor → entry, and its own counter (never `counter`).
    pub shadow: HashMap<String, crate::lanes::ShadowEntry>,
    pub shadow_seq: u64,
    /// The operator's broadcast message (`QueueStore::set_broadcast`).
    pub broadcast: Option<crate::broadcast::Broadcast>,
    /// How the line runs (`QueueStore::set_mode`).
    pub mode: crate::mode::QueueMode,
    /// The schedule and the last phase applied (`QueueStore::set_phases`).
    pub phases: Option<crate::phases::Phases>,
    pub phase_done: u8,
}

/// Wall-clock time in epoch **ms** (the store's own clock, like Redis `TIME`).
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Ev {
    /// A public state change: `gen = max(gen + 1, wall ms)` (bump_gen in lib.lua).
    pub fn bump_gen(&mut self) {
        self.gen = (self.gen + 1).max(wall_ms());
    }

    pub fn new(meta: EventMeta) -> Self {
        Self {
            meta,
            numbers: HashMap::new(),
            by_number: HashMap::new(),
            pre: BTreeMap::new(),
            pre_set: HashSet::new(),
            seed: DrawSeed::random(),
            drawn: None,
            shuffle_next: 0,
            counter: 0,
            cursor: 0,
            admissions: HashMap::new(),
            jtis: HashMap::new(),
            live: Live::default(),
            hb: HashMap::new(),
            gone: HashMap::new(),
            back: VecDeque::new(),
            vacated: BTreeSet::new(),
            edge: 0,
            window: 0,
            admitted_total: 0,
            max_active_seen: 0,
            skipped_total: 0,
            ended_total: 0,
            rules: BTreeMap::new(),
            shadow: HashMap::new(),
            shadow_seq: 0,
            broadcast: None,
            mode: crate::mode::QueueMode::Scheduled,
            phases: None,
            phase_done: 0,
            gen: wall_ms(),
            audit: VecDeque::new(),
            report: VecDeque::new(),
        }
    }

    pub fn live_count(&mut self, now: i64) -> u64 {
        self.live.count(now)
    }

    /// A skipped fan shows a sign of life: `None` when not skipped, else whether they are back
    /// in time (`Returning`) or too late (`Lost`).
    fn come_back(&mut self, v: &str, now_ms: i64, rejoin_ms: u64) -> Option<Place> {
        match self.gone.get(v).copied()? {
            Gone::Returning => Some(Place::Returning),
            Gone::Skipped(at) if now_ms - at <= rejoin_ms as i64 => {
                self.gone.insert(v.to_owned(), Gone::Returning);
                self.back.push_back(v.to_owned());
                Some(Place::Returning)
            }
            Gone::Skipped(_) => Some(Place::Lost),
        }
    }

    fn number(&mut self, v: &str, now_ms: i64) -> u64 {
        self.counter += 1;
        let c = self.counter;
        self.numbers.insert(v.to_owned(), c);
        self.by_number.insert(c, v.to_owned());
        if self.window > 0 && c <= self.cursor + self.window {
            self.hb.insert(v.to_owned(), now_ms);
            self.edge = self.edge.max(c);
        }
        c
    }

    pub fn join(&mut self, v: &str, now_ms: i64, rejoin_ms: u64) -> JoinOutcome {
        let state = self.meta.state;
        let open = matches!(
            state,
            EventState::Opening | EventState::Open | EventState::Paused
        );
        if let Some(n) = self.numbers.get(v).copied() {
            if self.come_back(v, now_ms, rejoin_ms) != Some(Place::Lost) {
                if let Some(seen) = self.hb.get_mut(v) {
                    *seen = now_ms;
                }
                return JoinOutcome {
                    queue_number: Some(n),
                    state,
                };
            }
            if !open {
                return JoinOutcome {
                    queue_number: Some(n),
                    state,
                };
            }
            // Too late: the old place is gone, a new one at the back.
            self.gone.remove(v);
            return JoinOutcome {
                queue_number: Some(self.number(v, now_ms)),
                state,
            };
        }
        let queue_number = match state {
            EventState::Closed | EventState::SoldOut => None,
            _ if self.pre_set.contains(v) => None,
            EventState::Prequeue => {
                self.pre_set.insert(v.to_owned());
                let p = public_id(v);
                self.pre.insert((self.seed.rank(&p), p), v.to_owned());
                None
            }
            _ => Some(self.number(v, now_ms)),
        };
        JoinOutcome {
            queue_number,
            state,
        }
    }

    /// People ahead of number `n` (`Position::ahead`): the vacated places between the cursor
    /// and `n` are a `BTreeSet` range, O(log n + k) for k places vacated ahead (all vacated
    /// places are above the cursor).
    pub fn ahead(&self, n: Option<u64>) -> Option<u64> {
        let between = match n {
            Some(n) if n > self.cursor + 1 => self.vacated.range(self.cursor + 1..n).count(),
            _ => 0,
        };
        crate::domain::Position::ahead_of(n, self.cursor, between as u64)
    }

    /// "Leave the line" (`QueueStore::leave`; mirrors `leave.lua`).
    pub fn leave(&mut self, v: &str) -> crate::domain::Left {
        use crate::domain::Left;
        match self.numbers.get(v).copied() {
            Some(n) if n > self.cursor => {
                self.numbers.remove(v);
                self.hb.remove(v);
                self.vacated.insert(n);
                Left::Vacated(n)
            }
            Some(_) => Left::NotWaiting,
            None if self.pre_set.remove(v) => {
                let p = public_id(v);
                self.pre.remove(&(self.seed.rank(&p), p));
                Left::Unqueued
            }
            None => Left::NotWaiting,
        }
    }

    pub fn heartbeat(&mut self, v: &str, now_ms: i64, rejoin_ms: u64) -> Heartbeat {
        let n = self.numbers.get(v).copied();
        let place = match n {
            None => Place::Unnumbered,
            Some(_) if self.admissions.contains_key(v) => Place::Admitted,
            Some(q) => match self.come_back(v, now_ms, rejoin_ms) {
                Some(p) => p,
                None if q <= self.cursor => Place::YourTurn,
                None => match self.hb.get_mut(v) {
                    Some(seen) => {
                        *seen = now_ms;
                        Place::Ready
                    }
                    None => Place::Waiting,
                },
            },
        };
        Heartbeat {
            queue_number: n,
            cursor: self.cursor,
            state: self.meta.state,
            place,
        }
    }

    pub fn advance(&mut self, p: &AdvanceParams) -> Advance {
        let start = self.cursor;
        let mut out = Advance {
            cursor: start,
            moved: 0,
            skipped: 0,
            returned: 0,
        };
        if self.meta.state != EventState::Open {
            return out;
        }
        let now = p.now_ms.div_euclid(1000);
        let until = now + p.invite_grace_secs as i64;
        let free = p.max_active.saturating_sub(self.live_count(now));
        let budget = p.n.min(free);
        while out.returned < budget {
            let Some(v) = self.back.pop_front() else {
                break;
            };
            self.gone.remove(&v);
            if let Some(q) = self.numbers.get(&v) {
                self.live.insert(format!("inv:{q}"), until);
            }
            out.returned += 1;
        }
        let dead_before = p.now_ms - p.liveness.silence_ms as i64;
        let mut scanned = 0;
        while out.returned + out.moved < budget
            && self.cursor < self.counter
            && scanned < p.liveness.scan_limit
        {
            self.cursor += 1;
            scanned += 1;
            let k = self.cursor;
            if self.vacated.remove(&k) {
                out.skipped += 1;
                continue;
            }
            let seen = self.by_number.get(&k).and_then(|v| self.hb.remove(v));
            match (self.by_number.get(&k), seen) {
                (Some(v), Some(s)) if s < dead_before => {
                    self.gone.insert(v.clone(), Gone::Skipped(p.now_ms));
                    out.skipped += 1;
                }
                _ => {
                    self.live.insert(format!("inv:{k}"), until);
                    out.moved += 1;
                }
            }
        }
        self.skipped_total += out.skipped;
        out.cursor = self.cursor;
        self.window = p.liveness.ready_window;
        let from = self.edge.max(self.cursor);
        let to = (self.cursor + self.window)
            .min(self.counter)
            .min(from + p.liveness.scan_limit);
        for k in from + 1..=to {
            if self.vacated.contains(&k) {
                continue;
            }
            if let Some(v) = self.by_number.get(&k) {
                self.hb.insert(v.clone(), p.now_ms);
            }
        }
        self.edge = self.edge.max(to);
        out
    }

    pub fn claim(
        &mut self,
        v: &str,
        now_ms: i64,
        terms: AdmissionTerms,
        jti: &str,
        rejoin_ms: u64,
    ) -> ClaimOutcome {
        if let Some(a) = self.admissions.get(v) {
            return ClaimOutcome::Admitted(a.clone());
        }
        let state = self.meta.state;
        if matches!(
            state,
            EventState::Paused | EventState::Closed | EventState::SoldOut
        ) {
            return ClaimOutcome::Refused(state);
        }
        let number = self.numbers.get(v).copied();
        let q = match number {
            Some(q) if q <= self.cursor => q,
            _ => {
                if let Some(seen) = self.hb.get_mut(v) {
                    *seen = now_ms;
                }
                return ClaimOutcome::NotYourTurn {
                    queue_number: number,
                    cursor: self.cursor,
                };
            }
        };
        match self.come_back(v, now_ms, rejoin_ms) {
            Some(Place::Lost) => return ClaimOutcome::Lost { queue_number: q },
            Some(_) => return ClaimOutcome::Returning { queue_number: q },
            None => {}
        }
        let now = now_ms.div_euclid(1000);
        // The fan's slot is its invitation; once that lapsed, only a free slot will do (W10).
        let invited = self
            .live
            .remove(&format!("inv:{q}"))
            .is_some_and(|e| e > now);
        if !invited && self.live_count(now) >= self.meta.max_active {
            self.gone.insert(v.to_owned(), Gone::Returning);
            self.back.push_back(v.to_owned());
            return ClaimOutcome::Returning { queue_number: q };
        }
        let a = Admission {
            jti: jti.to_owned(),
            iat: now,
            exp: now + terms.ttl_secs as i64,
        };
        self.admissions.insert(v.to_owned(), a.clone());
        self.jtis.insert(jti.to_owned(), v.to_owned());
        self.live
            .insert(v.to_owned(), a.exp + terms.slot_tail_secs as i64);
        self.admitted_total += 1;
        let active = self.live_count(now);
        self.max_active_seen = self.max_active_seen.max(active);
        ClaimOutcome::Admitted(a)
    }

    pub fn end_session(&mut self, s: &SessionRef, now: i64) -> SessionEnd {
        let v = match s {
            SessionRef::Jti(j) => match self.jtis.get(j) {
                Some(v) => v.clone(),
                None => return SessionEnd::Unknown,
            },
            SessionRef::Visitor(v) => v.clone(),
        };
        if !self.admissions.contains_key(&v) {
            return SessionEnd::Unknown;
        }
        match self.live.remove(&v) {
            Some(exp) if exp > now => {
                self.ended_total += 1;
                SessionEnd::Ended
            }
            _ => SessionEnd::AlreadyEnded,
        }
    }

    /// Fans in the ready window silent since before `now_ms - silence_ms`.
    pub fn silent(&self, now_ms: i64, silence_ms: u64) -> u64 {
        let dead_before = now_ms - silence_ms as i64;
        self.hb.values().filter(|s| **s < dead_before).count() as u64
    }
}
