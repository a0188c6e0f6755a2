//! When a figure's run counts. One pure function per figure: `Ok(())` when the run measured
//! what the figure claims, otherwise the reason it did not. A figure whose run is invalid is
//! printed as INVALID with that reason and never as met; a ratio whose other side is invalid
//! or missing is not judged.
//!
//! How a figure is then judged against its goal (met, not met, INVALID, and the goals judged
//! over rounds) is in `verdict.rs`.

mod verdict;

pub use verdict::{
    based_on, best_floor, rounds_goal, verdict, Goal, Interval, Mark, EDDSA_MARGIN_US,
    HS256_MAX_US, MIN_ROUNDS,
};

use super::inputs::{Ceiling, Drain, LoadRun, MarkerCount, RedisRun, WrkRun};
use crate::load::stats::ArrivalModel;

/// `Ok(())`, or why the run does not count.
pub type Validity = Result<(), String>;

/// (3): the share of its `409`s that the local sold-out marker must have answered.
pub const MIN_MARKER_SHARE: f64 = 0.99;
/// (5): the share of `redis-benchmark`'s calls that must have reserved a unit.
pub const MIN_RESERVED_SHARE: f64 = 0.99;
/// An open loop's achieved rate may be this far (relative) from the offered one.
pub const RATE_TOLERANCE: f64 = 0.05;

/// Every answer was `label` (no other status, no transport error or timeout), and there was
/// at least one.
pub fn only_answers(run: &LoadRun, label: &str) -> Validity {
    if run.requests == 0 {
        return Err("no requests were answered".into());
    }
    let others: Vec<String> = run
        .outcomes
        .iter()
        .filter(|o| o.outcome != label && o.count > 0)
        .map(|o| format!("{} × {}", o.outcome, o.count))
        .collect();
    if !others.is_empty() {
        return Err(format!(
            "answers other than {label}: {} of {} requests",
            others.join(", "),
            run.requests
        ));
    }
    if run.count(label) == 0 {
        return Err(format!("no {label} answers"));
    }
    Ok(())
}

/// (1) `GET /livez` with seckill-bench: only `200`s count, and any other answer voids the run.
pub fn fig1(run: &LoadRun) -> Validity {
    only_answers(run, "200")
}

/// (1w) the same with wrk: no non-2xx/3xx answer and no socket error.
pub fn fig1w(w: &WrkRun) -> Validity {
    if w.requests == 0 {
        return Err("wrk made no requests".into());
    }
    if w.non_2xx > 0 {
        return Err(format!(
            "{} of {} answers were not 2xx/3xx",
            w.non_2xx, w.requests
        ));
    }
    if w.socket_errors > 0 {
        return Err(format!(
            "{} socket errors (connect, read, write, timeout)",
            w.socket_errors
        ));
    }
    Ok(())
}

/// (2), (2L), (2N) and (2E) the accept path: only `202`s, from buyers with the tokens the
/// figure is about: `tokens` is their algorithm (`HS256`, `EdDSA`), `None` for no tokens.
pub fn accept(run: &LoadRun, tokens: Option<&str>) -> Validity {
    only_answers(run, "202")?;
    match (run.tokens(), tokens) {
        (got, want) if got == want => Ok(()),
        (None, Some(want)) => Err(format!("the buyers sent no tokens, not {want} ones")),
        (Some(got), None) => Err(format!(
            "the buyers sent {got} tokens: this figure is without"
        )),
        (got, want) => Err(format!(
            "the buyers' tokens were {}, not {}",
            got.unwrap_or("none"),
            want.unwrap_or("none")
        )),
    }
}

/// The share of (3)'s `409`s that the marker answered, when both counts are known.
pub fn marker_share(run: &LoadRun, marker: Option<&MarkerCount>) -> Option<f64> {
    let n = run.count("409");
    marker
        .filter(|_| n > 0)
        .map(|m| m.marker_hits as f64 / n as f64)
}

