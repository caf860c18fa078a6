//! The load generator's own lateness: how late a timer of the fans' runtime fires. Every fan is
//! a task of one runtime on the machine that also runs the services and the database; an answer
//! that has arrived waits for that fan's task to be polled again before its latency is taken, so
//! each latency the fans report includes the generator's own backlog. A probe task sleeps
//! [`TICK`] over and over on the same runtime and records how much later than asked it woke:
//! read over the rush, it says how much of a reported p99 the generator may have added (a fan's
//! call waits at least once, for its answer's bytes, often several times for a large body).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The probe's sleep.
pub const TICK: Duration = Duration::from_millis(10);

/// `rush --generator-nice`'s default: the fans' runtime threads at nice −10, the services'
/// threads and the database's processes at their own (0). On this project's 2-CPU rehearsal
/// machine the fans' runtime got about half a CPU beside PostgreSQL and the services at equal
/// priority, and its 10 ms timer woke 224 ms late at the 99th percentile during the seed rush
/// (r2): a figure of the generator, which each fan's latency then included. Fans' browsers run
/// on machines of their own; at a higher priority the generator's own work (about half a CPU)
/// runs when it is ready, and the services and the database share the rest as before.
pub const GENERATOR_NICE: i32 = -10;

/// How setting the fans' threads' priority went: `Ok(nice)`, or the first failure.
static PRIORITY: Mutex<Option<Result<i32, String>>> = Mutex::new(None);

/// Sets the calling thread's nice value to `nice` (Linux: `setpriority(PRIO_PROCESS, tid)`
/// sets one thread's). For a runtime's `on_thread_start`; a failure is kept for [`priority`]
/// (the run goes on at the thread's priority as it was).
pub fn set_this_thread(nice: i32) {
    let tid = rustix::thread::gettid();
    let outcome = rustix::process::setpriority_process(Some(tid), nice)
        .map(|()| nice)
        .map_err(|e| format!("setpriority({nice}): {e}"));
    let mut kept = PRIORITY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if kept.is_none() || outcome.is_err() && kept.as_ref().is_some_and(Result::is_ok) {
        *kept = Some(outcome);
    }
}

/// The nice value the fans' threads run at, or why it could not be set; `None` when never set.
pub fn priority() -> Option<Result<i32, String>> {
    PRIORITY
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// The running probe ([`spawn`]).
pub struct Probe {
    /// (run time of the wake-up, ms since the run's origin; lateness, µs).
    samples: Arc<Mutex<Vec<(u64, u32)>>>,
    task: tokio::task::JoinHandle<()>,
}

/// Lateness over a window, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lateness {
    /// Wake-ups in the window.
    pub samples: usize,
    /// Median lateness, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
}

/// Starts the probe on the current runtime (the fans').
pub fn spawn() -> Probe {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let out = samples.clone();
    let task = tokio::spawn(async move {
        loop {
            let asked = Instant::now();
            tokio::time::sleep(TICK).await;
            let late = asked.elapsed().saturating_sub(TICK);
            let at = crate::timeline::now_ms();
            let us = u32::try_from(late.as_micros()).unwrap_or(u32::MAX);
            out.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((at, us));
        }
    });
    Probe { samples, task }
}

impl Probe {
    /// Stops the probe; its lateness over `[from_ms, to_ms]` of run time (`None`: the whole
    /// run), `None` without a sample there.
    pub fn finish(self, window: Option<(u64, u64)>) -> Option<Lateness> {
        self.task.abort();
        let samples = self
            .samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (from, to) = window.unwrap_or((0, u64::MAX));
        of(samples
            .iter()
            .filter(|(at, _)| (from..=to).contains(at))
            .map(|(_, us)| *us)
            .collect())
    }
}

/// Quantiles of lateness samples (µs); `None` when empty.
fn of(mut us: Vec<u32>) -> Option<Lateness> {
    if us.is_empty() {
        return None;
    }
    us.sort_unstable();
    let at = |q: f64| f64::from(us[((us.len() - 1) as f64 * q).round() as usize]) / 1000.0;
    Some(Lateness {
        samples: us.len(),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_read_from_the_sorted_samples() {
        let us: Vec<u32> = (1..=100).rev().map(|ms| ms * 1000).collect();
        let l = of(us).unwrap();
        assert_eq!(
            (l.samples, l.p50_ms, l.p99_ms, l.max_ms),
            (100, 51.0, 99.0, 100.0)
        );
        assert_eq!(of(Vec::new()), None);
    }
}
