//! The table itself: every transition of a ticket, its steps in order, and what a crash
//! after each leaves behind.

use super::{Actor, Step, Store, Transition, TransitionId};

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
                effect: "if stock >= q (the order's units) and the buyer is not in `buyers`: stock -= q, \
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
                op: "release.lua",
                effect: "(publish failed) only if still pending, not located on its record \
                         (a buy again's locate_held.lua), and the state is this \
                         Redis run's (else the stock key is dropped: rebuilt): record = \
                         failed(kafka_unavailable), buyer freed, stock += q. Else the record \
                         is read: failed by another actor (the sweeper's expire, a worker): \
                         answer 503. Otherwise the next step",
                crash_leaves: "(a crash before it: as after publish) failed in Redis alone, \
                               no answer: a message that reached Kafka and is delivered after \
                               Redis lost it is settled as a new order, the buyer's",
                before: Some(
                    "it also acted on another run's (maybe old) state; and answered 503 \
                     when the ticket had moved on to a worker",
                ),
            },
            Step {
                store: Store::MySql,
                op: "insert failed_tickets(kafka_unavailable) + answer",
                effect: "under the product's row lock, unless the ticket has an order row \
                         (an existing failed row is kept): the failure outlives a Redis that \
                         loses it, and a worker that has the message, or gets it later, \
                         fails the ticket. An order row holding a unit: answer 202; else \
                         503. MySQL down: the record decides (processing, confirmed or paid: \
                         202; else 503)",
                crash_leaves: "failed in MySQL (and in Redis, if released), no answer",
                before: Some(
                    "only Redis knew of the failure: a message delivered again after Redis \
                     lost it or came back old was confirmed for the buyer told 503; and a \
                     ticket a worker had claimed was answered 202 from the record alone",
                ),
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
                     (the model's buy again starts once the first request is over, or \
                     while it releases after a failed publish: an e2e test tries the rest)",
                ),
            },
            Step {
                store: Store::Kafka,
                op: "publish again",
                effect: "the order message again (a second message of one order changes \
                         nothing); on failure (the message may have reached Kafka all the \
                         same) go to release.lua, as a buy does",
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
            Step {
                store: Store::Redis,
                op: "release.lua, then as a buy's",
                effect: "(publish again failed) the buy's last two steps: release.lua, then \
                         failed_tickets(kafka_unavailable) and the answer, 200 with the ticket \
                         if the order stands, else 503",
                crash_leaves: "as the buy's",
                before: Some(
                    "answered 503 and left the ticket pending: a message that landed all the \
                     same was confirmed for a buyer told 503",
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
                         live order -> Failed(duplicate_user); else MySQL stock < q -> \
                         Failed(out_of_stock); else insert the order (confirmed), stock -= q. \
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
                         pending/processing -> failed(reason), buyer freed, stock += q; for \
                         out_of_stock 'heal': no unit back, unless the stock is below zero \
                         after a rebuild: then up to q, to zero)",
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
                         stock += q",
                crash_leaves: "failed(expired) in Redis only: a late message's claim skips \
                               it, MySQL never hears of the ticket",
                before: Some("it also acted on another run's (maybe old) state"),
            },
            Step {
                store: Store::MySql,
                op: "insert failed_tickets(expired)",
                effect: "only when compensate.lua changed the record; under the product's \
                         row lock, and only where the ticket has no order row",
                crash_leaves: "nothing left to do, unless MySQL already had another \
                               reason: then Redis says expired until a reconcile",
                before: Some(
                    "inserted unconditionally, even when a worker had claimed the ticket \
                     meanwhile (compensate.lua changed nothing), or had confirmed it after \
                     a Redis loss",
                ),
            },
            Step {
                store: Store::Redis,
                op: "fail_reason.lua",
                effect: "only when MySQL already had a failed_tickets row of another reason \
                         (a gateway's kafka_unavailable, for a record that came back pending \
                         from an older snapshot): a failed record takes MySQL's reason",
                crash_leaves: "nothing left to do",
                before: Some("Redis kept `expired` beside MySQL's other reason"),
            },
        ],
    },
    Transition {
        id: TransitionId::SettleStuck,
        name: "settle stuck",
        actors: &[Actor::Sweeper],
        when: "before issue 32's fixes, the sweeper, for a processing record past the timeout (it \
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
                         failed(lost), buyer freed, stock += q)",
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
                         confirmed order row: -> cancelled, restore_due = 1, MySQL stock += q",
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
                         stock += q (a worker's later confirm.lua then leaves it alone); \
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
                effect: "stock = MySQL stock less the units in flight (a product in \
                         buckets, whose buckets never go below zero: split over them, or, \
                         below zero, no stock key until the orders in flight settle); \
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
