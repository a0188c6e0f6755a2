//! Reservation's scripts as types: `reserve.lua` (with `token_bucket.lua` prepended),
//! `release.lua`, and the loan scripts `borrow.lua`, `void.lua`, `settle_borrow.lua` (see
//! [`crate::store::script`]).

use super::call::{Reply, Reservation, ReserveCall, ReserveStep};
use crate::domain::{FailureReason, Ticket, UserId};
use crate::locations::{located_entry, Located};
use crate::store::script::{self, RedisScript};
use crate::store::ProductKeys;
use anyhow::Context;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// `reserve.lua`: the buy decision for several buyers of one stock bucket, in order, after
/// recording the Kafka locations of earlier orders of that bucket.
pub(crate) struct Reserve<'a> {
    /// The bucket's keys.
    pub keys: ProductKeys,
    /// How long a `borrowing` record lives (s).
    pub ticket_ttl_secs: u64,
    pub located: &'a [Located],
    /// The buyers, each with its ticket in this bucket. Those that take a token share one
    /// limit's rate and burst.
    pub calls: &'a [ReserveCall],
}

impl RedisScript for Reserve<'_> {
    const NAME: &'static str = "reservation";
    /// One reply per buyer, in order; a buyer whose step failed in the script (`{0, error}`)
    /// gets an error, and the others still count.
    type Reply = Vec<Reply>;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
            Script::new(&format!(
                "{}{}",
                super::TOKEN_BUCKET_LUA,
                include_str!("reserve.lua")
            ))
        });
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.admitted())
            .key(k.queue_done())
            .key(k.queue())
            .key(k.borrowing())
            .key(k.located())
            .arg(self.ticket_ttl_secs)
            .arg(located_entry(self.located));
        // One limit per call: its rate and burst, or '' when no buyer takes a token.
        match self.calls.iter().find_map(|c| c.limit.as_ref()) {
            Some(l) => call.arg(l.rate).arg(l.burst),
            None => call.arg("").arg(""),
        };
        for c in self.calls {
            let flags = u8::from(c.admission_verified) | (u8::from(c.limit.is_some()) << 1);
            call.key(k.ticket(&c.ticket))
                .arg(c.user.get())
                .arg(c.ticket.as_str())
                .arg(c.now_ms)
                .arg(flags)
                .arg(c.buckets)
                .arg(c.quantity);
            if let Some(l) = &c.limit {
                call.key(&l.key);
            }
        }
    }

    fn reply(value: Value) -> anyhow::Result<Vec<Reply>> {
        let replies: Vec<Vec<Value>> = script::parse(value)?;
        Ok(replies.iter().map(|v| buyer_reply(v)).collect())
    }
}

/// One buyer's reply, `{code}` or `{code, value}`: the codes are documented on
/// [`Reservation`] and [`ReserveStep`]; `{0, error}` is this buyer's failure.
fn buyer_reply(v: &[Value]) -> Reply {
    let code: i64 = redis::from_redis_value_ref(v.first().context("empty reply")?)?;
    let extra: Option<String> = match v.get(1) {
        Some(x) => Some(redis::from_redis_value_ref(x)?),
        None => None,
    };
    let extra = || extra.as_deref().unwrap_or_default();
    let done = match code {
        0 => anyhow::bail!("the reservation script failed: {}", extra()),
        1 => Reservation::Reserved,
        2 => {
            Reservation::AlreadyHolds(Ticket::parse(extra()).context("stored ticket is malformed")?)
        }
        3 => Reservation::SoldOut,
        4 => Reservation::UnknownProduct,
        5 => Reservation::NotStarted,
        6 => Reservation::Ended,
        7 => Reservation::AdmissionRequired,
        8 => Reservation::NotAdmitted,
        9 => return Ok(ReserveStep::Borrow),
        10 => {
            let n: u16 = extra().parse().context("the bucket count in Redis")?;
            return Ok(ReserveStep::Buckets(n));
        }
        11 => Reservation::RateLimited {
            retry_after_ms: extra().parse().context("the wait in Redis")?,
        },
        12 => Reservation::OverLimit {
            max_per_buyer: extra().parse().context("max_per_buyer in Redis")?,
        },
        13 => Reservation::NotEnough {
            left: extra().parse().context("the units left in Redis")?,
        },
        other => anyhow::bail!("reservation script returned unknown code {other}"),
    };
    Ok(ReserveStep::Done(done))
}

