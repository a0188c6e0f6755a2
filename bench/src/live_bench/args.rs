//! `seckill-bench live-sale`'s options.

use clap::{Args, ValueEnum};
use secrecy::SecretString;
use std::path::PathBuf;

/// How buyers learn their place and their ticket's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `GET` the entry and the ticket again and again.
    Poll,
    /// Read `…/events`.
    Stream,
}

#[derive(Debug, Clone, Args)]
pub struct LiveSaleArgs {
    /// Gateway base URL; repeat for several (buyer `i` uses gateway `i mod G`).
    #[arg(long = "gateway", required = true, value_name = "URL")]
    pub gateways: Vec<String>,

    /// The product (with a waiting room, loaded for sale, not started yet).
    #[arg(long, value_name = "ID")]
    pub product: u64,

    /// Sign one HS256 token per buyer with this secret.
    #[arg(
        long,
        env = "SECKILL_AUTH_HS256_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = crate::args::secret
    )]
    pub jwt_secret: SecretString,

    #[arg(long, value_enum)]
    pub mode: Mode,

    /// Buyers of this process.
    #[arg(long, default_value_t = 10_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=20_000))]
    pub buyers: u64,

    /// Buyers are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Joins in flight.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub join_concurrency: usize,

    /// Polling: an entry is read again this long after its last answer, instead of when its
    /// `refresh_after_ms` advises.
    #[arg(long, value_name = "MS")]
    pub queue_poll_ms: Option<u64>,

    /// Polling: a ticket is read again this long after its last answer.
    #[arg(long, default_value_t = 300, value_name = "MS")]
    pub ticket_poll_ms: u64,

    /// Every buyer gives up this long after its join.
    #[arg(long, default_value_t = 180.0, value_name = "SECS")]
    pub timeout: f64,

    /// Write the result as JSON here.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}
