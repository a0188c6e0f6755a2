//! Each figure's row: its goal judged only when its runs are valid.

use super::super::fixtures::{load, mark_of};
use super::super::inputs::WrkRun;
use super::*;
use crate::load::stats::{ArrivalModel, ArrivalStats, E2eLatency, TicketTotals};

#[test]
fn a_ratio_goal_is_met_only_when_both_runs_are_valid() {
    let mut r = Results {
        f1: Some(load(&[("200", 1000, 50_000.0)])),
        f2: Some(load(&[("202", 1000, 30_000.0)])),
        ..Default::default()
    };
    let rows = rows(&r, &["1", "2"]);
    assert_eq!(mark_of(&rows, "2"), &Mark::Met);
    assert_eq!(mark_of(&rows, "1"), &Mark::NoGoal);
    // The ceiling had errors: its 200 rate is the value, and (2) is not judged.
    r.f1 = Some(load(&[("200", 1000, 50_000.0), ("error", 3, 0.1)]));
    let rows = super::rows(&r, &["1", "2"]);
    assert!(matches!(mark_of(&rows, "1"), Mark::Invalid(_)));
    assert_eq!(rows[0].value, Some(50_000.0));
    assert!(matches!(mark_of(&rows, "2"), Mark::NotJudged(_)));
    // (1) not run at all.
    let rows = super::rows(&r, &["2"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        mark_of(&rows, "2"),
        &Mark::NotJudged("(1) was not run".into())
    );
}

#[test]
fn sync_mode_with_503s_is_invalid_not_easier_to_beat() {
    let r = Results {
        f2: Some(load(&[("202", 1000, 6000.0)])),
        f4: Some(load(&[("201", 10, 100.0), ("503", 5000, 5000.0)])),
        ..Default::default()
    };
    let rows = rows(&r, &["2", "4"]);
    assert_eq!(rows[1].value, Some(100.0));
    let Mark::Invalid(reason) = mark_of(&rows, "4") else {
        panic!("{rows:?}")
    };
    assert!(reason.contains("503 × 5000"), "{reason}");
    assert!(rows[1]
        .markdown()
        .contains("**INVALID**: answers other than 201"));
}

/// An open-loop arrival at the 100/s it offered, never near its in-flight cap.
fn open_arrival_at_100() -> ArrivalStats {
    ArrivalStats {
        model: ArrivalModel::Open,
        offered_per_s: Some(100.0),
        achieved_per_s: 100.0,
        in_flight_cap: 64,
        max_in_flight: 3,
        lag_p50_ms: None,
        lag_p99_ms: None,
        lag_max_ms: None,
    }
}

#[test]
fn e2e_with_nothing_confirmed_is_invalid_not_met() {
    let mut f9 = load(&[("202", 1000, 100.0)]);
    f9.tickets = TicketTotals {
        issued: 1000,
        confirmed: 0,
        failed: 0,
        unsettled: 1000,
        ..Default::default()
    };
    f9.e2e = Some(E2eLatency::default());
    f9.arrival = Some(open_arrival_at_100());
    let r = Results {
        f9: Some(f9.clone()),
        ..Default::default()
    };
    let rows = rows(&r, &["9"]);
    assert!(matches!(mark_of(&rows, "9"), Mark::Invalid(_)), "{rows:?}");
    assert_eq!(rows[0].value, None);
    // Every ticket confirmed, p99 30 ms: met.
    f9.tickets.confirmed = 1000;
    f9.tickets.unsettled = 0;
    f9.e2e = Some(E2eLatency {
        count: 1000,
        p99_ms: 30.0,
        ..Default::default()
    });
    let r = Results {
        f9: Some(f9),
        ..Default::default()
    };
    assert_eq!(mark_of(&super::rows(&r, &["9"]), "9"), &Mark::Met);
}

#[test]
fn a_ratio_floor_is_the_faster_load_tool() {
    let wrk = |rps: f64, socket_errors: u64| WrkRun {
        requests: 100_000,
        rps,
        p99_ms: Some(2.0),
        non_2xx: 0,
        socket_errors,
    };
    let mut r = Results {
        f1: Some(load(&[("200", 1000, 50_000.0)])),
        wrk: Some(wrk(70_000.0, 0)),
        f2: Some(load(&[("202", 1000, 30_000.0)])),
        ..Default::default()
    };
    // wrk found 70,000/s: (2) is 0.43 of that, not the 0.6 of our tool's 50,000.
    let rows = rows(&r, &["1", "1w", "2"]);
    assert_eq!(mark_of(&rows, "2"), &Mark::NotMet, "{rows:?}");
    assert_eq!(rows[2].ratio, "0.43 × (1w)");
    // wrk's run did not count: our tool's is the floor.
    r.wrk = Some(wrk(70_000.0, 5));
    let rows = super::rows(&r, &["1", "1w", "2"]);
    assert_eq!(mark_of(&rows, "2"), &Mark::Met, "{rows:?}");
    assert_eq!(rows[2].ratio, "0.60 × (1)");
    // wrk slower than ours: ours.
    r.wrk = Some(wrk(40_000.0, 0));
    assert_eq!(super::rows(&r, &["1", "1w", "2"])[2].ratio, "0.60 × (1)");
}

#[test]
fn an_end_to_end_figure_on_an_invalid_base_is_invalid() {
    let mut f9 = load(&[("202", 1000, 100.0)]);
    f9.tickets = TicketTotals {
        issued: 1000,
        confirmed: 1000,
        failed: 0,
        unsettled: 0,
        ..Default::default()
    };
    f9.e2e = Some(E2eLatency {
        count: 1000,
        p99_ms: 30.0,
        ..Default::default()
    });
    f9.arrival = Some(open_arrival_at_100());
    let mut r = Results {
        f2: Some(load(&[("202", 1000, 30_000.0)])),
        f9: Some(f9),
        ..Default::default()
    };
    assert_eq!(mark_of(&rows(&r, &["2", "9"]), "9"), &Mark::Met);
    // (2) had 503s: its rate is no base for (9).
    r.f2 = Some(load(&[("202", 1000, 30_000.0), ("503", 5, 1.0)]));
    let rows = rows(&r, &["2", "9"]);
    assert!(matches!(mark_of(&rows, "2"), Mark::Invalid(_)), "{rows:?}");
    match mark_of(&rows, "9") {
        Mark::Invalid(why) => assert!(why.contains("base (2) is INVALID"), "{why}"),
        m => panic!("{m:?}"),
    }
}

#[test]
fn a_figure_that_ran_without_a_result_is_invalid() {
    let rows = rows(&Results::default(), &["7", "9L"]);
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| matches!(r.mark, Mark::Invalid(_))));
}
