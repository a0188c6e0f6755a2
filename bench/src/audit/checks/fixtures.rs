//! Sales to audit, built ticket by ticket, for the checks' tests.

use super::{run_all, AuditInput, HistoryTicket, OrderRow, PaymentRow, TicketState};
use crate::history::{SaleEndCheck, SettledLine};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::{CancelReason, OrderStatus};
use std::collections::BTreeSet;

pub(super) fn ticket(n: u64) -> String {
    format!("7-{n:032x}")
}

/// When the load received ticket `n`'s answer, µs; it is confirmed 40 ms + `n` µs later.
pub(super) fn answered_at_us(n: u64) -> u64 {
    1_700_000_000_000_000 + n * 1000
}

/// A sale of `initial` units with nothing issued yet: the summary says it sold out.
pub(super) fn sale(initial: i64) -> AuditInput {
    let mut input = AuditInput {
        product: 7,
        initial_stock: initial,
        until_sold_out: true,
        ..Default::default()
    };
    input.history.has_summary = true;
    input.history.until_sold_out = true;
    input.history.sold_out_reached = Some(true);
    input.history.sale_end_checked_by = Some(SaleEndCheck::AdminApi);
    input.mysql.initial_stock = initial;
    input.redis.initial = Some(initial);
    input
}

/// Ticket `n`, answered 202 to `user`, ended as `end`: `confirmed` (order row `1000 + n`)
/// or a failure reason. Its settled line tells the buyer just that.
pub(super) fn issue(input: &mut AuditInput, n: u64, user: u64, end: &str) {
    let t = ticket(n);
    input.history.requests += 1;
    let (state, order_id, reason) = if end == "confirmed" {
        input
            .mysql
            .orders
            .push(OrderRow::confirmed(1000 + n, t.clone(), user));
        let confirmed_at_ms = Some((answered_at_us(n) / 1000 + 40) as i64);
        let state = TicketState::Confirmed {
            user_id: user,
            order_id: Some(1000 + n),
            confirmed_at_ms,
        };
        (state, Some(1000 + n), None)
    } else {
        input.mysql.failed_tickets.insert(t.clone());
        let reason = Some(end.to_owned());
        let state = TicketState::Failed {
            user_id: user,
            reason: reason.clone(),
        };
        (state, None, reason)
    };
    let confirmed_at_ms = match &state {
        TicketState::Confirmed {
            confirmed_at_ms, ..
        } => *confirmed_at_ms,
        _ => None,
    };
    input.history.tickets.insert(
        t.clone(),
        HistoryTicket {
            quantity: 1,
            user,
            other_users: BTreeSet::new(),
            settled: Some(SettledLine {
                quantity: 1,
                ticket: t.clone(),
                user_id: user,
                status: if end == "confirmed" {
                    "confirmed"
                } else {
                    "failed"
                }
                .into(),
                order_id,
                reason,
                answered_at_us: Some(answered_at_us(n)),
                reserved_at_ms: Some((answered_at_us(n) / 1000) as i64),
                confirmed_at_ms,
            }),
        },
    );
    input.ticket_states.insert(t, state);
}

/// Sets both stores' counters to what the tickets say, as after a clean sale.
pub(super) fn stores_settled(input: &mut AuditInput) {
    let sold = input.mysql.sold();
    input.mysql.stock = input.initial_stock - sold;
    input.redis.stock = Some(input.mysql.stock);
    input.redis.pending = 0;
    input.redis.confirmed = sold;
    input.redis.paid = input.mysql.count(OrderStatus::Paid);
    input.redis.cancelled = input.mysql.count(OrderStatus::Cancelled);
    input.redis.failed = input.mysql.failed_tickets.len() as i64;
}

/// A sold-out run of 3 units: users 1-3 confirmed, users 4 and 5 failed with `chaos`,
/// which the run allows.
pub(super) fn healthy() -> AuditInput {
    let mut input = sale(3);
    input.allowed_failures.insert("chaos".into());
    for user in 1..=5 {
        issue(
            &mut input,
            user,
            user,
            if user <= 3 { "confirmed" } else { "chaos" },
        );
    }
    stores_settled(&mut input);
    input
}

pub(super) fn settled(input: &mut AuditInput, n: u64) -> &mut SettledLine {
    let t = input.history.tickets.get_mut(&ticket(n)).unwrap();
    t.settled.as_mut().unwrap()
}

pub(super) fn failing(input: &AuditInput) -> Vec<u8> {
    run_all(input)
        .into_iter()
        .filter(|r| !r.passed())
        .map(|r| r.id)
        .collect()
}

/// Every order's payment deadline in a sale with a payment window, ms.
pub(super) const PAY_BY: i64 = 1_700_000_900_000;

