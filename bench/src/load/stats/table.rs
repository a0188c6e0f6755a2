//! The summary as a human-readable table.

use super::summary::Summary;
use std::fmt::Write as _;

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
