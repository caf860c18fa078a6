//! Payment attempts per hold (issue 18 item 1; DECISIONS "Booking core": paying again after a
//! cancel). `holds.payment_id` is the hold's current attempt, the only one the callback, the
//! webhook, the confirm paths and the reconciler act on; `payment_attempts` keeps every attempt.
//!
//! Paying again ([`pay_again`]) names the attempt it replaces: the gateway must say that attempt
//! can no longer complete (a void answers cancelled, failed or expired), then one guarded update
//! switches the hold from that attempt to a new one (`… AND payment_id = <old>`), so two calls
//! replacing the same attempt make exactly one new attempt. The superseded attempt is voided at
//! the gateway once more by the reconciler ([`void_superseded`]), which never settles it.

use axum::http::StatusCode;
use sale_common::Problem;
use serde_json::Value;

use crate::db::{self, Actor, Db};
use crate::error::ApiResult;
use crate::gateway::{PayStatus, PaymentState};
use crate::inventory::holds::{self, Hold};
use crate::state::AppState;

/// Superseded attempts voided per reconciler step, at most.
const VOID_BATCH: i64 = 16;

/// What the gateway created for a hold whose `payment_id` was claimed as `token`
/// (`pending:…`): its id, signature and checkout URL.
pub struct NewPayment<'a> {
    /// The hold.
    pub hold_id: &'a str,
    /// Its show (for the audit row).
    pub show_id: &'a str,
    /// The claim the hold's `payment_id` holds until now.
    pub token: &'a str,
    /// The gateway's payment id.
    pub payment_id: &'a str,
    /// Its per-payment signature.
    pub signature: &'a str,
    /// Where the fan pays.
    pub checkout_url: &'a str,
}

/// Stores a payment the gateway created: on the hold (in place of its claim), as the hold's
/// current attempt (numbered after its earlier attempts), and in an audit row
/// (`payment-created`, the payment id as its reason), all only while the hold still carries
/// the claim. The attempt's number, or `None` when the claim was no longer the hold's (taken
/// over as abandoned, `super::PAYMENT_CLAIM_STALE_MS`, or the hold released): nothing written.
/// On PostgreSQL one statement with no `BEGIN`/`COMMIT` (the hold's update and the audit row as
/// data-modifying CTEs: they touch other rows than the attempt's insert); on SQLite one call in
/// a transaction. In the seed rehearsal this was five round trips for each of ~13,000 payments.
pub async fn store_created(db: &Db, p: &NewPayment<'_>, now_ms: i64) -> sqlx::Result<Option<i64>> {
    let mut b = db::Binds::default();
    let (pid, sig, url, hold, token, at, show) = (
        b.push(p.payment_id.to_owned()),
        b.push(p.signature.to_owned()),
        b.push(p.checkout_url.to_owned()),
        b.push(p.hold_id.to_owned()),
        b.push(p.token.to_owned()),
        b.push(now_ms),
        b.push(p.show_id.to_owned()),
    );
    let pg = db::backend(db) == db::Backend::Postgres;
    let on_hold = format!(
        "UPDATE holds SET payment_id = {pid}, payment_signature = {sig}, checkout_url = {url} \
         WHERE id = {hold} AND status = 'HELD' AND payment_id = {token}{}",
        if pg { " RETURNING id" } else { "" }
    );
    // Whether the hold took the payment: on PostgreSQL the update's own rows (`w0`: the CTEs
    // share one snapshot, which does not see the update); on SQLite, whose statements run one
    // after another, the hold as it is now (the gateway's payment id is new to every hold).
    let took = if pg {
        "EXISTS (SELECT 1 FROM w0)".to_owned()
    } else {
        format!("EXISTS (SELECT 1 FROM holds WHERE id = {hold} AND payment_id = {pid})")
    };
    let audit = db::audit_sql(
        &mut b,
        &at,
        &show,
        &hold,
        "payment-created",
        Actor::Api,
        p.payment_id,
        Some(&took),
    );
    // The next number and the row in one statement (an aggregate answers one row even over no
    // rows: `HAVING` makes it none when the hold did not take the payment).
    let attempt = format!(
        "INSERT INTO payment_attempts (payment_id, hold_id, attempt, status, signature, created_at) \
         SELECT {pid}, {hold}, COALESCE(MAX(attempt), 0) + 1, 'current', {sig}, {at} \
         FROM payment_attempts WHERE hold_id = {hold} HAVING {took} \
         RETURNING CAST(attempt AS BIGINT)"
    );
    if pg {
        let ctes: Vec<String> = db::data_ctes(&[on_hold, audit]).collect();
        let sql = format!("WITH {} {attempt}", ctes.join(", "));
        return sqlx::query_scalar_with(&sql, b.args())
            .fetch_optional(db)
            .await;
    }
    // SQLite: the three statements in one call to the connection's worker, in a writer's
    // transaction (`BEGIN IMMEDIATE`); the row is the last statement's (`fetch_all` runs
    // every statement; `fetch_one` answered `RowNotFound` from the first).
    let mut tx = db::begin_write(db).await?;
    let sql = format!("{on_hold}; {audit}; {attempt}");
    let rows: Vec<i64> = sqlx::query_scalar_with(&sql, b.args())
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(rows.first().copied())
}

