//! The Redis steps of settling: a worker claims a ticket, then confirms it or gives its unit
//! back (compensates).

use crate::domain::{OrderMessage, ProductId, Ticket};
use crate::store::{by_bucket, RecordStatus, TicketStore};
use anyhow::Context;
use redis::Script;
use std::sync::LazyLock;

static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("claim.lua")));
static CONFIRM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("confirm.lua")));
static COMPENSATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("compensate.lua")));

/// What `claim.lua` found for one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimStatus {
    /// This call owns the order now (`processing`), or a redelivery found it still claimed.
    Claimed,
    /// Settled already: confirmed, paid, cancelled or failed.
    Settled(RecordStatus),
    /// No record, and Redis did not lose it: it expired after the order settled.
    Expired,
}

impl ClaimStatus {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "processing" => Self::Claimed,
            "expired" => Self::Expired,
            other => match RecordStatus::parse(other) {
                Some(r) if r.is_settled() => Self::Settled(r),
                _ => anyhow::bail!("claim script returned {other:?}"),
            },
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Claimed => "processing",
            Self::Settled(r) => r.as_str(),
            Self::Expired => "expired",
        }
    }
}

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
        let k = self.bucket_keys(product, bucket);
        let mut inv = CLAIM.prepare_invoke();
        inv.key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending());
        for m in orders {
            inv.key(k.ticket(&m.ticket));
            inv.arg(m.ticket.as_str())
                .arg(m.user_id.get())
                .arg(m.reserved_at_ms);
        }
        inv.arg(self.ticket_ttl_secs);
        let mut c = self.conn.clone();
        let raw: Vec<String> = inv
            .invoke_async(&mut c)
            .await
            .context("running the claim script")?;
        raw.iter().map(|s| ClaimStatus::parse(s)).collect()
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
        let k = self.bucket_keys(product, bucket);
        let mut inv = CONFIRM.prepare_invoke();
        inv.key(k.meta()).key(k.pending());
        let now = crate::now_ms();
        for (t, id, pay_by) in orders {
            inv.key(k.ticket(t));
            // A ticket to be paid lives until its deadline plus the usual TTL.
            let ttl =
                self.ticket_ttl_secs as i64 + pay_by.map_or(0, |by| (by - now).max(0) / 1000 + 1);
            inv.arg(t.as_str()).arg(*id).arg(ttl);
        }
        inv.arg(now);
        let mut c = self.conn.clone();
        inv.invoke_async(&mut c)
            .await
            .context("running the confirm script")
    }

    /// Fails a ticket for good and gives its unit back, once. `true` when this call gave a
    /// unit back.
    pub async fn compensate(&self, ticket: &Ticket, reason: &str) -> anyhow::Result<bool> {
        self.compensate_with(ticket, reason, GiveBack::Unit).await
    }

    /// [`Self::compensate`], choosing what happens to the unit. `true` when a unit went back.
    pub async fn compensate_with(
        &self,
        ticket: &Ticket,
        reason: &str,
        give_back: GiveBack,
    ) -> anyhow::Result<bool> {
        let mode = match give_back {
            GiveBack::Unit => "any",
            GiveBack::Heal => "heal",
        };
        Ok(self.run_compensate(ticket, reason, mode, 0).await? == 1)
    }

    /// The sweeper's variant: fails the ticket only if it is still `pending` (no worker has
    /// claimed it) and was reserved at or before `cutoff_ms`. `Some(true)` when this call
    /// failed it and its unit went back, `Some(false)` when it failed it without a unit (the
    /// product is not loaded), `None` when it changed nothing (a worker claimed it first, or
    /// it had settled).
    pub async fn expire_pending(
        &self,
        ticket: &Ticket,
        reason: &str,
        cutoff_ms: i64,
    ) -> anyhow::Result<Option<bool>> {
        Ok(
            match self
                .run_compensate(ticket, reason, "pending_only", cutoff_ms)
                .await?
            {
                0 => None,
                n => Some(n == 1),
            },
        )
    }

    async fn run_compensate(
        &self,
        ticket: &Ticket,
        reason: &str,
        mode: &str,
        cutoff_ms: i64,
    ) -> anyhow::Result<i64> {
        let k = self.ticket_keys(ticket);
        let mut c = self.conn.clone();
        let n: i64 = COMPENSATE
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(ticket))
            .arg(ticket.as_str())
            .arg(reason)
            .arg(mode)
            .arg(cutoff_ms)
            .arg(self.ticket_ttl_secs)
            .invoke_async(&mut c)
            .await
            .context("running the compensation script")?;
        Ok(n)
    }
}
