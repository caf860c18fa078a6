//! The thin launcher's library: starts the waiting room, the booking core and the payment-gateway
//! simulator in one process, each on its own listener, wired to each other. Used by
//! `ticket-sale up`, by `loadtest rush --spawn` and by the end-to-end tests.
//!
//! Must not touch: any service's internals; it only builds their `Config`s and calls `serve`.

pub mod cdn;
pub mod stack;
