//! Recovery's scripts as types: `restore.lua`, `rebuild.lua`, `epoch.lua`, `fail_reason.lua` (see
//! [`crate::store::script`]).

use crate::domain::{CancelReason, FailureReason, OrderStatus, Ticket};
use crate::store::script::{self, RedisScript};
use crate::store::ProductKeys;
use redis::{Script, ScriptInvocation, Value};
use std::sync::LazyLock;

/// A ticket MySQL has an order row for, as reconcile restores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredOrder {
    pub ticket: Ticket,
    pub user_id: u64,
    pub order_id: u64,
    /// `orders.cancel_reason`, for a cancelled order.
    pub cancel_reason: Option<CancelReason>,
    /// Units the order holds.
    pub quantity: u16,
}

/// A ticket MySQL failed (a `failed_tickets` row), as reconcile restores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredFailure {
    pub ticket: Ticket,
    pub user_id: u64,
    pub reason: FailureReason,
    /// Units the ticket asked for.
    pub quantity: u16,
}

/// Settled tickets of one kind, for `restore.lua` (one status per call).
#[derive(Debug, Clone, Copy)]
pub enum Settled<'a> {
    /// Order rows of one status.
    Orders {
        status: OrderStatus,
        orders: &'a [RestoredOrder],
    },
    /// `failed_tickets` rows.
    Failed(&'a [RestoredFailure]),
}

impl Settled<'_> {
    pub fn len(&self) -> usize {
        match self {
            Self::Orders { orders, .. } => orders.len(),
            Self::Failed(failed) => failed.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `restore.lua`: reconcile's first step, settled records written where Redis has none, has
/// them in flight, or has an older state.
pub struct Restore<'a> {
    /// The bucket's keys; every ticket is of this bucket.
    pub keys: ProductKeys,
    pub settled: Settled<'a>,
    /// How long the records live (s).
    pub ttl_secs: u64,
}

impl RedisScript for Restore<'_> {
    const NAME: &'static str = "restore";
    /// How many records changed.
    type Reply = u64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::notifying(include_str!("restore.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let k = &self.keys;
        let status = match self.settled {
            Settled::Orders { status, .. } => status.as_str(),
            Settled::Failed(_) => "failed",
        };
        call.key(k.buyers()).key(k.pending()).key(k.meta());
        call.arg(status).arg(self.ttl_secs);
        // Quintuples: ticket, user, order id or failure reason, cancel reason or '', units.
        match self.settled {
            Settled::Orders { orders, .. } => {
                for o in orders {
                    call.key(k.ticket(&o.ticket));
                    call.arg(o.ticket.as_str())
                        .arg(o.user_id)
                        .arg(o.order_id)
                        .arg(o.cancel_reason.map_or("", CancelReason::as_str))
                        .arg(o.quantity);
                }
            }
            Settled::Failed(failed) => {
                for f in failed {
                    call.key(k.ticket(&f.ticket));
                    call.arg(f.ticket.as_str())
                        .arg(f.user_id)
                        .arg(f.reason.as_str())
                        .arg("")
                        .arg(f.quantity);
                }
            }
        }
    }

    fn reply(value: Value) -> anyhow::Result<u64> {
        script::parse(value)
    }
}

/// What MySQL says of a product, for [`crate::store::TicketStore::rebuild`].
#[derive(Debug, Clone, Default)]
pub struct Rebuild {
    pub mysql_stock: i64,
    pub initial: i64,
    /// Units of the orders confirmed or paid.
    pub sold: i64,
    /// Units paid, cancelled, and of the failed tickets.
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    /// The most units one buyer may take.
    pub max_per_buyer: u16,
}

/// `rebuild.lua`: reconcile's last step for one bucket, its counters and stock from MySQL.
pub struct RebuildBucket<'a> {
    pub keys: ProductKeys,
    pub mysql: &'a Rebuild,
    /// How many buckets the product has: with more than one, `mysql` holds this bucket's
    /// share, and its initial is what it holds.
    pub buckets: u16,
    /// `loaded_at`: claim.lua adopts the orders reserved before it whose records are gone.
    pub now_ms: i64,
}

impl RedisScript for RebuildBucket<'_> {
    const NAME: &'static str = "rebuild";
    /// The stock set.
    type Reply = i64;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| script::counting_units(include_str!("rebuild.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        let (k, m) = (&self.keys, self.mysql);
        let initial = if self.buckets > 1 {
            String::new()
        } else {
            m.initial.to_string()
        };
        call.key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .arg(m.mysql_stock)
            .arg(initial)
            .arg(m.sold)
            .arg(m.failed)
            .arg(script::opt_ms(m.starts_at_ms))
            .arg(script::opt_ms(m.ends_at_ms))
            .arg(self.now_ms)
            .arg(m.paid)
            .arg(m.cancelled)
            .arg(self.buckets)
            .arg(m.max_per_buyer.max(1));
    }

    fn reply(value: Value) -> anyhow::Result<i64> {
        script::int(value)
    }
}

/// `epoch.lua`: is a bucket's state from this Redis server's run?
pub struct Epoch {
    pub keys: ProductKeys,
}

/// What `epoch.lua` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochCheck {
    /// `0`: written by another run, so maybe old: its stock key has just been dropped.
    Dropped,
    /// `1`: this run's state (or it is now, for meta that had no run id yet).
    Current,
    /// `2`: the bucket is not loaded (or was lost already).
    NotLoaded,
}

impl RedisScript for Epoch {
    const NAME: &'static str = "epoch";
    type Reply = EpochCheck;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("epoch.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.keys.stock()).key(self.keys.meta());
    }

    fn reply(value: Value) -> anyhow::Result<EpochCheck> {
        Ok(match script::int(value)? {
            0 => EpochCheck::Dropped,
            1 => EpochCheck::Current,
            2 => EpochCheck::NotLoaded,
            other => anyhow::bail!("{other} is no reply of epoch.lua"),
        })
    }
}

/// `fail_reason.lua`: a failed record takes the reason of MySQL's `failed_tickets` row.
pub struct FailReason<'a> {
    pub keys: ProductKeys,
    pub ticket: &'a Ticket,
    pub reason: FailureReason,
}

impl RedisScript for FailReason<'_> {
    const NAME: &'static str = "fail_reason";
    /// Whether the record's reason changed.
    type Reply = bool;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> =
            LazyLock::new(|| Script::new(include_str!("fail_reason.lua")));
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.keys.ticket(self.ticket))
            .arg(self.reason.as_str());
    }

    fn reply(value: Value) -> anyhow::Result<bool> {
        match script::int(value)? {
            0 => Ok(false),
            1 => Ok(true),
            n => anyhow::bail!("unknown reply {n}"),
        }
    }
}
