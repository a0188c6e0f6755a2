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
//! | `sk:{ns:P}:t:<ticket>` | hash | `status`, `user_id`, `created_at`, `order_id`, `confirmed_at`, `reason` (the product is in the ticket; records written before 2026-12-04 also carry an unread `product_id`) |
//!
//! Ticket states ([`RecordStatus`]): `pending` → `processing` (claimed by a worker) →
//! `confirmed` | `failed`; a confirmed ticket then follows MySQL to `paid` or `cancelled`
//! (its unit back on sale). A reservation the gateway could not hand to Kafka is released:
//! its unit goes back and the ticket becomes `failed` (`kafka_unavailable`); it is never
//! deleted, so a message that reached Kafka after all is skipped.
//!
//! **Stock buckets** (`buckets.rs`): a hot product may split its stock into N buckets, each
//! with its own hash tag `{<namespace>:<product>.<b>.<k>}` (bucket 0 keeps the plain tag), so
//! a cluster spreads them over its primaries. A buyer always buys in one home bucket
//! ([`crate::home_bucket`]), whose `buyers` hash keeps one live ticket per buyer; a ticket
//! names its bucket. When the home bucket is empty, the buyer's place is held there
//! (`borrowing`) while one unit is borrowed from another bucket (`loans`, per ticket).
//!
//! | key (per bucket) | type | holds |
//! |---|---|---|
//! | `…:loans` | hash | ticket → `taken`, `void` or `returned`: loans this bucket made |
//! | `…:borrowing` | sorted set | tickets holding their buyer's place while they borrow |

use crate::domain::{OrderMessage, ProductId, Ticket, TicketStatus, UserId};
use anyhow::Context;
mod batch;
mod buckets;
mod conn;

pub use batch::BatchObserver;
pub use conn::{RedisConn, Topology};
use redis::{AsyncCommands, Script};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

/// The per-user token bucket, a Lua function prepended to the scripts that take a token.
pub const TOKEN_BUCKET_LUA: &str = include_str!("token_bucket.lua");
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));
static LOCATE_HELD: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("locate_held.lua")));
static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("claim.lua")));
static CONFIRM: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("confirm.lua")));
static COMPENSATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("compensate.lua")));
static PRELOAD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("preload.lua")));
static RESTORE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("restore.lua")));
static REBUILD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("rebuild.lua")));
static QUEUE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("queue.lua")));
static CANCEL: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("cancel.lua")));
static PAID: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("paid.lua")));
static EPOCH: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("epoch.lua")));
static LOCATE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("locate.lua")));
static TRIM_LOCATED: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("trim_located.lua")));
static BORROW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("borrow.lua")));
static VOID: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("void.lua")));
static SETTLE_BORROW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("settle_borrow.lua")));

/// The keys of one product.
#[derive(Debug, Clone)]
pub struct ProductKeys {
    prefix: String,
}

impl ProductKeys {
    pub fn new(namespace: &str, product: ProductId) -> Self {
        Self::bucket(namespace, product, 0)
    }
    /// The keys of one stock bucket: bucket 0 is the product's own tag, and the others' tags
    /// are placed around the cluster's slot ring ([`buckets::bucket_tag`]).
    pub fn bucket(namespace: &str, product: ProductId, bucket: u16) -> Self {
        let prefix = if bucket == 0 {
            format!("sk:{{{namespace}:{product}}}:")
        } else {
            format!(
                "sk:{{{}}}:",
                buckets::bucket_tag(namespace, product, bucket)
            )
        };
        Self { prefix }
    }
    /// Loans this bucket made to buyers of other buckets (ticket → state).
    pub fn loans(&self) -> String {
        format!("{}loans", self.prefix)
    }
    /// Tickets holding their buyer's place in this bucket while they borrow a unit.
    pub fn borrowing(&self) -> String {
        format!("{}borrowing", self.prefix)
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
    /// Where this bucket's accepted orders landed in Kafka: one entry per call that recorded
    /// some (`locate.lua`).
    pub fn located(&self) -> String {
        format!("{}located", self.prefix)
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
    /// The buyer's per-user limit, taken in the same call ([`UserLimit`]): no token; the next
    /// comes after this many ms.
    RateLimited {
        retry_after_ms: u64,
    },
}

/// The buyer's per-user limit, taken inside the reservation script when Redis is one server
/// ([`RedisConn::is_single_server`]): one call per buy instead of two.
#[derive(Debug, Clone, PartialEq)]
pub struct UserLimit {
    /// The buyer's bucket (`sk:{<ns>:rl:<user>}:b`).
    pub key: String,
    /// Tokens per second.
    pub rate: f64,
    pub burst: u64,
}

/// What one run of the reservation script asks for next.
enum ReserveStep {
    Done(Reservation),
    /// The home bucket is empty and holds the buyer's place: borrow a unit elsewhere.
    Borrow,
    /// The product has this many buckets, not the number assumed.
    Buckets(u16),
}

/// The positions of `tickets`, grouped by the bucket each lives in (in bucket order).
fn by_bucket<'a>(tickets: impl Iterator<Item = &'a Ticket>) -> BTreeMap<u16, Vec<usize>> {
    let mut out: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, t) in tickets.enumerate() {
        out.entry(t.bucket()).or_default().push(i);
    }
    out
}

