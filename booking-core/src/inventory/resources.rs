//! Interval resources (issue 17 item 2; seed 001's third shape): a named resource held for
//! `[start, end)`, the range stored with the kind's buffer (`[start, end + buffer)`), and the
//! database refusing two blocking claims whose ranges overlap.
//!
//! - PostgreSQL: `hold_resources` carries `EXCLUDE USING gist (show_id WITH =, resource WITH =,
//!   during WITH &&) WHERE (blocking = 1)` (`during` = `int8range(start_ms, until_ms)`), so the
//!   insert itself decides; SQLSTATE 23P01 is a lost claim (409 with fresh free intervals).
//! - SQLite: no exclusion constraints; the claim checks for a blocking overlap and inserts in
//!   the hold's `BEGIN IMMEDIATE` transaction, under the single writer: nothing can come between.
//!
//! Before either, the claim clears the dead claims in its way in the same transaction: those of
//! holds released, or HELD past their deadline and not kept by the reconciler (`alerted_at` set
//! or the deadline moved). Expiry on read: a dead claim never blocks a live fan, and the free
//! intervals a fan is shown leave them out. A payment arriving for a hold whose claim was
//! cleared claims again ([`sell`]) or is refunded, like a pool's reclaimed places.

use serde_json::{json, Value};

use crate::db::{Db, Tx};
use crate::venue::resources::format_instant;
use crate::venue::ResourceKind;

/// SQL condition: the claim's hold (`h`) is dead at `now` (a placeholder): released, or HELD
/// past its deadline and not kept by the reconciler.
fn dead(now: &str) -> String {
    format!(
        "(h.status = 'RELEASED' OR (h.status = 'HELD' AND h.expires_at <= {now} AND h.alerted_at IS NULL))"
    )
}

/// SQL of the overlap check on SQLite (`$1` show, `$2` resource, `$3` start, `$4` until): a
/// blocking claim meeting `[start, until)`. Also what the race test runs without the guard.
pub const OVERLAP: &str =
    "SELECT hold_id FROM hold_resources WHERE show_id = $1 AND resource = $2 \
     AND blocking = 1 AND start_ms < $4 AND until_ms > $3 LIMIT 1";

/// SQL of the insert (`$1` hold, `$2` show, `$3` kind, `$4` resource, `$5` start, `$6` end,
/// `$7` until).
pub const INSERT: &str = "INSERT INTO hold_resources (hold_id, show_id, kind, resource, start_ms, end_ms, until_ms, blocking) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, 1)";

/// SQLSTATE of an exclusion-constraint violation (PostgreSQL).
pub const EXCLUSION_VIOLATION: &str = "23P01";

/// A claim to make: `[start, end)` of `resource`, blocking until `until` (end + buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Kind id.
    pub kind: String,
    /// Resource name.
    pub resource: String,
    /// Start, epoch ms.
    pub start: i64,
    /// End, epoch ms (exclusive).
    pub end: i64,
    /// End of the blocked range, epoch ms (`end` + buffer).
    pub until: i64,
}

/// Clears the dead claims overlapping `c` (see the module doc). Returns how many.
async fn clear_dead(tx: &mut Tx<'_>, show: &str, c: &Claim, now_ms: i64) -> sqlx::Result<u64> {
    let sql = format!(
        "UPDATE hold_resources SET blocking = 0 WHERE show_id = $1 AND resource = $2 AND blocking = 1 \
         AND start_ms < $4 AND until_ms > $3 \
         AND EXISTS (SELECT 1 FROM holds h WHERE h.id = hold_resources.hold_id AND {})",
        dead("$5")
    );
    Ok(sqlx::query(&sql)
        .bind(show)
        .bind(&c.resource)
        .bind(c.start)
        .bind(c.until)
        .bind(now_ms)
        .execute(&mut **tx)
        .await?
        .rows_affected())
}

/// The first key of the advisory locks [`lock_resource`] takes: PostgreSQL's two-key form, a
/// lock space apart from the one-key locks (sqlx's migrations take one of those).
pub const CLAIM_LOCK_SPACE: i32 = 17;

