//! `seckill-bench report`: the results of `scripts/bench.sh`, from its run folder.
//!
//! - `report table`: one row per figure, each with its value, its ratio to the ceiling it is
//!   measured against, its goal and whether the goal is met. A figure counts only when its run
//!   was valid ([`rules`]): otherwise it is INVALID with the reason, and a ratio that needs it
//!   is not judged. Below the table, the drain details and the CPU time per request by process
//!   ([`cpu`]). With `--doc`, the block between the `bench:begin` and `bench:end` markers of
//!   that file is rewritten. Exits 1 when a figure's run is invalid. With `--plots`, each
//!   figure's time series is linked from the table and shown under it ([`plots`]).
//! - `report outcome`: one number of a `load --json` summary, for the script.
//!
//! Where each part lives: `args.rs` the options, `results.rs` what a run folder holds,
//! `rows.rs` the table's rows, `results/auth.rs` what buyer authentication costs, `table.rs` the
//! table and the results block it writes, `format.rs` numbers and dates.

mod args;
pub mod cpu;
#[cfg(test)]
mod fixtures;
mod format;
pub mod inputs;
pub mod plots;
mod results;
mod rows;
pub mod rules;
mod table;

pub use args::{OutcomeArgs, OutcomeField, ReportArgs, ReportCommand, RunMode, TableArgs};
pub use format::{fmt, thousands, utc_minutes};
pub use results::{read_criterion_us, AuthCpu, AuthRound, Results, RoundDiffs};
pub use rows::{rows, Row};
pub use table::{replace_block, HEADER};

use inputs::LoadRun;
use results::read_json;
use table::table;

/// `Ok(false)` when a figure's run was invalid.
pub fn run(args: ReportArgs) -> anyhow::Result<bool> {
    match args.command {
        ReportCommand::Outcome(a) => {
            let r: LoadRun = read_json(&a.file)?;
            let o = r.outcome(&a.outcome);
            match a.field {
                OutcomeField::Count => println!("{}", o.map_or(0, |o| o.count)),
                OutcomeField::PerSec => println!("{}", o.map_or(0.0, |o| o.per_sec)),
                OutcomeField::P50Ms => println!("{}", o.map_or(0.0, |o| o.p50_ms)),
                OutcomeField::P99Ms => println!("{}", o.map_or(0.0, |o| o.p99_ms)),
            }
            Ok(true)
        }
        ReportCommand::Table(a) => table(&a),
    }
}
