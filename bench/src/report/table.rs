//! `report table`: the table, the notes under it, and the results block it writes into a
//! Markdown file.

use super::format::{fmt, utc_minutes};
use super::results::{read_criterion_us, AuthCpu, Results};
use super::rows::rows;
use super::rules::{self, Mark};
use super::{cpu, plots, TableArgs};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The drain details under the table.
fn drain_notes(r: &Results) -> Vec<String> {
    let mut notes = Vec::new();
    for (name, d) in [("6", &r.f6), ("8", &r.f8)] {
        let Some(d) = d else { continue };
        notes.push(format!(
            "({name}): {} rows of {} orders ({} answered 202) in {} transactions ({:.2} s \
             settling); steady rate after the first transaction: {} orders/s over {}; from \
             worker start {:.2} s ({} orders/s, incl. {} start-up and group join)",
            d.rows,
            d.orders,
            d.accepted,
            d.batches,
            d.settle_s,
            fmt(d.per_s()),
            d.drain_s().map_or("n/a".into(), |s| format!("{s:.2} s")),
            d.from_start_s(),
            fmt(d.from_start_per_s()),
            d.first
                .map_or("n/a".into(), |f| format!("{:.2} s", f - d.t0)),
        ));
    }
    notes
}
/// The line under the CPU table on what buyer authentication costs the gateway, when (2),
/// (2N) or (2E) ran. `invalid`: the figures whose runs do not count.
pub(super) fn auth_note(r: &Results, figures: &[&str], invalid: &[&str]) -> Option<String> {
    if !["2", "2N", "2E"].iter().any(|f| figures.contains(f)) {
        return None;
    }
    let a = &r.auth;
    let caveat = |figs: &[&str]| {
        let bad: Vec<String> = figs
            .iter()
            .filter(|f| invalid.contains(f))
            .map(|f| format!("({f})"))
            .collect();
        if bad.is_empty() {
            String::new()
        } else {
            format!(", not judged: {} INVALID", bad.join(" and "))
        }
    };
    let verify = match &a.ed25519_verify {
        Some((v, source)) => format!(
            "{:.1} µs: one verify {v:.2} µs ({source}) + {} µs",
            v + rules::EDDSA_MARGIN_US,
            rules::EDDSA_MARGIN_US
        ),
        None => format!(
            "one Ed25519 verify + {} µs; the verify's cost is unknown: run `cargo bench -p \
             seckill-gateway --bench auth`, then `seckill-bench report table` again with \
             --ed25519-criterion target/criterion/ed25519_verify/new/estimates.json",
            rules::EDDSA_MARGIN_US
        ),
    };
    Some(format!(
        "Buyer authentication, gateway CPU per request, measured in this run in alternated \
         rounds: HS256 (2) − (2N) = {} (goal ≤ {} µs{}); EdDSA (2E) − (2N) = {} (goal ≤ \
         {verify}{}).",
        a.hs256().text(),
        rules::HS256_MAX_US,
        caveat(&["2", "2N"]),
        a.eddsa().text(),
        caveat(&["2E", "2N"]),
    ))
}

/// One Ed25519 verify's cost and where it comes from, from `--ed25519-verify-us` or
/// `--ed25519-criterion`; a criterion file that cannot be read is a warning, not an error.
fn ed25519_verify(a: &TableArgs) -> anyhow::Result<Option<(f64, String)>> {
    if let Some(us) = a.ed25519_verify_us {
        anyhow::ensure!(
            us.is_finite() && us > 0.0,
            "--ed25519-verify-us must be above 0"
        );
        return Ok(Some((us, "as given".into())));
    }
    let Some(path) = &a.ed25519_criterion else {
        return Ok(None);
    };
    match read_criterion_us(path) {
        Ok(us) => {
            let when = std::fs::metadata(path)
                .and_then(|m| m.modified())
                .map_or("?".into(), |t| format!("{} UTC", utc_minutes(t)));
            Ok(Some((
                us,
                format!(
                    "criterion `ed25519/verify`, `{}` of {when}",
                    relative(path).display()
                ),
            )))
        }
        Err(e) => {
            eprintln!("warning: --ed25519-criterion: {e:#}; (2E) is not judged");
            Ok(None)
        }
    }
}

pub const HEADER: &str =
    "| # | figure | value | p99 | ratio | goal | met |\n|---|---|---|---|---|---|---|";