/// (3) the sold-out path: only `409`s, at least [`MIN_MARKER_SHARE`] of them from the marker.
pub fn fig3(run: &LoadRun, marker: Option<&MarkerCount>) -> Validity {
    only_answers(run, "409")?;
    let share = marker_share(run, marker)
        .ok_or_else(|| "the gateway's marker-hit count is missing".to_string())?;
    if share < MIN_MARKER_SHARE {
        return Err(format!(
            "{:.1} % of the 409s came from the marker, below {:.0} %",
            share * 100.0,
            MIN_MARKER_SHARE * 100.0
        ));
    }
    Ok(())
}

/// (4) sync mode: only `201`s. A `503`, an error or a timeout is a failed buy, and failed buys
/// are cheap: a run that has them is invalid, not easier to beat.
pub fn fig4(run: &LoadRun) -> Validity {
    only_answers(run, "201")
}

/// (5) `redis-benchmark` of the reservation script: the share of calls that reserved a unit
/// (the stock fell by one), so that error replies and refusals are left out.
pub fn reserved_share(r: &RedisRun) -> Option<f64> {
    (r.requests > 0).then(|| (r.stock_before - r.stock_after) as f64 / r.requests as f64)
}

/// (5)'s value: reservations per second, `redis-benchmark`'s rate times the share that
/// reserved.
pub fn fig5_value(r: &RedisRun) -> Option<f64> {
    reserved_share(r).map(|s| r.rps * s.clamp(0.0, 1.0))
}

pub fn fig5(r: &RedisRun) -> Validity {
    let share = reserved_share(r).ok_or_else(|| "redis-benchmark made no calls".to_string())?;
    if share > 1.0 {
        return Err(format!(
            "the stock fell by {} for {} calls: something else reserved",
            r.stock_before - r.stock_after,
            r.requests
        ));
    }
    if share < MIN_RESERVED_SHARE {
        return Err(format!(
            "only {:.1} % of the {} calls reserved a unit (the rest were error replies or \
             refusals), below {:.0} %",
            share * 100.0,
            r.requests,
            MIN_RESERVED_SHARE * 100.0
        ));
    }
    Ok(())
}

/// (6) and (8) the drain: every order was accepted, every accepted order became exactly one
/// row, and there were rows after the first transaction to time.
pub fn drain(d: &Drain) -> Validity {
    if d.accepted < d.orders {
        return Err(format!(
            "only {} of {} buys were answered 202",
            d.accepted, d.orders
        ));
    }
    if d.rows != d.accepted {
        return Err(format!(
            "{} order rows for {} accepted orders",
            d.rows, d.accepted
        ));
    }
    if d.per_s().is_none() {
        return Err("no rows after the first transaction to time".into());
    }
    Ok(())
}

/// (7) the raw MySQL ceiling: it wrote rows, at a finite rate.
pub fn ceiling(c: &Ceiling) -> Validity {
    if c.rows == 0 || !(c.rows_per_s.is_finite() && c.rows_per_s > 0.0) {
        return Err("no rows written".into());
    }
    Ok(())
}

/// An open loop that stayed open: the achieved rate within [`RATE_TOLERANCE`] of the offered
/// one, and never every in-flight slot taken (then a due request waited for an answer).
pub fn open_loop(run: &LoadRun) -> Validity {
    let a = run
        .arrival
        .as_ref()
        .ok_or_else(|| "no arrival data (a load tool without --open-loop)".to_string())?;
    if a.model != ArrivalModel::Open {
        return Err(format!("not an open loop but a {}", a.model.describe()));
    }
    let offered = a
        .offered_per_s
        .filter(|r| *r > 0.0)
        .ok_or_else(|| "no offered rate".to_string())?;
    let off = a.achieved_per_s / offered - 1.0;
    if off.abs() > RATE_TOLERANCE {
        return Err(format!(
            "achieved {:.0} req/s, {:+.1} % off the {offered:.0} offered (allowed ±{:.0} %)",
            a.achieved_per_s,
            off * 100.0,
            RATE_TOLERANCE * 100.0
        ));
    }
    if a.max_in_flight >= a.in_flight_cap {
        return Err(format!(
            "all {} in-flight slots were taken at once: the loop closed",
            a.in_flight_cap
        ));
    }
    Ok(())
}

