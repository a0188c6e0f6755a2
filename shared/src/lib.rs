//! Everything the gateway and the worker agree on.
//!
//! # Layout
//! One folder (or file) per feature, each with its own Redis operations (`impl TicketStore`)
//! and Lua scripts beside them:
//! - [`lifecycle`]: the ticket's lifecycle written down as data (the model the checker runs).
//! - [`reservation`]: the buy decision in one script per stock bucket, batched, with loans
//!   between buckets; releasing a reservation Kafka never took.
//! - [`locations`]: where each accepted order landed in Kafka.
//! - [`settle`]: the worker's batch step: claim, persist, confirm or compensate.
//! - [`recovery`]: the stale-reservation sweeper, and rebuilding what Redis lost.
//! - [`payments`]: payment states, the provider callback's signature, and cancelling unpaid or
//!   buyer-cancelled orders ([`payments::cancel`]).
//! - [`waiting_room`]: joins, polls and admissions.
//! - [`sale`]: preloading a product, ending its sale, and its counts.
//! - [`sold_out`]: the ZooKeeper sold-out nodes: paths, connecting, publishing `"false"`.
//! - [`kafka`]: producer and consumer settings, topic creation, fences.
//! - [`live`]: the live figures behind the admin dashboard.
//!
//! Beneath them:
//! - [`domain`]: ids that parse once (`ProductId`, `UserId`, `Ticket`), ticket states and
//!   reasons, and the Kafka order message. No I/O.
//! - [`store`]: the Redis adapter: connection, key layout, typed records, and the
//!   [`store::script::RedisScript`] trait each feature's Lua scripts implement (one type per
//!   script, in its `scripts.rs`).
//! - [`db`]: the MySQL adapter: pool, embedded migrations, products and order look-ups.
//! - [`config`]: the one typed `Settings`, layered as defaults, an optional TOML file, then
//!   `SECKILL_*` environment variables.
//! - [`crash_point`]: fault injection that kills the process between a MySQL commit and Redis.
//! - [`telemetry`]: `tracing` set-up.

pub mod api;
pub mod config;
pub mod crash_point;
pub mod db;
pub mod domain;
pub mod kafka;
pub mod lifecycle;
pub mod live;
pub mod locations;
pub mod payments;
pub mod recovery;
pub mod reservation;
pub mod sale;
pub mod settle;
pub mod sold_out;
pub mod store;
pub mod telemetry;
pub mod waiting_room;

pub use config::{AuthMode, GatewayMode, LogFormat, Settings};
pub use domain::{
    home_bucket, BuyerClaims, CancelReason, FailureReason, OrderMessage, OrderStatus, ProductId,
    Ticket, TicketStatus, UserId, MAX_BUCKETS, MAX_PER_BUYER,
};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
