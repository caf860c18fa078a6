//! The read before a hold's transaction (issue 13: the hold path in a few statements): ONE
//! statement on the reader connections returns the key's stored answer (a replay is answered
//! before the rate limiter and never counts against it, case B12) and, for a named-seat hold,
//! each asked seat's effective status (a lapsed hold counts as free, as on every read).
//!
//! A hold whose seats this read shows taken, from an admission with no live cap slot and a
//! session not ended (also read), is refused without a transaction: the read is a snapshot the
//! guarded update would have seen a moment later, so its refusal is the one the transaction
//! would have given, with the same fresh availability, and in the same order of refusals (the
//! caps and the session end come first there, so a request they would refuse goes on to it). A grant is only ever decided
//! by the guarded update (`holds::claim_many`): a seat the read shows free may still be lost
//! there. On the hot show of `loadtest bench` more than half of the requests lose; each cost a
//! transaction, a rollback, a known-seat check and an availability read, and on SQLite held the
//! one writer while doing so.

use serde_json::{Map, Value};

use crate::db::local::LocalReads;
use crate::db::{self, Db};
use crate::error::ApiResult;
use crate::inventory::claim::{self, HoldAnswer};
use crate::inventory::{caps, holds};

/// What [`read`] saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// The key's stored answer: replay it.
    pub answer: Option<HoldAnswer>,
    /// Every asked seat is known and at least one is not free: the seats' effective statuses
    /// (`{seat id: "free" | "held" | "sold"}`), the 409's fresh availability.
    pub taken: Option<Map<String, Value>>,
    /// Nothing the read saw would make the transaction refuse other than at the guarded update:
    /// no stored answer but a refusal of this same request, no live cap slot of the admission
    /// or the visitor, a session not ended, every asked seat known. Only such a hold of named
    /// seats is tried in one round trip on PostgreSQL ([`crate::inventory::onetrip`]).
    pub plain: bool,
}

/// Reads the key `(visitor, key)` of a request whose hash is `hash` and, for `seats` of `show`
/// (none: the key only), their effective status at `now_ms` (epoch ms) and whether the
/// admission `jti` or the visitor holds a live cap slot or the admission's session ended: the
/// transaction would then refuse with `hold-exists`, `visitor-hold-cap` or `admission-ended`
/// first (or, under the visitor cap, may still grant), so such a request is not refused here.
/// `Err` is 422 `idempotency-key-reused` or 409 `concurrent-request`, as
/// [`claim::stored_answer`].
/// On a SQLite file the read runs on the calling thread (`local`: [`LocalReads`]), else on `db`.
#[allow(clippy::too_many_arguments)]
pub async fn read(
    db: &Db,
    local: Option<&LocalReads>,
    visitor: &str,
    jti: &str,
    key: &str,
    hash: &str,
    show: &str,
    seats: &[String],
    now_ms: i64,
) -> ApiResult<Seen> {
    let mut sql = "SELECT 'k' AS t, request_hash AS a, CAST(status AS TEXT) AS b, body AS c \
                   FROM idempotency WHERE visitor_id = $2 AND key = $3"
        .to_owned();
    let mut b = db::Binds::default();
    b.push(now_ms);
    b.push(visitor);
    b.push(key);
    if !seats.is_empty() {
        b.push(jti);
        b.push(show);
        let params: Vec<String> = seats.iter().map(|s| b.push(s.as_str())).collect();
        sql.push_str(&format!(
            " UNION ALL SELECT 'c', '', CAST((SELECT COUNT(*) FROM hold_slots \
             WHERE ((scope = '{jti_scope}' AND owner = $4) OR (scope = '{visitor_scope}' AND owner = $2)) \
             AND live_until > $1) + (SELECT COUNT(*) FROM admissions_ended WHERE jti = $4) AS TEXT), '' \
             UNION ALL SELECT 's', seat_id, {effective}, '' FROM seats WHERE show_id = $5 AND seat_id IN ({params})",
            jti_scope = caps::JTI,
            visitor_scope = caps::VISITOR,
            effective = holds::EFFECTIVE,
            params = params.join(", ")
        ));
    }
    let rows: Vec<(String, String, String, String)> = match local {
        Some(local) => local.rows(&sql, &b, |x| {
            Ok((x.get(0)?, x.get(1)?, x.get(2)?, x.get(3)?))
        })?,
        None => sqlx::query_as_with(&sql, b.args()).fetch_all(db).await?,
    };
    let (mut stored, mut capped) = (None, false);
    let mut statuses = Map::new();
    for (t, a, b, c) in rows {
        match t.as_str() {
            "k" => stored = Some((a, b.parse::<i64>().unwrap_or_default(), c)),
            "c" => capped = b != "0",
            _ => {
                statuses.insert(a, Value::from(b));
            }
        }
    }
    let answer = claim::answer_of(stored, hash)?;
    let plain = answer.is_none() && !capped && !seats.is_empty() && statuses.len() == seats.len();
    // An unknown seat is the transaction's 422 (`unknown-seat`): not refused here.
    let taken =
        (!capped && statuses.len() == seats.len() && statuses.values().any(|s| s != "free"))
            .then_some(statuses);
    Ok(Seen {
        answer,
        taken,
        plain,
    })
}
