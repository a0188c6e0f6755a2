//! The MySQL side: pool, migrations, products and order look-ups.

use crate::domain::{FailureReason, OrderStatus, ProductId, Ticket, TicketStatus, UserId};
use anyhow::Context;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use std::str::FromStr;
use std::time::Duration;

/// Schema migrations, embedded from `migrations/`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// A pool that connects on first use, so a process starts while MySQL is down.
pub fn pool(url: &str, max_connections: u32) -> anyhow::Result<MySqlPool> {
    let options = MySqlConnectOptions::from_str(url).context("parsing SECKILL_MYSQL_URL")?;
    Ok(MySqlPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options))
}

pub async fn migrate(pool: &MySqlPool) -> anyhow::Result<()> {
    MIGRATOR.run(pool).await.context("applying migrations")
}

/// Whose this database is: see [`claim_namespace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// This namespace's: it claimed the database now, or earlier.
    Ours,
    /// Another namespace's, which claimed it at `claimed_at_ms`.
    Theirs {
        namespace: String,
        claimed_at_ms: i64,
    },
}

impl Owner {
    /// `Ok` for [`Owner::Ours`]; for [`Owner::Theirs`], an error that names both namespaces.
    pub fn ensure_ours(self, namespace: &str, what: &str) -> anyhow::Result<()> {
        match self {
            Self::Ours => Ok(()),
            Self::Theirs {
                namespace: theirs,
                claimed_at_ms,
            } => {
                let since = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(claimed_at_ms)
                    .map_or_else(|| claimed_at_ms.to_string(), |t| t.to_rfc3339());
                anyhow::bail!(
                    "{what}: the MySQL database of SECKILL_MYSQL_URL belongs to namespace \
                     {theirs:?} (since {since}), and this process runs SECKILL_NAMESPACE=\
                     {namespace:?}. Each namespace needs a database of its own: another \
                     namespace's products would be taken for ones this Redis lost, and their \
                     stock sold twice. Point SECKILL_MYSQL_URL at this namespace's database, \
                     or set SECKILL_NAMESPACE={theirs:?}"
                )
            }
        }
    }
}

/// Claims the database for `namespace` unless a namespace has it already, and says whose it
/// is. Fails while the migrations have not run (no `namespace_owner` table): retry.
pub async fn claim_namespace(pool: &MySqlPool, namespace: &str) -> anyhow::Result<Owner> {
    sqlx::query(
        "INSERT IGNORE INTO namespace_owner (id, namespace, claimed_at_ms) VALUES (1, ?, ?)",
    )
    .bind(namespace)
    .bind(crate::now_ms())
    .execute(pool)
    .await
    .context("claiming the database for this namespace")?;
    let (owner, claimed_at_ms): (String, i64) =
        sqlx::query_as("SELECT namespace, claimed_at_ms FROM namespace_owner WHERE id = 1")
            .fetch_one(pool)
            .await
            .context("reading whose the database is")?;
    Ok(if owner == namespace {
        Owner::Ours
    } else {
        Owner::Theirs {
            namespace: owner,
            claimed_at_ms,
        }
    })
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Product {
    pub id: u64,
    pub name: String,
    pub stock: i64,
    pub initial_stock: i64,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    /// When it was first loaded into Redis for sale.
    pub loaded_at_ms: Option<i64>,
    /// When the sweeper found its sale over; its Redis keys expire after that.
    pub closed_at_ms: Option<i64>,
    /// In minor units (cents, fen); 0 for a product created without a price.
    pub price: i64,
    /// ISO 4217.
    pub currency: String,
    /// A confirmed order must be paid within this; 0: no window, the order is final.
    pub payment_window_secs: i64,
    /// Its waiting room, if it has one.
    pub waiting_room: Option<WaitingRoom>,
    /// How many Redis stock buckets it is split over (1: one piece).
    pub buckets: u16,
    /// The most units one order (and so one buyer at a time) may take, 1 to
    /// [`crate::MAX_PER_BUYER`].
    pub max_per_buyer: u16,
}

/// A product's waiting room: buyers join a queue, and are admitted to buy in its order.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct WaitingRoom {
    /// Places admitted per second.
    pub admit_per_sec: f64,
    /// Admitted buyers who have not bought yet stay at most `ceil(factor × units left)`.
    pub max_admitted_factor: f64,
    /// Joining before this (ms since the epoch) gets `403 queue_not_open`.
    pub opens_at_ms: i64,
    /// A proof of work before joining, if asked for (`None`: joins are free).
    pub pow: Option<Pow>,
}

