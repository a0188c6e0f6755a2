//! Everything the gateway and the worker agree on.
//!
//! # Layout
//! - [`cancel`]: cancelling unpaid (or buyer-cancelled) orders, and giving their units back.
//! - [`crash_point`]: fault injection that kills the process between a MySQL commit and Redis.
//! - [`config`]: the one typed `Settings`, layered as defaults, an optional TOML file, then
//!   `SECKILL_*` environment variables.
//! - [`domain`]: ids that parse once (`ProductId`, `UserId`, `Ticket`), ticket states and the
//!   Kafka order message.
//! - [`store`]: the Redis side. Key layout and the atomic Lua scripts that move a ticket through
//!   its states (reserve, release, claim, confirm, compensate) and load a product for sale.
//! - [`recovery`]: the stale-reservation sweeper and reconcile after Redis data loss.
//! - [`db`]: the MySQL side. Pool, embedded migrations, products and order look-ups.
//! - [`settle`]: the batch step that claims, persists and confirms or compensates orders.
//! - [`kafka`]: producer and consumer settings, topic creation.
//! - [`zk`]: the ZooKeeper sold-out nodes: paths, connecting, publishing `"false"`.
//! - [`payment`]: payment states and the provider callback's signature.
//! - [`telemetry`]: `tracing` set-up.

pub mod cancel;
pub mod config;
pub mod crash_point;
pub mod db;
pub mod domain;
pub mod kafka;
pub mod lifecycle;
pub mod live;
pub mod payment;
pub mod recovery;
pub mod settle;
pub mod store;
pub mod telemetry;
pub mod zk;

pub use config::{AuthMode, GatewayMode, LogFormat, Settings};
pub use domain::{
    home_bucket, BuyerClaims, CancelReason, FailureReason, OrderMessage, OrderStatus, ProductId,
    Ticket, TicketStatus, UserId, MAX_BUCKETS,
};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