/// Remembers the gateway's final answer (cancelled, failed, expired) about an attempt: the
/// booking page offers paying again from it.
pub(crate) async fn record_outcome(db: &Db, payment_id: &str, st: PayStatus) -> sqlx::Result<()> {
    sqlx::query("UPDATE payment_attempts SET gateway_status = $1 WHERE payment_id = $2")
        .bind(status_name(st))
        .bind(payment_id)
        .execute(db)
        .await?;
    Ok(())
}

/// The current attempt's number and last known final answer, for the fan's view of the hold.
pub async fn current(db: &Db, payment_id: &str) -> sqlx::Result<Option<(i64, Option<String>)>> {
    sqlx::query_as("SELECT attempt, gateway_status FROM payment_attempts WHERE payment_id = $1")
        .bind(payment_id)
        .fetch_optional(db)
        .await
}

/// A superseded attempt's hold and signature (a callback from an old checkout tab).
pub async fn superseded(db: &Db, payment_id: &str) -> sqlx::Result<Option<(String, String)>> {
    sqlx::query_as(
        "SELECT hold_id, COALESCE(signature, '') FROM payment_attempts \
         WHERE payment_id = $1 AND status <> 'current'",
    )
    .bind(payment_id)
    .fetch_optional(db)
    .await
}

/// The gateway's lowercase name of a status (`cancelled`, API.md).
fn status_name(st: PayStatus) -> String {
    format!("{st:?}").to_lowercase()
}

fn in_progress(detail: &str) -> ApiResult<Value> {
    Err(Problem::new(
        StatusCode::CONFLICT,
        "payment-in-progress",
        "Payment is being created",
    )
    .detail(detail)
    .retry_after(1)
    .into())
}

/// `POST /api/holds/{hold}/pay` with `{"replaces": "<payment id>"}`: a new attempt for the same
/// hold after `old` died (cancelled or failed at the gateway). The hold must still be payable
/// (HELD, before the last moment to start paying). When another call replaced `old` already,
/// the answer is that call's attempt; `old` must be one of the hold's attempts, else
/// `422 unknown-attempt`.
pub async fn pay_again(state: &AppState, hold: &Hold, old: &str) -> ApiResult<Value> {
    super::payable(state, hold)?;
    let mine: bool = sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(*) FROM payment_attempts WHERE hold_id = $1 AND payment_id = $2",
    )
    .bind(&hold.id)
    .bind(old)
    .fetch_one(&state.db)
    .await?
        > 0;
    if !mine {
        return Err(super::unprocessable_attempt(old));
    }
    match hold.payment_id.as_deref() {
        None => return super::start(state, hold).await,
        Some(cur) if super::claim_is_stale(cur, state.clock.now_ms()) => {
            return super::start(state, hold).await
        }
        Some(cur) if cur.starts_with("pending:") => {
            return in_progress("another payment for this hold is being created")
        }
        Some(cur) if cur != old => return super::current_answer(state, hold).await,
        Some(_) => {}
    }
    // The old attempt must be over at the gateway: a void cancels it unless it completed.
    match state.gateway.void(old).await {
        Ok(s) if s.status.is_dead() => record_outcome(&state.db, old, s.status).await?,
        Ok(PaymentState {
            status: PayStatus::Completed,
            transaction_id,
            ..
        }) => {
            super::paid_on_void(state, hold, old, transaction_id).await?;
            return Err(super::paid_problem().into());
        }
        Ok(_) => return in_progress("the current payment may still complete"),
        Err(e) => {
            tracing::warn!(error = %e, hold = %hold.id, "gateway void failed before paying again");
            return Err(super::gateway_unavailable(StatusCode::SERVICE_UNAVAILABLE).into());
        }
    }
    let now = state.clock.now_ms();
    let token = super::claim_token(now);
    let mut tx = db::begin_write(&state.db).await?;
    let switched = sqlx::query(
        "UPDATE holds SET payment_id = $1, payment_signature = NULL, checkout_url = NULL, \
         executing_at = NULL WHERE id = $2 AND status = 'HELD' AND payment_id = $3",
    )
    .bind(&token)
    .bind(&hold.id)
    .bind(old)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if switched == 0 {
        // Another call replaced `old` first (or the hold ended meanwhile): answer as it is now.
        tx.rollback().await?;
        let Some(now_hold) = holds::load(&state.db, &hold.id).await? else {
            return Err(Problem::not_found(format!("hold {}", hold.id)).into());
        };
        super::payable(state, &now_hold)?;
        return match now_hold.payment_id.as_deref() {
            Some(p) if p.starts_with("pending:") => {
                in_progress("another payment for this hold is being created")
            }
            _ => super::current_answer(state, &now_hold).await,
        };
    }
    sqlx::query(
        "UPDATE payment_attempts SET status = 'superseded', superseded_at = $1 WHERE payment_id = $2",
    )
    .bind(now)
    .bind(old)
    .execute(&mut *tx)
    .await?;
    db::audit(
        &mut tx,
        now,
        &hold.show_id,
        &hold.id,
        "payment-superseded",
        Actor::Api,
        old,
    )
    .await?;
    tx.commit().await?;
    super::create_at_gateway(state, hold, &token).await
}

