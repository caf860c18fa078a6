//! Cancelling a booking, in full or some of its seats: the one code behind a refund or a
//! chargeback made at the gateway (case B14: the webhook, confirmed by querying the gateway) and
//! an operator's refund or cancel from the back office.
//!
//! One transaction: the booking row is locked, the cancelled seats leave the booking
//! (`hold_seats.cancelled_at`) and go back to sale (`sold` → `free`, only where this hold still
//! has them) or the pool places or the interval stop counting, the booking becomes `cancelled` once nothing is
//! left, a `cancellations` row and its outbox message are written (an operator refund: the
//! gateway refund by amount under the idempotency key `cancellations.id`, then the fan's email;
//! otherwise the email at once), the freed seats are offered to the waitlist first, and an audit
//! row says who and why. A webhook's event id is recorded in the same transaction, and a booking
//! with nothing left to cancel changes nothing, so a refund delivered twice or out of order
//! changes state once.

use axum::http::StatusCode;
use sale_common::Problem;
use serde_json::{json, Value};

use crate::db::{self, Actor, Backend, Db, Tx};
use crate::error::ApiResult;
use crate::gateway::PayStatus;
use crate::inventory::{pools, resources, waitlist};
use crate::outbox::enqueue;
use crate::payments::confirm::record_event;

/// Who cancels.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// An operator in the back office; `refund`: give the money back at the gateway.
    Operator {
        /// The operator's name (kept with the cancellation and audited).
        name: &'a str,
        /// Refund the cancelled seats' price.
        refund: bool,
    },
    /// The gateway says refunded or disputed (asked, not taken from the webhook's body).
    Gateway {
        /// The gateway's status.
        status: PayStatus,
        /// The webhook event that reported it, de-duplicated in the same transaction.
        event: Option<&'a str>,
    },
}

/// A cancellation asked for.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// The booking.
    pub booking_id: &'a str,
    /// These seats of it; `None`: everything left (the pool places of a pool booking).
    pub seats: Option<Vec<String>>,
    /// Who.
    pub origin: Origin<'a>,
    /// Why (operator's words, or the gateway's event).
    pub reason: &'a str,
}

/// What [`cancel`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Cancelled {
    /// Cancelled now: the cancellation's JSON.
    Done(Value),
    /// Nothing left to cancel (already cancelled): nothing changed.
    Nothing,
    /// This webhook event was processed before.
    DuplicateEvent,
}

/// The booking row, locked: (hold, show, visitor, status, payment id, amount).
type Booking = (String, String, String, String, String, i64);

pub(crate) async fn lock_booking(tx: &mut Tx<'_>, id: &str) -> sqlx::Result<Option<Booking>> {
    // A no-op update locks the row on PostgreSQL (SQLite has one writer).
    sqlx::query_as(
        "UPDATE bookings SET status = status WHERE id = $1 RETURNING hold_id, show_id, visitor_id, status, \
         (SELECT COALESCE(payment_id, '') FROM holds WHERE holds.id = bookings.hold_id), \
         (SELECT amount_cents FROM holds WHERE holds.id = bookings.hold_id)",
    )
    .bind(id)
    .fetch_optional(&mut **tx)
    .await
}

/// Cancels per `ask` at `now_ms` (see the module's text). 404 for an unknown booking; 422 for
/// seats not in the booking or seats asked of a pool booking.
pub async fn cancel(db: &Db, ask: &Ask<'_>, now_ms: i64) -> ApiResult<Cancelled> {
    let pg = db::backend(db) == Backend::Postgres;
    let mut tx = crate::db::begin_write(db).await?;
    let done = cancel_in(&mut tx, pg, ask, now_ms).await?;
    tx.commit().await?;
    if let Cancelled::Done(v) = &done {
        let show = v["show"].as_str().unwrap_or_default().to_owned();
        let origin = v["origin"].as_str().unwrap_or_default().to_owned();
        metrics::counter!("bc_bookings_cancelled_total", "show" => show, "origin" => origin)
            .increment(1);
    }
    Ok(done)
}

