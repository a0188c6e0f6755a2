//! A stateright model of a ticket's lifecycle (see `lifecycle.rs` for the table it runs).
//!
//! The state is the three stores (Redis, MySQL, Kafka), the answers given to buyers, and
//! every actor's place in the transition it is taking. An action is one atomic step of one
//! actor (a Lua script, a MySQL transaction, a publish), a crash, or a fault of Kafka. The
//! checker tries every order of these steps, so every interleaving and every crash point of
//! the bounds in [`Bounds`] is covered.
//!
//! Time is not modelled; timeouts are choices. The sweeper may find any in-flight ticket
//! "past the timeout" at any moment, except that it expires a pending ticket without a Kafka
//! location only once its gateway request is over (the sweeper's timeout is longer than a
//! request). The expiry may find any confirmed order past its deadline at any moment, and a
//! payment's callback counts as within the deadline exactly when the order is still
//! confirmed.
//!
//! Redis may lose its data (a restart with none), or come back old (a restart from an earlier
//! snapshot, as an AOF `everysec` or RDB restart or a failover to a lagging replica gives).
//! Either way its server run changes. The state then heals as the code heals it: a buy
//! (`reserve.lua`) or the sweeper (`epoch.lua`) finds the product lost or written by another
//! run, drops its stock key, and a reconcile rebuilds it from MySQL once the workers have read
//! what Kafka held (the fence). `claim.lua` adopts an order whose record Redis lost.
//!
//! [`Fixes`] switches each fix on or off: [`Fixes::TODAY`] is today's code, [`Fixes::ALL`] the
//! fixed one. Crashes of a pay request or of the provider's callback are not modelled (the
//! step harness tries the callback's).

use std::fmt::Write as _;

use stateright::{Model, Path, Property};

use seckill_shared::lifecycle::{
    self, Actor, FailReason, OrderStatus, Outcome, PaymentStatus, RecordStatus, TransitionId,
};

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

/// A product's `meta` hash, as far as the healing reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Meta {
    /// The Redis server run that wrote the state (preload.lua, rebuild.lua).
    pub run: u8,
    /// `loaded_at`: the clock when the state was last rebuilt (0: preloaded).
    pub loaded_at: u8,
}

/// What a Redis snapshot holds of the product.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RedisImage {
    pub stock: i8,
    pub loaded: bool,
    pub meta: Option<Meta>,
    pub buyers: Vec<Option<u8>>,
    pub records: Vec<Option<Record>>,
}

/// What a reconcile read from MySQL under the product's row lock.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MySqlRead {
    pub stock: u8,
    pub orders: Vec<Option<OrderStatus>>,
    pub failed: Vec<Option<FailReason>>,
}

/// A ticket's Redis record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    pub status: RecordStatus,
    /// The gateway recorded where its message is in Kafka (it is about to answer 202).
    pub located: bool,
}

/// A MySQL `orders` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Order {
    pub status: OrderStatus,
    /// A cancel committed in MySQL and has not yet seen its cancel.lua run.
    pub restore_due: bool,
}

/// A MySQL `payments` row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Payment {
    pub ticket: u8,
    pub status: PaymentStatus,
}

/// A ticket's order message in Kafka.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    Unpublished,
    /// Waiting for a worker.
    Queued,
    /// Handed to a worker (it goes back to `Queued` if that worker crashes).
    Delivered,
    /// The broker lost it.
    Lost,
}

/// What the gateway answered a buy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Answer {
    /// 202 with the ticket: the promise.
    Accepted,
    /// 503: Kafka was unavailable and the unit went back.
    Unavailable,
}

/// An actor's next atomic step within the transition it is taking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    // buy
    Publish,
    Locate,
    /// The buy again's `locate_held.lua` and its 200.
    LocateHeld,
    Release,
    // settle
    Claim,
    Write,
    /// The Redis script that follows the MySQL outcome (also settle stuck's second step).
    Follow(Outcome),
    // expire pending
    ExpirePending,
    InsertExpired,
    // settle stuck (today's sweeper)
    WriteStuck,
    // cancel, restore due
    CancelLua,
    ClearRestoreDue,
    // pay
    /// Today's insert, after a read that may be stale by now.
    InsertPayment,
    Send(u8),
    // payment callback
    PaidLua,
    // rebuild (a reconcile of a product Redis lost)
    /// Read MySQL's stock, orders and failed rows, taking the product's row lock.
    RebuildRead,
    /// `restore.lua` per settled ticket, then the pending entries whose record is gone pruned.
    Restore,
    /// `rebuild.lua`: stock = MySQL stock less what is in flight, meta; the lock is released.
    RebuildLua,
}

/// A transition under way: which, for which ticket, and its next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Job {
    pub transition: TransitionId,
    pub ticket: u8,
    pub op: Op,
}

impl Job {
    fn then(self, op: Op) -> Option<Job> {
        Some(Job { op, ..self })
    }

    /// This step's row in the lifecycle table.
    fn table_step(self) -> &'static lifecycle::Step {
        use TransitionId as T;
        let index = match (self.transition, self.op) {
            (T::Buy, Op::Publish) => 1,
            (T::Buy, Op::Locate) => 2,
            (T::Buy, Op::Release) => 3,
            (T::BuyAgain, Op::Publish) => 1,
            (T::BuyAgain, Op::LocateHeld) => 2,
            (T::Settle, Op::Claim) => 0,
            (T::Settle, Op::Write) => 1,
            (T::Settle, Op::Follow(_)) => 2,
            (T::ExpirePending, Op::ExpirePending) => 0,
            (T::ExpirePending, Op::InsertExpired) => 1,
            (T::SettleStuck, Op::WriteStuck) => 0,
            (T::SettleStuck, Op::Follow(_)) => 1,
            (T::Cancel, Op::CancelLua) => 1,
            (T::Cancel, Op::ClearRestoreDue) => 2,
            (T::RestoreDue, Op::CancelLua) => 0,
            (T::RestoreDue, Op::ClearRestoreDue) => 1,
            (T::Pay, Op::InsertPayment) => 0,
            (T::Pay, Op::Send(_)) => 1,
            (T::PaymentCallback, Op::PaidLua) => 1,
            (T::Rebuild, Op::RebuildRead) => 1,
            (T::Rebuild, Op::Restore) => 2,
            (T::Rebuild, Op::RebuildLua) => 3,
            (t, op) => unreachable!("{op:?} is no step of {t:?}"),
        };
        &lifecycle::transition(self.transition).steps[index]
    }

    /// How the step is named in a trace.
    fn label(self) -> String {
        match self.op {
            Op::Follow(outcome) => outcome.redis_script().to_string(),
            Op::InsertPayment => "insert payment (unsent)".to_string(),
            _ => self.table_step().op.to_string(),
        }
    }
}

/// An actor that takes one transition in its life (a buy, a cancel request, a pay request).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slot {
    Free,
    Busy(Job),
    Done,
}

/// One actor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Who {
    /// The gateway serving the buy of this ticket.
    Gateway(u8),
    Worker(u8),
    Sweeper(u8),
    Expiry,
    /// A buyer's cancel request (by index).
    Canceller(u8),
    Recovery,
    /// A buyer's pay request (by index).
    Payer(u8),
    Provider,
    /// Whoever rebuilds a product Redis lost (a gateway, a worker or the sweeper).
    Reconcile,
}

