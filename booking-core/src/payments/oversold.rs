//! Acting on an oversold booking (issue 17 item 5, seed 001 "Overbooking Is a Policy": "every
//! customer moved or denied with what they were offered"). An operator decides once per
//! booking, in one transaction with the decision's row (`oversell_resolutions`, keyed by the
//! booking: a second identical request replays it, another one is refused) and its audit row
//! naming the operator and the pool's policy version:
//!
//! - `move`: the places go to another pool of the same show with free *physical* places (the
//!   guarded counter `taken + n <= capacity`, no oversell), the booking stays (the price paid
//!   too) and the fan is mailed (`oversell-moved-email`);
//! - `compensate`: an amount goes back at the gateway through the cancel's refund record
//!   ([`cancel::record`]: a `cancellations` row, the outbox's gateway refund under its id as
//!   idempotency key, then the fan's `compensation-email`); the booking stays;
//! - `refund`: the booking is cancelled and refunded through [`cancel::cancel_in`].
//!
//! Only a booking the oversold list marks `to_move` can be acted on.

use axum::http::StatusCode;
use sale_common::Problem;
use serde_json::{json, Value};

use crate::db::{self, Actor, Backend, Db, Tx};
use crate::error::ApiResult;
use crate::inventory::{oversell, pools};
use crate::outbox::enqueue;
use crate::payments::cancel::{self, Cancelled, Origin};

/// What the operator does with an oversold booking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Move the places to this pool of the same show.
    Move(String),
    /// Give back this many cents at the gateway; the booking stays.
    Compensate(i64),
    /// Cancel the booking and refund it in full.
    Refund,
}

impl Action {
    fn name(&self) -> &'static str {
        match self {
            Action::Move(_) => "move",
            Action::Compensate(_) => "compensate",
            Action::Refund => "refund",
        }
    }
}

fn problem(status: StatusCode, kind: &'static str, title: &str) -> Problem {
    Problem::new(status, kind, title.to_owned())
}

type Stored = (
    String,
    String,
    String,
    Option<String>,
    i64,
    Option<String>,
    i64,
    String,
    i64,
);

async fn stored(tx: &mut Tx<'_>, booking: &str) -> sqlx::Result<Option<Stored>> {
    sqlx::query_as(
        "SELECT show_id, pool_id, action, to_pool, amount_cents, cancellation_id, policy_version, operator, created_at \
         FROM oversell_resolutions WHERE booking_id = $1",
    )
    .bind(booking)
    .fetch_optional(&mut **tx)
    .await
}

fn answer(booking: &str, s: Stored, replayed: bool) -> Value {
    let (show, pool, action, to_pool, amount, cancellation, version, who, at) = s;
    json!({"booking_id": booking, "show": show, "pool": pool, "action": action, "to_pool": to_pool,
        "amount_cents": amount, "cancellation_id": cancellation, "policy_version": version,
        "operator": who, "decided_at": at, "replayed": replayed})
}

