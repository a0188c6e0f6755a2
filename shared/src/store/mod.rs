//! The Redis side of a sale: key layout and the scripts that move a ticket through its states.
//!
//! All keys of one product share the hash tag `{<namespace>:<product>}`, so they live in one
//! Redis Cluster slot and every script touches a single slot.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `sk:{ns:P}:stock` | string | units left to reserve |
//! | `sk:{ns:P}:meta` | hash | `initial`, `starts_at`, `ends_at` (ms), `confirmed` (units sold: confirmed or paid), `paid`, `cancelled`, `failed` |
//! | `sk:{ns:P}:buyers` | hash | user id → live ticket |
//! | `sk:{ns:P}:pending` | sorted set | tickets not yet settled, scored by reservation time |
//! | `sk:{ns:P}:t:<ticket>` | hash | `status`, `user_id`, `product_id`, `created_at`, `order_id`, `confirmed_at`, `reason` |
//!
//! Ticket states ([`RecordStatus`]): `pending` → `processing` (claimed by a worker) →
//! `confirmed` | `failed`; a confirmed ticket then follows MySQL to `paid` or `cancelled`
//! (its unit back on sale). A reservation the gateway could not hand to Kafka is released:
//! its unit goes back and the ticket becomes `failed` (`kafka_unavailable`); it is never
//! deleted, so a message that reached Kafka after all is skipped.

use crate::domain::{OrderMessage, ProductId, Ticket, TicketStatus, UserId};
use anyhow::Context;
mod conn;

pub use conn::{RedisConn, Topology};
use redis::{AsyncCommands, Script};
use std::collections::HashMap;
use std::sync::LazyLock;
use std::time::Duration;

static RESERVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("reserve.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));
static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("claim.lua")));
static CONFIRM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("confirm.lua")));
static COMPENSATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("compensate.lua")));
static PRELOAD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("preload.lua")));
static RESTORE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("restore.lua")));
static REBUILD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("rebuild.lua")));
static QUEUE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("queue.lua")));
static CANCEL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("cancel.lua")));
static PAID: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("paid.lua")));
static LOCATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("locate.lua")));

/// The keys of one product.
#[derive(Debug, Clone)]
pub struct ProductKeys {
    prefix: String,
}

impl ProductKeys {
    pub fn new(namespace: &str, product: ProductId) -> Self {
        Self {
            prefix: format!("sk:{{{namespace}:{product}}}:"),
        }
    }
    pub fn stock(&self) -> String {
        format!("{}stock", self.prefix)
    }
    pub fn meta(&self) -> String {
        format!("{}meta", self.prefix)
    }
    pub fn buyers(&self) -> String {
        format!("{}buyers", self.prefix)
    }
    pub fn pending(&self) -> String {
        format!("{}pending", self.prefix)
    }
    pub fn ticket(&self, ticket: &Ticket) -> String {
        format!("{}t:{ticket}", self.prefix)
    }
    /// Waiting room: the queue (user → place score).
    pub fn queue(&self) -> String {
        format!("{}q", self.prefix)
    }
    /// Waiting room: admitted buyers who have not bought (user → admission expiry, ms).
    pub fn admitted(&self) -> String {
        format!("{}adm", self.prefix)
    }
    /// Waiting room: entries that ended (user → `expired` or `bought`).
    pub fn queue_done(&self) -> String {
        format!("{}qdone", self.prefix)
    }
    /// Waiting room: each buyer's queue id (user → id).
    pub fn queue_ids(&self) -> String {
        format!("{}qid", self.prefix)
    }
}

/// A buyer's place in a product's waiting room, as `queue.lua` left it.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueState {
    UnknownProduct,
    NoWaitingRoom,
    /// Joining before `opens_at`.
    NotOpen,
    /// The buyer never joined.
    NotJoined,
    Waiting {
        queue_id: String,
        /// Places ahead; `None` before the sale starts (the order is drawn at random).
        ahead: Option<u64>,
        /// No unit left and none in flight.
        sold_out: bool,
        admit_per_sec: f64,
        starts_at_ms: i64,
    },
    Admitted {
        queue_id: String,
        until_ms: i64,
    },
    Expired {
        queue_id: String,
    },
    Bought {
        queue_id: String,
    },
}