impl Who {
    pub fn actor(self) -> Actor {
        match self {
            Who::Gateway(_) => Actor::Gateway,
            Who::Worker(_) => Actor::Worker,
            Who::Sweeper(_) => Actor::Sweeper,
            Who::Expiry => Actor::Expiry,
            Who::Canceller(_) | Who::Payer(_) => Actor::Buyer,
            Who::Recovery => Actor::Recovery,
            Who::Provider => Actor::Provider,
            Who::Reconcile => Actor::Reconcile,
        }
    }
}

/// Everything the checker tracks. Tickets, buyers, workers and sweepers are numbered from 0
/// here and from 1 in traces (t1, u1, w1, s1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    // Redis
    /// The stock counter; a DECR by `claim.lua` adopting an order may take it below zero.
    pub redis_stock: i8,
    /// Whether the stock key exists (else the product is lost: buys get 503).
    pub loaded: bool,
    pub meta: Option<Meta>,
    /// The Redis server's run (its `run_id`); a restart changes it.
    pub run: u8,
    /// One snapshot of the Redis state, taken at some moment (the rollback's source).
    pub snapshot: Option<RedisImage>,
    /// The `buyers` hash: per buyer, its live ticket.
    pub buyers: Vec<Option<u8>>,
    /// Per ticket.
    pub records: Vec<Option<Record>>,
    // MySQL
    pub mysql_stock: u8,
    /// Per ticket.
    pub orders: Vec<Option<Order>>,
    /// Per ticket: its `failed_tickets` row.
    pub failed: Vec<Option<FailReason>>,
    pub payments: Vec<Payment>,
    // Kafka, per ticket
    pub kafka: Vec<Message>,
    /// Per ticket: what its buyer was answered.
    pub answers: Vec<Option<Answer>>,
    /// Per ticket: the clock when it was reserved (its `created_at`, in its message too).
    pub created: Vec<u8>,
    /// Ticks at each rebuild (`loaded_at` is the clock of the latest).
    pub clock: u8,
    // Actors
    /// Per ticket.
    pub gateways: Vec<Slot>,
    pub workers: Vec<Option<Job>>,
    pub sweepers: Vec<Option<Job>>,
    pub expiry: Option<Job>,
    pub cancellers: Vec<Slot>,
    pub recovery: Option<Job>,
    pub payers: Vec<Slot>,
    pub provider: Option<Job>,
    pub reconcile: Option<Job>,
    /// Per ticket: the reconcile's fence waits for its order (see [`Seckill::in_kafka`]).
    pub fenced: Vec<bool>,
    /// What the reconcile read (it holds the product's row lock until `rebuild.lua`).
    pub rebuild_read: Option<MySqlRead>,
    // Faults left
    /// The kinds of actor that crashed already (a set of `Actor as u8` bits).
    pub crashed: u8,
    pub redeliveries_left: u8,
    pub losses_left: u8,
    pub kafka_failures_left: u8,
    pub redis_losses_left: u8,
    pub redis_rollbacks_left: u8,
    pub buys_again_left: u8,
}

/// One step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The ticket's buyer buys: `reserve.lua` succeeds.
    Buy(u8),
    /// An actor in the middle of a transition takes its next step.
    Step(Who),
    /// The gateway's publish fails; the message may have reached Kafka all the same.
    PublishFails {
        ticket: u8,
        reached: bool,
    },
    Crash(Who),
    /// Kafka hands a queued message to an idle worker, which runs `claim.lua`.
    Deliver {
        worker: u8,
        ticket: u8,
    },
    /// Kafka hands a message already delivered to an idle worker once more.
    Redeliver {
        worker: u8,
        ticket: u8,
    },
    LoseMessage(u8),
    /// An idle sweeper reads an in-flight record; its next steps depend on what it read.
    Sweep {
        sweeper: u8,
        ticket: u8,
    },
    /// A buyer holding a pending ticket its dead gateway never answered buys again: the
    /// gateway read the record (pending, no location) and publishes the order again.
    BuyAgain(u8),
    /// The expiry or a buyer's cancel request runs the cancel transaction on a confirmed order.
    Cancel {
        who: Who,
        ticket: u8,
    },
    /// The recovery runs cancel.lua for an order with `restore_due`.
    Recover(u8),
    /// A pay request for a confirmed order with no payment in progress passes its check
    /// (today: a read; fixed: the transaction that also inserts the payment).
    Pay {
        payer: u8,
        ticket: u8,
    },
    /// The provider answers a processing payment.
    ProviderAnswers {
        payment: u8,
        success: bool,
    },
    /// Redis restarts with no data.
    RedisLoses,
    /// Redis writes its snapshot (an RDB save, or what a lagging replica holds).
    Snapshot,
    /// Redis restarts from its snapshot (or fails over to that replica).
    RollBack,
    /// A buy (`reserve.lua`) or the sweeper (`epoch.lua`) finds the state written by another
    /// run of Redis: the stock key is dropped, so the product counts as lost.
    FindOld,
    /// A gateway, worker or sweeper finds the product lost and starts rebuilding it: the
    /// fence (the messages queued now must be read by the workers before the rebuild reads).
    Rebuild,
}

/// The model: which fixes are in, and how far to explore.
#[derive(Clone, Debug)]
pub struct Seckill {
    pub fixes: Fixes,
    pub bounds: Bounds,
}

// The properties, by name. "Quiet" is [`Seckill::quiet`]: nothing is left to do.

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

/// How `compensate.lua` is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Compensate {
    /// Only a pending ticket (the sweeper's expire, and `release.lua`, which does the same).
    PendingOnly,
    /// A pending or processing ticket; the unit goes back.
    Any,
    /// As `Any`, but MySQL had no unit for it: none goes back.
    Heal,
}

impl Seckill {
    pub fn new(fixes: Fixes, bounds: Bounds) -> Self {
        assert!(bounds.sweepers >= 1, "the stuck check runs sweeper 1");
        Seckill { fixes, bounds }
    }

    fn tickets(&self) -> impl Iterator<Item = u8> + use<> {
        0..self.bounds.owners.len() as u8
    }

    fn owner(&self, ticket: u8) -> u8 {
        self.bounds.owners[ticket as usize]
    }

    // ---- the stores' scripts and transactions ------------------------------------------

    /// Frees the buyer of `t` in the `buyers` hash, if `t` is the ticket it holds there.
    fn free_buyer(&self, s: &mut State, t: u8) {
        let slot = &mut s.buyers[self.owner(t) as usize];
        if *slot == Some(t) {
            *slot = None;
        }
    }

    /// `reserve.lua`.
    fn reserve(&self, s: &mut State, t: u8) {
        s.redis_stock -= 1;
        s.created[t as usize] = s.clock;
        s.buyers[self.owner(t) as usize] = Some(t);
        s.records[t as usize] = Some(Record {
            status: RecordStatus::Pending,
            located: false,
        });
    }

