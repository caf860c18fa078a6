//! The draw's publication read from any store (issue 15 item 1): the commitment while the
//! pre-queue is open or still being numbered; once it is numbered, the seed and the public ids
//! of the pre-queued fans in number order, read in chunks of [`NUMBERED_CHUNK`].

use super::{QueueStore, StoreError, StoreResult, NUMBERED_CHUNK};
use crate::domain::{EventId, EventState};
use crate::draw::{public_id, visitors_hash, Draw, Publication, ALGORITHM};

/// The publication of `event`'s draw as it stands. Complete (seed and list) once the state is
/// past `opening`; the list is immutable from then on, so callers may cache it.
pub async fn publication(store: &dyn QueueStore, event: &EventId) -> StoreResult<Publication> {
    let d = store.draw(event).await?;
    publication_of(store, event, &d).await
}

/// The numbers the pre-queue got, once they are all handed out (`None` before, or for an event
/// opened before the draw existed: then only the commitment is published, and it proves
/// nothing about that opening).
pub fn numbered_range(d: &Draw) -> Option<(u64, u64)> {
    let done = !matches!(d.state, EventState::Prequeue | EventState::Opening);
    d.numbered.filter(|_| done)
}

/// The publication of `event`'s draw `d` (read with [`QueueStore::draw`]): the commitment
/// alone until [`numbered_range`] is known, else the whole list read from the store.
pub async fn publication_of(
    store: &dyn QueueStore,
    event: &EventId,
    d: &Draw,
) -> StoreResult<Publication> {
    let mut p = Publication {
        event: event.to_string(),
        algorithm: ALGORITHM.to_owned(),
        commitment: d.seed.commitment(),
        seed: None,
        first_number: None,
        visitors_hash: None,
        visitors: None,
    };
    let Some((first, count)) = numbered_range(d) else {
        return Ok(p);
    };
    let mut list = Vec::with_capacity(count as usize);
    let mut at = first;
    while at < first + count {
        let n = NUMBERED_CHUNK.min(first + count - at);
        for (i, v) in store.numbered(event, at, n).await?.into_iter().enumerate() {
            let v = v.ok_or_else(|| {
                StoreError::Unavailable(format!("draw: number {} has no visitor", at + i as u64))
            })?;
            list.push(public_id(&v));
        }
        at += n;
    }
    p.seed = Some(d.seed.to_hex());
    p.first_number = Some(first);
    p.visitors_hash = Some(visitors_hash(&list));
    p.visitors = Some(list);
    Ok(p)
}
