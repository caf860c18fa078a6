//! Time as a parameter (STYLE.md rule 5): domain code takes `now` from a [`Clock`]; tests hold a
//! [`ManualClock`] and move it instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// A source of wall-clock time in **milliseconds since the Unix epoch**.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Current time, Unix epoch milliseconds.
    fn now_ms(&self) -> i64;
    /// Current time, whole Unix epoch seconds (rounded down).
    fn now_secs(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A clock that only moves when told to. Cloning shares the same instant.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// Starts at `start_ms` (Unix epoch milliseconds).
    pub fn new(start_ms: i64) -> Self {
        Self(Arc::new(AtomicI64::new(start_ms)))
    }
    /// Moves the clock forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
    /// Sets the clock to `ms` (Unix epoch milliseconds).
    pub fn set_ms(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Shared handle to a clock, as stored in service state.
pub type SharedClock = Arc<dyn Clock>;

/// This host's wall clock in **seconds** since the Unix epoch, with fractions: the value the
/// services export as `wr_clock_unix_seconds` / `bc_clock_unix_seconds` so an operator sees
/// each host's skew against the scraper's clock (case W11).
pub fn unix_now_secs_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(1_000);
        assert_eq!(c.now_ms(), 1_000);
        c.advance_ms(2_500);
        assert_eq!(c.now_ms(), 3_500);
        assert_eq!(c.now_secs(), 3);
        let shared = c.clone();
        shared.set_ms(10_000);
        assert_eq!(c.now_ms(), 10_000);
    }
}
