//! The live figures behind the admin dashboard, merged across every gateway and worker.
//!
//! Once a second each process publishes to Redis what it counted since its last publish
//! (`HINCRBY` into one hash per wall-clock second) and a heartbeat (its dependencies, its
//! sold-out markers, its partitions' lag). Any gateway reads them back: the sums are the
//! whole fleet's, a gateway that restarts still shows the last minutes, and no process
//! needs to know the others' addresses. All keys of a namespace share one hash tag.

use crate::store::RedisConn;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Seconds each per-second hash is kept: the dashboard's charts cover the last five minutes.
pub const KEEP_SECS: i64 = 600;
/// A process whose heartbeat is older than this is no longer listed.
pub const HEARTBEAT_TTL_MS: i64 = 5_000;

/// Fields of the per-second hashes.
pub mod field {
    /// Buys answered `202` (gateways).
    pub const RESERVATIONS: &str = "reservations";
    /// Buys answered `409` (gateways), by Redis or by the local sold-out marker.
    pub const SOLD_OUT: &str = "sold_out";
    /// Orders confirmed in MySQL (workers).
    pub const CONFIRMATIONS: &str = "confirmations";
    /// Units given back to Redis (workers).
    pub const COMPENSATIONS: &str = "compensations";
    /// Batches settled (workers).
    pub const BATCHES: &str = "batches";
    /// Prefix of the 202 → confirmed latency buckets: `lat:<upper bound in ms>`, not
    /// cumulative, and `lat:inf` for the rest.
    pub const LATENCY_PREFIX: &str = "lat:";
}

/// Upper bounds (seconds) of the 202 → confirmed latency histogram, in the workers' metrics
/// and in the per-second hashes.
pub const CONFIRM_LATENCY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];

/// The keys of one namespace's live figures.
#[derive(Debug, Clone)]
pub struct LiveKeys {
    prefix: String,
}

impl LiveKeys {
    pub fn new(namespace: &str) -> Self {
        Self {
            prefix: format!("sk:{{{namespace}:live}}:"),
        }
    }

    /// The counts of one wall-clock second (unix seconds).
    pub fn second(&self, unix_sec: i64) -> String {
        format!("{}s:{unix_sec}", self.prefix)
    }

    /// Every process's last heartbeat time (a sorted set, ms).
    pub fn processes(&self) -> String {
        format!("{}procs", self.prefix)
    }

    /// One process's last heartbeat (JSON).
    pub fn heartbeat(&self, id: &str) -> String {
        format!("{}hb:{id}", self.prefix)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessKind {
    Gateway,
    Worker,
}

/// What a process says about itself each second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub id: String,
    pub kind: ProcessKind,
    pub at_ms: i64,
    /// Each dependency it checked, and whether the check passed.
    pub dependencies: BTreeMap<String, bool>,
    /// Gateways: the products whose local sold-out marker is set.
    #[serde(default)]
    pub sold_out_markers: Vec<u64>,
    /// Workers: the consumer lag of each partition they own.
    #[serde(default)]
    pub partition_lag: BTreeMap<i32, i64>,
    /// Workers: the age of the oldest unsettled ticket of the products they have seen.
    #[serde(default)]
    pub oldest_pending_age_ms: Option<i64>,
}

/// A name for this process, unique in the fleet: its kind, host, pid and a random suffix (two
/// gateways in one test process differ).
pub fn process_id(kind: ProcessKind) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    let short = match kind {
        ProcessKind::Gateway => "gw",
        ProcessKind::Worker => "wk",
    };
    format!(
        "{short}-{host}-{}-{:04x}",
        std::process::id(),
        rand::random::<u16>()
    )
}

/// Turns running totals into what changed since the last successful publish.
#[derive(Debug, Default)]
pub struct Deltas {
    published: HashMap<String, u64>,
}

impl Deltas {
    /// The positive changes of `totals` since [`Deltas::commit`] was last called. A process's
    /// counters only grow, so a total below the last one published is a torn read: nothing is
    /// published for it, and the next commit records it.
    pub fn pending(&self, totals: &[(String, u64)]) -> Vec<(String, u64)> {
        totals
            .iter()
            .filter_map(|(name, total)| {
                let before = self.published.get(name).copied().unwrap_or(0);
                let delta = total.saturating_sub(before);
                (delta > 0).then(|| (name.clone(), delta))
            })
            .collect()
    }

