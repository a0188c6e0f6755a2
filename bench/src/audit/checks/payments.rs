//! Checks 8-12 and 17: the payment window. An order is `confirmed`, then `paid` (a payment succeeded
//! within its window) or `cancelled` (not paid in time, or by its buyer; its unit went back on
//! sale). MySQL decides each with one conditional `UPDATE`, and Redis follows. Each check
//! compares the orders with the payments, or MySQL with Redis.
//!
//! Without a payment window (no order has a deadline, and there is no payment) checks 8-11
//! have nothing to judge and say SKIP, check 12 runs only with `--expect-all-paid`, and check
//! 17 only with the load's `pay` lines.
//!
//! One file per check, with its tests: `decided_once.rs` (8), `paid_units.rs` (9, 12),
//! `redis_follows.rs` (10), `refunds.rs` (11) and `payers_told.rs` (17).

mod decided_once;
mod paid_units;
mod payers_told;
mod redis_follows;
mod refunds;

pub use decided_once::order_decided_once;
pub use paid_units::{all_units_paid, paid_within_stock};
pub use payers_told::payers_told_truth;
pub use redis_follows::redis_follows_payments;
pub use refunds::late_successes_refunded;

use super::{AuditInput, CheckResult, OrderRow, PaymentRow};
use std::collections::BTreeMap;

/// No order has a payment deadline and there is no payment: the payment window's checks have
/// nothing to judge. Their SKIP, with this reason.
fn without_payments(input: &AuditInput, id: u8, name: &'static str) -> Option<CheckResult> {
    let none =
        input.mysql.orders.iter().all(|o| o.pay_by_ms.is_none()) && input.mysql.payments.is_empty();
    none.then(|| {
        CheckResult::skip(
            id,
            name,
            "no order has a payment deadline and there is no payment: nothing to judge",
        )
    })
}

/// The product's payments, by ticket.
fn payments_by_ticket(input: &AuditInput) -> BTreeMap<&str, Vec<&PaymentRow>> {
    let mut by: BTreeMap<&str, Vec<&PaymentRow>> = BTreeMap::new();
    for p in &input.mysql.payments {
        by.entry(p.ticket.as_str()).or_default().push(p);
    }
    by
}

/// `order 12 (ticket …)`.
fn order_name(o: &OrderRow) -> String {
    format!("order {} (ticket {})", o.id, o.ticket)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{
        failing, healthy, issue, paid_sale, pay, row, stores_settled, ticket, windowed,
    };
    use super::super::Status;
    use super::*;
    use seckill_shared::payments::PaymentStatus;

    pub(super) fn payment<'a>(input: &'a mut AuditInput, id: &str) -> &'a mut PaymentRow {
        input
            .mysql
            .payments
            .iter_mut()
            .find(|p| p.payment_id == id)
            .unwrap()
    }

    pub(super) fn add_payment(
        input: &mut AuditInput,
        id: &str,
        n: u64,
        status: PaymentStatus,
        at: i64,
    ) {
        let user_id = row(input, n).user_id;
        input.mysql.payments.push(PaymentRow {
            payment_id: id.into(),
            ticket: ticket(n),
            user_id,
            status,
            settled_at_ms: Some(at),
        });
    }

    #[test]
    fn without_a_payment_window_the_payment_checks_skip() {
        let input = healthy();
        for r in [
            order_decided_once(&input),
            paid_within_stock(&input),
            redis_follows_payments(&input),
            late_successes_refunded(&input),
        ] {
            assert_eq!(r.status, Status::Skip, "{r:?}");
            assert!(r.found.contains("nothing to judge"), "{r:?}");
        }
        // One order with a deadline is enough to judge.
        let mut windowed_sale = healthy();
        windowed(&mut windowed_sale);
        assert_eq!(order_decided_once(&windowed_sale).status, Status::Pass);
    }

    /// A sale with a payment window, end to end: the buyers of a unit cancelled on time could
    /// buy again, and only the payment checks see what went wrong with the money.
    #[test]
    fn a_paid_sale_fails_only_the_payment_checks_it_breaks() {
        let mut input = paid_sale();
        issue(&mut input, 6, 6, "confirmed");
        input.initial_stock = 4;
        input.mysql.initial_stock = 4;
        input.redis.initial = Some(4);
        windowed(&mut input);
        pay(&mut input, 6);
        stores_settled(&mut input);
        assert_eq!(failing(&input), Vec::<u8>::new());
        // The late success kept: the buyer of ticket 2 paid for a unit that was sold again.
        payment(&mut input, "pay-2-late").status = PaymentStatus::Succeeded;
        assert_eq!(failing(&input), vec![8, 11]);
    }
}
