//! The circuit breaker in front of one Redis server: once the server stops answering, requests
//! get their 503 at once instead of each waiting out the store timeout (README "Store outages":
//! fast 503 with `Retry-After`), and one probe at a time finds out when it answers again.
//!
//! - **Closed**: every call goes through. [`TRIP_AFTER`] failures in a row (connection refused
//!   or dropped, I/O error, timeout, or a call abandoned after at least half the timeout) open it.
//! - **Open** for a cool-off ([`COOL_OFF_MIN`], doubling per failed probe up to [`COOL_OFF_MAX`]):
//!   every call fails at once with an I/O error the store maps to 503.
//! - After the cool-off **one** call is let through as the probe while the others still fail at
//!   once; its success closes the breaker, its failure opens it for the next cool-off.
//!
//! A reply from the server, even an error reply (`OOM`, a script error), counts as a success:
//! the server answers. Only the single-server connection has one; a Redis Cluster's client
//! routes per node, and a breaker over the whole cluster would refuse the healthy masters' slots.
//!
//! Why not the `failsafe` crate: its half-open state lets every call through until one fails,
//! so with a hung server every call in that window waits the whole timeout again: the slow 503s
//! this exists to remove.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures in a row that open the breaker.
pub const TRIP_AFTER: u32 = 3;
/// First cool-off after the breaker opens.
pub const COOL_OFF_MIN: Duration = Duration::from_millis(250);
/// Longest cool-off (reached after a few failed probes).
pub const COOL_OFF_MAX: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Failures in a row so far.
    Closed(u32),
    /// Refusing until the instant; the next cool-off if the probe fails.
    Open { until: Instant, cool_off: Duration },
    /// One probe in flight; the cool-off it failed from.
    Probing { cool_off: Duration },
}

/// What [`Breaker::admit`] decided for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// A normal call (the breaker is closed).
    Call,
    /// The one probe call: its outcome decides whether the breaker closes.
    Probe,
    /// Refused at once: the server is not answering.
    Refused,
}

/// The breaker's state; shared by every clone of one connection.
#[derive(Debug)]
pub struct Breaker {
    state: Mutex<State>,
    /// `state` is `Closed(0)`: every Redis call passes here, and while the server answers
    /// neither `admit` nor `record` takes the lock.
    clean: AtomicBool,
}

impl Default for Breaker {
    fn default() -> Self {
        metrics::gauge!("wr_store_breaker_open").set(0.0);
        Self {
            state: Mutex::new(State::Closed(0)),
            clean: AtomicBool::new(true),
        }
    }
}

impl Breaker {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a plain value: a panic elsewhere cannot leave it half-written.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a call starting at `now` may go to the server.
    pub fn admit(&self, now: Instant) -> Admit {
        if self.clean.load(Ordering::Acquire) {
            return Admit::Call;
        }
        let mut s = self.state();
        match *s {
            State::Closed(_) => Admit::Call,
            State::Open { until, cool_off } if now >= until => {
                *s = State::Probing { cool_off };
                Admit::Probe
            }
            State::Open { .. } | State::Probing { .. } => {
                metrics::counter!("wr_store_breaker_refused_total").increment(1);
                Admit::Refused
            }
        }
    }

