//! Shared by every service of the sale: the clock that tests control, RFC 9457 problem+json
//! error bodies, a secret wrapper whose `Debug` hides the value, and the start-up check's
//! error that lists every configuration problem.
//!
//! Must not touch: any store, any HTTP client. Pure helpers only.

pub mod body;
pub mod clock;
pub mod conditional;
pub mod config;
pub mod files;
pub mod load;
pub mod localtime;
#[cfg(feature = "plots")]
pub mod plots;
pub mod problem;
pub mod prometheus;
pub mod routes;
pub mod secret;
pub mod shutdown;
pub mod testsupport;

pub use clock::{Clock, ManualClock, SharedClock, SystemClock};
pub use problem::Problem;
pub use secret::Secret;