/// Gives every order a payment deadline.
pub(super) fn windowed(input: &mut AuditInput) {
    for o in &mut input.mysql.orders {
        o.pay_by_ms = Some(PAY_BY);
    }
}

pub(super) fn row(input: &mut AuditInput, n: u64) -> &mut OrderRow {
    let t = ticket(n);
    input
        .mysql
        .orders
        .iter_mut()
        .find(|o| o.ticket == t)
        .unwrap()
}

/// Ticket `n`'s order is paid by payment `pay-<n>`, a second before its deadline.
/// What the buyer of ticket `n` last saw: a `pay_end` line.
pub(super) fn pay_end(
    n: u64,
    user_id: u64,
    status: &str,
    reason: Option<&str>,
) -> crate::history::PayEndLine {
    crate::history::PayEndLine {
        ticket: ticket(n),
        user_id,
        status: status.to_owned(),
        reason: reason.map(str::to_owned),
        pay_by_ms: Some(PAY_BY),
        paid_at_ms: None,
        cancelled_at_ms: None,
        attempts: 1,
        accepted: 1,
        at_ms: PAY_BY + 1000,
    }
}

pub(super) fn pay(input: &mut AuditInput, n: u64) {
    let at = PAY_BY - 1000;
    let o = row(input, n);
    o.status = OrderStatus::Paid;
    o.paid_at_ms = Some(at);
    let (id, user_id) = (o.id, o.user_id);
    input.mysql.payments.push(PaymentRow {
        payment_id: format!("pay-{n}"),
        ticket: ticket(n),
        user_id,
        status: PaymentStatus::Succeeded,
        settled_at_ms: Some(at),
    });
    // The buyer paid once, was answered 202, and last saw it paid.
    input.pays.push(crate::history::PayLine {
        ticket: ticket(n),
        user_id,
        attempt: 1,
        idempotency_key: format!("key-{n}"),
        status: Some(202),
        payment_id: Some(format!("pay-{n}")),
        error: None,
        state: None,
        sent_at_ms: at - 200,
        at_ms: at - 199,
    });
    input.pay_ends.push(pay_end(n, user_id, "paid", None));
    let confirmed_at_ms = input.state(&ticket(n)).confirmed_at_ms();
    input.ticket_states.insert(
        ticket(n),
        TicketState::Paid {
            user_id,
            order_id: Some(id),
            confirmed_at_ms,
        },
    );
}

/// Ticket `n`'s order is cancelled: at its deadline for a timeout, a minute before it by
/// its buyer.
pub(super) fn cancel(input: &mut AuditInput, n: u64, reason: CancelReason) {
    let at = match reason {
        CancelReason::PaymentTimeout => PAY_BY,
        CancelReason::BuyerCancelled => PAY_BY - 60_000,
    };
    let o = row(input, n);
    o.status = OrderStatus::Cancelled;
    o.cancelled_at_ms = Some(at);
    o.cancel_reason = Some(reason);
    let (id, user_id) = (o.id, o.user_id);
    input
        .pay_ends
        .push(pay_end(n, user_id, "cancelled", Some(reason.as_str())));
    let confirmed_at_ms = input.state(&ticket(n)).confirmed_at_ms();
    input.ticket_states.insert(
        ticket(n),
        TicketState::Cancelled {
            user_id,
            order_id: Some(id),
            confirmed_at_ms,
            reason: Some(reason),
        },
    );
}

/// A sale of 3 units with a payment window, every unit paid in the end. Users 1-3 ordered
/// tickets 1-3. Ticket 1 was paid. Ticket 2 was not paid in time (its late success is
/// `refund_due`); its buyer bought again (ticket 4) and paid. The buyer of ticket 3
/// cancelled, bought again (ticket 5) and paid. Each buyer was told `confirmed`.
pub(super) fn paid_sale() -> AuditInput {
    let mut input = sale(3);
    for (n, user) in [(1, 1), (2, 2), (3, 3), (4, 2), (5, 3)] {
        issue(&mut input, n, user, "confirmed");
    }
    windowed(&mut input);
    pay(&mut input, 1);
    cancel(&mut input, 2, CancelReason::PaymentTimeout);
    input.mysql.payments.push(PaymentRow {
        payment_id: "pay-2-late".into(),
        ticket: ticket(2),
        user_id: 2,
        status: PaymentStatus::RefundDue,
        settled_at_ms: Some(PAY_BY + 5),
    });
    cancel(&mut input, 3, CancelReason::BuyerCancelled);
    pay(&mut input, 4);
    pay(&mut input, 5);
    // The load kept buying until after the cancels.
    input.history.last_answer_us = Some((PAY_BY as u64 + 60_000) * 1000);
    input.expect_all_paid = true;
    stores_settled(&mut input);
    input
}