    /// Records the outcome at `now` of a call `admit` let through: `failed` when the server did
    /// not answer (see the module doc).
    pub fn record(&self, admitted: Admit, failed: bool, now: Instant) {
        if !failed && self.clean.load(Ordering::Acquire) {
            return;
        }
        let mut s = self.state();
        let next = match (*s, admitted, failed) {
            (_, Admit::Refused, _) => return,
            (State::Probing { .. }, Admit::Probe, false) | (State::Closed(_), _, false) => {
                State::Closed(0)
            }
            (State::Probing { cool_off }, Admit::Probe, true) => {
                let cool_off = (cool_off * 2).min(COOL_OFF_MAX);
                State::Open {
                    until: now + cool_off,
                    cool_off,
                }
            }
            (State::Closed(n), _, true) if n + 1 >= TRIP_AFTER => State::Open {
                until: now + COOL_OFF_MIN,
                cool_off: COOL_OFF_MIN,
            },
            (State::Closed(n), _, true) => State::Closed(n + 1),
            // A normal call that ends after the breaker opened (or while a probe runs) changes
            // nothing: the probe decides.
            (State::Open { .. } | State::Probing { .. }, _, _) => return,
        };
        let was_closed = matches!(*s, State::Closed(_));
        *s = next;
        self.clean
            .store(next == State::Closed(0), Ordering::Release);
        drop(s);
        let closed = matches!(next, State::Closed(_));
        if was_closed && !closed {
            tracing::warn!(
                "queue store not answering: requests get 503 at once until a probe succeeds"
            );
            metrics::counter!("wr_store_breaker_opened_total").increment(1);
        }
        if was_closed != closed {
            metrics::gauge!("wr_store_breaker_open").set(if closed { 0.0 } else { 1.0 });
        }
    }

    /// Whether calls are refused now (open or probing).
    #[cfg(test)]
    pub fn is_open(&self) -> bool {
        !matches!(*self.state(), State::Closed(_))
    }
}

/// Whether `e` means the server did not answer (as opposed to an error reply it sent).
pub fn unanswered(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn opens_after_failures_in_a_row_and_not_before() {
        let (b, t0) = (Breaker::default(), Instant::now());
        for i in 0..TRIP_AFTER - 1 {
            assert_eq!(b.admit(at(t0, i.into())), Admit::Call);
            b.record(Admit::Call, true, at(t0, i.into()));
        }
        // A success between failures starts the count again.
        b.record(Admit::Call, false, t0);
        for _ in 0..TRIP_AFTER - 1 {
            b.record(Admit::Call, true, t0);
        }
        assert!(!b.is_open());
        b.record(Admit::Call, true, t0);
        assert!(b.is_open());
        assert_eq!(b.admit(at(t0, 1)), Admit::Refused);
    }

    #[test]
    fn one_probe_after_the_cool_off_and_its_outcome_decides() {
        let (b, t0) = (Breaker::default(), Instant::now());
        for _ in 0..TRIP_AFTER {
            b.record(Admit::Call, true, t0);
        }
        let cool = COOL_OFF_MIN.as_millis() as u64;
        assert_eq!(b.admit(at(t0, cool - 1)), Admit::Refused);
        assert_eq!(b.admit(at(t0, cool)), Admit::Probe);
        // While the probe runs, every other call is refused at once.
        assert_eq!(b.admit(at(t0, cool + 1)), Admit::Refused);
        // A normal call admitted before the trip ending now changes nothing.
        b.record(Admit::Call, false, at(t0, cool + 2));
        assert!(b.is_open());
        // The probe fails: open again for twice the cool-off.
        b.record(Admit::Probe, true, at(t0, cool + 10));
        assert_eq!(b.admit(at(t0, cool + 10 + 2 * cool - 1)), Admit::Refused);
        assert_eq!(b.admit(at(t0, cool + 10 + 2 * cool)), Admit::Probe);
        b.record(Admit::Probe, false, at(t0, cool + 10 + 2 * cool));
        assert!(!b.is_open());
        assert_eq!(b.admit(at(t0, cool * 10)), Admit::Call);
    }

    #[test]
    fn the_cool_off_stops_growing_at_its_maximum() {
        let (b, t0) = (Breaker::default(), Instant::now());
        for _ in 0..TRIP_AFTER {
            b.record(Admit::Call, true, t0);
        }
        let mut now = t0;
        for _ in 0..10 {
            now += COOL_OFF_MAX;
            assert_eq!(b.admit(now), Admit::Probe);
            b.record(Admit::Probe, true, now);
        }
        assert_eq!(
            b.admit(now + COOL_OFF_MAX - Duration::from_millis(1)),
            Admit::Refused
        );
        assert_eq!(b.admit(now + COOL_OFF_MAX), Admit::Probe);
    }
}