/// A waiting room's proof of work: the difficulty follows the joins per second (see
/// [`crate::waiting_room::pow::difficulty`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Pow {
    /// Leading zero bits asked while the joins stay at or below the target.
    pub min_bits: u8,
    /// The most ever asked.
    pub max_bits: u8,
    /// Joins per second that `min_bits` is meant for; one bit more per doubling past it.
    pub target_joins_per_sec: f64,
}

impl Pow {
    pub const DEFAULT_MIN_BITS: u8 = 0;
    pub const DEFAULT_MAX_BITS: u8 = 20;
    pub const DEFAULT_TARGET: f64 = 50.0;
}

const PRODUCT_BY_ID: &str =
    "SELECT id, name, stock, initial_stock, starts_at_ms, ends_at_ms, loaded_at_ms, closed_at_ms, price, currency, payment_window_secs, wr_admit_per_sec, wr_max_admitted_factor, wr_opens_at_ms, wr_pow_min_bits, wr_pow_max_bits, wr_pow_target_jps, buckets, max_per_buyer FROM products WHERE id = ?";
const PRODUCTS_PAGE: &str =
    "SELECT id, name, stock, initial_stock, starts_at_ms, ends_at_ms, loaded_at_ms, closed_at_ms, price, currency, payment_window_secs, wr_admit_per_sec, wr_max_admitted_factor, wr_opens_at_ms, wr_pow_min_bits, wr_pow_max_bits, wr_pow_target_jps, buckets, max_per_buyer FROM products WHERE id < ? ORDER BY id DESC LIMIT ?";
const PRODUCT_BY_ID_FOR_UPDATE: &str =
    "SELECT id, name, stock, initial_stock, starts_at_ms, ends_at_ms, loaded_at_ms, closed_at_ms, price, currency, payment_window_secs, wr_admit_per_sec, wr_max_admitted_factor, wr_opens_at_ms, wr_pow_min_bits, wr_pow_max_bits, wr_pow_target_jps, buckets, max_per_buyer FROM products WHERE id = ? FOR UPDATE";

/// A row of `products`, as [`PRODUCT_BY_ID`] and its kin select it.
#[derive(sqlx::FromRow)]
struct ProductRow {
    id: i64,
    name: String,
    stock: i64,
    initial_stock: i64,
    starts_at_ms: Option<i64>,
    ends_at_ms: Option<i64>,
    loaded_at_ms: Option<i64>,
    closed_at_ms: Option<i64>,
    price: i64,
    currency: String,
    payment_window_secs: i64,
    wr_admit_per_sec: Option<f64>,
    wr_max_admitted_factor: Option<f64>,
    wr_opens_at_ms: Option<i64>,
    wr_pow_min_bits: Option<u8>,
    wr_pow_max_bits: Option<u8>,
    wr_pow_target_jps: Option<f64>,
    buckets: u16,
    max_per_buyer: u16,
}

impl From<ProductRow> for Product {
    fn from(r: ProductRow) -> Self {
        Product {
            id: r.id as u64,
            name: r.name,
            stock: r.stock,
            initial_stock: r.initial_stock,
            starts_at_ms: r.starts_at_ms,
            ends_at_ms: r.ends_at_ms,
            loaded_at_ms: r.loaded_at_ms,
            closed_at_ms: r.closed_at_ms,
            price: r.price,
            currency: r.currency,
            payment_window_secs: r.payment_window_secs,
            waiting_room: r.wr_admit_per_sec.map(|admit_per_sec| WaitingRoom {
                admit_per_sec,
                max_admitted_factor: r.wr_max_admitted_factor.unwrap_or(1.5),
                opens_at_ms: r.wr_opens_at_ms.unwrap_or(0),
                pow: r.wr_pow_max_bits.map(|max_bits| Pow {
                    min_bits: r.wr_pow_min_bits.unwrap_or(0),
                    max_bits,
                    target_joins_per_sec: r.wr_pow_target_jps.unwrap_or(Pow::DEFAULT_TARGET),
                }),
            }),
            buckets: r.buckets.max(1),
            max_per_buyer: r.max_per_buyer.max(1),
        }
    }
}

