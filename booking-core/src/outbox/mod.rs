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

use crate::db::Tx;

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
    let n = sqlx::query(
        "INSERT INTO outbox (ref_id, kind, show_id, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (ref_id, kind) DO NOTHING",
    )
    .bind(ref_id)
    .bind(kind)
    .bind(show_id)
    .bind(payload.to_string())
    .bind(now_ms)
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(n == 1)
}
