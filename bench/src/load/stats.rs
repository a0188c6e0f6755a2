//! Latency histograms per outcome, the run's summary and its table.

use super::plan::Outcome;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;
use std::sync::Mutex;

/// Highest latency a histogram tracks, in µs (larger values are clamped to it).
const MAX_LATENCY_US: u64 = 3_600_000_000;

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// One histogram per outcome.
pub struct OutcomeHistograms {
    hists: Vec<Option<Histogram<u64>>>,
}

impl Default for OutcomeHistograms {
    fn default() -> Self {
        Self {
            hists: (0..Outcome::COUNT).map(|_| None).collect(),
        }
    }
}

impl OutcomeHistograms {
    pub fn record(&mut self, outcome: Outcome, latency_us: u64) {
        self.hists[outcome.index()]
            .get_or_insert_with(new_histogram)
            .saturating_record(latency_us.max(1));
    }

    pub fn merge(&mut self, other: &OutcomeHistograms) {
        for (mine, theirs) in self.hists.iter_mut().zip(&other.hists) {
            if let Some(h) = theirs {
                mine.get_or_insert_with(new_histogram)
                    .add(h)
                    .expect("histograms share their bounds");
            }
        }
    }

    pub fn get(&self, outcome: Outcome) -> Option<&Histogram<u64>> {
        self.hists[outcome.index()].as_ref()
    }

    /// Every outcome together.
    pub fn total(&self) -> Histogram<u64> {
        let mut all = new_histogram();
        for h in self.hists.iter().flatten() {
            all.add(h).expect("histograms share their bounds");
        }
        all
    }
}

/// Histograms shared by the load workers, in a few shards so that workers on different
/// threads rarely wait on one lock. Each lock is held for one `record`.
pub struct ShardedHistograms {
    shards: Vec<Mutex<OutcomeHistograms>>,
}

impl ShardedHistograms {
    pub fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards.max(1))
                .map(|_| Mutex::new(OutcomeHistograms::default()))
                .collect(),
        }
    }

    pub fn record(&self, shard: usize, outcome: Outcome, latency_us: u64) {
        let s = &self.shards[shard % self.shards.len()];
        s.lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(outcome, latency_us);
    }

    pub fn merged(&self) -> OutcomeHistograms {
        let mut all = OutcomeHistograms::default();
        for s in &self.shards {
            all.merge(&s.lock().unwrap_or_else(|e| e.into_inner()));
        }
        all
    }
}

/// One row of the summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutcomeStats {
    pub outcome: String,
    pub count: u64,
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl OutcomeStats {
    pub fn from_histogram(outcome: &str, h: &Histogram<u64>, duration_s: f64) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        let count = h.len();
        let (p50, p90, p99, p999, max) = if count == 0 {
            (0, 0, 0, 0, 0)
        } else {
            (
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.9),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.max(),
            )
        };
        Self {
            outcome: outcome.to_owned(),
            count,
            per_sec: if duration_s > 0.0 {
                count as f64 / duration_s
            } else {
                0.0
            },
            p50_ms: ms(p50),
            p90_ms: ms(p90),
            p99_ms: ms(p99),
            p999_ms: ms(p999),
            max_ms: ms(max),
        }
    }
}

/// Tickets after the polling phase.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TicketTotals {
    /// Distinct tickets answered with 202, 200 or 201.
    pub issued: u64,
    pub confirmed: u64,
    pub failed: u64,
    /// Still pending when polling stopped (or was skipped).
    pub unsettled: u64,
}

/// The whole run, as printed (`--json`) and as the history's last line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub kind: &'static str,
    /// HTTP engine of the load phase: `reqwest` or `hyper`.
    pub engine: &'static str,
    /// `buy`, or `get` for `--path-get`.
    pub mode: &'static str,
    pub gateways: Vec<String>,
    pub product: Option<u64>,
    pub path: Option<String>,
    pub concurrency: usize,
    pub started_at_us: u64,
    /// Load phase only (not the polling).
    pub duration_s: f64,
    pub requests: u64,
    pub req_per_s: f64,
    pub until_sold_out: bool,
    /// `--until-sold-out`: whether every gateway answered 409 after its last 202.
    pub sold_out_reached: Option<bool>,
    pub first_user: u64,
    pub users_used: u64,
    /// Distinct users answered 202/200/201.
    pub distinct_users_accepted: u64,
    /// Distinct users answered 409.
    pub distinct_users_sold_out: u64,
    pub outcomes: Vec<OutcomeStats>,
    pub all: OutcomeStats,
    pub tickets: TicketTotals,
    pub settle_s: f64,
    pub history: Option<String>,
}

impl Summary {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<8} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "outcome", "count", "req/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"
        );
        for r in self.outcomes.iter().chain(std::iter::once(&self.all)) {
            let _ = writeln!(
                s,
                "{:<8} {:>9} {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                r.outcome, r.count, r.per_sec, r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms
            );
        }
        let target = match (&self.product, &self.path) {
            (Some(p), _) => format!("product {p}"),
            (None, Some(path)) => format!("GET {path}"),
            (None, None) => "?".into(),
        };
        let _ = writeln!(
            s,
            "\n{} requests to {} gateway(s), {target}, concurrency {} ({}): {:.2} s, {:.0} req/s",
            self.requests,
            self.gateways.len(),
            self.concurrency,
            self.engine,
            self.duration_s,
            self.req_per_s
        );
        if self.mode == "buy" {
            let _ = writeln!(
                s,
                "users: {} used (from {}), {} got a ticket, {} got 409",
                self.users_used,
                self.first_user,
                self.distinct_users_accepted,
                self.distinct_users_sold_out
            );
            if self.until_sold_out {
                let _ = writeln!(
                    s,
                    "until sold out: {}",
                    if self.sold_out_reached == Some(true) {
                        "every gateway answered 409 after its last 202"
                    } else {
                        "NOT reached (max users or time limit hit)"
                    }
                );
            }
            let t = &self.tickets;
            let _ = writeln!(
                s,
                "tickets: {} issued, {} confirmed, {} failed, {} unsettled (polled for {:.2} s)",
                t.issued, t.confirmed, t.failed, t.unsettled, self.settle_s
            );
        }
        if let Some(h) = &self.history {
            let _ = writeln!(s, "history: {h}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_merge_and_give_percentiles() {
        let shared = ShardedHistograms::new(3);
        for i in 1..=1000u64 {
            shared.record(i as usize, Outcome::Accepted, i * 10);
        }
        shared.record(0, Outcome::SoldOut, 0);
        let merged = shared.merged();
        let h = merged.get(Outcome::Accepted).unwrap();
        assert_eq!(h.len(), 1000);
        let row = OutcomeStats::from_histogram("202", h, 2.0);
        assert_eq!(row.count, 1000);
        assert_eq!(row.per_sec, 500.0);
        assert!((row.p50_ms - 5.0).abs() < 0.01, "{row:?}");
        assert!((row.p99_ms - 9.9).abs() < 0.01, "{row:?}");
        assert!((row.max_ms - 10.0).abs() < 0.01, "{row:?}");
        assert!(merged.get(Outcome::Error).is_none());
        assert_eq!(merged.total().len(), 1001);
        let empty = OutcomeStats::from_histogram("x", &new_histogram(), 0.0);
        assert_eq!(empty.max_ms, 0.0);
    }
}