/// A product id and its bucket count.
#[derive(sqlx::FromRow)]
struct BucketsRow {
    id: i64,
    buckets: u16,
}

/// A count by a text column (`reason`, `status`).
#[derive(sqlx::FromRow)]
struct CountRow {
    key: String,
    n: i64,
}

/// A new product's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct NewProduct {
    pub name: String,
    pub stock: i64,
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    pub price: i64,
    pub currency: String,
    pub payment_window_secs: i64,
    pub waiting_room: Option<WaitingRoom>,
    pub buckets: u16,
    pub max_per_buyer: u16,
}

pub async fn create_product(pool: &MySqlPool, p: &NewProduct) -> anyhow::Result<ProductId> {
    let pow = p.waiting_room.and_then(|w| w.pow);
    let res = sqlx::query(
        "INSERT INTO products (name, stock, initial_stock, starts_at_ms, ends_at_ms, price, currency, payment_window_secs, \
         wr_admit_per_sec, wr_max_admitted_factor, wr_opens_at_ms, wr_pow_min_bits, wr_pow_max_bits, wr_pow_target_jps, buckets, max_per_buyer) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&p.name)
    .bind(p.stock)
    .bind(p.stock)
    .bind(p.starts_at_ms)
    .bind(p.ends_at_ms)
    .bind(p.price)
    .bind(&p.currency)
    .bind(p.payment_window_secs)
    .bind(p.waiting_room.map(|w| w.admit_per_sec))
    .bind(p.waiting_room.map(|w| w.max_admitted_factor))
    .bind(p.waiting_room.map(|w| w.opens_at_ms))
    .bind(pow.map(|w| w.min_bits))
    .bind(pow.map(|w| w.max_bits))
    .bind(pow.map(|w| w.target_joins_per_sec))
    .bind(p.buckets.max(1))
    .bind(p.max_per_buyer.max(1))
    .execute(pool)
    .await
    .context("inserting a product")?;
    ProductId::new(res.last_insert_id()).context("MySQL returned an id out of range")
}

pub async fn product<'e>(
    exec: impl sqlx::Executor<'e, Database = sqlx::MySql>,
    id: ProductId,
) -> anyhow::Result<Option<Product>> {
    let row: Option<ProductRow> = sqlx::query_as(PRODUCT_BY_ID)
        .bind(id.as_i64())
        .fetch_optional(exec)
        .await
        .context("reading a product")?;
    Ok(row.map(Product::from))
}

/// The product, with its row locked until the transaction ends (the lock every batch takes).
pub async fn product_for_update<'e>(
    exec: impl sqlx::Executor<'e, Database = sqlx::MySql>,
    id: ProductId,
) -> anyhow::Result<Option<Product>> {
    let row: Option<ProductRow> = sqlx::query_as(PRODUCT_BY_ID_FOR_UPDATE)
        .bind(id.as_i64())
        .fetch_optional(exec)
        .await
        .context("locking a product")?;
    Ok(row.map(Product::from))
}

/// Records that the product was loaded into Redis for sale (`loaded_at_ms`, the first time
/// only), and is on sale (not closed).
pub async fn mark_loaded(pool: &MySqlPool, id: ProductId, now_ms: i64) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE products SET loaded_at_ms = COALESCE(loaded_at_ms, ?), closed_at_ms = NULL WHERE id = ?",
    )
        .bind(now_ms)
        .bind(id.as_i64())
        .execute(pool)
        .await
        .context("marking a product loaded")?;
    Ok(())
}

