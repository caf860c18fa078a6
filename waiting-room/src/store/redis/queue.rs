//! The Redis backend's queue operations with liveness that touch no number bucket: heartbeat,
//! claim, session end, leaving the line, figures and the audit trail (join and advance are in `numbers.rs`). Each
//! multi-key change is one Lua script (beside this file); the trait impl in `mod.rs` delegates
//! here.

use super::parse::{bad, err, key, opt_number, parse_admission, parse_meta, parse_u64, state_of};
use super::{RedisStore, AUDIT_KEEP, REPORT_KEEP};
use crate::domain::{
    AdmissionTerms, AuditEntry, ClaimOutcome, EventId, Figures, Heartbeat, Left, Place,
    ReportSample, SessionEnd, SessionRef, VisitorId,
};
use crate::store::StoreResult;
use redis::AsyncCommands;
use std::collections::HashMap;

impl RedisStore {
    pub(super) async fn heartbeat_fan(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        rejoin_ms: u64,
    ) -> StoreResult<Heartbeat> {
        let r: Vec<String> = self
            .scripts
            .heartbeat
            .on(event, &["meta", "num", "hb", "gone", "back", "adm"])
            .arg(visitor.as_str())
            .arg(now_ms)
            .arg(rejoin_ms)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        match r.as_slice() {
            [s] if s == "missing" => Err(self.missing(event)),
            [s, n, c, p] => Ok(Heartbeat {
                queue_number: opt_number(n)?,
                cursor: parse_u64(c)?,
                state: state_of(s)?,
                place: Place::parse(p).ok_or_else(|| bad(p))?,
            }),
            _ => Err(bad("heartbeat")),
        }
    }

    pub(super) async fn claim_fan(
        &self,
        event: &EventId,
        visitor: &VisitorId,
        now_ms: i64,
        terms: AdmissionTerms,
        new_jti: &str,
        rejoin_ms: u64,
    ) -> StoreResult<ClaimOutcome> {
        let r: Vec<String> = self
            .scripts
            .claim
            .on(
                event,
                &["meta", "num", "adm", "live", "hb", "gone", "back", "jti"],
            )
            .arg(visitor.as_str())
            .arg(now_ms)
            .arg(terms.ttl_secs)
            .arg(new_jti)
            .arg(rejoin_ms)
            .arg(terms.slot_tail_secs)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        match r.as_slice() {
            [k, rec] if k == "admitted" => Ok(ClaimOutcome::Admitted(parse_admission(rec)?)),
            [k, s] if k == "refused" => Ok(ClaimOutcome::Refused(state_of(s)?)),
            [k, n] if k == "returning" => Ok(ClaimOutcome::Returning {
                queue_number: parse_u64(n)?,
            }),
            [k, n] if k == "lost" => Ok(ClaimOutcome::Lost {
                queue_number: parse_u64(n)?,
            }),
            [k, n, c] if k == "wait" => Ok(ClaimOutcome::NotYourTurn {
                queue_number: opt_number(n)?,
                cursor: parse_u64(c)?,
            }),
            [k] if k == "missing" => Err(self.missing(event)),
            _ => Err(bad("claim")),
        }
    }

    pub(super) async fn read_figures(
        &self,
        event: &EventId,
        now_ms: i64,
        silence_ms: u64,
    ) -> StoreResult<Option<Figures>> {
        let now = now_ms.div_euclid(1000);
        let dead_before = now_ms - silence_ms as i64;
        type Read = (HashMap<String, String>, u64, u64, u64, u64, u64);
        let (h, pre, active, silent, returning, left): Read = self
            .scripts
            .figures
            .on(event, &["meta", "pre", "live", "hb", "back", "vac"])
            .arg(now)
            .arg(dead_before)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if h.is_empty() {
            return Ok(None);
        }
        let num = |k: &str| parse_u64(h.get(k).map(String::as_str).unwrap_or("0"));
        Ok(Some(Figures {
            meta: parse_meta(event, &h)?,
            cursor: num("cursor")?,
            last_number: num("counter")?,
            prequeued: pre,
            active,
            admitted_total: num("admitted_total")?,
            max_active_seen: num("max_active_seen")?,
            silent,
            returning,
            left,
            skipped_total: num("skipped_total")?,
            ended_total: num("ended_total")?,
            ready_window: num("win")?,
            state_gen: num("gen")?,
            broadcast: super::parse::broadcast_of(h.get("broadcast"))?,
            mode: super::parse::mode_of(h.get("mode"))?,
            phases: super::parse::phases_of(h.get("phases"))?,
        }))
    }

