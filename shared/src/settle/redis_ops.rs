//! The Redis steps of settling: a worker claims a ticket, then confirms it or gives its unit
//! back (compensates).

use super::scripts::{Claim, Compensate, CompensateMode, Compensated, Confirm, Confirmed};
use crate::domain::{FailureReason, OrderMessage, ProductId, Ticket};
use crate::store::{by_bucket, TicketStore};

pub use super::scripts::ClaimStatus;

/// How a failed ticket's unit is treated by [`TicketStore::compensate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveBack {
    /// The unit goes back on sale.
    Unit,
    /// MySQL had no unit for the reservation, so Redis over-counted: nothing goes back.
    Heal,
}

impl TicketStore {
    /// Claims the orders of one product for a worker, in order. An order whose ticket record
    /// Redis lost is adopted; one whose record expired is not. A record gone though it cannot
    /// have expired yet means Redis came back old: the product is then dropped, so that it is
    /// rebuilt. See `claim.lua`.
    pub async fn claim(
        &self,
        product: ProductId,
        orders: &[&OrderMessage],
    ) -> anyhow::Result<Vec<ClaimStatus>> {
        // One script per bucket, the answers put back in the callers' order.
        let mut out = vec![ClaimStatus::Expired; orders.len()];
        for (bucket, idx) in by_bucket(orders.iter().map(|m| &m.ticket)) {
            let part: Vec<&OrderMessage> = idx.iter().map(|&i| orders[i]).collect();
            let got = self.claim_in(product, bucket, &part).await?;
            anyhow::ensure!(
                got.len() == idx.len(),
                "the claim script answered {} of {}",
                got.len(),
                idx.len()
            );
            for (i, status) in idx.into_iter().zip(got) {
                out[i] = status;
            }
        }
        Ok(out)
    }

    async fn claim_in(
        &self,
        product: ProductId,
        bucket: u16,
        orders: &[&OrderMessage],
    ) -> anyhow::Result<Vec<ClaimStatus>> {
        self.run(&Claim {
            keys: self.bucket_keys(product, bucket),
            orders,
            ticket_ttl_secs: self.ticket_ttl_secs,
        })
        .await
    }

    /// Confirms claimed tickets of one product with their order ids and payment deadlines.
    /// Returns how many changed.
    pub async fn confirm(
        &self,
        product: ProductId,
        orders: &[(&Ticket, u64, Option<i64>)],
    ) -> anyhow::Result<u64> {
        let mut changed = 0;
        for (bucket, idx) in by_bucket(orders.iter().map(|(t, _, _)| *t)) {
            let part: Vec<_> = idx.iter().map(|&i| orders[i]).collect();
            changed += self.confirm_in(product, bucket, &part).await?;
        }
        Ok(changed)
    }

    async fn confirm_in(
        &self,
        product: ProductId,
        bucket: u16,
        orders: &[(&Ticket, u64, Option<i64>)],
    ) -> anyhow::Result<u64> {
        let now_ms = crate::now_ms();
        let tickets = orders
            .iter()
            .map(|&(ticket, order_id, pay_by)| Confirmed {
                ticket,
                order_id,
                // A ticket to be paid lives until its deadline plus the usual TTL.
                ttl_secs: self.ticket_ttl_secs as i64
                    + pay_by.map_or(0, |by| (by - now_ms).max(0) / 1000 + 1),
                pay_by_ms: pay_by,
            })
            .collect();
        self.run(&Confirm {
            keys: self.bucket_keys(product, bucket),
            tickets,
            now_ms,
        })
        .await
    }

    /// Fails a ticket for good and gives its unit back, once. `true` when this call gave a
    /// unit back.
    pub async fn compensate(&self, ticket: &Ticket, reason: FailureReason) -> anyhow::Result<bool> {
        self.compensate_with(ticket, reason, GiveBack::Unit).await
    }

    /// [`Self::compensate`], choosing what happens to the unit. `true` when a unit went back.
    pub async fn compensate_with(
        &self,
        ticket: &Ticket,
        reason: FailureReason,
        give_back: GiveBack,
    ) -> anyhow::Result<bool> {
        let mode = match give_back {
            GiveBack::Unit => CompensateMode::Any,
            GiveBack::Heal => CompensateMode::Heal,
        };
        Ok(self.run_compensate(ticket, reason, mode).await? == Compensated::UnitBack)
    }

    /// The sweeper's variant: fails the ticket only if it is still `pending` (no worker has
    /// claimed it) and was reserved at or before `cutoff_ms`. `Some(true)` when this call
    /// failed it and its unit went back, `Some(false)` when it failed it without a unit (the
    /// product is not loaded), `None` when it changed nothing (a worker claimed it first, or
    /// it had settled).
    pub async fn expire_pending(
        &self,
        ticket: &Ticket,
        reason: FailureReason,
        cutoff_ms: i64,
    ) -> anyhow::Result<Option<bool>> {
        let mode = CompensateMode::PendingOnly {
            reserved_by_ms: cutoff_ms,
        };
        Ok(match self.run_compensate(ticket, reason, mode).await? {
            Compensated::Unchanged => None,
            Compensated::UnitBack => Some(true),
            Compensated::NoUnitBack => Some(false),
        })
    }

    async fn run_compensate(
        &self,
        ticket: &Ticket,
        reason: FailureReason,
        mode: CompensateMode,
    ) -> anyhow::Result<Compensated> {
        self.run(&Compensate {
            keys: self.ticket_keys(ticket),
            ticket,
            reason,
            mode,
            ticket_ttl_secs: self.ticket_ttl_secs,
        })
        .await
    }
}