/// A page of products, newest first: at most `limit`, with ids below `before` when given.
pub async fn list_products(
    pool: &MySqlPool,
    before: Option<ProductId>,
    limit: u32,
) -> anyhow::Result<Vec<Product>> {
    let rows: Vec<ProductRow> = sqlx::query_as(PRODUCTS_PAGE)
        .bind(before.map_or(i64::MAX, |b| b.as_i64()))
        .bind(limit)
        .fetch_all(pool)
        .await
        .context("listing products")?;
    Ok(rows.into_iter().map(Product::from).collect())
}

pub async fn count_products(pool: &MySqlPool) -> anyhow::Result<i64> {
    sqlx::query_scalar("SELECT COUNT(*) FROM products")
        .fetch_one(pool)
        .await
        .context("counting products")
}

/// A product's tickets that failed for good, by reason.
pub async fn failed_by_reason(
    pool: &MySqlPool,
    product: ProductId,
) -> anyhow::Result<std::collections::BTreeMap<String, i64>> {
    let rows: Vec<CountRow> = sqlx::query_as(
        "SELECT reason AS `key`, COUNT(*) AS n FROM failed_tickets WHERE product_id = ? GROUP BY reason",
    )
    .bind(product.as_i64())
    .fetch_all(pool)
    .await
    .context("counting failed tickets")?;
    Ok(rows.into_iter().map(|r| (r.key, r.n)).collect())
}

/// Products loaded for sale whose sale the sweeper has not closed. The sweeper's work is
/// proportional to these, not to every sale ever held.
pub async fn live_products(pool: &MySqlPool) -> anyhow::Result<Vec<ProductId>> {
    Ok(live_products_with_buckets(pool)
        .await?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

/// [`live_products`], each with its bucket count.
pub async fn live_products_with_buckets(pool: &MySqlPool) -> anyhow::Result<Vec<(ProductId, u16)>> {
    let rows: Vec<BucketsRow> = sqlx::query_as(
        "SELECT id, buckets FROM products WHERE loaded_at_ms IS NOT NULL AND closed_at_ms IS NULL ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .context("listing live products")?;
    Ok(with_buckets(rows))
}

/// `(id, buckets)` rows as products and their bucket counts (at least 1).
fn with_buckets(rows: Vec<BucketsRow>) -> Vec<(ProductId, u16)> {
    rows.into_iter()
        .filter_map(|r| Some((ProductId::new(r.id as u64).ok()?, r.buckets.max(1))))
        .collect()
}

/// Products whose sale was closed at or after `since_ms` (their Redis keys may still be read,
/// for [`crate::recovery::CLOSED_SALE_GRACE`]), with their bucket counts.
pub async fn recently_closed_products(
    pool: &MySqlPool,
    since_ms: i64,
) -> anyhow::Result<Vec<(ProductId, u16)>> {
    let rows: Vec<BucketsRow> =
        sqlx::query_as("SELECT id, buckets FROM products WHERE closed_at_ms >= ? ORDER BY id")
            .bind(since_ms)
            .fetch_all(pool)
            .await
            .context("listing recently closed products")?;
    Ok(with_buckets(rows))
}

/// Whether an order of the product may still give its unit back: confirmed with a payment
/// deadline, or cancelled with its unit not yet back in Redis.
pub async fn awaiting_payment<'e>(
    pool: impl sqlx::Executor<'e, Database = sqlx::MySql>,
    product: ProductId,
) -> anyhow::Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orders WHERE product_id = ? \
         AND ((status = 'confirmed' AND pay_by_ms IS NOT NULL) OR restore_due = 1)",
    )
    .bind(product.as_i64())
    .fetch_one(pool)
    .await
    .context("counting orders awaiting payment")?;
    Ok(n > 0)
}

/// How many orders of the product are in each state.
pub async fn orders_by_status(
    pool: &MySqlPool,
    product: ProductId,
) -> anyhow::Result<std::collections::BTreeMap<OrderStatus, i64>> {
    let mut out = std::collections::BTreeMap::new();
    let rows: Vec<CountRow> = sqlx::query_as(
        "SELECT status AS `key`, COUNT(*) AS n FROM orders WHERE product_id = ? GROUP BY status",
    )
    .bind(product.as_i64())
    .fetch_all(pool)
    .await
    .context("counting orders")?;
    for r in rows {
        out.insert(order_status(&r.key)?, r.n);
    }
    Ok(out)
}