pub(super) fn table(a: &TableArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(a.dir.is_dir(), "{} is not a run folder", a.dir.display());
    let figures: Vec<&str> = a.figures.split_whitespace().collect();
    let mut results = Results::load(&a.dir);
    results.auth = AuthCpu::load(&a.dir, &results, a.clk_tck, ed25519_verify(a)?);
    let rows = rows(&results, &figures);
    let invalid: Vec<&str> = rows
        .iter()
        .filter(|r| matches!(r.mark, Mark::Invalid(_)))
        .map(|r| r.figure)
        .collect();
    let links = a
        .plots
        .as_deref()
        .map_or_else(Vec::new, |dir| plots::links(dir, a.doc.as_deref(), &rows));
    let table = plots::table(&rows, &links);
    let gallery = plots::gallery(&links);
    let notes = drain_notes(&results);
    let machine = cpu::Machine::read();
    let cpu_table = cpu::table(&a.dir, &results, a.clk_tck, machine.nproc);
    let auth = auth_note(&results, &figures, &invalid);

    println!();
    println!("{table}");
    for n in &notes {
        println!("{n}");
    }
    println!();
    println!("{cpu_table}");
    if let Some(n) = &auth {
        println!();
        println!("{n}");
    }
    if !invalid.is_empty() {
        eprintln!(
            "INVALID: the run of figure(s) {} does not count; see the table",
            invalid.join(", ")
        );
    }

    if let Some(doc) = &a.doc {
        let block = format!(
            "<!-- bench:begin (generated by scripts/bench.sh; edit outside this block) -->\n\
             ## Latest results\n\n\
             {} UTC, {}, on {}: `nproc` = {}, {}, {}.\n\
             Settings: {}.\n\
             {}\n\n\
             {table}\n\n\
             {}\n\n\
             CPU time per request (µs), by process, over each figure's run (`/proc/<pid>/stat`; \
             the load tool\nfrom `time`; \"other\" is everything else that ran, the kernel's \
             softirq work on loopback traffic\nincluded; \"whole machine\" is all of it):\n\n\
             {cpu_table}\n\n\
             {}\
             - Raw results: `{}` (removed by `scripts/dev-down.sh --purge`).\n\n\
             {gallery}\
             <!-- bench:end -->\n",
            utc_minutes(std::time::SystemTime::now()),
            a.mode.describe(),
            machine.host,
            machine.nproc,
            machine.cpu,
            machine.os,
            a.settings,
            a.note,
            notes
                .iter()
                .map(|n| format!("- {n}"))
                .collect::<Vec<_>>()
                .join("\n"),
            auth.as_ref().map_or(String::new(), |n| format!("- {n}\n")),
            relative(&a.dir).display(),
        );
        let text = std::fs::read_to_string(doc).unwrap_or_else(|_| "# Benchmarks\n\n".into());
        std::fs::write(doc, replace_block(&text, &block))
            .with_context(|| format!("writing {}", doc.display()))?;
        eprintln!("wrote {}", doc.display());
    }
    Ok(invalid.is_empty())
}

/// `path` relative to the current directory when it is under it.
fn relative(path: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    std::env::current_dir()
        .ok()
        .and_then(|cwd| abs.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or(abs)
}

/// `text` with its results block replaced by `block`, or `block` appended.
pub fn replace_block(text: &str, block: &str) -> String {
    const BEGIN: &str = "<!-- bench:begin";
    const END: &str = "<!-- bench:end -->";
    match (text.find(BEGIN), text.find(END)) {
        (Some(b), Some(e)) if e > b => {
            let mut tail = &text[e + END.len()..];
            tail = tail.strip_prefix('\n').unwrap_or(tail);
            format!("{}{block}{tail}", &text[..b])
        }
        _ => format!("{}\n\n{block}", text.trim_end()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_results_block_is_replaced_in_place() {
        let doc = "# B\n\nintro\n<!-- bench:begin x -->\nold\n<!-- bench:end -->\nafter\n";
        let block = "<!-- bench:begin y -->\nnew\n<!-- bench:end -->\n";
        assert_eq!(
            replace_block(doc, block),
            "# B\n\nintro\n<!-- bench:begin y -->\nnew\n<!-- bench:end -->\nafter\n"
        );
        assert_eq!(replace_block("# B\n", block), format!("# B\n\n{block}"));
    }
}