    /// `compensate.lua` (and `release.lua`, which is its 'pending_only' mode with the reason
    /// kafka_unavailable). Returns whether it changed the record.
    fn compensate(&self, s: &mut State, t: u8, reason: FailReason, mode: Compensate) -> bool {
        // The scripts that decide in Redis alone check its run first.
        // Another run's meta: the state may be old. (A Redis that lost everything has no
        // meta; a dropped stock key of this run's meta is a loss the rebuild counts.)
        let old_run = s.meta.is_some_and(|m| m.run != s.run);
        if mode == Compensate::PendingOnly && self.fixes.expire_checks_run && old_run {
            s.loaded = false;
            return false;
        }
        let Some(record) = &mut s.records[t as usize] else {
            return false;
        };
        let takes = match mode {
            Compensate::PendingOnly => {
                record.status == RecordStatus::Pending
                    && !(record.located && self.fixes.expire_spares_held)
            }
            Compensate::Any | Compensate::Heal => record.status.in_flight(),
        };
        if !takes {
            return false;
        }
        record.status = RecordStatus::Failed(reason);
        self.free_buyer(s, t);
        // No unit goes back to a stock key that is gone (the rebuild counts it).
        let lifts = self.fixes.heal_lifts_negative && s.redis_stock < 0;
        if (mode != Compensate::Heal || lifts) && s.loaded {
            s.redis_stock += 1;
        }
        true
    }

    /// `claim.lua`: returns whether the ticket is claimed (else the caller skips it).
    fn claim(&self, s: &mut State, t: u8) -> bool {
        let i = t as usize;
        if s.records[i].is_none() {
            // The record is gone: records live a TTL after they settle, so Redis lost it
            // (no stock key, or a rebuild since the reservation) or came back old (the
            // reservation is younger than the TTL, always so in the model).
            let loaded_at = s.meta.map_or(0, |m| m.loaded_at);
            let before_rebuild = s.created[i] < loaded_at;
            if s.loaded && !before_rebuild {
                s.loaded = false;
            }
            s.records[i] = Some(Record {
                status: RecordStatus::Processing,
                located: false,
            });
            let slot = &mut s.buyers[self.owner(t) as usize];
            if slot.is_none() {
                *slot = Some(t);
            }
            if s.loaded {
                s.redis_stock -= 1;
            }
            return true;
        }
        let Some(record) = &mut s.records[i] else {
            return false;
        };
        match record.status {
            RecordStatus::Pending | RecordStatus::Processing => {
                record.status = RecordStatus::Processing;
                true
            }
            _ => false,
        }
    }

    /// The settle's MySQL transaction (under the product row's lock).
    fn settle_tx(&self, s: &mut State, t: u8) -> Outcome {
        if let Some(order) = s.orders[t as usize] {
            return match order.status {
                _ if !self.fixes.settle_follows_order => Outcome::Confirmed,
                OrderStatus::Confirmed => Outcome::Confirmed,
                OrderStatus::Paid => Outcome::Paid,
                OrderStatus::Cancelled => Outcome::Cancelled,
            };
        }
        if let Some(reason) = s.failed[t as usize] {
            return Outcome::Failed(reason);
        }
        let owner = self.owner(t);
        let holds_live_order = self.tickets().any(|other| {
            self.owner(other) == owner
                && s.orders[other as usize].is_some_and(|o| o.status.holds_unit())
        });
        let failure = if holds_live_order {
            Some(FailReason::DuplicateUser)
        } else if s.mysql_stock == 0 {
            Some(FailReason::OutOfStock)
        } else {
            None
        };
        match failure {
            Some(reason) => {
                s.failed[t as usize] = Some(reason);
                Outcome::Failed(reason)
            }
            None => {
                s.orders[t as usize] = Some(Order {
                    status: OrderStatus::Confirmed,
                    restore_due: false,
                });
                s.mysql_stock -= 1;
                Outcome::Confirmed
            }
        }
    }

    /// Today's sweeper on a processing ticket: its MySQL transaction.
    fn settle_stuck_tx(&self, s: &mut State, t: u8) -> Outcome {
        if s.orders[t as usize].is_some() {
            return Outcome::Confirmed;
        }
        s.failed[t as usize].get_or_insert(FailReason::Lost);
        Outcome::Failed(FailReason::Lost)
    }

    /// Changes a record from one of `from` to `to`; returns whether it did.
    fn move_record(s: &mut State, t: u8, from: &[RecordStatus], to: RecordStatus) -> bool {
        match &mut s.records[t as usize] {
            Some(record) if from.contains(&record.status) => {
                record.status = to;
                true
            }
            _ => false,
        }
    }

    /// `cancel.lua`.
    fn cancel_lua(&self, s: &mut State, t: u8) {
        let from: &[RecordStatus] = if self.fixes.cancel_takes_in_flight {
            &[
                RecordStatus::Pending,
                RecordStatus::Processing,
                RecordStatus::Confirmed,
            ]
        } else {
            &[RecordStatus::Confirmed]
        };
        if Self::move_record(s, t, from, RecordStatus::Cancelled) {
            self.free_buyer(s, t);
            if s.loaded {
                s.redis_stock += 1;
            }
        }
    }

    /// `paid.lua`.
    fn paid_lua(&self, s: &mut State, t: u8) {
        let from: &[RecordStatus] = if self.fixes.paid_takes_processing {
            &[
                RecordStatus::Pending,
                RecordStatus::Processing,
                RecordStatus::Confirmed,
            ]
        } else {
            &[RecordStatus::Confirmed]
        };
        if s.records[t as usize].is_none() && self.fixes.paid_writes_lost_record {
            s.records[t as usize] = Some(Record {
                status: RecordStatus::Paid,
                located: false,
            });
            return;
        }
        Self::move_record(s, t, from, RecordStatus::Paid);
    }

    /// The Redis script that follows a settle's outcome.
    fn follow(&self, s: &mut State, t: u8, outcome: Outcome) {
        match outcome {
            Outcome::Confirmed => {
                Self::move_record(s, t, &[RecordStatus::Processing], RecordStatus::Confirmed);
            }
            Outcome::Paid => self.paid_lua(s, t),
            Outcome::Cancelled => self.cancel_lua(s, t),
            Outcome::Failed(reason) => {
                let mode = if reason == FailReason::OutOfStock {
                    Compensate::Heal
                } else {
                    Compensate::Any
                };
                self.compensate(s, t, reason, mode);
            }
        }
    }

    /// `restore.lua` for every ticket MySQL settled, as the reconcile read them.
    fn restore(&self, s: &mut State, read: &MySqlRead) {
        for t in self.tickets() {
            let i = t as usize;
            let settled = match (read.orders[i], read.failed[i]) {
                (Some(order), _) => order.record(),
                (None, Some(reason)) => RecordStatus::Failed(reason),
                (None, None) => continue,
            };
            let status = s.records[i].map(|r| r.status);
            let write = match settled {
                RecordStatus::Confirmed | RecordStatus::Failed(_) => !matches!(
                    status,
                    Some(
                        RecordStatus::Confirmed
                            | RecordStatus::Failed(_)
                            | RecordStatus::Paid
                            | RecordStatus::Cancelled
                    )
                ),
                _ => status != Some(settled),
            };
            if write {
                let located = s.records[i].is_some_and(|r| r.located);
                s.records[i] = Some(Record {
                    status: settled,
                    located,
                });
            }
            let owner = self.owner(t) as usize;
            if settled.holds_unit() {
                s.buyers[owner] = Some(t);
            } else if s.buyers[owner] == Some(t) {
                s.buyers[owner] = None;
            }
        }
    }