/// PostgreSQL: the claims of one resource of `show` one at a time, from here to the commit
/// (`pg_advisory_xact_lock`, keyed by the resource's name hashed; two resources sharing a hash
/// only wait for each other). Without it, claims that waited together on a claim being
/// released (their inserts each waiting for the release's transaction at the exclusion check)
/// woke together, each found the others' rows in progress and waited for them: a deadlock,
/// one of them aborted and answered 503 (newcomer review: 5 of 42 interval holds racing a
/// release, 32 of 42 with a fan on the waitlist). In one file they insert one after another:
/// the first claims, the others find its row committed and lose with a 409. A claim is the
/// hold's last statement (after its seats and pool places), so the lock is held only from
/// there to the commit.
async fn lock_resource(tx: &mut Tx<'_>, show: &str, resource: &str) -> sqlx::Result<()> {
    let sql = format!(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM (SELECT {}) l",
        lock_sql("$2", "$3")
    );
    sqlx::query(&sql)
        .bind(CLAIM_LOCK_SPACE)
        .bind(show)
        .bind(resource)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// [`lock_resource`] of the resource hold `hold_id` claims, its name read in the same
/// statement (no lock when the hold has no resource part).
async fn lock_resource_of(tx: &mut Tx<'_>, hold_id: &str) -> sqlx::Result<()> {
    let sql = format!(
        "SELECT CAST(COUNT(*) AS BIGINT) FROM (SELECT {} FROM hold_resources WHERE hold_id = $2) l",
        lock_sql("show_id", "resource")
    );
    sqlx::query(&sql)
        .bind(CLAIM_LOCK_SPACE)
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The lock call of [`lock_resource`] (key space `$1`) for SQL expressions of the show and the
/// resource: one key for both ways of naming them.
fn lock_sql(show: &str, resource: &str) -> String {
    format!("pg_advisory_xact_lock($1, hashtext({show} || '|' || {resource}))")
}

/// Whether `e` is PostgreSQL's exclusion-constraint violation.
pub fn is_overlap(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.code().as_deref() == Some(EXCLUSION_VIOLATION))
}

/// The guarded claim of `c` for `hold_id` in the hold's transaction: on PostgreSQL the
/// resource's claims taken one at a time ([`lock_resource`]); dead claims in the way
/// cleared, then on PostgreSQL the insert (the exclusion constraint decides; a 23P01 leaves the
/// transaction aborted, so the caller only rolls back), on SQLite the overlap check and the
/// insert. True when claimed.
pub async fn claim(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold_id: &str,
    c: &Claim,
    now_ms: i64,
) -> sqlx::Result<bool> {
    if pg {
        lock_resource(tx, show, &c.resource).await?;
    }
    clear_dead(tx, show, c, now_ms).await?;
    if !pg && overlapping(tx, show, c).await?.is_some() {
        return Ok(false);
    }
    let inserted = sqlx::query(INSERT)
        .bind(hold_id)
        .bind(show)
        .bind(&c.kind)
        .bind(&c.resource)
        .bind(c.start)
        .bind(c.end)
        .bind(c.until)
        .execute(&mut **tx)
        .await;
    match inserted {
        Ok(_) => Ok(true),
        Err(e) if is_overlap(&e) => {
            metrics::counter!("bc_interval_overlaps_refused_total", "show" => show.to_owned())
                .increment(1);
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

async fn overlapping(tx: &mut Tx<'_>, show: &str, c: &Claim) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar(OVERLAP)
        .bind(show)
        .bind(&c.resource)
        .bind(c.start)
        .bind(c.until)
        .fetch_optional(&mut **tx)
        .await
}

/// The resource part of a hold: (kind, resource, start, end, blocking).
pub async fn of_hold(
    tx: &mut Tx<'_>,
    pg: bool,
    hold_id: &str,
) -> sqlx::Result<Option<(String, String, i64, i64, i64)>> {
    let lock = if pg { " FOR UPDATE" } else { "" };
    sqlx::query_as(&format!(
        "SELECT kind, resource, start_ms, end_ms, blocking FROM hold_resources WHERE hold_id = $1{lock}"
    ))
    .bind(hold_id)
    .fetch_optional(&mut **tx)
    .await
}

/// Whether the hold's claim still blocks (its row locked on PostgreSQL, so a clearing claim
/// waits); true for holds without a resource part. The reconciler's keep reads this.
pub async fn counted(tx: &mut Tx<'_>, pg: bool, hold_id: &str) -> sqlx::Result<bool> {
    Ok(of_hold(tx, pg, hold_id)
        .await?
        .is_none_or(|(_, _, _, _, b)| b == 1))
}

/// Release: the hold's claim stops blocking, in the transaction that changes its status.
pub async fn release(tx: &mut Tx<'_>, hold_id: &str) -> sqlx::Result<()> {
    sqlx::query("UPDATE hold_resources SET blocking = 0 WHERE hold_id = $1 AND blocking = 1")
        .bind(hold_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Confirmation: true when the hold's claim blocks (still, or again after it was cleared and
/// nothing else took the range); false when another claim took it (the caller refunds; on
/// PostgreSQL the transaction is then aborted and must be rolled back). True without a
/// resource part. On PostgreSQL the resource's lock ([`lock_resource`]) is taken before the
/// hold's claim row, the order of [`claim`], whose clearing of dead claims may wait on that
/// row.
pub async fn sell(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold_id: &str,
    now_ms: i64,
) -> sqlx::Result<bool> {
    if pg {
        lock_resource_of(tx, hold_id).await?;
    }
    let Some((_, resource, start, _, blocking)) = of_hold(tx, pg, hold_id).await? else {
        return Ok(true);
    };
    if blocking == 1 {
        return Ok(true);
    }
    let until: i64 = sqlx::query_scalar("SELECT until_ms FROM hold_resources WHERE hold_id = $1")
        .bind(hold_id)
        .fetch_one(&mut **tx)
        .await?;
    let c = Claim {
        kind: String::new(),
        resource,
        start,
        end: until,
        until,
    };
    clear_dead(tx, show, &c, now_ms).await?;
    if !pg && overlapping(tx, show, &c).await?.is_some() {
        return Ok(false);
    }
    match sqlx::query("UPDATE hold_resources SET blocking = 1 WHERE hold_id = $1")
        .bind(hold_id)
        .execute(&mut **tx)
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if is_overlap(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The live claims' ranges `[start, until)` per resource of `kind` at `now_ms` (dead claims
/// left out: expiry on read).
async fn taken(
    db: &Db,
    show: &str,
    kind: &str,
    now_ms: i64,
) -> sqlx::Result<Vec<(String, i64, i64)>> {
    let sql = format!(
        "SELECT r.resource, r.start_ms, r.until_ms FROM hold_resources r JOIN holds h ON h.id = r.hold_id \
         WHERE r.show_id = $1 AND r.kind = $2 AND r.blocking = 1 AND NOT {} ORDER BY r.resource, r.start_ms",
        dead("$3")
    );
    sqlx::query_as(&sql)
        .bind(show)
        .bind(kind)
        .bind(now_ms)
        .fetch_all(db)
        .await
}

/// The free intervals of `kind` within `[from, to)`: per resource (all, or only `only`), the
/// maximal free runs on the slot grid of the bookable windows, each as epoch ms and RFC 3339.
pub async fn free(
    db: &Db,
    show: &str,
    k: &ResourceKind,
    only: Option<&str>,
    (from, to): (i64, i64),
    now_ms: i64,
) -> sqlx::Result<Value> {
    let claims = taken(db, show, &k.kind, now_ms).await?;
    let resources: Vec<Value> = k
        .resources
        .iter()
        .filter(|r| only.is_none_or(|o| o == r.as_str()))
        .map(|r| {
            let mine: Vec<(i64, i64)> = claims
                .iter()
                .filter(|(name, _, _)| name == r)
                .map(|(_, s, u)| (*s, *u))
                .collect();
            let free: Vec<Value> = k
                .free_runs(&mine, from, to)
                .into_iter()
                .map(|(a, b)| {
                    json!({"start": a, "end": b, "start_at": format_instant(a), "end_at": format_instant(b)})
                })
                .collect();
            json!({"resource": r, "free": free})
        })
        .collect();
    Ok(json!({
        "kind": k.kind, "slot_minutes": k.slot_minutes, "buffer_minutes": k.buffer_minutes,
        "price_cents_per_slot": k.price_cents_per_slot, "resources": resources,
    }))
}

/// The `interval` member of a hold's answer.
pub fn interval_json(kind: &str, resource: &str, start: i64, end: i64, until: i64) -> Value {
    json!({
        "kind": kind, "resource": resource, "start": start, "end": end,
        "start_at": format_instant(start), "end_at": format_instant(end), "blocked_until": until,
    })
}

/// The claims of `show` that block (`blocking = 1`: what the exclusion constraint, or SQLite's
/// check, keeps apart), grouped per resource in start order, each with its hold's status and
/// whether it is live at `now_ms` (a HELD hold past its deadline and not kept by the reconciler
/// still blocks until a claim in its way clears it). The back office's view for the rush's
/// "no overlapping live claims" check (DECISIONS "Interval resources").
pub async fn blocking_claims(db: &Db, show: &str, now_ms: i64) -> sqlx::Result<Value> {
    let sql = format!(
        "SELECT r.resource, r.kind, r.hold_id, h.status, r.start_ms, r.end_ms, r.until_ms, \
         CASE WHEN {} THEN 0 ELSE 1 END FROM hold_resources r JOIN holds h ON h.id = r.hold_id \
         WHERE r.show_id = $1 AND r.blocking = 1 ORDER BY r.resource, r.start_ms, r.hold_id",
        dead("$2")
    );
    type Row = (String, String, String, String, i64, i64, i64, i64);
    let rows: Vec<Row> = sqlx::query_as(&sql)
        .bind(show)
        .bind(now_ms)
        .fetch_all(db)
        .await?;
    let mut out: Vec<Value> = Vec::new();
    for (resource, kind, hold, status, start, end, until, live) in rows {
        let claim = json!({"hold_id": hold, "status": status, "start": start, "end": end,
                           "until": until, "live": live == 1});
        match out.last_mut() {
            Some(last) if last["resource"] == resource.as_str() => {
                if let Some(a) = last["claims"].as_array_mut() {
                    a.push(claim);
                }
            }
            _ => out.push(json!({"resource": resource, "kind": kind, "claims": [claim]})),
        }
    }
    Ok(Value::Array(out))
}