/// `release.lua`: a reservation that never reached Kafka gives its unit and its buyer back,
/// and its ticket fails.
pub struct Release<'a> {
    /// The ticket's bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub user: UserId,
    pub reason: FailureReason,
    /// How long the failed record lives (s).
    pub ticket_ttl_secs: u64,
    pub now_ms: i64,
    /// How long a waiting-room buyer is admitted again (ms).
    pub admission_ttl_ms: u64,
}

/// What `release.lua` did. Unchanged: the ticket had moved on (claimed, settled, or located
/// by a buy again), or its state is another server run's (its stock was dropped for a rebuild).
pub type Released = crate::store::script::UnitReturn;

impl RedisScript for Release<'_> {
    const NAME: &'static str = "release";
    type Reply = Released;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::notifying(include_str!("release.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(self.ticket))
            .key(k.admitted())
            .key(k.queue_done())
            .arg(self.user.get())
            .arg(self.ticket.as_str())
            .arg(self.reason.as_str())
            .arg(self.ticket_ttl_secs)
            .arg(self.now_ms)
            .arg(self.admission_ttl_ms);
    }

    fn reply(value: Value) -> anyhow::Result<Released> {
        Released::parse(value, "release.lua")
    }
}

/// `borrow.lua`: up to `want` units from a donor bucket for a ticket whose home bucket has
/// fewer than its order asks for.
pub struct Borrow<'a> {
    /// The donor bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    /// Units still missing.
    pub want: u16,
}

/// What `borrow.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Borrowed {
    /// `{0}`: this bucket has no unit for the ticket (empty, or the loan was voided).
    NoUnit,
    /// `{1, n}`: n units are the ticket's (taken now, or by an earlier try).
    Lent(u16),
    /// `{2}`: the bucket is not loaded (lost, or being rebuilt): its units are unknown.
    NotLoaded,
}

impl RedisScript for Borrow<'_> {
    const NAME: &'static str = "borrow";
    type Reply = Borrowed;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("borrow.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        donor_args(&self.keys, self.ticket, call);
        call.arg(self.want);
    }

    fn reply(value: Value) -> anyhow::Result<Borrowed> {
        let reply: Vec<i64> = script::parse(value)?;
        Ok(match reply.as_slice() {
            [0] => Borrowed::NoUnit,
            [1, n] if (1..=i64::from(crate::MAX_PER_BUYER)).contains(n) => {
                Borrowed::Lent(*n as u16)
            }
            [2] => Borrowed::NotLoaded,
            other => anyhow::bail!("{other:?} is no reply of borrow.lua"),
        })
    }
}

/// `void.lua`: the sweeper gives up a borrow in one donor bucket: a loan taken goes back, one
/// not taken can no longer be.
pub struct Void<'a> {
    /// The donor bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
}

impl RedisScript for Void<'_> {
    const NAME: &'static str = "void";
    /// How many units went back on sale.
    type Reply = u64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("void.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        donor_args(&self.keys, self.ticket, call);
    }

    fn reply(value: Value) -> anyhow::Result<u64> {
        let n = script::int(value)?;
        u64::try_from(n).with_context(|| format!("{n} is no reply of void.lua"))
    }
}

/// `borrow.lua` and `void.lua` take the same keys and first argument.
fn donor_args(k: &ProductKeys, ticket: &Ticket, call: &mut ScriptInvocation<'static>) {
    call.key(k.stock())
        .key(k.meta())
        .key(k.loans())
        .arg(ticket.as_str());
}