/// What a join or poll does in [`TicketStore::queue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOp<'a> {
    /// Join with this new queue id and random place (below 2^50), unless already in.
    Join {
        queue_id: &'a str,
        place: u64,
    },
    Poll,
}

/// What the reservation script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    Reserved,
    /// The user already holds this live ticket.
    AlreadyHolds(Ticket),
    SoldOut,
    UnknownProduct,
    NotStarted,
    Ended,
    /// A waiting-room product, and no verified admission token.
    AdmissionRequired,
    /// A waiting-room product, and the buyer is not admitted now (lapsed, or taken back).
    NotAdmitted,
}

/// The `status` field of a Redis ticket record, parsed once where it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordStatus {
    /// Reserved; no worker has claimed it yet.
    Pending,
    /// Claimed by a worker, not yet settled.
    Processing,
    Confirmed,
    /// Paid in MySQL; Redis follows (best effort: MySQL decides).
    Paid,
    /// Cancelled in MySQL, and its unit given back in Redis.
    Cancelled,
    Failed,
}

impl RecordStatus {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "processing" => Self::Processing,
            "confirmed" => Self::Confirmed,
            "paid" => Self::Paid,
            "cancelled" => Self::Cancelled,
            "failed" => Self::Failed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Confirmed => "confirmed",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// What a client sees: `processing` is shown as `pending`.
    pub fn public(self) -> TicketStatus {
        match self {
            Self::Pending | Self::Processing => TicketStatus::Pending,
            Self::Confirmed => TicketStatus::Confirmed,
            Self::Paid => TicketStatus::Paid,
            Self::Cancelled => TicketStatus::Cancelled,
            Self::Failed => TicketStatus::Failed,
        }
    }

    /// Settled by MySQL: nothing more for a worker to do.
    pub fn is_settled(self) -> bool {
        !matches!(self, Self::Pending | Self::Processing)
    }
}

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

/// The Redis copy of a ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketRecord {
    pub state: RecordStatus,
    pub status: TicketStatus,
    pub user_id: u64,
    pub order_id: Option<u64>,
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub confirmed_at_ms: Option<i64>,
    pub paid_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
    /// Where the order landed in Kafka (partition, offset), once the gateway recorded it.
    pub location: Option<(i32, i64)>,
}

/// What MySQL says of a product, for [`TicketStore::rebuild`].
#[derive(Debug, Clone, Default)]
pub struct Rebuild {
    pub mysql_stock: i64,
    pub initial: i64,
    /// Orders holding a unit: confirmed or paid.
    pub sold: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
}

/// Redis view of a product, for the admin API and the auditor.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProductCounts {
    pub stock: Option<i64>,
    pub initial: Option<i64>,
    pub pending: i64,
    /// Units sold: confirmed, paid or not yet.
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub buyers: i64,
    /// The end of the sale, ms since the epoch, when it has one.
    pub ends_at_ms: Option<i64>,
}

/// Handle to the Redis state of one namespace. Cheap to clone: one multiplexed connection
/// that reconnects on its own.
#[derive(Clone)]
pub struct TicketStore {
    conn: RedisConn,
    namespace: String,
    ticket_ttl_secs: u64,
}

impl TicketStore {
    /// Connects lazily: the first command opens the connection, so a process can start while
    /// Redis is down and fail only the requests that need it.
    pub fn new(
        topology: &Topology,
        namespace: &str,
        ticket_ttl_secs: u64,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let conn = RedisConn::open(topology, timeout)?;
        Ok(Self {
            conn,
            namespace: namespace.to_owned(),
            ticket_ttl_secs,
        })
    }

