//! Latency histograms per outcome, the run's summary and its table.

use super::plan::Outcome;
use super::timeline::{Timeline, TimelineRecorder};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::sync::Mutex;

/// Highest latency a histogram tracks, in µs (larger values are clamped to it).
const MAX_LATENCY_US: u64 = 3_600_000_000;

fn new_histogram() -> Histogram<u64> {
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

/// Tickets after the polling phase.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketTotals {
    /// Distinct tickets answered with 202, 200 or 201.
    pub issued: u64,
    pub confirmed: u64,
    pub failed: u64,
    /// Still pending when polling stopped (or was skipped).
    pub unsettled: u64,
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
    pub sale_end: Option<super::sale_end::SaleEndReport>,
    /// `--until-all-paid`: fresh buyers came until every unit was paid (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub until_all_paid: bool,
    /// `--until-all-paid`: whether every unit ended paid (`orders_db.paid == initial_stock`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_paid_reached: Option<bool>,
    /// `--until-all-paid`: when every unit was paid, why fresh buyers stopped, what was seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_paid: Option<super::all_paid::AllPaidReport>,
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
    pub payments: Option<super::payment::PaymentSummary>,
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
    pub timeline: Option<super::timeline::Timeline>,
    /// `--sample-admin-ms`: the product's admin view over the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_samples: Option<Vec<super::admin_samples::AdminSample>>,
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
        let a = &self.arrival;
        let _ = match a.offered_per_s {
            Some(offered) => writeln!(
                s,
                "arrival: {}, {offered:.0} req/s offered, {:.0} achieved ({:.1} %), at most {} \
                 of {} in flight, send lag p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                a.model.describe(),
                a.achieved_per_s,
                100.0 * a.achieved_per_s / offered,
                a.max_in_flight,
                a.in_flight_cap,
                a.lag_p50_ms.unwrap_or_default(),
                a.lag_p99_ms.unwrap_or_default(),
                a.lag_max_ms.unwrap_or_default()
            ),
            None => writeln!(
                s,
                "arrival: {}, {} workers, at most {} in flight",
                a.model.describe(),
                a.in_flight_cap,
                a.max_in_flight
            ),
        };
        if self.mode == "buy" {
            let _ = writeln!(
                s,
                "users: {} used (from {}), {} got a ticket, {} got 409",
                self.users_used,
                self.first_user,
                self.distinct_users_accepted,
                self.distinct_users_sold_out
            );
            if let Some(e) = &self.sale_end {
                let how = match e.checked_by {
                    crate::history::SaleEndCheck::AdminApi => {
                        "no stock in Redis nor MySQL and nothing pending (admin API)"
                    }
                    crate::history::SaleEndCheck::Probes => {
                        "no fresh user bought for --sold-out-quiet (probes; pending orders unseen)"
                    }
                };
                let verdict = if self.sold_out_reached == Some(true) {
                    format!("sold out at {:.2} s: {how}", e.ended_s)
                } else {
                    format!(
                        "NOT sold out ({}) at {:.2} s",
                        e.ended.describe(),
                        e.ended_s
                    )
                };
                let first = e
                    .first_all_409_s
                    .map_or("never".to_owned(), |t| format!("at {t:.2} s"));
                let _ = writeln!(
                    s,
                    "sale end: {verdict}; every gateway first answered 409 {first}; {} checks, \
                     {} resumed, {} units sold after the first round of 409s, fresh users held \
                     {:.2} s",
                    e.checks, e.resumed, e.sold_after_first_409, e.paused_s
                );
                if let Some(v) = &e.last_seen {
                    let redis = v.stock_redis.map_or("none".to_owned(), |n| n.to_string());
                    let _ = writeln!(
                        s,
                        "last seen: stock redis {redis}, mysql {}, pending {}",
                        v.stock_db, v.pending
                    );
                }
                if let Some(err) = &e.last_error {
                    let _ = writeln!(s, "last admin API error: {err}");
                }
            }
            if let Some(a) = &self.all_paid {
                let verdict = match a.reached_s {
                    Some(t) if a.reached => format!("every unit paid at {t:.2} s"),
                    _ => "NOT every unit paid".to_owned(),
                };
                let _ = writeln!(
                    s,
                    "all paid: {verdict}; fresh users stopped at {:.2} s ({}), {} checks",
                    a.stopped_s,
                    a.stopped.describe(),
                    a.checks
                );
                if let Some(v) = &a.last_seen {
                    let orders = v.orders_db.map_or("none".to_owned(), |o| {
                        format!(
                            "{} paid, {} confirmed, {} cancelled",
                            o.paid, o.confirmed, o.cancelled
                        )
                    });
                    let _ = writeln!(
                        s,
                        "last seen: initial stock {}, orders in mysql: {orders}",
                        v.initial_stock
                    );
                }
                if let Some(err) = &a.last_error {
                    let _ = writeln!(s, "last admin API error: {err}");
                }
            }
            match (self.jwt_alg, &self.jwt_kid) {
                (Some(alg), Some(kid)) => {
                    let _ = writeln!(s, "buyers: one {alg} token each, key id {kid:?}");
                }
                (Some(alg), None) => {
                    let _ = writeln!(s, "buyers: one {alg} token each");
                }
                (None, _) => {}
            }
            let t = &self.tickets;
            let _ = writeln!(
                s,
                "tickets: {} issued, {} confirmed, {} failed, {} unsettled (polled for {:.2} s)",
                t.issued, t.confirmed, t.failed, t.unsettled, self.settle_s
            );
            if let Some(w) = &self.waiting_room {
                let ended = w
                    .ended
                    .iter()
                    .map(|(state, n)| format!("{n} {state}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let _ = writeln!(
                    s,
                    "waiting room: {} joined ({} not), {} admitted ({} admissions), ended: \
                     {ended}; {} polls, {} retries; {} admin samples, at most {} admitted, {} \
                     over the cap",
                    w.joined,
                    w.not_joined,
                    w.admitted_buyers,
                    w.admissions,
                    w.polls,
                    w.retries,
                    w.samples,
                    w.max_admitted_seen,
                    w.samples_over_cap
                );
            }
            if let Some(p) = &self.payments {
                let refused = if p.refused.is_empty() {
                    "none".to_owned()
                } else {
                    p.refused
                        .iter()
                        .map(|(code, n)| format!("{n} {code}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let _ = writeln!(
                    s,
                    "payments: pay rate {} (seed {}): {} buyers pay, {} do not; {} attempts in \
                     {} requests: {} x 202, 409: {refused}, {} x 503, {} other, {} unanswered",
                    p.pay_rate,
                    p.seed,
                    p.buyers_paying,
                    p.buyers_not_paying,
                    p.attempts,
                    p.requests,
                    p.accepted,
                    p.unavailable,
                    p.other_status,
                    p.no_answer
                );
                let e = &p.ended;
                let _ = writeln!(
                    s,
                    "paying buyers ended: {} paid, {} cancelled, {} still confirmed, {} other; \
                     the polling saw {} tickets paid, {} cancelled",
                    e.paid, e.cancelled, e.confirmed, e.other, p.settled_paid, p.settled_cancelled
                );
                if let Some(d) = &p.double_pay {
                    let _ = writeln!(
                        s,
                        "double pay: {} pairs of keys at once: {} x 202 + 409 \
                         payment_in_progress, {} both 202",
                        d.pairs, d.one_in_progress, d.both_accepted
                    );
                }
                if let Some(c) = &p.cancels {
                    let by_state = |m: &std::collections::BTreeMap<String, u64>| {
                        if m.is_empty() {
                            "none".to_owned()
                        } else {
                            m.iter()
                                .map(|(state, n)| format!("{n} {state}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    };
                    let e = &c.ended;
                    let _ = writeln!(
                        s,
                        "cancels: cancel rate {}: {} buyers cancel; {} requests: {} x 200, 409: \
                         {}, {} unavailable, {} other, {} unanswered; ended: {} cancelled ({} \
                         after a pending refusal), refused: {}, {} gave up",
                        c.cancel_rate,
                        c.buyers_cancelling,
                        c.requests,
                        c.cancelled,
                        by_state(&c.refused),
                        c.unavailable,
                        c.other_status,
                        c.no_answer,
                        e.cancelled,
                        e.cancelled_after_pending,
                        by_state(&e.refused),
                        e.gave_up
                    );
                }
            }
            if let Some(e) = self.e2e.as_ref().filter(|e| e.count > 0) {
                let _ = writeln!(
                    s,
                    "202 -> confirmed: {} tickets, p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, \
                     max {:.1} ms ({} confirmed before the 202 arrived); reserved -> confirmed \
                     p50 {:.1} ms, p99 {:.1} ms",
                    e.count,
                    e.p50_ms,
                    e.p90_ms,
                    e.p99_ms,
                    e.max_ms,
                    e.negative,
                    e.server_p50_ms,
                    e.server_p99_ms
                );
            }
        }
        if let Some(h) = &self.history {
            let _ = writeln!(s, "history: {h}");
        }
        s
    }
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
