//! Inventory: what can be sold and who holds it (DESIGN "Holds", seeds 001 and 002). Seats and
//! general-admission pools, claimed by one guarded update in one transaction, and everything that
//! reads or queues those claims:
//!
//! - [`claim`]: creating a hold (idempotency key, caps, the guarded claim, audit, stored answer);
//! - [`holds`]: the guarded seat claim and release, a hold's view, the seat map query;
//! - [`best`]: best available N together; [`pools`]: general-admission counters;
//! - [`caps`]: per-admission and per-visitor caps inside the claiming transaction, rate limit;
//! - [`preread`]: the read before a hold (the key's stored answer, the asked seats' statuses:
//!   a hold of seats visibly taken is refused without a transaction);
//! - [`inflight`]: identical hold requests in flight in this process (one runs, the others wait
//!   and replay its answer);
//! - [`fast`]: the plain hold, release and refusal on SQLite's writer thread (`db::writer`),
//!   the rest left to the sqlx path;
//! - [`onetrip`]: the plain named-seat hold on PostgreSQL as one statement (one round trip),
//!   the rest left to the full path; [`seatgate`]: one such statement at a time per seat in
//!   the process (the others wait in memory, not on the row's lock);
//! - [`group`]: group commit for a per-process worker (every item waiting in one commit);
//! - [`refusals`]: refused keys stored in batches (one insert for every refusal waiting);
//! - [`releases`]: fans' releases on SQLite applied in batches (one transaction for every
//!   release waiting);
//! - [`seatmap`]: the cached seat-map snapshots (three views per show);
//! - [`stock`]: how much of a show is left (free, held, sold);
//! - [`hotq`]: the per-show hold queue of the hottest shows; [`batch`]: its named-seat requests
//!   applied set-based (one guarded update and one insert per table for a whole batch);
//! - [`oversell`]: a pool's oversell allowance with its written policy, and what is oversold;
//! - [`waitlist`]: fans waiting for a released seat, offered it as a new hold;
//! - [`resources`]: interval resources, a named resource held for `[start, end)` (PostgreSQL's
//!   exclusion constraint, or SQLite's check under the single writer), and their free intervals.
//!
//! Layer: above `door` (the admission a hold belongs to), `outbox` (a release queues the session
//! end), `db`, `config`; below `state`, `payments` and `http`. Knows no gateway and no HTTP
//! router. The files inside import each other (a release offers the waitlist, a claim reads the
//! seat map's version): the no-circle rule is between the crate's top-level modules.

pub mod batch;
pub mod best;
pub mod caps;
pub mod claim;
pub mod fast;
pub mod group;
pub mod holds;
pub mod hotq;
pub mod inflight;
pub mod onetrip;
pub mod oversell;
pub mod pools;
pub mod preread;
pub mod refusals;
pub mod releases;
pub mod resources;
pub mod seatgate;
pub mod seatmap;
pub mod stock;
pub mod waitlist;
