//! Check 11: every payment success that came too late is `refund_due`.

use super::{order_name, payments_by_ticket, without_payments};
use crate::audit::checks::{AuditInput, CheckResult, Problems};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::OrderStatus;

/// Check 11: every success that came too late is `refund_due`. A payment that succeeded for
/// an order that is not paid should have been refunded; and a `refund_due` payment is one the
/// order could not take: it is cancelled, or paid by another payment, or its deadline had
/// passed when the callback came (`settled_at_ms >= pay_by_ms`, one clock). A refund of the
/// payment that paid the order, or of one that came within the window of an order still
/// `confirmed`, takes the buyer's money back for a unit they keep, or refuses a payment in
/// time.
pub fn late_successes_refunded(input: &AuditInput) -> CheckResult {
    if let Some(skip) = without_payments(input, 11, "late successes refunded") {
        return skip;
    }
    let orders = input.orders_by_ticket();
    let payments = payments_by_ticket(input);
    let mut problems = Problems::default();
    let (mut not_refunded, mut wrongly_refunded, mut refund_due) = (0, 0, 0);
    let mut unsettled = 0;
    for (ticket, ps) in &payments {
        let order = orders.get(ticket);
        let succeeded = ps
            .iter()
            .filter(|p| p.status == PaymentStatus::Succeeded)
            .count();
        for p in ps {
            match p.status {
                PaymentStatus::Succeeded => {
                    if order.is_some_and(|o| o.status == OrderStatus::Paid) {
                        continue;
                    }
                    not_refunded += 1;
                    let what = order.map_or("has no order row".to_owned(), |o| {
                        format!("is {}", o.status.as_str())
                    });
                    problems.add(|| {
                        format!(
                            "payment {} succeeded but the order of ticket {ticket} {what}: it \
                             must be refund_due",
                            p.payment_id
                        )
                    });
                }
                PaymentStatus::RefundDue => {
                    refund_due += 1;
                    let why_not = match order {
                        None => Some("the ticket has no order row".to_owned()),
                        Some(o) => match o.status {
                            // Refunded rightly only when the success came once the order could
                            // no longer be paid: after its deadline or its cancel, whichever
                            // came first. Earlier, the buyer paid in time and lost the unit.
                            OrderStatus::Cancelled => {
                                let closed = match (o.pay_by_ms, o.cancelled_at_ms) {
                                    (Some(by), Some(at)) => Some(by.min(at)),
                                    (by, at) => by.or(at),
                                };
                                match (closed, p.settled_at_ms) {
                                    (Some(closed), Some(at)) if at >= closed => None,
                                    (closed, at) => Some(format!(
                                        "{} was cancelled ({}), and this success came at {at:?}, \
                                         before it stopped being payable at {closed:?}: paid in \
                                         time, the buyer lost the unit",
                                        order_name(o),
                                        o.cancel_reason.map_or("no reason", |r| r.as_str())
                                    )),
                                }
                            }
                            OrderStatus::Paid if succeeded > 0 => None,
                            OrderStatus::Paid => Some(format!(
                                "{} is paid and no other payment succeeded: this one paid it",
                                order_name(o)
                            )),
                            OrderStatus::Confirmed => match (o.pay_by_ms, p.settled_at_ms) {
                                (Some(by), Some(at)) if at >= by => None,
                                (by, at) => Some(format!(
                                    "{} is still confirmed, and the callback came at {at:?}, \
                                     before its deadline {by:?}",
                                    order_name(o)
                                )),
                            },
                        },
                    };
                    if let Some(why) = why_not {
                        wrongly_refunded += 1;
                        problems
                            .add(|| format!("payment {} is refund_due but {why}", p.payment_id));
                    }
                }
                PaymentStatus::Unsent | PaymentStatus::Processing => unsettled += 1,
                PaymentStatus::Declined => {}
            }
        }
    }
    let mut r = CheckResult::new(
        11,
        "late successes refunded",
        problems.count == 0,
        format!(
            "refund_due={refund_due}; successes kept for an order not paid={not_refunded} \
             refunds of a payment the order took={wrongly_refunded}"
        ),
    );
    r.problems = problems.samples;
    if unsettled > 0 {
        r.info.push(format!(
            "{unsettled} payments never heard back from the provider (unsent or processing)"
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::super::tests::{add_payment, payment};
    use super::*;
    use crate::audit::checks::fixtures::{healthy, paid_sale, row, ticket, windowed, PAY_BY};
    use crate::audit::checks::{PaymentRow, Status};

    #[test]
    fn check11_late_successes_refunded() {
        let r = late_successes_refunded(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.starts_with("refund_due=1;"), "{r:?}");

        // The late success was kept although the order was cancelled.
        let mut kept = paid_sale();
        payment(&mut kept, "pay-2-late").status = PaymentStatus::Succeeded;
        let r = late_successes_refunded(&kept);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("is cancelled: it must be refund_due"),
            "{r:?}"
        );

        // The payment that paid the order is to be refunded.
        let mut refunded = paid_sale();
        payment(&mut refunded, "pay-4").status = PaymentStatus::RefundDue;
        let r = late_successes_refunded(&refunded);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("this one paid it"), "{r:?}");
        // ... but a second success for a paid order is refund_due rightly.
        let mut second = paid_sale();
        add_payment(
            &mut second,
            "pay-4b",
            4,
            PaymentStatus::RefundDue,
            PAY_BY - 10,
        );
        assert_eq!(late_successes_refunded(&second).status, Status::Pass);

        // A refund for an order still confirmed: right only once the deadline had passed.
        let mut open = healthy();
        windowed(&mut open);
        add_payment(&mut open, "pay-1", 1, PaymentStatus::RefundDue, PAY_BY);
        let r = late_successes_refunded(&open);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        payment(&mut open, "pay-1").settled_at_ms = Some(PAY_BY - 1);
        let r = late_successes_refunded(&open);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("before its deadline"), "{r:?}");

        // A success refunded on a cancelled order: right once the order stopped being payable,
        // at min(deadline, cancel); before that, the buyer paid in time and lost the unit.
        let mut early = paid_sale();
        row(&mut early, 2).cancelled_at_ms = Some(PAY_BY + 3);
        payment(&mut early, "pay-2-late").settled_at_ms = Some(PAY_BY);
        assert_eq!(late_successes_refunded(&early).status, Status::Pass);
        payment(&mut early, "pay-2-late").settled_at_ms = Some(PAY_BY - 1);
        let r = late_successes_refunded(&early);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("paid in time, the buyer lost the unit"),
            "{r:?}"
        );
        // A buyer's cancel before the deadline closes the order at the cancel.
        let mut cancelled = paid_sale();
        row(&mut cancelled, 2).cancelled_at_ms = Some(PAY_BY - 100);
        payment(&mut cancelled, "pay-2-late").settled_at_ms = Some(PAY_BY - 100);
        assert_eq!(late_successes_refunded(&cancelled).status, Status::Pass);
        payment(&mut cancelled, "pay-2-late").settled_at_ms = Some(PAY_BY - 101);
        assert_eq!(late_successes_refunded(&cancelled).status, Status::Fail);

        // A payment for a ticket that has no order; one the provider never answered.
        let mut stray = paid_sale();
        stray.mysql.payments.push(PaymentRow {
            payment_id: "pay-9".into(),
            ticket: ticket(9),
            user_id: 9,
            status: PaymentStatus::RefundDue,
            settled_at_ms: None,
        });
        add_payment(&mut stray, "pay-1b", 1, PaymentStatus::Processing, 0);
        let r = late_successes_refunded(&stray);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("has no order row"), "{r:?}");
        assert!(
            r.info[0].starts_with("1 payments never heard back"),
            "{r:?}"
        );
    }
}
