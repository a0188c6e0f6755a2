//! The gateway: a thin HTTP front that turns a buy request into a reserved unit and an order
//! on Kafka, in milliseconds.
//!
//! # Layout
//! - [`startup`]: `Application::build` binds the listener and wires the state;
//!   `run_until_stopped` serves until SIGTERM, then flushes the producer.
//! - [`state`]: `AppState`, what every handler shares.
//! - [`recovery`]: a product that Redis lost is rebuilt from MySQL while its buys get `503`.
//! - [`routes`]: one module per endpoint group: `buy`, `orders`, `admin`, `health`, `openapi`
//!   (`GET /openapi.json`, written by hand in `src/openapi.json`).
//! - [`error`]: the API's error enum and its mapping to status codes and JSON bodies.
//! - [`sold_out`]: the local sold-out markers and the ZooKeeper watch that drops them.
//! - [`publish`]: the idempotent Kafka producer that hands orders to the workers.
//! - [`metrics`]: Prometheus counters and histograms of this process, and the middleware that
//!   counts every request by route and outcome.
//! - [`rate_limit`]: the per-user token bucket in Redis, shared by every gateway.
//! - [`admission`]: the cap on buys in flight in this process.
//! - [`cli`]: the `gateway` binary's command line and `main`.

pub mod admission;
pub mod cli;
pub mod error;
pub mod metrics;
pub mod publish;
pub mod rate_limit;
pub mod recovery;
pub mod routes;
pub mod sold_out;
pub mod startup;
pub mod state;

pub use startup::Application;
