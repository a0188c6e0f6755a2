//! Checks 9 and 12: the units the payments sold, within the stock, and with
//! `--expect-all-paid` every one of them.

use super::without_payments;
use crate::audit::checks::{AuditInput, CheckResult, Status};
use seckill_shared::OrderStatus;

/// Check 9: payments sold no unit the sale did not have. Paid orders are at most the initial
/// stock, and MySQL's stock is the initial stock less the orders confirmed and paid (a
/// cancelled order gave its unit back, once).
pub fn paid_within_stock(input: &AuditInput) -> CheckResult {
    if let Some(skip) = without_payments(input, 9, "paid within stock") {
        return skip;
    }
    let my = &input.mysql;
    let initial = input.initial_stock;
    let (confirmed, paid) = (
        my.count(OrderStatus::Confirmed),
        my.count(OrderStatus::Paid),
    );
    let cancelled = my.count(OrderStatus::Cancelled);
    let mut problems = vec![];
    if paid > initial {
        problems.push(format!(
            "{paid} orders paid for {initial} units ({:+})",
            paid - initial
        ));
    }
    let expected = initial - confirmed - paid;
    if my.stock != expected {
        problems.push(format!(
            "MySQL stock {} != initial {initial} - confirmed {confirmed} - paid {paid} = \
             {expected} ({:+})",
            my.stock,
            my.stock - expected
        ));
    }
    let mut r = CheckResult::new(
        9,
        "paid within stock",
        problems.is_empty(),
        format!(
            "paid={paid} confirmed={confirmed} cancelled={cancelled}; mysql stock={}; \
             initial={initial}",
            my.stock
        ),
    );
    r.problems = problems;
    r
}

/// Check 12, with `--expect-all-paid`: after the sale every unit of the initial stock ends in
/// a paid order: nothing undersold, nothing left confirmed and unpaid, no cancelled unit left
/// unsold.
pub fn all_units_paid(input: &AuditInput) -> CheckResult {
    let my = &input.mysql;
    let initial = input.initial_stock;
    let (confirmed, paid) = (
        my.count(OrderStatus::Confirmed),
        my.count(OrderStatus::Paid),
    );
    let found = format!(
        "paid={paid} of initial={initial}; confirmed unpaid={confirmed} mysql stock={} \
         cancelled={}",
        my.stock,
        my.count(OrderStatus::Cancelled)
    );
    if !input.expect_all_paid {
        return CheckResult {
            status: Status::Skip,
            info: vec!["not audited as --expect-all-paid".into()],
            ..CheckResult::new(12, "all units paid", true, found)
        };
    }
    let mut problems = vec![];
    if paid != initial {
        problems.push(format!(
            "{paid} of {initial} units ended paid ({:+}): {confirmed} orders still confirmed \
             and unpaid, {} units left in MySQL stock",
            paid - initial,
            my.stock
        ));
    }
    let mut r = CheckResult::new(12, "all units paid", problems.is_empty(), found);
    r.problems = problems;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::checks::fixtures::{cancel, healthy, paid_sale, row, stores_settled, ticket};
    use seckill_shared::CancelReason;

    #[test]
    fn check9_paid_within_stock() {
        let r = paid_within_stock(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("paid=3 confirmed=0 cancelled=2"), "{r:?}");

        // A cancelled unit sold again, and paid: four paid for three units.
        let mut over = paid_sale();
        let o = row(&mut over, 3);
        o.status = OrderStatus::Paid;
        o.cancel_reason = None;
        o.cancelled_at_ms = None;
        let r = paid_within_stock(&over);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].starts_with("4 orders paid for 3 units"),
            "{r:?}"
        );
        assert!(
            r.problems[1].contains("MySQL stock 0 != initial 3 - confirmed 0 - paid 4 = -1"),
            "{r:?}"
        );

        // A cancelled unit that MySQL put back twice.
        let mut twice = paid_sale();
        twice.mysql.stock = 1;
        let r = paid_within_stock(&twice);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].ends_with("= 0 (+1)"), "{r:?}");
    }

    #[test]
    fn check12_all_units_paid() {
        let r = all_units_paid(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        let mut unflagged = healthy();
        assert_eq!(all_units_paid(&unflagged).status, Status::Skip);
        // Confirmed, never paid.
        unflagged.expect_all_paid = true;
        let r = all_units_paid(&unflagged);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].starts_with("0 of 3 units ended paid (-3): 3 orders still confirmed"),
            "{r:?}"
        );

        // A unit cancelled after the load and never sold again.
        let mut undersold = paid_sale();
        cancel(&mut undersold, 5, CancelReason::PaymentTimeout);
        undersold.mysql.payments.retain(|p| p.ticket != ticket(5));
        stores_settled(&mut undersold);
        let r = all_units_paid(&undersold);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].ends_with("1 units left in MySQL stock"),
            "{r:?}"
        );
    }
}
