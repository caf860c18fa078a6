//! What a rush is made of, as plain data: where the fans go ([`Target`]), how they behave
//! ([`Behaviour`], drawn from a [`Mix`]) and ask for places ([`Shares`], [`Kind`]), what each
//! ended with ([`FanOutcome`]) and a check's verdict ([`Check`]). The bottom of the loadtest's
//! modules: the fans, the behaviours, the picks, the checks and the reports all read these and
//! import nothing from each other's layers through them.

use rand::Rng;
use serde_json::Value;
use std::sync::Arc;

/// Where the fans go and who they are.
#[derive(Debug, Clone)]
pub struct Target {
    /// Waiting room base URL.
    pub waiting_room: String,
    /// Booking core base URL.
    pub booking: String,
    /// Event id at the waiting room; also the show id at the booking core.
    pub event: String,
    /// How often a fan polls the status document while waiting, milliseconds.
    pub poll_ms: u64,
    /// Share of fans who pay (0..=1); `cancel_share` cancel; the rest walk away.
    pub pay_share: f64,
    /// Share of fans who cancel on the checkout page.
    pub cancel_share: f64,
    /// Behaviour mix (hold styles, slow and late payers, patience when sold out).
    pub mix: Mix,
    /// Shares of fans holding by best available and in a pool (the rest pick seats).
    pub picks: Shares,
    /// The status document as one shared poller last fetched it (`rush --shared-status`), the
    /// way a CDN answers every fan with one copy; `None`: each fan fetches its own.
    pub shared_status: Option<tokio::sync::watch::Receiver<SharedDoc>>,
}

/// The last status document the shared poller fetched, and when it asked (ms since start).
#[derive(Debug, Clone, Default)]
pub struct SharedDoc {
    /// When the poller sent the request, ms since the run started.
    pub asked_ms: u64,
    /// The document (`Null` before the first answer or after a failed fetch).
    pub doc: Arc<Value>,
}

/// What one fan ended with.
#[derive(Debug, Default, Clone)]
pub struct FanOutcome {
    /// The queue number the fan was given.
    pub queue_number: Option<u64>,
    /// Admission token's `iat` and `exp` (Unix seconds) when admitted.
    pub admission: Option<(i64, i64)>,
    /// Wall time (ms since the run started) when admission was granted.
    pub admitted_at_ms: Option<u64>,
    /// The hold id and its seats, if a hold succeeded.
    pub hold: Option<(String, Vec<String>)>,
    /// Whether the fan's hold ended PAID (confirmed by reading it back).
    pub paid: bool,
    /// Whether the fan cancelled and the hold was released.
    pub cancelled: bool,
    /// 409s met while holding.
    pub conflicts: u32,
    /// A description of why the journey stopped early, if it did.
    pub gave_up: Option<String>,
    /// The behaviour this fan was drawn.
    pub behaviour: Behaviour,
    /// Wall time (ms since the run started) when the join answered.
    pub joined_at_ms: Option<u64>,
    /// Joined after the sale opened (a late arrival).
    pub late_arrival: bool,
    /// The join answer carried no queue number: the fan really joined the pre-queue (a fan
    /// meant to join early can arrive after opening on a loaded machine).
    pub prequeued: bool,
    /// When the fan saw its turn come (ms since start): after the last status document that
    /// showed the cursor below its number, and before the first that showed it reached.
    pub turn_window_ms: Option<(u64, u64)>,
    /// Wall time (ms since start) when the fan's hold was answered 201.
    pub held_at_ms: Option<u64>,
    /// Wall time (ms since start) when the fan read its hold back PAID.
    pub paid_at_ms: Option<u64>,
    /// A same-key retry was sent; and whether its answers named different holds.
    pub idempotent_checked: bool,
    /// Two answers to one `Idempotency-Key` disagreed.
    pub idempotency_mismatch: bool,
    /// Tabs that won a hold at once with one admission token (several-tab fans).
    pub tabs_won: Option<usize>,
    /// The wait ranges the waiting page would have shown this fan: the first one, then one at
    /// each whole minute of its wait (`wait_range`).
    pub wait_shown: Vec<ShownWait>,
}

/// A wait range as the waiting page shows it (`static/wait.js` `showWait`), before the page
/// rounds it to whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ShownWait {
    /// When the fan read the status document it came from, ms since the run started.
    pub at_ms: u64,
    /// Whole minutes of the fan's wait when it was read (0: the first range the fan saw, at
    /// joining or at the first read after opening).
    pub minute: u32,
    /// Shortest wait shown, **seconds**: `to_go / high_places_per_sec`.
    pub low_secs: f64,
    /// Longest wait shown, **seconds**: `to_go / low_places_per_sec`; `None` while every
    /// admission slot is taken (the page then shows only "at least" the shortest).
    pub high_secs: Option<f64>,
    /// Places the cursor had to move to reach the fan (`queue_number − cursor`).
    pub to_go: u64,
    /// The speeds were measured (`wait.basis` `measured`), not the configured rate.
    pub measured: bool,
}

