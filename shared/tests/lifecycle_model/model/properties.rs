//! The promises the checker holds the model to, and their names.

use super::state::{Answer, Message, Seckill, State};
use seckill_shared::lifecycle::RecordStatus;
use stateright::Property;

/// Always: Redis's stock plus the records holding a unit never exceed the units on sale (while
/// its state is this run's: a lost or old one sells nothing); MySQL's stock plus the confirmed
/// and paid orders always equal them.
pub const UNIT_IN_ONE_PLACE: &str = "a unit is never in two places";
/// Always: a buyer has at most one confirmed or paid order in MySQL, and at most one record
/// holding a unit in Redis (while its state is this run's).
pub const ONE_LIVE_ORDER_PER_BUYER: &str = "at most one live order per buyer";
/// Always: at most one payment of an order is processing or succeeded.
pub const ONE_CHARGE_PER_ORDER: &str = "at most one charge per order";
/// Once quiet: every ticket answered 202 has an order row (confirmed, paid or cancelled), or
/// failed, in both stores, for a reason a buyer may be given (not `lost`, not `expired`).
pub const EVERY_202_KEPT: &str = "every 202 ends kept";
/// Once quiet: a ticket answered 503 holds no unit: no confirmed or paid order in MySQL, and
/// no record holding one in Redis (while its state is this run's).
pub const NO_UNIT_AFTER_A_503: &str = "a buyer told 503 holds no unit";
/// Always: no ticket's buyer is told both 202 (or a buy again's 200) and 503.
pub const ONE_ANSWER_PER_TICKET: &str = "a buyer is never told both 202 and 503";
/// Once quiet: each store's stock is the units less those held (so every unit given back
/// came back once), both stocks are equal, and `buyers` holds exactly the buyers with a
/// confirmed or paid order, with that order's ticket.
pub const UNITS_COME_BACK_ONCE: &str = "a cancelled or failed unit comes back exactly once";
/// Once quiet: each ticket's record has the status of its order row, or is failed with its
/// failed row's reason (a failure only Redis knew of may have no row); a ticket never has
/// both rows.
pub const STORES_AGREE: &str = "Redis and MySQL agree once quiet";
/// Whenever nothing but the sweeper has work left ([`Seckill::calm`]), the sweeper alone
/// settles every pending or processing ticket.
pub const NO_TICKET_STUCK: &str = "no ticket is stuck";
/// Sometimes (the checks are not vacuous): every unit sold, quiet.
pub const SELLS_OUT: &str = "a sale sells out";
/// Sometimes: a ticket cancelled, quiet.
pub const CANCEL_HAPPENS: &str = "a cancel happens";
/// Sometimes: a ticket paid, quiet.
pub const PAYMENT_SUCCEEDS: &str = "a payment succeeds";
/// Sometimes: a ticket answered 202 whose message Kafka lost has its order, quiet.
pub const LOST_MESSAGE_COMPLETED: &str = "a sweeper completes an order whose message was lost";

/// Sometimes: Redis lost its data or came back old, and the product is rebuilt, quiet.
pub const REDIS_HEALS: &str = "a Redis that was lost or came back old is rebuilt";

