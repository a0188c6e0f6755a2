//! Latency histograms per outcome: one set per worker shard, merged at the end.

use crate::load::plan::Outcome;
use crate::load::timeline::{Timeline, TimelineRecorder};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// Highest latency a histogram tracks, in µs (larger values are clamped to it).
const MAX_LATENCY_US: u64 = 3_600_000_000;

pub(super) fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// One histogram per outcome, and one of the send lag of scheduled requests.
pub struct OutcomeHistograms {
    hists: Vec<Option<Histogram<u64>>>,
    /// `--rate`: how late each request went out, against when it was due (µs).
    lag: Option<Histogram<u64>>,
    /// Each answer's time and latency, for the plot.
    timeline: TimelineRecorder,
}

impl Default for OutcomeHistograms {
    fn default() -> Self {
        Self {
            hists: (0..Outcome::COUNT).map(|_| None).collect(),
            lag: None,
            timeline: TimelineRecorder::default(),
        }
    }
}

impl OutcomeHistograms {
    /// One answer; `at_ms` (ms after the start) also puts it on the timeline.
    pub fn record(
        &mut self,
        outcome: Outcome,
        latency_us: u64,
        lag_us: Option<u64>,
        at_ms: Option<u64>,
    ) {
        if let Some(at) = at_ms {
            self.timeline.record(outcome, at, latency_us);
        }
        self.hists[outcome.index()]
            .get_or_insert_with(new_histogram)
            .saturating_record(latency_us.max(1));
        if let Some(lag) = lag_us {
            // 0 is a valid lag; the histogram's lowest value is 1 µs.
            self.lag
                .get_or_insert_with(new_histogram)
                .saturating_record(lag.max(1));
        }
    }

    pub fn merge(&mut self, other: &OutcomeHistograms) {
        for (mine, theirs) in self.hists.iter_mut().zip(&other.hists) {
            if let Some(h) = theirs {
                mine.get_or_insert_with(new_histogram)
                    .add(h)
                    .expect("histograms share their bounds");
            }
        }
        if let Some(h) = &other.lag {
            self.lag
                .get_or_insert_with(new_histogram)
                .add(h)
                .expect("histograms share their bounds");
        }
        self.timeline.merge(&other.timeline);
    }

    /// The answers over time, in buckets, over a run of `duration_s` seconds.
    pub fn timeline(&self, duration_s: f64) -> Timeline {
        Timeline::build(&self.timeline, duration_s)
    }

    /// Send lag of the scheduled requests, if the run had a schedule.
    pub fn lag(&self) -> Option<&Histogram<u64>> {
        self.lag.as_ref()
    }

    pub fn get(&self, outcome: Outcome) -> Option<&Histogram<u64>> {
        self.hists[outcome.index()].as_ref()
    }

    /// Every outcome together.
    /// Latency stats of each outcome seen, then of all of them, over `duration_s`.
    pub fn stats(&self, duration_s: f64) -> (Vec<OutcomeStats>, OutcomeStats) {
        let outcomes = Outcome::ALL
            .iter()
            .filter_map(|o| {
                self.get(*o)
                    .filter(|h| !h.is_empty())
                    .map(|h| OutcomeStats::from_histogram(o.label(), h, duration_s))
            })
            .collect();
        let all = OutcomeStats::from_histogram("all", &self.total(), duration_s);
        (outcomes, all)
    }

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

    pub fn record(
        &self,
        shard: usize,
        outcome: Outcome,
        latency_us: u64,
        lag_us: Option<u64>,
        at_ms: Option<u64>,
    ) {
        let s = &self.shards[shard % self.shards.len()];
        s.lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(outcome, latency_us, lag_us, at_ms);
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_merge_and_give_percentiles() {
        let shared = ShardedHistograms::new(3);
        for i in 1..=1000u64 {
            shared.record(i as usize, Outcome::Accepted, i * 10, Some(i), None);
        }
        shared.record(0, Outcome::SoldOut, 0, None, None);
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
        // The lag histogram holds the scheduled requests only.
        assert_eq!(merged.lag().unwrap().len(), 1000);
        assert_eq!(merged.lag().unwrap().max(), 1000);
        let empty = OutcomeStats::from_histogram("x", &new_histogram(), 0.0);
        assert_eq!(empty.max_ms, 0.0);
    }
}
