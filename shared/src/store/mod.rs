//! The Redis adapter: the connection, the key layout, and the typed records. Each feature
//! adds its own operations to [`TicketStore`] (`impl TicketStore` in its folder, next to its
//! Lua scripts): reservation, locations, settle, payments, recovery, the waiting room and the
//! sale. Each Lua script is one type ([`script::RedisScript`]) in its feature's `scripts.rs`:
//! its typed arguments, its keys and their order, and its typed reply.
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
//! | `sk:{ns:P}:t:<ticket>` | hash | `status`, `user_id`, `created_at`, `order_id`, `confirmed_at`, `reason` (the product is in the ticket; records written by older builds also carry an unread `product_id`) |
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

mod conn;
mod keys;
mod record;
pub mod script;

pub use crate::config::Topology;
pub use conn::RedisConn;
pub(crate) use keys::by_bucket;
pub use keys::{bucket_tag, events_pattern, slot, ProductKeys};
pub use record::{RecordStatus, TicketRecord};

use crate::domain::{ProductId, Ticket, UserId};
use crate::reservation::lanes::{BatchObserver, Lanes};
use anyhow::Context;
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Handle to the Redis state of one namespace. Cheap to clone: one multiplexed connection
/// that reconnects on its own.
#[derive(Clone)]
pub struct TicketStore {
    pub(crate) conn: RedisConn,
    pub(crate) namespace: String,
    pub(crate) ticket_ttl_secs: u64,
    /// How many stock buckets each product has, as learnt (see `buckets.rs`).
    pub(crate) bucket_counts: Arc<RwLock<HashMap<ProductId, u16>>>,
    /// This connection's reservations waiting for their batch (`batch.rs`).
    pub(crate) lanes: Arc<Lanes>,
    /// The lanes of this store and of every store made from it by `on_new_connection`.
    pub(crate) all_lanes: Arc<std::sync::Mutex<Vec<Arc<Lanes>>>>,
    pub(crate) batch_observer: Option<BatchObserver>,
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
        let lanes: Arc<Lanes> = Default::default();
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
        let lanes: Arc<Lanes> = Default::default();
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
    /// The store on `s`'s Redis, its keys under `namespace`.
    pub fn from_settings(
        s: &crate::config::RedisSettings,
        namespace: &str,
    ) -> anyhow::Result<Self> {
        Self::new(&s.topology()?, namespace, s.ticket_ttl_secs, s.timeout())
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

    /// How long a ticket record lives once its order settled (`SECKILL_TICKET_TTL_SECS`).
    pub fn ticket_ttl_secs(&self) -> u64 {
        self.ticket_ttl_secs
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
        TicketRecord::from_fields(&h)
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
}
