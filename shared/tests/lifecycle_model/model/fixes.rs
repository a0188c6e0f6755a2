//! What the model runs: the fixes switched on ([`Fixes`]) and the scenario's bounds ([`Bounds`]).

use seckill_shared::lifecycle::Actor;

/// The fixes, one flag each; `false` keeps today's behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixes {
    /// cancel.lua also cancels a pending or processing ticket (bug 1: a cancel committed
    /// between a worker's MySQL commit and its confirm.lua).
    pub cancel_takes_in_flight: bool,
    /// The settle transaction follows an existing order row: cancelled -> Cancelled,
    /// paid -> Paid (today: always Confirmed). Without Redis losing its data (not modelled)
    /// the checker sees no difference: with the cancel.lua and paid.lua fixes, a stale
    /// Confirmed only runs confirm.lua, which leaves a cancelled or paid record alone.
    pub settle_follows_order: bool,
    /// The sweeper settles a processing ticket instead of failing it as `lost` (bug 2: two
    /// sweepers, or a worker and a sweeper, on one ticket).
    pub sweeper_settles_processing: bool,
    /// failed_tickets(expired) is written only when expire pending changed the record.
    pub expired_row_only_if_expired: bool,
    /// A pay request's check and insert are one transaction locking the order row (today two
    /// requests can both pass the check: two charges).
    pub pay_locks_order: bool,
    /// paid.lua also pays a processing ticket, as cancel.lua cancels one. A payment can
    /// succeed while a worker is between its MySQL commit and its confirm.lua (the pay
    /// request reads MySQL): today's paid.lua then leaves the record processing and the
    /// worker's confirm.lua makes it confirmed, for good.
    pub paid_takes_processing: bool,
    /// Found by this checker with Redis faults in: `compensate.lua 'pending_only'` (the
    /// sweeper's expire) and `release.lua` act only on this run's state, as `reserve.lua`
    /// does. Today a sweeper that read its product's state as current, then met a Redis
    /// restored from an older snapshot, expires a ticket whose order MySQL has confirmed.
    pub expire_checks_run: bool,
    /// Found by this checker: the expire's `failed_tickets(expired)` insert takes the
    /// product's row lock and is skipped when the ticket has an order row. Today a Redis loss
    /// between the expire's compensate.lua and its insert lets a redelivered message's claim
    /// adopt and confirm the ticket, which then has both rows.
    pub expired_row_needs_no_order: bool,
    /// Found by this checker: `paid.lua` writes a `paid` record when Redis has none. The
    /// payment callback does not take the product's row lock, so it can commit between a
    /// rebuild's read and its `restore.lua`: the restore then writes the `confirmed` it read,
    /// and Redis stays `confirmed` for a paid order. (The restore never overwrites `paid`.)
    pub paid_writes_lost_record: bool,
    /// Found by this checker: `compensate.lua 'heal'` gives the unit back to a stock below
    /// zero. A rebuild sets the stock to MySQL's less the orders in flight, which is below
    /// zero when more are in flight than MySQL has units (an order adopted after the loss);
    /// each of them that fails `out_of_stock` then frees a place. Today the stock stays
    /// below zero for good, and Redis sells one unit fewer than MySQL has.
    pub heal_lifts_negative: bool,
    /// Found by a close read, then by this checker: a buy again records the location on the
    /// held ticket's record while it is pending (`locate_held.lua`), and the sweeper's
    /// compensate.lua 'pending_only' spares a ticket located so. Today a sweeper that read the
    /// ticket without a location just before the buy again still expires it after its 200.
    pub expire_spares_held: bool,
    /// Found in chaos scenario 19: a publish reported failed whose message reached Kafka all
    /// the same, and a worker claimed it before the gateway's release.lua. The release then
    /// changes nothing, and the gateway reads the record: processing, confirmed or paid is
    /// answered 202, not 503 (today: 503 for a unit the buyer got).
    pub release_answers_held: bool,
    /// Found by this checker: a release's failure is written to MySQL
    /// (`failed_tickets(kafka_unavailable)`, under the product's row lock, unless the ticket
    /// has an order row) before the 503. Today only Redis knows of it: a message that
    /// reached Kafka all the same, delivered again after Redis lost its data or came back
    /// old, is adopted by a worker's claim and confirmed, and the buyer told 503 holds the
    /// unit (and a buyer told 202 fails `out_of_stock` in their place).
    pub release_recorded_in_mysql: bool,
    /// Found by this checker with the fix above: an expire whose `failed_tickets(expired)`
    /// insert finds a row of another reason makes the failed record take MySQL's reason
    /// (`fail_reason.lua`). A release's row written after Redis came back old, with the ticket
    /// pending again in it, is otherwise contradicted by the sweeper's `expired`.
    pub expire_follows_failed_row: bool,
    /// Found by this checker: a release that finds the record located on itself (a buy again
    /// published the order and answered 200 while this publish was failing) answers 202, and
    /// writes no failure row. Today that buyer is told 503 after the buy again's 200 (and with
    /// the row, the promised order would fail).
    pub release_answers_located: bool,
    /// Found by a close read with this checker's property: a buy again whose publish fails
    /// releases the ticket and lets MySQL decide, as a buy does. Today it answers 503 and
    /// leaves the ticket pending: a message that landed all the same is confirmed for a
    /// buyer told 503.
    pub buy_again_failure_released: bool,
}

