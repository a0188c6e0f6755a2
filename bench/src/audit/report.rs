//! What `audit` prints: the `--json` report, or the checks' table and the promises' outcomes.

use super::checks::{self, AuditInput, CheckResult, Promises, SettleMs};
use crate::history;
use seckill_shared::CancelReason;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The `--json` report. `scripts/chaos.sh` reads `ok`, `checks`, `order_rows`, `promises`
/// (`made`, `kept`, `outcomes`), `sold_out_reached` and `settle_ms` (`p99`, `max`): keep the
/// names.
#[derive(Serialize)]
pub(super) struct Report<'a> {
    pub(super) ok: bool,
    product: u64,
    namespace: &'a str,
    initial_stock: i64,
    allowed_failures: Vec<&'a str>,
    history_requests: u64,
    history_tickets: usize,
    order_rows: usize,
    /// The units of the order rows confirmed or paid (sold), and cancelled.
    units_sold: i64,
    units_cancelled: i64,
    /// Units left at the end: Redis's stock key (`null` without one) and MySQL's stock.
    units_left: UnitsLeft,
    pub(super) promises: Promises,
    /// The summary's `sold_out_reached`; `null` without a summary or an `--until-sold-out` load.
    sold_out_reached: Option<bool>,
    /// How the load made sure the sale was over (`admin_api`, `probes`); `null` for a load that
    /// stopped at its first round of 409s.
    sale_end_checked_by: Option<history::SaleEndCheck>,
    /// Answer to confirmation, ms; `null` when no confirmed ticket has both times.
    settle_ms: Option<SettleMs>,
    notes: &'a [String],
    checks: &'a [CheckResult],
}

/// Units left in each store.
#[derive(Serialize)]
struct UnitsLeft {
    redis: Option<i64>,
    mysql: i64,
}

pub(super) fn report<'a>(
    input: &'a AuditInput,
    namespace: &'a str,
    notes: &'a [String],
    results: &'a [CheckResult],
) -> Report<'a> {
    Report {
        ok: results.iter().all(CheckResult::passed),
        product: input.product,
        namespace,
        initial_stock: input.initial_stock,
        allowed_failures: input.allowed_failures.iter().map(String::as_str).collect(),
        history_requests: input.history.requests,
        history_tickets: input.history.tickets.len(),
        order_rows: input.mysql.orders.len(),
        units_sold: input.mysql.sold(),
        units_cancelled: input.mysql.count(seckill_shared::OrderStatus::Cancelled),
        units_left: UnitsLeft {
            redis: input.redis.stock,
            mysql: input.mysql.stock,
        },
        promises: checks::promises(input),
        sold_out_reached: input.history.sold_out_reached,
        sale_end_checked_by: input.history.sale_end_checked_by,
        settle_ms: checks::settle_ms(input),
        notes,
        checks: results,
    }
}

/// The table `audit` prints.
pub fn table(results: &[CheckResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<2} {:<31} {:<6} found", "#", "check", "result");
    for r in results {
        let _ = writeln!(
            s,
            "{:<2} {:<31} {:<6} {}",
            r.id,
            r.name,
            r.status.label(),
            r.found
        );
        for p in &r.problems {
            let _ = writeln!(s, "{:<41}! {p}", "");
        }
        for i in &r.info {
            let _ = writeln!(s, "{:<41}i {i}", "");
        }
    }
    s
}

/// What became of the promises, one line per outcome: `confirmed`, `paid`,
/// `cancelled:<reason>`, `failed:<reason>`, `pending`, `unknown`.
pub fn outcomes_table(promises: &Promises, allowed: &BTreeSet<String>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{:<34} {:>9}  promise", "outcome", "tickets");
    for (outcome, n) in &promises.outcomes {
        let cancelled = outcome
            .strip_prefix("cancelled:")
            .is_some_and(|r| CancelReason::parse(r).is_some());
        let verdict = match outcome.strip_prefix("failed:") {
            _ if *n == 0 => "",
            None if outcome == "confirmed" || outcome == "paid" => "kept",
            None if cancelled => "kept (unit given back)",
            Some(reason) if allowed.contains(reason) => "kept (failure allowed)",
            _ => "BROKEN",
        };
        let _ = writeln!(s, "{outcome:<34} {n:>9}  {verdict}");
    }
    let _ = writeln!(
        s,
        "{:<34} {:>9}  {} kept",
        "promises made", promises.made, promises.kept
    );
    s
}

#[cfg(test)]
mod tests {
    use super::super::checks::{MysqlFacts, OrderRow, RedisFacts, TicketState};
    use super::super::history_facts::history_facts;
    use super::super::history_facts::tests::{T1, T2};
    use super::*;
    use seckill_shared::ProductId;

