//! Settling orders: the worker's batch step, also used by the gateway's `sync` mode.
//!
//! For a batch of order messages:
//! 1. Claim the tickets in Redis (`pending` → `processing`). A ticket that is gone (released by
//!    a gateway), confirmed or failed is skipped: a redelivered message changes nothing.
//! 2. Decide every claimed order in one MySQL transaction that locks the products' rows:
//!    already persisted, already failed, unknown product, user already has an order, out of
//!    stock, or accepted. Insert the accepted orders in one multi-row insert, decrement each
//!    product's stock once (guarded so it never goes below zero) and record the failures.
//! 3. After the commit, confirm in Redis and compensate the failures (the unit goes back, the
//!    user is freed), each exactly once.
//!
//! Every step is idempotent, so the caller retries the whole batch on any error.

mod chaos;
mod order_ids;
mod redis_ops;
pub mod scripts;
mod statements;
mod write;

pub use chaos::Chaos;
pub use order_ids::OrderIds;
pub use redis_ops::{ClaimStatus, GiveBack};
pub(crate) use statements::push_padded;

use crate::domain::{CancelReason, FailureReason, OrderMessage, ProductId, Ticket};
use crate::store::TicketStore;
use sqlx::mysql::MySqlPool;
use std::collections::{BTreeMap, HashSet};

/// A ticket to confirm: its order id and payment deadline.
type Confirm<'a> = (&'a Ticket, u64, Option<i64>);

/// What became of one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Confirmed {
        order_id: u64,
        /// The payment deadline, when the product has a payment window.
        pay_by_ms: Option<i64>,
        /// MySQL had the order already, and it is paid: Redis follows with `paid.lua`.
        paid: bool,
    },
    Failed {
        reason: FailureReason,
    },
    /// MySQL had the order already, and it was cancelled since (by its buyer or its
    /// deadline): Redis follows with `cancel.lua`. Only a ticket claimed again after the
    /// cancel's commit comes here: a redelivery, or a Redis that came back old.
    Cancelled {
        order_id: u64,
        reason: CancelReason,
    },
    /// Not claimed: already settled, its record expired, or a duplicate within the batch.
    Skipped {
        /// What the claim found; `None` for a duplicate within the batch.
        found: Option<ClaimStatus>,
    },
}

#[derive(Debug, Default)]
pub struct BatchReport {
    pub outcomes: Vec<(Ticket, Outcome)>,
    /// Tickets this call confirmed in Redis (not counting ones confirmed before).
    pub newly_confirmed: u64,
    /// Products that got a unit back in Redis: their sold-out markers must go.
    pub given_back: BTreeMap<ProductId, u64>,
    /// Products where MySQL had no unit for a ticket that Redis reserved: the stores have
    /// diverged, Redis over-counts, and the product must be reconciled.
    pub diverged: BTreeMap<ProductId, u64>,
}

impl BatchReport {
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|(_, o)| pred(o)).count()
    }
}

pub struct Settler {
    pub store: TicketStore,
    pub db: MySqlPool,
    pub chaos: Chaos,
    /// How new orders learn their ids; found out on first use.
    pub ids: OrderIds,
}

/// A batch after step 1: the orders this call claimed, and the ones it skipped.
#[derive(Debug, Default)]
pub struct Claimed {
    skipped: Vec<(Ticket, Outcome)>,
    claimed: Vec<OrderMessage>,
    chaos_failed: HashSet<String>,
}

impl Claimed {
    /// The orders this call claimed, which step 2 decides.
    pub fn claimed(&self) -> &[OrderMessage] {
        &self.claimed
    }
}

impl Settler {
    /// Steps 1 to 3 in a row. The worker runs them as a pipeline instead (one batch per step
    /// at a time); both are correct because every step is idempotent and only step 2 decides.
    pub async fn settle(&self, orders: &[OrderMessage]) -> anyhow::Result<BatchReport> {
        let claimed = self.claim(orders).await?;
        let decided = self.persist(&claimed).await?;
        self.finish(&claimed, &decided).await
    }

