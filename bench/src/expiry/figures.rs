//! The figures of a run: units back over time, the lags, their percentiles, the throughput
//! and the workers' own lag histogram.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// When the stock first showed `k` units back, for `k = 1, 2, …`, from successive polls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StockWatch {
    /// The stock before any unit came back.
    base: i64,
    /// Units expected back.
    target: usize,
    /// `reached_us[k - 1]`: µs since the epoch of the first poll that saw `k` units back.
    pub reached_us: Vec<u64>,
    /// The most units back seen, even beyond the target (which is then a problem).
    pub max_back: i64,
}

impl StockWatch {
    pub fn new(base: i64, target: usize) -> Self {
        Self {
            base,
            target,
            reached_us: Vec::with_capacity(target),
            max_back: 0,
        }
    }

    /// One poll: the stock read at `at_us`.
    pub fn observe(&mut self, stock: i64, at_us: u64) {
        let back = stock - self.base;
        self.max_back = self.max_back.max(back);
        let upto = back.clamp(0, self.target as i64) as usize;
        while self.reached_us.len() < upto {
            self.reached_us.push(at_us);
        }
    }

    pub fn done(&self) -> bool {
        self.reached_us.len() >= self.target
    }
}

/// The lag of each unit back, ms: the `k`-th time a unit came back (µs since the epoch) less
/// the `k`-th earliest deadline (ms since the epoch). `deadlines_ms` must be sorted; units that
/// never came back have no lag.
pub fn lags_ms(deadlines_ms: &[i64], reached_us: &[u64]) -> Vec<f64> {
    debug_assert!(deadlines_ms.is_sorted());
    deadlines_ms
        .iter()
        .zip(reached_us)
        .map(|(&d, &t)| t as f64 / 1000.0 - d as f64)
        .collect()
}

/// The `q`-quantile of sorted values, nearest rank (the smallest value with at least `q` of
/// them at or below it); `None` when empty.
pub fn percentile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The lag's distribution, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LagStats {
    pub count: usize,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl LagStats {
    pub fn of(lags: &[f64]) -> Option<Self> {
        let mut s = lags.to_vec();
        s.sort_by(f64::total_cmp);
        Some(Self {
            count: s.len(),
            min: *s.first()?,
            p50: percentile(&s, 0.5)?,
            p90: percentile(&s, 0.9)?,
            p99: percentile(&s, 0.99)?,
            max: *s.last()?,
        })
    }
}

/// Units back per second: `n / (t(n) − t(1))` over the times units came back; with its span,
/// s. `None` for fewer than two units or when they all came back in one poll.
pub fn throughput(reached_us: &[u64]) -> Option<(f64, f64)> {
    let (first, last) = (*reached_us.first()?, *reached_us.last()?);
    let span = last.checked_sub(first).filter(|d| *d > 0)? as f64 / 1e6;
    Some((span, reached_us.len() as f64 / span))
}