    /// `rebuild.lua`: the stock from what the reconcile read, less what is in flight now.
    fn rebuild_lua(&self, s: &mut State, read: &MySqlRead) {
        let in_flight = s
            .records
            .iter()
            .flatten()
            .filter(|r| r.status.in_flight())
            .count() as i8;
        s.redis_stock = read.stock as i8 - in_flight;
        s.clock += 1;
        s.meta = Some(Meta {
            run: s.run,
            loaded_at: s.clock,
        });
        s.loaded = true;
    }

    /// Runs a job's next step; returns the job's next step, or `None` once it is over.
    fn run(&self, s: &mut State, job: Job) -> Option<Job> {
        let t = job.ticket;
        let i = t as usize;
        match job.op {
            Op::Publish => {
                s.kafka[i] = Message::Queued;
                match job.transition {
                    TransitionId::BuyAgain => job.then(Op::LocateHeld),
                    _ => job.then(Op::Locate),
                }
            }
            Op::LocateHeld => {
                let pending = s.records[i].is_some_and(|r| r.status == RecordStatus::Pending);
                if pending || !self.fixes.expire_spares_held {
                    if let Some(record) = &mut s.records[i] {
                        record.located = true;
                    }
                    // Today: 200 with the record read before, whatever it is now.
                    s.answers[i] = Some(Answer::Accepted);
                }
                None
            }
            Op::Locate => {
                if let Some(record) = &mut s.records[i] {
                    record.located = true;
                }
                s.answers[i] = Some(Answer::Accepted);
                None
            }
            Op::Release => {
                self.compensate(s, t, FailReason::KafkaUnavailable, Compensate::PendingOnly);
                s.answers[i] = Some(Answer::Unavailable);
                None
            }
            Op::Claim => {
                if self.claim(s, t) {
                    job.then(Op::Write)
                } else {
                    None
                }
            }
            Op::Write => job.then(Op::Follow(self.settle_tx(s, t))),
            Op::WriteStuck => job.then(Op::Follow(self.settle_stuck_tx(s, t))),
            Op::Follow(outcome) => {
                self.follow(s, t, outcome);
                None
            }
            Op::ExpirePending => {
                let changed = self.compensate(s, t, FailReason::Expired, Compensate::PendingOnly);
                if changed || !self.fixes.expired_row_only_if_expired {
                    job.then(Op::InsertExpired)
                } else {
                    None
                }
            }
            Op::InsertExpired => {
                if s.orders[i].is_none() || !self.fixes.expired_row_needs_no_order {
                    s.failed[i].get_or_insert(FailReason::Expired);
                }
                None
            }
            Op::CancelLua => {
                self.cancel_lua(s, t);
                job.then(Op::ClearRestoreDue)
            }
            Op::ClearRestoreDue => {
                if let Some(order) = &mut s.orders[i] {
                    order.restore_due = false;
                }
                None
            }
            Op::InsertPayment => {
                s.payments.push(Payment {
                    ticket: t,
                    status: PaymentStatus::Unsent,
                });
                job.then(Op::Send(s.payments.len() as u8 - 1))
            }
            Op::Send(p) => {
                s.payments[p as usize].status = PaymentStatus::Processing;
                None
            }
            Op::PaidLua => {
                self.paid_lua(s, t);
                None
            }
            Op::RebuildRead => {
                // Checked again under the lock: another process rebuilt it meanwhile.
                if s.loaded {
                    return None;
                }
                s.rebuild_read = Some(MySqlRead {
                    stock: s.mysql_stock,
                    orders: s.orders.iter().map(|o| o.map(|o| o.status)).collect(),
                    failed: s.failed.clone(),
                });
                job.then(Op::Restore)
            }
            Op::Restore => {
                let read = s.rebuild_read.clone().expect("read before restore");
                self.restore(s, &read);
                job.then(Op::RebuildLua)
            }
            Op::RebuildLua => {
                let read = s.rebuild_read.take().expect("read before rebuild.lua");
                self.rebuild_lua(s, &read);
                None
            }
        }
    }

    /// Whether the fence still waits for this ticket's order: its publish is under way (the
    /// fence first waits out the delivery timeout), or its message is queued, or a worker
    /// has it and has not committed its offset (it does once the ticket is settled).
    fn in_kafka(s: &State, t: u8) -> bool {
        let publishing = matches!(
            s.gateways[t as usize],
            Slot::Busy(Job {
                op: Op::Publish,
                ..
            })
        );
        publishing
            || s.kafka[t as usize] == Message::Queued
            || s.workers.iter().flatten().any(|job| job.ticket == t)
    }

    /// The reconcile holds the product's row lock: no settle or cancel commits meanwhile.
    fn product_locked(s: &State) -> bool {
        s.reconcile
            .is_some_and(|j| matches!(j.op, Op::Restore | Op::RebuildLua))
    }

    /// The product's Redis state is this run's: buys sell from it.
    pub fn trusted(s: &State) -> bool {
        s.loaded && s.meta.is_some_and(|m| m.run == s.run)
    }

    /// Whether an actor's next step may run now (a lock or the fence holds it back).
    fn may_step(&self, s: &State, who: Who) -> bool {
        let Some(job) = Self::job(s, who) else {
            return false;
        };
        match job.op {
            Op::Write | Op::WriteStuck => !Self::product_locked(s),
            Op::InsertExpired if self.fixes.expired_row_needs_no_order => !Self::product_locked(s),
            Op::RebuildRead => {
                !(0..s.kafka.len() as u8).any(|t| s.fenced[t as usize] && Self::in_kafka(s, t))
            }
            _ => true,
        }
    }

    // ---- actors ------------------------------------------------------------------------

    fn job(s: &State, who: Who) -> Option<Job> {
        let slot = |slot: Slot| match slot {
            Slot::Busy(job) => Some(job),
            Slot::Free | Slot::Done => None,
        };
        match who {
            Who::Gateway(t) => slot(s.gateways[t as usize]),
            Who::Worker(w) => s.workers[w as usize],
            Who::Sweeper(w) => s.sweepers[w as usize],
            Who::Expiry => s.expiry,
            Who::Canceller(c) => slot(s.cancellers[c as usize]),
            Who::Recovery => s.recovery,
            Who::Payer(p) => slot(s.payers[p as usize]),
            Who::Provider => s.provider,
            Who::Reconcile => s.reconcile,
        }
    }

    /// Gives an actor its next step (`None`: it is idle again, or done for a one-off actor).
    fn set_job(s: &mut State, who: Who, job: Option<Job>) {
        let slot = |job: Option<Job>| job.map_or(Slot::Done, Slot::Busy);
        match who {
            Who::Gateway(t) => s.gateways[t as usize] = slot(job),
            Who::Worker(w) => s.workers[w as usize] = job,
            Who::Sweeper(w) => s.sweepers[w as usize] = job,
            Who::Expiry => s.expiry = job,
            Who::Canceller(c) => s.cancellers[c as usize] = slot(job),
            Who::Recovery => s.recovery = job,
            Who::Payer(p) => s.payers[p as usize] = slot(job),
            Who::Provider => s.provider = job,
            Who::Reconcile => s.reconcile = job,
        }
    }

