//! The admin API: products, their sale, their waiting room and their stock buckets.

use super::{schema, whole};
use crate::db;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A new product. Times are RFC 3339; a product without them is on sale once preloaded, until
/// it sells out.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProduct {
    #[schema(schema_with = schema::product_name)]
    pub name: String,
    #[serde(deserialize_with = "whole::i64")]
    #[schema(schema_with = schema::stock)]
    pub stock: i64,
    /// When the sale starts; buys before get `403 sale_not_started`.
    #[schema(examples("2026-12-01T10:00:00Z"))]
    pub starts_at: Option<DateTime<Utc>>,
    /// When the sale ends; buys after get `403 sale_ended`. After `starts_at`.
    #[schema(examples("2026-12-01T11:00:00Z"))]
    pub ends_at: Option<DateTime<Utc>>,
    /// The price in minor units (cents, fen). A priced product's orders must be paid within
    /// the payment window; without a price (0) an order is final once confirmed, as before.
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(schema_with = schema::price)]
    pub price: Option<i64>,
    /// ISO 4217, three capital letters. Default `CNY`.
    #[schema(pattern = "^[A-Z]{3}$", examples("CNY"))]
    pub currency: Option<String>,
    /// Seconds a confirmed order has to be paid; 0 turns the window off (the order is final).
    /// Default: `SECKILL_PAYMENT_WINDOW_SECS` for a priced product, else 0.
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(schema_with = schema::payment_window)]
    pub payment_window_secs: Option<i64>,
    /// Sell through a fair waiting room: buyers join its queue, everyone who joins before
    /// `starts_at` gets a random place, later ones queue behind in arrival order, and only
    /// admitted buyers may buy. Absent: no waiting room.
    pub waiting_room: Option<NewWaitingRoom>,
    /// Split the Redis stock into this many buckets, 1 to 64 (default 1), each in its own
    /// Redis Cluster slot, so that one hot product spreads over several primaries. A buyer
    /// buys in one bucket (chosen by the user id), and borrows a unit from another when that
    /// one is empty, so no unit is left unsold. Not with a waiting room.
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(nullable = false, minimum = 1, maximum = 64, examples(4))]
    pub buckets: Option<i64>,
    /// The most units one buyer may take, in one order, 1 to 100 (default 1). A buyer holds
    /// at most one live order of a product, of 1 to this many units (`quantity` of a buy).
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(nullable = false, minimum = 1, maximum = 100, examples(2))]
    pub max_per_buyer: Option<i64>,
}

/// A product's waiting room. Every field has a default.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWaitingRoom {
    /// Places admitted per second. Default 100.
    #[schema(minimum = 0.001, maximum = 1000000, examples(100))]
    pub admit_per_sec: Option<f64>,
    /// Admitted buyers who have not bought stay at most `ceil(factor × units left)`.
    /// Default 1.5.
    #[schema(minimum = 1, maximum = 100, examples(1.5))]
    pub max_admitted_factor: Option<f64>,
    /// Joining before this gets `403 queue_not_open`. Default: the product's creation.
    #[schema(examples("2026-12-01T09:50:00Z"))]
    pub opens_at: Option<DateTime<Utc>>,
    /// Ask a proof of work before each join (`428 challenge_required`), its difficulty
    /// following the joins per second. Absent: joins are free.
    pub pow: Option<NewPow>,
}

/// A waiting room's proof of work. Every field has a default.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPow {
    /// Leading zero bits of SHA-256 asked while the joins per second stay at or below the
    /// target: each bit doubles the work (20 bits: about a million hashes). 0 to 32; default 0.
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(nullable = false, minimum = 0, maximum = 32, examples(0))]
    pub min_bits: Option<i64>,
    /// The most bits ever asked, at least `min_bits`. 0 to 32; default 20 (or `min_bits`, if
    /// that is more).
    #[serde(default, deserialize_with = "whole::optional_i64")]
    #[schema(nullable = false, minimum = 0, maximum = 32, examples(20))]
    pub max_bits: Option<i64>,
    /// Joins per second that `min_bits` is meant for: one bit more for each whole doubling
    /// of the joins asked for per second past it (twice: +1, four times: +2). Default 50.
    #[schema(minimum = 0.001, maximum = 1000000, examples(50))]
    pub target_joins_per_sec: Option<f64>,
}

/// The body of `201` to `POST /admin/products`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Created {
    #[schema(schema_with = schema::id)]
    pub id: u64,
}

/// The body of `200` to a preload.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Preloaded {
    #[schema(schema_with = schema::id)]
    pub id: u64,
    pub stock_db: i64,
    pub stock_redis: i64,
    /// Whether `"false"` reached ZooKeeper, so that every gateway drops its sold-out marker.
    pub published: bool,
}

/// The body of `200` to a reconcile.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Reconciled {
    #[schema(schema_with = schema::id)]
    pub id: u64,
    /// Whether `"false"` reached ZooKeeper, so that every gateway drops its sold-out marker.
    pub published: bool,
    pub stock_db: i64,
    pub stock_redis: i64,
    pub confirmed: i64,
    pub failed: i64,
    /// Ticket records rewritten from MySQL.
    pub restored: u64,
    /// Pending entries dropped because their ticket record was gone.
    pub pruned: u64,
    /// Redis had lost the product: the workers' reading of older orders was awaited first.
    pub was_lost: bool,
}

