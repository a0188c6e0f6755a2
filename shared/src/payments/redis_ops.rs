//! The Redis steps of the payment window: a cancelled order's unit back on sale, a paid order
//! counted.

use super::scripts::{Cancel, Cancelled, Paid};
use crate::domain::{CancelReason, Ticket};
use crate::store::TicketStore;

impl TicketStore {
    /// Makes Redis follow an order MySQL cancelled: the ticket becomes `cancelled` (from
    /// `confirmed`, or still `processing` or `pending`), its buyer is free and its unit goes
    /// back on sale, once however often this runs. `true` when this call gave the units back
    /// (`quantity`, MySQL's).
    pub async fn cancel(
        &self,
        ticket: &Ticket,
        order_id: u64,
        quantity: u16,
        reason: CancelReason,
        now_ms: i64,
    ) -> anyhow::Result<bool> {
        let done = self
            .run(&Cancel {
                keys: self.ticket_keys(ticket),
                ticket,
                order_id,
                quantity,
                reason,
                now_ms,
                ticket_ttl_secs: self.ticket_ttl_secs,
            })
            .await?;
        Ok(done == Cancelled::UnitBack)
    }

    /// Makes Redis follow an order MySQL marked paid (from `confirmed`, or still `processing`
    /// or `pending`: see `paid.lua`). `true` when the record changed.
    /// A ticket whose record Redis lost gets a `paid` one, owned by `user_id`.
    pub async fn paid(
        &self,
        ticket: &Ticket,
        order_id: u64,
        user_id: u64,
        quantity: u16,
        now_ms: i64,
    ) -> anyhow::Result<bool> {
        self.run(&Paid {
            keys: self.ticket_keys(ticket),
            ticket,
            order_id,
            user_id,
            quantity,
            now_ms,
            ticket_ttl_secs: self.ticket_ttl_secs,
        })
        .await
    }
}
