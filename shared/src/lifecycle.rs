//! The lifecycle of a ticket, written down as data.
//!
//! A buyer's purchase lives in three stores at once: Redis (the fast path: stock counter,
//! `buyers` hash, one record per ticket), Kafka (the order message) and MySQL (the system of
//! record: `products.stock`, `orders`, `failed_tickets`, `payments`). No store is written
//! together with another, so every transition below is a *sequence* of atomic steps (one Lua
//! script, one MySQL transaction, one Kafka publish, one HTTP answer), and an actor can stop
//! between any two of them: it crashes, or another actor's step runs in between.
//!
//! This module holds no behaviour. It names the states as the model sees them
//! ([`RecordStatus`], [`OrderStatus`], [`PaymentStatus`], [`FailReason`]: the same as
//! `store::RecordStatus` and the MySQL columns, with a failure's reason folded in), the actors
//! ([`Actor`]) and the table of [`TRANSITIONS`]: who takes each one, its steps in order, and
//! what a crash right after each step leaves behind. [`markdown_table`] renders the table;
//! `docs/DESIGN.md` holds it, and a test keeps the two the same. The model checker
//! (`shared/tests/lifecycle_model`) runs the same steps (its trace labels come from this
//! table) and checks that no interleaving and no crash breaks a promise; the step harness
//! (`tests/e2e/interleavings/`) runs the real scripts and transactions in chosen
//! orders.
//!
//! The table describes the code as it is. Where the code before issue 32's fixes differed,
//! the step says so in [`Step::before`]; the model can run either.

/// Who takes a step.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum Actor {
    /// The gateway, serving one buyer's `buy` request.
    Gateway,
    /// A Kafka consumer settling order messages.
    Worker,
    /// The sweeper: any number of them, each reads a ticket record and then acts on what it read.
    Sweeper,
    /// The expiry task: cancels an order that was not paid by its deadline.
    Expiry,
    /// The buyer, through the API (cancel, pay).
    Buyer,
    /// The `restore_due` recovery: finishes a cancel whose actor stopped after its MySQL commit.
    Recovery,
    /// The payment provider's callback (success or decline of one charge).
    Provider,
    /// Whoever rebuilds a product's Redis state from MySQL: a gateway, worker or sweeper
    /// that found it lost, the admin's reconcile, or a preload of a product already on sale.
    Reconcile,
}

impl Actor {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// Why a ticket failed. Kept in the Redis record and in MySQL's `failed_tickets`: the
/// reasons of [`crate::FailureReason`] that the model follows, with the same text.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum FailReason {
    /// Kafka refused the message; the gateway released the unit and answered 503.
    KafkaUnavailable,
    /// Reserved, but the order never reached a worker in time (no 202 was given).
    Expired,
    /// The gateway's sync mode found no order for a ticket whose own settle failed ("settle
    /// stuck"; the model's old-code variant also lets the sweeper take it).
    Lost,
    /// MySQL had no unit left for a reservation Redis had made.
    OutOfStock,
    /// The buyer already holds a live order.
    DuplicateUser,
}

impl FailReason {
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The code's reason of the same name.
    pub fn code(self) -> crate::FailureReason {
        match self {
            FailReason::KafkaUnavailable => crate::FailureReason::KafkaUnavailable,
            FailReason::Expired => crate::FailureReason::Expired,
            FailReason::Lost => crate::FailureReason::Lost,
            FailReason::OutOfStock => crate::FailureReason::OutOfStock,
            FailReason::DuplicateUser => crate::FailureReason::DuplicateUser,
        }
    }

    /// Whether a buyer who was answered 202 may be told this reason in the end. `lost` and
    /// `expired` are the system's own failures: after a 202 they break the promise.
    pub fn may_follow_a_202(self) -> bool {
        matches!(self, FailReason::OutOfStock | FailReason::DuplicateUser)
    }
}

/// The status in a ticket's Redis record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RecordStatus {
    /// Reserved by `reserve.lua`; the order is on its way to (or in) Kafka.
    Pending,
    /// Claimed by a worker (or a sweeper) that is writing it to MySQL.
    Processing,
    Confirmed,
    Paid,
    Cancelled,
    Failed(FailReason),
}