/// (9) and (9L) end to end: only `202`s, every issued ticket confirmed (with the times the
/// latency needs), in an open loop that kept its rate. With nothing confirmed there is no
/// latency to report, so no p99 of 0 can pass.
pub fn e2e(run: &LoadRun) -> Validity {
    only_answers(run, "202")?;
    let t = &run.tickets;
    if t.issued == 0 {
        return Err("no ticket was issued".into());
    }
    if t.confirmed != t.issued {
        return Err(format!(
            "{} of {} tickets confirmed ({} failed, {} unsettled)",
            t.confirmed, t.issued, t.failed, t.unsettled
        ));
    }
    let timed = run.e2e.as_ref().map_or(0, |e| e.count);
    if timed != t.confirmed {
        return Err(format!(
            "{} of {} confirmed tickets have both times",
            timed, t.confirmed
        ));
    }
    open_loop(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::stats::{ArrivalStats, E2eLatency, OutcomeStats, TicketTotals};

    fn row(outcome: &str, count: u64) -> OutcomeStats {
        OutcomeStats {
            outcome: outcome.into(),
            count,
            per_sec: count as f64 / 10.0,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: 3.0,
            p999_ms: 4.0,
            max_ms: 5.0,
        }
    }

    fn run(outcomes: &[(&str, u64)]) -> LoadRun {
        let requests = outcomes.iter().map(|(_, n)| n).sum();
        LoadRun {
            requests,
            req_per_s: requests as f64 / 10.0,
            outcomes: outcomes.iter().map(|(o, n)| row(o, *n)).collect(),
            all: row("all", requests),
            tickets: TicketTotals::default(),
            e2e: None,
            arrival: None,
            jwt: false,
            jwt_alg: None,
        }
    }

    /// An open-loop end-to-end run: `n` 202s, all confirmed, at the offered rate.
    fn e2e_run(n: u64) -> LoadRun {
        let mut r = run(&[("202", n)]);
        r.tickets = TicketTotals {
            issued: n,
            confirmed: n,
            failed: 0,
            unsettled: 0,
            ..Default::default()
        };
        r.e2e = Some(E2eLatency {
            count: n,
            p99_ms: 30.0,
            ..Default::default()
        });
        r.arrival = Some(ArrivalStats {
            model: ArrivalModel::Open,
            offered_per_s: Some(1000.0),
            achieved_per_s: 990.0,
            in_flight_cap: 512,
            max_in_flight: 40,
            lag_p50_ms: Some(0.1),
            lag_p99_ms: Some(1.0),
            lag_max_ms: Some(3.0),
        });
        r
    }

    #[test]
    fn fig1_counts_only_200s() {
        assert_eq!(fig1(&run(&[("200", 1000)])), Ok(()));
        let e = fig1(&run(&[("200", 990), ("error", 10)])).unwrap_err();
        assert!(e.contains("error × 10"), "{e}");
        assert!(fig1(&run(&[])).is_err());
        assert!(fig1(&run(&[("503", 5)])).is_err());
    }

    #[test]
    fn fig1w_needs_no_errors_from_wrk() {
        let ok = WrkRun {
            requests: 1000,
            rps: 100.0,
            p99_ms: Some(1.0),
            non_2xx: 0,
            socket_errors: 0,
        };
        assert_eq!(fig1w(&ok), Ok(()));
        assert!(fig1w(&WrkRun {
            non_2xx: 3,
            ..ok.clone()
        })
        .is_err());
        assert!(fig1w(&WrkRun {
            socket_errors: 1,
            ..ok
        })
        .is_err());
    }

    #[test]
    fn the_accept_path_counts_only_202s_from_the_right_tokens() {
        let hs = |outcomes: &[(&str, u64)]| {
            let mut r = run(outcomes);
            r.jwt = true;
            r.jwt_alg = Some("HS256".into());
            r
        };
        assert_eq!(accept(&hs(&[("202", 500)]), Some("HS256")), Ok(()));
        assert!(accept(&hs(&[("202", 500), ("503", 1)]), Some("HS256")).is_err());
        // A held ticket answered 200 is not a fresh sale.
        assert!(accept(&hs(&[("202", 500), ("200", 1)]), Some("HS256")).is_err());
        // 401s (no token, or a wrong one) are not accepts either.
        assert!(accept(&run(&[("4xx", 500)]), None).is_err());

        // The tokens must be the figure's.
        assert_eq!(accept(&run(&[("202", 5)]), None), Ok(()));
        let e = accept(&run(&[("202", 5)]), Some("HS256")).unwrap_err();
        assert!(e.contains("no tokens"), "{e}");
        let e = accept(&hs(&[("202", 5)]), None).unwrap_err();
        assert!(e.contains("HS256 tokens"), "{e}");
        let e = accept(&hs(&[("202", 5)]), Some("EdDSA")).unwrap_err();
        assert!(e.contains("were HS256, not EdDSA"), "{e}");
        let mut ed = hs(&[("202", 5)]);
        ed.jwt_alg = Some("EdDSA".into());
        assert_eq!(accept(&ed, Some("EdDSA")), Ok(()));
        // An older load tool: `jwt` alone means HS256.
        let mut old = hs(&[("202", 5)]);
        old.jwt_alg = None;
        assert_eq!(accept(&old, Some("HS256")), Ok(()));
    }

    #[test]
    fn fig3_needs_99_percent_marker_hits() {
        let r = run(&[("409", 1000)]);
        let hits = |n| MarkerCount { marker_hits: n };
        assert_eq!(fig3(&r, Some(&hits(1000))), Ok(()));
        assert_eq!(fig3(&r, Some(&hits(990))), Ok(()));
        assert_eq!(marker_share(&r, Some(&hits(990))), Some(0.99));
        let e = fig3(&r, Some(&hits(500))).unwrap_err();
        assert!(e.contains("50.0 %"), "{e}");
        assert!(fig3(&r, None).is_err());
        assert!(fig3(&run(&[("409", 1000), ("error", 1)]), Some(&hits(1000))).is_err());
    }

    #[test]
    fn fig4_is_invalid_with_503s_errors_or_timeouts() {
        assert_eq!(fig4(&run(&[("201", 700)])), Ok(()));
        for bad in ["503", "error", "409", "other"] {
            let e = fig4(&run(&[("201", 700), (bad, 3)])).unwrap_err();
            assert!(e.contains(&format!("{bad} × 3")), "{e}");
        }
        // Failing fast is not a sync buy.
        assert!(fig4(&run(&[("503", 7000)])).is_err());
    }

    #[test]
    fn fig5_leaves_out_error_replies() {
        let ok = RedisRun {
            rps: 20_000.0,
            p99_ms: Some(5.0),
            requests: 100_000,
            stock_before: 1_000_000,
            stock_after: 900_000,
        };
        assert_eq!(fig5(&ok), Ok(()));
        assert_eq!(fig5_value(&ok), Some(20_000.0));
        // Half the replies were errors (e.g. NOSCRIPT, wrong number of keys).
        let half = RedisRun {
            stock_after: 950_000,
            ..ok.clone()
        };
        assert_eq!(fig5_value(&half), Some(10_000.0));
        assert!(fig5(&half).unwrap_err().contains("50.0 %"));
        // Every reply an error: nothing reserved.
        let none = RedisRun {
            stock_after: 1_000_000,
            ..ok.clone()
        };
        assert_eq!(fig5_value(&none), Some(0.0));
        assert!(fig5(&none).is_err());
        assert!(fig5(&RedisRun {
            stock_after: 800_000,
            ..ok
        })
        .is_err());
    }

    fn drained(orders: u64, accepted: u64, rows: u64) -> Drain {
        Drain {
            orders,
            accepted,
            batch: 500,
            t0: 100.0,
            t1: 104.0,
            rows,
            first: Some(102.0),
            last: Some(103.0),
            first_done: Some(102.1),
            batches: 40,
            settle_s: 2.5,
        }
    }

    #[test]
    fn a_drain_needs_every_order_as_one_row() {
        assert_eq!(drain(&drained(20_000, 20_000, 20_000)), Ok(()));
        assert!(drain(&drained(20_000, 19_000, 19_000)).is_err());
        assert!(drain(&drained(20_000, 20_000, 19_999)).is_err());
        let mut d = drained(20_000, 20_000, 20_000);
        d.last = d.first_done;
        assert!(drain(&d).is_err());
    }

    #[test]
    fn a_ceiling_needs_rows() {
        let c = Ceiling {
            rows: 20_000,
            rows_per_s: 50_000.0,
            batch_p99_ms: Some(10.0),
        };
        assert_eq!(ceiling(&c), Ok(()));
        assert!(ceiling(&Ceiling {
            rows_per_s: 0.0,
            ..c
        })
        .is_err());
    }

    #[test]
    fn fig9_needs_every_ticket_confirmed_and_only_202s() {
        assert_eq!(e2e(&e2e_run(1000)), Ok(()));
        // Nothing confirmed: the p99 is 0.0, which must not read as met.
        let mut r = e2e_run(1000);
        r.tickets.confirmed = 0;
        r.tickets.unsettled = 1000;
        r.e2e = Some(E2eLatency::default());
        assert!(e2e(&r).unwrap_err().contains("0 of 1000 tickets confirmed"));
        let mut r = e2e_run(1000);
        r.tickets.confirmed = 999;
        r.tickets.failed = 1;
        assert!(e2e(&r).is_err());
        let mut r = e2e_run(1000);
        r.outcomes.push(row("503", 2));
        r.requests += 2;
        assert!(e2e(&r).is_err());
        let mut r = e2e_run(1000);
        r.e2e.as_mut().unwrap().count = 900;
        assert!(e2e(&r).is_err());
        let mut r = e2e_run(0);
        r.outcomes.clear();
        assert!(e2e(&r).is_err());
    }

    #[test]
    fn an_open_loop_must_keep_its_rate_and_stay_open() {
        assert_eq!(open_loop(&e2e_run(10)), Ok(()));
        let with = |f: &dyn Fn(&mut ArrivalStats)| {
            let mut r = e2e_run(10);
            f(r.arrival.as_mut().unwrap());
            open_loop(&r)
        };
        assert_eq!(with(&|a| a.achieved_per_s = 1049.0), Ok(()));
        assert!(with(&|a| a.achieved_per_s = 940.0)
            .unwrap_err()
            .contains("-6.0 %"));
        assert!(with(&|a| a.achieved_per_s = 1060.0).is_err());
        assert!(with(&|a| a.max_in_flight = 512)
            .unwrap_err()
            .contains("loop closed"));
        // A paced closed loop is not an open loop, whatever its rate.
        assert!(with(&|a| a.model = ArrivalModel::Paced).is_err());
        let mut r = e2e_run(10);
        r.arrival = None;
        assert!(open_loop(&r).is_err());
        // (9) fails with it.
        let mut r = e2e_run(10);
        r.arrival.as_mut().unwrap().achieved_per_s = 500.0;
        assert!(e2e(&r).is_err());
    }
}
