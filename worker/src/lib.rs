//! The worker: drains the order topic into MySQL in batches, as one of a Kafka consumer group.
//!
//! # Layout
//! - [`cli`]: the `worker` binary's command line and what each command runs.
//! - [`startup`]: `Worker::build` applies migrations, creates the topic when missing, joins the
//!   group and binds the health listener; `run_until_stopped` consumes until told to stop.
//! - [`consume`]: the [`consume::Pipeline`], the batch loop: gather up to `worker_batch_size` messages or wait
//!   `worker_batch_linger_ms`, settle them (see `seckill_shared::settle`), retry on error, then
//!   store the offsets; queue `"false"` for products that got units back.
//! - [`announce`]: one task publishes the queued `"false"`s to ZooKeeper, off the settle path.
//! - [`sweep`]: every worker runs the sweeper (safe to run concurrently; see
//!   `seckill_shared::recovery`): stale reservations, and products Redis lost.
//! - [`expire`]: every worker cancels orders not paid by their deadline and puts their units
//!   back on sale (see `seckill_shared::payments::cancel`).
//! - [`health`]: `/livez`, `/healthz` (dependencies and assigned partitions) and `/metrics`.
//! - `retry`: the backoff every loop retries a failing step with.
//! - [`metrics`]: Prometheus counters and histograms of this process.
//! - [`live`]: once a second, the gauges read rather than counted, and this worker's share of
//!   the admin dashboard's live figures.

pub mod announce;
pub mod cli;
pub mod consume;
pub mod expire;
pub mod health;
pub mod live;
pub mod metrics;
mod retry;
pub mod startup;
pub mod sweep;
mod traces;

pub use startup::Worker;