/// Closes a product's sale (see [`Product::closed_at_ms`]). `true` when this call closed it.
pub async fn close_sale<'e>(
    pool: impl sqlx::Executor<'e, Database = sqlx::MySql>,
    id: ProductId,
    now_ms: i64,
) -> anyhow::Result<bool> {
    let res =
        sqlx::query("UPDATE products SET closed_at_ms = ? WHERE id = ? AND closed_at_ms IS NULL")
            .bind(now_ms)
            .bind(id.as_i64())
            .execute(pool)
            .await
            .context("closing a sale")?;
    Ok(res.rows_affected() == 1)
}

/// The ticket a buyer settled for a product, as MySQL knows it: their confirmed order, else
/// their last failed ticket.
pub async fn buyer_ticket(
    pool: &MySqlPool,
    product: ProductId,
    user: UserId,
) -> anyhow::Result<Option<(Ticket, SettledTicket)>> {
    // A buyer may hold one live order, and any number of cancelled ones: the latest.
    let order: Option<String> = sqlx::query_scalar(
        "SELECT ticket FROM orders WHERE product_id = ? AND user_id = ? ORDER BY id DESC LIMIT 1",
    )
    .bind(product.get() as i64)
    .bind(user.get() as i64)
    .fetch_optional(pool)
    .await
    .context("reading a buyer's order")?;
    let ticket = match order {
        Some(ticket) => Some(ticket),
        None => sqlx::query_scalar(
            "SELECT ticket FROM failed_tickets WHERE product_id = ? AND user_id = ? \
             ORDER BY failed_at DESC LIMIT 1",
        )
        .bind(product.get() as i64)
        .bind(user.get() as i64)
        .fetch_optional(pool)
        .await
        .context("reading a buyer's failed ticket")?,
    };
    let Some(ticket) = ticket else {
        return Ok(None);
    };
    let ticket = Ticket::parse(&ticket).map_err(|e| anyhow::anyhow!("a stored ticket: {e}"))?;
    Ok(settled_ticket(pool, &ticket).await?.map(|s| (ticket, s)))
}

/// A settled ticket as MySQL knows it: the fallback once the Redis copy has expired, and
/// the truth about payment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SettledTicket {
    pub status: TicketStatus,
    pub user_id: u64,
    /// Units the order held (a failed ticket's, those it asked for).
    pub quantity: u16,
    pub order_id: Option<u64>,
    pub reason: Option<String>,
    pub reserved_at_ms: Option<i64>,
    pub pay_by_ms: Option<i64>,
    pub paid_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
}

pub async fn settled_ticket(
    pool: &MySqlPool,
    ticket: &Ticket,
) -> anyhow::Result<Option<SettledTicket>> {
    #[derive(sqlx::FromRow)]
    struct OrderRow {
        id: i64,
        user_id: i64,
        quantity: u16,
        reserved_at_ms: i64,
        status: String,
        pay_by_ms: Option<i64>,
        paid_at_ms: Option<i64>,
        cancelled_at_ms: Option<i64>,
        cancel_reason: Option<String>,
    }
    #[derive(sqlx::FromRow)]
    struct FailedRow {
        user_id: i64,
        quantity: u16,
        reason: String,
    }
    let order: Option<OrderRow> = sqlx::query_as(
        "SELECT id, user_id, quantity, reserved_at_ms, status, pay_by_ms, paid_at_ms, cancelled_at_ms, cancel_reason \
         FROM orders WHERE ticket = ?",
    )
    .bind(ticket.as_str())
    .fetch_optional(pool)
    .await
    .context("reading an order")?;
    if let Some(r) = order {
        return Ok(Some(SettledTicket {
            status: order_status(&r.status)?.public(),
            user_id: r.user_id as u64,
            quantity: r.quantity.max(1),
            order_id: Some(r.id as u64),
            reason: r.cancel_reason,
            reserved_at_ms: Some(r.reserved_at_ms),
            pay_by_ms: r.pay_by_ms,
            paid_at_ms: r.paid_at_ms,
            cancelled_at_ms: r.cancelled_at_ms,
        }));
    }
    let failed: Option<FailedRow> =
        sqlx::query_as("SELECT user_id, quantity, reason FROM failed_tickets WHERE ticket = ?")
            .bind(ticket.as_str())
            .fetch_optional(pool)
            .await
            .context("reading a failed ticket")?;
    Ok(failed.map(|r| SettledTicket {
        status: TicketStatus::Failed,
        user_id: r.user_id as u64,
        quantity: r.quantity.max(1),
        reason: Some(r.reason),
        ..SettledTicket::default()
    }))
}

