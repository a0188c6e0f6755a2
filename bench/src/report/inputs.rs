//! What a run folder of `scripts/bench.sh` holds, parsed: `load --json` summaries, wrk's text
//! output, `redis-benchmark`'s CSV, and the small JSON files the script writes itself.

use crate::load::stats::{ArrivalStats, E2eLatency, OutcomeStats, TicketTotals};
use serde::Deserialize;

/// The parts of a `seckill-bench load --json` summary the report reads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LoadRun {
    pub requests: u64,
    #[serde(default)]
    pub req_per_s: f64,
    pub outcomes: Vec<OutcomeStats>,
    pub all: OutcomeStats,
    #[serde(default)]
    pub tickets: TicketTotals,
    #[serde(default)]
    pub e2e: Option<E2eLatency>,
    /// Missing in the summaries of load tools older than `--open-loop`.
    #[serde(default)]
    pub arrival: Option<ArrivalStats>,
    /// The buyers carried tokens.
    #[serde(default)]
    pub jwt: bool,
    /// Their algorithm (`HS256`, `EdDSA`). Missing in the summaries of load tools older than
    /// `--jwt-ed25519-key`, whose tokens were HS256.
    #[serde(default)]
    pub jwt_alg: Option<String>,
}

impl LoadRun {
    pub fn outcome(&self, label: &str) -> Option<&OutcomeStats> {
        self.outcomes.iter().find(|o| o.outcome == label)
    }

    pub fn count(&self, label: &str) -> u64 {
        self.outcome(label).map_or(0, |o| o.count)
    }

    /// The algorithm of the buyers' tokens; `None` when they carried none.
    pub fn tokens(&self) -> Option<&str> {
        match (&self.jwt_alg, self.jwt) {
            (Some(alg), _) => Some(alg),
            (None, true) => Some("HS256"),
            (None, false) => None,
        }
    }

    /// Rate and p99 of one outcome; `(0, None)` when there was none.
    pub fn rate_of(&self, label: &str) -> (f64, Option<f64>) {
        self.outcome(label)
            .map_or((0.0, None), |o| (o.per_sec, Some(o.p99_ms)))
    }
}

/// wrk's `--latency` output.
#[derive(Debug, Clone, PartialEq)]
pub struct WrkRun {
    pub requests: u64,
    pub rps: f64,
    pub p99_ms: Option<f64>,
    /// "Non-2xx or 3xx responses".
    pub non_2xx: u64,
    /// Connect, read, write and timeout errors.
    pub socket_errors: u64,
}

/// The first number in `s` (digits and dots).
fn number(s: &str) -> Option<&str> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (end > 0).then(|| &s[..end])
}

pub fn parse_wrk(text: &str) -> Option<WrkRun> {
    let mut requests = None;
    let mut rps = None;
    let mut p99_ms = None;
    let mut non_2xx = 0;
    let mut socket_errors = 0;
    for line in text.lines() {
        let l = line.trim();
        if let Some(i) = l.find(" requests in ") {
            requests = l[..i].trim().parse().ok();
        } else if let Some(rest) = l.strip_prefix("Requests/sec:") {
            rps = number(rest).and_then(|n| n.parse().ok());
        } else if let Some(rest) = l.strip_prefix("99%") {
            let n = number(rest)?;
            let unit = rest.trim_start()[n.len()..].trim();
            let scale = match unit {
                "us" => 0.001,
                "ms" => 1.0,
                "s" => 1000.0,
                "m" => 60_000.0,
                _ => return None,
            };
            p99_ms = n.parse::<f64>().ok().map(|v| v * scale);
        } else if let Some(rest) = l.strip_prefix("Non-2xx or 3xx responses:") {
            non_2xx = number(rest)?.parse().ok()?;
        } else if let Some(rest) = l.strip_prefix("Socket errors:") {
            // "connect 0, read 1, write 0, timeout 2"
            for part in rest.split(',') {
                let n = part.split_whitespace().nth(1)?;
                socket_errors += n.parse::<u64>().ok()?;
            }
        }
    }
    Some(WrkRun {
        requests: requests?,
        rps: rps?,
        p99_ms,
        non_2xx,
        socket_errors,
    })
}

/// One line of CSV with `"`-quoted fields.
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `redis-benchmark --csv`: the rate and p99 of its last test line.
pub fn parse_redis_csv(text: &str) -> Option<(f64, Option<f64>)> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let header = csv_fields(lines.first()?);
    let last = csv_fields(lines.last()?);
    let rps = last.get(1)?.parse().ok()?;
    let p99 = header
        .iter()
        .position(|h| h == "p99_latency_ms")
        .and_then(|i| last.get(i))
        .and_then(|v| v.parse().ok());
    Some((rps, p99))
}

/// (5): `redis-benchmark`'s rate and what the product's stock says about its calls.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisRun {
    /// Calls per second, every reply counted.
    pub rps: f64,
    pub p99_ms: Option<f64>,
    /// Calls made (`-n`).
    pub requests: u64,
    /// The product's stock before and after: each reservation takes one unit.
    pub stock_before: i64,
    pub stock_after: i64,
}

/// `f5-check.json`, written by bench.sh.
#[derive(Debug, Clone, Deserialize)]
pub struct RedisCheck {
    pub requests: u64,
    pub stock_before: i64,
    pub stock_after: i64,
}