/// The body of `200` to `GET /admin/products/{id}`: MySQL and Redis side by side.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProductView {
    #[schema(schema_with = schema::id)]
    pub id: u64,
    pub name: String,
    pub stock_db: i64,
    pub initial_stock: i64,
    /// `null` until preloaded (or once Redis lost it).
    #[schema(required = true)]
    pub stock_redis: Option<i64>,
    /// Redis: units reserved and not yet settled (an order of several units counts each).
    pub pending: i64,
    /// Redis: units sold, paid or not yet.
    pub confirmed: i64,
    /// Redis: orders paid.
    pub paid: i64,
    /// Redis: orders cancelled (not paid in time, or by their buyer); their units went back.
    pub cancelled: i64,
    pub failed: i64,
    /// MySQL: tickets that failed for good, by reason.
    pub failed_by_reason: std::collections::BTreeMap<String, i64>,
    /// Where the sale stands now.
    pub state: SaleState,
    /// MySQL: orders by state.
    pub orders_db: OrdersByState,
    /// In minor units.
    pub price: i64,
    pub currency: String,
    /// 0: no payment window, orders are final once confirmed.
    pub payment_window_secs: i64,
    /// The most units one buyer may take, in one order.
    pub max_per_buyer: u16,
    /// Its waiting room, with `admitted`: buyers admitted who have not bought (Redis).
    #[schema(required = true)]
    pub waiting_room: Option<WaitingRoomView>,
    #[schema(required = true)]
    pub starts_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub ends_at: Option<DateTime<Utc>>,
    /// MySQL: when the sweeper closed the sale (over, with nothing in flight); `null` while
    /// open. A closed sale's Redis keys expire after an hour, or may be lost to a Redis
    /// restart: it is not rebuilt, and buys are answered from MySQL (`409` or `403`).
    #[schema(required = true)]
    pub closed_at: Option<DateTime<Utc>>,
    /// Redis, bucket by bucket (one entry for a product in one piece).
    pub buckets: Vec<BucketView>,
}

/// One stock bucket in the admin view (Redis). Each keeps
/// `initial − lent + borrowed = stock + pending + confirmed`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BucketView {
    pub bucket: u16,
    /// `null` until preloaded (or once Redis lost it).
    #[schema(required = true)]
    pub stock: Option<i64>,
    /// Its share of the stock when loaded or rebuilt.
    #[schema(required = true)]
    pub initial: Option<i64>,
    pub pending: i64,
    pub confirmed: i64,
    /// Units it gave to buyers of other buckets.
    pub lent: i64,
    /// Units its buyers took from other buckets.
    pub borrowed: i64,
    /// Buyers holding their place here while they borrow.
    pub borrowing: i64,
}

impl From<&crate::sale::BucketCounts> for BucketView {
    fn from(b: &crate::sale::BucketCounts) -> Self {
        Self {
            bucket: b.bucket,
            stock: b.stock,
            initial: b.initial,
            pending: b.pending,
            confirmed: b.confirmed,
            lent: b.lent,
            borrowed: b.borrowed,
            borrowing: b.borrowing,
        }
    }
}

/// A product's waiting room in the admin view.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitingRoomView {
    pub admit_per_sec: f64,
    pub max_admitted_factor: f64,
    pub opens_at: Option<DateTime<Utc>>,
    /// The proof of work asked before a join, if any.
    pub pow: Option<PowView>,
    /// Admitted buyers who have not bought yet; at most `ceil(factor × stock_redis)`.
    pub admitted: u64,
    /// Buyers in the queue, not yet admitted (Redis).
    pub waiting: u64,
}

/// A waiting room's proof of work in the admin view: its settings, and the difficulty a
/// join's challenge gets now.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PowView {
    pub min_bits: u8,
    pub max_bits: u8,
    pub target_joins_per_sec: f64,
    /// Joins asked for over the last second, as the difficulty reads them (Redis).
    pub joins_per_sec: f64,
    /// The bits a challenge handed out now asks for.
    pub bits_now: u8,
}

/// Where a product's sale stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SaleState {
    /// Before `starts_at`, or not preloaded yet.
    NotStarted,
    OnSale,
    /// No unit left in Redis (units of failed or cancelled orders may still come back).
    SoldOut,
    /// Past `ends_at`.
    Ended,
}

impl SaleState {
    pub fn of(p: &db::Product, stock_redis: Option<i64>, now_ms: i64) -> Self {
        if p.ends_at_ms.is_some_and(|e| now_ms >= e) {
            Self::Ended
        } else if p.starts_at_ms.is_some_and(|s| now_ms < s) || p.loaded_at_ms.is_none() {
            Self::NotStarted
        } else if stock_redis.unwrap_or(p.stock) <= 0 {
            Self::SoldOut
        } else {
            Self::OnSale
        }
    }
}

/// MySQL's orders of a product, by state.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OrdersByState {
    pub confirmed: i64,
    pub paid: i64,
    pub cancelled: i64,
}

/// Query of `GET /admin/products`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// Products per page, 1 to 100. Default 20.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// Only products with a smaller id: the `next_before` of the previous page.
    #[param(minimum = 1)]
    pub before: Option<u64>,
}

/// The body of `200` to `GET /admin/products`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProductPage {
    /// Newest first.
    pub products: Vec<ProductView>,
    /// All products in MySQL.
    pub total: i64,
    /// Pass as `before` for the next page; `null` on the last.
    #[schema(required = true)]
    pub next_before: Option<u64>,
}