impl Fixes {
    pub const TODAY: Fixes = Fixes {
        cancel_takes_in_flight: false,
        settle_follows_order: false,
        sweeper_settles_processing: false,
        expired_row_only_if_expired: false,
        pay_locks_order: false,
        paid_takes_processing: false,
        expire_checks_run: false,
        expired_row_needs_no_order: false,
        paid_writes_lost_record: false,
        heal_lifts_negative: false,
        expire_spares_held: false,
        release_answers_held: false,
        release_recorded_in_mysql: false,
        expire_follows_failed_row: false,
        release_answers_located: false,
        buy_again_failure_released: false,
    };
    pub const ALL: Fixes = Fixes {
        cancel_takes_in_flight: true,
        settle_follows_order: true,
        sweeper_settles_processing: true,
        expired_row_only_if_expired: true,
        pay_locks_order: true,
        paid_takes_processing: true,
        expire_checks_run: true,
        expired_row_needs_no_order: true,
        paid_writes_lost_record: true,
        heal_lifts_negative: true,
        expire_spares_held: true,
        release_answers_held: true,
        release_recorded_in_mysql: true,
        expire_follows_failed_row: true,
        release_answers_located: true,
        buy_again_failure_released: true,
    };
}

/// How much of the system the checker explores.
#[derive(Clone, Debug)]
pub struct Bounds {
    /// Units of the one product on sale.
    pub units: u8,
    /// One entry per ticket: the buyer who buys it. A buyer with two entries may buy again
    /// once its first ticket no longer holds a unit (`reserve.lua` refuses while it does).
    pub owners: Vec<u8>,
    /// One entry per ticket: the units its order asks for (empty, or a ticket without an
    /// entry: one unit). An order takes all of them at once, or none.
    pub quantities: Vec<u8>,
    pub workers: u8,
    /// At least one: the "no ticket is stuck" property lets sweeper 1 run alone.
    pub sweepers: u8,
    /// The kinds of actor that may crash, each at most once in a run.
    pub may_crash: Vec<Actor>,
    /// How many times Kafka may deliver a message once more after it was delivered.
    pub redeliveries: u8,
    /// How many queued messages Kafka may lose.
    pub lost_messages: u8,
    /// How many publishes may fail (the message reaching Kafka or not).
    pub kafka_failures: u8,
    /// Whether the expiry runs (it cancels any confirmed order, any number of times).
    pub expiry: bool,
    /// How many cancel requests buyers send (each cancels one confirmed order of its buyer).
    pub buyer_cancels: u8,
    /// How many pay requests buyers send.
    pub pay_requests: u8,
    /// How many times Redis restarts with no data.
    pub redis_losses: u8,
    /// How many times Redis restarts from its snapshot (the model takes one snapshot, at any
    /// moment before).
    pub redis_rollbacks: u8,
    /// How many buys again (a buyer holding a pending ticket its dead gateway never located).
    pub buys_again: u8,
}
