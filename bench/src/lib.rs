//! `seckill-bench`: drives the gateways with load and audits the pipeline's invariants.
//!
//! - [`load`]: `seckill-bench load`, an HTTP load generator: closed loop, paced, or open loop
//!   (`--rate --open-loop`, a constant arrival rate whatever the answers). A fixed set of worker
//!   tasks pulls request numbers from one atomic counter; each records its own latency
//!   histograms and hands history lines in batches to a writer thread.
//! - [`audit`]: `seckill-bench audit`, reads the history file, Redis and MySQL and checks the
//!   sale's invariants (no oversell, no duplicate, nothing lost, conservation, no undersell).
//! - [`history`]: the JSON-lines history file both share.
//! - [`ceiling`]: `seckill-bench mysql-ceiling`, the raw MySQL insert rate the worker's drain
//!   rate is measured against.
//! - [`report`]: `seckill-bench report`, the results table of `scripts/bench.sh`: each figure
//!   judged only when its run was valid.
//! - [`provider`]: `seckill-bench provider`, a simulated payment provider: takes charges, then
//!   calls back with signed, sometimes late or duplicated, outcomes.
//! - [`expiry`]: `seckill-bench expiry`, the payment deadline: from each unpaid order's
//!   `pay_by_ms` to its unit back on sale in Redis (p50, p99), and expired orders per second.
//! - [`plot`]: `seckill-bench plot` (and `load --plot`), SVG charts of load and chaos runs
//!   over time.
//! - [`pow_bench`]: `seckill-bench pow`, the proof of work's solve times and a simulated bot's
//!   share of the admissions with and without it.
//! - [`queue_bench`]: `seckill-bench queue-sale`, a waiting-room sale: polls per second, Redis
//!   CPU per poll, and the time to sell out next to the same sale without a waiting room.

pub mod admin;
pub mod args;
pub mod audit;
pub mod ceiling;
pub mod cli;
pub mod expiry;
pub mod history;
pub mod live_bench;
pub mod load;
pub mod plot;
pub mod pow_bench;
pub mod provider;
pub mod queue_bench;
pub mod report;
pub mod stores;

use std::process::ExitCode;

/// Runs a parsed command line. `Ok(false)` means the command ran but found a problem (an audit
/// violation, a benchmark figure whose run was invalid), which the binary turns into a
/// non-zero exit status.
pub async fn run(cli: cli::Cli) -> anyhow::Result<bool> {
    match cli.command {
        cli::Command::Load(args) => load::run(args).await.map(|_| true),
        cli::Command::Audit(args) => audit::run(args).await,
        cli::Command::MysqlCeiling(args) => ceiling::run(args).await.map(|_| true),
        cli::Command::Report(args) => report::run(args),
        cli::Command::Provider(args) => provider::run(args, provider::shutdown_signal())
            .await
            .map(|_| true),
        cli::Command::Expiry(args) => expiry::run(args).await,
        cli::Command::QueueSale(args) => queue_bench::run(args).await,
        cli::Command::LiveSale(args) => live_bench::run(args).await,
        cli::Command::Pow(args) => pow_bench::run(args).await,
        cli::Command::Plot(args) => plot::run(args),
    }
}

/// Exit status: 0 all good, 1 an audit found a violation or a figure's run was invalid, 2 the
/// command failed.
pub fn exit_code(result: anyhow::Result<bool>) -> ExitCode {
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or_default()
}
