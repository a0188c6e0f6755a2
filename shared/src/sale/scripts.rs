//! The sale's script as a type: `preload.lua` (see [`crate::store::script`]).

use crate::store::script::{self, RedisScript};
use crate::store::ProductKeys;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// `preload.lua`: loads one bucket of a product for sale from its MySQL row.
pub struct Preload {
    /// The bucket's keys.
    pub keys: ProductKeys,
    /// The bucket's share of the MySQL stock.
    pub mysql_stock: i64,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    /// `loaded_at`, on the first load.
    pub now_ms: i64,
    /// How many buckets the product has.
    pub buckets: u16,
    /// The most units one buyer may take.
    pub max_per_buyer: u16,
}

impl RedisScript for Preload {
    const NAME: &'static str = "preload";
    /// The bucket's new Redis stock.
    type Reply = i64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::counting_units(include_str!("preload.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .arg(self.mysql_stock)
            .arg(script::opt_ms(self.starts_at_ms))
            .arg(script::opt_ms(self.ends_at_ms))
            .arg(self.now_ms)
            .arg(self.buckets)
            .arg(self.max_per_buyer.max(1));
    }

    fn reply(value: Value) -> anyhow::Result<i64> {
        script::int(value)
    }
}
