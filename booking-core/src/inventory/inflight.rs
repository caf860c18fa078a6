//! Hold requests in flight in this process, by `(visitor, Idempotency-Key)` (case B12). The
//! first request with a key becomes its owner; an identical request arriving while the owner
//! runs waits for it and then answers what the owner answered ([`Owner::finish`]: the 201, or
//! the refusal, which is not stored as an answer), so it never reaches the rate limiter or the
//! caps (which would answer `429` or `hold-exists` for the same key). Across processes
//! the idempotency row itself is the guard: [`crate::inventory::claim::create_in`] writes it
//! first, so a duplicate on another node waits on that row and then replays.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use sale_common::Problem;
use serde_json::Value;
use tokio::sync::watch;

use crate::error::{ApiError, ApiResult};

type Key = (String, String);

/// What the owner answered, as its identical requests answer it.
#[derive(Debug, Clone)]
pub struct Done {
    /// The owner's request hash: only a request with the same hash answers the same.
    pub hash: String,
    /// The answer's status and JSON body, or the refusal.
    pub answer: Result<(StatusCode, Value), Problem>,
}

/// The last answer an owner published (none while it runs, or when it failed unexpectedly).
type Published = Option<Arc<Done>>;

/// The registry of requests in flight: each owner's sender (dropped when the owner ends).
#[derive(Debug, Default)]
pub struct InFlight {
    running: Mutex<HashMap<Key, watch::Sender<Published>>>,
}

/// The owner's token: dropping it ends the request's flight and wakes the waiters.
#[derive(Debug)]
pub struct Owner {
    registry: Arc<InFlight>,
    key: Key,
}

impl Owner {
    /// Publishes the owner's `outcome` for its request of hash `hash` to the waiters: a
    /// response or a problem (4xx, 503), a lock wait past the limit as its 503
    /// ([`crate::error::lock_wait`]: a newcomer review: four copies of a hold on a locked seat,
    /// sent at once, were answered after 1, 2, 3 and 4 s, each waiting out the lock again in
    /// turn); any other error publishes nothing, and each waiter then looks for the stored
    /// answer and may run the request itself.
    pub fn finish(&self, hash: &str, outcome: &ApiResult<(StatusCode, Value)>) {
        let answer = match outcome {
            Ok(a) => Ok(a.clone()),
            Err(ApiError::Problem(p)) => Err(p.clone()),
            Err(e) if e.is_lock_wait() => Err(crate::error::lock_wait()),
            Err(_) => return,
        };
        let done = Arc::new(Done {
            hash: hash.to_owned(),
            answer,
        });
        if let Some(tx) = self.registry.lock().get(&self.key) {
            tx.send_replace(Some(done));
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        // Dropping the sender wakes every waiter.
        self.registry.lock().remove(&self.key);
    }
}

/// What [`InFlight::enter`] found.
#[derive(Debug)]
pub enum Entry {
    /// No identical request runs: this one does (until the token is dropped).
    Owner(Owner),
    /// An identical request runs: wait for it with [`wait`] and answer what it answered.
    Wait(watch::Receiver<Published>),
}

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, watch::Sender<Published>>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Enters the request `(visitor, key)`.
    pub fn enter(self: &Arc<Self>, visitor: &str, key: &str) -> Entry {
        let k = (visitor.to_owned(), key.to_owned());
        let mut m = self.lock();
        if let Some(tx) = m.get(&k) {
            return Entry::Wait(tx.subscribe());
        }
        m.insert(k.clone(), watch::Sender::new(None));
        Entry::Owner(Owner {
            registry: self.clone(),
            key: k,
        })
    }

    /// Identical requests waiting for the owner of `(visitor, key)` (tests): 0 when none runs.
    pub fn waiting(&self, visitor: &str, key: &str) -> usize {
        let k = (visitor.to_owned(), key.to_owned());
        self.lock().get(&k).map_or(0, |tx| tx.receiver_count())
    }

    /// Requests in flight (metrics and tests).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Waits until the owner of `rx` finishes, at most `limit`: `None` when it is still running,
/// else what it published ([`Owner::finish`]; `Some(None)`: nothing).
pub async fn wait(mut rx: watch::Receiver<Published>, limit: Duration) -> Option<Published> {
    // `changed` fails once the owner's sender is dropped, which is the only way it ends.
    tokio::time::timeout(limit, async { while rx.changed().await.is_ok() {} })
        .await
        .ok()?;
    let done = rx.borrow().clone();
    Some(done)
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
        assert_eq!(reg.waiting("v", "k"), 1);
        assert!(matches!(reg.enter("v", "other"), Entry::Owner(_)));
        assert!(wait(rx.clone(), Duration::from_millis(20)).await.is_none());
        let refused = Problem::new(
            StatusCode::CONFLICT,
            "seats-unavailable",
            "Seats unavailable",
        );
        owner.finish("h", &Err(refused.into()));
        drop(owner);
        let done = wait(rx, Duration::from_millis(20)).await.expect("ended");
        let done = done.expect("the owner's answer");
        assert_eq!(done.hash, "h");
        assert!(matches!(&done.answer, Err(p) if p.kind == "seats-unavailable"));
        assert!(reg.is_empty());
    }
}