/// Kafka locations per entry of a `located` list at most (one reservation call carries one
/// entry).
pub(super) const MAX_LOCATED: usize = 64;

/// How long a gateway holds an order's Kafka location for the next reservation call of its
/// bucket to carry, at most (ms).
pub const HOLD_LOCATED_MS: u64 = 10;

/// Where an accepted order landed in Kafka, with when its unit was reserved (its score in the
/// pending set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub ticket: Ticket,
    pub reserved_at_ms: i64,
    pub partition: i32,
    pub offset: i64,
}

/// One entry of a bucket's `located` list: the newest reservation time among its orders, then
/// "<ticket> <partition> <offset>" per order, space separated (tickets hold no space). The
/// time lets `trim_located.lua` drop the entry without looking up its tickets.
/// No orders make no entry: an empty string, which `reserve.lua` skips.
pub(crate) fn located_entry(located: &[Located]) -> String {
    let Some(newest) = located.iter().map(|l| l.reserved_at_ms).max() else {
        return String::new();
    };
    let mut entry = String::with_capacity(16 + located.len() * 48);
    write!(entry, "{newest}").expect("writing to a String");
    for l in located {
        write!(entry, " {} {} {}", l.ticket, l.partition, l.offset).expect("writing to a String");
    }
    entry
}

/// Adds an entry's locations to `out`; a damaged triple is skipped (its ticket then keeps the
/// sweeper's timeout for an unknown location).
fn parse_located_entry(entry: &str, out: &mut HashMap<String, (i32, i64)>) {
    let mut words = entry.split(' ').skip(1);
    while let (Some(t), Some(p), Some(o)) = (words.next(), words.next(), words.next()) {
        if let (Ok(p), Ok(o)) = (p.parse(), o.parse()) {
            out.insert(t.to_owned(), (p, o));
        }
    }
}

/// The `status` field of a Redis ticket record, parsed once where it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordStatus {
    /// Reserved; no worker has claimed it yet.
    Pending,
    /// Claimed by a worker, not yet settled.
    Processing,
    /// Holding its buyer's place in an empty bucket while a unit is borrowed from another.
    Borrowing,
    /// A borrow the sweeper is giving up.
    Voiding,
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
            "borrowing" => Self::Borrowing,
            "voiding" => Self::Voiding,
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
            Self::Borrowing => "borrowing",
            Self::Voiding => "voiding",
            Self::Confirmed => "confirmed",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// What a client sees: `processing` is shown as `pending`.
    pub fn public(self) -> TicketStatus {
        match self {
            Self::Pending | Self::Processing | Self::Borrowing | Self::Voiding => {
                TicketStatus::Pending
            }
            Self::Confirmed => TicketStatus::Confirmed,
            Self::Paid => TicketStatus::Paid,
            Self::Cancelled => TicketStatus::Cancelled,
            Self::Failed => TicketStatus::Failed,
        }
    }

    /// Settled by MySQL: nothing more for a worker to do.
    pub fn is_settled(self) -> bool {
        !matches!(
            self,
            Self::Pending | Self::Processing | Self::Borrowing | Self::Voiding
        )
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
    /// Where the order landed in Kafka (partition, offset), as builds before 2026-12-04
    /// recorded it, on the record itself. Newer gateways record it in the bucket's `located`
    /// list ([`TicketStore::locations`]); the sweeper reads both, so a mixed fleet keeps
    /// every promise.
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
    /// Each bucket, for a product split into several (else empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<BucketCounts>,
}

