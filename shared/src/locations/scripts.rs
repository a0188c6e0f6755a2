//! The locations' scripts as types: `locate.lua`, `locate_held.lua`, `trim_located.lua` (see
//! [`crate::store::script`]).

use super::located::{located_entry, Located};
use crate::domain::Ticket;
use crate::store::script::{self, RedisScript};
use crate::store::ProductKeys;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// `locate.lua`: one entry of a bucket's `located` list for these orders.
pub struct Locate<'a> {
    /// The bucket's keys; every order is of this bucket.
    pub keys: ProductKeys,
    pub located: &'a [Located],
}

impl RedisScript for Locate<'_> {
    const NAME: &'static str = "locate";
    /// The list's length.
    type Reply = u64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("locate.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.keys.located())
            .arg(located_entry(self.located));
    }

    fn reply(value: Value) -> anyhow::Result<u64> {
        script::parse(value)
    }
}

/// `locate_held.lua`: where a buy again published a held ticket's order, on its record,
/// while it is still `pending`.
pub struct LocateHeld<'a> {
    /// The ticket's bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub partition: i32,
    pub offset: i64,
}

impl RedisScript for LocateHeld<'_> {
    const NAME: &'static str = "locate_held";
    /// `true` (`1`) when recorded, `false` (`0`) when the ticket is no longer pending.
    type Reply = bool;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!("locate_held.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.keys.ticket(self.ticket))
            .arg(self.partition)
            .arg(self.offset);
    }

    fn reply(value: Value) -> anyhow::Result<bool> {
        script::changed(value)
    }
}

/// `trim_located.lua`: drops the head entries of a bucket's `located` list that hold no
/// ticket in flight.
pub struct TrimLocated {
    pub keys: ProductKeys,
    /// Entries to look at, at most.
    pub limit: usize,
}

impl RedisScript for TrimLocated {
    const NAME: &'static str = "trim_located";
    /// How many entries were dropped.
    type Reply = u64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!("trim_located.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.keys.located())
            .key(self.keys.pending())
            .arg(self.limit);
    }

    fn reply(value: Value) -> anyhow::Result<u64> {
        script::parse(value)
    }
}
