//! The run's report: its figures, the end-state cross-checks, and the goal they are judged by.

use super::figures::{LagStats, WorkerLag};
use serde::{Deserialize, Serialize};

/// The goal of issue 12: p99 of the lag at most this.
pub const GOAL_P99_MS: f64 = 1000.0;

/// One end-state cross-check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub ok: bool,
    pub found: String,
}

impl Check {
    pub(super) fn new(name: &str, ok: bool, found: String) -> Self {
        Self {
            name: name.to_owned(),
            ok,
            found,
        }
    }
}

/// What `expiry` measured (`--out`, `--json`). `scripts/bench.sh` reads `ok`, `lag_ms`
/// (`p50`, `p99`, `max`), `orders_per_s`, `expiry_s`, `deadline_span_s`, `orders`,
/// `units_back`, `goal_met` and `problems`: keep the names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpiryReport {
    pub kind: String,
    /// The run is valid and every cross-check passed.
    pub ok: bool,
    pub product: u64,
    pub namespace: String,
    /// Buys asked for, and answered `202`/`200`.
    pub buyers: u64,
    pub accepted: u64,
    pub buy_s: f64,
    /// Orders in MySQL with a deadline: the units expected back.
    pub orders: u64,
    pub window_secs: u64,
    pub poll_ms: u64,
    /// From the last buy until every order was confirmed.
    pub confirm_wait_s: f64,
    /// First deadline − the start of the polling: above 0 for a valid run.
    pub margin_ms: i64,
    /// Last deadline − first deadline.
    pub deadline_span_s: f64,
    /// Units the polling saw come back.
    pub units_back: u64,
    /// `null` without any unit back.
    pub lag_ms: Option<LagStats>,
    /// First to last unit back, and units back per second over it.
    pub expiry_s: Option<f64>,
    pub orders_per_s: Option<f64>,
    pub goal_p99_ms: f64,
    /// `null` when the run is invalid.
    pub goal_met: Option<bool>,
    /// The workers' own histogram over the run (`--worker-metrics`).
    pub worker_lag: Option<WorkerLag>,
    pub checks: Vec<Check>,
    /// Why the run is invalid.
    pub problems: Vec<String>,
}

impl ExpiryReport {
    /// The one-line summary.
    pub fn line(&self) -> String {
        let ms = |x: f64| format!("{x:.1} ms");
        let lag = self.lag_ms.map_or("no unit came back".into(), |l| {
            format!(
                "lag p50 {}, p99 {}, max {}",
                ms(l.p50),
                ms(l.p99),
                ms(l.max)
            )
        });
        let goal = match self.goal_met {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not judged",
        };
        let rate = match (self.orders_per_s, self.expiry_s) {
            (Some(r), Some(s)) => format!("{:.0} orders/s ({:.3} s first to last)", r, s),
            _ => "throughput n/a".into(),
        };
        let worker = self.worker_lag.as_ref().map_or(String::new(), |w| {
            let le = |x: Option<f64>| x.map_or("n/a".into(), |s| format!("≤ {s} s"));
            format!(
                "; worker histogram: {} observed, p50 {}, p99 {}",
                w.count,
                le(w.p50_le_s),
                le(w.p99_le_s)
            )
        });
        let verdict = if self.ok {
            "all checks passed".to_owned()
        } else {
            let failed: Vec<&str> = self
                .checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| c.name.as_str())
                .collect();
            let mut why = self.problems.clone();
            if !failed.is_empty() {
                why.push(format!("failed checks: {}", failed.join(", ")));
            }
            format!("INVALID: {}", why.join("; "))
        };
        format!(
            "expiry: {}/{} units of product {} back, window {} s, deadlines over {:.3} s: {lag} \
             (goal p99 ≤ {} ms: {goal}); {rate}{worker}; {verdict}",
            self.units_back,
            self.orders,
            self.product,
            self.window_secs,
            self.deadline_span_s,
            GOAL_P99_MS,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_run_says_why_and_is_not_judged() {
        let r = ExpiryReport {
            kind: "expiry".into(),
            ok: false,
            product: 7,
            namespace: "ns".into(),
            buyers: 10,
            accepted: 10,
            buy_s: 0.1,
            orders: 10,
            window_secs: 5,
            poll_ms: 5,
            confirm_wait_s: 1.0,
            margin_ms: -20,
            deadline_span_s: 0.2,
            units_back: 10,
            lag_ms: LagStats::of(&[5.0; 10]),
            expiry_s: Some(0.1),
            orders_per_s: Some(100.0),
            goal_p99_ms: GOAL_P99_MS,
            goal_met: None,
            worker_lag: None,
            checks: vec![Check::new("no restore_due left", false, "1".into())],
            problems: vec!["the first deadline fell 20 ms before the polling started".into()],
        };
        let line = r.line();
        assert!(line.contains("not judged"), "{line}");
        assert!(
            line.contains("INVALID: the first deadline fell 20 ms")
                && line.contains("failed checks: no restore_due left"),
            "{line}"
        );
        let back: ExpiryReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