    pub(super) async fn end(
        &self,
        event: &EventId,
        session: &SessionRef,
        now: i64,
    ) -> StoreResult<SessionEnd> {
        let (kind, id) = match session {
            SessionRef::Jti(j) => ("jti", j),
            SessionRef::Visitor(v) => ("visitor", v),
        };
        let r: String = self
            .scripts
            .end_session
            .on(event, &["meta", "adm", "live", "jti"])
            .arg(kind)
            .arg(id)
            .arg(now)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        match r.as_str() {
            "ended" => Ok(SessionEnd::Ended),
            "already" => Ok(SessionEnd::AlreadyEnded),
            "unknown" => Ok(SessionEnd::Unknown),
            "missing" => Err(self.missing(event)),
            other => Err(bad(other)),
        }
    }

    pub(super) async fn append_audit(&self, event: &EventId, e: &AuditEntry) -> StoreResult<()> {
        self.append_capped(key(event, "audit"), e, AUDIT_KEEP).await
    }

    /// One JSON sample on `wr:{event}:report` (one slot: the hash tag).
    pub(super) async fn append_report(&self, event: &EventId, r: &ReportSample) -> StoreResult<()> {
        self.append_capped(key(event, "report"), r, REPORT_KEEP)
            .await
    }

    /// `RPUSH` of `value` as JSON on the list `k` and `LTRIM` to its last `keep`, atomically.
    async fn append_capped(
        &self,
        k: String,
        value: &impl serde::Serialize,
        keep: usize,
    ) -> StoreResult<()> {
        let json = serde_json::to_string(value).map_err(|e| bad(&e.to_string()))?;
        let keep = keep as isize;
        let _: ((), ()) = redis::pipe()
            .atomic()
            .rpush(&k, json)
            .ltrim(&k, -keep, -1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        Ok(())
    }

    pub(super) async fn read_report(&self, event: &EventId) -> StoreResult<Vec<ReportSample>> {
        let (exists, raw): (bool, Vec<String>) = redis::pipe()
            .exists(key(event, "meta"))
            .lrange(key(event, "report"), 0, -1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        if !exists {
            return Err(self.missing(event));
        }
        raw.iter()
            .map(|s| serde_json::from_str(s).map_err(|_| bad("report sample")))
            .collect()
    }

    pub(super) async fn read_audit(
        &self,
        event: &EventId,
        limit: usize,
    ) -> StoreResult<Vec<AuditEntry>> {
        let exists: bool = self
            .conn
            .clone()
            .exists(key(event, "meta"))
            .await
            .map_err(err)?;
        if !exists {
            return Err(self.missing(event));
        }
        let n = limit.max(1) as isize;
        let raw: Vec<String> = self
            .conn
            .clone()
            .lrange(key(event, "audit"), -n, -1)
            .await
            .map_err(err)?;
        raw.iter()
            .map(|s| serde_json::from_str(s).map_err(|_| bad("audit entry")))
            .collect()
    }

    /// `QueueStore::leave`: `leave.lua`, then the replication wait of joins (a vacated place
    /// must not come back after a failover while the fans behind were told it was gone).
    pub(super) async fn leave_line(
        &self,
        event: &EventId,
        visitor: &VisitorId,
    ) -> StoreResult<Left> {
        let (_, member) = self.seed(event).await?.entry(visitor.as_str());
        let r: Vec<String> = self
            .scripts
            .leave
            .on(event, &["meta", "num", "pre", "hb", "vac"])
            .arg(visitor.as_str())
            .arg(&member)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err)?;
        let left = match r.as_slice() {
            [s, _] if s == "missing" => return Err(self.missing(event)),
            [s, n] if s == "vacated" => Left::Vacated(parse_u64(n)?),
            [s, _] if s == "unqueued" => Left::Unqueued,
            [s, _] if s == "not_waiting" => Left::NotWaiting,
            _ => return Err(bad("leave")),
        };
        self.replicated(event).await?;
        Ok(left)
    }
}