/// [`cancel`] inside the caller's transaction (the caller commits on `Ok`, also for
/// [`Cancelled::Nothing`], which keeps a webhook's event id; an `Err` leaves it to roll back).
pub async fn cancel_in(
    tx: &mut Tx<'_>,
    pg: bool,
    ask: &Ask<'_>,
    now_ms: i64,
) -> ApiResult<Cancelled> {
    let Some((hold, show, visitor, status, payment_id, total)) =
        lock_booking(tx, ask.booking_id).await?
    else {
        let what = format!("booking {}", crate::error::clip(ask.booking_id));
        return Err(Problem::not_found(what).into());
    };
    if let Origin::Gateway {
        event: Some(ev), ..
    } = ask.origin
    {
        if !record_event(&mut **tx, ev, &payment_id, now_ms).await? {
            return Ok(Cancelled::DuplicateEvent);
        }
    }
    if status == "cancelled" {
        // Money back at the gateway for a booking an operator cancelled without refunding all
        // of it (a chargeback after a cancel without refund): the money the fan got back is
        // recorded, audited and told (third newcomer review: it was `unchanged`, the fan's
        // only email said "Not refunded."); else nothing changes. The caller commits: keeps
        // the event id, the delivery was handled.
        if let Origin::Gateway { .. } = ask.origin {
            let rest = total - money_back_so_far(tx, ask.booking_id).await?;
            if rest > 0 {
                let rec = Record {
                    booking_id: ask.booking_id,
                    hold: &hold,
                    show: &show,
                    visitor: &visitor,
                    payment_id: &payment_id,
                    seats: &[],
                    quantity: 0,
                    amount: rest,
                    origin: "gateway",
                    refund: "at-gateway",
                    operator: None,
                    reason: ask.reason,
                    booking_status: "cancelled",
                    mail: "gateway-refund-email",
                };
                let (_, body) = record(tx, &rec, now_ms).await?;
                let why = format!(
                    "{rest} cents back at the gateway after the cancellation: {}",
                    ask.reason
                );
                db::audit(tx, now_ms, &show, &hold, "refunded", Actor::Webhook, &why).await?;
                return Ok(Cancelled::Done(body));
            }
        }
        return Ok(Cancelled::Nothing);
    }
    let active: Vec<(String, i64)> = sqlx::query_as(
        "SELECT hs.seat_id, s.price_cents FROM hold_seats hs JOIN seats s ON s.show_id = hs.show_id AND s.seat_id = hs.seat_id \
         WHERE hs.hold_id = $1 AND hs.cancelled_at IS NULL ORDER BY hs.seat_id",
    )
    .bind(&hold)
    .fetch_all(&mut **tx)
    .await?;
    let pool = pools::of_hold(tx, &hold).await?;
    // A pool's places and an interval are cancelled whole.
    let whole_only = pool.is_some() || resources::of_hold(tx, pg, &hold).await?.is_some();
    let all: Vec<String> = sqlx::query_scalar("SELECT seat_id FROM hold_seats WHERE hold_id = $1")
        .bind(&hold)
        .fetch_all(&mut **tx)
        .await?;
    let chosen = match chosen(ask, &active, &all, whole_only) {
        Ok(c) => c,
        Err(p) => return Err(p.into()),
    };
    let whole = chosen.len() == active.len();
    if chosen.is_empty() && !(whole && whole_only) {
        return Ok(Cancelled::Nothing);
    }
    let seats: Vec<String> = chosen.iter().map(|c| c.0.clone()).collect();
    let already: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(amount_cents), 0) AS BIGINT) FROM cancellations WHERE booking_id = $1",
    )
    .bind(ask.booking_id)
    .fetch_one(&mut **tx)
    .await?;
    let amount = match ask.origin {
        // The provider gave back the whole payment: what the fan had not had back yet, also
        // the seats an operator cancelled without refund (third newcomer review: those were
        // left out, the email and the back office said half of what the gateway refunded).
        Origin::Gateway { .. } => total - money_back_so_far(tx, ask.booking_id).await?,
        _ if whole => total - already,
        _ => chosen.iter().map(|c| c.1).sum(),
    };
    free_seats(tx, pg, &show, &hold, &seats, now_ms).await?;
    let quantity = match (&pool, whole) {
        (Some((_, q, _)), true) => {
            pools::release(tx, pg, &show, &hold).await?;
            *q
        }
        _ => 0,
    };
    if whole {
        resources::release(tx, &hold).await?;
        sqlx::query("UPDATE bookings SET status = 'cancelled', cancelled_at = $1 WHERE id = $2")
            .bind(now_ms)
            .bind(ask.booking_id)
            .execute(&mut **tx)
            .await?;
    }
    let (origin, refund, actor, operator) = match ask.origin {
        Origin::Operator { name, refund } if refund && amount > 0 => {
            ("operator", "pending", Actor::Operator, Some(name))
        }
        Origin::Operator { name, .. } => ("operator", "none", Actor::Operator, Some(name)),
        Origin::Gateway { .. } => ("gateway", "at-gateway", Actor::Webhook, None),
    };
    let rec = Record {
        booking_id: ask.booking_id,
        hold: &hold,
        show: &show,
        visitor: &visitor,
        payment_id: &payment_id,
        seats: &seats,
        quantity,
        amount,
        origin,
        refund,
        operator,
        reason: ask.reason,
        booking_status: if whole { "cancelled" } else { "active" },
        mail: "cancellation-email",
    };
    let (id, mut body) = record(tx, &rec, now_ms).await?;
    let offered = offer(tx, pg, &show, &id, &seats, pool.as_ref(), whole, now_ms).await?;
    body["offered_to_waitlist"] = offered.into();
    let who = operator.map_or_else(|| "gateway".to_owned(), |o| format!("operator {o}"));
    let what = if seats.is_empty() {
        format!("{quantity} places")
    } else {
        seats.join(",")
    };
    let reason = format!("{what} by {who}, refund {refund}: {}", ask.reason);
    db::audit(tx, now_ms, &show, &hold, "cancelled", actor, &reason).await?;
    // A show reported sold out is open again once something is left to sell (newcomer
    // review: a cancelled booking's seats came back, the waiting room stayed sold out).
    crate::outbox::notify::reopen_if_freed(tx, &show, now_ms).await?;
    Ok(Cancelled::Done(body))
}