impl RecordStatus {
    /// Whether a ticket in this status holds one unit of stock (taken from Redis's counter by
    /// `reserve.lua` and not given back yet).
    pub fn holds_unit(self) -> bool {
        matches!(
            self,
            RecordStatus::Pending
                | RecordStatus::Processing
                | RecordStatus::Confirmed
                | RecordStatus::Paid
        )
    }

    /// Whether some actor still has to move this ticket on (a worker or the sweeper).
    pub fn in_flight(self) -> bool {
        matches!(self, RecordStatus::Pending | RecordStatus::Processing)
    }

    pub fn name(self) -> String {
        match self {
            RecordStatus::Pending => "pending".into(),
            RecordStatus::Processing => "processing".into(),
            RecordStatus::Confirmed => "confirmed".into(),
            RecordStatus::Paid => "paid".into(),
            RecordStatus::Cancelled => "cancelled".into(),
            RecordStatus::Failed(r) => format!("failed({})", r.name()),
        }
    }
}

/// The status of a MySQL `orders` row.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum OrderStatus {
    Confirmed,
    Paid,
    Cancelled,
}

impl OrderStatus {
    /// Whether the order holds one unit of MySQL's stock.
    pub fn holds_unit(self) -> bool {
        matches!(self, OrderStatus::Confirmed | OrderStatus::Paid)
    }

    /// The Redis record status that agrees with this order.
    pub fn record(self) -> RecordStatus {
        match self {
            OrderStatus::Confirmed => RecordStatus::Confirmed,
            OrderStatus::Paid => RecordStatus::Paid,
            OrderStatus::Cancelled => RecordStatus::Cancelled,
        }
    }

    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// The status of one MySQL `payments` row (one charge attempt of an order): the code's own.
pub use crate::payments::PaymentStatus;

/// What a settle's MySQL transaction decided for a ticket; Redis follows with the script of
/// [`Outcome::redis_script`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    Confirmed,
    Paid,
    Cancelled,
    Failed(FailReason),
}

impl Outcome {
    pub fn redis_script(self) -> &'static str {
        match self {
            Outcome::Confirmed => "confirm.lua",
            Outcome::Paid => "paid.lua",
            Outcome::Cancelled => "cancel.lua",
            Outcome::Failed(FailReason::OutOfStock) => "compensate.lua 'heal'",
            Outcome::Failed(_) => "compensate.lua 'any'",
        }
    }

    pub fn name(self) -> String {
        match self {
            Outcome::Confirmed => "Confirmed".into(),
            Outcome::Paid => "Paid".into(),
            Outcome::Cancelled => "Cancelled".into(),
            Outcome::Failed(r) => format!("Failed({})", r.name()),
        }
    }
}

/// Where a step reads and writes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::Display, strum::VariantArray,
)]
pub enum Store {
    Redis,
    #[strum(serialize = "MySQL")]
    MySql,
    Kafka,
    /// The HTTP answer to the buyer.
    #[strum(serialize = "answer")]
    Answer,
}

impl Store {
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One atomic step of a transition.
#[derive(Debug)]
pub struct Step {
    pub store: Store,
    /// The script, statement or call, as named in the code.
    pub op: &'static str,
    /// What it reads and writes.
    pub effect: &'static str,
    /// What an actor that stops right after this step leaves behind, and who picks it up.
    pub crash_leaves: &'static str,
    /// How the code before issue 32's fixes differed at this step, if it did.
    pub before: Option<&'static str>,
}

/// The transitions of a ticket's lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransitionId {
    Buy,
    BuyAgain,
    Settle,
    ExpirePending,
    SettleStuck,
    Cancel,
    RestoreDue,
    Pay,
    PaymentCallback,
    DropOld,
    Rebuild,
}

/// One row group of the table: a transition, who may take it, and its steps in order.
#[derive(Debug)]
pub struct Transition {
    pub id: TransitionId,
    pub name: &'static str,
    pub actors: &'static [Actor],
    /// When the actor takes it.
    pub when: &'static str,
    pub steps: &'static [Step],
}