/// The invariants and the liveness goals the checker holds the model to.
pub(crate) fn properties() -> Vec<Property<Seckill>> {
    vec![
        Property::always(UNIT_IN_ONE_PLACE, |m: &Seckill, s: &State| {
            let units = m.bounds.units as usize;
            let held_in_redis = m.units_held(&s.records, |r| r.status.holds_unit());
            let held_in_mysql = m.units_held(&s.orders, |o| o.status.holds_unit());
            // Redis's side only while its state is this run's: an old or lost one sells
            // nothing until it is rebuilt.
            (!Seckill::trusted(s) || s.redis_stock as i32 + held_in_redis as i32 <= units as i32)
                && s.mysql_stock as usize + held_in_mysql == units
        }),
        Property::always(ONE_LIVE_ORDER_PER_BUYER, |m: &Seckill, s: &State| {
            (0..s.buyers.len() as u8).all(|u| {
                let own = || m.tickets().filter(move |&t| m.owner(t) == u);
                let orders = own()
                    .filter(|&t| s.orders[t as usize].is_some_and(|o| o.status.holds_unit()))
                    .count();
                let records = own()
                    .filter(|&t| s.records[t as usize].is_some_and(|r| r.status.holds_unit()))
                    .count();
                orders <= 1 && (records <= 1 || !Seckill::trusted(s))
            })
        }),
        Property::always(ONE_CHARGE_PER_ORDER, |m: &Seckill, s: &State| {
            m.tickets().all(|t| {
                s.payments
                    .iter()
                    .filter(|p| p.ticket == t && p.status.charges())
                    .count()
                    <= 1
            })
        }),
        Property::always(EVERY_202_KEPT, |m: &Seckill, s: &State| {
            !m.quiet(s)
                || m.tickets().all(|t| {
                    let i = t as usize;
                    let redis_ok = match s.records[i].map(|r| r.status) {
                        Some(RecordStatus::Failed(r)) => r.may_follow_a_202(),
                        _ => true,
                    };
                    let mysql_ok = match (s.orders[i], s.failed[i]) {
                        (Some(_), None) => true,
                        (None, Some(r)) => r.may_follow_a_202(),
                        _ => false,
                    };
                    !matches!(s.answers[i], Some(Answer::Accepted | Answer::Both))
                        || (redis_ok && mysql_ok)
                })
        }),
        Property::always(ONE_ANSWER_PER_TICKET, |m: &Seckill, s: &State| {
            m.tickets()
                .all(|t| s.answers[t as usize] != Some(Answer::Both))
        }),
        Property::always(NO_UNIT_AFTER_A_503, |m: &Seckill, s: &State| {
            !m.quiet(s)
                || m.tickets().all(|t| {
                    let i = t as usize;
                    s.answers[i] != Some(Answer::Unavailable)
                        || (!s.orders[i].is_some_and(|o| o.status.holds_unit())
                            && (!Seckill::trusted(s)
                                || !s.records[i].is_some_and(|r| r.status.holds_unit())))
                })
        }),
        Property::always(UNITS_COME_BACK_ONCE, |m: &Seckill, s: &State| {
            if !m.quiet(s) {
                return true;
            }
            let units = m.bounds.units as usize;
            let held_in_redis = m.units_held(&s.records, |r| r.status.holds_unit());
            let held_in_mysql = m.units_held(&s.orders, |o| o.status.holds_unit());
            let buyers_right = (0..s.buyers.len() as u8).all(|u| {
                let live = m.tickets().find(|&t| {
                    m.owner(t) == u && s.orders[t as usize].is_some_and(|o| o.status.holds_unit())
                });
                s.buyers[u as usize] == live
            });
            s.redis_stock as i32 + held_in_redis as i32 == units as i32
                && s.mysql_stock as usize + held_in_mysql == units
                && s.redis_stock as i32 == s.mysql_stock as i32
                && buyers_right
        }),
        Property::always(STORES_AGREE, |m: &Seckill, s: &State| {
            !m.quiet(s)
                || m.tickets().all(|t| {
                    let i = t as usize;
                    match (s.records[i].map(|r| r.status), s.orders[i], s.failed[i]) {
                        // Never bought: nothing anywhere. Or a failure whose record
                        // Redis lost after its expire or release, with its row written
                        // after the rebuild read: the status is read from MySQL then.
                        (None, order, _) => order.is_none(),
                        // A failure Redis alone knew of (kafka_unavailable, or an expire
                        // that stopped before its MySQL row) leaves no row; else the same
                        // reason.
                        (Some(RecordStatus::Failed(r)), None, failed) => {
                            failed.is_none_or(|f| f == r)
                        }
                        (Some(status), Some(order), None) => order.status.record() == status,
                        _ => false,
                    }
                })
        }),
        Property::always(NO_TICKET_STUCK, |m: &Seckill, s: &State| {
            !m.calm(s) || m.quiet(&m.sweep_to_rest(s))
        }),
        Property::sometimes(SELLS_OUT, |m: &Seckill, s: &State| {
            m.quiet(s) && s.mysql_stock == 0 && s.redis_stock == 0
        }),
        Property::sometimes(CANCEL_HAPPENS, |m: &Seckill, s: &State| {
            m.quiet(s)
                && s.records
                    .iter()
                    .flatten()
                    .any(|r| r.status == RecordStatus::Cancelled)
        }),
        Property::sometimes(PAYMENT_SUCCEEDS, |m: &Seckill, s: &State| {
            m.quiet(s)
                && s.records
                    .iter()
                    .flatten()
                    .any(|r| r.status == RecordStatus::Paid)
        }),
        Property::sometimes(REDIS_HEALS, |m: &Seckill, s: &State| {
            m.quiet(s) && s.run > 0 && s.mysql_stock == 0
        }),
        Property::sometimes(LOST_MESSAGE_COMPLETED, |m: &Seckill, s: &State| {
            m.quiet(s)
                && m.tickets().any(|t| {
                    s.kafka[t as usize] == Message::Lost
                        && s.answers[t as usize] == Some(Answer::Accepted)
                        && s.orders[t as usize].is_some()
                })
        }),
    ]
}
