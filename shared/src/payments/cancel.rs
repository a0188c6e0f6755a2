//! Cancelling orders: unpaid past their deadline (the workers' expiry), or by their buyer.
//!
//! MySQL decides, then Redis follows:
//! 1. One transaction per batch flips `confirmed` orders to `cancelled` with one conditional
//!    `UPDATE` (so a payment deciding on the same row either wins before it or loses), puts
//!    their units back in MySQL's stock, and sets `restore_due`.
//! 2. After the commit, `cancel.lua` gives each unit back in Redis and frees its buyer. It only
//!    takes a `confirmed` ticket, so running it again changes nothing.
//! 3. `restore_due` is cleared. A crash before that leaves it set, and any worker's next round
//!    ([`restore_due`]) does step 2 again: each unit comes back exactly once.
//!
//! Lock order: the product rows, then the order rows, as a batch and a buyer's cancel take
//! them. The expiry reads under `READ COMMITTED`, so it locks only the rows it takes, and
//! skips order rows a payment has locked.

use crate::domain::{CancelReason, OrderStatus, ProductId, Ticket, UserId};
use crate::settle::push_padded;
use crate::store::TicketStore;
use anyhow::Context;
use sqlx::mysql::MySqlPool;
use sqlx::{Acquire, Executor, MySql, QueryBuilder};
use std::collections::{BTreeMap, BTreeSet};

/// A cancelled order whose units must go back in Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cancelled {
    pub id: i64,
    pub ticket: Ticket,
    /// Units the order held.
    pub quantity: u16,
    pub reason: CancelReason,
    /// The deadline it missed (payment timeout).
    pub pay_by_ms: Option<i64>,
    /// The order's trace (W3C `traceparent`), when it was traced: the expiry's span links it.
    pub traceparent: Option<String>,
}

/// An overdue order, as [`cancel_overdue`] locks it.
#[derive(sqlx::FromRow)]
struct DueRow {
    id: i64,
    ticket: String,
    product_id: i64,
    pay_by_ms: Option<i64>,
    traceparent: Option<String>,
    quantity: u16,
}

/// Cancels up to `limit` orders whose payment deadline passed by `now_ms`, oldest deadline
/// first, in one transaction. It waits for their products' rows (a batch may hold one for a
/// moment); order rows another transaction holds (a payment deciding) are skipped, not waited
/// for.
pub async fn cancel_overdue(
    db: &MySqlPool,
    now_ms: i64,
    limit: usize,
) -> anyhow::Result<Vec<Cancelled>> {
    let mut conn = db.acquire().await.context("acquiring a connection")?;
    conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await
        .context("setting the isolation level")?;
    let mut tx = conn.begin().await.context("starting a transaction")?;
    // The products' rows first, in id order, as a batch and a buyer's cancel take them before
    // any order's row: an expiry that locked the orders first met a batch holding the product
    // and reading a redelivered order's row the other way round (a deadlock).
    let products: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT product_id FROM orders \
         WHERE status = 'confirmed' AND pay_by_ms <= ? ORDER BY product_id LIMIT ?",
    )
    .bind(now_ms)
    .bind(limit as i64)
    .fetch_all(&mut *tx)
    .await
    .context("reading products with overdue orders")?;
    if products.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = QueryBuilder::<MySql>::new("SELECT id FROM products WHERE id IN (");
    push_padded(&mut q, &products);
    q.push(") ORDER BY id FOR UPDATE");
    q.build()
        .fetch_all(&mut *tx)
        .await
        .context("locking the products")?;
    let mut q = QueryBuilder::<MySql>::new(
        "SELECT id, ticket, product_id, pay_by_ms, traceparent, quantity FROM orders \
         WHERE status = 'confirmed' AND pay_by_ms <= ",
    );
    q.push_bind(now_ms).push(" AND product_id IN (");
    push_padded(&mut q, &products);
    q.push(") ORDER BY pay_by_ms LIMIT ")
        .push_bind(limit as i64)
        .push(" FOR UPDATE SKIP LOCKED");
    let due: Vec<DueRow> = q
        .build_query_as()
        .fetch_all(&mut *tx)
        .await
        .context("reading overdue orders")?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = due.iter().map(|d| d.id).collect();
    let mut q = QueryBuilder::<MySql>::new(
        "UPDATE orders SET status = 'cancelled', cancel_reason = 'payment_timeout', restore_due = 1, cancelled_at_ms = ",
    );
    q.push_bind(now_ms)
        .push(" WHERE status = 'confirmed' AND id IN (");
    push_padded(&mut q, &ids);
    q.push(")");
    let res = q
        .build()
        .execute(&mut *tx)
        .await
        .context("cancelling overdue orders")?;
    anyhow::ensure!(
        res.rows_affected() == ids.len() as u64,
        "cancelled {} of {} locked orders",
        res.rows_affected(),
        ids.len()
    );
    let mut per_product: BTreeMap<i64, i64> = BTreeMap::new();
    for d in &due {
        *per_product.entry(d.product_id).or_default() += i64::from(d.quantity.max(1));
    }
    for (product, n) in &per_product {
        sqlx::query("UPDATE products SET stock = stock + ? WHERE id = ?")
            .bind(n)
            .bind(product)
            .execute(&mut *tx)
            .await
            .context("putting units back in MySQL")?;
    }
    tx.commit().await.context("committing the cancels")?;
    due.into_iter()
        .map(|d| {
            Ok(Cancelled {
                id: d.id,
                ticket: Ticket::parse(&d.ticket)
                    .map_err(|e| anyhow::anyhow!("a stored ticket: {e}"))?,
                quantity: d.quantity.max(1),
                reason: CancelReason::PaymentTimeout,
                pay_by_ms: d.pay_by_ms,
                traceparent: d.traceparent,
            })
        })
        .collect()
}

