//! Check 3: the stores agree with each other, in their counters and ticket by ticket.

use super::{AuditInput, CheckResult, Problems};
use seckill_shared::OrderStatus;

/// Check 3: the stores agree with each other. Redis's `confirmed` counter is the number of
/// units sold, the order rows `confirmed` or `paid` (a `cancelled` row holds no unit); Redis
/// stock + pending is MySQL's stock; nothing is left pending; MySQL stock + units sold is the
/// initial stock (no unit appeared or vanished, and every cancelled unit came back once); and
/// ticket by ticket, a ticket became an order (confirmed, paid or cancelled) exactly when it has
/// an order row, of the order id Redis gives. Whether Redis followed MySQL's payment decisions,
/// ticket by ticket, is `redis_follows_payments`'s.
pub fn stores_agree(input: &AuditInput) -> CheckResult {
    let rd = &input.redis;
    let my = &input.mysql;
    let sold = my.sold();
    let cancelled = my.count(OrderStatus::Cancelled);
    let initial = input.initial_stock;
    let mut problems = Problems::default();

    // A closed sale whose Redis keys are gone: the gateways answer it from MySQL, so MySQL
    // alone is compared with the buyers (below, and in the other checks).
    // Only a sale closed sold out: one closed with units left in MySQL is judged as lost.
    let keys_gone =
        my.closed && my.stock == 0 && rd.stock.is_none() && rd.pending == 0 && rd.confirmed == 0;
    if rd.confirmed != sold && !keys_gone {
        problems.add(|| {
            format!(
                "redis confirmed counter {} != {sold} units of MySQL order rows confirmed or \
                 paid ({:+})",
                rd.confirmed,
                rd.confirmed - sold
            )
        });
    }
    match rd.stock {
        None if keys_gone => {}
        None => problems.add(|| "the product has no stock key in Redis (not loaded?)".into()),
        Some(s) if s + rd.pending != my.stock => problems.add(|| {
            format!(
                "redis stock {s} + pending {} = {} != MySQL stock {} ({:+})",
                rd.pending,
                s + rd.pending,
                my.stock,
                s + rd.pending - my.stock
            )
        }),
        Some(_) => {}
    }
    if rd.pending != 0 {
        problems.add(|| format!("{} units still pending in Redis after settling", rd.pending));
    }
    // What MySQL's CHECK constraints also hold, asserted here from the rows themselves: a
    // database without them (an older schema, a MySQL that ignores CHECK) is judged alike.
    if sold > initial {
        problems.add(|| {
            format!(
                "{sold} units sold of {initial}: oversold by {}",
                sold - initial
            )
        });
    }
    if my.stock < 0 {
        problems.add(|| format!("MySQL stock {} is below zero", my.stock));
    }
    if let Some(s) = rd.stock.filter(|s| *s < 0) {
        problems.add(|| format!("Redis stock {s} is below zero after settling"));
    }
    if my.stock + sold != initial {
        problems.add(|| {
            format!(
                "MySQL stock {} + {sold} units of order rows confirmed or paid = {} != initial \
                 stock {initial} ({:+})",
                my.stock,
                my.stock + sold,
                my.stock + sold - initial
            )
        });
    }

    let rows = input.orders_by_ticket();
    let mut ticket_mismatches = 0;
    for (ticket, state) in &input.ticket_states {
        let row = rows.get(ticket.as_str());
        let problem = match (state.order(), row) {
            (Some(_), None) => Some(format!(
                "ticket {ticket} is {} but has no order row",
                state.label()
            )),
            (Some(Some(id)), Some(row)) if id != row.id => Some(format!(
                "ticket {ticket} is {} as order {id} but its order row is {}",
                state.label(),
                row.id
            )),
            // What the buyer was told it holds is what MySQL holds.
            (Some(_), Some(row))
                if input.history.tickets.get(ticket.as_str()).is_some_and(|h| {
                    h.settled
                        .as_ref()
                        .is_some_and(|s| s.quantity != row.quantity)
                }) =>
            {
                Some(format!(
                    "ticket {ticket} was answered as an order of another number of units than \
                     its order row's {}",
                    row.quantity
                ))
            }
            (Some(_), Some(_)) | (None, None) => None,
            (None, Some(row)) => Some(format!(
                "order row {} belongs to ticket {ticket}, which is {}",
                row.id,
                state.outcome()
            )),
        };
        if let Some(p) = problem {
            ticket_mismatches += 1;
            problems.add(|| p);
        }
    }
    for ticket in &my.failed_tickets {
        if let Some(row) = rows.get(ticket.as_str()) {
            ticket_mismatches += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} is in failed_tickets and has order row {}",
                    row.id
                )
            });
        }
    }

    let stock = rd.stock.map_or("none".to_owned(), |s| s.to_string());
    let mut r = CheckResult::new(
        3,
        "stores agree",
        problems.count == 0,
        format!(
            "redis stock={stock} pending={} confirmed={}; mysql stock={} sold={sold} \
             cancelled={cancelled}; initial={initial}; ticket mismatches={ticket_mismatches}",
            rd.pending, rd.confirmed, my.stock
        ),
    );
    r.problems = problems.samples;
    if keys_gone {
        r.info.push(
            "Redis holds none of the sale's keys: it was closed in MySQL, and closed sales \
             are not rebuilt (the gateways answer them from MySQL)"
                .into(),
        );
    }
    if let Some(s) = rd.stock {
        let sum = s + rd.pending + rd.confirmed;
        if sum != initial {
            r.info.push(format!(
                "redis stock + pending + confirmed = {sum}, not {initial} ({:+})",
                sum - initial
            ));
        }
    }
    if let Some(meta) = rd.initial.filter(|m| *m != initial) {
        r.info.push(format!("redis meta initial is {meta}"));
    }
    if my.initial_stock != initial {
        r.info.push(format!(
            "MySQL products.initial_stock is {}",
            my.initial_stock
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{healthy, paid_sale, row, ticket};
    use super::super::{Status, TicketState};
    use super::*;

    #[test]
    fn check3_stores_agree() {
        let r = stores_agree(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info.is_empty(), "{r:?}");

        // Redis counted fewer confirmations than MySQL has rows, and kept their units.
        let mut counter = healthy();
        counter.redis.confirmed = 2;
        counter.redis.stock = Some(1);
        let r = stores_agree(&counter);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("!= 3 units of MySQL order rows confirmed or paid (-1)"),
            "{r:?}"
        );
        assert!(r.problems[1].contains("!= MySQL stock 0 (+1)"), "{r:?}");

        // Left pending after settling.
        let mut pending = healthy();
        pending.redis.pending = 1;
        pending.redis.stock = Some(-1);
        let r = stores_agree(&pending);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems.iter().any(|p| p.contains("still pending")),
            "{r:?}"
        );

        // A unit vanished from both stores alike.
        let mut vanished = healthy();
        vanished.mysql.orders.pop();
        vanished.redis.confirmed = 2;
        vanished
            .ticket_states
            .insert(ticket(3), TicketState::Unknown);
        let r = stores_agree(&vanished);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("!= initial stock 3 (-1)"), "{r:?}");

        // Ticket by ticket: confirmed without a row, a row of a failed ticket, another order id.
        let mut no_row = healthy();
        no_row.mysql.orders.retain(|o| o.user_id != 2);
        no_row.mysql.stock = 1;
        no_row.redis.stock = Some(1);
        no_row.redis.confirmed = 2;
        let r = stores_agree(&no_row);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("confirmed but has no order row"),
            "{r:?}"
        );
        let mut failed_row = healthy();
        failed_row.ticket_states.insert(
            ticket(1),
            TicketState::Failed {
                user_id: 1,
                reason: Some("chaos".into()),
            },
        );
        failed_row.mysql.failed_tickets.insert(ticket(1));
        let r = stores_agree(&failed_row);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        let mut other_id = healthy();
        other_id.mysql.orders[0].id = 77;
        let r = stores_agree(&other_id);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("its order row is 77"), "{r:?}");

        let mut unloaded = healthy();
        unloaded.redis.stock = None;
        assert_eq!(stores_agree(&unloaded).status, Status::Fail);

        // Oversold, and below zero, said as such (not only as a sum that does not add up).
        let mut oversold = healthy();
        oversold.mysql.stock = -1;
        oversold.redis.stock = Some(-1);
        oversold.initial_stock = 2;
        let r = stores_agree(&oversold);
        for said in [
            "oversold by 1",
            "MySQL stock -1 is below zero",
            "Redis stock -1",
        ] {
            assert!(r.problems.iter().any(|p| p.contains(said)), "{said}: {r:?}");
        }

        // A closed sale whose Redis keys are gone (a restart after the sweeper closed it):
        // MySQL alone is compared with the buyers, and still must agree.
        let mut gone = healthy();
        gone.mysql.closed = true;
        gone.redis.stock = None;
        gone.redis.confirmed = 0;
        let r = stores_agree(&gone);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info.iter().any(|i| i.contains("closed")), "{r:?}");
        // Not while the sale is open (Redis lost it), nor when MySQL lost a unit, nor when the
        // sale closed with units left.
        unloaded.redis.confirmed = 0;
        assert_eq!(stores_agree(&unloaded).status, Status::Fail);
        let mut left = gone.clone();
        left.initial_stock += 1;
        left.mysql.stock = 1;
        let r = stores_agree(&left);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems.iter().any(|p| p.contains("no stock key")),
            "{r:?}"
        );
        gone.mysql.orders.pop();
        assert_eq!(stores_agree(&gone).status, Status::Fail);
    }

    #[test]
    fn check3_cancelled_orders_hold_no_unit() {
        let r = stores_agree(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("sold=3 cancelled=2"), "{r:?}");

        // Redis still counts a cancelled order as sold, and kept its unit.
        let mut counted = paid_sale();
        counted.redis.confirmed = 4;
        counted.redis.stock = Some(-1);
        let r = stores_agree(&counted);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0]
                .contains("counter 4 != 3 units of MySQL order rows confirmed or paid (+1)"),
            "{r:?}"
        );

        // MySQL did not put a cancelled unit back: a unit vanished.
        let mut kept = paid_sale();
        kept.mysql.stock = -1;
        kept.redis.stock = Some(-1);
        let r = stores_agree(&kept);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("= 2 != initial stock 3 (-1)")),
            "{r:?}"
        );

        // A unit given back twice: one more in both stores than the orders leave.
        let mut twice = paid_sale();
        twice.mysql.stock = 1;
        twice.redis.stock = Some(1);
        assert_eq!(stores_agree(&twice).status, Status::Fail);

        // Paid or cancelled in Redis, but no order row; or another order id.
        let mut no_row = paid_sale();
        no_row.mysql.orders.retain(|o| o.ticket != ticket(2));
        let r = stores_agree(&no_row);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("is cancelled but has no order row"),
            "{r:?}"
        );
        let mut other_id = paid_sale();
        row(&mut other_id, 4).id = 77;
        let r = stores_agree(&other_id);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("is paid as order 1004 but its order row is 77"),
            "{r:?}"
        );
    }
}