    /// Every actor in the middle of a transition.
    fn busy(&self, s: &State) -> Vec<Who> {
        let mut all: Vec<Who> = self.tickets().map(Who::Gateway).collect();
        all.extend((0..s.workers.len() as u8).map(Who::Worker));
        all.extend((0..s.sweepers.len() as u8).map(Who::Sweeper));
        all.push(Who::Expiry);
        all.extend((0..s.cancellers.len() as u8).map(Who::Canceller));
        all.push(Who::Recovery);
        all.extend((0..s.payers.len() as u8).map(Who::Payer));
        all.push(Who::Provider);
        all.push(Who::Reconcile);
        all.retain(|&who| Self::job(s, who).is_some());
        all
    }

    fn can_crash(&self, s: &State, who: Who) -> bool {
        let actor = who.actor();
        // A pay request and the provider's callback are not modelled crashing.
        !matches!(who, Who::Payer(_) | Who::Provider)
            && self.bounds.may_crash.contains(&actor)
            && s.crashed & (1 << actor as u8) == 0
    }

    /// Whether an idle sweeper may act on this ticket now, and with which job.
    fn sweep_job(&self, s: &State, t: u8) -> Option<Job> {
        let record = s.records[t as usize]?;
        let (transition, op) = match record.status {
            // Past the timeout only once the gateway's request is over.
            RecordStatus::Pending if !record.located => {
                if s.gateways[t as usize] != Slot::Done {
                    return None;
                }
                (TransitionId::ExpirePending, Op::ExpirePending)
            }
            RecordStatus::Pending => (TransitionId::Settle, Op::Claim),
            RecordStatus::Processing if self.fixes.sweeper_settles_processing => {
                (TransitionId::Settle, Op::Write)
            }
            RecordStatus::Processing => (TransitionId::SettleStuck, Op::WriteStuck),
            _ => return None,
        };
        Some(Job {
            transition,
            ticket: t,
            op,
        })
    }

    fn order_confirmed(s: &State, t: u8) -> bool {
        s.orders[t as usize].is_some_and(|o| o.status == OrderStatus::Confirmed)
    }

    // ---- what "at rest" means ----------------------------------------------------------

    /// No actor is in the middle of a transition, no message waits for a worker, no payment
    /// waits for the provider and no cancel waits for its cancel.lua. Only the sweeper may
    /// still have work: in-flight records.
    pub fn calm(&self, s: &State) -> bool {
        Self::trusted(s)
            && self.busy(s).is_empty()
            && !s.kafka.contains(&Message::Queued)
            && !s.orders.iter().flatten().any(|o| o.restore_due)
            && !s.payments.iter().any(|p| p.status.in_progress())
    }

    /// Calm, and no ticket in flight: the system has nothing left to do.
    pub fn quiet(&self, s: &State) -> bool {
        self.calm(s) && !s.records.iter().flatten().any(|r| r.status.in_flight())
    }

    /// Lets sweeper 1 run alone, ticket after ticket, until no ticket is left for it.
    fn sweep_to_rest(&self, s: &State) -> State {
        let mut s = s.clone();
        for _ in 0..2 * self.bounds.owners.len() {
            let Some(ticket) = self.tickets().find(|&t| self.sweep_job(&s, t).is_some()) else {
                break;
            };
            s = self
                .next_state(&s, Action::Sweep { sweeper: 0, ticket })
                .unwrap();
            while s.sweepers[0].is_some() {
                s = self.next_state(&s, Action::Step(Who::Sweeper(0))).unwrap();
            }
        }
        s
    }

    // ---- traces ------------------------------------------------------------------------

    fn who_name(&self, s: &State, who: Who) -> String {
        let job_owner = || Self::job(s, who).map(|j| self.owner(j.ticket) + 1);
        match who {
            Who::Gateway(t) => format!("gateway (buyer u{})", self.owner(t) + 1),
            Who::Worker(w) => format!("worker w{}", w + 1),
            Who::Sweeper(w) => format!("sweeper s{}", w + 1),
            Who::Expiry => "expiry".to_string(),
            Who::Canceller(_) => format!("buyer u{} (cancel)", job_owner().unwrap_or(0)),
            Who::Recovery => "recovery".to_string(),
            Who::Payer(p) => format!(
                "buyer u{} (pay, device {})",
                job_owner().unwrap_or(0),
                p + 1
            ),
            Who::Provider => "provider".to_string(),
            Who::Reconcile => "reconcile".to_string(),
        }
    }

    /// One step of a trace, in words: who, what, and what changed in the stores.
    fn describe(&self, before: &State, action: Action, after: &State) -> String {
        let t_ = |t: u8| format!("t{}", t + 1);
        let (who, what, ticket) = match action {
            Action::Buy(t) => (
                format!("buyer u{}", self.owner(t) + 1),
                format!("buys {}: reserve.lua", t_(t)),
                t,
            ),
            Action::BuyAgain(t) => (
                format!("buyer u{}", self.owner(t) + 1),
                format!(
                    "buys again, holding {}: reads it pending, no location",
                    t_(t)
                ),
                t,
            ),
            Action::Step(who) => {
                let job = Self::job(before, who).unwrap();
                let mut what = format!("{} {}", job.label(), t_(job.ticket));
                // A MySQL transaction of a settle: say what it decided.
                if let Some(Job {
                    op: Op::Follow(outcome),
                    ..
                }) = Self::job(after, who)
                {
                    write!(what, " -> {}", outcome.name()).unwrap();
                }
                (self.who_name(before, who), what, job.ticket)
            }
            Action::PublishFails { ticket, reached } => (
                self.who_name(before, Who::Gateway(ticket)),
                format!(
                    "publish {} fails ({})",
                    t_(ticket),
                    if reached {
                        "the message reached Kafka all the same"
                    } else {
                        "no message"
                    }
                ),
                ticket,
            ),
            Action::Crash(who) => {
                let job = Self::job(before, who).unwrap();
                (
                    self.who_name(before, who),
                    format!("crashes before {} {}", job.label(), t_(job.ticket)),
                    job.ticket,
                )
            }
            Action::Deliver { worker, ticket } => (
                format!("worker w{}", worker + 1),
                format!("gets {}'s message: claim.lua", t_(ticket)),
                ticket,
            ),
            Action::Redeliver { worker, ticket } => (
                format!("worker w{}", worker + 1),
                format!(
                    "gets {}'s message again (redelivery): claim.lua",
                    t_(ticket)
                ),
                ticket,
            ),
            Action::LoseMessage(t) => {
                ("Kafka".to_string(), format!("loses {}'s message", t_(t)), t)
            }
            Action::Sweep { sweeper, ticket } => {
                let job = after.sweepers[sweeper as usize].unwrap();
                let status = before.records[ticket as usize].unwrap().status.name();
                (
                    format!("sweeper s{}", sweeper + 1),
                    format!(
                        "reads {} {status}: will {}",
                        t_(ticket),
                        lifecycle::transition(job.transition).name
                    ),
                    ticket,
                )
            }
            Action::Cancel { who, ticket } => (
                match who {
                    Who::Canceller(_) => format!("buyer u{} (cancel)", self.owner(ticket) + 1),
                    _ => self.who_name(before, who),
                },
                format!("MySQL tx (cancel) {}", t_(ticket)),
                ticket,
            ),
            Action::Recover(t) => ("recovery".to_string(), format!("cancel.lua {}", t_(t)), t),
            Action::Pay { payer, ticket } => (
                format!(
                    "buyer u{} (pay, device {})",
                    self.owner(ticket) + 1,
                    payer + 1
                ),
                if self.fixes.pay_locks_order {
                    format!("MySQL tx (pay) {}", t_(ticket))
                } else {
                    format!("reads {}: confirmed, no payment in progress", t_(ticket))
                },
                ticket,
            ),
            Action::ProviderAnswers { payment, success } => (
                "provider".to_string(),
                format!(
                    "{} payment #{}: MySQL tx (callback)",
                    if success { "charges" } else { "declines" },
                    payment + 1
                ),
                before.payments[payment as usize].ticket,
            ),
            Action::RedisLoses => ("Redis".to_string(), "restarts with no data".to_string(), 0),
            Action::Snapshot => ("Redis".to_string(), "writes a snapshot".to_string(), 0),
            Action::RollBack => (
                "Redis".to_string(),
                "restarts from its snapshot".to_string(),
                0,
            ),
            Action::FindOld => (
                "gateway or sweeper".to_string(),
                "reserve.lua / epoch.lua: the state is another run's".to_string(),
                0,
            ),
            Action::Rebuild => (
                "reconcile".to_string(),
                "finds the product lost: fence (waits for the queued messages)".to_string(),
                0,
            ),
        };
        let changes = changes(before, after);
        if changes.is_empty() {
            let status = before.records[ticket as usize].map_or("no record".to_string(), |r| {
                format!("record {}", r.status.name())
            });
            format!("{who}: {what} => nothing changes ({} {status})", t_(ticket))
        } else {
            format!("{who}: {what} => {}", changes.join(", "))
        }
    }

