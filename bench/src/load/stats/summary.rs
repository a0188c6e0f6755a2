//! The run's summary: what `--json` prints and the history's last line holds.

use super::histograms::{new_histogram, OutcomeStats};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Tickets after the polling phase.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketTotals {
    /// Distinct tickets answered with 202, 200 or 201.
    pub issued: u64,
    pub confirmed: u64,
    pub failed: u64,
    /// Still pending when polling stopped (or was skipped).
    pub unsettled: u64,
    /// The units of the issued tickets, and of the confirmed ones (`--quantity`).
    #[serde(default)]
    pub units_issued: u64,
    #[serde(default)]
    pub units_confirmed: u64,
}

/// End-to-end latency of the confirmed tickets: from the `202` arriving at the load tool
/// (client clock, µs) to the worker confirming the ticket after its MySQL commit
/// (`confirmed_at_ms` of the ticket, server clock, ms). Both clocks are this machine's when
/// everything runs on one host; elsewhere the figure includes their skew.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct E2eLatency {
    /// Confirmed tickets that had both times.
    pub count: u64,
    /// Confirmed before the `202` arrived (ms rounding, or a fast worker): counted as 0.
    pub negative: u64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Reserved (Redis, gateway clock) to confirmed: the server-side part alone.
    pub server_p50_ms: f64,
    pub server_p99_ms: f64,
}

impl E2eLatency {
    pub fn from_settled(lines: &[crate::history::SettledLine]) -> Self {
        let mut h = new_histogram();
        let mut server = new_histogram();
        let mut out = Self::default();
        for l in lines.iter().filter(|l| l.status == "confirmed") {
            let (Some(answered_us), Some(confirmed_ms)) = (l.answered_at_us, l.confirmed_at_ms)
            else {
                continue;
            };
            let d = confirmed_ms.saturating_mul(1000) - answered_us as i64;
            if d < 0 {
                out.negative += 1;
            }
            h.saturating_record(d.max(1) as u64);
            if let Some(reserved_ms) = l.reserved_at_ms {
                let s = (confirmed_ms - reserved_ms).saturating_mul(1000);
                server.saturating_record(s.max(1) as u64);
            }
        }
        let q = |h: &Histogram<u64>, p: f64| {
            if h.is_empty() {
                0.0
            } else {
                h.value_at_quantile(p) as f64 / 1000.0
            }
        };
        out.count = h.len();
        out.p50_ms = q(&h, 0.5);
        out.p90_ms = q(&h, 0.9);
        out.p99_ms = q(&h, 0.99);
        out.p999_ms = q(&h, 0.999);
        out.max_ms = if h.is_empty() {
            0.0
        } else {
            h.max() as f64 / 1000.0
        };
        out.server_p50_ms = q(&server, 0.5);
        out.server_p99_ms = q(&server, 0.99);
        out
    }
}

/// How the requests were sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalModel {
    /// No `--rate`: each worker sends its next request when its last one is answered.
    Closed,
    /// `--rate` alone: a closed loop with a speed limit. Request `i` goes out no earlier than
    /// `i / RATE` s, but only once a worker is free, so the rate falls when answers are slow.
    Paced,
    /// `--rate --open-loop`: request `i` is due at `i / RATE` s whatever the answers (as wrk2
    /// does), as long as fewer than `--concurrency` requests are in flight. Its latency counts
    /// from when it was due, so a late send shows in the latency instead of hiding.
    Open,
}

impl ArrivalModel {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Closed => "closed loop",
            Self::Paced => "paced closed loop",
            Self::Open => "open loop",
        }
    }
}

/// What rate the run offered and what it achieved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArrivalStats {
    pub model: ArrivalModel,
    /// `--rate`, requests per second.
    pub offered_per_s: Option<f64>,
    /// Requests sent per second: with a schedule, over the span from the start to the last
    /// send plus one interval (see [`achieved_rate`]); without, over the load phase.
    pub achieved_per_s: f64,
    /// `--concurrency`: the most requests that can be in flight at once.
    pub in_flight_cap: u64,
    /// The most that were. When it reaches the cap in an open loop, a due request had to wait
    /// for an answer: for that moment the loop was closed.
    pub max_in_flight: u64,
    /// With a schedule: how late requests went out against when they were due.
    pub lag_p50_ms: Option<f64>,
    pub lag_p99_ms: Option<f64>,
    pub lag_max_ms: Option<f64>,
}

