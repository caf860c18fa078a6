//! Hold requests in flight in this process, by `(visitor, Idempotency-Key)` (case B12). The
//! first request with a key becomes its owner; an identical request arriving while the owner
//! runs waits for it and then replays the stored answer, so it never reaches the rate limiter
//! or the caps (which would answer `429` or `hold-exists` for the same key). Across processes
//! the idempotency row itself is the guard: [`crate::inventory::claim::create_in`] writes it
//! first, so a duplicate on another node waits on that row and then replays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

type Key = (String, String);

/// The registry of requests in flight.
#[derive(Debug, Default)]
pub struct InFlight {
    running: Mutex<HashMap<Key, watch::Receiver<()>>>,
}

/// The owner's token: dropping it ends the request's flight and wakes the waiters.
#[derive(Debug)]
pub struct Owner {
    registry: Arc<InFlight>,
    key: Key,
    _done: watch::Sender<()>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let mut m = self
            .registry
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        m.remove(&self.key);
    }
}

/// What [`InFlight::enter`] found.
#[derive(Debug)]
pub enum Entry {
    /// No identical request runs: this one does (until the token is dropped).
    Owner(Owner),
    /// An identical request runs: wait for it with [`wait`], then look for its stored answer.
    Wait(watch::Receiver<()>),
}

impl InFlight {
    /// Enters the request `(visitor, key)`.
    pub fn enter(self: &Arc<Self>, visitor: &str, key: &str) -> Entry {
        let k = (visitor.to_owned(), key.to_owned());
        let mut m = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = m.get(&k) {
            return Entry::Wait(rx.clone());
        }
        let (tx, rx) = watch::channel(());
        m.insert(k.clone(), rx);
        Entry::Owner(Owner {
            registry: self.clone(),
            key: k,
            _done: tx,
        })
    }

    /// Requests in flight (metrics and tests).
    pub fn len(&self) -> usize {
        self.running.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Waits until the owner of `rx` finishes, at most `limit`; false when it is still running.
pub async fn wait(mut rx: watch::Receiver<()>, limit: Duration) -> bool {
    // `changed` fails once the owner's sender is dropped, which is the only way it ends.
    tokio::time::timeout(limit, async { while rx.changed().await.is_ok() {} })
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_duplicate_waits_for_the_owner() {
        let reg = Arc::new(InFlight::default());
        let Entry::Owner(owner) = reg.enter("v", "k") else {
            panic!("first is the owner")
        };
        let Entry::Wait(rx) = reg.enter("v", "k") else {
            panic!("second waits")
        };
        assert!(matches!(reg.enter("v", "other"), Entry::Owner(_)));
        assert!(!wait(rx.clone(), Duration::from_millis(20)).await);
        drop(owner);
        assert!(wait(rx, Duration::from_millis(20)).await);
        assert!(reg.is_empty());
    }
}