/// `f3-marker.json`: the gateway's marker hits during (3).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct MarkerCount {
    pub marker_hits: u64,
}

/// `f6.json` / `f8.json`: the raw numbers of a drain, as bench.sh measured them. Times are
/// seconds since the epoch; `first`, `last` and `first_done` are the `created_at` of the first
/// row, the last row, and the row that ends the first transaction (absent without rows).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Drain {
    pub orders: u64,
    pub accepted: u64,
    pub batch: u64,
    pub t0: f64,
    pub t1: f64,
    pub rows: u64,
    pub first: Option<f64>,
    pub last: Option<f64>,
    pub first_done: Option<f64>,
    /// Transactions (the worker's batch count).
    pub batches: u64,
    /// Time the worker spent settling its batches.
    pub settle_s: f64,
}

impl Drain {
    /// Time from the end of the first transaction to the last row.
    pub fn drain_s(&self) -> Option<f64> {
        Some(self.last? - self.first_done?)
    }

    /// The steady rate: the rows after the first transaction over the time after it.
    pub fn per_s(&self) -> Option<f64> {
        let d = self.drain_s().filter(|d| *d > 0.0)?;
        Some(self.rows.saturating_sub(self.batch) as f64 / d)
    }

    pub fn from_start_s(&self) -> f64 {
        self.t1 - self.t0
    }

    pub fn from_start_per_s(&self) -> Option<f64> {
        let s = self.from_start_s();
        (s > 0.0).then(|| self.rows as f64 / s)
    }
}

/// `f7.json`: `seckill-bench mysql-ceiling --json`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Ceiling {
    pub rows: u64,
    pub rows_per_s: f64,
    #[serde(default)]
    pub batch_p99_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 10s test @ http://127.0.0.1:28081/livez
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms    1.10ms  30.00ms   90.00%
    Req/Sec    28.00k     2.00k   33.00k    70.00%
  Latency Distribution
     50%  0.98ms
     75%    1.40ms
     90%    2.10ms
     99%    5.47ms
  564841 requests in 10.03s, 50.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  56340.12
Transfer/sec:      4.99MB
";

    #[test]
    fn wrk_output_is_read_with_its_errors() {
        let w = parse_wrk(WRK).unwrap();
        assert_eq!(w.requests, 564_841);
        assert!((w.rps - 56_340.12).abs() < 1e-6);
        assert_eq!(w.p99_ms, Some(5.47));
        assert_eq!(w.non_2xx, 7);
        assert_eq!(w.socket_errors, 3);
        let clean: String = WRK
            .lines()
            .filter(|l| !l.contains("errors") && !l.contains("Non-2xx"))
            .map(|l| format!("{l}\n"))
            .collect();
        let w = parse_wrk(&clean.replace("5.47ms", "812.00us")).unwrap();
        assert_eq!((w.non_2xx, w.socket_errors), (0, 0));
        assert!((w.p99_ms.unwrap() - 0.812).abs() < 1e-9);
        assert!(parse_wrk("nothing").is_none());
    }

    #[test]
    fn redis_benchmark_csv_is_read() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\
                   \"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"EVALSHA abc 5 sk:{x:1}:stock, odd\",\"23187.00\",\"2.1\",\"0.2\",\"2.0\",\
                   \"4.0\",\"5.25\",\"9.0\"\n";
        assert_eq!(parse_redis_csv(csv), Some((23187.0, Some(5.25))));
        assert_eq!(parse_redis_csv(""), None);
    }

    #[test]
    fn a_drain_gives_its_steady_rate() {
        let d: Drain = serde_json::from_str(
            r#"{"orders":2000,"accepted":2000,"batch":500,"t0":100.0,"t1":104.0,"rows":2000,
                "first":101.0,"last":103.0,"first_done":101.5,"batches":4,"settle_s":1.2}"#,
        )
        .unwrap();
        assert_eq!(d.per_s(), Some(1000.0));
        assert_eq!(d.from_start_per_s(), Some(500.0));
        // No rows: MySQL's NULLs.
        let d: Drain = serde_json::from_str(
            r#"{"orders":2000,"accepted":0,"batch":500,"t0":100.0,"t1":104.0,"rows":0,
                "first":null,"last":null,"first_done":null,"batches":0,"settle_s":0}"#,
        )
        .unwrap();
        assert_eq!(d.per_s(), None);
    }

    #[test]
    fn load_summaries_without_arrival_data_still_parse() {
        let s = r#"{"requests":3,"req_per_s":1.5,"outcomes":[{"outcome":"200","count":3,
            "per_sec":1.5,"p50_ms":1,"p90_ms":1,"p99_ms":2,"p999_ms":2,"max_ms":2}],
            "all":{"outcome":"all","count":3,"per_sec":1.5,"p50_ms":1,"p90_ms":1,"p99_ms":2,
            "p999_ms":2,"max_ms":2},"tickets":{"issued":0,"confirmed":0,"failed":0,
            "unsettled":0},"e2e":null,"extra":"ignored"}"#;
        let r: LoadRun = serde_json::from_str(s).unwrap();
        assert_eq!(r.count("200"), 3);
        assert_eq!(r.rate_of("200"), (1.5, Some(2.0)));
        assert_eq!(r.rate_of("202"), (0.0, None));
        assert!(r.arrival.is_none());
    }
}
