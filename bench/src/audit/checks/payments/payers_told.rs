//! Check 17: what each paying buyer was told matches the stores.

use super::order_name;
use crate::audit::checks::{AuditInput, CheckResult, PaymentRow, Problems, TicketState};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::OrderStatus;
use std::collections::{BTreeMap, BTreeSet};

/// Check 17: what each paying buyer was told matches the stores. Every payment answered `202`
/// is in MySQL's payments, for its ticket; a buyer who last saw `paid` has a paid order, one
/// who saw `cancelled` a cancelled order with that reason, one who saw `failed` a failed
/// ticket; and every paid order was paid by a payment some buyer's `202` recorded. SKIP
/// without `pay` lines (the load paid nothing).
pub fn payers_told_truth(input: &AuditInput) -> CheckResult {
    const ID: u8 = 17;
    const NAME: &str = "payers told the truth";
    if input.pays.is_empty() && input.pay_ends.is_empty() {
        return CheckResult::skip(
            ID,
            NAME,
            "no pay lines in the history: the load paid nothing",
        );
    }
    let orders = input.orders_by_ticket();
    let recorded: BTreeMap<&str, &PaymentRow> = input
        .mysql
        .payments
        .iter()
        .map(|p| (p.payment_id.as_str(), p))
        .collect();
    let mut problems = Problems::default();
    let mut accepted = 0;
    // Payments some buyer's 202 recorded, by ticket.
    let mut told: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for l in &input.pays {
        if l.status != Some(202) {
            continue;
        }
        accepted += 1;
        let Some(id) = l.payment_id.as_deref() else {
            problems.add(|| format!("a 202 for ticket {} named no payment", l.ticket));
            continue;
        };
        match recorded.get(id) {
            Some(p) if p.ticket == l.ticket => {
                told.entry(p.ticket.as_str()).or_default().insert(id);
            }
            Some(p) => problems.add(|| {
                format!(
                    "payment {id}, answered 202 for ticket {}, is ticket {}'s in MySQL",
                    l.ticket, p.ticket
                )
            }),
            None => problems.add(|| {
                format!(
                    "payment {id}, answered 202 for ticket {}, is not in MySQL",
                    l.ticket
                )
            }),
        }
    }
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    for e in &input.pay_ends {
        *seen.entry(e.status.as_str()).or_default() += 1;
        let order = orders.get(e.ticket.as_str());
        let stores = order.map_or("no order row".to_owned(), |o| {
            format!(
                "{} ({})",
                o.status.as_str(),
                o.cancel_reason.map_or("-", |r| r.as_str())
            )
        });
        let right = match e.status.as_str() {
            "paid" => order.is_some_and(|o| o.status == OrderStatus::Paid),
            "cancelled" => order.is_some_and(|o| {
                o.status == OrderStatus::Cancelled
                    && e.reason.as_deref() == o.cancel_reason.map(|r| r.as_str())
            }),
            "failed" => matches!(input.state(&e.ticket), TicketState::Failed { .. }),
            // Confirmed when the buyer stopped looking (a success may still have come, or the
            // deadline's cancel), never confirmed, or never answered: nothing was promised.
            _ => true,
        };
        if !right {
            problems.add(|| {
                format!(
                    "the buyer of ticket {} last saw {}{}, and MySQL has {stores}",
                    e.ticket,
                    e.status,
                    e.reason
                        .as_deref()
                        .map_or(String::new(), |r| format!(" ({r})"))
                )
            });
        }
    }
    let mut phantom = 0;
    for o in input
        .mysql
        .orders
        .iter()
        .filter(|o| o.status == OrderStatus::Paid)
    {
        let paid_by_told = input.mysql.payments.iter().any(|p| {
            p.ticket == o.ticket
                && p.status == PaymentStatus::Succeeded
                && told
                    .get(o.ticket.as_str())
                    .is_some_and(|ids| ids.contains(p.payment_id.as_str()))
        });
        if !paid_by_told {
            phantom += 1;
            problems.add(|| {
                format!(
                    "{} is paid, by no payment a buyer was answered 202 for",
                    order_name(o)
                )
            });
        }
    }
    let ends = seen
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut r =
        CheckResult::new(
            ID,
            NAME,
            problems.count == 0,
            format!(
            "pay requests={} answered 202={accepted}; buyers last saw: {}; paid orders without \
             a payment a buyer was told of={phantom}",
            input.pays.len(),
            if ends.is_empty() { "nothing".to_owned() } else { ends }
        ),
        );
    r.problems = problems.samples;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::checks::fixtures::{healthy, paid_sale, ticket};
    use crate::audit::checks::Status;

    #[test]
    fn check17_payers_told_the_truth() {
        let r = payers_told_truth(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(
            r.found
                .starts_with("pay requests=3 answered 202=3; buyers last saw: cancelled 2, paid 3"),
            "{r:?}"
        );
        assert_eq!(payers_told_truth(&healthy()).status, Status::Skip);

        // A 202 whose payment MySQL does not have.
        let mut lost = paid_sale();
        lost.pays[0].payment_id = Some("pay-404".into());
        let r = payers_told_truth(&lost);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("pay-404, answered 202 for ticket"),
            "{r:?}"
        );
        // ... so order 1 was paid by no payment a buyer was told of.
        assert!(
            r.problems[1].contains("by no payment a buyer was answered 202 for"),
            "{r:?}"
        );

        // The buyer saw paid; MySQL cancelled the order.
        let mut lied = paid_sale();
        let end = lied
            .pay_ends
            .iter_mut()
            .find(|e| e.ticket == ticket(2))
            .unwrap();
        end.status = "paid".into();
        end.reason = None;
        let r = payers_told_truth(&lied);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("last saw paid, and MySQL has cancelled (payment_timeout)"),
            "{r:?}"
        );

        // Cancelled, but for another reason than the buyer was told.
        let mut why = paid_sale();
        why.pay_ends
            .iter_mut()
            .find(|e| e.ticket == ticket(3))
            .unwrap()
            .reason = Some("payment_timeout".into());
        assert_eq!(payers_told_truth(&why).status, Status::Fail);
    }
}
