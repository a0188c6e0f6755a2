//! Where the CPU went: per figure, the CPU time of every process involved, per request.
//!
//! bench.sh snapshots `/proc/<pid>/stat` (utime + stime, clock ticks) of each process before
//! and after a figure (`NAME.cpu0`, `NAME.cpu1`: lines `key pid ticks`, plus `machine 0
//! ticks` from `/proc/stat` and `clock 0 ns`), and the load tool's own CPU with bash's `time`
//! (`NAME.time`: `real user sys`).

use super::Results;
use std::collections::HashMap;
use std::path::Path;

/// This machine, for the results block's header.
pub struct Machine {
    pub host: String,
    pub nproc: usize,
    pub cpu: String,
    pub os: String,
}

impl Machine {
    pub fn read() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default();
        Self {
            host: read("/proc/sys/kernel/hostname"),
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu,
            os: format!("Linux {}", read("/proc/sys/kernel/osrelease")),
        }
    }
}

/// `key → (pid, ticks)`.
type Snapshot = HashMap<String, (String, u64)>;

fn snapshot(path: &Path) -> Option<Snapshot> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (Some(k), Some(pid), Some(v)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        out.insert(k.to_owned(), (pid.to_owned(), v.parse().ok()?));
    }
    Some(out)
}

/// The process role of a snapshot key: `g0` → gateway, `w1` → worker, others as they are.
fn role(key: &str) -> &str {
    let digits = key.len() > 1 && key[1..].bytes().all(|b| b.is_ascii_digit());
    match (digits, key.as_bytes().first()) {
        (true, Some(b'g')) => "gateway",
        (true, Some(b'w')) => "worker",
        _ => key,
    }
}

const COLS: [&str; 7] = [
    "gateway", "worker", "redis", "kafka", "mysql", "client", "machine",
];

/// CPU seconds by role between two snapshots, and the wall time between them.
pub fn cpu_by_role(a: &Snapshot, b: &Snapshot, clk_tck: u64) -> (HashMap<&'static str, f64>, f64) {
    let mut per: HashMap<&'static str, f64> = COLS.iter().map(|c| (*c, 0.0)).collect();
    let wall = match (a.get("clock"), b.get("clock")) {
        (Some(x), Some(y)) => y.1.saturating_sub(x.1) as f64 / 1e9,
        _ => 0.0,
    };
    for (k, (pid, v)) in b {
        if k == "clock" {
            continue;
        }
        // A process that was not there before (or was restarted) counts from 0.
        let base = a.get(k).filter(|(p, _)| p == pid).map_or(0, |(_, v)| *v);
        if let Some(slot) = COLS.iter().find(|c| **c == role(k)) {
            *per.get_mut(slot).expect("every column has a slot") +=
                v.saturating_sub(base) as f64 / clk_tck.max(1) as f64;
        }
    }
    (per, wall)
}

/// A figure's CPU seconds by role (the load tool's from `NAME.time`) and its wall time; `None`
/// without both snapshots.
fn figure_cpu(dir: &Path, name: &str, clk_tck: u64) -> Option<(HashMap<&'static str, f64>, f64)> {
    let a = snapshot(&dir.join(format!("{name}.cpu0")))?;
    let b = snapshot(&dir.join(format!("{name}.cpu1")))?;
    let (mut per, wall) = cpu_by_role(&a, &b, clk_tck);
    if let Ok(t) = std::fs::read_to_string(dir.join(format!("{name}.time"))) {
        let f: Vec<f64> = t
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        if f.len() >= 3 {
            per.insert("client", f[f.len() - 2] + f[f.len() - 1]);
        }
    }
    Some((per, wall))
}

/// The gateways' CPU time per request of figure `name` (`f2`, …), µs: `None` without
/// snapshots or requests.
pub fn gateway_us(dir: &Path, name: &str, requests: Option<u64>, clk_tck: u64) -> Option<f64> {
    let n = requests.filter(|n| *n > 0)?;
    let (per, _) = figure_cpu(dir, name, clk_tck)?;
    Some(per["gateway"] * 1e6 / n as f64)
}

