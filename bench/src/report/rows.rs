//! The table's rows: each figure's value, its ratio to its ceiling, its goal, and whether
//! its run was valid.

use super::format::fmt;
use super::inputs::{Drain, LoadRun};
use super::results::Results;
use super::results::RoundDiffs;
use super::rules::{self, Goal, Mark, Validity};

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub figure: &'static str,
    pub what: String,
    pub value: Option<f64>,
    pub unit: &'static str,
    pub p99_ms: Option<f64>,
    pub ratio: String,
    pub goal: &'static str,
    pub mark: Mark,
}

impl Row {
    pub fn markdown(&self) -> String {
        format!(
            "| {} | {} | {} {} | {} | {} | {} | {} |",
            self.figure,
            self.what,
            fmt(self.value),
            self.unit,
            self.p99_ms.map_or(String::new(), |p| format!("{p:.2} ms")),
            self.ratio,
            self.goal,
            self.mark.cell()
        )
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

fn rt(r: Option<f64>, label: &str) -> String {
    r.map_or("n/a".into(), |r| format!("{r:.2} × {label}"))
}

const NO_RESULT: &str = "no result: see the run's logs";

/// A figure's validity: `None` when it was not run, an error when its result is missing.
fn validity<T>(ran: bool, data: Option<&T>, rule: impl FnOnce(&T) -> Validity) -> Option<Validity> {
    ran.then(|| data.map_or_else(|| Err(NO_RESULT.to_string()), rule))
}

/// The rows of the figures in `figures`, in the table's order.
pub fn rows(r: &Results, figures: &[&str]) -> Vec<Row> {
    let ran = |f: &str| figures.contains(&f);
    let v1 = validity(ran("1"), r.f1.as_ref(), rules::fig1);
    let v1w = validity(ran("1w"), r.wrk.as_ref(), rules::fig1w);
    let hs256 = |f: &LoadRun| rules::accept(f, Some("HS256"));
    let v2 = validity(ran("2"), r.f2.as_ref(), hs256);
    let v2n = validity(ran("2N"), r.f2n.as_ref(), |f| rules::accept(f, None));
    let v2e = validity(ran("2E"), r.f2e.as_ref(), |f| {
        rules::accept(f, Some("EdDSA"))
    });
    let v2l = validity(ran("2L"), r.f2l.as_ref(), hs256);
    let v3 = validity(ran("3"), r.f3.as_ref(), |f| {
        rules::fig3(f, r.marker.as_ref())
    });
    let v4 = validity(ran("4"), r.f4.as_ref(), rules::fig4);
    let v5 = validity(ran("5"), r.f5.as_ref(), rules::fig5);
    let v6 = validity(ran("6"), r.f6.as_ref(), rules::drain);
    let v7 = validity(ran("7"), r.f7.as_ref(), rules::ceiling);
    let v8 = validity(ran("8"), r.f8.as_ref(), rules::drain);
    // (9) and (9L) run at a share of (2)'s rate (`scripts/bench.sh`): an INVALID (2) makes
    // them INVALID too. Without a (2), bench.sh took another base (a peak run, or a set rate).
    let v9 = rules::based_on(
        validity(ran("9"), r.f9.as_ref(), rules::e2e),
        "(2)",
        v2.as_ref(),
    );
    let v9l = rules::based_on(
        validity(ran("9L"), r.f9l.as_ref(), rules::e2e),
        "(2)",
        v2.as_ref(),
    );

    let rate = |f: &Option<LoadRun>, label: &str| {
        f.as_ref().map_or((None, None), |f| {
            let (v, p) = f.rate_of(label);
            (Some(v), p)
        })
    };
    let (val1, p1) = rate(&r.f1, "200");
    let (val2, p2) = rate(&r.f2, "202");
    let (val2n, p2n) = rate(&r.f2n, "202");
    let (val2e, p2e) = rate(&r.f2e, "202");
    let (val2l, p2l) = rate(&r.f2l, "202");
    let (val3, p3) = rate(&r.f3, "409");
    let (val4, p4) = rate(&r.f4, "201");
    let val5 = r.f5.as_ref().and_then(rules::fig5_value);
    let val6 = r.f6.as_ref().and_then(Drain::per_s);
    let val7 = r.f7.as_ref().map(|c| c.rows_per_s);
    let val8 = r.f8.as_ref().and_then(Drain::per_s);
    let met = |x: Option<f64>, goal: f64| x.map(|x| x >= goal);
    // A ratio floor is the faster of the bare-HTTP runs that count, ours (1) or wrk's (1w): a
    // slow load tool must not flatter a ratio. Without a valid one, (1), and the goal is not
    // judged.
    let (floor, floor_name, floor_v) = rules::best_floor(
        (val1, v1.as_ref()),
        (r.wrk.as_ref().map(|w| w.rps), v1w.as_ref()),
    );

    let mut out = Vec::new();
    let mut push =
        |figure: &'static str, v: &Option<Validity>, build: &dyn Fn(&Validity) -> Row| {
            if let Some(v) = v {
                let mut row = build(v);
                row.figure = figure;
                out.push(row);
            }
        };
    let blank = |what: String, mark: Mark| Row {
        figure: "",
        what,
        value: None,
        unit: "",
        p99_ms: None,
        ratio: String::new(),
        goal: "",
        mark,
    };

    push("1", &v1, &|v| Row {
        value: val1,
        unit: "req/s",
        p99_ms: p1,
        ratio: "ceiling".into(),
        ..blank(
            "bare HTTP: `GET /livez` (seckill-bench), `200`s".into(),
            rules::verdict(v, None),
        )
    });
    push("1w", &v1w, &|v| Row {
        value: r.wrk.as_ref().map(|w| w.rps),
        unit: "req/s",
        p99_ms: r.wrk.as_ref().and_then(|w| w.p99_ms),
        ratio: rt(ratio(r.wrk.as_ref().map(|w| w.rps), val1), "(1)"),
        ..blank(
            "bare HTTP: `GET /livez` (wrk)".into(),
            rules::verdict(v, None),
        )
    });
    push("2", &v2, &|v| {
        let x = ratio(val2, floor);
        Row {
            value: val2,
            unit: "req/s",
            p99_ms: p2,
            ratio: rt(x, floor_name),
            goal: "≥ 0.5 × the faster of (1), (1w)",
            ..blank(
                "accept path: `202`, unique users, one HS256 token each".into(),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![(floor_name, floor_v)],
                        met: met(x, 0.5),
                    }),
                ),
            )
        }
    });
    // Both goals are smaller than the spread of the gateway's CPU per request between runs:
    // once the figures they need count, they are judged from the rounds.
    let by_rounds = |mark: Mark, d: &RoundDiffs, limit: Option<f64>| match (mark, limit) {
        (Mark::Met | Mark::NotMet, Some(limit)) => rules::rounds_goal(&d.values, limit),
        (mark, _) => mark,
    };
    let left_out = |d: &RoundDiffs| {
        if d.left_out.is_empty() {
            String::new()
        } else {
            format!(" (left out: {})", d.left_out.join(", "))
        }
    };
    push("2N", &v2n, &|v| {
        let d = r.auth.hs256();
        let mark = rules::verdict(
            v,
            Some(Goal {
                needs: vec![("(2)", v2.as_ref())],
                met: Some(true),
            }),
        );
        Row {
            value: val2n,
            unit: "req/s",
            p99_ms: p2n,
            ratio: format!(
                "(2) = {}; (2) − (2N) = {} gateway CPU/req{}",
                rt(ratio(val2, val2n), "(2N)"),
                d.text(),
                left_out(&d)
            ),
            goal: "(2) − (2N) ≤ 5 µs gateway CPU/req (95 % interval of 5 rounds)",
            ..blank(
                "(2) with authentication off (`gateway --dev`, `SECKILL_AUTH_MODE=none`), \
                 no tokens"
                    .into(),
                by_rounds(mark, &d, Some(rules::HS256_MAX_US)),
            )
        }
    });
    push("2E", &v2e, &|v| {
        let d = r.auth.eddsa();
        let allowed = r.auth.eddsa_allowed_us();
        let mut mark = rules::verdict(
            v,
            Some(Goal {
                needs: vec![("(2N)", v2n.as_ref())],
                met: allowed.map(|_| true),
            }),
        );
        if allowed.is_none() && mark == Mark::NotJudged("no value".into()) {
            mark = Mark::NotJudged(
                "one Ed25519 verify's cost is unknown (`cargo bench -p seckill-gateway \
                 --bench auth`, or BENCH_ED25519_VERIFY_US)"
                    .into(),
            );
        }
        Row {
            value: val2e,
            unit: "req/s",
            p99_ms: p2e,
            ratio: format!(
                "{}; (2E) − (2N) = {} gateway CPU/req{}{}",
                rt(ratio(val2e, val2n), "(2N)"),
                d.text(),
                allowed.map_or(String::new(), |a| format!(", allowed {a:.1} µs")),
                left_out(&d)
            ),
            goal: "(2E) − (2N) ≤ one Ed25519 verify + 5 µs gateway CPU/req (95 % interval of 5 \
                   rounds)",
            ..blank(
                "(2) with EdDSA tokens (Ed25519 key `ed-1` of a JWKS file)".into(),
                by_rounds(mark, &d, allowed),
            )
        }
    });
    push("2L", &v2l, &|v| Row {
        value: val2l,
        unit: "req/s",
        p99_ms: p2l,
        ratio: rt(ratio(val2l, val2), "(2)"),
        ..blank(
            "(2) with the per-user limit on (5/s)".into(),
            rules::verdict(v, None),
        )
    });
    push("3", &v3, &|v| {
        let x = ratio(val3, floor);
        let share =
            r.f3.as_ref()
                .and_then(|f| rules::marker_share(f, r.marker.as_ref()));
        Row {
            value: val3,
            unit: "req/s",
            p99_ms: p3,
            ratio: rt(x, floor_name),
            goal: "≥ 0.9 × the faster of (1), (1w)",
            ..blank(
                format!(
                    "sold-out path: `409` from the marker ({} marker hits; ≥ 99 % needed)",
                    share.map_or("n/a".into(), |s| format!("{:.1} %", s * 100.0))
                ),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![(floor_name, floor_v)],
                        met: met(x, 0.9),
                    }),
                ),
            )
        }
    });
    push("4", &v4, &|v| {
        let x = ratio(val2, val4);
        Row {
            value: val4,
            unit: "req/s",
            p99_ms: p4,
            ratio: format!("(2) = {}", rt(x, "(4)")),
            goal: "(2) ≥ 10 × (4)",
            ..blank(
                "sync mode: `201` after the MySQL write".into(),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![("(2)", v2.as_ref())],
                        met: met(x, 10.0),
                    }),
                ),
            )
        }
    });
    push("5", &v5, &|v| {
        let share = r.f5.as_ref().and_then(rules::reserved_share);
        Row {
            value: val5,
            unit: "reservations/s",
            p99_ms: r.f5.as_ref().and_then(|f| f.p99_ms),
            ratio: format!("(2) = {}", rt(ratio(val2, val5), "(5)")),
            goal: "report",
            ..blank(
                format!(
                    "Redis ceiling: `redis-benchmark` EVALSHA reserve.lua ({} of the calls \
                     reserved a unit; error replies left out)",
                    share.map_or("n/a".into(), |s| format!("{:.1} %", s * 100.0))
                ),
                rules::verdict(v, None),
            )
        }
    });
    let from_start = |d: &Option<Drain>| {
        d.as_ref()
            .and_then(Drain::from_start_per_s)
            .map_or(String::new(), |x| {
                format!("; {}/s counting from the worker's start", fmt(Some(x)))
            })
    };
    let orders = |d: &Option<Drain>| d.as_ref().map_or("?".into(), |d| d.orders.to_string());
    push("6", &v6, &|v| {
        let (r67, r68) = (ratio(val6, val7), ratio(val6, val8));
        Row {
            value: val6,
            unit: "orders/s",
            ratio: format!("{}; {}", rt(r67, "(7)"), rt(r68, "(8)")),
            goal: "≥ 0.5 × (7), ≥ 20 × (8)",
            ..blank(
                format!(
                    "worker drain, batched ({} orders, steady rate{})",
                    orders(&r.f6),
                    from_start(&r.f6)
                ),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![("(7)", v7.as_ref()), ("(8)", v8.as_ref())],
                        met: r67.zip(r68).map(|(a, b)| a >= 0.5 && b >= 20.0),
                    }),
                ),
            )
        }
    });
    push("7", &v7, &|v| Row {
        value: val7,
        unit: "rows/s",
        p99_ms: r.f7.as_ref().and_then(|c| c.batch_p99_ms),
        ratio: "ceiling".into(),
        ..blank(
            "raw MySQL ceiling: multi-row INSERT loop".into(),
            rules::verdict(v, None),
        )
    });
    push("8", &v8, &|v| Row {
        value: val8,
        unit: "orders/s",
        ratio: "baseline".into(),
        ..blank(
            format!(
                "row-at-a-time worker ({} orders, steady rate{})",
                orders(&r.f8),
                from_start(&r.f8)
            ),
            rules::verdict(v, None),
        )
    });
    let e2e_what = |f: &Option<LoadRun>| {
        let Some(f) = f else {
            return String::new();
        };
        // Leads with ", ": the row reads "end to end: `202` → confirmed, open loop: …".
        let e = f.e2e.clone().unwrap_or_default();
        let rate = match &f.arrival {
            Some(a) => format!(
                "{}: {} req/s offered, {} achieved, at most {} of {} in flight",
                a.model.describe(),
                fmt(a.offered_per_s),
                fmt(Some(a.achieved_per_s)),
                a.max_in_flight,
                a.in_flight_cap
            ),
            None => format!("{} req/s", fmt(Some(f.req_per_s))),
        };
        format!(
            ", {rate}; p50 {:.1} ms ({}/{} tickets confirmed)",
            e.p50_ms, f.tickets.confirmed, f.tickets.issued
        )
    };
    let p99_of = |f: &Option<LoadRun>| {
        f.as_ref()
            .and_then(|f| f.e2e.as_ref())
            .filter(|e| e.count > 0)
            .map(|e| e.p99_ms)
    };
    push("9", &v9, &|v| {
        let p99 = p99_of(&r.f9);
        Row {
            value: p99,
            unit: "ms p99",
            goal: "p99 ≤ 50 ms",
            ..blank(
                format!("end to end: `202` → confirmed{}", e2e_what(&r.f9)),
                rules::verdict(
                    v,
                    Some(Goal {
                        needs: vec![],
                        met: p99.map(|p| p <= 50.0),
                    }),
                ),
            )
        }
    });
    push("9L", &v9l, &|v| Row {
        value: p99_of(&r.f9l),
        unit: "ms p99",
        goal: "(for reference)",
        ..blank(
            format!("(9) at a lower rate{}", e2e_what(&r.f9l)),
            rules::verdict(v, None),
        )
    });
    out
}

#[cfg(test)]
mod tests;
