//! The model's state: the three stores, the answers given to buyers, every actor's place in
//! the transition it is taking; and the actions.

use super::fixes::{Bounds, Fixes};
use seckill_shared::lifecycle::{
    self, Actor, FailReason, OrderStatus, Outcome, PaymentStatus, RecordStatus, TransitionId,
};

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
    /// Both, to two requests of one buyer (the first one and a buy again): a contradiction.
    Both,
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
    /// Release changed nothing: read the record. Failed: 503; else MySQL decides (before that
    /// fix: 202 if a worker has the order).
    ReadMovedOn,
    /// Released: `failed_tickets(kafka_unavailable)` unless an order row stands (then 202).
    RecordUnavailable,
    // settle
    Claim,
    Write,
    /// The Redis script that follows the MySQL outcome (also settle stuck's second step).
    Follow(Outcome),
    // expire pending
    ExpirePending,
    InsertExpired,
    /// `restore.lua` with the reason of the row MySQL already had.
    FollowFailedRow(FailReason),
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
    pub(crate) fn then(self, op: Op) -> Option<Job> {
        Some(Job { op, ..self })
    }

    /// This step's row in the lifecycle table.
    fn table_step(self) -> &'static lifecycle::Step {
        use TransitionId as T;
        let index = match (self.transition, self.op) {
            (T::Buy, Op::Publish) => 1,
            (T::Buy, Op::Locate) => 2,
            (T::Buy, Op::Release) => 3,
            (T::Buy, Op::ReadMovedOn) => 3,
            (T::Buy, Op::RecordUnavailable) => 4,
            (T::BuyAgain, Op::Publish) => 1,
            (T::BuyAgain, Op::LocateHeld) => 2,
            (T::BuyAgain, Op::Release | Op::ReadMovedOn | Op::RecordUnavailable) => 3,
            (T::Settle, Op::Claim) => 0,
            (T::Settle, Op::Write) => 1,
            (T::Settle, Op::Follow(_)) => 2,
            (T::ExpirePending, Op::ExpirePending) => 0,
            (T::ExpirePending, Op::InsertExpired) => 1,
            (T::ExpirePending, Op::FollowFailedRow(_)) => 2,
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
    pub(crate) fn label(self) -> String {
        match self.op {
            Op::Follow(outcome) => outcome.redis_script().to_string(),
            Op::InsertPayment => "insert payment (unsent)".to_string(),
            Op::ReadMovedOn => "read the record".to_string(),
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
    /// The gateway serving a buy again of this ticket (its buyer's second request).
    Again(u8),
}

impl State {
    /// The gateway answers ticket `i`'s buyer (a second, different answer makes it `Both`).
    pub(crate) fn answer(&mut self, i: usize, answer: Answer) {
        self.answers[i] = Some(match self.answers[i] {
            Some(was) if was != answer => Answer::Both,
            _ => answer,
        });
    }
}

impl Who {
    pub fn actor(self) -> Actor {
        match self {
            Who::Gateway(_) | Who::Again(_) => Actor::Gateway,
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
    /// Per ticket: its buy again.
    pub again: Vec<Slot>,
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
        /// The buy's gateway, or a buy again's.
        who: Who,
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

impl Seckill {
    pub fn new(fixes: Fixes, bounds: Bounds) -> Self {
        assert!(bounds.sweepers >= 1, "the stuck check runs sweeper 1");
        Seckill { fixes, bounds }
    }

    pub(crate) fn tickets(&self) -> impl Iterator<Item = u8> + use<> {
        0..self.bounds.owners.len() as u8
    }

    pub(crate) fn owner(&self, ticket: u8) -> u8 {
        self.bounds.owners[ticket as usize]
    }

    /// The units of `ticket`'s order.
    pub(crate) fn qty(&self, ticket: u8) -> u8 {
        self.bounds
            .quantities
            .get(ticket as usize)
            .copied()
            .unwrap_or(1)
    }

    /// The units held by the tickets whose entry `holds` says so: a record or an order.
    pub(crate) fn units_held<T>(&self, entries: &[Option<T>], holds: impl Fn(&T) -> bool) -> usize {
        entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.as_ref().is_some_and(&holds))
            .map(|(t, _)| usize::from(self.qty(t as u8)))
            .sum()
    }
}
