//! The payment window's scripts as types: `cancel.lua`, `paid.lua` (see
//! [`crate::store::script`]).

use crate::domain::{CancelReason, Ticket};
use crate::store::script::{self, RedisScript};
use crate::store::ProductKeys;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// `cancel.lua`: Redis follows an order MySQL cancelled; its unit goes back, once.
pub struct Cancel<'a> {
    /// The ticket's bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub order_id: u64,
    /// Units the order holds (MySQL's).
    pub quantity: u16,
    pub reason: CancelReason,
    pub now_ms: i64,
    /// How long a record that had no expiry lives now (s).
    pub ticket_ttl_secs: u64,
}

/// What `cancel.lua` did. Unchanged: nothing to cancel (already cancelled, paid or failed, or
/// the record is gone).
pub type Cancelled = crate::store::script::UnitReturn;

impl RedisScript for Cancel<'_> {
    const NAME: &'static str = "cancel";
    type Reply = Cancelled;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::notifying(include_str!("cancel.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.ticket(self.ticket))
            .key(k.pending())
            .arg(self.ticket.as_str())
            .arg(self.reason.as_str())
            .arg(self.now_ms)
            .arg(self.ticket_ttl_secs)
            .arg(self.order_id)
            .arg(self.quantity);
    }

    fn reply(value: Value) -> anyhow::Result<Cancelled> {
        Cancelled::parse(value, "cancel.lua")
    }
}

/// `paid.lua`: Redis follows an order MySQL marked paid.
pub struct Paid<'a> {
    /// The ticket's bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub order_id: u64,
    /// The buyer, for a record Redis lost.
    pub user_id: u64,
    /// Units the order holds (MySQL's).
    pub quantity: u16,
    pub now_ms: i64,
    /// How long a record that had no expiry lives now (s).
    pub ticket_ttl_secs: u64,
}

impl RedisScript for Paid<'_> {
    const NAME: &'static str = "paid";
    /// `true` (`1`) when the record changed, `false` (`0`) when it was neither in flight,
    /// confirmed nor gone.
    type Reply = bool;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::notifying(include_str!("paid.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.meta())
            .key(k.ticket(self.ticket))
            .key(k.pending())
            .arg(self.now_ms)
            .arg(self.ticket.as_str())
            .arg(self.order_id)
            .arg(self.ticket_ttl_secs)
            .arg(self.user_id)
            .arg(self.quantity);
    }

    fn reply(value: Value) -> anyhow::Result<bool> {
        script::changed(value)
    }
}