/// What a buyer's cancel found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuyerCancel {
    /// Cancelled now; its unit must go back in Redis.
    Cancelled(Cancelled),
    /// Not cancellable: the order is in this state (or has no payment window).
    NotCancellable(OrderStatus),
    /// No such order of this buyer.
    NoOrder,
}

/// The buyer cancels their `confirmed` order (one with a payment window). One conditional
/// `UPDATE` decides against a payment deciding on the same row.
pub async fn cancel_by_buyer(
    db: &MySqlPool,
    ticket: &Ticket,
    user: UserId,
    now_ms: i64,
) -> anyhow::Result<BuyerCancel> {
    let mut tx = db.begin().await.context("starting a transaction")?;
    // The product's row first, as a batch takes it before it inserts orders: locking the order
    // first and the product second met a batch the other way round (a deadlock, `503`).
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(ticket.product().as_i64())
        .fetch_optional(&mut *tx)
        .await
        .context("locking the product")?;
    let res = sqlx::query(
        "UPDATE orders SET status = 'cancelled', cancel_reason = 'buyer_cancelled', restore_due = 1, \
         cancelled_at_ms = ? WHERE ticket = ? AND user_id = ? AND status = 'confirmed' AND pay_by_ms IS NOT NULL",
    )
    .bind(now_ms)
    .bind(ticket.as_str())
    .bind(user.as_i64())
    .execute(&mut *tx)
    .await
    .context("cancelling an order")?;
    #[derive(sqlx::FromRow)]
    struct OrderRow {
        id: i64,
        status: String,
        pay_by_ms: Option<i64>,
        quantity: u16,
    }
    let row: Option<OrderRow> = sqlx::query_as(
        "SELECT id, status, pay_by_ms, quantity FROM orders WHERE ticket = ? AND user_id = ?",
    )
    .bind(ticket.as_str())
    .bind(user.as_i64())
    .fetch_optional(&mut *tx)
    .await
    .context("reading the order")?;
    let Some(row) = row else {
        return Ok(BuyerCancel::NoOrder);
    };
    if res.rows_affected() == 0 {
        return Ok(BuyerCancel::NotCancellable(crate::db::order_status(
            &row.status,
        )?));
    }
    let quantity = row.quantity.max(1);
    sqlx::query("UPDATE products SET stock = stock + ? WHERE id = ?")
        .bind(quantity)
        .bind(ticket.product().as_i64())
        .execute(&mut *tx)
        .await
        .context("putting the units back in MySQL")?;
    tx.commit().await.context("committing the cancel")?;
    Ok(BuyerCancel::Cancelled(Cancelled {
        id: row.id,
        ticket: ticket.clone(),
        quantity,
        reason: CancelReason::BuyerCancelled,
        pay_by_ms: row.pay_by_ms,
        traceparent: None,
    }))
}

/// Cancelled orders whose unit may not be back in Redis yet (a crash after the cancel's
/// commit), cancelled at or before `before_ms`.
pub async fn restore_due(
    db: &MySqlPool,
    before_ms: i64,
    limit: usize,
) -> anyhow::Result<Vec<Cancelled>> {
    #[derive(sqlx::FromRow)]
    struct RestoreRow {
        id: i64,
        ticket: String,
        cancel_reason: Option<String>,
        pay_by_ms: Option<i64>,
        quantity: u16,
    }
    let rows: Vec<RestoreRow> = sqlx::query_as(
        "SELECT id, ticket, cancel_reason, pay_by_ms, quantity FROM orders \
         WHERE restore_due = 1 AND status = 'cancelled' AND cancelled_at_ms <= ? LIMIT ?",
    )
    .bind(before_ms)
    .bind(limit as i64)
    .fetch_all(db)
    .await
    .context("reading cancels to restore")?;
    rows.into_iter()
        .map(|r| {
            Ok(Cancelled {
                id: r.id,
                ticket: Ticket::parse(&r.ticket)
                    .map_err(|e| anyhow::anyhow!("a stored ticket: {e}"))?,
                quantity: r.quantity.max(1),
                reason: r
                    .cancel_reason
                    .as_deref()
                    .and_then(CancelReason::parse)
                    .unwrap_or(CancelReason::PaymentTimeout),
                pay_by_ms: r.pay_by_ms,
                traceparent: None,
            })
        })
        .collect()
}