    /// Two tickets for one unit: one confirmed, one failed with `chaos`, which is allowed.
    fn input() -> AuditInput {
        let text = format!(
            r#"{{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":1,"status":202,"ticket":"{T1}","error":null}}
{{"kind":"request","sent_at_us":1,"recv_at_us":2,"gateway":"g","user_id":2,"status":202,"ticket":"{T2}","error":null}}
{{"kind":"settled","ticket":"{T1}","user_id":1,"status":"confirmed","order_id":10,"reason":null,"answered_at_us":1000000,"confirmed_at_ms":1012}}
{{"kind":"settled","ticket":"{T2}","user_id":2,"status":"failed","order_id":null,"reason":"chaos","answered_at_us":1000000}}
{{"kind":"summary","product":5,"until_sold_out":true,"sold_out_reached":true}}
"#
        );
        let lines = history::parse(text.as_bytes()).unwrap();
        let (history, _) = history_facts(&lines, ProductId::new(5).unwrap()).unwrap();
        AuditInput {
            product: 5,
            initial_stock: 1,
            allowed_failures: ["chaos".to_owned()].into_iter().collect(),
            allow_window: None,
            until_sold_out: true,
            expect_all_paid: false,
            history,
            redis: RedisFacts {
                stock: Some(0),
                initial: Some(1),
                pending: 0,
                confirmed: 1,
                paid: 0,
                cancelled: 0,
                failed: 1,
                buckets: vec![],
            },
            mysql: MysqlFacts {
                stock: 0,
                initial_stock: 1,
                orders: vec![OrderRow::confirmed(10, T1, 1)],
                failed_tickets: [T2.to_owned()].into_iter().collect(),
                failed_users: Default::default(),
                failed_units: Default::default(),
                payments: vec![],
                buckets: 1,
                closed: false,
            },
            ticket_states: [
                (
                    T1.to_owned(),
                    TicketState::Confirmed {
                        user_id: 1,
                        order_id: Some(10),
                        confirmed_at_ms: Some(1012),
                    },
                ),
                (
                    T2.to_owned(),
                    TicketState::Failed {
                        user_id: 2,
                        reason: Some("chaos".into()),
                    },
                ),
            ]
            .into_iter()
            .collect(),
            waiting_room: None,
            pays: vec![],
            pay_ends: vec![],
        }
    }

    /// `scripts/chaos.sh` reads these names.
    #[test]
    fn the_json_report_keeps_its_names() {
        let input = input();
        let results = checks::run_all(&input);
        let notes = vec![];
        let v = serde_json::to_value(report(&input, "ns", &notes, &results)).unwrap();
        assert_eq!(v["ok"], true, "{v:#}");
        assert_eq!(v["order_rows"], 1);
        assert_eq!(v["checks"].as_array().unwrap().len(), 13);
        assert_eq!(v["checks"][11]["status"], "SKIP");
        assert_eq!(v["checks"][12]["id"], 17);
        assert_eq!(v["checks"][12]["status"], "SKIP");
        assert_eq!(v["checks"][0]["id"], 1);
        assert_eq!(v["checks"][0]["status"], "PASS");
        assert_eq!(v["promises"]["made"], 2);
        assert_eq!(v["promises"]["kept"], 2);
        assert_eq!(
            v["promises"]["outcomes"],
            serde_json::json!({"confirmed": 1, "failed:chaos": 1, "pending": 0, "unknown": 0})
        );
        assert_eq!(v["sold_out_reached"], true);
        assert_eq!(v["sale_end_checked_by"], serde_json::Value::Null);
        assert_eq!(v["settle_ms"]["p99"], 12.0);
        assert_eq!(v["settle_ms"]["max"], 12.0);

        let mut bare = input;
        bare.history.sold_out_reached = None;
        bare.ticket_states.clear();
        let results = checks::run_all(&bare);
        let v = serde_json::to_value(report(&bare, "ns", &notes, &results)).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["sold_out_reached"], serde_json::Value::Null);
        assert_eq!(v["settle_ms"], serde_json::Value::Null);
        assert_eq!(v["promises"]["outcomes"]["unknown"], 2);
    }

    #[test]
    fn the_outcomes_table_names_broken_promises() {
        let mut input = input();
        input.ticket_states.insert(
            T2.to_owned(),
            TicketState::Failed {
                user_id: 2,
                reason: Some("expired".into()),
            },
        );
        let t = outcomes_table(&checks::promises(&input), &input.allowed_failures);
        let line = |k: &str| t.lines().find(|l| l.starts_with(k)).unwrap().to_owned();
        assert!(line("confirmed").ends_with("1  kept"), "{t}");
        assert!(line("failed:expired").ends_with("1  BROKEN"), "{t}");
        assert!(line("pending").ends_with("0  "), "{t}");
        assert!(line("promises made").ends_with("2  1 kept"), "{t}");
    }

    #[test]
    fn the_outcomes_table_keeps_paid_and_cancelled_promises() {
        let mut input = input();
        input.ticket_states.insert(
            T1.to_owned(),
            TicketState::Paid {
                user_id: 1,
                order_id: Some(10),
                confirmed_at_ms: None,
            },
        );
        let cancelled = |reason| TicketState::Cancelled {
            user_id: 2,
            order_id: Some(11),
            confirmed_at_ms: None,
            reason,
        };
        input
            .ticket_states
            .insert(T2.to_owned(), cancelled(Some(CancelReason::PaymentTimeout)));
        let t = outcomes_table(&checks::promises(&input), &input.allowed_failures);
        let line = |k: &str| t.lines().find(|l| l.starts_with(k)).unwrap().to_owned();
        assert!(line("paid").ends_with("1  kept"), "{t}");
        assert!(
            line("cancelled:payment_timeout").ends_with("1  kept (unit given back)"),
            "{t}"
        );
        assert!(line("promises made").ends_with("2  2 kept"), "{t}");
        // A cancel no store gives a reason for.
        input.ticket_states.insert(T2.to_owned(), cancelled(None));
        let t = outcomes_table(&checks::promises(&input), &input.allowed_failures);
        let line = |k: &str| t.lines().find(|l| l.starts_with(k)).unwrap().to_owned();
        assert!(line("cancelled:none").ends_with("1  BROKEN"), "{t}");
    }
}