/// How a fan sends its hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum HoldStyle {
    /// One request per attempt.
    #[default]
    Single,
    /// The same request twice, concurrently, with one `Idempotency-Key`: both answers must
    /// name the same hold.
    SameKeyRetry,
    /// `n` tabs hold different seats at once with one admission token: at most one may win.
    Tabs(usize),
}

/// What a fan does at checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Checkout {
    /// Pays at once.
    #[default]
    Pay,
    /// Pays after waiting about half of the payment window.
    PaySlowly,
    /// Opens the checkout, then presses Pay one second after the payment deadline.
    PayLate,
    /// Cancels on the checkout page.
    Cancel,
    /// Walks away: the hold lapses on its own.
    WalkAway,
}

/// One fan's drawn behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Behaviour {
    /// Hold style.
    pub hold: HoldStyle,
    /// Checkout choice.
    pub checkout: Checkout,
}

/// Shares (0..=1) of each behaviour. Checkout shares are taken from the whole population in
/// this order: pay slowly, pay late, then the target's `pay_share` and `cancel_share` from
/// the rest; hold styles are drawn independently.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mix {
    /// Share who pay slowly (within the deadline).
    pub pay_slowly: f64,
    /// Share who press Pay after the payment deadline.
    pub pay_late: f64,
    /// Share who send their hold twice with one `Idempotency-Key`.
    pub same_key_retry: f64,
    /// Share who hold from several tabs at once.
    pub tabs_share: f64,
    /// Tabs per such fan.
    pub tabs: usize,
    /// Fans who find no free seat poll the map again for this many seconds (seats lapse and
    /// are resold) before giving up.
    pub sold_out_patience_secs: u64,
}

impl Mix {
    /// Draws one fan's behaviour (`pay`/`cancel` shares from the target).
    pub fn pick(&self, pay: f64, cancel: f64) -> Behaviour {
        let mut rng = rand::thread_rng();
        let r: f64 = rng.gen();
        let checkout = if r < self.pay_slowly {
            Checkout::PaySlowly
        } else if r < self.pay_slowly + self.pay_late {
            Checkout::PayLate
        } else {
            let rest = 1.0 - self.pay_slowly - self.pay_late;
            let x = (r - self.pay_slowly - self.pay_late) / rest.max(1e-9);
            if x < pay {
                Checkout::Pay
            } else if x < pay + cancel {
                Checkout::Cancel
            } else {
                Checkout::WalkAway
            }
        };
        let h: f64 = rng.gen();
        let hold = if h < self.same_key_retry {
            HoldStyle::SameKeyRetry
        } else if h < self.same_key_retry + self.tabs_share && self.tabs > 1 {
            HoldStyle::Tabs(self.tabs)
        } else {
            HoldStyle::Single
        };
        Behaviour { hold, checkout }
    }
}

/// Shares (0..=1) of fans who hold by best available and in a pool; the rest pick seats.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shares {
    /// Share of fans who ask for the best N seats together in a section.
    pub best_available: f64,
    /// Share of fans who ask for N places in a general-admission pool.
    pub pool: f64,
    /// Share of fans who add an interval resource to their seats (drawn apart from the kind).
    pub interval: f64,
}

/// The way one fan asks for places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Picks adjacent seats from the seat map.
    Seats,
    /// `{"best_available":{…}}`.
    Best,
    /// `{"pool":…,"quantity":n}`.
    Pool,
}

impl Shares {
    /// Whether one fan adds an interval resource to its order.
    pub fn wants_interval(&self) -> bool {
        self.interval > 0.0 && rand::thread_rng().gen_bool(self.interval.min(1.0))
    }

    /// Draws one fan's kind.
    pub fn draw(&self) -> Kind {
        let r: f64 = rand::thread_rng().gen();
        if r < self.pool {
            Kind::Pool
        } else if r < self.pool + self.best_available {
            Kind::Best
        } else {
            Kind::Seats
        }
    }
}

/// One named check and its verdict.
#[derive(Debug, Clone)]
pub struct Check {
    /// Short name printed before PASS/FAIL.
    pub name: &'static str,
    /// Whether it held.
    pub pass: bool,
    /// The figures behind the verdict.
    pub detail: String,
}