    /// A counterexample to `property` as numbered lines, one per step. The checker may
    /// have gone on from the first state that breaks the property; the trace stops there.
    pub fn explain(&self, path: &Path<State, Action>, property: &str) -> String {
        let holds = self
            .properties()
            .into_iter()
            .find(|p| p.name == property)
            .expect("a property of this model")
            .condition;
        let mut steps = path.clone().into_vec();
        if let Some(first) = steps.iter().position(|(s, _)| !holds(self, s)) {
            steps.truncate(first + 1);
        }
        let mut out = String::new();
        for (n, pair) in steps.windows(2).enumerate() {
            let (before, action) = &pair[0];
            let after = &pair[1].0;
            let line = self.describe(before, action.unwrap(), after);
            writeln!(out, "{:3}. {line}", n + 1).unwrap();
        }
        let last = &steps.last().expect("a path has a state").0;
        writeln!(out, "     end: {}", self.summary(last)).unwrap();
        out
    }

    /// The stores of a state, in one line.
    pub fn summary(&self, s: &State) -> String {
        let mut redis = vec![if !s.loaded {
            "no stock key".to_string()
        } else if !Self::trusted(s) {
            format!("stock {} (another run's)", s.redis_stock)
        } else {
            format!("stock {}", s.redis_stock)
        }];
        for (u, t) in s.buyers.iter().enumerate() {
            if let Some(t) = t {
                redis.push(format!("buyers[u{}]=t{}", u + 1, t + 1));
            }
        }
        let mut mysql = vec![format!("stock {}", s.mysql_stock)];
        for t in self.tickets() {
            let i = t as usize;
            if let Some(r) = s.records[i] {
                redis.push(format!("t{} {}", t + 1, r.status.name()));
            }
            if let Some(o) = s.orders[i] {
                mysql.push(format!("t{} order {}", t + 1, o.status.name()));
            }
            if let Some(f) = s.failed[i] {
                mysql.push(format!("t{} failed {}", t + 1, f.name()));
            }
        }
        for (p, payment) in s.payments.iter().enumerate() {
            mysql.push(format!(
                "payment #{} t{} {}",
                p + 1,
                payment.ticket + 1,
                payment.status.as_str()
            ));
        }
        let answers: Vec<String> = (0..s.answers.len())
            .filter_map(|i| match s.answers[i] {
                Some(Answer::Accepted) => Some(format!("t{} 202", i + 1)),
                Some(Answer::Unavailable) => Some(format!("t{} 503", i + 1)),
                None => None,
            })
            .collect();
        format!(
            "Redis [{}]; MySQL [{}]; answers [{}]",
            redis.join(", "),
            mysql.join(", "),
            answers.join(", ")
        )
    }
}

/// What changed in the stores and answers between two states, in words.
fn changes(a: &State, b: &State) -> Vec<String> {
    let mut out = Vec::new();
    let t_ = |i: usize| format!("t{}", i + 1);
    if a.run != b.run {
        out.push(format!("Redis run {} -> {}", a.run + 1, b.run + 1));
    }
    if a.loaded && !b.loaded {
        out.push("stock key dropped".to_string());
    }
    if !a.loaded && b.loaded {
        out.push("product loaded".to_string());
    }
    if a.snapshot.is_none() && b.snapshot.is_some() {
        out.push("snapshot taken".to_string());
    }
    if a.redis_stock != b.redis_stock {
        out.push(format!(
            "Redis stock {} -> {}",
            a.redis_stock, b.redis_stock
        ));
    }
    for (u, (x, y)) in a.buyers.iter().zip(&b.buyers).enumerate() {
        match y {
            _ if x == y => {}
            Some(t) => out.push(format!("buyers[u{}] = {}", u + 1, t_(*t as usize))),
            None => out.push(format!("buyers[u{}] freed", u + 1)),
        }
    }
    for (i, (x, y)) in a.records.iter().zip(&b.records).enumerate() {
        match (x, y) {
            (None, Some(r)) => out.push(format!("record {} {}", t_(i), r.status.name())),
            (Some(x), Some(y)) if x.status != y.status => out.push(format!(
                "record {} {} -> {}",
                t_(i),
                x.status.name(),
                y.status.name()
            )),
            (Some(x), Some(y)) if x.located != y.located => {
                out.push(format!("record {} located", t_(i)))
            }
            (Some(_), None) => out.push(format!("record {} gone", t_(i))),
            _ => {}
        }
    }
    if a.mysql_stock != b.mysql_stock {
        out.push(format!(
            "MySQL stock {} -> {}",
            a.mysql_stock, b.mysql_stock
        ));
    }
    for (i, (x, y)) in a.orders.iter().zip(&b.orders).enumerate() {
        match (x, y) {
            (None, Some(y)) => out.push(format!("order {} inserted ({})", t_(i), y.status.name())),
            (Some(x), Some(y)) => {
                if x.status != y.status {
                    out.push(format!(
                        "order {} {} -> {}",
                        t_(i),
                        x.status.name(),
                        y.status.name()
                    ));
                }
                if x.restore_due != y.restore_due {
                    out.push(format!(
                        "order {} restore_due = {}",
                        t_(i),
                        y.restore_due as u8
                    ));
                }
            }
            _ => {}
        }
    }
    for (i, (x, y)) in a.failed.iter().zip(&b.failed).enumerate() {
        if let (None, Some(r)) = (x, y) {
            out.push(format!("failed_tickets {} {}", t_(i), r.name()));
        }
    }
    for (p, y) in b.payments.iter().enumerate() {
        match a.payments.get(p) {
            None => out.push(format!(
                "payment #{} of {} {}",
                p + 1,
                t_(y.ticket as usize),
                y.status.as_str()
            )),
            Some(x) if x.status != y.status => out.push(format!(
                "payment #{} {} -> {}",
                p + 1,
                x.status.as_str(),
                y.status.as_str()
            )),
            _ => {}
        }
    }
    for (i, (x, y)) in a.kafka.iter().zip(&b.kafka).enumerate() {
        match y {
            _ if x == y => {}
            Message::Queued => out.push(format!("Kafka {} queued", t_(i))),
            Message::Lost => out.push(format!("Kafka lost {}", t_(i))),
            Message::Unpublished | Message::Delivered => {}
        }
    }
    for (i, (x, y)) in a.answers.iter().zip(&b.answers).enumerate() {
        match (x, y) {
            (None, Some(Answer::Accepted)) => out.push(format!("answers 202 for {}", t_(i))),
            (None, Some(Answer::Unavailable)) => out.push(format!("answers 503 for {}", t_(i))),
            _ => {}
        }
    }
    out
}