/// What [`void_superseded`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct VoidOutcome {
    /// Superseded attempts looked at.
    pub examined: usize,
    /// Confirmed over at the gateway (now `voided`).
    pub voided: usize,
    /// The gateway said completed: an alert for an operator (`alerted`).
    pub alerted: usize,
}

/// The reconciler's sweep over superseded attempts: void each at the gateway; an attempt the
/// gateway calls cancelled, failed or expired is `voided`; one it calls completed (money taken
/// on an attempt the hold no longer uses) raises an alert and is never confirmed; no answer
/// leaves it for the next step.
pub async fn void_superseded(state: &AppState, now_ms: i64) -> ApiResult<VoidOutcome> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT payment_id, hold_id FROM payment_attempts WHERE status = 'superseded' \
         ORDER BY superseded_at ASC, payment_id ASC LIMIT $1",
    )
    .bind(VOID_BATCH)
    .fetch_all(&state.db)
    .await?;
    let mut out = VoidOutcome::default();
    for (pid, hold_id) in rows {
        out.examined += 1;
        match state.gateway.void(&pid).await {
            Ok(s) if s.status.is_dead() => {
                sqlx::query(
                    "UPDATE payment_attempts SET status = 'voided', voided_at = $1, \
                     gateway_status = $2 WHERE payment_id = $3 AND status = 'superseded'",
                )
                .bind(now_ms)
                .bind(status_name(s.status))
                .bind(&pid)
                .execute(&state.db)
                .await?;
                out.voided += 1;
            }
            Ok(s)
                if matches!(
                    s.status,
                    PayStatus::Completed | PayStatus::Refunded | PayStatus::Disputed
                ) =>
            {
                alert_superseded_paid(state, &hold_id, &pid, s.status, now_ms).await?;
                out.alerted += 1;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(payment = %pid, error = %e, "void of a superseded attempt failed; retried next step")
            }
        }
    }
    Ok(out)
}

async fn alert_superseded_paid(
    state: &AppState,
    hold_id: &str,
    pid: &str,
    st: PayStatus,
    now_ms: i64,
) -> ApiResult<()> {
    tracing::error!(hold = %hold_id, payment = %pid, "a superseded payment attempt completed: refund it by hand");
    let show: Option<String> = sqlx::query_scalar("SELECT show_id FROM holds WHERE id = $1")
        .bind(hold_id)
        .fetch_optional(&state.db)
        .await?;
    let mut tx = db::begin_write(&state.db).await?;
    sqlx::query(
        "INSERT INTO alerts (at, show_id, hold_id, kind, message) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (hold_id) DO NOTHING",
    )
    .bind(now_ms)
    .bind(show.as_deref())
    .bind(hold_id)
    .bind("superseded-attempt-paid")
    .bind(format!(
        "payment {pid} was replaced by a new attempt but the gateway says {}: refund it",
        status_name(st)
    ))
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE payment_attempts SET status = 'alerted', gateway_status = $1 WHERE payment_id = $2",
    )
    .bind(status_name(st))
    .bind(pid)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}
