//! Load runs to report on, for the report's tests.

use super::inputs::LoadRun;
use super::rows::Row;
use super::rules::Mark;
use crate::load::stats::{OutcomeStats, TicketTotals};

fn stats(outcome: &str, count: u64, per_sec: f64) -> OutcomeStats {
    OutcomeStats {
        outcome: outcome.into(),
        count,
        per_sec,
        p50_ms: 1.0,
        p90_ms: 2.0,
        p99_ms: 3.0,
        p999_ms: 4.0,
        max_ms: 5.0,
    }
}

pub(super) fn load(outcomes: &[(&str, u64, f64)]) -> LoadRun {
    let n = outcomes.iter().map(|o| o.1).sum();
    LoadRun {
        requests: n,
        req_per_s: outcomes.iter().map(|o| o.2).sum(),
        outcomes: outcomes.iter().map(|o| stats(o.0, o.1, o.2)).collect(),
        all: stats("all", n, 0.0),
        tickets: TicketTotals::default(),
        e2e: None,
        arrival: None,
        jwt: true,
        jwt_alg: Some("HS256".into()),
    }
}

pub(super) fn mark_of<'a>(rows: &'a [Row], figure: &str) -> &'a Mark {
    &rows.iter().find(|r| r.figure == figure).unwrap().mark
}
