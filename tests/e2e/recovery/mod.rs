//! Recovery paths: stale reservations, stuck claims and Redis data loss.

mod buy_again;
mod faults;
mod namespaces;
mod redis_loss;
mod sweeper;