    /// Records `totals` as published.
    pub fn commit(&mut self, totals: &[(String, u64)]) {
        for (name, total) in totals {
            self.published.insert(name.clone(), *total);
        }
    }
}

/// The latency field of the bucket whose upper bound is `le` seconds (`lat:inf` for +Inf).
pub fn latency_field(le: f64) -> String {
    if le.is_finite() {
        format!("{}{}", field::LATENCY_PREFIX, (le * 1000.0).round() as u64)
    } else {
        format!("{}inf", field::LATENCY_PREFIX)
    }
}

/// Cumulative histogram buckets (upper bound in seconds, count up to it) as the per-bucket
/// totals [`Deltas`] takes.
pub fn latency_totals(cumulative: &[(f64, u64)], total: u64) -> Vec<(String, u64)> {
    let mut out = Vec::with_capacity(cumulative.len() + 1);
    let mut below = 0;
    for (le, count) in cumulative {
        out.push((latency_field(*le), count.saturating_sub(below)));
        below = *count;
    }
    out.push((latency_field(f64::INFINITY), total.saturating_sub(below)));
    out
}

/// The 99th percentile, in ms, of one second's latency buckets, interpolated inside its
/// bucket as Prometheus's `histogram_quantile` does, over the fixed bounds of
/// [`CONFIRM_LATENCY_BUCKETS`] (a bucket with no samples is absent from the hash). In the
/// `+Inf` bucket it is the highest finite bound. `None` without samples.
pub fn p99_ms(counts: &HashMap<String, u64>) -> Option<f64> {
    let n = |field: &str| counts.get(field).copied().unwrap_or(0);
    let finite: Vec<(f64, u64)> = CONFIRM_LATENCY_BUCKETS
        .iter()
        .map(|le| (le * 1000.0, n(&latency_field(*le))))
        .collect();
    let above = n(&latency_field(f64::INFINITY));
    let total = finite.iter().map(|b| b.1).sum::<u64>() + above;
    if total == 0 {
        return None;
    }
    let rank = 0.99 * total as f64;
    let (mut lower, mut seen) = (0.0, 0u64);
    for (upper, count) in finite {
        if count > 0 && (seen + count) as f64 >= rank {
            return Some(lower + (upper - lower) * (rank - seen as f64) / count as f64);
        }
        seen += count;
        lower = upper;
    }
    Some(lower)
}

/// Publishes one process's counts and heartbeat.
#[derive(Clone)]
pub struct LivePublisher {
    conn: RedisConn,
    keys: LiveKeys,
}

impl LivePublisher {
    pub fn new(conn: RedisConn, namespace: &str) -> Self {
        Self {
            conn,
            keys: LiveKeys::new(namespace),
        }
    }

    /// Adds `deltas` to the second `unix_sec` and replaces the heartbeat, in one round trip.
    pub async fn publish(
        &self,
        unix_sec: i64,
        deltas: &[(String, u64)],
        heartbeat: &Heartbeat,
    ) -> anyhow::Result<()> {
        let mut pipe = redis::pipe();
        if !deltas.is_empty() {
            let key = self.keys.second(unix_sec);
            for (name, delta) in deltas {
                pipe.hincr(&key, name, *delta).ignore();
            }
            pipe.expire(&key, KEEP_SECS).ignore();
        }
        let procs = self.keys.processes();
        pipe.set_ex(
            self.keys.heartbeat(&heartbeat.id),
            serde_json::to_string(heartbeat)?,
            (HEARTBEAT_TTL_MS / 1000) as u64,
        )
        .ignore()
        .zadd(&procs, &heartbeat.id, heartbeat.at_ms)
        .ignore()
        .zrembyscore(&procs, "-inf", heartbeat.at_ms - KEEP_SECS * 1000)
        .ignore()
        .expire(&procs, KEEP_SECS)
        .ignore();
        let mut c = self.conn.clone();
        pipe.query_async::<()>(&mut c)
            .await
            .context("publishing live figures")
    }
}

/// Reads the fleet's live figures.
#[derive(Clone)]
pub struct LiveReader {
    conn: RedisConn,
    keys: LiveKeys,
}

impl LiveReader {
    pub fn new(conn: RedisConn, namespace: &str) -> Self {
        Self {
            conn,
            keys: LiveKeys::new(namespace),
        }
    }

