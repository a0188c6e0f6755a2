//! `seckill-bench expiry`'s options.

use clap::Args;
use secrecy::SecretString;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct ExpiryArgs {
    /// Gateway base URL: the product is created, preloaded and bought there.
    #[arg(long, value_name = "URL")]
    pub gateway: String,

    /// The gateway's admin token (creates and preloads the product).
    #[arg(
        long,
        env = "SECKILL_ADMIN_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = crate::args::secret
    )]
    pub admin_token: SecretString,

    /// Default: SECKILL_REDIS_URL.
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// Default: SECKILL_MYSQL_URL.
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// Namespace of the Redis keys (default: SECKILL_NAMESPACE, else `seckill`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Units, buyers and so expiring orders: one unit per buyer.
    #[arg(long, default_value_t = 10_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub orders: u64,

    /// The product's payment window. Every order must be confirmed before the first deadline
    /// falls (the run is invalid otherwise): longer than the buys and the confirmation take.
    #[arg(long, default_value_t = 20, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub window_secs: u64,

    /// The product's price, in minor units.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub price: u64,

    /// Sign one HS256 token per buyer with this secret (claims as `load --jwt-secret`). Unset:
    /// no tokens (a gateway with `SECKILL_AUTH_MODE=none`).
    #[arg(
        long,
        env = "SECKILL_AUTH_HS256_SECRET",
        hide_env_values = true,
        value_name = "SECRET",
        value_parser = crate::args::secret
    )]
    pub jwt_secret: Option<SecretString>,

    /// Buyers are FIRST_USER, FIRST_USER + 1, …
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub first_user: u64,

    /// Buys in flight.
    #[arg(long, short = 'c', default_value_t = 64, value_name = "C")]
    pub concurrency: usize,

    /// Once every buy is answered, write `{"product", "accepted"}` to this file; start the
    /// workers then to confirm the orders in one wave.
    #[arg(long, value_name = "PATH")]
    pub bought_file: Option<PathBuf>,

    /// How long to wait for every order to be confirmed, from the last buy.
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    pub confirm_timeout: f64,

    /// How often to read the Redis stock while the units come back.
    #[arg(long, default_value_t = 5, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub poll_ms: u64,

    /// Give up waiting for the units this long after the last deadline.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    pub expiry_timeout: f64,

    /// A worker's `/metrics` URL; repeat for several. Its `seckill_worker_expiry_lag_seconds`
    /// histogram over the run is reported next to the measured lag (from 0 when the worker
    /// does not answer before the buys: it starts after them).
    #[arg(long = "worker-metrics", value_name = "URL")]
    pub worker_metrics: Vec<String>,

    /// Write the result as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Print the result as one JSON object on stdout instead of the summary line (which then
    /// goes to stderr).
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use crate::cli::{Cli, Command};
    use clap::{CommandFactory, Parser};
    use secrecy::ExposeSecret;

    #[test]
    fn the_command_line_takes_the_connection_settings_and_hides_its_secrets() {
        Cli::command().debug_assert();
        let parse = |extra: &[&str]| {
            let mut argv = vec![
                "b",
                "expiry",
                "--gateway",
                "http://g/",
                "--admin-token",
                "adm1n",
            ];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| match c.command {
                Command::Expiry(a) => a,
                other => panic!("not expiry: {other:?}"),
            })
        };
        let a = parse(&[
            "--redis-url",
            "redis://r",
            "--mysql-url",
            "mysql://m",
            "--namespace",
            "ns",
            "--jwt-secret",
            "t0ps3cret",
        ])
        .unwrap();
        assert_eq!(a.admin_token.expose_secret(), "adm1n");
        assert_eq!(
            (
                a.redis_url.as_deref(),
                a.mysql_url.as_deref(),
                a.namespace.as_deref()
            ),
            (Some("redis://r"), Some("mysql://m"), Some("ns"))
        );
        assert_eq!(
            (a.orders, a.window_secs, a.price, a.poll_ms),
            (10_000, 20, 100, 5)
        );
        let debug = format!("{a:?}");
        assert!(
            !debug.contains("adm1n") && !debug.contains("t0ps3cret"),
            "{debug}"
        );
        for bad in [
            &["--orders", "0"][..],
            &["--window-secs", "0"],
            &["--poll-ms", "0"],
            &["--jwt-secret", ""],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
