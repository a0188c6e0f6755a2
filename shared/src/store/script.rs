//! One Rust type per Lua script, as mini-redis has one type per command. A script's type
//! holds its typed arguments (ids, reasons and modes as our types, never bare strings), knows
//! its keys and the order of its arguments (the one place that writes them, next to the
//! `.lua` file in its feature folder), and parses the script's reply into a type that names
//! every answer the script can give. A reply the script cannot give is an error, never a
//! default.
//!
//! [`run`] invokes a script on a connection (`EVALSHA`, then `EVAL` when Redis does not
//! know the script yet); [`TicketStore::run`] on the store's.
//!
//! `token_bucket.lua` is no script of its own: it is a Lua library prepended to the scripts
//! that take a rate-limit token (`reserve.lua`, and the gateway's `rate_limit.lua`).

use super::{RedisConn, TicketStore};
use anyhow::Context;
use redis::{FromRedisValue, Script, ScriptInvocation, Value};

/// A Lua script with typed arguments and a typed reply.
pub trait RedisScript {
    /// The script's name, as in its file name (`claim` for `claim.lua`), for errors.
    const NAME: &'static str;
    /// What the script answers.
    type Reply;
    /// The script's text, loaded once per process.
    fn script() -> &'static Script;
    /// Adds this call's keys and arguments, in the order the script reads them.
    fn args(&self, call: &mut ScriptInvocation<'static>);
    /// Parses the script's reply. A reply the script cannot give is an error.
    fn reply(value: Value) -> anyhow::Result<Self::Reply>;
}

/// Runs `call` on `conn`, and parses its reply.
pub async fn run<S: RedisScript>(conn: &RedisConn, call: &S) -> anyhow::Result<S::Reply> {
    let mut invocation = S::script().prepare_invoke();
    call.args(&mut invocation);
    let mut c = conn.clone();
    let value: Value = invocation
        .invoke_async(&mut c)
        .await
        .with_context(|| format!("running the {} script", S::NAME))?;
    S::reply(value).with_context(|| format!("the {} script's reply", S::NAME))
}

impl TicketStore {
    /// Runs `call` on this store's connection (see [`run`]).
    pub async fn run<S: RedisScript>(&self, call: &S) -> anyhow::Result<S::Reply> {
        run(&self.conn, call).await
    }
}

/// The Lua library of the scripts that change a ticket's status (`notify.lua`).
pub const NOTIFY_LUA: &str = include_str!("notify.lua");

/// A script with [`NOTIFY_LUA`] prepended: it may call `notify(record_key)`.
pub fn notifying(body: &str) -> Script {
    Script::new(&format!("{NOTIFY_LUA}\n{body}"))
}

/// The Lua library of the scripts that load or rebuild a bucket's stock: `units_in_flight`.
pub const UNITS_IN_FLIGHT_LUA: &str = include_str!("units_in_flight.lua");

/// A script with [`UNITS_IN_FLIGHT_LUA`] prepended: it may call
/// `units_in_flight(pending_key, meta_key)`.
pub fn counting_units(body: &str) -> Script {
    Script::new(&format!("{UNITS_IN_FLIGHT_LUA}\n{body}"))
}

/// A value of the reply as `T` (an integer, a string, a list of them).
pub fn parse<T: FromRedisValue>(value: Value) -> anyhow::Result<T> {
    redis::from_redis_value(value).map_err(|e| anyhow::anyhow!("{e}"))
}

/// A reply that is a whole number.
pub fn int(value: Value) -> anyhow::Result<i64> {
    parse(value)
}

/// The reply of a script that ends or frees one ticket and may give its unit back
/// (`compensate.lua`, `cancel.lua`, `release.lua`): `0`, `1` or `2`. What "unchanged" covers
/// for each script is said at its reply's name (`Compensated`, `Cancelled`, `Released`, each
/// beside its script).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitReturn {
    /// `0`: nothing changed.
    Unchanged,
    /// `1`: done, and the unit went back on sale.
    UnitBack,
    /// `2`: done without giving a unit back (the product is not loaded, so the rebuild counts
    /// it; or `compensate.lua`'s `heal`).
    NoUnitBack,
}

impl UnitReturn {
    /// `script`'s reply.
    pub fn parse(value: Value, script: &str) -> anyhow::Result<Self> {
        Ok(match int(value)? {
            0 => Self::Unchanged,
            1 => Self::UnitBack,
            2 => Self::NoUnitBack,
            other => anyhow::bail!("{other} is no reply of {script}"),
        })
    }
}

/// A reply of `1` (something changed) or `0` (nothing did).
pub fn changed(value: Value) -> anyhow::Result<bool> {
    match int(value)? {
        1 => Ok(true),
        0 => Ok(false),
        other => anyhow::bail!("{other} is no reply of this script (0 or 1)"),
    }
}

/// An optional time in ms as a script argument: the number, or `''` for none.
pub fn opt_ms(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_is_zero_or_one_and_nothing_else() {
        assert!(changed(Value::Int(1)).unwrap());
        assert!(!changed(Value::Int(0)).unwrap());
        assert!(changed(Value::Int(2)).is_err());
        assert!(changed(Value::Nil).is_err());
        assert_eq!(opt_ms(Some(12)), "12");
        assert_eq!(opt_ms(None), "");
    }
}
