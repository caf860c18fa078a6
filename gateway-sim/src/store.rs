//! Payments and their state machine: `created` → `approved` (fan clicked Pay) → `completed`
//! (merchant executed, or by itself after the deadline under the late-success fault) →
//! `refunded` (refunds by amount, each under its own idempotency key, until nothing is left) or
//! `disputed` (a chargeback); or `cancelled` (fan or merchant void) / `failed` / `expired`.
//! Every change queues a webhook event for the dispatcher (the `webhooks` module), and so does
//! every partial refund (`payment.refunded` while the payment stays `completed`).

use std::collections::HashMap;
use std::sync::Mutex;

use hmac::{Hmac, Mac};
use sale_common::{Secret, SharedClock};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::Sha256;

use crate::faults::{FaultRng, Faults};

/// Where a payment stands at the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PaymentStatus {
    /// Created by the merchant; the fan has not decided.
    Created,
    /// The fan clicked Pay; the merchant must execute.
    Approved,
    /// Executed: money taken; has a transaction id.
    Completed,
    /// The fan clicked Cancel, or the merchant voided it.
    Cancelled,
    /// Execute failed (fault injection).
    Failed,
    /// Not paid before `expires_at`.
    Expired,
    /// Completed, then refunded in full (one refund or several partial ones).
    Refunded,
    /// Completed, then charged back by the fan's bank (a dispute).
    Disputed,
}

/// One refund of a payment.
#[derive(Debug, Clone, Serialize)]
pub struct Refund {
    /// Gateway refund id (`re_<hex>`).
    pub refund_id: String,
    /// Amount refunded, cents.
    pub amount_cents: i64,
    /// The merchant's idempotency key (a retry with it answers this refund).
    #[serde(skip)]
    pub key: String,
}

/// Why a refund was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefundRefused {
    /// The payment is not completed (or fully refunded, or disputed).
    Status(PaymentStatus),
    /// More than what is left to refund.
    TooMuch {
        /// Cents left to refund.
        left: i64,
    },
}

/// One payment held by the simulator.
#[derive(Debug, Clone, Serialize)]
pub struct Payment {
    /// Gateway payment id (`pay_<hex>`).
    pub payment_id: String,
    /// Current status.
    pub status: PaymentStatus,
    /// Present once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    /// The latest refund's id, once refunded (in part or in full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_id: Option<String>,
    /// Sum of the refunds, cents.
    pub refunded_cents: i64,
    /// Every refund, oldest first.
    pub refunds: Vec<Refund>,
    /// Amount, cents.
    pub amount_cents: i64,
    /// ISO 4217 currency of the amount.
    pub currency: String,
    /// Merchant reference (the hold id).
    pub reference: String,
    /// Where the browser goes after Pay/Cancel.
    #[serde(skip)]
    pub return_url: String,
    /// Where signed events are posted, if anywhere.
    #[serde(skip)]
    pub notify_url: Option<String>,
    /// Deadline to pay, epoch seconds.
    pub expires_at: i64,
    /// Late-success fault: completes by itself at this epoch second.
    #[serde(skip)]
    pub completes_at: Option<i64>,
}

/// An event waiting for the webhook dispatcher.
#[derive(Debug, Clone)]
pub struct Outgoing {
    /// The event JSON (`{"id","type","created","data":{…}}`).
    pub event: serde_json::Value,
    /// Target URL.
    pub url: String,
    /// Faults of the payment at the time of the event.
    pub faults: Faults,
}

/// What an execute decided.
#[derive(Debug)]
pub enum ExecuteOutcome {
    /// Answer now with this payment.
    Now(Payment),
    /// Completed, but answer only after the timeout sleep (fault).
    Late(Payment),
}

/// The in-memory payment store, its faults, its randomness and its event queue.
#[derive(Debug)]
pub struct Store {
    payments: Mutex<HashMap<String, Payment>>,
    faults: Mutex<Faults>,
    payment_faults: Mutex<HashMap<String, Faults>>,
    events: Mutex<Vec<Outgoing>>,
    rng: FaultRng,
    clock: SharedClock,
    secret: Secret,
    late_delay_secs: i64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// An empty store; late successes complete `late_delay_secs` after the session deadline.
    pub fn new(clock: SharedClock, rng: FaultRng, secret: Secret, late_delay_secs: i64) -> Self {
        Self {
            payments: Mutex::new(HashMap::new()),
            faults: Mutex::new(Faults::default()),
            payment_faults: Mutex::new(HashMap::new()),
            events: Mutex::new(Vec::new()),
            rng,
            clock,
            secret,
            late_delay_secs,
        }
    }

