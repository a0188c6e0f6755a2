//! `seckill-bench queue-sale`: a waiting-room sale under load (issue 13), next to the same
//! sale without a waiting room.
//!
//! The run:
//! 1. creates a product with a waiting room (`--stock` units, `--admit-per-sec`,
//!    `--max-admitted-factor`) whose sale starts `--starts-in` seconds later, and preloads it;
//! 2. has `--buyers` distinct buyers join its line (one signed HS256 token each), `--concurrency`
//!    joins in flight. Every join must be answered before the start, or the run does not count;
//! 3. from the start, every buyer polls its entry: the first poll at a point spread over the
//!    first second, then each `refresh_after_ms` later (clamped to `--min-refresh-ms` ..
//!    `--max-refresh-ms`). An admitted buyer buys at once with its admission token; a buyer
//!    stops on `sold_out`, `bought` or `expired`;
//! 4. then the same sale without a waiting room: a product with the same stock and a start
//!    two seconds ahead, and the same number of buyers (one buy each, `--concurrency` in flight)
//!    from the start until a `409 sold_out`.
//!
//! Each of the `--concurrency` tasks owns the buyers `i ≡ task (mod C)` and one keep-alive
//! connection per gateway (the `hyper` engine of [`crate::load::engine`]); it sends the poll
//! that is due first, one at a time. When the gateways cannot keep up, polls fall behind their
//! due time: the tasks then send back to back, and what is measured is what the gateways
//! sustain. Buys with an admission token go through `reqwest` (the engine sends no other
//! header than `Authorization`); they are about one per unit.
//!
//! The figures: polls answered per second from the start until 90 % of the buyers have stopped
//! ([`sustained_rate`], leaving the first second of ramp out when the window is long enough);
//! the time from the start to the 202 of the last unit, for both sales; with `--redis-pid`,
//! the Redis CPU (utime + stime from `/proc/PID/stat`) per join over the joins and per poll
//! over the polling phase (which also carries the buys: about one per unit).

mod args;
mod buyers;
pub mod report;
mod run;

pub use args::QueueSaleArgs;
pub use report::sustained_rate;
pub use run::run;
