//! The Redis steps of the payment window: a cancelled order's unit back on sale, a paid order
//! counted.

use crate::domain::Ticket;
use crate::store::TicketStore;
use anyhow::Context;
use redis::Script;
use std::sync::LazyLock;

static CANCEL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("cancel.lua")));
static PAID: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("paid.lua")));

impl TicketStore {
    /// Makes Redis follow an order MySQL cancelled: the ticket becomes `cancelled` (from
    /// `confirmed`, or still `processing` or `pending`), its buyer is free and its unit goes
    /// back on sale, once however often this runs. `true` when this call gave the unit back.
    pub async fn cancel(
        &self,
        ticket: &Ticket,
        order_id: u64,
        reason: crate::CancelReason,
        now_ms: i64,
    ) -> anyhow::Result<bool> {
        let k = self.ticket_keys(ticket);
        let mut c = self.conn.clone();
        let n: i64 = CANCEL
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.ticket(ticket))
            .key(k.pending())
            .arg(ticket.as_str())
            .arg(reason.as_str())
            .arg(now_ms)
            .arg(self.ticket_ttl_secs)
            .arg(order_id)
            .invoke_async(&mut c)
            .await
            .context("running the cancel script")?;
        Ok(n == 1)
    }

    /// Makes Redis follow an order MySQL marked paid (from `confirmed`, or still `processing`
    /// or `pending`: see `paid.lua`). `true` when the record changed.
    /// A ticket whose record Redis lost gets a `paid` one, owned by `user_id`.
    pub async fn paid(
        &self,
        ticket: &Ticket,
        order_id: u64,
        user_id: u64,
        now_ms: i64,
    ) -> anyhow::Result<bool> {
        let k = self.ticket_keys(ticket);
        let mut c = self.conn.clone();
        let n: i64 = PAID
            .key(k.meta())
            .key(k.ticket(ticket))
            .key(k.pending())
            .arg(now_ms)
            .arg(ticket.as_str())
            .arg(order_id)
            .arg(self.ticket_ttl_secs)
            .arg(user_id)
            .invoke_async(&mut c)
            .await
            .context("running the paid script")?;
        Ok(n == 1)
    }
}
