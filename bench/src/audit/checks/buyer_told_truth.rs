//! Check 6: each buyer was told the final state, and the time from the answer to the
//! confirmation ([`settle_ms`]).

use super::{AuditInput, CheckResult, Problems, TicketState};
use seckill_shared::{CancelReason, OrderStatus};
use serde::Serialize;

/// Time from the answer that issued a ticket to its confirmation, over the tickets that became
/// orders (confirmed, then maybe paid or cancelled) and have both times, as the JSON report's
/// `settle_ms`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettleMs {
    pub count: u64,
    pub p99: f64,
    pub max: f64,
}

/// The ticket's answer (the settled line's `answered_at_us`, else its `reserved_at_ms`) to its
/// confirmation (the settled line's `confirmed_at_ms`, else Redis's), for every ticket that
/// became an order. `None` when no ticket has both times. Clocks differ a little between the
/// load tool, the gateways and the workers: a negative time counts as 0.
pub fn settle_ms(input: &AuditInput) -> Option<SettleMs> {
    let mut times: Vec<f64> = input
        .history
        .tickets
        .iter()
        .filter_map(|(ticket, h)| {
            let state = input.state(ticket);
            state.order()?;
            let s = h.settled.as_ref();
            let start_us = s.and_then(|s| {
                s.answered_at_us
                    .map(|us| us as i64)
                    .or(s.reserved_at_ms.map(|ms| ms.saturating_mul(1000)))
            })?;
            let end_ms = s
                .and_then(|s| s.confirmed_at_ms)
                .or(state.confirmed_at_ms())?;
            let us = end_ms.saturating_mul(1000).saturating_sub(start_us).max(0);
            Some(us as f64 / 1000.0)
        })
        .collect();
    if times.is_empty() {
        return None;
    }
    times.sort_by(f64::total_cmp);
    // Nearest rank.
    let rank = (0.99 * times.len() as f64).ceil() as usize;
    Some(SettleMs {
        count: times.len() as u64,
        p99: times[rank.clamp(1, times.len()) - 1],
        max: times[times.len() - 1],
    })
}