/// Step 2 and 3: gives the units of `cancelled` back in Redis (at most once each), then
/// clears their `restore_due`. Returns the products that got a unit back, each with how many:
/// the caller announces them (`"false"`), so every gateway drops its sold-out marker.
pub async fn give_back(
    store: &TicketStore,
    db: &MySqlPool,
    cancelled: &[Cancelled],
    now_ms: i64,
) -> anyhow::Result<BTreeMap<ProductId, u64>> {
    // One multiplexed connection: each chunk runs pipelined.
    let mut back: BTreeMap<ProductId, u64> = BTreeMap::new();
    for chunk in cancelled.chunks(64) {
        let given = futures::future::join_all(
            chunk
                .iter()
                .map(|c| store.cancel(&c.ticket, c.id as u64, c.quantity, c.reason, now_ms)),
        )
        .await;
        for (c, given) in chunk.iter().zip(given) {
            if given? {
                *back.entry(c.ticket.product()).or_default() += u64::from(c.quantity);
            }
        }
    }
    let ids: BTreeSet<i64> = cancelled.iter().map(|c| c.id).collect();
    clear_restore_due(db, &ids.into_iter().collect::<Vec<_>>()).await?;
    Ok(back)
}

/// An order MySQL paid, for Redis to follow ([`follow_paid`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaidOrder {
    pub id: u64,
    pub ticket: Ticket,
    pub user_id: u64,
    /// Units the order holds.
    pub quantity: u16,
}

/// Paid orders whose `paid.lua` may not have run (the gateway that applied the payment
/// stopped between its commit and Redis), paid at or before `before_ms`.
/// The payment's commit sets `restore_due` with `paid`, and [`follow_paid`] clears it.
pub async fn paid_due(
    db: &MySqlPool,
    before_ms: i64,
    limit: usize,
) -> anyhow::Result<Vec<PaidOrder>> {
    #[derive(sqlx::FromRow)]
    struct PaidRow {
        id: i64,
        ticket: String,
        user_id: i64,
        quantity: u16,
    }
    let rows: Vec<PaidRow> = sqlx::query_as(
        "SELECT id, ticket, user_id, quantity FROM orders \
         WHERE restore_due = 1 AND status = 'paid' AND paid_at_ms <= ? LIMIT ?",
    )
    .bind(before_ms)
    .bind(limit as i64)
    .fetch_all(db)
    .await
    .context("reading payments to follow in Redis")?;
    rows.into_iter()
        .map(|r| {
            Ok(PaidOrder {
                id: r.id as u64,
                ticket: Ticket::parse(&r.ticket)
                    .map_err(|e| anyhow::anyhow!("a stored ticket: {e}"))?,
                user_id: r.user_id as u64,
                quantity: r.quantity.max(1),
            })
        })
        .collect()
}

/// Makes Redis follow orders MySQL paid (`paid.lua`, at most once each), then clears their
/// `restore_due`. Run by the gateway that applied the payment, and for any it left behind by
/// every worker's expiry round ([`paid_due`]).
pub async fn follow_paid(
    store: &TicketStore,
    db: &MySqlPool,
    paid: &[PaidOrder],
    now_ms: i64,
) -> anyhow::Result<()> {
    for order in paid {
        store
            .paid(
                &order.ticket,
                order.id,
                order.user_id,
                order.quantity,
                now_ms,
            )
            .await?;
    }
    let ids: Vec<i64> = paid.iter().map(|order| order.id as i64).collect();
    clear_restore_due(db, &ids).await
}

/// Redis has followed these orders: nothing is left for a recovery round.
async fn clear_restore_due(db: &MySqlPool, ids: &[i64]) -> anyhow::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut q = QueryBuilder::<MySql>::new("UPDATE orders SET restore_due = 0 WHERE id IN (");
    push_padded(&mut q, ids);
    q.push(")");
    q.build()
        .execute(db)
        .await
        .context("clearing restore_due")?;
    Ok(())
}