/// Money going back for a booking: one `cancellations` row (its id is the gateway refund's
/// idempotency key) and its outbox message, `booking-refund` when `refund` is `pending` (the
/// worker refunds `amount` at the gateway, then mails the fan) or the fan's
/// `cancellation-email` at once. Shared by a cancel and an oversold booking's compensation.
pub(crate) struct Record<'a> {
    pub booking_id: &'a str,
    pub hold: &'a str,
    pub show: &'a str,
    pub visitor: &'a str,
    pub payment_id: &'a str,
    pub seats: &'a [String],
    /// Pool places cancelled (0 for seats, or for a compensation).
    pub quantity: i64,
    /// Cents going back.
    pub amount: i64,
    /// `operator` or `gateway`.
    pub origin: &'a str,
    /// `pending`, `none` or `at-gateway`.
    pub refund: &'a str,
    pub operator: Option<&'a str>,
    pub reason: &'a str,
    /// The booking's status after this: `active` or `cancelled`.
    pub booking_status: &'a str,
    /// The fan's email, once the money is back: `cancellation-email` or `compensation-email`.
    pub mail: &'static str,
}

/// Writes `r` (see [`Record`]); returns the cancellation id and the JSON sent to the outbox.
pub(crate) async fn record(
    tx: &mut Tx<'_>,
    r: &Record<'_>,
    now_ms: i64,
) -> sqlx::Result<(String, Value)> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM cancellations WHERE booking_id = $1")
        .bind(r.booking_id)
        .fetch_one(&mut **tx)
        .await?;
    let id = format!("cancel-{}-{}", r.booking_id, n + 1);
    sqlx::query(
        "INSERT INTO cancellations (id, booking_id, hold_id, show_id, seats, quantity, amount_cents, origin, refund, operator, reason, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(&id).bind(r.booking_id).bind(r.hold).bind(r.show).bind(r.seats.join(",")).bind(r.quantity)
    .bind(r.amount).bind(r.origin).bind(r.refund).bind(r.operator).bind(r.reason).bind(now_ms)
    .execute(&mut **tx)
    .await?;
    let body = json!({"cancellation_id": id, "booking_id": r.booking_id, "hold_id": r.hold,
        "visitor_id": r.visitor, "show": r.show, "seats": r.seats, "quantity": r.quantity,
        "amount_cents": r.amount, "payment_id": r.payment_id, "origin": r.origin, "refund": r.refund,
        "reason": r.reason, "booking_status": r.booking_status, "mail": r.mail});
    let kind = if r.refund == "pending" {
        "booking-refund"
    } else {
        r.mail
    };
    enqueue(tx, &id, kind, r.show, &body, now_ms).await?;
    Ok((id, body))
}

