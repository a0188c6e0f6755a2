//! The load over time: for each outcome, answers per second and latency percentiles in time
//! buckets, for `load --plot` and `seckill-bench plot load`.
//!
//! Each load worker records `(answered at, latency)` per outcome into its shard
//! ([`TimelineRecorder`], 8 bytes a request); at the end the shards are merged and cut into
//! buckets ([`Timeline::build`]) wide enough to hold some 20 answers on average, and at most
//! [`MAX_BUCKETS`] of them, so a paced run of 50 req/s is not noise and a 10 s run at 90,000
//! req/s still shows its shape.

use super::plan::Outcome;
use serde::{Deserialize, Serialize};

/// At most this many buckets over a run.
pub const MAX_BUCKETS: f64 = 120.0;
/// Answers a bucket should hold on average.
const ANSWERS_PER_BUCKET: f64 = 20.0;
/// The widths a bucket may have, in seconds: round numbers on a time axis.
const WIDTHS_S: [f64; 12] = [
    0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 300.0,
];

/// Answers of one shard: per outcome, (ms after the start, latency µs).
#[derive(Debug, Default)]
pub struct TimelineRecorder {
    answers: Vec<Vec<(u32, u32)>>,
}

impl TimelineRecorder {
    pub fn record(&mut self, outcome: Outcome, at_ms: u64, latency_us: u64) {
        if self.answers.is_empty() {
            self.answers = vec![Vec::new(); Outcome::COUNT];
        }
        let clamp = |v: u64| v.min(u32::MAX as u64) as u32;
        self.answers[outcome.index()].push((clamp(at_ms), clamp(latency_us)));
    }

    pub fn merge(&mut self, other: &TimelineRecorder) {
        for (o, theirs) in other.answers.iter().enumerate() {
            for &(at, lat) in theirs {
                self.record(Outcome::ALL[o], at as u64, lat as u64);
            }
        }
    }
}

/// The run cut into buckets of `bucket_s` seconds, one series per outcome seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub bucket_s: f64,
    pub series: Vec<OutcomeSeries>,
}

/// One outcome (`202`, `409`, …): a point for every bucket of the run, so a bucket with no
/// answer of this outcome is a rate of 0, not a gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeSeries {
    pub outcome: String,
    pub points: Vec<TimelinePoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// The bucket's start, seconds after the load started.
    pub t_s: f64,
    pub count: u64,
    /// Answers of this outcome per second over the bucket.
    pub per_s: f64,
    /// Latency percentiles of the bucket's answers; `None` when it had none.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// The bucket width for `answers` answers over `duration_s` seconds.
pub fn bucket_width(duration_s: f64, answers: usize) -> f64 {
    let rate = answers as f64 / duration_s.max(1e-3);
    let want = (ANSWERS_PER_BUCKET / rate.max(1e-9)).max(duration_s / MAX_BUCKETS);
    WIDTHS_S
        .iter()
        .copied()
        .find(|w| *w >= want)
        .unwrap_or(WIDTHS_S[WIDTHS_S.len() - 1])
}

/// The `q` quantile of sorted µs values, in ms (nearest rank).
fn quantile_ms(sorted_us: &[u32], q: f64) -> f64 {
    let rank = ((q * sorted_us.len() as f64).ceil() as usize).clamp(1, sorted_us.len());
    sorted_us[rank - 1] as f64 / 1000.0
}

