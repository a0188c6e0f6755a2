//! The figures of a run, and its report.

use serde::Serialize;

/// Utime + stime, in clock ticks, from the text of `/proc/PID/stat` (fields 14 and 15; the
/// command name, in parentheses, may hold spaces).
pub fn cpu_ticks_of_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Polls per second over the window from the start to `end_ms`, from counts per 100 ms
/// bucket since the start. When the window is longer than 3 s, its first second (the first
/// polls are spread over it) is left out. `None` for an empty window.
pub fn sustained_rate(buckets: &[u32], end_ms: u64) -> Option<f64> {
    let end = (end_ms / 100) as usize;
    let from = if end_ms > 3000 { 10 } else { 0 };
    let end = end.min(buckets.len());
    if end <= from {
        return None;
    }
    let n: u64 = buckets[from..end].iter().map(|&c| u64::from(c)).sum();
    Some(n as f64 / ((end - from) as f64 / 10.0))
}

/// The first 100 ms bucket boundary, ms since the start, by which at least `want` events of
/// `buckets` (counts per 100 ms) had happened.
pub fn time_to_count_ms(buckets: &[u32], want: u64) -> Option<u64> {
    let mut seen = 0u64;
    for (i, &c) in buckets.iter().enumerate() {
        seen += u64::from(c);
        if seen >= want {
            return Some((i as u64 + 1) * 100);
        }
    }
    None
}

/// The `k`-th (1-based) earliest of `times`, if there are that many.
pub fn kth_earliest(times: &mut [i64], k: usize) -> Option<i64> {
    if k == 0 || times.len() < k {
        return None;
    }
    times.sort_unstable();
    Some(times[k - 1])
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    pub ok: u64,
    pub rate_limited: u64,
    pub unavailable: u64,
    pub other_status: u64,
    pub transport_errors: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueSaleReport {
    pub ok: bool,
    pub problems: Vec<String>,
    pub buyers: u64,
    pub stock: u64,
    pub admit_per_sec: f64,
    pub max_admitted_factor: f64,
    pub concurrency: usize,
    pub gateways: usize,
    pub product: u64,
    pub starts_in_s: f64,
    /// Joins answered 202.
    pub joined: u64,
    pub join_s: f64,
    pub joins_per_s: f64,
    /// ms from the last join's answer to the start (negative: the joins ran late).
    pub join_margin_ms: i64,
    pub joins: Counts,
    /// Polls answered (any status), from the start to the end of the run.
    pub polls: u64,
    pub poll_answers: Counts,
    pub poll_states: std::collections::BTreeMap<String, u64>,
    /// ms after the start by which 90 % of the joined buyers had stopped.
    pub done90_ms: Option<u64>,
    /// Polls answered per second from the start to `done90_ms` (see [`sustained_rate`]).
    pub polls_per_s: Option<f64>,
    /// The best second.
    pub polls_per_s_peak: f64,
    /// Polls answered per second over each second since the start.
    pub polls_per_second: Vec<u32>,
    /// Buyers admitted (polls answered `admitted`, one per admission seen).
    pub admissions: u64,
    /// Buys with an admission token, by answer.
    pub buys_accepted: u64,
    pub buys_sold_out: u64,
    pub buys_refused: u64,
    pub buys_failed: u64,
    /// From the start to the 202 of the `stock`-th unit.
    pub sold_out_ms: Option<i64>,
    /// From the start to the last poll answered.
    pub poll_phase_s: f64,
    pub redis_cpu_us_per_join: Option<f64>,
    pub redis_cpu_us_per_poll: Option<f64>,
    pub redis_cpu_s_polling: Option<f64>,
    pub baseline: Option<BaselineReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BaselineReport {
    pub product: u64,
    pub buys: u64,
    pub accepted: u64,
    pub sold_out_answers: u64,
    pub answers: Counts,
    /// From the start to the 202 of the `stock`-th unit.
    pub sold_out_ms: Option<i64>,
}

impl QueueSaleReport {
    /// The one-line summary.
    pub fn line(&self) -> String {
        let f = |v: Option<f64>, unit: &str| v.map_or("n/a".into(), |v| format!("{v:.1}{unit}"));
        let secs =
            |v: Option<i64>| v.map_or("n/a".into(), |v| format!("{:.2} s", v as f64 / 1000.0));
        let mut s = format!(
            "queue-sale: {} buyers joined in {:.1} s ({:.0}/s), {} units (admit {}/s, factor {}): \
             {} polls/s sustained (peak {:.0}/s, {} polls in {:.1} s); Redis {} CPU per poll, {} per join; \
             start → last unit sold {}",
            self.joined,
            self.join_s,
            self.joins_per_s,
            self.stock,
            self.admit_per_sec,
            self.max_admitted_factor,
            f(self.polls_per_s, ""),
            self.polls_per_s_peak,
            self.polls,
            self.poll_phase_s,
            f(self.redis_cpu_us_per_poll, " µs"),
            f(self.redis_cpu_us_per_join, " µs"),
            secs(self.sold_out_ms),
        );
        if let Some(b) = &self.baseline {
            s += &format!(
                ", without a waiting room {} ({} buys)",
                secs(b.sold_out_ms),
                b.buys
            );
        }
        if !self.ok {
            s += &format!("; INVALID: {}", self.problems.join("; "));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_plus_stime_even_with_spaces_in_the_name() {
        let stat = "1234 (redis-server *:6379) S 1 1234 1234 0 -1 4194560 5000 0 0 0 \
                    700 300 0 0 20 0 5 0 100 0 0";
        assert_eq!(cpu_ticks_of_stat(stat), Some(1000));
        assert_eq!(cpu_ticks_of_stat("garbage"), None);
        assert_eq!(cpu_ticks_of_stat("1 (x) S 1 2"), None);
    }

    #[test]
    fn the_sustained_rate_leaves_the_first_second_out_of_long_windows() {
        // 1 s of ramp at 100/100 ms, then 500/100 ms.
        let mut b = vec![100u32; 10];
        b.extend([500u32; 40]);
        assert_eq!(sustained_rate(&b, 5000), Some(5000.0));
        // A short window counts from the start.
        assert_eq!(sustained_rate(&b, 2000), Some((1000.0 + 5000.0) / 2.0));
        // Beyond the buckets, the window is cut; an empty window has no rate.
        assert_eq!(sustained_rate(&b, 60_000), Some(5000.0));
        assert_eq!(sustained_rate(&b, 50), None);
    }

    #[test]
    fn counts_and_kth_times() {
        let b = [0, 3, 0, 5, 2];
        assert_eq!(time_to_count_ms(&b, 1), Some(200));
        assert_eq!(time_to_count_ms(&b, 8), Some(400));
        assert_eq!(time_to_count_ms(&b, 10), Some(500));
        assert_eq!(time_to_count_ms(&b, 11), None);
        let mut t = vec![30, 10, 20];
        assert_eq!(kth_earliest(&mut t, 3), Some(30));
        assert_eq!(kth_earliest(&mut t, 1), Some(10));
        assert_eq!(kth_earliest(&mut t, 4), None);
        assert_eq!(kth_earliest(&mut t, 0), None);
    }
}