/// The seats to cancel: all active ones, or the asked ones that are still active (422 for a
/// seat that was never in the booking, or for seats asked of a pool booking).
fn chosen(
    ask: &Ask<'_>,
    active: &[(String, i64)],
    all: &[String],
    whole_only: bool,
) -> Result<Vec<(String, i64)>, Problem> {
    let Some(asked) = &ask.seats else {
        return Ok(active.to_vec());
    };
    let unprocessable = |kind, title| Problem::new(StatusCode::UNPROCESSABLE_ENTITY, kind, title);
    if whole_only {
        return Err(unprocessable(
            "pool-booking",
            "A pool or interval booking is cancelled whole",
        )
        .detail("leave out seats to cancel the booking's places or interval"));
    }
    let foreign: Vec<&String> = asked.iter().filter(|s| !all.contains(s)).collect();
    if !foreign.is_empty() || asked.is_empty() {
        return Err(
            unprocessable("seats-not-in-booking", "Seats not in this booking")
                .with("seats", json!(foreign)),
        );
    }
    Ok(active
        .iter()
        .filter(|a| asked.contains(&a.0))
        .cloned()
        .collect())
}

/// The seats leave the booking and go back to sale where this hold still has them sold.
async fn free_seats(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    hold: &str,
    seats: &[String],
    now_ms: i64,
) -> sqlx::Result<()> {
    if seats.is_empty() {
        return Ok(());
    }
    crate::inventory::seatmap::touch();
    let list = db::params(3, seats.len());
    let sql = format!(
        "UPDATE hold_seats SET cancelled_at = $1 WHERE hold_id = $2 AND seat_id IN ({list})"
    );
    let mut q = sqlx::query(&sql).bind(now_ms).bind(hold);
    for s in seats {
        q = q.bind(s);
    }
    q.execute(&mut **tx).await?;
    db::lock_seats(tx, pg, show, seats).await?;
    let sql = format!(
        "UPDATE seats SET status = 'free', hold_id = NULL, hold_expires_at = NULL \
         WHERE show_id = $1 AND hold_id = $2 AND status = 'sold' AND seat_id IN ({list})"
    );
    let mut q = sqlx::query(&sql).bind(show).bind(hold);
    for s in seats {
        q = q.bind(s);
    }
    q.execute(&mut **tx).await?;
    Ok(())
}

/// Offers what was freed to the waitlist first: the seats to a fan waiting for seats, a whole
/// pool booking's places to a fan waiting for that pool. The offer's hold id, if any.
#[allow(clippy::too_many_arguments)]
async fn offer(
    tx: &mut Tx<'_>,
    pg: bool,
    show: &str,
    id: &str,
    seats: &[String],
    pool: Option<&(String, i64, i64)>,
    whole: bool,
    now_ms: i64,
) -> sqlx::Result<Option<String>> {
    if !seats.is_empty() {
        return waitlist::offer(tx, pg, show, id, seats, now_ms).await;
    }
    match pool {
        Some((p, q, _)) if whole => waitlist::offer_pool(tx, pg, show, id, p, *q, now_ms).await,
        _ => Ok(None),
    }
}

/// Cents of `booking` that went back to the fan so far or are on their way: its
/// cancellations refunded by the shop (done or pending) or at the gateway; not those cancelled
/// without refund.
async fn money_back_so_far(tx: &mut Tx<'_>, booking: &str) -> sqlx::Result<i64> {
    sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(amount_cents), 0) AS BIGINT) FROM cancellations \
         WHERE booking_id = $1 AND refund IN ('pending', 'refunded', 'at-gateway')",
    )
    .bind(booking)
    .fetch_one(&mut **tx)
    .await
}

/// Money went back at the gateway (refund or chargeback, confirmed by querying it) for the
/// PAID hold `hold_id`: its booking is cancelled whole, once.
pub async fn at_gateway(
    db: &Db,
    hold_id: &str,
    status: PayStatus,
    event: Option<&str>,
    now_ms: i64,
) -> ApiResult<Cancelled> {
    let booking: Option<String> = sqlx::query_scalar("SELECT id FROM bookings WHERE hold_id = $1")
        .bind(hold_id)
        .fetch_optional(db)
        .await?;
    let Some(booking) = booking else {
        return Ok(Cancelled::Nothing);
    };
    let reason = match status {
        PayStatus::Disputed => "charged back at the gateway (dispute)",
        _ => "refunded at the gateway",
    };
    let ask = Ask {
        booking_id: &booking,
        seats: None,
        origin: Origin::Gateway { status, event },
        reason,
    };
    cancel(db, &ask, now_ms).await
}

/// Whether a gateway status means the money went back to the fan.
pub fn money_back(status: PayStatus) -> bool {
    matches!(status, PayStatus::Refunded | PayStatus::Disputed)
}
