//! The actors that meet on a sale's tickets (workers, sweepers, the buyer's cancel, the payment
//! expiry, a gateway whose publish failed, a Redis that loses its data), each one step at a
//! time: one step is one Lua script or one MySQL transaction.

use crate::helpers::*;
use seckill_shared::payments as payment;
use seckill_shared::payments::attempts as payments;
use seckill_shared::payments::cancel::{self, BuyerCancel, Cancelled};
use seckill_shared::recovery::{self, SweepAction, SweepRules};
use seckill_shared::reservation::failed_publish::{self, Release, Verdict};
use seckill_shared::settle::{Claimed, Outcome, Settler};
use seckill_shared::{now_ms, OrderMessage, ProductId};
use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

/// The sweeper's rules in the harness: every unsettled ticket is due at once.
pub(crate) const DUE_NOW: SweepRules = SweepRules {
    timeout: Duration::ZERO,
    last_resort: Duration::from_secs(3600),
};

/// The expiry runs this far ahead of the clock, so that every payment deadline has passed;
/// its cancels are stamped with that time.
pub(crate) const EXPIRY_AHEAD_MS: i64 = 86_400_000;

/// One ticket of the sale, as its buyer got it.
#[derive(Clone)]
pub(crate) struct Bought {
    pub(crate) order: OrderMessage,
    /// Kafka acknowledged its order, at this offset of partition 0: the buyer holds a `202`,
    /// and the sweeper knows the location.
    pub(crate) offset: Option<i64>,
}

/// A sale on the real stores: one product with a payment window, and its tickets.
pub(crate) struct Sale {
    pub(crate) product: ProductId,
    pub(crate) initial: i64,
    pub(crate) bought: Vec<Bought>,
    pub(crate) settler: Settler,
}

/// The harness's next move.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pick {
    /// The n-th (modulo) of the actors not done yet takes its next step, or crashes.
    Nth(u8, bool),
    /// This actor takes its next step.
    Actor(usize),
    /// This actor crashes.
    Crash(usize),
}

/// Where one actor is.
pub(crate) enum Step {
    Start,
    Claimed(Claimed),
    Persisted(Claimed, Vec<Outcome>),
    Cancelled(Vec<Cancelled>),
    /// A payment sent to the provider.
    Paying(String),
    /// A payment that paid this order.
    Paid(u64),
    /// A gateway's `release.lua` ran.
    Released(Release),
    /// What the gateway told the buyer.
    Told(Verdict),
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Settles one order message: claim, the batch transaction, confirm or compensate.
    Worker,
    /// Sweeps one ticket: reads it, decides, then expires it or completes it (as a worker).
    Sweeper,
    /// The buyer cancels their order: the MySQL transaction, then Redis follows.
    Buyer,
    /// The payment expiry (every deadline passed): the MySQL transaction, then Redis follows.
    Expiry,
    /// One whole sweep of every live product ([`recovery::sweep`]), as one step.
    Sweep,
    /// The buyer pays (the gateway records the attempt under the order's lock), the provider
    /// calls back a success (MySQL), then Redis follows (`paid.lua`).
    Payer,
    /// The buy's gateway after Kafka reported its publish failed (the message may have
    /// landed: a worker on the same ticket has it): `release.lua`, then MySQL decides, and
    /// the answer is judged once quiet.
    Gateway,
    /// Redis loses the product's keys (a restart without data), and the product is rebuilt
    /// from MySQL (`reconcile_lost`, without the fence), as one step.
    RedisLoss,
}

pub(crate) struct Actor {
    pub(crate) role: Role,
    /// The ticket it works on (index into `Sale::bought`); the expiry takes every order.
    pub(crate) ticket: usize,
    pub(crate) step: Step,
    /// A worker whose message comes again after it crashed.
    pub(crate) redelivered: bool,
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.role {
            Role::Expiry => write!(f, "expiry"),
            Role::Sweep => write!(f, "sweep"),
            Role::RedisLoss => write!(f, "Redis"),
            r => write!(
                f,
                "{r:?}{} t{}",
                if self.redelivered { " (again)" } else { "" },
                self.ticket + 1
            ),
        }
    }
}

impl Actor {
    pub(crate) fn new(role: Role, ticket: usize) -> Self {
        Self {
            role,
            ticket,
            step: Step::Start,
            redelivered: false,
        }
    }

    pub(crate) fn done(&self) -> bool {
        matches!(self.step, Step::Done | Step::Told(_))
    }