/// Requests per second that a schedule achieved: `sent` requests, the first due at 0 and the
/// last sent `last_send_s` after the start, at an offered `rate`. A schedule kept exactly sends
/// request `i` at `i / rate`, so `sent` requests span `(sent - 1) / rate` s plus the interval
/// of the last one: the result is `rate`. Late sends stretch the span and lower it.
pub fn achieved_rate(sent: u64, last_send_s: f64, rate: f64) -> f64 {
    if sent == 0 || rate <= 0.0 {
        return 0.0;
    }
    sent as f64 / (last_send_s.max(0.0) + 1.0 / rate)
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
    /// `--until-sold-out`: whether the sale really sold out: every gateway answered 409 after
    /// its last 202, and then no unit came back (`sale_end` says how that was checked).
    pub sold_out_reached: Option<bool>,
    /// `--until-sold-out`: how the end of the sale was checked, and what was seen.
    pub sale_end: Option<crate::load::sale_end::SaleEndReport>,
    /// `--until-all-paid`: fresh buyers came until every unit was paid (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub until_all_paid: bool,
    /// `--until-all-paid`: whether every unit ended paid (`orders_db.paid == initial_stock`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_paid_reached: Option<bool>,
    /// `--until-all-paid`: when every unit was paid, why fresh buyers stopped, what was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_paid: Option<crate::load::all_paid::AllPaidReport>,
    /// `--jwt-secret` or `--jwt-ed25519-key`: every buy and ticket poll carried its user's
    /// token.
    pub jwt: bool,
    /// The tokens' algorithm: `HS256` (`--jwt-secret`) or `EdDSA` (`--jwt-ed25519-key`).
    pub jwt_alg: Option<&'static str>,
    /// The key id the tokens name (`--jwt-kid`).
    pub jwt_kid: Option<String>,
    pub first_user: u64,
    pub users_used: u64,
    /// Distinct users answered 202/200/201.
    pub distinct_users_accepted: u64,
    /// Distinct users answered 409.
    pub distinct_users_sold_out: u64,
    pub outcomes: Vec<OutcomeStats>,
    pub all: OutcomeStats,
    pub tickets: TicketTotals,
    /// `--pay-rate` above 0: the paying buyers' attempts and how their tickets ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payments: Option<crate::load::payment::PaymentSummary>,
    pub settle_s: f64,
    /// Buy runs: `202` received → confirmed, over the tickets the polling saw confirmed.
    pub e2e: Option<E2eLatency>,
    /// How the requests were sent, and the rate offered and achieved.
    pub arrival: ArrivalStats,
    pub history: Option<String>,
    /// `--waiting-room`: what became of the buyers in the line (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<WaitingRoomReport>,
    /// The answers over time, per outcome (absent for `--waiting-room`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<crate::load::timeline::Timeline>,
    /// `--sample-admin-ms`: the product's admin view over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_samples: Option<Vec<crate::load::admin_samples::AdminSample>>,
}

/// What became of the buyers, in the summary's `waiting_room`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct WaitingRoomReport {
    /// Buyers whose join was answered `202`.
    pub joined: u64,
    /// Buyers that never got a join answered.
    pub not_joined: u64,
    /// Buyers admitted at least once, and admissions seen in all.
    pub admitted_buyers: u64,
    pub admissions: u64,
    /// How the buyers ended: `bought`, `expired`, `sold_out`, `waiting`, `admitted`...
    pub ended: std::collections::BTreeMap<String, u64>,
    pub join_attempts: u64,
    pub polls: u64,
    /// Joins, polls and buys that got no usable answer (and were retried).
    pub retries: u64,
    /// Admin view samples, and the most admitted-not-bought seen in one.
    pub samples: u64,
    pub max_admitted_seen: u64,
    /// Samples whose admitted count was above `ceil(factor × stock_redis)`.
    pub samples_over_cap: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e2e_latency_runs_from_the_202_to_the_confirmation() {
        let line = |status: &str, answered_us: u64, reserved_ms: i64, confirmed_ms: Option<i64>| {
            crate::history::SettledLine {
                quantity: 1,
                ticket: "1-00".into(),
                user_id: 1,
                status: status.into(),
                order_id: None,
                reason: None,
                answered_at_us: Some(answered_us),
                reserved_at_ms: Some(reserved_ms),
                confirmed_at_ms: confirmed_ms,
            }
        };
        let mut lines: Vec<_> = (0..100u64)
            .map(|i| line("confirmed", 1_000_000, 999, Some(1000 + i as i64 + 1)))
            .collect();
        lines.push(line("failed", 1_000_000, 999, None));
        lines.push(line("confirmed", 1_000_000, 999, None));
        // Confirmed 1 ms "before" the answer: ms rounding of the server clock.
        lines.push(line("confirmed", 2_000_500, 1999, Some(2000)));
        let e = E2eLatency::from_settled(&lines);
        assert_eq!(e.count, 101);
        assert_eq!(e.negative, 1);
        assert!((e.p50_ms - 50.0).abs() < 0.1, "{e:?}");
        assert!((e.p99_ms - 99.0).abs() < 0.1, "{e:?}");
        assert!((e.max_ms - 100.0).abs() < 0.1, "{e:?}");
        assert!((e.server_p50_ms - 51.0).abs() < 0.1, "{e:?}");
        assert!(E2eLatency::from_settled(&[]).count == 0);
    }

    #[test]
    fn a_kept_schedule_achieves_the_offered_rate() {
        // 1000 requests at 100/s, each on time: the last goes out at 9.99 s.
        assert!((achieved_rate(1000, 9.99, 100.0) - 100.0).abs() < 1e-9);
        // The same requests, the last 1 s late: 1000 / 11 s.
        assert!((achieved_rate(1000, 10.99, 100.0) - 1000.0 / 11.0).abs() < 1e-9);
        assert_eq!(achieved_rate(0, 0.0, 100.0), 0.0);
        assert_eq!(achieved_rate(1, 0.0, 100.0), 100.0);
    }
}