/// Every transition, in the order a ticket usually meets them.
pub const TRANSITIONS: &[Transition] = &[
    Transition {
        id: TransitionId::Buy,
        name: "buy",
        actors: &[Actor::Gateway],
        when: "a buyer's buy request",
        steps: &[
            Step {
                store: Store::Redis,
                op: "reserve.lua",
                effect: "if stock > 0 and the buyer is not in `buyers`: stock -= 1, \
                         buyers[user] = ticket, record = pending (no location); else refuse. \
                         A state another Redis run wrote (epoch.lua) sells nothing: its stock \
                         is dropped, the buy gets 503 and the product is rebuilt",
                crash_leaves: "pending, no message, no location, no answer: the sweeper \
                               expires it (expire pending), unless the buyer buys again \
                               first: that buy publishes and locates the order before its \
                               200",
                before: Some("the buy again answered 200 and left it to the sweeper to expire"),
            },
            Step {
                store: Store::Kafka,
                op: "publish",
                effect: "the order message (ticket, user); on failure (the message may have \
                         reached Kafka all the same) go to release.lua",
                crash_leaves: "pending, a message, no location, no answer: a worker settles \
                               it, or the sweeper expires it first and the worker's claim \
                               skips it",
                before: None,
            },
            Step {
                store: Store::Redis,
                op: "locate + 202",
                effect: "record the message's Kafka location on the record, then answer 202 \
                         with the ticket: the promise",
                crash_leaves: "nothing left to do: a worker settles the message, or, if \
                               Kafka lost it, the sweeper completes the located ticket",
                before: None,
            },
            Step {
                store: Store::Redis,
                op: "release.lua + 503",
                effect: "(publish failed) only if still pending, not located on its record \
                         (a buy again's locate_held.lua), and the state is this \
                         Redis run's (else the stock key is dropped: rebuilt): record = \
                         failed(kafka_unavailable), buyer freed, stock += 1; answer 503",
                crash_leaves: "(a crash before it: as after publish)",
                before: Some("it also acted on another run's (maybe old) state"),
            },
        ],
    },
    Transition {
        id: TransitionId::BuyAgain,
        name: "buy again",
        actors: &[Actor::Gateway],
        when: "a buyer buys again while holding a pending ticket with no location, older than \
               any publish of it can take (its gateway died before Kafka took the order, or \
               before it recorded where)",
        steps: &[
            Step {
                store: Store::Redis,
                op: "read the held record",
                effect: "pending, no location on the record nor in the bucket's list: if \
                         younger than any publish can take (the first request may still be \
                         under way), wait until it is located, moves on, or is that old; \
                         then publish it again; anything else: answer 200 with the record",
                crash_leaves: "nothing changed",
                before: Some(
                    "a younger one was answered 200 at once: when its first gateway died \
                     before Kafka took it, nothing was in Kafka and the sweeper expired it \
                     (not in the model, whose buy again starts once the first request is \
                     over: an e2e test tries it)",
                ),
            },
            Step {
                store: Store::Kafka,
                op: "publish again",
                effect: "the order message again (a second message of one order changes \
                         nothing); on failure answer 503",
                crash_leaves: "as after the buy's publish: a worker settles it, or the \
                               sweeper expires it first and the claim skips it; the buyer had \
                               no 200",
                before: None,
            },
            Step {
                store: Store::Redis,
                op: "locate_held.lua + 200",
                effect: "the location in the bucket's list, and on the record only while it \
                         is pending (compensate.lua 'pending_only' never fails a ticket \
                         located so); then 200 with the ticket, or with the failed record \
                         if the sweeper expired it first",
                crash_leaves: "nothing left to do",
                before: Some(
                    "the location went to the bucket's list only, and 200 answered the record \
                     read before: a sweeper that had read no location just before still \
                     expired the ticket after that 200",
                ),
            },
        ],
    },
    Transition {
        id: TransitionId::Settle,
        name: "settle",
        actors: &[Actor::Worker, Actor::Sweeper],
        when: "a worker, per delivered message; the sweeper, for a pending ticket with a \
               location (its message may be lost) and for a processing one (skipping the \
               claim)",
        steps: &[
            Step {
                store: Store::Redis,
                op: "claim.lua",
                effect: "pending -> processing; processing stays claimed (a redelivery); \
                         anything else: skip the ticket",
                crash_leaves: "processing, no MySQL row: the message is redelivered (the \
                               claim keeps it), or the sweeper settles the processing ticket",
                before: None,
            },
            Step {
                store: Store::MySql,
                op: "MySQL tx",
                effect: "lock the product row; an order row exists -> its status decides \
                         (confirmed: Confirmed, paid: Paid, cancelled: Cancelled); else a \
                         failed_tickets row -> Failed(its reason); else the buyer holds a \
                         live order -> Failed(duplicate_user); else MySQL stock <= 0 -> \
                         Failed(out_of_stock); else insert the order (confirmed), stock -= 1. \
                         A failure inserts its failed_tickets row",
                crash_leaves: "MySQL has decided, Redis is still processing: a redelivery \
                               or the sweeper runs this transaction again and finds the same \
                               row",
                before: Some(
                    "an existing order row always yields Confirmed, even a cancelled or \
                     paid one",
                ),
            },
            Step {
                store: Store::Redis,
                op: "follow",
                effect: "Confirmed: confirm.lua (only processing -> confirmed); Paid: \
                         paid.lua (processing or confirmed -> paid); Cancelled: cancel.lua; \
                         Failed: compensate.lua (only \
                         pending/processing -> failed(reason), buyer freed, stock += 1; for \
                         out_of_stock 'heal': no unit back, unless the stock is below zero \
                         after a rebuild)",
                crash_leaves: "nothing left to do",
                before: Some(
                    "'heal' never gave a unit back: a stock a rebuild set below zero \
                     stayed there",
                ),
            },
        ],
    },
    Transition {
        id: TransitionId::ExpirePending,
        name: "expire pending",
        actors: &[Actor::Sweeper],
        when: "the sweeper read a pending record without a location, past the timeout (the \
               gateway's request is over: it crashed before its 202)",
        steps: &[
            Step {
                store: Store::Redis,
                op: "compensate.lua 'pending_only'",
                effect: "only if still pending, not located on its record (a buy again's \
                         locate_held.lua), and the state is this Redis run's (else the stock \
                         key is dropped: rebuilt): record = failed(expired), buyer freed, \
                         stock += 1",
                crash_leaves: "failed(expired) in Redis only: a late message's claim skips \
                               it, MySQL never hears of the ticket",
                before: Some("it also acted on another run's (maybe old) state"),
            },
            Step {
                store: Store::MySql,
                op: "insert failed_tickets(expired)",
                effect: "only when compensate.lua changed the record; under the product's \
                         row lock, and only where the ticket has no order row",
                crash_leaves: "nothing left to do",
                before: Some(
                    "inserted unconditionally, even when a worker had claimed the ticket \
                     meanwhile (compensate.lua changed nothing), or had confirmed it after \
                     a Redis loss",
                ),
            },
        ],
    },
    Transition {
        id: TransitionId::SettleStuck,
        name: "settle stuck",
        actors: &[Actor::Sweeper],
        when: "before 2026-12-04, the sweeper, for a processing record past the timeout (it \
               now completes it: settle); today only the gateway's sync mode, for its own \
               ticket whose settle failed (its buyer has no answer yet)",
        steps: &[
            Step {
                store: Store::MySql,
                op: "MySQL tx (stuck)",
                effect: "lock the product row; an order row exists -> commit; else insert \
                         failed_tickets(lost) if none",
                crash_leaves: "as settle after its MySQL tx",
                before: Some(
                    "the sweeper took it, and failed a ticket a worker or another sweeper \
                     was still settling",
                ),
            },
            Step {
                store: Store::Redis,
                op: "confirm.lua / compensate.lua 'any'",
                effect: "an order: confirm.lua; else compensate.lua 'any' (processing -> \
                         failed(lost), buyer freed, stock += 1)",
                crash_leaves: "nothing left to do",
                before: None,
            },
        ],
    },
    Transition {
        id: TransitionId::Cancel,
        name: "cancel",
        actors: &[Actor::Expiry, Actor::Buyer],
        when: "the expiry, for an unpaid order past its deadline; the buyer, for its own \
               order",
        steps: &[
            Step {
                store: Store::MySql,
                op: "MySQL tx (cancel)",
                effect: "the product's row locked first (as a batch does), then only a \
                         confirmed order row: -> cancelled, restore_due = 1, MySQL stock += 1",
                crash_leaves: "restore_due = 1: the restore_due recovery runs cancel.lua",
                before: Some(
                    "the expiry locked the orders' rows first, then the product's: a batch \
                     holding the product and reading a redelivered order's row deadlocked \
                     with it",
                ),
            },
            Step {
                store: Store::Redis,
                op: "cancel.lua",
                effect: "pending, processing or confirmed -> cancelled, buyer freed, \
                         stock += 1 (a worker's later confirm.lua then leaves it alone); \
                         else nothing",
                crash_leaves: "restore_due = 1: the recovery runs cancel.lua again (a no-op) \
                               and clears it",
                before: Some(
                    "only a confirmed record is cancelled: a processing one (a worker \
                     between its MySQL commit and confirm.lua) is left alone, so the unit \
                     never comes back to Redis and the buyer stays in `buyers`",
                ),
            },
            Step {
                store: Store::MySql,
                op: "clear restore_due",
                effect: "restore_due = 0",
                crash_leaves: "nothing left to do",
                before: Some("cleared whatever cancel.lua did"),
            },
        ],
    },
    Transition {
        id: TransitionId::RestoreDue,
        name: "restore due",
        actors: &[Actor::Recovery],
        when: "an order row with restore_due = 1",
        steps: &[
            Step {
                store: Store::Redis,
                op: "cancel.lua",
                effect: "as in cancel",
                crash_leaves: "restore_due = 1: runs again",
                before: None,
            },
            Step {
                store: Store::MySql,
                op: "clear restore_due",
                effect: "restore_due = 0",
                crash_leaves: "nothing left to do",
                before: None,
            },
        ],
    },
    Transition {
        id: TransitionId::Pay,
        name: "pay",
        actors: &[Actor::Buyer],
        when: "a pay request (a buyer may send two, from two devices, with different keys)",
        steps: &[
            Step {
                store: Store::MySql,
                op: "MySQL tx (pay)",
                effect: "lock the order row; only a confirmed order with no payment \
                         processing (nor unsent and younger than a provider call): insert a \
                         payment (unsent). An older unsent one is claimed (stamped now) and sent \
                         again instead; a failed send gives the claim back",
                crash_leaves: "an unsent payment (not modelled: the pay request does not \
                               crash in the model)",
                before: Some(
                    "a plain read of the order and of the payments in progress, then the \
                     insert in its own statement: two requests can both pass the read",
                ),
            },
            Step {
                store: Store::MySql,
                op: "send to provider",
                effect: "payment unsent -> processing: the provider may charge",
                crash_leaves: "nothing left to do: the provider calls back",
                before: None,
            },
        ],
    },
    Transition {
        id: TransitionId::PaymentCallback,
        name: "payment callback",
        actors: &[Actor::Provider],
        when: "the provider's answer to a processing payment",
        steps: &[
            Step {
                store: Store::MySql,
                op: "MySQL tx (callback)",
                effect: "declined: payment declined. Succeeded: the order confirmed (and \
                         within its deadline) -> paid and the payment succeeded; else the \
                         payment refund_due",
                crash_leaves: "paid in MySQL with restore_due = 1, not yet in Redis: \
                               a worker's expiry round runs paid.lua and clears it (not \
                               modelled: the callback does not crash in the model; the step \
                               harness tries it)",
                before: None,
            },
            Step {
                store: Store::Redis,
                op: "paid.lua",
                effect: "processing or confirmed -> paid (a worker's later confirm.lua \
                         then leaves it alone); no record (Redis lost it) -> a paid one, \
                         which a rebuild that read MySQL before the payment leaves alone",
                crash_leaves: "nothing left to do",
                before: Some(
                    "only confirmed -> paid: a payment that succeeds while a worker is \
                     between its MySQL commit and confirm.lua leaves the record processing, \
                     and the worker's confirm.lua then makes it confirmed for good; a lost \
                     record stayed lost, and the rebuild wrote the confirmed it read",
                ),
            },
        ],
    },
    Transition {
        id: TransitionId::DropOld,
        name: "drop an old state",
        actors: &[Actor::Gateway, Actor::Worker, Actor::Sweeper],
        when: "Redis came back old: restarted from a snapshot or an AOF that missed the last \
               writes, or failed over to a replica that lagged",
        steps: &[Step {
            store: Store::Redis,
            op: "reserve.lua / epoch.lua / claim.lua",
            effect: "reserve.lua (each buy) and epoch.lua (each sweep): the meta's run_id is \
                     another Redis run's; claim.lua: the record of an order reserved since \
                     the last rebuild, younger than the record TTL, is gone. Either way: \
                     DEL the stock key, so the product counts as lost (buys get 503) and \
                     is rebuilt",
            crash_leaves: "nothing: the script is atomic",
            before: Some("not detected: an old state went on selling"),
        }],
    },
    Transition {
        id: TransitionId::Rebuild,
        name: "rebuild",
        actors: &[Actor::Reconcile],
        when: "the product is lost (no stock key: Redis lost its data, or an old state was \
               dropped); also the admin's reconcile, and a preload of a product on sale",
        steps: &[
            Step {
                store: Store::Kafka,
                op: "fence",
                effect: "wait out the delivery timeout (publishes under way land), write a \
                         fence message per partition and wait until the workers' committed \
                         offsets pass it: every order published before is settled, or \
                         adopted by claim.lua (a lost record comes back processing, with its \
                         buyer and pending entry) and counted in flight",
                crash_leaves: "still no stock key: the next buy, claim or sweep starts \
                               again",
                before: None,
            },
            Step {
                store: Store::MySql,
                op: "read (row lock)",
                effect: "lock the product row (no settle or cancel commits until the \
                         end); stop if another process rebuilt it meanwhile; read the \
                         stock, the orders and failed_tickets",
                crash_leaves: "the lock goes with the connection: as after the fence",
                before: None,
            },
            Step {
                store: Store::Redis,
                op: "restore.lua + prune",
                effect: "per settled ticket, its record as MySQL has it, unless Redis has it \
                         settled already (a confirmed order's record may be paid or \
                         cancelled since); buyers set for confirmed and paid orders; pending \
                         entries whose record is gone pruned",
                crash_leaves: "records restored, still no stock key: the next rebuild does \
                               it again",
                before: None,
            },
            Step {
                store: Store::Redis,
                op: "rebuild.lua + commit",
                effect: "stock = MySQL stock less the tickets in flight (a product in \
                         buckets, whose buckets never go below zero: split over them, or, \
                         below zero, no stock key until the tickets in flight settle); \
                         meta: counters, loaded_at = now, run_id = this Redis run; the \
                         commit releases the row lock",
                crash_leaves: "nothing left to do",
                before: None,
            },
        ],
    },
];