/// The cumulative buckets (`le` in seconds, count) of `seckill_worker_expiry_lag_seconds` in
/// a Prometheus text exposition; `+Inf` included.
pub fn lag_buckets(text: &str) -> BTreeMap<String, f64> {
    let prefix = "seckill_worker_expiry_lag_seconds_bucket{";
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(prefix)?;
            let (labels, value) = rest.split_once('}')?;
            let le = labels
                .split(',')
                .find_map(|kv| kv.trim().strip_prefix("le="))?
                .trim_matches('"');
            Some((le.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// The worker's view of the run: its histogram's buckets after less before, summed over
/// workers, and the bucket bound its `q`-quantile falls in (s; `None` beyond the last finite
/// bound or without observations).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerLag {
    /// Observations in the run (cancelled orders with a deadline).
    pub count: f64,
    /// The bucket bound, s, at or below which half of them were.
    pub p50_le_s: Option<f64>,
    pub p99_le_s: Option<f64>,
}

impl WorkerLag {
    pub fn of(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> Self {
        let mut buckets: Vec<(f64, f64)> = after
            .iter()
            .filter_map(|(le, n)| {
                let bound = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                Some((bound, n - before.get(le).copied().unwrap_or(0.0)))
            })
            .collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = buckets.last().map_or(0.0, |b| b.1);
        let le = |q: f64| {
            (count > 0.0)
                .then(|| buckets.iter().find(|b| b.1 >= q * count))
                .flatten()
                .map(|b| b.0)
                .filter(|b| b.is_finite())
        };
        Self {
            count,
            p50_le_s: le(0.5),
            p99_le_s: le(0.99),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kth_unit_back_is_matched_with_the_kth_deadline() {
        // Three orders due at 1000, 1000 and 1200 ms; the stock showed one unit back at
        // 1010 ms, then two more at once at 1250.5 ms.
        let mut w = StockWatch::new(0, 3);
        w.observe(0, 1_005_000);
        w.observe(1, 1_010_000);
        w.observe(1, 1_015_000);
        assert!(!w.done());
        w.observe(3, 1_250_500);
        assert!(w.done());
        assert_eq!(w.reached_us, [1_010_000, 1_250_500, 1_250_500]);
        assert_eq!(
            lags_ms(&[1000, 1000, 1200], &w.reached_us),
            [10.0, 250.5, 50.5]
        );
    }

    #[test]
    fn units_back_count_from_the_stock_left_unsold() {
        // 2 of 5 units were never bought: the watch counts from 2.
        let mut w = StockWatch::new(2, 3);
        w.observe(2, 10);
        assert!(w.reached_us.is_empty());
        w.observe(4, 20);
        w.observe(5, 30);
        assert_eq!(w.reached_us, [20, 20, 30]);
        // A stock beyond the target (a unit back twice) is remembered, never counted twice.
        w.observe(6, 40);
        assert_eq!((w.reached_us.len(), w.max_back), (3, 4));
    }

    #[test]
    fn units_that_never_came_back_have_no_lag() {
        assert_eq!(lags_ms(&[100, 200, 300], &[150_000]), [50.0]);
        assert!(lags_ms(&[100], &[]).is_empty());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        // 10,000 values: p99 is the 9,900th.
        let v: Vec<f64> = (1..=10_000).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), Some(9_900.0));
    }

    #[test]
    fn lag_stats_sort_their_input() {
        let s = LagStats::of(&[30.0, 10.0, 20.0, 40.0]).unwrap();
        assert_eq!(
            (s.count, s.min, s.p50, s.p99, s.max),
            (4, 10.0, 20.0, 40.0, 40.0)
        );
        assert_eq!(LagStats::of(&[]), None);
    }

    #[test]
    fn throughput_is_units_over_first_to_last() {
        // 1,000 units from t = 2 s to t = 2.5 s: 2,000 per second.
        let t: Vec<u64> = (0..1000).map(|i| 2_000_000 + i * 500_000 / 999).collect();
        let (span, rate) = throughput(&t).unwrap();
        assert!((span - 0.5).abs() < 1e-9, "{span}");
        assert!((rate - 2000.0).abs() < 1e-6, "{rate}");
        // All in one poll, or a single unit: no rate.
        assert_eq!(throughput(&[5, 5, 5]), None);
        assert_eq!(throughput(&[5]), None);
        assert_eq!(throughput(&[]), None);
    }

    #[test]
    fn the_workers_histogram_is_read_as_a_difference() {
        let text = |counts: [u32; 4]| {
            format!(
                "# HELP seckill_worker_expiry_lag_seconds x\n\
                 # TYPE seckill_worker_expiry_lag_seconds histogram\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"0.1\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"0.5\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"1\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_bucket{{le=\"+Inf\"}} {}\n\
                 seckill_worker_expiry_lag_seconds_sum 1.5\n\
                 seckill_worker_expiry_lag_seconds_count {}\n\
                 seckill_worker_batch_size_bucket{{le=\"1\"}} 99\n",
                counts[0], counts[1], counts[2], counts[3], counts[3]
            )
        };
        let before = lag_buckets(&text([1, 1, 1, 1]));
        assert_eq!(before.len(), 4);
        assert_eq!(before["+Inf"], 1.0);
        // 100 more: 60 under 0.1 s, 39 under 0.5 s, 1 under 1 s.
        let after = lag_buckets(&text([61, 100, 101, 101]));
        let w = WorkerLag::of(&before, &after);
        assert_eq!(w.count, 100.0);
        assert_eq!((w.p50_le_s, w.p99_le_s), (Some(0.1), Some(0.5)));
        // Beyond the last finite bound, or nothing observed: no bound.
        let slow = lag_buckets(&text([1, 1, 1, 101]));
        assert_eq!(WorkerLag::of(&before, &slow).p99_le_s, None);
        assert_eq!(WorkerLag::of(&before, &before), WorkerLag::default());
    }
}
