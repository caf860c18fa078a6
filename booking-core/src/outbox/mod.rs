//! The outbox (DESIGN "Payments"): messages to the world written in the transaction that caused
//! them and sent at least once afterwards. [`enqueue`] is the one writer of the `outbox` table
//! (one message per `(ref_id, kind)`); [`notify`] queues and sends notices to the waiting room
//! (session end, sold out); [`mail`] is where emails go; [`worker`] is the loop that claims and
//! sends due messages (emails, refunds at the gateway, waiting-room notices).
//!
//! Layer: above `db`, `config` and `gateway`; below `inventory` and `payments`, which queue
//! messages here. Uses nothing from them (the sold-out check in [`notify`] counts unsold seats
//! and pools with one query of its own).

pub mod mail;
pub mod notify;
pub mod worker;

use crate::db::{Binds, Tx};

pub use worker::{Outbox, Outcome};

/// Adds one outbox message (idempotent on `(ref_id, kind)`); true when inserted.
pub async fn enqueue(
    tx: &mut Tx<'_>,
    ref_id: &str,
    kind: &str,
    show_id: &str,
    payload: &serde_json::Value,
    now_ms: i64,
) -> sqlx::Result<bool> {
    let mut b = Binds::default();
    let (r, show, at) = (
        b.push(ref_id.to_owned()),
        b.push(show_id.to_owned()),
        b.push(now_ms),
    );
    let sql = enqueue_sql(&mut b, &r, kind, &show, payload, &at);
    let n = sqlx::query_with(&sql, b.args())
        .execute(&mut **tx)
        .await?
        .rows_affected();
    Ok(n == 1)
}

/// [`enqueue_sql`] written only when `condition` (SQL) holds.
pub fn enqueue_when_sql(
    b: &mut Binds,
    ref_id: &str,
    kind: &str,
    show_id: &str,
    payload: &serde_json::Value,
    at_ms: &str,
    condition: &str,
) -> String {
    format!(
        "INSERT INTO outbox (ref_id, kind, show_id, payload, created_at) SELECT {ref_id}, {}, {show_id}, {}, {at_ms} \
         WHERE {condition} ON CONFLICT (ref_id, kind) DO NOTHING",
        b.push(kind.to_owned()),
        b.push(payload.to_string())
    )
}

/// The SQL of [`enqueue`]: `ref_id`, `show_id` and `at_ms` are placeholders already bound in
/// `b`; the kind and payload are bound here (for [`crate::db::write_all`]).
pub fn enqueue_sql(
    b: &mut Binds,
    ref_id: &str,
    kind: &str,
    show_id: &str,
    payload: &serde_json::Value,
    at_ms: &str,
) -> String {
    enqueue_when_sql(b, ref_id, kind, show_id, payload, at_ms, "1 = 1")
}