/// The transition with this id.
pub fn transition(id: TransitionId) -> &'static Transition {
    TRANSITIONS
        .iter()
        .find(|t| t.id == id)
        .expect("every TransitionId has a row in TRANSITIONS")
}

/// The table as Markdown: one line per step; a transition's name, actors and occasion on
/// its first step.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| transition | who, when | # | store | step | effect | a crash right after leaves | before 2026-12-04 |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for t in TRANSITIONS {
        let actors: Vec<&str> = t.actors.iter().map(|a| a.name()).collect();
        for (i, s) in t.steps.iter().enumerate() {
            let (name, who) = if i == 0 {
                (
                    t.name.to_string(),
                    format!("{}: {}", actors.join(", "), t.when),
                )
            } else {
                (String::new(), String::new())
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                name,
                who,
                i + 1,
                s.store.name(),
                s.op,
                s.effect,
                s.crash_leaves,
                s.before.unwrap_or(""),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's names, pinned: they label the model checker's traces and the table in
    /// `docs/DESIGN.md`, and a failure's reason is the code's text.
    #[test]
    fn names_are_pinned() {
        use strum::VariantArray;
        let actors = [
            (Actor::Gateway, "gateway"),
            (Actor::Worker, "worker"),
            (Actor::Sweeper, "sweeper"),
            (Actor::Expiry, "expiry"),
            (Actor::Buyer, "buyer"),
            (Actor::Recovery, "recovery"),
            (Actor::Provider, "provider"),
            (Actor::Reconcile, "reconcile"),
        ];
        assert_eq!(actors.len(), Actor::VARIANTS.len());
        for (a, name) in actors {
            assert_eq!((a.name(), a.to_string()), (name, name.to_owned()));
        }
        let reasons = [
            (FailReason::KafkaUnavailable, "kafka_unavailable"),
            (FailReason::Expired, "expired"),
            (FailReason::Lost, "lost"),
            (FailReason::OutOfStock, "out_of_stock"),
            (FailReason::DuplicateUser, "duplicate_user"),
        ];
        assert_eq!(reasons.len(), FailReason::VARIANTS.len());
        for (r, name) in reasons {
            assert_eq!(r.name(), name);
            assert_eq!(r.code().as_str(), name);
        }
        let orders = [
            (OrderStatus::Confirmed, "confirmed"),
            (OrderStatus::Paid, "paid"),
            (OrderStatus::Cancelled, "cancelled"),
        ];
        assert_eq!(orders.len(), OrderStatus::VARIANTS.len());
        for (o, name) in orders {
            assert_eq!(o.name(), name);
            assert_eq!(
                crate::OrderStatus::parse(o.name()).map(|c| c.as_str()),
                Some(name)
            );
        }
        let stores = [
            (Store::Redis, "Redis"),
            (Store::MySql, "MySQL"),
            (Store::Kafka, "Kafka"),
            (Store::Answer, "answer"),
        ];
        assert_eq!(stores.len(), Store::VARIANTS.len());
        for (st, name) in stores {
            assert_eq!(st.name(), name);
        }
    }

    #[test]
    fn each_transition_has_one_row_and_steps() {
        for t in TRANSITIONS {
            assert_eq!(TRANSITIONS.iter().filter(|u| u.id == t.id).count(), 1);
            assert!(!t.steps.is_empty(), "{} has no steps", t.name);
            assert!(!t.actors.is_empty(), "{} has no actor", t.name);
        }
    }

    /// `docs/DESIGN.md` holds the table as [`markdown_table`] renders it, between its
    /// markers. `UPDATE_DESIGN_TABLE=1 cargo test -p seckill-shared --lib lifecycle` writes
    /// it there.
    #[test]
    fn the_design_doc_holds_this_table() {
        const BEGIN: &str = "<!-- lifecycle table: seckill_shared::lifecycle::markdown_table -->\n";
        const END: &str = "<!-- end of the lifecycle table -->";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/DESIGN.md");
        let doc = std::fs::read_to_string(path).expect("reading docs/DESIGN.md");
        let start = doc
            .find(BEGIN)
            .expect("the table's first marker in docs/DESIGN.md")
            + BEGIN.len();
        let end = start + doc[start..].find(END).expect("the table's last marker");
        let table = markdown_table();
        if doc[start..end] != table && std::env::var_os("UPDATE_DESIGN_TABLE").is_some() {
            std::fs::write(path, format!("{}{table}{}", &doc[..start], &doc[end..]))
                .expect("writing docs/DESIGN.md");
            return;
        }
        assert!(
            doc[start..end] == table,
            "docs/DESIGN.md's lifecycle table differs from the module's; \
             UPDATE_DESIGN_TABLE=1 cargo test -p seckill-shared --lib lifecycle rewrites it"
        );
    }

    #[test]
    fn the_markdown_table_has_a_line_per_step() {
        let table = markdown_table();
        let steps: usize = TRANSITIONS.iter().map(|t| t.steps.len()).sum();
        assert_eq!(table.lines().count(), 2 + steps);
        // No cell may break the table.
        for line in table.lines() {
            assert_eq!(line.matches('|').count(), 9, "{line}");
        }
    }
}