/// Check 6: what each buyer was told when the polling ended is the final state: the same
/// status, the order row's id for a ticket that became an order, the same reason for a failed
/// or cancelled one. A buyer still told `pending` was never told the outcome. Reports the time
/// from the answer to the confirmation ([`settle_ms`]).
///
/// Payment comes after the polling: a buyer told `confirmed` was told the truth when the order
/// is now paid or cancelled. For a ticket that became an order, MySQL decides `paid` and
/// `cancelled` (the gateways answer its word), so the order row's status and cancel reason are
/// the final state; whether Redis followed is `redis_follows_payments`'s.
pub fn buyer_told_truth(input: &AuditInput) -> CheckResult {
    let rows = input.orders_by_ticket();
    let mut problems = Problems::default();
    let (mut settled, mut still_pending, mut status_differs) = (0, 0, 0);
    let (mut order_differs, mut reason_differs) = (0, 0);
    for (ticket, h) in &input.history.tickets {
        let Some(s) = &h.settled else { continue };
        settled += 1;
        let state = input.state(ticket);
        let row = rows.get(ticket.as_str());
        // The order the stores know: the row's status and id, else what Redis says.
        let order = state.order_status().map(|status| match row {
            Some(row) => (row.status, Some(row.id)),
            None => (status, state.order().flatten()),
        });
        let now = match order {
            Some((status, _)) => status.as_str().to_owned(),
            None => state.outcome(),
        };
        let told = s.status.as_str();
        let order_told = match (told, order) {
            ("pending", _) => {
                still_pending += 1;
                problems.add(|| {
                    format!(
                        "ticket {ticket}: the buyer was still told pending when the polling \
                         ended (now {now})"
                    )
                });
                continue;
            }
            ("failed", None) => {
                if let TicketState::Failed { reason, .. } = state {
                    if s.reason != *reason {
                        reason_differs += 1;
                        problems.add(|| {
                            format!(
                                "ticket {ticket}: the buyer was told failed ({:?}), the stores \
                                 say {:?}",
                                s.reason, reason
                            )
                        });
                    }
                    continue;
                }
                None
            }
            // Told before the payment decided, or told the decision.
            ("confirmed", Some((_, id))) => Some(id),
            ("paid", Some((OrderStatus::Paid, id))) => Some(id),
            ("cancelled", Some((OrderStatus::Cancelled, id))) => {
                let reason = row
                    .and_then(|r| r.cancel_reason)
                    .or(match state {
                        TicketState::Cancelled { reason, .. } => *reason,
                        _ => None,
                    })
                    .map(CancelReason::as_str);
                if s.reason.as_deref() != reason {
                    reason_differs += 1;
                    problems.add(|| {
                        format!(
                            "ticket {ticket}: the buyer was told cancelled ({:?}), the stores \
                             say {reason:?}",
                            s.reason
                        )
                    });
                }
                Some(id)
            }
            _ => None,
        };
        match order_told {
            Some(expected) => {
                if s.order_id != expected {
                    order_differs += 1;
                    problems.add(|| {
                        format!(
                            "ticket {ticket}: the buyer was told order {:?}, the stores say {:?}",
                            s.order_id, expected
                        )
                    });
                }
            }
            None => {
                status_differs += 1;
                problems.add(|| {
                    format!("ticket {ticket}: the buyer was told {told}, the stores say {now}")
                });
            }
        }
    }
    let times = settle_ms(input);
    let timing = match &times {
        Some(t) => format!(
            "answer->confirmed p99={:.1} ms max={:.1} ms over {}",
            t.p99, t.max, t.count
        ),
        None => "answer->confirmed: no timings".into(),
    };
    if settled == 0 {
        // No buyer's polling ended: nothing to compare (check 5 fails a ticket without its
        // settled line).
        return CheckResult::skip(
            6,
            "buyer told the final state",
            "no ticket was polled to its end: nothing to judge",
        );
    }
    let mut r = CheckResult::new(
        6,
        "buyer told the final state",
        problems.count == 0,
        format!(
            "settled={settled} still pending={still_pending} status differs={status_differs} \
             order id differs={order_differs} reason differs={reason_differs}; {timing}"
        ),
    );
    r.problems = problems.samples;
    r
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{healthy, paid_sale, sale, settled, stores_settled, ticket};
    use super::super::Status;
    use super::*;

    #[test]
    fn check6_buyer_told_the_final_state() {
        let r = buyer_told_truth(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("p99=40.0 ms max=40.0 ms over 3"), "{r:?}");

        // Still pending when the polling ended, though it did settle later.
        let mut pending = healthy();
        settled(&mut pending, 1).status = "pending".into();
        let r = buyer_told_truth(&pending);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("still pending=1"), "{r:?}");

        // Told confirmed, but it failed.
        let mut status = healthy();
        settled(&mut status, 4).status = "confirmed".into();
        let r = buyer_told_truth(&status);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("status differs=1"), "{r:?}");

        // Told another order, or none.
        let mut order = healthy();
        settled(&mut order, 2).order_id = Some(5);
        settled(&mut order, 3).order_id = None;
        let r = buyer_told_truth(&order);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("order id differs=2"), "{r:?}");

        // Told another reason.
        let mut reason = healthy();
        settled(&mut reason, 5).reason = Some("out_of_stock".into());
        let r = buyer_told_truth(&reason);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("reason differs=1"), "{r:?}");
    }

    #[test]
    fn settle_times_from_the_answer_else_the_reservation() {
        let mut input = healthy();
        assert_eq!(
            settle_ms(&input),
            Some(SettleMs {
                count: 3,
                p99: 40.0,
                max: 40.0
            })
        );
        // Ticket 1: no answer time, reserved 100 ms before its confirmation.
        let s = settled(&mut input, 1);
        s.answered_at_us = None;
        s.reserved_at_ms = Some(s.confirmed_at_ms.unwrap() - 100);
        // Ticket 2: confirmed before the answer arrived (clocks): counts as 0.
        let s = settled(&mut input, 2);
        s.confirmed_at_ms = Some((s.answered_at_us.unwrap() / 1000) as i64 - 5);
        let t = settle_ms(&input).unwrap();
        assert_eq!((t.count, t.p99, t.max), (3, 100.0, 100.0));

        let mut none = sale(3);
        stores_settled(&mut none);
        assert_eq!(settle_ms(&none), None);
    }

    #[test]
    fn check6_told_confirmed_then_paid_or_cancelled() {
        // Told confirmed: the payment came after the polling.
        let r = buyer_told_truth(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("over 5"), "{r:?}");

        // Told the decision itself.
        let mut told = paid_sale();
        settled(&mut told, 1).status = "paid".into();
        let s = settled(&mut told, 2);
        s.status = "cancelled".into();
        s.reason = Some("payment_timeout".into());
        let r = buyer_told_truth(&told);
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // MySQL decides: paid in MySQL, Redis lagging at confirmed, the buyer told paid.
        let mut lag = told.clone();
        lag.ticket_states.insert(
            ticket(1),
            TicketState::Confirmed {
                user_id: 1,
                order_id: Some(1001),
                confirmed_at_ms: None,
            },
        );
        assert_eq!(buyer_told_truth(&lag).status, Status::Pass);

        // Told paid, but it was cancelled; told cancelled, but it was paid.
        let mut wrong = paid_sale();
        settled(&mut wrong, 2).status = "paid".into();
        settled(&mut wrong, 4).status = "cancelled".into();
        let r = buyer_told_truth(&wrong);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("status differs=2"), "{r:?}");
        assert!(
            r.problems[0].contains("was told paid, the stores say cancelled"),
            "{r:?}"
        );

        // Told another cancel reason, or another order.
        let mut reason = told.clone();
        settled(&mut reason, 2).reason = Some("buyer_cancelled".into());
        settled(&mut reason, 1).order_id = Some(1002);
        let r = buyer_told_truth(&reason);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.found.contains("order id differs=1 reason differs=1"),
            "{r:?}"
        );
    }
}
