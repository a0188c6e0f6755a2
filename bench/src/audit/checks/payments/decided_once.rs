//! Check 8: each order was decided once, paid or cancelled.

use super::{order_name, payments_by_ticket, without_payments};
use crate::audit::checks::{AuditInput, CheckResult, OrderRow, PaymentRow, Problems};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::{CancelReason, OrderStatus};

/// What is wrong with the row's own fields for its status: a paid order has a payment time
/// before its deadline and no cancel; a cancelled one has a cancel time and reason (a timeout
/// at or after its deadline) and no payment; a confirmed one has neither.
fn row_problems(o: &OrderRow) -> Vec<String> {
    let mut out = vec![];
    let name = order_name(o);
    let cancel_marks = o.cancelled_at_ms.is_some() || o.cancel_reason.is_some();
    match o.status {
        OrderStatus::Paid => {
            if cancel_marks {
                out.push(format!(
                    "{name} is paid and carries a cancel (at {:?}, reason {:?})",
                    o.cancelled_at_ms,
                    o.cancel_reason.map(CancelReason::as_str)
                ));
            }
            match (o.paid_at_ms, o.pay_by_ms) {
                (None, _) => out.push(format!("{name} is paid but has no paid_at_ms")),
                (_, None) => out.push(format!("{name} is paid but had no payment window")),
                (Some(at), Some(by)) if at >= by => out.push(format!(
                    "{name} was paid at {at}, {} ms after its deadline {by}",
                    at - by
                )),
                _ => {}
            }
        }
        OrderStatus::Cancelled => {
            if o.paid_at_ms.is_some() {
                out.push(format!(
                    "{name} is cancelled and was paid at {:?}",
                    o.paid_at_ms
                ));
            }
            match (o.cancel_reason, o.cancelled_at_ms, o.pay_by_ms) {
                (None, _, _) => out.push(format!("{name} is cancelled without a reason")),
                (_, None, _) => out.push(format!("{name} is cancelled but has no cancelled_at_ms")),
                (_, _, None) => out.push(format!("{name} is cancelled but had no payment window")),
                (Some(CancelReason::PaymentTimeout), Some(at), Some(by)) if at < by => {
                    out.push(format!(
                        "{name} was cancelled for payment_timeout at {at}, {} ms before its \
                         deadline {by}",
                        by - at
                    ))
                }
                _ => {}
            }
        }
        OrderStatus::Confirmed => {
            if o.paid_at_ms.is_some() || cancel_marks {
                out.push(format!(
                    "{name} is confirmed but carries paid_at_ms {:?}, cancelled_at_ms {:?}, \
                     cancel_reason {:?}",
                    o.paid_at_ms,
                    o.cancelled_at_ms,
                    o.cancel_reason.map(CancelReason::as_str)
                ));
            }
        }
    }
    if o.restore_due && o.status != OrderStatus::Cancelled {
        out.push(format!(
            "{name} is {} but has restore_due = 1",
            o.status.as_str()
        ));
    }
    out
}

/// Check 8: each order was decided once. No order is both paid and cancelled (its row carries
/// the marks of its own status only: a paid one was paid before its deadline, a
/// `payment_timeout` cancel came at or after it). Every `succeeded` payment belongs to a `paid`
/// order of the same buyer, at most one per order (a second success must be `refund_due`),
/// and every paid order has the one success that paid it (its `settled_at_ms` is the order's
/// `paid_at_ms`: the same callback decided both).
pub fn order_decided_once(input: &AuditInput) -> CheckResult {
    if let Some(skip) = without_payments(input, 8, "paid or cancelled, once") {
        return skip;
    }
    let orders = input.orders_by_ticket();
    let payments = payments_by_ticket(input);
    let mut problems = Problems::default();
    let (mut bad_rows, mut double, mut unpaid_success, mut paid_without) = (0, 0, 0, 0);
    for o in &input.mysql.orders {
        let found = row_problems(o);
        if !found.is_empty() {
            bad_rows += 1;
        }
        for p in found {
            problems.add(|| p);
        }
    }
    for (ticket, ps) in &payments {
        let succeeded: Vec<&&PaymentRow> = ps
            .iter()
            .filter(|p| p.status == PaymentStatus::Succeeded)
            .collect();
        let order = orders.get(ticket);
        if succeeded.len() > 1 {
            double += 1;
            let ids: Vec<&str> = succeeded.iter().map(|p| p.payment_id.as_str()).collect();
            problems.add(|| {
                format!(
                    "ticket {ticket} has {} succeeded payments ({}): a second success must be \
                     refund_due",
                    ids.len(),
                    ids.join(", ")
                )
            });
        }
        for p in &succeeded {
            match order {
                None => {
                    unpaid_success += 1;
                    problems.add(|| {
                        format!(
                            "payment {} succeeded for ticket {ticket}, which has no order row",
                            p.payment_id
                        )
                    });
                }
                Some(o) if o.status != OrderStatus::Paid => {
                    unpaid_success += 1;
                    problems.add(|| {
                        format!(
                            "payment {} succeeded but {} is {}",
                            p.payment_id,
                            order_name(o),
                            o.status.as_str()
                        )
                    });
                }
                Some(o) => {
                    if p.user_id != o.user_id {
                        problems.add(|| {
                            format!(
                                "payment {} of user {} paid {} of user {}",
                                p.payment_id,
                                p.user_id,
                                order_name(o),
                                o.user_id
                            )
                        });
                    }
                    if succeeded.len() == 1 && p.settled_at_ms != o.paid_at_ms {
                        problems.add(|| {
                            format!(
                                "payment {} succeeded at {:?} but {} was paid at {:?}",
                                p.payment_id,
                                p.settled_at_ms,
                                order_name(o),
                                o.paid_at_ms
                            )
                        });
                    }
                }
            }
        }
    }
    for o in input
        .mysql
        .orders
        .iter()
        .filter(|o| o.status == OrderStatus::Paid)
    {
        let succeeded = payments.get(o.ticket.as_str()).map_or(0, |ps| {
            ps.iter()
                .filter(|p| p.status == PaymentStatus::Succeeded)
                .count()
        });
        if succeeded == 0 {
            paid_without += 1;
            problems.add(|| format!("{} is paid, but no payment of it succeeded", order_name(o)));
        }
    }
    let with_window = input
        .mysql
        .orders
        .iter()
        .filter(|o| o.pay_by_ms.is_some())
        .count();
    let mut r = CheckResult::new(
        8,
        "paid or cancelled, once",
        problems.count == 0,
        format!(
            "orders with a deadline={with_window} payments={}; rows with mixed marks={bad_rows} \
             several successes={double} successes not paying={unpaid_success} \
             paid without success={paid_without}",
            input.mysql.payments.len()
        ),
    );
    r.problems = problems.samples;
    r
}

