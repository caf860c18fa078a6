//! Brute-force limit of access codes (issue 14 item 1): refused codes are counted per client
//! address (IPv6 by /64, `ratelimit::rate_key`) and per visitor identity, each in a `governor`
//! keyed limiter (the crate the fan limits use). A key that has spent its allowance is refused
//! before any store call until the limiter lets it try again. Only refusals cost allowance, so
//! fans behind one NAT who type their codes right are never slowed. Per node (DECISIONS.md:
//! "per-node limits are per node: say so").

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

/// Refused codes a key may make in a burst; the refusal after them starts the key's wait
/// (answered 429 `code-attempts-limited` before any store call).
pub const FAILURE_BURST: u32 = 10;

/// Seconds per refused code regained after the burst (one per 6 s: 10 a minute).
pub const FAILURE_PERIOD_SECS: u64 = 6;

/// A limiter key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FailKey {
    /// Client address (IPv6 by /64).
    Addr(IpAddr),
    /// `{event}/{identity}` of a verified identity.
    Visitor(String),
}

/// The per-node limiter of refused codes.
#[derive(Debug)]
pub struct CodeLimiter {
    limiter: DefaultKeyedRateLimiter<FailKey>,
    /// Keys whose allowance is spent, with the instant they may try again.
    blocked: std::sync::Mutex<std::collections::HashMap<FailKey, std::time::Instant>>,
}

impl Default for CodeLimiter {
    fn default() -> Self {
        Self::new(FAILURE_BURST, Duration::from_secs(FAILURE_PERIOD_SECS))
    }
}

impl CodeLimiter {
    /// `burst` refusals per key, then one more per `period`.
    pub fn new(burst: u32, period: Duration) -> Self {
        let quota = Quota::with_period(period)
            .expect("period > 0")
            .allow_burst(NonZeroU32::new(burst.max(1)).expect("burst > 0"));
        Self {
            limiter: RateLimiter::keyed(quota),
            blocked: Default::default(),
        }
    }

    /// Seconds to wait when any of `keys` is blocked now; `None` when all may try.
    pub fn wait_secs(&self, keys: &[FailKey]) -> Option<u64> {
        let now = std::time::Instant::now();
        let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
        blocked.retain(|_, until| *until > now);
        keys.iter()
            .filter_map(|k| blocked.get(k))
            .map(|until| until.duration_since(now).as_secs().max(1))
            .max()
    }

    /// Counts one refused code against each of `keys`; a key past its allowance is blocked.
    pub fn failed(&self, keys: &[FailKey]) {
        let clock = DefaultClock::default();
        for k in keys {
            if let Err(not_until) = self.limiter.check_key(k) {
                let wait = not_until.wait_time_from(clock.now());
                let until = std::time::Instant::now() + wait;
                let mut blocked = self.blocked.lock().unwrap_or_else(|p| p.into_inner());
                blocked.insert(k.clone(), until);
            }
        }
    }

    /// Drops keys whose allowance is whole again (called with the fan limiters' upkeep).
    pub fn retain_recent(&self) {
        self.limiter.retain_recent();
    }
}
