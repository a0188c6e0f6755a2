//! `seckill-bench expiry`: how long an unpaid order's unit takes to be on sale again once its
//! payment deadline has passed (issue 12), and how many orders per second the workers expire.
//!
//! The run:
//! 1. creates a priced product with `--orders` units and a payment window of `--window-secs`,
//!    preloads it, and has that many distinct buyers buy one unit each (one signed token each
//!    with `--jwt-secret`);
//! 2. with `--bought-file`, writes that file once every buy is answered: `scripts/bench.sh`
//!    starts the worker then, so that the orders are confirmed, and their deadlines fall, in one
//!    wave (as in the drain figure). Without it, a running worker confirms them as they come;
//! 3. waits until MySQL holds every order with its `pay_by_ms`, and nothing is pending in Redis;
//! 4. reads the deadlines, sorted, and polls the Redis stock every `--poll-ms` until every unit
//!    is back, noting when the stock first showed `k` units back, for each `k`;
//! 5. cross-checks the end state: every order cancelled for the timeout in MySQL, no
//!    `restore_due` left, the stock back to the initial one in Redis and in MySQL.
//!
//! The `k`-th unit back is matched with the `k`-th earliest deadline ([`lags_ms`]): at the
//! moment `k` units are back, `k` orders were cancelled, and each had its deadline before, so
//! the lag is never negative. Its resolution is the poll interval: a unit counts from the poll
//! that saw it, so the lag is overestimated by up to one interval plus a Redis round trip. The
//! worker and this tool read the same clock (one machine).
//!
//! The throughput is `N / (t(N units back) − t(first unit back))`. It is the workers' expiry
//! capacity only when the deadlines fall faster than that: the report gives the deadlines'
//! span next to it.

mod args;
mod figures;
mod report;
mod run;

pub use args::ExpiryArgs;
pub use figures::lags_ms;
pub use run::run;
