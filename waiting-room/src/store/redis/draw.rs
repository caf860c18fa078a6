//! The Redis backend's side of the verifiable draw (`crate::draw`): the event's seed (kept in
//! `meta` as `draw_seed`, cached per process since it never changes once stored, so a join costs
//! no extra round trip) and the number → visitor reads of its publication.

use super::numbers::{bucket_key, buckets, BUCKET};
use super::parse::{bad, err, parse_u64, state_of};
use super::RedisStore;
use crate::domain::EventId;
use crate::draw::{Draw, DrawSeed};
use crate::store::{StoreResult, NUMBERED_CHUNK};

impl RedisStore {
    /// The event's seed, from this process's cache or the store (`NotFound` for no event).
    pub(super) async fn seed(&self, event: &EventId) -> StoreResult<DrawSeed> {
        let cached = {
            let seeds = self.seeds.lock().unwrap_or_else(|p| p.into_inner());
            seeds.get(event.as_str()).cloned()
        };
        match cached {
            Some(s) => Ok(s),
            None => Ok(self.read_draw(event).await?.seed),
        }
    }

    pub(super) async fn read_draw(&self, event: &EventId) -> StoreResult<Draw> {
        let r: Vec<String> = self
            .scripts
            .draw
            .on(event, &["meta"])
            .arg(DrawSeed::random().to_hex())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let [state, seed, from, n] = r.as_slice() else {
            return Err(self.missing(event));
        };
        let seed = DrawSeed::from_hex(seed).ok_or_else(|| bad("draw_seed"))?;
        self.seeds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(event.as_str().to_owned(), seed.clone());
        let numbered = match (from.as_str(), n.as_str()) {
            ("", _) | (_, "") => None,
            (f, n) => Some((parse_u64(f)?, parse_u64(n)?)),
        };
        Ok(Draw {
            seed,
            state: state_of(state)?,
            numbered,
        })
    }

    /// Visitors of numbers `first ..` (at most [`NUMBERED_CHUNK`]): one `HMGET` per bucket,
    /// pipelined (every bucket shares the event's slot).
    pub(super) async fn read_numbered(
        &self,
        event: &EventId,
        first: u64,
        count: u64,
    ) -> StoreResult<Vec<Option<String>>> {
        let count = count.min(NUMBERED_CHUNK);
        if count == 0 {
            return Ok(Vec::new());
        }
        let last = first + count - 1;
        let mut pipe = redis::pipe();
        for b in buckets(first, last) {
            let (lo, hi) = ((b * BUCKET).max(first), (b * BUCKET + BUCKET - 1).min(last));
            pipe.cmd("HMGET").arg(bucket_key(event, b));
            for k in lo..=hi {
                pipe.arg(k);
            }
        }
        let parts: Vec<Vec<Option<String>>> = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let mut out: Vec<Option<String>> = parts.into_iter().flatten().collect();
        // Number 0 is never handed out, so `buckets` skips it: keep positions aligned.
        while (out.len() as u64) < count {
            out.insert(0, None);
        }
        Ok(out)
    }
}
