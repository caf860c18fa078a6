//! Access codes in memory (`store::access`): per event, one [`Codes`] in the store's `Inner`,
//! changed inside the store's one critical section like everything else.

use super::MemoryStore;
use crate::access::{AccessMode, CodeRecord, Spend};
use crate::domain::{EventId, VisitorId};
use crate::store::access::AccessStore;
use crate::store::{StoreError, StoreResult};
use async_trait::async_trait;
use std::collections::{HashMap, HashSet};

/// One event's access state.
#[derive(Debug)]
pub(super) struct Codes {
    mode: AccessMode,
    codes: HashMap<String, CodeRecord>,
    users: HashMap<String, HashSet<String>>,
    revoked: HashSet<String>,
    promoter_key: Option<String>,
    tiers: HashMap<String, String>,
}

impl Default for Codes {
    fn default() -> Self {
        Self {
            mode: AccessMode::Open,
            codes: HashMap::new(),
            users: HashMap::new(),
            revoked: HashSet::new(),
            promoter_key: None,
            tiers: HashMap::new(),
        }
    }
}

impl MemoryStore {
    fn with_codes<T>(&self, event: &EventId, f: impl FnOnce(&mut Codes) -> T) -> StoreResult<T> {
        self.with_inner(|i| {
            if !i.events.contains_key(event) {
                return Err(StoreError::NotFound);
            }
            Ok(f(i.access.entry(event.clone()).or_default()))
        })?
    }
}

#[async_trait]
impl AccessStore for MemoryStore {
    async fn access_mode(&self, event: &EventId) -> StoreResult<AccessMode> {
        self.with_codes(event, |c| c.mode)
    }

    async fn set_access_mode(&self, event: &EventId, mode: AccessMode) -> StoreResult<AccessMode> {
        self.with_codes(event, |c| std::mem::replace(&mut c.mode, mode))
    }

    async fn put_codes(&self, event: &EventId, codes: &[CodeRecord]) -> StoreResult<u64> {
        self.with_codes(event, |c| {
            let mut added = 0;
            for r in codes {
                if !c.codes.contains_key(&r.hash) {
                    c.codes.insert(r.hash.clone(), r.clone());
                    added += 1;
                }
            }
            added
        })
    }

    async fn spend_code(
        &self,
        event: &EventId,
        hash: &str,
        visitor: &VisitorId,
        now_ms: i64,
    ) -> StoreResult<Spend> {
        self.with_codes(event, |c| {
            let Some(r) = c.codes.get_mut(hash) else {
                return Spend::Unknown;
            };
            if r.expires_ms > 0 && now_ms >= r.expires_ms {
                return Spend::Expired;
            }
            if r.uses == 0 {
                return Spend::UsedUp;
            }
            r.uses -= 1;
            let tier = r.tier.clone();
            let users = c.users.entry(hash.to_owned()).or_default();
            users.insert(visitor.as_str().to_owned());
            Spend::Spent(tier)
        })
    }

    async fn refund_code(
        &self,
        event: &EventId,
        hash: &str,
        visitor: &VisitorId,
    ) -> StoreResult<()> {
        self.with_codes(event, |c| {
            if let Some(r) = c.codes.get_mut(hash) {
                r.uses += 1;
            }
            if let Some(u) = c.users.get_mut(hash) {
                u.remove(visitor.as_str());
            }
        })
    }

    async fn revoke_codes(
        &self,
        event: &EventId,
        hashes: &[String],
    ) -> StoreResult<(u64, Vec<VisitorId>)> {
        self.with_codes(event, |c| {
            let mut deleted = 0;
            let mut visitors = Vec::new();
            for h in hashes {
                deleted += u64::from(c.codes.remove(h).is_some());
                for v in c.users.remove(h).unwrap_or_default() {
                    c.revoked.insert(v.clone());
                    visitors.push(VisitorId::from_verified(v));
                }
            }
            (deleted, visitors)
        })
    }

    async fn revoked(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<bool> {
        self.with_codes(event, |c| c.revoked.contains(visitor.as_str()))
    }

    async fn set_promoter_key(&self, event: &EventId, key_json: &str) -> StoreResult<()> {
        self.with_codes(event, |c| c.promoter_key = Some(key_json.to_owned()))
    }

    async fn promoter_key(&self, event: &EventId) -> StoreResult<Option<String>> {
        self.with_codes(event, |c| c.promoter_key.clone())
    }

    async fn set_tier(&self, event: &EventId, visitor: &VisitorId, tier: &str) -> StoreResult<()> {
        self.with_codes(event, |c| {
            c.tiers.insert(visitor.as_str().to_owned(), tier.to_owned());
        })
    }

    async fn tier(&self, event: &EventId, visitor: &VisitorId) -> StoreResult<Option<String>> {
        self.with_codes(event, |c| c.tiers.get(visitor.as_str()).cloned())
    }
}
