//! `seckill-bench provider`'s options.

use crate::args::{probability, secret};
use clap::Args;
use secrecy::SecretString;
use std::net::SocketAddr;

#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// Address to listen on (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:8099", value_name = "ADDR")]
    pub listen: SocketAddr,

    /// Sign each callback with this (HMAC-SHA256): the gateway's payment webhook secret.
    #[arg(
        long,
        env = "SECKILL_PAYMENT_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = secret
    )]
    pub webhook_secret: SecretString,

    /// Chance that a charge is declined.
    #[arg(long, default_value_t = 0.1, value_name = "P", value_parser = probability)]
    pub decline_rate: f64,

    /// Time from a charge to its decision and callback.
    #[arg(long, default_value_t = 200, value_name = "MS")]
    pub delay_ms: u64,

    /// Chance that a charge is decided after --late-delay-ms instead.
    #[arg(long, default_value_t = 0.05, value_name = "P", value_parser = probability)]
    pub late_rate: f64,

    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub late_delay_ms: u64,

    /// Chance that a callback is sent twice (the same bytes, the same signature).
    #[arg(long, default_value_t = 0.0, value_name = "P", value_parser = probability)]
    pub duplicate_rate: f64,

    /// Seed the random choices: the same charges in the same order get the same ones.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}
