//! `seckill-bench report`'s options.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub command: ReportCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ReportCommand {
    /// The results table of a `scripts/bench.sh` run folder; exits 1 when a figure's run is
    /// invalid.
    Table(TableArgs),
    /// Print one number of a `load --json` summary (0 when the outcome did not occur).
    Outcome(OutcomeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct TableArgs {
    /// The run folder (`.dev/bench/<run>`).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,

    /// The figures the run measured, e.g. "1 1w 2 2L 3": rows of these only, and a missing
    /// result is INVALID.
    #[arg(long, value_name = "LIST")]
    pub figures: String,

    /// The settings line of the results block.
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub settings: String,

    #[arg(long, value_enum, default_value_t = RunMode::Full)]
    pub mode: RunMode,

    /// A note printed under the settings (e.g. that the chaos suite was running).
    #[arg(long, default_value = "", value_name = "TEXT")]
    pub note: String,

    /// Rewrite the results block of this Markdown file (appended when it has none).
    #[arg(long, value_name = "FILE")]
    pub doc: Option<PathBuf>,

    /// A folder of the figures' time series (`f2.svg`, `f2n.svg`, … from `seckill-bench plot
    /// load`): the table links each figure's chart, and the results block shows them. Links
    /// are relative to --doc's folder.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,

    /// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub clk_tck: u64,

    /// (2E)'s goal: what one Ed25519 verify costs on this machine, µs (criterion's
    /// `ed25519/verify` of `cargo bench -p seckill-gateway --bench auth`).
    #[arg(long, value_name = "US", conflicts_with = "ed25519_criterion")]
    pub ed25519_verify_us: Option<f64>,

    /// (2E)'s goal: the same, read from criterion's `estimates.json` of `ed25519/verify`
    /// (`target/criterion/ed25519_verify/new/estimates.json`).
    #[arg(long, value_name = "FILE")]
    pub ed25519_criterion: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunMode {
    Full,
    Quick,
    Profile,
}

impl RunMode {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Self::Full => "full run",
            Self::Quick => "quick smoke run (--quick)",
            Self::Profile => "profiled run (--profile): figures perturbed by perf",
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct OutcomeArgs {
    /// A `seckill-bench load --json` output.
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,

    /// The outcome's label: 202, 200, 201, 409, 4xx, 503, other, error.
    #[arg(long, value_name = "LABEL")]
    pub outcome: String,

    #[arg(long, value_enum, default_value_t = OutcomeField::Count)]
    pub field: OutcomeField,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutcomeField {
    Count,
    PerSec,
    /// Latency percentiles of the outcome, in ms.
    P50Ms,
    P99Ms,
}
