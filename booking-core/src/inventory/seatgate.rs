//! One statement at a time per seat in this process: the named-seat holds sent to PostgreSQL
//! in one round trip ([`crate::inventory::onetrip`]) pass a gate per seat first. A hold whose
//! seats are all free of other attempts marks them and runs; one that asks for a seat another
//! attempt is running for waits here, in memory, for that attempt to end, and then reads the
//! seats again (a newcomer review: 50 hold requests for a seat another transaction kept
//! locked each took one of the holds' 8 connections and waited on the lock in the database,
//! for up to `hold_lock_wait_ms` each, so every other hold of the node waited out the pool's
//! 5 s acquire timeout, got 503, and tripped the outage gate). An attempt that ended on a lock
//! wait past the limit ([`Ended::LockWait`]) tells its waiters so: they answer the same 503 at
//! once instead of queueing for it one after another. On a hot show the waiters are the
//! attempt's losers: they read the seat held and are refused from that read, without a
//! statement that would have waited on the row's lock to lose.
//!
//! Across processes nothing changes: the guarded update decides, and another node's attempt
//! is waited for in the database, within the lock wait limit.
//!
//! Layer: inventory (imports nothing above it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

/// How an attempt ended, as its waiters learn it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Held, lost, refused or failed otherwise: the waiters read the seats again.
    Done,
    /// Its statement waited past the lock wait limit (SQLSTATE 55P03): the seats are locked by
    /// a transaction outside this process's holds; the waiters answer 503 + `Retry-After`.
    LockWait,
}

type Seat = (String, String);

/// The seats with an attempt running in this process, each with the attempt's channel.
#[derive(Debug, Default)]
pub struct SeatGates {
    busy: Mutex<HashMap<Seat, watch::Receiver<Option<Ended>>>>,
}

/// Whose turn it is: this request's ([`Turn::Mine`]), or another attempt's, to wait for.
#[derive(Debug)]
pub enum Turn {
    /// Every asked seat is marked for this request until the pass is finished or dropped.
    Mine(Pass),
    /// An attempt for one of the asked seats runs: wait for it ([`wait`]).
    Wait(watch::Receiver<Option<Ended>>),
}

/// A request's mark on its seats; finishing (or dropping) it frees them and tells the waiters.
#[derive(Debug)]
pub struct Pass {
    gates: Arc<SeatGates>,
    seats: Vec<Seat>,
    tell: watch::Sender<Option<Ended>>,
}

impl SeatGates {
    /// Marks `seats` of `show` for the caller when no other attempt runs for any of them
    /// ([`Turn::Mine`]); else the first running attempt's channel to wait on, nothing marked.
    pub fn enter(self: &Arc<Self>, show: &str, seats: &[String]) -> Turn {
        let mut busy = self.lock();
        let keys: Vec<Seat> = seats.iter().map(|s| (show.to_owned(), s.clone())).collect();
        if let Some(rx) = keys.iter().find_map(|k| busy.get(k)) {
            return Turn::Wait(rx.clone());
        }
        let (tell, rx) = watch::channel(None);
        for k in &keys {
            busy.insert(k.clone(), rx.clone());
        }
        Turn::Mine(Pass {
            gates: self.clone(),
            seats: keys,
            tell,
        })
    }

    /// Seats with an attempt running (for tests and metrics).
    pub fn busy(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Seat, watch::Receiver<Option<Ended>>>> {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Pass {
    /// Ends the attempt as `ended`: frees its seats and tells its waiters.
    pub fn finish(self, ended: Ended) {
        let _ = self.tell.send(Some(ended));
        // Dropped here: the seats are freed by `Drop`.
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        {
            let mut busy = self.gates.lock();
            for k in &self.seats {
                busy.remove(k);
            }
        }
        // An attempt dropped unfinished (its request went away) lets its waiters read again.
        self.tell.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(Ended::Done);
                true
            } else {
                false
            }
        });
    }
}

/// Waits for the attempt behind `rx` to end, at most `limit`: how it ended, or `None` when it
/// did not end in time.
pub async fn wait(mut rx: watch::Receiver<Option<Ended>>, limit: Duration) -> Option<Ended> {
    match tokio::time::timeout(limit, rx.wait_for(Option::is_some)).await {
        Ok(Ok(v)) => *v,
        // The sender went away without a word: treat as done (read again).
        Ok(Err(_)) => Some(Ended::Done),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[tokio::test]
    async fn one_attempt_per_seat_and_its_waiters_learn_how_it_ended() {
        let g = Arc::new(SeatGates::default());
        let Turn::Mine(first) = g.enter("s", &seats(&["A-1", "A-2"])) else {
            panic!("free seats: mine");
        };
        // Sharing one seat: wait; other seats, or the same seat of another show: go.
        let Turn::Wait(rx) = g.enter("s", &seats(&["A-2", "A-3"])) else {
            panic!("a shared seat waits");
        };
        let Turn::Mine(other) = g.enter("s", &seats(&["A-3"])) else {
            panic!("another seat goes");
        };
        let Turn::Mine(elsewhere) = g.enter("t", &seats(&["A-1"])) else {
            panic!("another show goes");
        };
        assert_eq!(g.busy(), 4);
        first.finish(Ended::LockWait);
        assert_eq!(
            wait(rx, Duration::from_secs(5)).await,
            Some(Ended::LockWait)
        );
        drop((other, elsewhere));
        assert_eq!(g.busy(), 0);
        // Dropped unfinished: its waiters read again.
        let Turn::Mine(gone) = g.enter("s", &seats(&["A-1"])) else {
            panic!("free again");
        };
        let Turn::Wait(rx) = g.enter("s", &seats(&["A-1"])) else {
            panic!("busy");
        };
        drop(gone);
        assert_eq!(wait(rx, Duration::from_secs(5)).await, Some(Ended::Done));
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_limit() {
        let g = Arc::new(SeatGates::default());
        let _mine = g.enter("s", &seats(&["A-1"]));
        let Turn::Wait(rx) = g.enter("s", &seats(&["A-1"])) else {
            panic!("busy");
        };
        // Nobody ends the attempt: the wait gives up at its limit, whatever it is.
        assert_eq!(wait(rx, Duration::from_millis(20)).await, None);
    }
}