    /// The counts of the `seconds` whole seconds before `now_sec`, oldest first.
    pub async fn seconds(
        &self,
        now_sec: i64,
        seconds: i64,
    ) -> anyhow::Result<Vec<(i64, HashMap<String, u64>)>> {
        let secs: Vec<i64> = (now_sec - seconds..now_sec).collect();
        let mut pipe = redis::pipe();
        for s in &secs {
            pipe.hgetall(self.keys.second(*s));
        }
        let mut c = self.conn.clone();
        let counts: Vec<HashMap<String, u64>> = pipe
            .query_async(&mut c)
            .await
            .context("reading live counts")?;
        Ok(secs.into_iter().zip(counts).collect())
    }

    /// The heartbeats of processes seen in the last [`HEARTBEAT_TTL_MS`], by id.
    pub async fn heartbeats(&self, now_ms: i64) -> anyhow::Result<Vec<Heartbeat>> {
        let mut c = self.conn.clone();
        let ids: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys.processes())
            .arg(now_ms - HEARTBEAT_TTL_MS)
            .arg("+inf")
            .query_async(&mut c)
            .await
            .context("listing live processes")?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.get(self.keys.heartbeat(id));
        }
        let beats: Vec<Option<String>> = pipe
            .query_async(&mut c)
            .await
            .context("reading heartbeats")?;
        let mut out: Vec<Heartbeat> = beats
            .into_iter()
            .flatten()
            .filter_map(|json| serde_json::from_str(&json).ok())
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn deltas_count_what_changed_since_the_last_commit() {
        let mut d = Deltas::default();
        let first = totals(&[("a", 5), ("b", 0)]);
        assert_eq!(d.pending(&first), totals(&[("a", 5)]));
        // Not committed (the publish failed): the next publish carries it too.
        let second = totals(&[("a", 7), ("b", 1)]);
        assert_eq!(d.pending(&second), totals(&[("a", 7), ("b", 1)]));
        d.commit(&second);
        assert_eq!(
            d.pending(&totals(&[("a", 7), ("b", 4)])),
            totals(&[("b", 3)])
        );
        // A total that went down is not published again in full.
        assert_eq!(d.pending(&totals(&[("a", 2)])), vec![]);
    }

    #[test]
    fn latency_buckets_become_per_bucket_counts() {
        let t = latency_totals(&[(0.005, 2), (0.01, 5), (0.02, 5)], 9);
        assert_eq!(
            t,
            totals(&[("lat:5", 2), ("lat:10", 3), ("lat:20", 0), ("lat:inf", 4)])
        );
    }

    #[test]
    fn p99_interpolates_inside_its_bucket() {
        let counts: HashMap<String, u64> = totals(&[("lat:5", 90), ("lat:10", 10)])
            .into_iter()
            .collect();
        // Rank 99 of 100 is the 9th of 10 in (5, 10]: 5 + 5 × 9/10.
        assert!((p99_ms(&counts).unwrap() - 9.5).abs() < 1e-9);
        assert_eq!(p99_ms(&HashMap::new()), None);
        // Slower than every bound: the highest one, not the last bucket that had samples.
        let slow: HashMap<String, u64> = totals(&[("lat:5", 1), ("lat:inf", 99)])
            .into_iter()
            .collect();
        assert_eq!(p99_ms(&slow), Some(30_000.0));
        let all_slow: HashMap<String, u64> = totals(&[("lat:inf", 3)]).into_iter().collect();
        assert_eq!(p99_ms(&all_slow), Some(30_000.0));
        // Only (500, 1000] had samples: interpolated from 500, not from 0.
        let one: HashMap<String, u64> = totals(&[("lat:1000", 10)]).into_iter().collect();
        assert!((p99_ms(&one).unwrap() - 995.0).abs() < 1e-9);
        let other: HashMap<String, u64> = totals(&[("reservations", 50)]).into_iter().collect();
        assert_eq!(p99_ms(&other), None);
    }

    #[test]
    fn keys_share_one_hash_tag_per_namespace() {
        let k = LiveKeys::new("ns1");
        for key in [k.second(5), k.processes(), k.heartbeat("gw-1")] {
            assert!(key.starts_with("sk:{ns1:live}:"), "{key}");
        }
    }
}