impl Model for Seckill {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let b = &self.bounds;
        let tickets = b.owners.len();
        let buyers = b.owners.iter().max().map_or(0, |&u| u as usize + 1);
        vec![State {
            redis_stock: b.units as i8,
            loaded: true,
            meta: Some(Meta {
                run: 0,
                loaded_at: 0,
            }),
            run: 0,
            snapshot: None,
            buyers: vec![None; buyers],
            records: vec![None; tickets],
            mysql_stock: b.units,
            orders: vec![None; tickets],
            failed: vec![None; tickets],
            payments: Vec::new(),
            kafka: vec![Message::Unpublished; tickets],
            answers: vec![None; tickets],
            created: vec![0; tickets],
            clock: 0,
            gateways: vec![Slot::Free; tickets],
            workers: vec![None; b.workers as usize],
            sweepers: vec![None; b.sweepers as usize],
            expiry: None,
            cancellers: vec![Slot::Free; b.buyer_cancels as usize],
            recovery: None,
            payers: vec![Slot::Free; b.pay_requests as usize],
            provider: None,
            reconcile: None,
            fenced: vec![false; tickets],
            rebuild_read: None,
            crashed: 0,
            redeliveries_left: b.redeliveries,
            losses_left: b.lost_messages,
            kafka_failures_left: b.kafka_failures,
            redis_losses_left: b.redis_losses,
            redis_rollbacks_left: b.redis_rollbacks,
            buys_again_left: b.buys_again,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        // Buyers buy (a refused reserve changes nothing, so it is left out).
        for t in self.tickets() {
            if s.gateways[t as usize] == Slot::Free
                && Self::trusted(s)
                && s.redis_stock > 0
                && s.buyers[self.owner(t) as usize].is_none()
            {
                actions.push(Action::Buy(t));
            }
            // A buy again: the buyer holds a pending ticket that its dead gateway never
            // answered nor located (read as the action starts).
            let held = s.records[t as usize].is_some_and(|r| {
                r.status == RecordStatus::Pending && !r.located && Self::trusted(s)
            });
            if s.buys_again_left > 0
                && held
                && s.gateways[t as usize] == Slot::Done
                && s.answers[t as usize].is_none()
            {
                actions.push(Action::BuyAgain(t));
            }
        }
        // Actors in the middle of a transition take their next step, or crash.
        for who in self.busy(s) {
            if self.may_step(s, who) {
                actions.push(Action::Step(who));
            }
            // A publish may fail, the message reaching Kafka or not.
            if let Who::Gateway(ticket) = who {
                let publishing = Self::job(s, who).is_some_and(|job| {
                    job.op == Op::Publish && job.transition == TransitionId::Buy
                });
                if publishing && s.kafka_failures_left > 0 {
                    for reached in [false, true] {
                        actions.push(Action::PublishFails { ticket, reached });
                    }
                }
            }
            if self.can_crash(s, who) {
                actions.push(Action::Crash(who));
            }
        }
        // Kafka. Idle workers are alike, so only the first idle one is offered a message.
        if let Some(worker) = s.workers.iter().position(Option::is_none) {
            let worker = worker as u8;
            for ticket in self.tickets() {
                match s.kafka[ticket as usize] {
                    Message::Queued => actions.push(Action::Deliver { worker, ticket }),
                    Message::Delivered if s.redeliveries_left > 0 => {
                        actions.push(Action::Redeliver { worker, ticket })
                    }
                    _ => {}
                }
            }
        }
        if s.losses_left > 0 {
            for t in self.tickets() {
                if s.kafka[t as usize] == Message::Queued {
                    actions.push(Action::LoseMessage(t));
                }
            }
        }
        // The sweeper (the first idle one, as for workers).
        if let Some(sweeper) = s.sweepers.iter().position(Option::is_none) {
            for ticket in self.tickets() {
                if self.sweep_job(s, ticket).is_some() {
                    actions.push(Action::Sweep {
                        sweeper: sweeper as u8,
                        ticket,
                    });
                }
            }
        }
        // Cancels: the expiry, and the buyers' cancel requests (each of its own order).
        // (Their MySQL transaction takes the product's row lock.)
        let confirmed: Vec<u8> = self
            .tickets()
            .filter(|&t| Self::order_confirmed(s, t) && !Self::product_locked(s))
            .collect();
        if self.bounds.expiry && s.expiry.is_none() {
            for &ticket in &confirmed {
                actions.push(Action::Cancel {
                    who: Who::Expiry,
                    ticket,
                });
            }
        }
        if let Some(c) = s.cancellers.iter().position(|c| *c == Slot::Free) {
            for &ticket in &confirmed {
                actions.push(Action::Cancel {
                    who: Who::Canceller(c as u8),
                    ticket,
                });
            }
        }
        if s.recovery.is_none() {
            for t in self.tickets() {
                if s.orders[t as usize].is_some_and(|o| o.restore_due) {
                    actions.push(Action::Recover(t));
                }
            }
        }
        // Payments.
        if let Some(payer) = s.payers.iter().position(|p| *p == Slot::Free) {
            for &ticket in &confirmed {
                let in_progress = s
                    .payments
                    .iter()
                    .any(|p| p.ticket == ticket && p.status.in_progress());
                if !in_progress {
                    actions.push(Action::Pay {
                        payer: payer as u8,
                        ticket,
                    });
                }
            }
        }
        // Redis's faults, and the healing.
        if s.redis_losses_left > 0 {
            actions.push(Action::RedisLoses);
        }
        if s.redis_rollbacks_left > 0 {
            actions.push(match s.snapshot {
                None => Action::Snapshot,
                Some(_) => Action::RollBack,
            });
        }
        if s.loaded && !Self::trusted(s) {
            actions.push(Action::FindOld);
        }
        if !s.loaded && s.reconcile.is_none() {
            actions.push(Action::Rebuild);
        }
        if s.provider.is_none() {
            for (p, payment) in s.payments.iter().enumerate() {
                if payment.status == PaymentStatus::Processing {
                    for success in [true, false] {
                        actions.push(Action::ProviderAnswers {
                            payment: p as u8,
                            success,
                        });
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Buy(t) => {
                self.reserve(&mut s, t);
                s.gateways[t as usize] = Slot::Busy(Job {
                    transition: TransitionId::Buy,
                    ticket: t,
                    op: Op::Publish,
                });
            }
            Action::BuyAgain(t) => {
                s.buys_again_left -= 1;
                s.gateways[t as usize] = Slot::Busy(Job {
                    transition: TransitionId::BuyAgain,
                    ticket: t,
                    op: Op::Publish,
                });
            }
            Action::Step(who) => {
                let job = Self::job(&s, who).unwrap();
                let next = self.run(&mut s, job);
                Self::set_job(&mut s, who, next);
            }
            Action::PublishFails { ticket, reached } => {
                s.kafka_failures_left -= 1;
                if reached {
                    s.kafka[ticket as usize] = Message::Queued;
                }
                let job = Self::job(&s, Who::Gateway(ticket)).unwrap();
                Self::set_job(&mut s, Who::Gateway(ticket), job.then(Op::Release));
            }
            Action::Crash(who) => {
                let job = Self::job(&s, who).unwrap();
                // A crashed worker never committed its Kafka offset: the message comes back.
                if matches!(who, Who::Worker(_))
                    && s.kafka[job.ticket as usize] == Message::Delivered
                {
                    s.kafka[job.ticket as usize] = Message::Queued;
                }
                if who == Who::Reconcile {
                    s.rebuild_read = None;
                }
                s.crashed |= 1 << who.actor() as u8;
                Self::set_job(&mut s, who, None);
            }
            Action::Deliver { worker, ticket } | Action::Redeliver { worker, ticket } => {
                if let Action::Redeliver { .. } = action {
                    s.redeliveries_left -= 1;
                }
                s.kafka[ticket as usize] = Message::Delivered;
                let claim = Job {
                    transition: TransitionId::Settle,
                    ticket,
                    op: Op::Claim,
                };
                s.workers[worker as usize] = self.run(&mut s, claim);
            }
            Action::LoseMessage(t) => {
                s.losses_left -= 1;
                s.kafka[t as usize] = Message::Lost;
            }
            Action::Sweep { sweeper, ticket } => {
                s.sweepers[sweeper as usize] = self.sweep_job(&s, ticket);
            }
            Action::Cancel { who, ticket } => {
                let order = s.orders[ticket as usize].as_mut().unwrap();
                order.status = OrderStatus::Cancelled;
                order.restore_due = true;
                s.mysql_stock += 1;
                let job = Job {
                    transition: TransitionId::Cancel,
                    ticket,
                    op: Op::CancelLua,
                };
                Self::set_job(&mut s, who, Some(job));
            }
            Action::Recover(ticket) => {
                let job = Job {
                    transition: TransitionId::RestoreDue,
                    ticket,
                    op: Op::CancelLua,
                };
                s.recovery = self.run(&mut s, job);
            }
            Action::Pay { payer, ticket } => {
                let job = Job {
                    transition: TransitionId::Pay,
                    ticket,
                    op: Op::InsertPayment,
                };
                // Fixed: the check and the insert are one transaction; today the insert is a
                // later step, after which the check may no longer hold.
                let job = if self.fixes.pay_locks_order {
                    self.run(&mut s, job)
                } else {
                    Some(job)
                };
                Self::set_job(&mut s, Who::Payer(payer), job);
            }
            Action::ProviderAnswers { payment, success } => {
                let p = &mut s.payments[payment as usize];
                let ticket = p.ticket;
                if !success {
                    p.status = PaymentStatus::Declined;
                } else if Self::order_confirmed(&s, ticket) {
                    s.payments[payment as usize].status = PaymentStatus::Succeeded;
                    s.orders[ticket as usize].as_mut().unwrap().status = OrderStatus::Paid;
                    s.provider = Some(Job {
                        transition: TransitionId::PaymentCallback,
                        ticket,
                        op: Op::PaidLua,
                    });
                } else {
                    s.payments[payment as usize].status = PaymentStatus::RefundDue;
                }
            }
            Action::RedisLoses => {
                s.redis_losses_left -= 1;
                s.run += 1;
                s.redis_stock = 0;
                s.loaded = false;
                s.meta = None;
                s.buyers.iter_mut().for_each(|b| *b = None);
                s.records.iter_mut().for_each(|r| *r = None);
            }
            Action::Snapshot => {
                s.snapshot = Some(RedisImage {
                    stock: s.redis_stock,
                    loaded: s.loaded,
                    meta: s.meta,
                    buyers: s.buyers.clone(),
                    records: s.records.clone(),
                });
            }
            Action::RollBack => {
                s.redis_rollbacks_left -= 1;
                s.run += 1;
                let image = s.snapshot.clone().expect("a snapshot to restart from");
                s.redis_stock = image.stock;
                s.loaded = image.loaded;
                s.meta = image.meta;
                s.buyers = image.buyers;
                s.records = image.records;
            }
            Action::FindOld => s.loaded = false,
            Action::Rebuild => {
                s.fenced = self.tickets().map(|t| Self::in_kafka(&s, t)).collect();
                s.reconcile = Some(Job {
                    transition: TransitionId::Rebuild,
                    ticket: 0,
                    op: Op::RebuildRead,
                });
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(UNIT_IN_ONE_PLACE, |m: &Seckill, s: &State| {
                let units = m.bounds.units as usize;
                let held_in_redis = s
                    .records
                    .iter()
                    .flatten()
                    .filter(|r| r.status.holds_unit())
                    .count();
                let held_in_mysql = s
                    .orders
                    .iter()
                    .flatten()
                    .filter(|o| o.status.holds_unit())
                    .count();
                // Redis's side only while its state is this run's: an old or lost one sells
                // nothing until it is rebuilt.
                (!Self::trusted(s) || s.redis_stock as i32 + held_in_redis as i32 <= units as i32)
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
                    orders <= 1 && (records <= 1 || !Self::trusted(s))
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
                        s.answers[i] != Some(Answer::Accepted) || (redis_ok && mysql_ok)
                    })
            }),
            Property::always(UNITS_COME_BACK_ONCE, |m: &Seckill, s: &State| {
                if !m.quiet(s) {
                    return true;
                }
                let units = m.bounds.units as usize;
                let held_in_redis = s
                    .records
                    .iter()
                    .flatten()
                    .filter(|r| r.status.holds_unit())
                    .count();
                let held_in_mysql = s
                    .orders
                    .iter()
                    .flatten()
                    .filter(|o| o.status.holds_unit())
                    .count();
                let buyers_right = (0..s.buyers.len() as u8).all(|u| {
                    let live = m.tickets().find(|&t| {
                        m.owner(t) == u
                            && s.orders[t as usize].is_some_and(|o| o.status.holds_unit())
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
}
