//! The progress bar on a terminal: requests so far and the counts by outcome.

use super::plan::Outcome;
use super::sale_end::Phase;
use super::worker::Shared;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(super) fn progress_bar(hidden: bool, len: Option<u64>) -> ProgressBar {
    if hidden {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr_with_hz(10));
    let template = if len.is_some() {
        "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} {msg}"
    } else {
        "{spinner} {elapsed_precise} {pos} requests {msg}"
    };
    pb.set_style(
        ProgressStyle::with_template(template)
            .expect("valid progress template")
            .progress_chars("=> "),
    );
    pb
}

pub(super) fn counts_message(shared: &Shared, until_sold_out: bool, elapsed: Duration) -> String {
    let done: u64 = shared
        .counts
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum();
    let mut msg = format!(
        "{:.0} req/s | ",
        done as f64 / elapsed.as_secs_f64().max(1e-3)
    );
    let mut first = true;
    for o in Outcome::ALL {
        let n = shared.counts[o.index()].load(Ordering::Relaxed);
        if n > 0 || o == Outcome::Error {
            if !first {
                msg.push_str(" | ");
            }
            first = false;
            msg.push_str(&format!("{} {n}", o.label()));
        }
    }
    if until_sold_out {
        msg.push_str(&format!(
            " | sold out at {}/{} gateways",
            shared.sale_end.sold_out_gateways(),
            shared.targets.len()
        ));
        match shared.sale_end.phase() {
            Phase::Selling => {}
            Phase::Checking => msg.push_str(", checking the sale is over"),
            Phase::Over => msg.push_str(", over"),
        }
    }
    if let Some(p) = &shared.payers {
        let (paying, paid) = p.progress();
        msg.push_str(&format!(" | {paying} buyers paying, {paid} paid"));
    }
    msg
}