impl Timeline {
    /// Cuts the answers of a run of `duration_s` seconds into buckets.
    /// The answers of requests still in flight at the end (within a bucket of it) count in
    /// the last bucket; a later answer (a long timeout) extends the timeline. A last bucket
    /// that the run covers only in part has its rate over the part.
    pub fn build(rec: &TimelineRecorder, duration_s: f64) -> Self {
        let total: usize = rec.answers.iter().map(Vec::len).sum();
        let last_ms = rec.answers.iter().flatten().map(|a| a.0).max().unwrap_or(0);
        let last_s = last_ms as f64 / 1000.0;
        let bucket_s = bucket_width(duration_s.max(last_s), total);
        let span_s = if last_s <= duration_s + bucket_s {
            duration_s.max(1e-3)
        } else {
            last_s
        };
        let buckets = ((span_s / bucket_s).ceil() as usize).max(1);
        // In whole ms, so that an answer on a bucket's edge falls in the later one.
        let bucket_ms = (bucket_s * 1000.0).round() as u64;
        let series = Outcome::ALL
            .iter()
            .filter_map(|o| {
                let answers = rec.answers.get(o.index()).filter(|a| !a.is_empty())?;
                let mut cells: Vec<Vec<u32>> = vec![Vec::new(); buckets];
                for &(at, lat) in answers {
                    let i = ((at as u64 / bucket_ms) as usize).min(buckets - 1);
                    cells[i].push(lat);
                }
                let points = cells
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut lat)| {
                        lat.sort_unstable();
                        let q = |q: f64| (!lat.is_empty()).then(|| quantile_ms(&lat, q));
                        let t_s = (i as u64 * bucket_ms) as f64 / 1000.0;
                        let covered = bucket_s.min(span_s - t_s).max(bucket_s / 10.0);
                        TimelinePoint {
                            t_s,
                            count: lat.len() as u64,
                            per_s: lat.len() as f64 / covered,
                            p50_ms: q(0.5),
                            p99_ms: q(0.99),
                            max_ms: q(1.0),
                        }
                    })
                    .collect();
                Some(OutcomeSeries {
                    outcome: o.label().to_owned(),
                    points,
                })
            })
            .collect();
        Self { bucket_s, series }
    }

    pub fn get(&self, outcome: &str) -> Option<&OutcomeSeries> {
        self.series.iter().find(|s| s.outcome == outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_width_holds_some_answers_and_at_most_120_buckets() {
        // 50 req/s for 20 s: 20 answers need 0.4 s, so 0.5 s.
        assert_eq!(bucket_width(20.0, 1000), 0.5);
        // 90,000 req/s for 10 s: the 120-bucket limit rules, 0.1 s.
        assert_eq!(bucket_width(10.0, 900_000), 0.1);
        // A long slow run: 600 s at 10 req/s → 5 s (120 buckets).
        assert_eq!(bucket_width(600.0, 6000), 5.0);
    }

    #[test]
    fn answers_land_in_their_buckets_per_outcome_with_rates_and_percentiles() {
        let mut a = TimelineRecorder::default();
        let mut b = TimelineRecorder::default();
        // 40 accepts in the first second (latency 1..=40 ms), none in the second, 20 in the
        // third; 409s only in the second. Two shards, merged.
        for i in 0..40u64 {
            a.record(Outcome::Accepted, i * 20, (i + 1) * 1000);
        }
        for i in 0..20u64 {
            b.record(Outcome::SoldOut, 1000 + i * 40, 500);
            b.record(Outcome::Accepted, 2000 + i * 40, 7000);
        }
        a.merge(&b);
        let t = Timeline::build(&a, 3.0);
        // 80 answers over 3 s: 20 per bucket needs 0.75 s, so 1 s buckets.
        assert_eq!(t.bucket_s, 1.0);
        let outcomes: Vec<&str> = t.series.iter().map(|s| s.outcome.as_str()).collect();
        assert_eq!(outcomes, ["202", "409"]);
        let acc = &t.get("202").unwrap().points;
        assert_eq!(acc.len(), 3);
        assert_eq!(acc.iter().map(|p| p.count).collect::<Vec<_>>(), [40, 0, 20]);
        assert_eq!(acc[0].per_s, 40.0);
        assert_eq!(acc[0].p50_ms, Some(20.0));
        assert_eq!(acc[0].p99_ms, Some(40.0));
        assert_eq!(acc[0].max_ms, Some(40.0));
        // An empty bucket is a rate of 0 with no latency, not a missing point.
        assert_eq!((acc[1].per_s, acc[1].p50_ms), (0.0, None));
        assert_eq!(acc[2].t_s, 2.0);
        assert_eq!(acc[2].p99_ms, Some(7.0));
        let so = &t.get("409").unwrap().points;
        assert_eq!(so.iter().map(|p| p.count).collect::<Vec<_>>(), [0, 20, 0]);
        assert_eq!(so[1].p50_ms, Some(0.5));
    }

    #[test]
    fn the_drain_at_the_end_counts_in_the_last_bucket_and_a_late_answer_extends_the_run() {
        // 100 req/s for 2.05 s (0.2 s buckets: the last one covers 0.05 s), and 10 answers of
        // requests in flight at the end, 3 ms after it.
        let mut r = TimelineRecorder::default();
        for i in 0..205u64 {
            r.record(Outcome::Accepted, i * 10, 1_000);
        }
        for _ in 0..10 {
            r.record(Outcome::Accepted, 2_053, 1_000);
        }
        let t = Timeline::build(&r, 2.05);
        assert_eq!(t.bucket_s, 0.2);
        let pts = &t.get("202").unwrap().points;
        assert_eq!(pts.len(), 11);
        assert!(
            pts[..10].iter().all(|p| (p.per_s - 100.0).abs() < 1e-9),
            "{pts:?}"
        );
        // 2.00-2.05 s: 5 answers, and the 10 of the drain.
        assert_eq!(pts[10].count, 15);
        assert!((pts[10].per_s - 300.0).abs() < 1e-9, "{}", pts[10].per_s);
        // An answer 10 s after the end (a timeout) is not folded in: the timeline goes on.
        r.record(Outcome::Error, 12_050, 10_000_000);
        let t = Timeline::build(&r, 2.05);
        let last = t.get("error").unwrap().points.last().unwrap().clone();
        assert_eq!(last.count, 1);
        assert!(
            last.t_s <= 12.05 && 12.05 < last.t_s + t.bucket_s,
            "{last:?}"
        );
    }
}