    /// Step 1: claim in Redis, product by product (one script call each), dropping duplicate
    /// tickets.
    pub async fn claim(&self, orders: &[OrderMessage]) -> anyhow::Result<Claimed> {
        let mut skipped = Vec::new();
        let mut by_product: BTreeMap<ProductId, Vec<&OrderMessage>> = BTreeMap::new();
        let mut seen = HashSet::new();
        for m in orders {
            if seen.insert(m.ticket.as_str()) {
                by_product.entry(m.product_id).or_default().push(m);
            } else {
                skipped.push((m.ticket.clone(), Outcome::Skipped { found: None }));
            }
        }
        let mut claimed = Vec::with_capacity(orders.len());
        for (product, msgs) in &by_product {
            let statuses = self.store.claim(*product, msgs).await?;
            for (m, status) in msgs.iter().zip(statuses) {
                if status == ClaimStatus::Claimed {
                    claimed.push((*m).clone());
                } else {
                    skipped.push((
                        m.ticket.clone(),
                        Outcome::Skipped {
                            found: Some(status),
                        },
                    ));
                }
            }
        }

        // Fault injection happens after the claim, so a test can kill a worker mid-batch.
        let mut chaos_failed = HashSet::new();
        for m in &claimed {
            if self.chaos.should_fail(m.user_id.get()).await {
                chaos_failed.insert(m.ticket.as_str().to_owned());
            }
        }
        Ok(Claimed {
            skipped,
            claimed,
            chaos_failed,
        })
    }

    /// Step 2: decide and persist the claimed orders in one MySQL transaction. Returns one
    /// outcome per claimed order, in order.
    pub async fn persist(&self, claimed: &Claimed) -> anyhow::Result<Vec<Outcome>> {
        if claimed.claimed.is_empty() {
            return Ok(Vec::new());
        }
        let decided = self.write(&claimed.claimed, &claimed.chaos_failed).await?;
        self.chaos
            .abort_after_commit(&claimed.claimed, |t| self.store.ticket_keys(t).ticket(t));
        self.chaos.lose_commit(&claimed.claimed)?;
        Ok(decided)
    }

    /// Step 3: make Redis follow MySQL (confirm, and compensate the failures), given what
    /// step 2 decided.
    pub async fn finish(
        &self,
        claimed: &Claimed,
        decided: &[Outcome],
    ) -> anyhow::Result<BatchReport> {
        let mut report = BatchReport {
            outcomes: claimed.skipped.clone(),
            ..BatchReport::default()
        };
        let claimed = &claimed.claimed;
        let mut confirms: BTreeMap<ProductId, Vec<Confirm>> = BTreeMap::new();
        for (m, outcome) in claimed.iter().zip(decided) {
            if let Outcome::Confirmed {
                order_id,
                pay_by_ms,
                ..
            } = outcome
            {
                confirms
                    .entry(m.product_id)
                    .or_default()
                    .push((&m.ticket, *order_id, *pay_by_ms));
            }
        }
        for (product, list) in &confirms {
            report.newly_confirmed += self.store.confirm(*product, list).await?;
        }
        // Orders MySQL paid or cancelled before this claim: Redis follows MySQL.
        for (m, outcome) in claimed.iter().zip(decided) {
            match outcome {
                Outcome::Confirmed {
                    paid: true,
                    order_id,
                    ..
                } => {
                    self.store
                        .paid(
                            &m.ticket,
                            *order_id,
                            m.user_id.get(),
                            m.quantity,
                            crate::now_ms(),
                        )
                        .await?;
                }
                Outcome::Cancelled { order_id, reason }
                    if self
                        .store
                        .cancel(&m.ticket, *order_id, m.quantity, *reason, crate::now_ms())
                        .await? =>
                {
                    *report.given_back.entry(m.product_id).or_default() += u64::from(m.quantity);
                }
                _ => {}
            }
        }
        for (m, outcome) in claimed.iter().zip(decided) {
            let Outcome::Failed { reason } = outcome else {
                continue;
            };
            // MySQL out of stock for a unit Redis reserved: Redis over-counts. Giving the unit
            // back would sell it again and fail the next buyer too, so it is healed instead.
            let give_back = if *reason == FailureReason::OutOfStock {
                *report.diverged.entry(m.product_id).or_default() += 1;
                GiveBack::Heal
            } else {
                GiveBack::Unit
            };
            if self
                .store
                .compensate_with(&m.ticket, *reason, give_back)
                .await?
            {
                *report.given_back.entry(m.product_id).or_default() += u64::from(m.quantity);
            }
        }
        report.outcomes.extend(
            claimed
                .iter()
                .map(|m| m.ticket.clone())
                .zip(decided.iter().cloned()),
        );
        Ok(report)
    }
}