#[cfg(test)]
mod tests {
    use super::super::tests::{add_payment, payment};
    use super::*;
    use crate::audit::checks::fixtures::{paid_sale, row, PAY_BY};
    use crate::audit::checks::Status;

    #[test]
    fn check8_paid_or_cancelled_once() {
        let r = order_decided_once(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // Paid, and marked cancelled too.
        let mut both = paid_sale();
        let o = row(&mut both, 1);
        o.cancelled_at_ms = Some(PAY_BY);
        o.cancel_reason = Some(CancelReason::PaymentTimeout);
        let r = order_decided_once(&both);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("is paid and carries a cancel"),
            "{r:?}"
        );
        // Cancelled, and paid too.
        let mut paid_cancelled = paid_sale();
        row(&mut paid_cancelled, 2).paid_at_ms = Some(PAY_BY - 1);
        let r = order_decided_once(&paid_cancelled);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("is cancelled and was paid"), "{r:?}");

        // Paid after its deadline; cancelled for a timeout before it.
        let mut late = paid_sale();
        row(&mut late, 1).paid_at_ms = Some(PAY_BY);
        payment(&mut late, "pay-1").settled_at_ms = Some(PAY_BY);
        row(&mut late, 2).cancelled_at_ms = Some(PAY_BY - 1);
        let r = order_decided_once(&late);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        assert!(r.problems[0].contains("0 ms after its deadline"), "{r:?}");
        assert!(r.problems[1].contains("1 ms before its deadline"), "{r:?}");

        // A second success for one order must be refund_due.
        let mut second = paid_sale();
        add_payment(
            &mut second,
            "pay-1b",
            1,
            PaymentStatus::Succeeded,
            PAY_BY - 500,
        );
        let r = order_decided_once(&second);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("several successes=1"), "{r:?}");
        assert!(
            r.problems[0].contains("has 2 succeeded payments (pay-1, pay-1b)"),
            "{r:?}"
        );
        payment(&mut second, "pay-1b").status = PaymentStatus::RefundDue;
        assert_eq!(order_decided_once(&second).status, Status::Pass);

        // A success for a cancelled order.
        let mut cancelled = paid_sale();
        payment(&mut cancelled, "pay-2-late").status = PaymentStatus::Succeeded;
        let r = order_decided_once(&cancelled);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("successes not paying=1"), "{r:?}");
        assert!(r.problems[0].contains("succeeded but order 1002"), "{r:?}");

        // A paid order no payment paid; one paid by another callback, or another user.
        let mut unpaid = paid_sale();
        unpaid.mysql.payments.retain(|p| p.payment_id != "pay-4");
        let r = order_decided_once(&unpaid);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].ends_with("is paid, but no payment of it succeeded"),
            "{r:?}"
        );
        let mut other = paid_sale();
        payment(&mut other, "pay-4").settled_at_ms = Some(PAY_BY - 2000);
        payment(&mut other, "pay-5").user_id = 9;
        let r = order_decided_once(&other);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        assert!(r.problems[0].contains("but order 1004"), "{r:?}");
        assert!(
            r.problems[1].starts_with("payment pay-5 of user 9"),
            "{r:?}"
        );
    }
}