/// Resolves oversold `booking` with `action` by operator `who` at `now_ms` (see the module's
/// text). 404 unknown booking; 409 `already-resolved` (another action was taken),
/// `pool-full` (the target pool has no free physical places); 422 `not-oversold`,
/// `compensation-above-paid`, `unknown-pool`.
pub async fn resolve(
    db: &Db,
    booking: &str,
    action: &Action,
    who: &str,
    now_ms: i64,
) -> ApiResult<Value> {
    let pg = db::backend(db) == Backend::Postgres;
    let mut tx = db::begin_write(db).await?;
    let Some((hold, show, _, status, _, total)) = cancel::lock_booking(&mut tx, booking).await?
    else {
        return Err(Problem::not_found(format!("booking {}", crate::error::clip(booking))).into());
    };
    if let Some(s) = stored(&mut tx, booking).await? {
        if s.2 == action.name() {
            return Ok(answer(booking, s, true));
        }
        return Err(problem(
            StatusCode::CONFLICT,
            "already-resolved",
            "This oversold booking was resolved already",
        )
        .with("resolution", answer(booking, s, false))
        .into());
    }
    let not_oversold = || {
        problem(StatusCode::UNPROCESSABLE_ENTITY, "not-oversold", "This booking is not one to move")
        .detail("only a booking the oversold list marks to_move can be moved, compensated or refunded here")
    };
    let Some((pool, qty, _)) = pools::of_hold(&mut tx, &hold).await? else {
        return Err(not_oversold().into());
    };
    let list = oversell::oversold(&mut tx, &show, Some(&pool)).await?;
    let Some(entry) = list.first() else {
        return Err(not_oversold().into());
    };
    let marked = entry["bookings"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|b| b["booking_id"] == booking && b["to_move"] == true);
    if status != "active" || !marked {
        return Err(not_oversold().into());
    }
    let version = entry["policy_version"].as_i64().unwrap_or(0);
    let why = format!(
        "oversold pool {pool}: {} by operator {who} under policy v{version}",
        action.name()
    );
    let (to_pool, amount, cancellation) = match action {
        Action::Move(to) => {
            move_places(&mut tx, pg, &show, &hold, &pool, to, qty).await?;
            let (_, _, visitor, _, _, _) = cancel::lock_booking(&mut tx, booking)
                .await?
                .expect("locked above");
            let mail = json!({"booking_id": booking, "hold_id": hold, "visitor_id": visitor, "show": show,
                "from_pool": pool, "to_pool": to, "quantity": qty, "reason": why});
            enqueue(
                &mut tx,
                booking,
                "oversell-moved-email",
                &show,
                &mail,
                now_ms,
            )
            .await?;
            (Some(to.clone()), 0, None)
        }
        Action::Compensate(cents) => {
            let id = compensate(&mut tx, booking, *cents, total, who, &why, now_ms).await?;
            (None, *cents, Some(id))
        }
        Action::Refund => {
            let ask = cancel::Ask {
                booking_id: booking,
                seats: None,
                origin: Origin::Operator {
                    name: who,
                    refund: true,
                },
                reason: &why,
            };
            let Cancelled::Done(v) = cancel::cancel_in(&mut tx, pg, &ask, now_ms).await? else {
                return Err(not_oversold().into());
            };
            (
                None,
                v["amount_cents"].as_i64().unwrap_or(0),
                v["cancellation_id"].as_str().map(str::to_owned),
            )
        }
    };
    sqlx::query(
        "INSERT INTO oversell_resolutions (booking_id, show_id, pool_id, action, to_pool, amount_cents, cancellation_id, policy_version, operator, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(booking).bind(&show).bind(&pool).bind(action.name()).bind(&to_pool).bind(amount)
    .bind(&cancellation).bind(version).bind(who).bind(now_ms)
    .execute(&mut *tx)
    .await?;
    let detail = match action {
        Action::Move(to) => format!("{why}: {qty} places moved to {to}"),
        _ => format!(
            "{why}: {amount} cents back, {}",
            cancellation.as_deref().unwrap_or("")
        ),
    };
    db::audit(
        &mut tx,
        now_ms,
        &show,
        &hold,
        &format!("oversell-{}", action.name()),
        Actor::Operator,
        &detail,
    )
    .await?;
    let s = stored(&mut tx, booking).await?.expect("just written");
    tx.commit().await?;
    metrics::counter!("bc_oversell_resolutions_total", "show" => show, "action" => action.name())
        .increment(1);
    Ok(answer(booking, s, false))
}

/// The places leave `from` and take free physical places of `to` (pool rows locked in name
/// order on PostgreSQL, so two opposite moves cannot deadlock).
async fn move_places(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold: &str,
    from: &str,
    to: &str,
    qty: i64,
) -> ApiResult<()> {
    if to == from {
        return Err(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown-pool",
            "Move to another pool of this show",
        )
        .into());
    }
    if pg {
        sqlx::query("SELECT pool_id FROM pools WHERE show_id = $1 AND pool_id IN ($2, $3) ORDER BY pool_id FOR UPDATE")
            .bind(show).bind(from).bind(to)
            .fetch_all(&mut **tx)
            .await?;
    }
    let exists: Option<i64> =
        sqlx::query_scalar("SELECT capacity FROM pools WHERE show_id = $1 AND pool_id = $2")
            .bind(show)
            .bind(to)
            .fetch_optional(&mut **tx)
            .await?;
    if exists.is_none() {
        return Err(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown-pool",
            "No such pool in this show",
        )
        .with("pool", to)
        .into());
    }
    if !pools::take(tx, pg, show, to, qty, false).await? {
        return Err(problem(
            StatusCode::CONFLICT,
            "pool-full",
            "The target pool has no free places for this booking",
        )
        .with("pool", to)
        .with("quantity", qty)
        .into());
    }
    pools::release(tx, pg, show, hold).await?;
    sqlx::query("UPDATE hold_pools SET pool_id = $1, counted = 1 WHERE hold_id = $2")
        .bind(to)
        .bind(hold)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Records a compensation of `cents` (at most what is left of the booking's `total` after
/// earlier refunds) as a pending refund; the cancellation id.
#[allow(clippy::too_many_arguments)]
async fn compensate(
    tx: &mut Tx<'_>,
    booking: &str,
    cents: i64,
    total: i64,
    who: &str,
    why: &str,
    now_ms: i64,
) -> ApiResult<String> {
    let (hold, show, visitor, _, payment_id, _) = cancel::lock_booking(tx, booking)
        .await?
        .expect("locked above");
    let already: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(amount_cents), 0) AS BIGINT) FROM cancellations WHERE booking_id = $1",
    )
    .bind(booking)
    .fetch_one(&mut **tx)
    .await?;
    // Less than what is left: a compensation of the whole remainder would be a full refund,
    // and the gateway's `payment.refunded` for a fully refunded payment is a cancellation made
    // at the gateway (case B14), which cancels the booking the compensation was meant to keep.
    if cents >= total - already {
        return Err(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "compensation-above-paid",
            "A compensation goes back on the fan's payment and must leave part of it: to give it all back, refund the booking",
        )
        .with("max_cents", (total - already - 1).max(0))
        .into());
    }
    let rec = cancel::Record {
        booking_id: booking,
        hold: &hold,
        show: &show,
        visitor: &visitor,
        payment_id: &payment_id,
        seats: &[],
        quantity: 0,
        amount: cents,
        origin: "operator",
        refund: "pending",
        operator: Some(who),
        reason: why,
        booking_status: "active",
        mail: "compensation-email",
    };
    let (id, _) = cancel::record(tx, &rec, now_ms).await?;
    Ok(id)
}
