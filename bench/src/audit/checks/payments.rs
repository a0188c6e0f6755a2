//! Checks 8-12 and 17: the payment window. An order is `confirmed`, then `paid` (a payment succeeded
//! within its window) or `cancelled` (not paid in time, or by its buyer; its unit went back on
//! sale). MySQL decides each with one conditional `UPDATE`, and Redis follows. Each check
//! compares the orders with the payments, or MySQL with Redis.
//!
//! Without a payment window (no order has a deadline, and there is no payment) checks 8-11
//! have nothing to judge and say SKIP, check 12 runs only with `--expect-all-paid`, and check
//! 17 only with the load's `pay` lines.

use super::{AuditInput, CheckResult, OrderRow, PaymentRow, Problems, Status, TicketState};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::{CancelReason, OrderStatus};
use std::collections::{BTreeMap, BTreeSet};

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

/// Check 10: Redis followed every decision MySQL made. Ticket by ticket, a Redis record that
/// still exists says what the order row says (`confirmed`, `paid`, `cancelled`, and the same
/// cancel reason when it gives one); no cancelled order still waits for its unit to come back
/// in Redis (`restore_due = 1`); and while Redis has the product, its counters are MySQL's:
/// `confirmed` = orders confirmed or paid, `paid` and `cancelled` likewise. With checks 3 and 9
/// (stock + pending = MySQL stock = initial - sold), every cancelled unit came back exactly
/// once.
pub fn redis_follows_payments(input: &AuditInput) -> CheckResult {
    if let Some(skip) = without_payments(input, 10, "redis follows payments") {
        return skip;
    }
    let (rd, my) = (&input.redis, &input.mysql);
    let mut problems = Problems::default();
    let (mut records_differ, mut restore_due) = (0, 0);
    for o in &my.orders {
        if o.restore_due {
            restore_due += 1;
            problems.add(|| {
                format!(
                    "{} was cancelled at {:?} but its unit is not back in Redis (restore_due = 1)",
                    order_name(o),
                    o.cancelled_at_ms
                )
            });
        }
        let state = input.state(&o.ticket);
        let Some(status) = state.order_status() else {
            // Not an order in Redis at all: check 3's.
            continue;
        };
        if status != o.status {
            records_differ += 1;
            problems.add(|| {
                format!(
                    "ticket {}: Redis says {}, MySQL's order row {} is {}",
                    o.ticket,
                    status.as_str(),
                    o.id,
                    o.status.as_str()
                )
            });
        } else if let TicketState::Cancelled {
            reason: Some(r), ..
        } = state
        {
            if o.cancel_reason.is_some_and(|m| m != *r) {
                records_differ += 1;
                problems.add(|| {
                    format!(
                        "ticket {}: Redis says cancelled for {}, MySQL's order row {} for {}",
                        o.ticket,
                        r.as_str(),
                        o.id,
                        o.cancel_reason.map_or("none", CancelReason::as_str)
                    )
                });
            }
        }
    }
    let (sold, paid) = (my.sold(), my.count(OrderStatus::Paid));
    let cancelled = my.count(OrderStatus::Cancelled);
    let mut info = vec![];
    if rd.stock.is_some() {
        for (counter, redis, mysql, what) in [
            ("confirmed", rd.confirmed, sold, "confirmed or paid"),
            ("paid", rd.paid, paid, "paid"),
            ("cancelled", rd.cancelled, cancelled, "cancelled"),
        ] {
            if redis != mysql {
                problems.add(|| {
                    format!(
                        "redis {counter} counter {redis} != {mysql} MySQL order rows {what} \
                         ({:+})",
                        redis - mysql
                    )
                });
            }
        }
    } else {
        info.push("Redis does not have the product: its counters are not compared".into());
    }
    let mut r = CheckResult::new(
        10,
        "redis follows payments",
        problems.count == 0,
        format!(
            "redis confirmed={} paid={} cancelled={}; mysql sold={sold} paid={paid} \
             cancelled={cancelled}; records differ={records_differ} restore due={restore_due}",
            rd.confirmed, rd.paid, rd.cancelled
        ),
    );
    r.problems = problems.samples;
    r.info = info;
    r
}

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
    use super::super::tests::{
        cancel, failing, healthy, issue, paid_sale, pay, row, stores_settled, ticket, windowed,
        PAY_BY,
    };
    use super::*;

    fn payment<'a>(input: &'a mut AuditInput, id: &str) -> &'a mut PaymentRow {
        input
            .mysql
            .payments
            .iter_mut()
            .find(|p| p.payment_id == id)
            .unwrap()
    }

    fn add_payment(input: &mut AuditInput, id: &str, n: u64, status: PaymentStatus, at: i64) {
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
    fn check10_redis_follows_payments() {
        let r = redis_follows_payments(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // A cancel whose unit never came back in Redis.
        let mut due = paid_sale();
        row(&mut due, 3).restore_due = true;
        let r = redis_follows_payments(&due);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("restore due=1"), "{r:?}");
        assert!(r.problems[0].contains("(restore_due = 1)"), "{r:?}");

        // Redis did not follow a payment: its record and its counter lag.
        let mut lag = paid_sale();
        lag.ticket_states.insert(
            ticket(4),
            TicketState::Confirmed {
                user_id: 2,
                order_id: Some(1004),
                confirmed_at_ms: None,
            },
        );
        lag.redis.paid = 2;
        let r = redis_follows_payments(&lag);
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        assert!(
            r.problems[0].ends_with("Redis says confirmed, MySQL's order row 1004 is paid"),
            "{r:?}"
        );
        assert!(
            r.problems[1].starts_with("redis paid counter 2 != 3 MySQL order rows paid (-1)"),
            "{r:?}"
        );

        // Redis cancelled an order MySQL did not (and gave its unit back).
        let mut cancelled = paid_sale();
        cancelled.ticket_states.insert(
            ticket(1),
            TicketState::Cancelled {
                user_id: 1,
                order_id: Some(1001),
                confirmed_at_ms: None,
                reason: Some(CancelReason::PaymentTimeout),
            },
        );
        cancelled.redis.confirmed = 2;
        cancelled.redis.cancelled = 3;
        let r = redis_follows_payments(&cancelled);
        assert_eq!(r.problems.len(), 3, "{r:?}");
        assert!(r.problems[0].contains("Redis says cancelled"), "{r:?}");

        // Another cancel reason in Redis than in MySQL.
        let mut reason = paid_sale();
        reason.ticket_states.insert(
            ticket(2),
            TicketState::Cancelled {
                user_id: 2,
                order_id: Some(1002),
                confirmed_at_ms: None,
                reason: Some(CancelReason::BuyerCancelled),
            },
        );
        let r = redis_follows_payments(&reason);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("cancelled for buyer_cancelled"),
            "{r:?}"
        );

        // Redis lost the product: the counters are not compared, the records still are.
        let mut lost = lag.clone();
        lost.redis.stock = None;
        let r = redis_follows_payments(&lost);
        assert_eq!(r.problems.len(), 1, "{r:?}");
        assert!(r.info[0].contains("not compared"), "{r:?}");
    }

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
