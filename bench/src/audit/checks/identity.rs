//! Check 4: one ticket, one user; one live ticket per user.

use super::{AuditInput, CheckResult, Problems, TicketState};
use std::collections::BTreeMap;

/// Check 4: each ticket belongs to exactly one user, and each user holds at most one ticket
/// that did not fail or get cancelled (and at most one order row not cancelled). A cancel frees
/// its buyer, who may buy again: several tickets, and several order rows, are fine as long as
/// all but one are cancelled (or failed).
///
/// The load tool records the user each request named, not the `user_id` of the answer (the
/// request line and the settled line both carry the requested user). So "the answer's user is
/// the one the request named" is checked against the user the stores file the ticket under:
/// the order row's user, else the Redis record's or `failed_tickets`'s, which is what the
/// gateways answer with when the ticket is polled.
pub fn identity(input: &AuditInput) -> CheckResult {
    let rows = input.orders_by_ticket();
    let mut problems = Problems::default();
    let (mut shared, mut wrong_user) = (0, 0);
    let mut held: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (ticket, h) in &input.history.tickets {
        if !h.other_users.is_empty() {
            shared += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} was answered to user {} and to users {:?}",
                    h.user, h.other_users
                )
            });
        }
        let state = input.state(ticket);
        let stored_user = match rows.get(ticket.as_str()) {
            Some(row) => Some(("its order row is for", row.user_id)),
            None => state.user_id().map(|u| ("the stores file it under", u)),
        };
        if let Some((whose, user)) = stored_user.filter(|(_, u)| *u != h.user) {
            wrong_user += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} was answered to user {} but {whose} user {user}",
                    h.user
                )
            });
        } else if let Some(s) = h.settled.as_ref().filter(|s| s.user_id != h.user) {
            wrong_user += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} was answered to user {} but its settled line names user {}",
                    h.user, s.user_id
                )
            });
        }
        if !matches!(
            state,
            TicketState::Failed { .. } | TicketState::Cancelled { .. }
        ) {
            held.entry(h.user).or_default().push(ticket);
        }
    }
    let mut double = 0;
    for (user, tickets) in held.iter().filter(|(_, t)| t.len() > 1) {
        double += 1;
        problems.add(|| {
            format!(
                "user {user} holds {} tickets that did not fail nor get cancelled: {}",
                tickets.len(),
                tickets.join(", ")
            )
        });
    }
    // UNIQUE(product_id, live_user_id) and UNIQUE(ticket) forbid these; cheap to look anyway.
    let mut rows_per_user: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for o in input.mysql.orders.iter().filter(|o| o.sold()) {
        rows_per_user.entry(o.user_id).or_default().push(o.id);
    }
    for (user, ids) in rows_per_user.iter().filter(|(_, ids)| ids.len() > 1) {
        double += 1;
        problems.add(|| {
            format!(
                "user {user} has {} order rows not cancelled: {ids:?}",
                ids.len()
            )
        });
    }
    let mut rows_per_ticket: BTreeMap<&str, usize> = BTreeMap::new();
    for o in &input.mysql.orders {
        *rows_per_ticket.entry(&o.ticket).or_default() += 1;
    }
    for (ticket, n) in rows_per_ticket.iter().filter(|(_, n)| **n > 1) {
        double += 1;
        problems.add(|| format!("ticket {ticket} has {n} order rows"));
    }
    let mut r = CheckResult::new(
        4,
        "one ticket, one user",
        problems.count == 0,
        format!(
            "tickets answered to several users={shared} user differs={wrong_user} \
             users holding several={double}"
        ),
    );
    r.problems = problems.samples;
    r
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{
        cancel, healthy, issue, paid_sale, row, settled, ticket, windowed,
    };
    use super::super::HistoryTicket;
    use super::super::Status;
    use super::*;
    use seckill_shared::{CancelReason, OrderStatus};
    use std::collections::BTreeSet;

    #[test]
    fn check4_identity() {
        let r = identity(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // One ticket answered to two users.
        let mut shared = healthy();
        shared
            .history
            .tickets
            .get_mut(&ticket(1))
            .unwrap()
            .other_users
            .insert(9);
        let r = identity(&shared);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("several users=1"), "{r:?}");

        // The order row is another user's.
        let mut row = healthy();
        row.mysql.orders[0].user_id = 99;
        let r = identity(&row);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("its order row is for user 99"),
            "{r:?}"
        );

        // A failed ticket filed under another user.
        let mut stored = healthy();
        stored.ticket_states.insert(
            ticket(4),
            TicketState::Failed {
                user_id: 98,
                reason: Some("chaos".into()),
            },
        );
        let r = identity(&stored);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("the stores file it under user 98"),
            "{r:?}"
        );

        // The settled line names another user.
        let mut told = healthy();
        settled(&mut told, 2).user_id = 97;
        assert_eq!(identity(&told).status, Status::Fail);

        // User 1 holds two tickets that did not fail (the second one is pending).
        let mut two = healthy();
        two.history.tickets.insert(
            ticket(6),
            HistoryTicket {
                quantity: 1,
                user: 1,
                other_users: BTreeSet::new(),
                settled: None,
            },
        );
        two.ticket_states
            .insert(ticket(6), TicketState::Pending { user_id: 1 });
        let r = identity(&two);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("user 1 holds 2 tickets"), "{r:?}");
        // A second ticket that failed is fine.
        two.ticket_states.insert(
            ticket(6),
            TicketState::Failed {
                user_id: 1,
                reason: Some("duplicate_user".into()),
            },
        );
        assert_eq!(identity(&two).status, Status::Pass);
    }

    #[test]
    fn check4_a_cancelled_buyer_may_buy_again() {
        let r = identity(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // User 2's first order was never cancelled: two live tickets, two live rows.
        let mut twice = paid_sale();
        let o = row(&mut twice, 2);
        o.status = OrderStatus::Confirmed;
        o.cancelled_at_ms = None;
        o.cancel_reason = None;
        twice.ticket_states.insert(
            ticket(2),
            TicketState::Confirmed {
                user_id: 2,
                order_id: Some(1002),
                confirmed_at_ms: None,
            },
        );
        let r = identity(&twice);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("users holding several=2"), "{r:?}");
        assert!(
            r.problems[0].starts_with("user 2 holds 2 tickets that did not fail nor get"),
            "{r:?}"
        );
        assert!(
            r.problems[1].starts_with("user 2 has 2 order rows not cancelled"),
            "{r:?}"
        );

        // Two cancelled orders and one live one are fine.
        let mut thrice = paid_sale();
        issue(&mut thrice, 6, 2, "confirmed");
        windowed(&mut thrice);
        cancel(&mut thrice, 4, CancelReason::BuyerCancelled);
        assert_eq!(identity(&thrice).status, Status::Pass);
    }
}