/// What MySQL holds for a ticket once [`record_failure`] has run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The ticket has an order row (a worker settled it): no failure row was written.
    Order(OrderStatus),
    /// The ticket's `failed_tickets` row: the reason given, or the one already there.
    Failed(FailureReason),
}

/// Writes a ticket's `failed_tickets` row, under the product's row lock that every batch
/// transaction takes, unless the ticket has an order row; an existing failure row is kept.
/// A failure only Redis knew of is undone by a Redis that loses it, or comes back old: a
/// message of the ticket delivered after that is adopted by a worker's claim and confirmed.
/// With the row, that worker fails it (found by the lifecycle model).
pub async fn record_failure(
    pool: &MySqlPool,
    ticket: &Ticket,
    user: u64,
    quantity: u16,
    reason: FailureReason,
) -> anyhow::Result<Recorded> {
    let mut tx = pool.begin().await.context("starting a transaction")?;
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(ticket.product().as_i64())
        .fetch_optional(&mut *tx)
        .await
        .context("locking the product")?;
    let order: Option<String> = sqlx::query_scalar("SELECT status FROM orders WHERE ticket = ?")
        .bind(ticket.as_str())
        .fetch_optional(&mut *tx)
        .await
        .context("reading the ticket's order")?;
    if let Some(status) = order {
        tx.commit().await.context("committing")?;
        return Ok(Recorded::Order(order_status(&status)?));
    }
    sqlx::query(
        "INSERT IGNORE INTO failed_tickets (ticket, product_id, user_id, reason, quantity) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(ticket.as_str())
    .bind(ticket.product().as_i64())
    .bind(user as i64)
    .bind(reason.as_str())
    .bind(quantity)
    .execute(&mut *tx)
    .await
    .context("recording a failed ticket")?;
    let row: String = sqlx::query_scalar("SELECT reason FROM failed_tickets WHERE ticket = ?")
        .bind(ticket.as_str())
        .fetch_one(&mut *tx)
        .await
        .context("reading the failed ticket")?;
    tx.commit().await.context("committing a failed ticket")?;
    let reason = FailureReason::parse(&row)
        .with_context(|| format!("unknown failure reason {row:?} in MySQL"))?;
    Ok(Recorded::Failed(reason))
}

/// An order's `status` column.
pub fn order_status(text: &str) -> anyhow::Result<OrderStatus> {
    OrderStatus::parse(text).with_context(|| format!("unknown order status {text:?} in MySQL"))
}

/// Marks the traces of these orders kept (the `traceparent` in their rows gets the sampled
/// flag): the worker kept them although their buys were not sampled (slow orders), so their
/// payment callback and their expiry join them too. Rows without a trace are left alone.
pub async fn mark_traces_kept(pool: &MySqlPool, tickets: &[String]) -> anyhow::Result<()> {
    if tickets.is_empty() {
        return Ok(());
    }
    let mut q = sqlx::QueryBuilder::<sqlx::MySql>::new(
        "UPDATE orders SET traceparent = CONCAT(LEFT(traceparent, 53), '01') \
         WHERE traceparent IS NOT NULL AND CHAR_LENGTH(traceparent) = 55 AND ticket IN (",
    );
    let mut sep = q.separated(", ");
    for t in tickets {
        sep.push_bind(t.as_str());
    }
    q.push(")");
    q.build()
        .execute(pool)
        .await
        .context("marking kept traces")?;
    Ok(())
}