/// The Redis counts of one stock bucket. Each bucket keeps
/// `initial − lent + borrowed = stock + pending + confirmed`, and over all buckets the loans
/// cancel out (`Σ lent = Σ borrowed`), so the product keeps `initial = stock + pending +
/// confirmed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BucketCounts {
    pub bucket: u16,
    pub stock: Option<i64>,
    /// The bucket's share of the stock when loaded or rebuilt.
    pub initial: Option<i64>,
    pub pending: i64,
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
    pub failed: i64,
    pub buyers: i64,
    /// Units this bucket gave to buyers of other buckets.
    pub lent: i64,
    /// Units this bucket's buyers took from other buckets.
    pub borrowed: i64,
    /// Tickets holding a buyer's place here while they borrow.
    pub borrowing: i64,
    #[serde(skip)]
    pub ends_at_ms: Option<i64>,
}

/// Handle to the Redis state of one namespace. Cheap to clone: one multiplexed connection
/// that reconnects on its own.
#[derive(Clone)]
pub struct TicketStore {
    conn: RedisConn,
    namespace: String,
    ticket_ttl_secs: u64,
    /// How many stock buckets each product has, as learnt (see `buckets.rs`).
    bucket_counts: Arc<RwLock<HashMap<ProductId, u16>>>,
    /// This connection's reservations waiting for their batch (`batch.rs`).
    lanes: Arc<batch::Lanes>,
    /// The lanes of this store and of every store made from it by `on_new_connection`.
    all_lanes: Arc<std::sync::Mutex<Vec<Arc<batch::Lanes>>>>,
    batch_observer: Option<BatchObserver>,
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
        let lanes: Arc<batch::Lanes> = Default::default();
        Ok(Self {
            conn,
            namespace: namespace.to_owned(),
            ticket_ttl_secs,
            bucket_counts: Default::default(),
            all_lanes: Arc::new(std::sync::Mutex::new(vec![lanes.clone()])),
            lanes,
            batch_observer: None,
        })
    }

    /// Tells `observe` the size of every reservation batch sent, on this connection and on
    /// those opened from it later.
    pub fn with_batch_observer(mut self, observe: BatchObserver) -> Self {
        self.batch_observer = Some(observe);
        self
    }

    /// The same store on a connection of its own, opened lazily: its driver task runs on the
    /// runtime of the first command, so a thread that owns one keeps its Redis calls on that
    /// thread (see the gateway's `ThreadRedis`).
    pub fn on_new_connection(
        &self,
        topology: &Topology,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let lanes: Arc<batch::Lanes> = Default::default();
        self.all_lanes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(lanes.clone());
        Ok(Self {
            conn: RedisConn::open(topology, timeout)?,
            namespace: self.namespace.clone(),
            ticket_ttl_secs: self.ticket_ttl_secs,
            bucket_counts: self.bucket_counts.clone(),
            lanes,
            all_lanes: self.all_lanes.clone(),
            batch_observer: self.batch_observer.clone(),
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

    /// The keys of a product's first (or only) bucket.
    pub fn keys(&self, product: ProductId) -> ProductKeys {
        ProductKeys::new(&self.namespace, product)
    }

    /// The keys of one stock bucket of a product.
    pub fn bucket_keys(&self, product: ProductId, bucket: u16) -> ProductKeys {
        ProductKeys::bucket(&self.namespace, product, bucket)
    }

    /// The keys of the bucket a ticket lives in.
    pub fn ticket_keys(&self, ticket: &Ticket) -> ProductKeys {
        self.bucket_keys(ticket.product(), ticket.bucket())
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

    /// Runs the reservation script once, in `ticket`'s bucket (batched with other buyers of
    /// that bucket, `batch.rs`), assuming the product has `buckets` buckets. See
    /// [`Self::reserve`].
    async fn reserve_step(
        &self,
        ticket: &Ticket,
        user: UserId,
        now_ms: i64,
        admission_verified: bool,
        buckets: u16,
        limit: Option<&UserLimit>,
    ) -> anyhow::Result<ReserveStep> {
        let (code, extra) = self
            .reserve_batched(batch::ReserveCall {
                ticket: ticket.clone(),
                user,
                now_ms,
                admission_verified,
                buckets,
                limit: limit.cloned(),
            })
            .await?;
        let done = match code {
            1 => Reservation::Reserved,
            2 => Reservation::AlreadyHolds(
                Ticket::parse(extra.as_deref().unwrap_or_default())
                    .context("stored ticket is malformed")?,
            ),
            3 => Reservation::SoldOut,
            4 => Reservation::UnknownProduct,
            5 => Reservation::NotStarted,
            6 => Reservation::Ended,
            7 => Reservation::AdmissionRequired,
            8 => Reservation::NotAdmitted,
            9 => return Ok(ReserveStep::Borrow),
            11 => Reservation::RateLimited {
                retry_after_ms: extra
                    .as_deref()
                    .unwrap_or_default()
                    .parse()
                    .context("the wait in Redis")?,
            },
            10 => {
                let n: u16 = extra
                    .as_deref()
                    .unwrap_or_default()
                    .parse()
                    .context("the bucket count in Redis")?;
                return Ok(ReserveStep::Buckets(n));
            }
            other => anyhow::bail!("reservation script returned unknown code {other}"),
        };
        Ok(ReserveStep::Done(done))
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
    /// `reason`; a waiting-room buyer is admitted again for `admission_ttl_ms` (the buy did
    /// not happen). `true` when it was released (with its unit, or without one while the
    /// product is not loaded: the rebuild counts it).
    pub async fn release(
        &self,
        ticket: &Ticket,
        user: UserId,
        reason: &str,
        admission_ttl_ms: u64,
    ) -> anyhow::Result<bool> {
        let k = self.ticket_keys(ticket);
        let mut c = self.conn.clone();
        let n: i64 = RELEASE
            .key(k.stock())
            .key(k.meta())
            .key(k.buyers())
            .key(k.pending())
            .key(k.ticket(ticket))
            .key(k.admitted())
            .key(k.queue_done())
            .arg(user.get())
            .arg(ticket.as_str())
            .arg(reason)
            .arg(self.ticket_ttl_secs)
            .arg(crate::now_ms())
            .arg(admission_ttl_ms)
            .invoke_async(&mut c)
            .await
            .context("running the release script")?;
        Ok(n != 0)
    }

    /// Claims the orders of one product for a worker, in order. An order whose ticket record
    /// Redis lost is adopted; one whose record expired is not. A record gone though it cannot
    /// have expired yet means Redis came back old: the product is then dropped, so that it is
    /// rebuilt. See `claim.lua`.
    pub async fn claim(
        &self,
        product: ProductId,
        orders: &[&OrderMessage],
    ) -> anyhow::Result<Vec<ClaimStatus>> {
        // One script per bucket, the answers put back in the callers' order.
        let mut out = vec![ClaimStatus::Expired; orders.len()];
        for (bucket, idx) in by_bucket(orders.iter().map(|m| &m.ticket)) {
            let part: Vec<&OrderMessage> = idx.iter().map(|&i| orders[i]).collect();
            let got = self.claim_in(product, bucket, &part).await?;
            anyhow::ensure!(
                got.len() == idx.len(),
                "the claim script answered {} of {}",
                got.len(),
                idx.len()
            );
            for (i, status) in idx.into_iter().zip(got) {
                out[i] = status;
            }
        }
        Ok(out)
    }

    async fn claim_in(
        &self,
        product: ProductId,
        bucket: u16,
        orders: &[&OrderMessage],
    ) -> anyhow::Result<Vec<ClaimStatus>> {
        let k = self.bucket_keys(product, bucket);
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
        inv.arg(self.ticket_ttl_secs);
        let mut c = self.conn.clone();
        let raw: Vec<String> = inv
            .invoke_async(&mut c)
            .await
            .context("running the claim script")?;
        raw.iter().map(|s| ClaimStatus::parse(s)).collect()
    }

    /// Records where the orders of one product landed in Kafka, one entry of each bucket's
    /// `located` list. Returns how many were recorded.
    pub async fn locate(&self, product: ProductId, located: &[Located]) -> anyhow::Result<u64> {
        for (bucket, idx) in by_bucket(located.iter().map(|l| &l.ticket)) {
            let part: Vec<_> = idx.iter().map(|&i| located[i].clone()).collect();
            for entry in part.chunks(MAX_LOCATED) {
                let mut c = self.conn.clone();
                let _: u64 = LOCATE
                    .key(self.bucket_keys(product, bucket).located())
                    .arg(located_entry(entry))
                    .invoke_async(&mut c)
                    .await
                    .context("running the locate script")?;
            }
        }
        Ok(located.len() as u64)
    }

    /// Where the orders of one stock bucket landed in Kafka, as the gateways recorded them
    /// (ticket → (partition, offset)), for the entries not trimmed yet ([`Self::trim_located`]:
    /// no entry with a ticket still in flight is).
    pub async fn locations(
        &self,
        product: ProductId,
        bucket: u16,
    ) -> anyhow::Result<HashMap<String, (i32, i64)>> {
        let mut c = self.conn.clone();
        let entries: Vec<String> = c
            .lrange(self.bucket_keys(product, bucket).located(), 0, -1)
            .await
            .context("reading Kafka locations")?;
        let mut out = HashMap::new();
        for entry in &entries {
            parse_located_entry(entry, &mut out);
        }
        Ok(out)
    }

    /// Records on a held ticket's own record where a buy again published its order again,
    /// while it is still `pending` (`locate_held.lua`); the sweeper never expires a ticket
    /// located so. `false` when it is no longer pending.
    pub async fn locate_held(
        &self,
        ticket: &Ticket,
        partition: i32,
        offset: i64,
    ) -> anyhow::Result<bool> {
        let k = self.ticket_keys(ticket);
        let mut c = self.conn.clone();
        let n: i64 = LOCATE_HELD
            .key(k.ticket(ticket))
            .arg(partition)
            .arg(offset)
            .invoke_async(&mut c)
            .await
            .context("running the locate_held script")?;
        Ok(n == 1)
    }

    /// Where one ticket's order landed in Kafka, once its gateway recorded it (and while its
    /// entry is not trimmed).
    pub async fn location(&self, ticket: &Ticket) -> anyhow::Result<Option<(i32, i64)>> {
        let all = self.locations(ticket.product(), ticket.bucket()).await?;
        Ok(all.get(ticket.as_str()).copied())
    }

    /// Drops the entries at the head of each bucket's `located` list whose tickets were all
    /// reserved before the oldest ticket in flight (`trim_located.lua`), so none is in flight,
    /// looking at `limit` entries per bucket at most.
    /// Returns how many were dropped.
    pub async fn trim_located(&self, product: ProductId, limit: usize) -> anyhow::Result<u64> {
        let mut dropped = 0;
        for bucket in 0..self.buckets(product).await? {
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let n: u64 = TRIM_LOCATED
                .key(k.located())
                .key(k.pending())
                .arg(limit)
                .invoke_async(&mut c)
                .await
                .context("trimming Kafka locations")?;
            dropped += n;
        }
        Ok(dropped)
    }

    /// Confirms claimed tickets of one product with their order ids and payment deadlines.
    /// Returns how many changed.
    pub async fn confirm(
        &self,
        product: ProductId,
        orders: &[(&Ticket, u64, Option<i64>)],
    ) -> anyhow::Result<u64> {
        let mut changed = 0;
        for (bucket, idx) in by_bucket(orders.iter().map(|(t, _, _)| *t)) {
            let part: Vec<_> = idx.iter().map(|&i| orders[i]).collect();
            changed += self.confirm_in(product, bucket, &part).await?;
        }
        Ok(changed)
    }

    async fn confirm_in(
        &self,
        product: ProductId,
        bucket: u16,
        orders: &[(&Ticket, u64, Option<i64>)],
    ) -> anyhow::Result<u64> {
        let k = self.bucket_keys(product, bucket);
        let mut inv = CONFIRM.prepare_invoke();
        inv.key(k.meta()).key(k.pending());
        let now = crate::now_ms();
        for (t, id, pay_by) in orders {
            inv.key(k.ticket(t));
            // A ticket to be paid lives until its deadline plus the usual TTL.
            let ttl =
                self.ticket_ttl_secs as i64 + pay_by.map_or(0, |by| (by - now).max(0) / 1000 + 1);
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
        Ok(self.run_compensate(ticket, reason, mode, 0).await? == 1)
    }

    /// The sweeper's variant: fails the ticket only if it is still `pending` (no worker has
    /// claimed it) and was reserved at or before `cutoff_ms`. `Some(true)` when this call
    /// failed it and its unit went back, `Some(false)` when it failed it without a unit (the
    /// product is not loaded), `None` when it changed nothing (a worker claimed it first, or
    /// it had settled).
    pub async fn expire_pending(
        &self,
        ticket: &Ticket,
        reason: &str,
        cutoff_ms: i64,
    ) -> anyhow::Result<Option<bool>> {
        Ok(
            match self
                .run_compensate(ticket, reason, "pending_only", cutoff_ms)
                .await?
            {
                0 => None,
                n => Some(n == 1),
            },
        )
    }

    async fn run_compensate(
        &self,
        ticket: &Ticket,
        reason: &str,
        mode: &str,
        cutoff_ms: i64,
    ) -> anyhow::Result<i64> {
        let k = self.ticket_keys(ticket);
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
            .arg(self.ticket_ttl_secs)
            .invoke_async(&mut c)
            .await
            .context("running the compensation script")?;
        Ok(n)
    }

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

    /// Tickets of a product still unsettled in Redis and reserved at or before `cutoff_ms`,
    /// at most `limit` per bucket.
    pub async fn unsettled_before(
        &self,
        product: ProductId,
        cutoff_ms: i64,
        limit: isize,
    ) -> anyhow::Result<Vec<Ticket>> {
        let mut out = vec![];
        for bucket in 0..self.buckets(product).await? {
            let mut c = self.conn.clone();
            let raw: Vec<String> = redis::cmd("ZRANGEBYSCORE")
                .arg(self.bucket_keys(product, bucket).pending())
                .arg("-inf")
                .arg(cutoff_ms)
                .arg("LIMIT")
                .arg(0)
                .arg(limit)
                .query_async(&mut c)
                .await
                .context("reading pending tickets")?;
            out.extend(raw.iter().filter_map(|t| Ticket::parse(t).ok()));
        }
        Ok(out)
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
        let mut changed = 0;
        for (bucket, idx) in by_bucket(entries.iter().map(|(t, _, _, _)| t)) {
            let part: Vec<_> = idx.iter().map(|&i| entries[i].clone()).collect();
            changed += self
                .restore_settled_in(product, bucket, status, &part, ttl_secs)
                .await?;
        }
        Ok(changed)
    }

    async fn restore_settled_in(
        &self,
        product: ProductId,
        bucket: u16,
        status: RecordStatus,
        entries: &[(Ticket, u64, String, String)],
        ttl_secs: u64,
    ) -> anyhow::Result<u64> {
        let k = self.bucket_keys(product, bucket);
        let mut changed = 0;
        for chunk in entries.chunks(500) {
            let mut inv = RESTORE.prepare_invoke();
            inv.key(k.buyers()).key(k.pending());
            inv.arg(status.as_str()).arg(ttl_secs);
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

    /// How long a ticket record lives once its order settled (`SECKILL_TICKET_TTL_SECS`).
    pub fn ticket_ttl_secs(&self) -> u64 {
        self.ticket_ttl_secs
    }

    /// Reconcile, step two, for a product in one bucket: counters and stock from MySQL.
    /// Returns the new stock. (A product in buckets: [`Self::rebuild_bucket`].)
    pub async fn rebuild(&self, product: ProductId, m: &Rebuild) -> anyhow::Result<i64> {
        self.run_rebuild(product, 0, 1, m).await
    }

    async fn run_rebuild(
        &self,
        product: ProductId,
        bucket: u16,
        buckets: u16,
        m: &Rebuild,
    ) -> anyhow::Result<i64> {
        let k = self.bucket_keys(product, bucket);
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let initial = if buckets > 1 {
            String::new()
        } else {
            m.initial.to_string()
        };
        let mut c = self.conn.clone();
        REBUILD
            .key(k.stock())
            .key(k.meta())
            .key(k.pending())
            .arg(m.mysql_stock)
            .arg(initial)
            .arg(m.sold)
            .arg(m.failed)
            .arg(opt(m.starts_at_ms))
            .arg(opt(m.ends_at_ms))
            .arg(crate::now_ms())
            .arg(m.paid)
            .arg(m.cancelled)
            .arg(buckets)
            .invoke_async(&mut c)
            .await
            .context("running the rebuild script")
    }

    /// Drops `pending` entries whose ticket record is gone (expired).
    pub async fn prune_pending(&self, product: ProductId) -> anyhow::Result<u64> {
        let mut pruned = 0;
        for bucket in 0..self.buckets(product).await? {
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let members: Vec<String> = c
                .zrange(k.pending(), 0, -1)
                .await
                .context("reading pending")?;
            for m in members {
                let Ok(t) = Ticket::parse(&m) else { continue };
                let exists: bool = c.exists(k.ticket(&t)).await.context("checking a ticket")?;
                if !exists {
                    let n: u64 = c.zrem(k.pending(), &m).await.context("pruning pending")?;
                    pruned += n;
                }
            }
        }
        Ok(pruned)
    }

    /// Loads a product for sale, its MySQL stock split evenly over `buckets` buckets.
    /// Returns the Redis stock it set (all buckets).
    pub async fn preload(
        &self,
        product: ProductId,
        mysql_stock: i64,
        starts_at_ms: Option<i64>,
        ends_at_ms: Option<i64>,
        buckets: u16,
    ) -> anyhow::Result<i64> {
        let buckets = buckets.max(1);
        self.learn_buckets(product, buckets);
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_default();
        let mut total = 0;
        for (bucket, share) in split(mysql_stock, buckets).into_iter().enumerate() {
            let k = self.bucket_keys(product, bucket as u16);
            let mut c = self.conn.clone();
            let set: i64 = PRELOAD
                .key(k.stock())
                .key(k.meta())
                .key(k.pending())
                .arg(share)
                .arg(opt(starts_at_ms))
                .arg(opt(ends_at_ms))
                .arg(crate::now_ms())
                .arg(buckets)
                .invoke_async(&mut c)
                .await
                .context("running the preload script")?;
            total += set;
        }
        Ok(total)
    }

    /// A closed sale's keys (stock, meta, buyers, pending, located, and a bucket's loans)
    /// expire after `grace`. Ticket records keep their own TTL.
    pub async fn expire_sale(&self, product: ProductId, grace: Duration) -> anyhow::Result<()> {
        let secs = grace.as_secs().max(1) as i64;
        for bucket in 0..self.buckets(product).await? {
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let mut pipe = redis::pipe();
            for key in [
                k.stock(),
                k.meta(),
                k.buyers(),
                k.pending(),
                k.located(),
                k.loans(),
                k.borrowing(),
            ] {
                pipe.expire(key, secs).ignore();
            }
            let _: () = pipe
                .query_async(&mut c)
                .await
                .context("expiring a closed sale's keys")?;
        }
        Ok(())
    }

    /// The Redis copy of a ticket, or `None` when it is unknown or has expired (or names a
    /// bucket its product does not have: a forged ticket costs no bucket-tag search).
    pub async fn ticket(&self, ticket: &Ticket) -> anyhow::Result<Option<TicketRecord>> {
        if ticket.bucket() > 0 && ticket.bucket() >= self.buckets(ticket.product()).await? {
            return Ok(None);
        }
        let k = self.ticket_keys(ticket);
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

    /// Checks that each bucket of a product holds the state of the Redis server's current run,
    /// and drops the stock of a bucket that does not (it may be old: see `epoch.lua`), so that
    /// the product counts as lost and is rebuilt. Returns how many buckets were dropped.
    pub async fn check_epoch(&self, product: ProductId) -> anyhow::Result<u16> {
        let mut dropped = 0;
        for bucket in 0..self.buckets(product).await? {
            let k = self.bucket_keys(product, bucket);
            let mut c = self.conn.clone();
            let fresh: i64 = EPOCH
                .key(k.stock())
                .key(k.meta())
                .invoke_async(&mut c)
                .await
                .context("running the epoch script")?;
            if fresh == 0 {
                dropped += 1;
            }
        }
        Ok(dropped)
    }

    /// Units left in Redis (in every bucket), or `None` for a product that is not loaded (or
    /// a bucket of which Redis lost).
    pub async fn stock(&self, product: ProductId) -> anyhow::Result<Option<i64>> {
        let mut total = 0;
        for bucket in 0..self.buckets(product).await? {
            let mut c = self.conn.clone();
            let stock: Option<i64> = c
                .get(self.bucket_keys(product, bucket).stock())
                .await
                .context("reading stock")?;
            let Some(stock) = stock else { return Ok(None) };
            total += stock;
        }
        Ok(Some(total))
    }

    /// The ticket a user holds for a product, if any.
    pub async fn buyer(&self, product: ProductId, user: UserId) -> anyhow::Result<Option<String>> {
        let home = crate::home_bucket(user, self.buckets(product).await?);
        let mut c = self.conn.clone();
        c.hget(self.bucket_keys(product, home).buyers(), user.get())
            .await
            .context("reading buyers")
    }

    /// The Redis counts of a product, summed over its buckets; `buckets` lists each bucket
    /// of a product split into several.
    pub async fn counts(&self, product: ProductId) -> anyhow::Result<ProductCounts> {
        let n = self.buckets(product).await?;
        let mut each = Vec::with_capacity(n as usize);
        for bucket in 0..n {
            each.push(self.bucket_counts(product, bucket).await?);
        }
        let sum = |f: fn(&BucketCounts) -> i64| each.iter().map(f).sum::<i64>();
        let first = each[0].clone();
        Ok(ProductCounts {
            stock: each.iter().map(|b| b.stock).sum::<Option<i64>>(),
            initial: each.iter().map(|b| b.initial).sum::<Option<i64>>(),
            pending: sum(|b| b.pending),
            confirmed: sum(|b| b.confirmed),
            paid: sum(|b| b.paid),
            cancelled: sum(|b| b.cancelled),
            failed: sum(|b| b.failed),
            buyers: sum(|b| b.buyers),
            ends_at_ms: first.ends_at_ms,
            buckets: if n > 1 { each } else { vec![] },
        })
    }

    /// The Redis counts of one bucket.
    pub async fn bucket_counts(
        &self,
        product: ProductId,
        bucket: u16,
    ) -> anyhow::Result<BucketCounts> {
        let k = self.bucket_keys(product, bucket);
        let mut c = self.conn.clone();
        // Text, parsed field by field: the meta hash also holds decimals (a waiting room's
        // `wr_factor`, `wr_credit`).
        #[allow(clippy::type_complexity)]
        let (stock, meta, pending, buyers, borrowing): (
            Option<i64>,
            HashMap<String, String>,
            i64,
            i64,
            i64,
        ) = redis::pipe()
            .get(k.stock())
            .hgetall(k.meta())
            .zcard(k.pending())
            .hlen(k.buyers())
            .zcard(k.borrowing())
            .query_async(&mut c)
            .await
            .context("reading product counts")?;
        let int = |field: &str| -> anyhow::Result<Option<i64>> {
            meta.get(field)
                .map(|v| v.parse::<i64>())
                .transpose()
                .with_context(|| format!("meta field {field} is not a whole number"))
        };
        Ok(BucketCounts {
            bucket,
            stock,
            initial: int("initial")?,
            pending,
            confirmed: int("confirmed")?.unwrap_or(0),
            paid: int("paid")?.unwrap_or(0),
            cancelled: int("cancelled")?.unwrap_or(0),
            failed: int("failed")?.unwrap_or(0),
            buyers,
            lent: int("lent")?.unwrap_or(0),
            borrowed: int("borrowed")?.unwrap_or(0),
            borrowing,
            ends_at_ms: int("ends_at")?,
        })
    }
}

/// `total` split over `n` buckets as evenly as it goes: the first `total % n` get one more.
pub fn split(total: i64, n: u16) -> Vec<i64> {
    let n = i64::from(n.max(1));
    let total = total.max(0);
    (0..n)
        .map(|b| total / n + i64::from(b < total % n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_of_a_product_share_one_hash_tag() {
        let p = ProductId::new(42).unwrap();
        let k = ProductKeys::new("ns1", p);
        let t = Ticket::generate(p);
        for key in [
            k.stock(),
            k.meta(),
            k.buyers(),
            k.pending(),
            k.located(),
            k.ticket(&t),
        ] {
            let open = key.find('{').unwrap();
            let close = key[open..].find('}').unwrap() + open;
            assert_eq!(&key[open + 1..close], "ns1:42", "{key}");
        }
        assert_ne!(ProductKeys::new("ns2", p).stock(), k.stock());
    }

    #[test]
    fn a_located_entry_reads_back_and_skips_a_damaged_triple() {
        let p = ProductId::new(42).unwrap();
        let (a, b) = (Ticket::generate(p), Ticket::generate_in(p, 3));
        let at = |ticket: &Ticket, reserved_at_ms, partition, offset| Located {
            ticket: ticket.clone(),
            reserved_at_ms,
            partition,
            offset,
        };
        let entry = located_entry(&[at(&a, 900, 0, 17), at(&b, 800, 7, 1 << 40)]);
        assert_eq!(entry, format!("900 {a} 0 17 {b} 7 1099511627776"));
        let mut out = HashMap::new();
        parse_located_entry(&entry, &mut out);
        parse_located_entry("5 x-1 no 3 y-2 1 2 z-3 4", &mut out);
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[a.as_str()], (0, 17));
        assert_eq!(out[b.as_str()], (7, 1 << 40));
        assert_eq!(out["y-2"], (1, 2));
        assert!(located_entry(&[]).is_empty(), "no orders, no entry");
    }
}
