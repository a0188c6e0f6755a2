//! `seckill-bench audit`'s options.

use crate::args::parse_window;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct AuditArgs {
    /// History file written by `load`.
    #[arg(long, default_value = "history.jsonl", value_name = "PATH")]
    pub history: PathBuf,

    /// Product the history's run bought.
    #[arg(long, value_name = "ID")]
    pub product: u64,

    /// Namespace of the Redis keys (default: SECKILL_NAMESPACE, else `seckill`).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Default: SECKILL_REDIS_URL.
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,

    /// Default: SECKILL_MYSQL_URL.
    #[arg(long, value_name = "URL")]
    pub mysql_url: Option<String>,

    /// Units the sale started with, from the scenario: the database under test does not
    /// get to say.
    #[arg(long, value_name = "N")]
    pub initial_stock: i64,

    /// A failure reason the run allows (e.g. `chaos` when the workers fail orders on purpose);
    /// repeat for several. A ticket answered 202, 200 or 201 that fails for any other reason
    /// is a broken promise.
    #[arg(long = "allow-failure", value_name = "REASON")]
    pub allow_failures: Vec<String>,

    /// Only tickets reserved in this window (ms since the epoch, `FROM..TO`) may fail for an
    /// allowed reason: the allowance fits its fault, not the whole sale.
    #[arg(long, value_name = "FROM_MS..TO_MS", value_parser = parse_window)]
    pub allow_window: Option<(i64, i64)>,

    /// At most this many tickets may fail for an allowed reason (say, those in flight at
    /// the fault).
    #[arg(long, value_name = "N")]
    pub allow_at_most: Option<u64>,

    /// The sale had to sell out: fail unless the load reached sold out and nothing is left
    /// over that an allowed failure did not hand back.
    #[arg(long)]
    pub until_sold_out: bool,

    /// After the sale every unit of the initial stock must end in a paid order: fail if any
    /// is left unsold, confirmed and unpaid, or cancelled and not sold again.
    #[arg(long)]
    pub expect_all_paid: bool,

    /// Ticket look-ups in flight.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub concurrency: usize,

    /// Print the result as one JSON object on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn audit_args(extra: &[&str]) -> anyhow::Result<AuditArgs> {
        let mut argv = vec!["b", "audit", "--product", "5"];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv)?.command {
            Command::Audit(a) => Ok(a),
            other => anyhow::bail!("not audit: {other:?}"),
        }
    }

    #[test]
    fn audit_flags() {
        // The initial stock comes from the scenario, never from the database under test.
        assert!(audit_args(&[]).is_err());
        let a = audit_args(&["--initial-stock", "300"]).unwrap();
        assert_eq!(a.initial_stock, 300);
        assert!(a.allow_failures.is_empty() && !a.until_sold_out && !a.expect_all_paid);
        let a = audit_args(&[
            "--initial-stock",
            "300",
            "--allow-failure",
            "chaos",
            "--allow-failure",
            "duplicate_user",
            "--until-sold-out",
            "--expect-all-paid",
        ])
        .unwrap();
        assert_eq!(a.allow_failures, ["chaos", "duplicate_user"]);
        assert!(a.until_sold_out && a.expect_all_paid);
    }
}