    /// The store for `SECKILL_REDIS_URL`, `SECKILL_NAMESPACE`, `SECKILL_TICKET_TTL_SECS` and
    /// `SECKILL_REDIS_TIMEOUT_MS`.
    pub fn from_settings(s: &crate::Settings) -> anyhow::Result<Self> {
        Self::new(
            &s.redis_topology()?,
            &s.namespace,
            s.ticket_ttl_secs,
            s.redis_timeout(),
        )
    }

    pub fn keys(&self, product: ProductId) -> ProductKeys {
        ProductKeys::new(&self.namespace, product)
    }

    pub fn connection(&self) -> RedisConn {
        self.conn.clone()
    }

    pub async fn ping(&self) -> anyhow::Result<()> {
        let mut c = self.conn.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut c)
            .await
            .context("redis PING")?;
        Ok(())
    }

    /// Runs the reservation script: the whole buy decision in one atomic step.
    /// `admission_verified`: the gateway verified the buyer's admission token (needed for a
    /// product with a waiting room).
    pub async fn reserve(
        &self,
        ticket: &Ticket,
        user: UserId,
        now_ms: i64,
        admission_verified: bool,
    ) -> anyhow::Result<Reservation> {
        let product = ticket.product();
        let k = self.keys(product);
        let mut c = self.conn.clone();
        let (code, held): (i64, Option<String>) = RESERVE
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(ticket))
            .key(k.admitted())
            .key(k.queue_done())
            .key(k.queue())
            .arg(user.get())
            .arg(ticket.as_str())
            .arg(now_ms)
            .arg(self.ticket_ttl_secs)
            .arg(product.get())
            .arg(if admission_verified { "1" } else { "" })
            .invoke_async::<Vec<redis::Value>>(&mut c)
            .await
            .context("running the reservation script")
            .and_then(|v| {
                let code: i64 = redis::from_redis_value_ref(v.first().context("empty reply")?)?;
                let held: Option<String> = match v.get(1) {
                    Some(x) => Some(redis::from_redis_value_ref(x)?),
                    None => None,
                };
                Ok((code, held))
            })?;
        Ok(match code {
            1 => Reservation::Reserved,
            2 => Reservation::AlreadyHolds(
                Ticket::parse(held.as_deref().unwrap_or_default())
                    .context("stored ticket is malformed")?,
            ),
            3 => Reservation::SoldOut,
            4 => Reservation::UnknownProduct,
            5 => Reservation::NotStarted,
            6 => Reservation::Ended,
            7 => Reservation::AdmissionRequired,
            8 => Reservation::NotAdmitted,
            other => anyhow::bail!("reservation script returned unknown code {other}"),
        })
    }

    /// Joins or polls a product's waiting room for `user`, admitting whoever's turn has come
    /// (see `queue.lua`). `admission_ttl_ms`: how long an admission lasts.
    pub async fn queue(
        &self,
        product: ProductId,
        user: UserId,
        op: QueueOp<'_>,
        now_ms: i64,
        admission_ttl_ms: u64,
    ) -> anyhow::Result<QueueState> {
        let k = self.keys(product);
        let (kind, id, place) = match op {
            QueueOp::Join { queue_id, place } => ("join", queue_id, place.min((1 << 50) - 1)),
            QueueOp::Poll => ("poll", "", 0),
        };
        let mut c = self.conn.clone();
        let raw: Vec<String> = QUEUE
            .key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .key(k.queue())
            .key(k.admitted())
            .key(k.queue_done())
            .key(k.queue_ids())
            .arg(now_ms)
            .arg(user.get())
            .arg(kind)
            .arg(id)
            .arg(place)
            .arg(admission_ttl_ms)
            .invoke_async(&mut c)
            .await
            .context("running the queue script")?;
        let field = |i: usize| raw.get(i).cloned().unwrap_or_default();
        let num = |i: usize| field(i).parse::<f64>().unwrap_or(0.0);
        Ok(match field(0).as_str() {
            "unknown_product" => QueueState::UnknownProduct,
            "no_waiting_room" => QueueState::NoWaitingRoom,
            "not_open" => QueueState::NotOpen,
            "none" => QueueState::NotJoined,
            "waiting" => QueueState::Waiting {
                queue_id: field(1),
                ahead: (num(2) >= 0.0).then_some(num(2) as u64),
                sold_out: field(3) == "1",
                admit_per_sec: num(4),
                starts_at_ms: num(5) as i64,
            },
            "admitted" => QueueState::Admitted {
                queue_id: field(1),
                until_ms: num(2) as i64,
            },
            "expired" => QueueState::Expired { queue_id: field(1) },
            "bought" => QueueState::Bought { queue_id: field(1) },
            other => anyhow::bail!("queue script returned {other:?}"),
        })
    }

    /// Writes (or, with `None`, removes) a product's waiting room in its Redis meta.
    pub async fn set_waiting_room(
        &self,
        product: ProductId,
        room: Option<&crate::db::WaitingRoom>,
    ) -> anyhow::Result<()> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        match room {
            Some(w) => {
                let _: () = c
                    .hset_multiple(
                        k.meta(),
                        &[
                            ("wr_rate", w.admit_per_sec.to_string()),
                            ("wr_factor", w.max_admitted_factor.to_string()),
                            ("wr_opens", w.opens_at_ms.to_string()),
                        ],
                    )
                    .await
                    .context("writing the waiting room")?;
            }
            None => {
                let _: () = c
                    .hdel(k.meta(), &["wr_rate", "wr_factor", "wr_opens"])
                    .await
                    .context("removing the waiting room")?;
            }
        }
        Ok(())
    }

    /// Waiting room: (admitted buyers who have not bought, units left), read together.
    pub async fn admitted_and_stock(&self, product: ProductId) -> anyhow::Result<(u64, i64)> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        let (admitted, stock): (u64, Option<i64>) = redis::pipe()
            .atomic()
            .zcard(k.admitted())
            .get(k.stock())
            .query_async(&mut c)
            .await
            .context("reading the waiting room")?;
        Ok((admitted, stock.unwrap_or(0)))
    }

    /// A waiting room's admitted buyers who have not bought, and the buyers still waiting.
    pub async fn room_counts(&self, product: ProductId) -> anyhow::Result<(u64, u64)> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        redis::pipe()
            .zcard(k.admitted())
            .zcard(k.queue())
            .query_async(&mut c)
            .await
            .context("reading the waiting room")
    }

    /// Gives back a reservation that never reached Kafka and marks its ticket failed with
    /// `reason`. `true` when it was released.
    pub async fn release(
        &self,
        ticket: &Ticket,
        user: UserId,
        reason: &str,
    ) -> anyhow::Result<bool> {
        let k = self.keys(ticket.product());
        let mut c = self.conn.clone();
        let n: i64 = RELEASE
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(ticket))
            .arg(user.get())
            .arg(ticket.as_str())
            .arg(reason)
            .invoke_async(&mut c)
            .await
            .context("running the release script")?;
        Ok(n == 1)
    }

    /// Claims the orders of one product for a worker, in order. An order whose ticket record
    /// Redis lost is adopted; one whose record expired is not. See `claim.lua`.
    pub async fn claim(
        &self,
        product: ProductId,
        orders: &[&OrderMessage],
    ) -> anyhow::Result<Vec<ClaimStatus>> {
        if orders.is_empty() {
            return Ok(vec![]);
        }
        let k = self.keys(product);
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
        inv.arg(self.ticket_ttl_secs).arg(product.get());
        let mut c = self.conn.clone();
        let raw: Vec<String> = inv
            .invoke_async(&mut c)
            .await
            .context("running the claim script")?;
        raw.iter().map(|s| ClaimStatus::parse(s)).collect()
    }

    /// Records where the orders of one product landed in Kafka: (ticket, partition, offset).
    /// Returns how many records were still there to take it.
    pub async fn locate(
        &self,
        product: ProductId,
        located: &[(Ticket, i32, i64)],
    ) -> anyhow::Result<u64> {
        if located.is_empty() {
            return Ok(0);
        }
        let k = self.keys(product);
        let mut inv = LOCATE.prepare_invoke();
        for (t, partition, offset) in located {
            inv.key(k.ticket(t));
            inv.arg(*partition).arg(*offset);
        }
        let mut c = self.conn.clone();
        inv.invoke_async(&mut c)
            .await
            .context("running the locate script")
    }

    /// Confirms claimed tickets of one product with their order ids and payment deadlines.
    /// Returns how many changed.
    pub async fn confirm(
        &self,
        product: ProductId,
        orders: &[(&Ticket, u64, Option<i64>)],
    ) -> anyhow::Result<u64> {
        if orders.is_empty() {
            return Ok(0);
        }
        let k = self.keys(product);
        let mut inv = CONFIRM.prepare_invoke();
        inv.key(k.meta()).key(k.pending());
        let now = crate::now_ms();
        for (t, id, pay_by) in orders {
            inv.key(k.ticket(t));
            // A ticket to be paid lives until its deadline plus the usual TTL.
            let ttl = pay_by
                .map(|by| (self.ticket_ttl_secs as i64 + (by - now).max(0) / 1000 + 1).to_string())
                .unwrap_or_default();
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
        self.run_compensate(ticket, reason, mode, 0).await
    }

    /// The sweeper's variant: fails the ticket only if it is still `pending` (no worker has
    /// claimed it) and was reserved at or before `cutoff_ms`. `true` when a unit went back.
    pub async fn expire_pending(
        &self,
        ticket: &Ticket,
        reason: &str,
        cutoff_ms: i64,
    ) -> anyhow::Result<bool> {
        self.run_compensate(ticket, reason, "pending_only", cutoff_ms)
            .await
    }

    async fn run_compensate(
        &self,
        ticket: &Ticket,
        reason: &str,
        mode: &str,
        cutoff_ms: i64,
    ) -> anyhow::Result<bool> {
        let k = self.keys(ticket.product());
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
            .invoke_async(&mut c)
            .await
            .context("running the compensation script")?;
        Ok(n == 1)
    }

    /// Makes Redis follow an order MySQL cancelled: the ticket becomes `cancelled`, its buyer
    /// is free and its unit goes back on sale, once however often this runs. `true` when
    /// this call gave the unit back.
    pub async fn cancel(
        &self,
        ticket: &Ticket,
        reason: crate::CancelReason,
        now_ms: i64,
    ) -> anyhow::Result<bool> {
        let k = self.keys(ticket.product());
        let mut c = self.conn.clone();
        let n: i64 = CANCEL
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.ticket(ticket))
            .arg(ticket.as_str())
            .arg(reason.as_str())
            .arg(now_ms)
            .invoke_async(&mut c)
            .await
            .context("running the cancel script")?;
        Ok(n == 1)
    }

    /// Makes Redis follow an order MySQL marked paid. `true` when the record changed.
    pub async fn paid(&self, ticket: &Ticket, now_ms: i64) -> anyhow::Result<bool> {
        let k = self.keys(ticket.product());
        let mut c = self.conn.clone();
        let n: i64 = PAID
            .key(k.meta())
            .key(k.ticket(ticket))
            .arg(now_ms)
            .invoke_async(&mut c)
            .await
            .context("running the paid script")?;
        Ok(n == 1)
    }

    /// Tickets of a product still unsettled in Redis and reserved at or before `cutoff_ms`.
    pub async fn unsettled_before(
        &self,
        product: ProductId,
        cutoff_ms: i64,
        limit: isize,
    ) -> anyhow::Result<Vec<Ticket>> {
        let mut c = self.conn.clone();
        let raw: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(self.keys(product).pending())
            .arg("-inf")
            .arg(cutoff_ms)
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut c)
            .await
            .context("reading pending tickets")?;
        Ok(raw.iter().filter_map(|t| Ticket::parse(t).ok()).collect())
    }

    /// Reconcile, step one: write settled records for tickets MySQL has settled. `entries`
    /// are (ticket, user, order id or failure reason, cancel reason or ""). `ttl_secs` is how long the records live.
    /// Returns how many records changed.
    pub async fn restore_settled(
        &self,
        product: ProductId,
        status: RecordStatus,
        entries: &[(Ticket, u64, String, String)],
        ttl_secs: u64,
    ) -> anyhow::Result<u64> {
        let k = self.keys(product);
        let mut changed = 0;
        for chunk in entries.chunks(500) {
            let mut inv = RESTORE.prepare_invoke();
            inv.key(k.buyers()).key(k.pending());
            inv.arg(status.as_str()).arg(ttl_secs).arg(product.get());
            for (t, user, detail, why) in chunk {
                inv.key(k.ticket(t));
                inv.arg(t.as_str()).arg(*user).arg(detail).arg(why);
            }
            let mut c = self.conn.clone();
            let n: u64 = inv
                .invoke_async(&mut c)
                .await
                .context("running the restore script")?;
            changed += n;
        }
        Ok(changed)
    }

    /// How long a ticket record lives (`SECKILL_TICKET_TTL_SECS`).
    pub fn ticket_ttl_secs(&self) -> u64 {
        self.ticket_ttl_secs
    }

    /// Reconcile, step two: counters and stock from MySQL. Returns the new stock.
    pub async fn rebuild(&self, product: ProductId, m: &Rebuild) -> anyhow::Result<i64> {
        let k = self.keys(product);
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut c = self.conn.clone();
        REBUILD
            .key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .arg(m.mysql_stock)
            .arg(m.initial)
            .arg(m.sold)
            .arg(m.failed)
            .arg(opt(m.starts_at_ms))
            .arg(opt(m.ends_at_ms))
            .arg(crate::now_ms())
            .arg(m.paid)
            .arg(m.cancelled)
            .invoke_async(&mut c)
            .await
            .context("running the rebuild script")
    }

    /// Drops `pending` entries whose ticket record is gone (expired).
    pub async fn prune_pending(&self, product: ProductId) -> anyhow::Result<u64> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        let members: Vec<String> = c
            .zrange(k.pending(), 0, -1)
            .await
            .context("reading pending")?;
        let mut pruned = 0;
        for m in members {
            let Ok(t) = Ticket::parse(&m) else { continue };
            let exists: bool = c.exists(k.ticket(&t)).await.context("checking a ticket")?;
            if !exists {
                let n: u64 = c.zrem(k.pending(), &m).await.context("pruning pending")?;
                pruned += n;
            }
        }
        Ok(pruned)
    }

    /// Loads a product for sale. Returns the Redis stock it set.
    pub async fn preload(
        &self,
        product: ProductId,
        mysql_stock: i64,
        starts_at_ms: Option<i64>,
        ends_at_ms: Option<i64>,
    ) -> anyhow::Result<i64> {
        let k = self.keys(product);
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut c = self.conn.clone();
        PRELOAD
            .key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .arg(mysql_stock)
            .arg(opt(starts_at_ms))
            .arg(opt(ends_at_ms))
            .arg(crate::now_ms())
            .invoke_async(&mut c)
            .await
            .context("running the preload script")
    }

    /// A closed sale's keys (stock, meta, buyers, pending) expire after `grace`. Ticket
    /// records keep their own TTL.
    pub async fn expire_sale(&self, product: ProductId, grace: Duration) -> anyhow::Result<()> {
        let k = self.keys(product);
        let secs = grace.as_secs().max(1) as i64;
        let mut c = self.conn.clone();
        let _: () = redis::pipe()
            .expire(k.stock(), secs)
            .ignore()
            .expire(k.meta(), secs)
            .ignore()
            .expire(k.buyers(), secs)
            .ignore()
            .expire(k.pending(), secs)
            .ignore()
            .query_async(&mut c)
            .await
            .context("expiring a closed sale's keys")?;
        Ok(())
    }

    /// The Redis copy of a ticket, or `None` when it is unknown or has expired.
    pub async fn ticket(&self, ticket: &Ticket) -> anyhow::Result<Option<TicketRecord>> {
        let k = self.keys(ticket.product());
        let mut c = self.conn.clone();
        let h: HashMap<String, String> = c
            .hgetall(k.ticket(ticket))
            .await
            .context("reading a ticket")?;
        let Some(raw) = h.get("status") else {
            return Ok(None);
        };
        let state = RecordStatus::parse(raw)
            .with_context(|| format!("unknown ticket status {raw:?} in Redis"))?;
        let num = |f: &str| h.get(f).and_then(|v| v.parse::<i64>().ok());
        Ok(Some(TicketRecord {
            state,
            status: state.public(),
            user_id: num("user_id").unwrap_or_default() as u64,
            order_id: num("order_id").map(|v| v as u64),
            reason: h.get("reason").cloned(),
            created_at_ms: num("created_at").unwrap_or_default(),
            confirmed_at_ms: num("confirmed_at"),
            paid_at_ms: num("paid_at"),
            cancelled_at_ms: num("cancelled_at"),
            location: num("kp").zip(num("ko")).map(|(p, o)| (p as i32, o)),
        }))
    }

    /// Units left in Redis, or `None` for a product that is not loaded.
    pub async fn stock(&self, product: ProductId) -> anyhow::Result<Option<i64>> {
        let mut c = self.conn.clone();
        c.get(self.keys(product).stock())
            .await
            .context("reading stock")
    }

    /// The ticket a user holds for a product, if any.
    pub async fn buyer(&self, product: ProductId, user: UserId) -> anyhow::Result<Option<String>> {
        let mut c = self.conn.clone();
        c.hget(self.keys(product).buyers(), user.get())
            .await
            .context("reading buyers")
    }

    pub async fn counts(&self, product: ProductId) -> anyhow::Result<ProductCounts> {
        let k = self.keys(product);
        let mut c = self.conn.clone();
        // Text, parsed field by field: the meta hash also holds decimals (a waiting room's
        // `wr_factor`, `wr_credit`).
        let (stock, meta, pending, buyers): (Option<i64>, HashMap<String, String>, i64, i64) =
            redis::pipe()
                .get(k.stock())
                .hgetall(k.meta())
                .zcard(k.pending())
                .hlen(k.buyers())
                .query_async(&mut c)
                .await
                .context("reading product counts")?;
        let int = |field: &str| -> anyhow::Result<Option<i64>> {
            meta.get(field)
                .map(|v| v.parse::<i64>())
                .transpose()
                .with_context(|| format!("meta field {field} is not a whole number"))
        };
        Ok(ProductCounts {
            stock,
            initial: int("initial")?,
            pending,
            confirmed: int("confirmed")?.unwrap_or(0),
            paid: int("paid")?.unwrap_or(0),
            cancelled: int("cancelled")?.unwrap_or(0),
            failed: int("failed")?.unwrap_or(0),
            buyers,
            ends_at_ms: int("ends_at")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_of_a_product_share_one_hash_tag() {
        let p = ProductId::new(42).unwrap();
        let k = ProductKeys::new("ns1", p);
        let t = Ticket::generate(p);
        for key in [k.stock(), k.meta(), k.buyers(), k.pending(), k.ticket(&t)] {
            let open = key.find('{').unwrap();
            let close = key[open..].find('}').unwrap() + open;
            assert_eq!(&key[open + 1..close], "ns1:42", "{key}");
        }
        assert_ne!(ProductKeys::new("ns2", p).stock(), k.stock());
    }
}
