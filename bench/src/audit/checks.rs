//! The audit's checks: was every buyer's promise kept, and do the stores agree with what the
//! buyers were told and with each other? Pure functions over an [`AuditInput`] that
//! [`super::gather`] fills from the history file, Redis and MySQL.
//!
//! A promise is a ticket answered with `202`, `200` or `201`. It is kept when the buyer got
//! the unit: the ticket ends `confirmed`, then maybe `paid`, or `cancelled` (not paid in time,
//! or cancelled by the buyer: the unit went back on sale). It is also kept when the ticket
//! ends `failed` for a reason the run allows (`--allow-failure`, e.g. `chaos` when the workers
//! fail orders on purpose). Every other end breaks it.
//!
//! Checks 1-7 judge the promises and the units; `payments` (8-12) judges the payment window
//! against the orders, the payments and Redis; `waiting_room` (13-15), only for a run through
//! a waiting room, judges the admissions.
//!
//! Where each part lives: `input.rs` holds what the checks look at, `result.rs` what they
//! answer; `promises.rs` (checks 1, 2), `stores_agree.rs` (3), `identity.rs` (4),
//! `history_complete.rs` (5), `buyer_told_truth.rs` (6), `sale_ended.rs` (7) and
//! `buckets.rs` (16) hold one check each, with its tests.

mod buckets;
mod buyer_told_truth;
#[cfg(test)]
mod fixtures;
mod history_complete;
mod identity;
mod input;
mod payments;
mod promises;
mod result;
mod sale_ended;
mod stores_agree;
#[cfg(test)]
mod tests;
mod waiting_room;

pub use buyer_told_truth::{buyer_told_truth, settle_ms, SettleMs};
pub use history_complete::history_complete;
pub use identity::identity;
pub use input::{
    AllowWindow, AuditInput, HistoryFacts, HistoryTicket, MysqlFacts, OrderRow, PaymentRow,
    RedisFacts, TicketState,
};
pub use payments::{
    all_units_paid, late_successes_refunded, order_decided_once, paid_within_stock,
    payers_told_truth, redis_follows_payments,
};
pub use promises::{promise_kept, promises, promises_within_stock, Promises};
pub use result::{CheckResult, Status};
pub use sale_ended::sale_ended;
pub use stores_agree::stores_agree;
pub use waiting_room::{CapSample, RoomFacts, RoomHistory, RoomRedis};

use result::Problems;

pub fn run_all(input: &AuditInput) -> Vec<CheckResult> {
    // Checks 1, 2 and 4 judge the promises made: with none they have nothing to judge (a run
    // that had to sell out and made none fails check 7; rows without a promise fail check 5).
    let none_made = input.history.tickets.is_empty();
    let promises = |id, name, check: fn(&AuditInput) -> CheckResult| {
        if none_made {
            CheckResult::skip(id, name, "no promise was made: nothing to judge")
        } else {
            check(input)
        }
    };
    vec![
        promises(1, "promise kept", promise_kept),
        promises(2, "no more promises than units", promises_within_stock),
        stores_agree(input),
        promises(4, "one ticket, one user", identity),
        history_complete(input),
        buyer_told_truth(input),
        sale_ended(input),
        order_decided_once(input),
        paid_within_stock(input),
        redis_follows_payments(input),
        late_successes_refunded(input),
        all_units_paid(input),
        payers_told_truth(input),
    ]
    .into_iter()
    .chain(waiting_room::run(input))
    .chain(buckets::run(input))
    .collect()
}
