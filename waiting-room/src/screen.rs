//! This node's side of the quiet lane (issue 15 item 2): the events' address rules cached for a
//! second (a join pays no store call for them; a change made on this node is seen at once,
//! on another node within [`RULES_TTL_MS`]), proof-of-work failures counted per client address
//! (IPv6 by /64, per node like the rate limits), the shadow visitors' id tag, and the per-rule
//! metrics. The decision itself is [`Screen::verdict`]; the store keeps the shadow line.

use crate::domain::EventId;
use crate::lanes::{rule_for, AddressRule, RuleAction, ShadowTag, POW_FAILURES};
use crate::ratelimit::rate_key;
use crate::store::{QueueStore, StoreResult};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock};

/// How long a node serves its copy of an event's rules, **ms**.
pub const RULES_TTL_MS: i64 = 1_000;

/// Most addresses whose proof-of-work failures are tracked at once (older ones are dropped).
const FAILURES_KEEP: usize = 100_000;

/// What a new join from an address gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No rule: the event's proof of work (if any), then a place in the line.
    Normal,
    /// `403 address-blocked` (rule id).
    Block(String),
    /// No proof of work asked (rule id).
    Bypass(String),
    /// A proof of work of at least this many bits (rule id).
    Challenge(String, u32),
    /// A place in the shadow line, after the same proof-of-work check as a fan (reason: a rule
    /// id or `pow-failures`).
    Shadow(String),
}

/// Default difficulty of a `challenge` rule without `pow_bits`, leading zero bits.
pub const CHALLENGE_DEFAULT_BITS: u32 = 16;

type Cached = (Arc<Vec<AddressRule>>, i64);

/// The node's screening state; one per process.
#[derive(Debug)]
pub struct Screen {
    tag: ShadowTag,
    rules: RwLock<HashMap<EventId, Cached>>,
    failures: Mutex<HashMap<IpAddr, (u32, i64)>>,
    threshold: u32,
    window_ms: i64,
}

impl Screen {
    /// A screen whose shadow ids are tagged under `key`; `threshold` proof-of-work failures
    /// within `window_secs` flag an address (0 = never).
    pub fn new(key: &[u8], threshold: u32, window_secs: u64) -> Self {
        Self {
            tag: ShadowTag::new(key),
            rules: RwLock::default(),
            failures: Mutex::default(),
            threshold,
            window_ms: (window_secs as i64).saturating_mul(1000),
        }
    }

    /// The shadow visitors' id tag.
    pub fn tag(&self) -> &ShadowTag {
        &self.tag
    }

    /// The event's rules, from this node's copy when it is younger than [`RULES_TTL_MS`].
    pub async fn rules(
        &self,
        store: &dyn QueueStore,
        event: &EventId,
        now_ms: i64,
    ) -> StoreResult<Arc<Vec<AddressRule>>> {
        let cached = self.rules.read().ok().and_then(|m| m.get(event).cloned());
        if let Some((rules, at)) = cached {
            if (0..RULES_TTL_MS).contains(&(now_ms - at)) {
                return Ok(rules);
            }
        }
        let fresh = Arc::new(store.rules(event).await?);
        if let Ok(mut m) = self.rules.write() {
            m.insert(event.clone(), (fresh.clone(), now_ms));
        }
        Ok(fresh)
    }

    /// Drops this node's copy of the event's rules (after a change made here).
    pub fn forget_rules(&self, event: &EventId) {
        if let Ok(mut m) = self.rules.write() {
            m.remove(event);
        }
    }

    /// Counts a failed proof of work from `ip`; returns the failures inside the window.
    pub fn pow_failed(&self, ip: IpAddr, now_ms: i64) -> u32 {
        let Ok(mut m) = self.failures.lock() else {
            return 0;
        };
        if m.len() >= FAILURES_KEEP {
            let window = self.window_ms;
            m.retain(|_, (_, since)| now_ms - *since < window);
        }
        let e = m.entry(rate_key(ip)).or_insert((0, now_ms));
        if now_ms - e.1 >= self.window_ms {
            *e = (0, now_ms);
        }
        e.0 = e.0.saturating_add(1);
        e.0
    }

    /// Whether `ip` failed the proof of work `threshold` times within the window.
    pub fn flagged(&self, ip: IpAddr, now_ms: i64) -> bool {
        if self.threshold == 0 {
            return false;
        }
        self.failures
            .lock()
            .ok()
            .and_then(|m| m.get(&rate_key(ip)).copied())
            .is_some_and(|(n, since)| n >= self.threshold && now_ms - since < self.window_ms)
    }

    /// What a new join from `ip` gets: the most specific rule's action (counted in
    /// `wr_address_rule_hits_total`), else the shadow line when the address is flagged for
    /// proof-of-work failures, else normal.
    pub fn verdict(
        &self,
        event: &EventId,
        rules: &[AddressRule],
        ip: IpAddr,
        now_ms: i64,
    ) -> Verdict {
        if let Some(r) = rule_for(rules, ip) {
            rule_hit(event, &r.id, r.action);
            let id = r.id.clone();
            return match r.action {
                RuleAction::Block => Verdict::Block(id),
                RuleAction::Bypass => Verdict::Bypass(id),
                RuleAction::Challenge => {
                    Verdict::Challenge(id, r.pow_bits.unwrap_or(CHALLENGE_DEFAULT_BITS))
                }
                RuleAction::Shadow => Verdict::Shadow(id),
            };
        }
        if self.flagged(ip, now_ms) {
            return Verdict::Shadow(POW_FAILURES.to_owned());
        }
        Verdict::Normal
    }
}

/// Counts one join that met rule `rule` (`wr_address_rule_hits_total{event, rule, action}`).
pub fn rule_hit(event: &EventId, rule: &str, action: RuleAction) {
    metrics::counter!(
        "wr_address_rule_hits_total",
        "event" => event.as_str().to_owned(),
        "rule" => rule.to_owned(),
        "action" => action.as_str()
    )
    .increment(1);
}

/// Counts one visitor put in the shadow line (`wr_shadow_joins_total{event, reason}`, reason =
/// a rule id or `pow-failures`).
pub fn shadow_joined(event: &EventId, reason: &str) {
    metrics::counter!(
        "wr_shadow_joins_total",
        "event" => event.as_str().to_owned(),
        "reason" => reason.to_owned()
    )
    .increment(1);
}
