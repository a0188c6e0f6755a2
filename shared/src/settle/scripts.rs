//! The settle scripts as types: `claim.lua`, `confirm.lua`, `compensate.lua` (see
//! [`crate::store::script`]).

use crate::domain::{FailureReason, OrderMessage, Ticket};
use crate::store::script::{self, RedisScript};
use crate::store::{ProductKeys, RecordStatus};
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// `claim.lua`: a worker claims orders of one bucket, `pending` → `processing`, adopting
/// those whose record Redis lost.
pub struct Claim<'a> {
    /// The bucket's keys.
    pub keys: ProductKeys,
    pub orders: &'a [&'a OrderMessage],
    /// How long a settled record lives (s), to tell an expired record from a lost one.
    pub ticket_ttl_secs: u64,
}

/// What `claim.lua` found for one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimStatus {
    /// `processing`: this call owns the order now, or a redelivery found it still claimed.
    Claimed,
    /// The settled status found (`confirmed`, `paid`, `cancelled` or `failed`).
    Settled(RecordStatus),
    /// `expired`: no record, and Redis did not lose it: it expired after the order settled.
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

impl RedisScript for Claim<'_> {
    const NAME: &'static str = "claim";
    /// One status per order, in order.
    type Reply = Vec<ClaimStatus>;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("claim.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending());
        for m in self.orders {
            call.key(k.ticket(&m.ticket));
            call.arg(m.ticket.as_str())
                .arg(m.user_id.get())
                .arg(m.reserved_at_ms)
                .arg(m.quantity);
        }
        call.arg(self.ticket_ttl_secs);
    }

    fn reply(value: Value) -> anyhow::Result<Self::Reply> {
        let raw: Vec<String> = script::parse(value)?;
        raw.iter().map(|s| ClaimStatus::parse(s)).collect()
    }
}

/// One ticket for [`Confirm`].
pub struct Confirmed<'a> {
    pub ticket: &'a Ticket,
    pub order_id: u64,
    /// How long the confirmed record lives (s): the usual TTL, and for a ticket to be paid
    /// the payment window too.
    pub ttl_secs: i64,
    /// The payment deadline MySQL holds, ms (`None`: no payment window); it rides the
    /// change's message to the gateways' streams.
    pub pay_by_ms: Option<i64>,
}

/// `confirm.lua`: claimed tickets of one bucket become `confirmed` after their MySQL commit.
pub struct Confirm<'a> {
    pub keys: ProductKeys,
    pub tickets: Vec<Confirmed<'a>>,
    pub now_ms: i64,
}

impl RedisScript for Confirm<'_> {
    const NAME: &'static str = "confirm";
    /// How many tickets changed.
    type Reply = u64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::notifying(include_str!("confirm.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        call.key(k.meta()).key(k.pending());
        for t in &self.tickets {
            call.key(k.ticket(t.ticket));
            call.arg(t.ticket.as_str()).arg(t.order_id).arg(t.ttl_secs);
            match t.pay_by_ms {
                Some(ms) => call.arg(ms),
                None => call.arg(""),
            };
        }
        call.arg(self.now_ms);
    }

    fn reply(value: Value) -> anyhow::Result<u64> {
        script::parse(value)
    }
}

/// Which tickets `compensate.lua` fails, and what happens to their unit (its `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum CompensateMode {
    /// `any`: a ticket still `pending` or `processing`; its unit goes back.
    Any,
    /// `heal`: as `any`, but MySQL had no unit for it, so Redis over-counted: the unit is not
    /// given back (unless the stock is below zero).
    Heal,
    /// `pending_only` (the sweeper): only a ticket still `pending`, not located on its record,
    /// reserved at or before `reserved_by_ms`, in this server run's state.
    PendingOnly { reserved_by_ms: i64 },
}

/// `compensate.lua`: a ticket fails for good, and its unit goes back, once.
pub struct Compensate<'a> {
    /// The ticket's bucket's keys.
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub reason: FailureReason,
    pub mode: CompensateMode,
    /// How long the failed record lives (s).
    pub ticket_ttl_secs: u64,
}

/// What `compensate.lua` did. Unchanged: the ticket had settled already, is claimed (for
/// `pending_only`), or is gone.
pub type Compensated = crate::store::script::UnitReturn;

impl RedisScript for Compensate<'_> {
    const NAME: &'static str = "compensate";
    type Reply = Compensated;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::notifying(include_str!("compensate.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        let cutoff_ms = match self.mode {
            CompensateMode::PendingOnly { reserved_by_ms } => reserved_by_ms,
            CompensateMode::Any | CompensateMode::Heal => 0,
        };
        let mode: &'static str = self.mode.into();
        call.key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(self.ticket))
            .arg(self.ticket.as_str())
            .arg(self.reason.as_str())
            .arg(mode)
            .arg(cutoff_ms)
            .arg(self.ticket_ttl_secs);
    }

    fn reply(value: Value) -> anyhow::Result<Compensated> {
        Compensated::parse(value, "compensate.lua")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_the_scripts_words() {
        let text = |m: CompensateMode| -> &'static str { m.into() };
        assert_eq!(text(CompensateMode::Any), "any");
        assert_eq!(text(CompensateMode::Heal), "heal");
        assert_eq!(
            text(CompensateMode::PendingOnly { reserved_by_ms: 5 }),
            "pending_only"
        );
    }

    #[test]
    fn replies_are_named_and_others_refused() {
        assert_eq!(
            Compensate::reply(Value::Int(2)).unwrap(),
            Compensated::NoUnitBack
        );
        assert!(Compensate::reply(Value::Int(3)).is_err());
        let claim = |s: &[&str]| {
            Claim::reply(Value::Array(
                s.iter()
                    .map(|x| Value::BulkString(x.as_bytes().to_vec()))
                    .collect(),
            ))
        };
        assert_eq!(
            claim(&["processing", "expired", "paid"]).unwrap(),
            [
                ClaimStatus::Claimed,
                ClaimStatus::Expired,
                ClaimStatus::Settled(RecordStatus::Paid)
            ]
        );
        assert!(claim(&["pending"]).is_err());
        assert!(claim(&["borrowing"]).is_err());
    }
}
