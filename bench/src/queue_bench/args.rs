//! `seckill-bench queue-sale`'s options.

use clap::Args;
use secrecy::SecretString;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct QueueSaleArgs {
    /// Gateway base URL; repeat for several (buyer `i` uses gateway `i mod G`).
    #[arg(long = "gateway", required = true, value_name = "URL")]
    pub gateways: Vec<String>,

    /// The gateways' admin token (creates and preloads the products).
    #[arg(
        long,
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = crate::args::secret
    )]
    pub admin_token: SecretString,

    /// Sign one HS256 token per buyer with this secret (claims as `load --jwt-secret`).
    #[arg(
        long,
        env = "SECKILL_AUTH_HS256_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = crate::args::secret
    )]
    pub jwt_secret: SecretString,

    /// Buyers in the line (and buyers of the sale without a waiting room).
    #[arg(long, default_value_t = 100_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub buyers: u64,

    /// Units on sale.
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub stock: u64,

    /// The waiting room's admissions per second.
    #[arg(long, default_value_t = 1000.0, value_name = "N")]
    pub admit_per_sec: f64,

    /// The waiting room's cap: admitted and not bought ≤ ceil(FACTOR × units left).
    #[arg(long, default_value_t = 1.5, value_name = "FACTOR")]
    pub max_admitted_factor: f64,

    /// The sale starts this long after the product is created: the joins must be done by
    /// then. Default: 5 s + one second per 2,500 buyers.
    #[arg(long, value_name = "SECS")]
    pub starts_in: Option<f64>,

    /// Requests in flight: tasks, each with one connection per gateway.
    #[arg(long, short = 'c', default_value_t = 256, value_name = "C")]
    pub concurrency: usize,

    /// A buyer polls again no sooner than this after an answer, whatever `refresh_after_ms`.
    #[arg(long, default_value_t = 250, value_name = "MS")]
    pub min_refresh_ms: u64,

    /// …and no later than this.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub max_refresh_ms: u64,

    /// Give up polling this long after the start.
    #[arg(long, default_value_t = 300.0, value_name = "SECS")]
    pub timeout: f64,

    /// Buyers are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Skip the sale without a waiting room.
    #[arg(long)]
    pub no_baseline: bool,

    /// The Redis server's pid: its CPU per join and per poll, from `/proc/PID/stat`.
    #[arg(long, value_name = "PID")]
    pub redis_pid: Option<u32>,

    /// Clock ticks per second of `/proc/PID/stat` (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub clk_tck: u64,

    /// Write the result as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Print the result as one JSON object on stdout instead of the summary line (which then
    /// goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// The default `--starts-in`: 5 s plus one second per 2,500 joins.
pub fn default_starts_in_secs(buyers: u64) -> f64 {
    5.0 + buyers as f64 / 2500.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn default_start_leaves_time_for_the_joins() {
        assert_eq!(default_starts_in_secs(100_000), 45.0);
        assert_eq!(default_starts_in_secs(0), 5.0);
    }

    #[test]
    fn the_command_line_has_the_issue_s_defaults_and_hides_its_secrets() {
        let cli = Cli::try_parse_from([
            "b",
            "queue-sale",
            "--gateway",
            "http://x",
            "--admin-token",
            "adm1n",
            "--jwt-secret",
            "s3cret",
        ])
        .unwrap();
        let Command::QueueSale(a) = cli.command else {
            panic!("not queue-sale")
        };
        assert_eq!((a.buyers, a.stock, a.concurrency), (100_000, 1000, 256));
        assert_eq!((a.admit_per_sec, a.max_admitted_factor), (1000.0, 1.5));
        assert_eq!((a.min_refresh_ms, a.max_refresh_ms), (250, 2000));
        assert!(a.starts_in.is_none() && !a.no_baseline);
        let debug = format!("{a:?}");
        assert!(
            !debug.contains("adm1n") && !debug.contains("s3cret"),
            "{debug}"
        );
        assert!(Cli::try_parse_from([
            "b",
            "queue-sale",
            "--gateway",
            "http://x",
            "--admin-token",
            "a",
            "--jwt-secret",
            "s",
            "--buyers",
            "0"
        ])
        .is_err());
    }
}