    /// The randomness (faults and ids).
    pub fn rng(&self) -> &FaultRng {
        &self.rng
    }

    /// Current global faults.
    pub fn faults(&self) -> Faults {
        *lock(&self.faults)
    }

    /// Replaces the global faults.
    pub fn set_faults(&self, f: Faults) {
        *lock(&self.faults) = f;
    }

    /// Faults of payment `id`: its own set if one was given, else the global set.
    pub fn faults_for(&self, id: &str) -> Faults {
        lock(&self.payment_faults)
            .get(id)
            .copied()
            .unwrap_or_else(|| self.faults())
    }

    /// Sets faults for one payment.
    pub fn set_payment_faults(&self, id: &str, f: Faults) {
        lock(&self.payment_faults).insert(id.to_owned(), f);
    }

    /// hex HMAC-SHA256(secret, payment_id) (API.md).
    pub fn sign(&self, payment_id: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.expose().as_bytes())
            .expect("HMAC takes any key length");
        mac.update(payment_id.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }

    fn emit(&self, p: &Payment) {
        let status = serde_json::to_value(p.status).unwrap_or_default();
        self.emit_as(p, status.as_str().unwrap_or("unknown"));
    }

    /// Queues the event `payment.{kind}` about `p`.
    fn emit_as(&self, p: &Payment, kind: &str) {
        let Some(url) = p.notify_url.clone() else {
            return;
        };
        let status = serde_json::to_value(p.status).unwrap_or_default();
        let event = json!({
            "id": format!("evt_{}", self.rng.hex_id(10)),
            "type": format!("payment.{kind}"),
            "created": self.clock.now_secs(),
            "data": {"payment_id": p.payment_id, "status": status, "transaction_id": p.transaction_id,
                     "reference": p.reference, "amount_cents": p.amount_cents,
                     "refund_id": p.refund_id, "refunded_cents": p.refunded_cents},
        });
        let faults = self.faults_for(&p.payment_id);
        lock(&self.events).push(Outgoing { event, url, faults });
    }

    /// Applies time: expiry of undecided payments, late successes that are due.
    fn advance(&self, p: &mut Payment, now: i64) {
        if p.status == PaymentStatus::Created && now >= p.expires_at {
            p.status = PaymentStatus::Expired;
            self.emit(p);
        }
        if p.status == PaymentStatus::Approved && p.completes_at.is_some_and(|t| now >= t) {
            p.status = PaymentStatus::Completed;
            p.transaction_id = Some(format!("txn_{}", self.rng.hex_id(10)));
            self.emit(p);
        }
    }

    fn with<R>(&self, id: &str, f: impl FnOnce(&mut Payment) -> R) -> Option<R> {
        let now = self.clock.now_secs();
        let mut map = lock(&self.payments);
        let p = map.get_mut(id)?;
        self.advance(p, now);
        let before = p.status;
        let r = f(p);
        if p.status != before {
            self.emit(p);
        }
        Some(r)
    }

    /// Applies due late successes to every payment (the dispatcher calls this every tick).
    pub fn tick(&self) {
        let now = self.clock.now_secs();
        let mut map = lock(&self.payments);
        for p in map.values_mut() {
            self.advance(p, now);
        }
    }

    /// Takes the queued events.
    pub fn drain_events(&self) -> Vec<Outgoing> {
        std::mem::take(&mut *lock(&self.events))
    }

    /// Creates a payment and returns it.
    pub fn create(
        &self,
        amount_cents: i64,
        currency: String,
        reference: String,
        return_url: String,
        notify_url: Option<String>,
        expires_at: i64,
    ) -> Payment {
        let p = Payment {
            payment_id: format!("pay_{}", self.rng.hex_id(12)),
            status: PaymentStatus::Created,
            transaction_id: None,
            refund_id: None,
            refunded_cents: 0,
            refunds: Vec::new(),
            amount_cents,
            currency,
            reference,
            return_url,
            notify_url,
            expires_at,
            completes_at: None,
        };
        lock(&self.payments).insert(p.payment_id.clone(), p.clone());
        p
    }

    /// The payment as it stands now (time applied).
    pub fn get(&self, id: &str) -> Option<Payment> {
        self.with(id, |p| p.clone())
    }

    /// Every payment (simulator back office).
    pub fn all(&self) -> Vec<Payment> {
        self.tick();
        let mut v: Vec<Payment> = lock(&self.payments).values().cloned().collect();
        v.sort_by(|a, b| a.payment_id.cmp(&b.payment_id));
        v
    }