    /// Runs this actor's next step; returns what it did, for the trace.
    pub(crate) async fn step(&mut self, sale: &Sale, env: &TestEnv) -> anyhow::Result<String> {
        let b = &sale.bought[self.ticket];
        let t = &b.order.ticket;
        let now = now_ms();
        let step = std::mem::replace(&mut self.step, Step::Done);
        let (next, did) = match (self.role, step) {
            (Role::Worker, Step::Start) => {
                let claimed = sale.settler.claim(std::slice::from_ref(&b.order)).await?;
                let did = format!("claim.lua: {}", claimed.claimed().len());
                if claimed.claimed().is_empty() {
                    (Step::Done, did)
                } else {
                    (Step::Claimed(claimed), did)
                }
            }
            (Role::Sweeper, Step::Start) => {
                let Some(record) = env.store.ticket(t).await? else {
                    return Ok("reads no record".into());
                };
                let committed = HashMap::from([(0, b.offset.map_or(0, |o| o + 1))]);
                let location = b.offset.map(|o| (0, o));
                let action = recovery::decide(&record, location, now, DUE_NOW, Some(&committed));
                let did = format!("reads {:?}: {action:?}", record.state);
                match action {
                    SweepAction::Leave => (Step::Done, did),
                    SweepAction::Expire => {
                        let expired = recovery::expire(
                            &env.store,
                            &env.db,
                            t,
                            record.user_id,
                            record.quantity,
                            now,
                        )
                        .await?;
                        (Step::Done, format!("{did}, expired: {expired:?}"))
                    }
                    SweepAction::Complete => {
                        let order = recovery::from_reservation(t, &record)?;
                        let claimed = sale.settler.claim(std::slice::from_ref(&order)).await?;
                        let n = claimed.claimed().len();
                        let did = format!("{did}, claim.lua: {n}");
                        if n == 0 {
                            (Step::Done, did)
                        } else {
                            (Step::Claimed(claimed), did)
                        }
                    }
                }
            }
            (Role::Worker | Role::Sweeper, Step::Claimed(claimed)) => {
                let decided = sale.settler.persist(&claimed).await?;
                let did = format!("MySQL: {decided:?}");
                (Step::Persisted(claimed, decided), did)
            }
            (Role::Worker | Role::Sweeper, Step::Persisted(claimed, decided)) => {
                let report = sale.settler.finish(&claimed, &decided).await?;
                (
                    Step::Done,
                    format!(
                        "Redis follows: {} confirmed, {:?} back",
                        report.newly_confirmed, report.given_back
                    ),
                )
            }
            (Role::Buyer, Step::Start) => {
                match cancel::cancel_by_buyer(&env.db, t, b.order.user_id, now).await? {
                    BuyerCancel::Cancelled(c) => {
                        (Step::Cancelled(vec![c]), "MySQL: cancelled".to_owned())
                    }
                    other => (Step::Done, format!("MySQL: {other:?}")),
                }
            }
            (Role::Expiry, Step::Start) => {
                let due = cancel::cancel_overdue(&env.db, now + EXPIRY_AHEAD_MS, 100).await?;
                let did = format!("MySQL: {} cancelled", due.len());
                if due.is_empty() {
                    (Step::Done, did)
                } else {
                    (Step::Cancelled(due), did)
                }
            }
            (Role::Sweep, Step::Start) => {
                let committed = HashMap::from([(0, i64::MAX)]);
                let report =
                    recovery::sweep(&env.store, &env.db, DUE_NOW, Some(&committed), None).await?;
                (Step::Done, format!("{report:?}"))
            }
            (Role::Payer, Step::Start) => {
                let p = payments::Payment {
                    payment_id: payments::new_payment_id(),
                    ticket: t.to_string(),
                    user_id: b.order.user_id.get(),
                    status: payment::PaymentStatus::Unsent,
                    amount: 500 * i64::from(b.order.quantity),
                    currency: "EUR".into(),
                };
                let key = format!("key-{}", p.payment_id);
                match payments::record(&env.db, &p, &key, now - 60_000).await? {
                    payments::Recorded::New => {
                        payments::mark_sent(&env.db, &p.payment_id).await?;
                        (Step::Paying(p.payment_id), "pays: sent".to_owned())
                    }
                    other => (Step::Done, format!("pays: {other:?}")),
                }
            }
            (Role::Payer, Step::Paying(payment_id)) => {
                let settled =
                    payments::settle(&env.db, &payment_id, payment::ChargeOutcome::Succeeded, now)
                        .await?
                        .expect("a recorded payment");
                let did = format!("callback: {:?}", settled.payment.status);
                match settled.paid_order {
                    Some((order, _)) => (Step::Paid(order), did),
                    None => (Step::Done, did),
                }
            }
            (Role::Payer, Step::Paid(order)) => {
                let paid = cancel::PaidOrder {
                    id: order,
                    ticket: t.clone(),
                    user_id: b.order.user_id.get(),
                    quantity: b.order.quantity,
                };
                cancel::follow_paid(&env.store, &env.db, &[paid], now).await?;
                (Step::Done, "paid.lua, restore_due cleared".to_owned())
            }
            (Role::Gateway, Step::Start) => {
                let released = failed_publish::release(&env.store, &b.order, 60_000).await;
                (
                    Step::Released(released),
                    format!("release.lua: {released:?}"),
                )
            }
            (Role::Gateway, Step::Released(released)) => {
                let told = failed_publish::decide(&env.store, &env.db, &b.order, released).await;
                (Step::Told(told), format!("MySQL decides: {told:?}"))
            }
            (Role::RedisLoss, Step::Start) => {
                env.lose_redis_keys(&format!("{}}}*", sale.product)).await;
                let report = recovery::reconcile_lost(&env.store, &env.db, sale.product, None)
                    .await?
                    .is_some();
                (Step::Done, format!("loses the product; rebuilt: {report}"))
            }
            (Role::Buyer | Role::Expiry, Step::Cancelled(due)) => {
                let back = cancel::give_back(&env.store, &env.db, &due, now).await?;
                (Step::Done, format!("cancel.lua: {back:?} back"))
            }
            (role, _) => anyhow::bail!("{role:?} has no such step"),
        };
        self.step = next;
        Ok(did)
    }
}