/// How `settle_borrow.lua` ends a borrow in the home bucket (its `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
pub enum BorrowEnd {
    /// `lent`: a donor gave the unit: `borrowing` → `pending`.
    Lent,
    /// `none`: no bucket had a unit: `borrowing` → `failed` (`out_of_stock`).
    None,
    /// `voiding`: the sweeper (or the gateway, for an order the buckets could not fill)
    /// takes the ticket over: `borrowing` → `voiding`.
    Voiding,
    /// `void`: its donors are voided: `voiding` → `failed` (`expired`).
    Void,
    /// `void`, by the gateway: the buckets together had fewer units than the order asks for,
    /// and those it borrowed went back: `voiding` → `failed` (`out_of_stock`).
    #[strum(serialize = "void")]
    Short,
}

/// `settle_borrow.lua`: the end of a borrow, in the buyer's home bucket.
pub struct SettleBorrow<'a> {
    /// The home bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub end: BorrowEnd,
}

impl RedisScript for SettleBorrow<'_> {
    const NAME: &'static str = "settle-borrow";
    /// `true` (`1`) when the ticket changed (for `voiding`: when it is now voiding), `false`
    /// (`0`) otherwise.
    type Reply = bool;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!("settle_borrow.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        let mode: &'static str = self.end.into();
        call.key(k.meta())
            .key(k.pending())
            .key(k.borrowing())
            .key(k.buyers())
            .key(k.ticket(self.ticket))
            .arg(self.ticket.as_str())
            .arg(mode);
        match self.end {
            BorrowEnd::Void => call.arg(FailureReason::Expired.as_str()),
            BorrowEnd::Short => call.arg(FailureReason::OutOfStock.as_str()),
            _ => call,
        };
    }

    fn reply(value: Value) -> anyhow::Result<bool> {
        script::changed(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    fn reply(code: i64, extra: Option<&str>) -> Reply {
        let mut v = vec![Value::Int(code)];
        if let Some(x) = extra {
            v.push(Value::BulkString(x.as_bytes().to_vec()));
        }
        buyer_reply(&v)
    }

    #[test]
    fn every_reservation_code_is_named_and_others_refused() {
        let done = |code| match reply(code, None).unwrap() {
            ReserveStep::Done(r) => r,
            _ => panic!("{code} is a decision"),
        };
        let done_with = |code, extra| match reply(code, Some(extra)).unwrap() {
            ReserveStep::Done(r) => r,
            _ => panic!("{code} is a decision"),
        };
        assert_eq!(done(1), Reservation::Reserved);
        assert_eq!(done(3), Reservation::SoldOut);
        assert_eq!(done(4), Reservation::UnknownProduct);
        assert_eq!(done(5), Reservation::NotStarted);
        assert_eq!(done(6), Reservation::Ended);
        assert_eq!(done(7), Reservation::AdmissionRequired);
        assert_eq!(done(8), Reservation::NotAdmitted);
        let t = Ticket::generate(crate::ProductId::new(1).unwrap());
        assert!(matches!(
            reply(2, Some(t.as_str())).unwrap(),
            ReserveStep::Done(Reservation::AlreadyHolds(h)) if h == t
        ));
        assert!(matches!(reply(9, None).unwrap(), ReserveStep::Borrow));
        assert!(matches!(
            reply(10, Some("4")).unwrap(),
            ReserveStep::Buckets(4)
        ));
        assert!(matches!(
            reply(11, Some("250")).unwrap(),
            ReserveStep::Done(Reservation::RateLimited {
                retry_after_ms: 250
            })
        ));
        assert!(reply(0, Some("boom")).is_err());
        assert!(reply(12, None).is_err());
        assert!(reply(13, None).is_err());
        assert_eq!(
            done_with(12, "4"),
            Reservation::OverLimit { max_per_buyer: 4 }
        );
        assert_eq!(done_with(13, "3"), Reservation::NotEnough { left: 3 });
        assert!(reply(14, None).is_err());
        assert!(reply(2, Some("not a ticket")).is_err());
        assert!(reply(10, None).is_err());
    }

    #[test]
    fn borrow_ends_are_the_scripts_words() {
        let words: Vec<&str> = BorrowEnd::VARIANTS.iter().map(|&e| e.into()).collect();
        assert_eq!(words, ["lent", "none", "voiding", "void", "void"]);
    }
}