    /// The fan's Pay click: `created` → `approved` (or `cancelled` by the cancel fault; with the
    /// late-success fault it will complete by itself after the deadline).
    pub fn pay(&self, id: &str) -> Option<Payment> {
        let f = self.faults_for(id);
        let cancel = self.rng.fires(f.cancel_rate);
        let late = self.rng.fires(f.late_success_rate);
        let delay = self.late_delay_secs;
        self.with(id, |p| {
            if p.status == PaymentStatus::Created {
                p.status = if cancel {
                    PaymentStatus::Cancelled
                } else {
                    PaymentStatus::Approved
                };
                if late && !cancel {
                    p.completes_at = Some(p.expires_at + delay);
                }
            }
            p.clone()
        })
    }

    /// The fan's Cancel click or the merchant's void: `created`/`approved` → `cancelled`.
    pub fn cancel(&self, id: &str) -> Option<Payment> {
        self.with(id, |p| {
            if matches!(p.status, PaymentStatus::Created | PaymentStatus::Approved) {
                p.status = PaymentStatus::Cancelled;
                p.completes_at = None;
            }
            p.clone()
        })
    }

    /// Merchant execute: `approved` → `completed` (or `failed` by fault); `completed` stays
    /// completed with the same transaction id; a late-success payment stays `approved`. `Err`
    /// carries the status that forbids executing.
    pub fn execute(&self, id: &str) -> Option<Result<ExecuteOutcome, PaymentStatus>> {
        let f = self.faults_for(id);
        let fail = self.rng.fires(f.fail_rate);
        let late = self.rng.fires(f.execute_timeout_rate);
        let txn = format!("txn_{}", self.rng.hex_id(10));
        self.with(id, |p| match p.status {
            PaymentStatus::Approved if p.completes_at.is_some() => {
                Ok(ExecuteOutcome::Now(p.clone()))
            }
            PaymentStatus::Approved if fail => {
                p.status = PaymentStatus::Failed;
                Ok(ExecuteOutcome::Now(p.clone()))
            }
            PaymentStatus::Approved => {
                p.status = PaymentStatus::Completed;
                p.transaction_id = Some(txn);
                Ok(if late {
                    ExecuteOutcome::Late(p.clone())
                } else {
                    ExecuteOutcome::Now(p.clone())
                })
            }
            PaymentStatus::Completed
            | PaymentStatus::Failed
            | PaymentStatus::Refunded
            | PaymentStatus::Disputed => Ok(ExecuteOutcome::Now(p.clone())),
            other => Err(other),
        })
    }

    /// Refund of `amount` cents of a completed payment (all that is left when `None`) under the
    /// idempotency `key`: a retry with the key answers the same refund; the refunds together
    /// never exceed the amount; the last cent makes the payment `refunded`. Every new refund
    /// queues a `payment.refunded` event (also when the payment stays `completed`).
    pub fn refund(
        &self,
        id: &str,
        key: &str,
        amount: Option<i64>,
    ) -> Option<Result<(Refund, Payment), RefundRefused>> {
        let rid = format!("re_{}", self.rng.hex_id(10));
        self.with(id, |p| {
            if let Some(r) = p.refunds.iter().find(|r| r.key == key) {
                return Ok((r.clone(), p.clone()));
            }
            if p.status != PaymentStatus::Completed {
                return Err(RefundRefused::Status(p.status));
            }
            let left = p.amount_cents - p.refunded_cents;
            let amount = amount.unwrap_or(left);
            if amount <= 0 || amount > left {
                return Err(RefundRefused::TooMuch { left });
            }
            let r = Refund {
                refund_id: rid,
                amount_cents: amount,
                key: key.to_owned(),
            };
            p.refunds.push(r.clone());
            p.refunded_cents += amount;
            p.refund_id = Some(r.refund_id.clone());
            if p.refunded_cents == p.amount_cents {
                p.status = PaymentStatus::Refunded; // `with` queues payment.refunded
            } else {
                self.emit_as(p, "refunded");
            }
            Ok((r, p.clone()))
        })
    }

    /// A chargeback (the simulator's console): `completed` → `disputed`, with a
    /// `payment.disputed` event. `Err` carries the status that forbids it.
    pub fn dispute(&self, id: &str) -> Option<Result<Payment, PaymentStatus>> {
        self.with(id, |p| match p.status {
            PaymentStatus::Completed => {
                p.status = PaymentStatus::Disputed;
                Ok(p.clone())
            }
            PaymentStatus::Disputed => Ok(p.clone()),
            other => Err(other),
        })
    }
}
