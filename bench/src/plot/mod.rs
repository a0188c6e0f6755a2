//! `seckill-bench plot`: SVG charts of load and chaos runs (plotters, SVG backend only).
//!
//! - [`chart`]: a chart as data (panels, lines, a shaded window) and its SVG drawing.
//! - [`load_chart`]: answers per second and latency percentiles over time, per outcome, of a
//!   `load` run (also `load --plot`).
//! - [`chaos_chart`]: a chaos run's timeline: accepts, confirms, compensations and pending,
//!   with the fault's window shaded.
//! - [`live_chart`]: live streams against polling, the confirmation → buyer delay by
//!   percentile.

pub mod chaos_chart;
pub mod chart;
pub mod live_chart;
pub mod load_chart;

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Clone, Args)]
pub struct PlotArgs {
    #[command(subcommand)]
    pub command: PlotCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum PlotCommand {
    /// A load run over time, from its `load --json` summary: answers per second and latency
    /// p50/p99 per outcome.
    Load {
        /// The summary (`load --json` output).
        #[arg(long, value_name = "JSON")]
        summary: PathBuf,
        #[arg(long, value_name = "SVG")]
        out: PathBuf,
        /// What the run measured, the title's start (default: the path or the product);
        /// the gateways, the concurrency and the rate follow.
        #[arg(long, value_name = "TEXT")]
        title: Option<String>,
    },
    /// A chaos run's timeline, from its folder: load.json (a load with --sample-admin-ms),
    /// history.jsonl and, when the scenario has a fault, fault.json.
    Chaos {
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        #[arg(long, value_name = "SVG")]
        out: PathBuf,
        #[arg(long, value_name = "TEXT", default_value = "chaos run")]
        title: String,
    },
    /// Live streams against polling, from `live-sale` results: the confirmation → buyer
    /// delay by percentile.
    Live {
        /// `live-sale --mode poll` results (polling as advised); repeat.
        #[arg(long, value_name = "JSON", required = true)]
        poll: Vec<PathBuf>,
        /// `live-sale --mode poll --queue-poll-ms 300` results (polling every 300 ms);
        /// repeat, or none.
        #[arg(long, value_name = "JSON")]
        poll_fixed: Vec<PathBuf>,
        /// `live-sale --mode stream` results; repeat.
        #[arg(long, value_name = "JSON", required = true)]
        stream: Vec<PathBuf>,
        #[arg(long, value_name = "SVG")]
        out: PathBuf,
        #[arg(
            long,
            value_name = "TEXT",
            default_value = "live streams against polling"
        )]
        title: String,
    },
}

pub fn run(args: PlotArgs) -> anyhow::Result<bool> {
    match args.command {
        PlotCommand::Load {
            summary,
            out,
            title,
        } => load_chart::write_from_json(&summary, title.as_deref(), &out)?,
        PlotCommand::Chaos {
            run_dir,
            out,
            title,
        } => {
            let chart = chaos_chart::ChaosRun::read(&run_dir)?.chart(title);
            let svg = chart::render_svg(&chart)?;
            std::fs::write(&out, svg)
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?;
        }
        PlotCommand::Live {
            poll,
            poll_fixed,
            stream,
            out,
            title,
        } => live_chart::write(&poll, &poll_fixed, &stream, &title, &out)?,
    }
    Ok(true)
}