/// The table, or an empty string when no figure has snapshots.
pub fn table(dir: &Path, r: &Results, clk_tck: u64, nproc: usize) -> String {
    let labels = [
        ("f1", "(1) /livez"),
        ("wrk", "(1w) /livez, wrk"),
        ("f2", "(2) accept, HS256 tokens"),
        ("f2n", "(2N) accept, authentication off"),
        ("f2e", "(2E) accept, EdDSA tokens"),
        ("f2l", "(2L) accept, limiter on"),
        ("f2s", "(2S) accept, limiter on, CPU-bound"),
        ("f1r", "(1R) /livez at (2L)'s rate"),
        ("f3", "(3) sold out"),
        ("f4", "(4) sync"),
        ("f5", "(5) redis-benchmark"),
        ("f6", "(6) drain, batched"),
        ("f7", "(7) raw MySQL inserts"),
        ("f8", "(8) drain, row at a time"),
        ("f9", "(9) end to end"),
        ("f9l", "(9L) end to end, lower rate"),
    ];
    let mut rows = Vec::new();
    for (name, label) in labels {
        let Some((per, wall)) = figure_cpu(dir, name, clk_tck) else {
            continue;
        };
        let Some(n) = r.requests(name).filter(|n| *n > 0) else {
            continue;
        };
        let machine = per["machine"];
        let listed: f64 = COLS
            .iter()
            .filter(|c| **c != "machine")
            .map(|c| per[c])
            .sum();
        let other = (machine - listed).max(0.0);
        let us = |s: f64| format!("{:.0}", s * 1e6 / n as f64);
        // The gateway's with a decimal: (2) − (2N) is a few µs.
        let mut cells = vec![format!("{:.1}", per["gateway"] * 1e6 / n as f64)];
        cells.extend(COLS[1..6].iter().map(|c| us(per[c])));
        cells.push(us(other));
        cells.push(us(machine));
        let busy = if wall > 0.0 {
            machine / (wall * nproc.max(1) as f64)
        } else {
            0.0
        };
        rows.push(format!(
            "| {label} | {} | {} | {:.0}% |",
            super::thousands(n as i64),
            cells.join(" | "),
            busy * 100.0
        ));
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "| figure | requests | gateway | worker | Redis | Kafka (tansu) | MySQL | load tool | \
         other | whole machine | machine busy |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n{}",
        rows.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(lines: &[(&str, &str, u64)]) -> Snapshot {
        lines
            .iter()
            .map(|(k, p, v)| (k.to_string(), (p.to_string(), *v)))
            .collect()
    }

    #[test]
    fn cpu_is_split_by_role_and_restarts_count_from_zero() {
        let a = snap(&[
            ("g0", "10", 100),
            ("w1", "11", 50),
            ("redis", "5", 1000),
            ("machine", "0", 10_000),
            ("clock", "0", 1_000_000_000),
        ]);
        let b = snap(&[
            ("g0", "10", 300),
            ("g1", "12", 100),
            ("w1", "13", 20),
            ("redis", "5", 1100),
            ("machine", "0", 10_500),
            ("clock", "0", 3_000_000_000),
        ]);
        let (per, wall) = cpu_by_role(&a, &b, 100);
        assert_eq!(wall, 2.0);
        assert_eq!(per["gateway"], 3.0);
        // w1 was restarted (another pid): all of its ticks count.
        assert_eq!(per["worker"], 0.2);
        assert_eq!(per["redis"], 1.0);
        assert_eq!(per["machine"], 5.0);
        assert_eq!(role("g12"), "gateway");
        assert_eq!(role("machine"), "machine");
        assert_eq!(role("g"), "g");
    }
}
