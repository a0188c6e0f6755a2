//! Check 10: Redis followed every decision MySQL made.

use super::{order_name, without_payments};
use crate::audit::checks::{AuditInput, CheckResult, Problems, TicketState};
use seckill_shared::{CancelReason, OrderStatus};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::checks::fixtures::{paid_sale, row, ticket};
    use crate::audit::checks::Status;

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
}
