//! Recovery paths: the stale-reservation sweeper and reconcile after Redis loses its data.
//!
//! **Sweeper.** A gateway can die after reserving a unit and before Kafka took the order, and
//! a broker restart can lose messages. Either way a ticket stays `pending` with no message
//! behind it. [`sweep`] fails `pending` tickets older than the timeout, giving their units
//! back. It only ever takes `pending` tickets (atomically, in `compensate.lua`), and a worker
//! must claim a ticket (`pending` → `processing`) before it writes the order, so the sweeper
//! and a late message can never both win.
//!
//! A ticket stuck in `processing` far longer (a worker claimed it, then both the worker and
//! the message were lost) is settled by MySQL: under the product's row lock, which the
//! worker's batch transaction also takes, an existing order row confirms it, and otherwise a
//! `failed_tickets` row fails it for good before its unit goes back.
//!
//! Every step is idempotent, so any number of workers may sweep at once.
//!
//! **Reconcile.** [`reconcile`] rebuilds a product's Redis state from MySQL: settled tickets,
//! buyers, counters and stock (MySQL stock less the tickets still in flight in Redis).

use crate::db;
use crate::domain::{ProductId, Ticket, TicketStatus};
use crate::store::TicketStore;
use anyhow::Context;
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::collections::BTreeMap;
use std::time::Duration;

/// A `processing` ticket is settled by the sweeper once it is this many pending timeouts old.
pub const STUCK_FACTOR: i64 = 3;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Units given back, by product.
    pub given_back: BTreeMap<ProductId, u64>,
    /// Stuck tickets confirmed because MySQL had their order.
    pub confirmed: u64,
}

/// Fails stale reservations of every product. See the module docs.
pub async fn sweep(
    store: &TicketStore,
    db: &MySqlPool,
    timeout: Duration,
) -> anyhow::Result<SweepReport> {
    let mut report = SweepReport::default();
    let now = crate::now_ms();
    let cutoff = now - timeout.as_millis() as i64;
    let stuck_cutoff = now - STUCK_FACTOR * timeout.as_millis() as i64;
    let products: Vec<i64> = sqlx::query("SELECT id FROM products")
        .fetch_all(db)
        .await
        .context("listing products")?
        .into_iter()
        .map(|r| r.get("id"))
        .collect();
    for id in products {
        let Ok(product) = ProductId::new(id as u64) else {
            continue;
        };
        for ticket in store.unsettled_before(product, cutoff, 1000).await? {
            let record = store.ticket(&ticket).await?;
            let Some(record) = record else { continue };
            let pending = record.raw_status == "pending";
            let stuck = record.raw_status == "processing" && record.created_at_ms <= stuck_cutoff;
            if pending && store.expire_pending(&ticket, "expired", cutoff).await? {
                record_failure(db, &ticket, record.user_id, "expired").await?;
                *report.given_back.entry(product).or_default() += 1;
                tracing::warn!(%ticket, "stale reservation expired");
            } else if stuck {
                if settle_stuck(store, db, &ticket, record.user_id).await? {
                    *report.given_back.entry(product).or_default() += 1;
                } else {
                    report.confirmed += 1;
                }
            }
        }
    }
    Ok(report)
}

async fn record_failure(
    db: &MySqlPool,
    ticket: &Ticket,
    user: u64,
    reason: &str,
) -> anyhow::Result<()> {
    sqlx::query("INSERT IGNORE INTO failed_tickets (ticket, product_id, user_id, reason) VALUES (?, ?, ?, ?)")
        .bind(ticket.as_str())
        .bind(ticket.product().as_i64())
        .bind(user as i64)
        .bind(reason)
        .execute(db)
        .await
        .context("recording a failed ticket")?;
    Ok(())
}

/// Settles a ticket stuck in `processing` through MySQL. Returns `true` when it failed (and
/// its unit went back), `false` when MySQL had its order and it was confirmed.
async fn settle_stuck(
    store: &TicketStore,
    db: &MySqlPool,
    ticket: &Ticket,
    user: u64,
) -> anyhow::Result<bool> {
    let mut tx = db.begin().await.context("starting a transaction")?;
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(ticket.product().as_i64())
        .fetch_optional(&mut *tx)
        .await
        .context("locking the product")?;
    let order: Option<i64> = sqlx::query("SELECT id FROM orders WHERE ticket = ?")
        .bind(ticket.as_str())
        .fetch_optional(&mut *tx)
        .await
        .context("reading the order")?
        .map(|r| r.get("id"));
    let reason: Option<String> = sqlx::query("SELECT reason FROM failed_tickets WHERE ticket = ?")
        .bind(ticket.as_str())
        .fetch_optional(&mut *tx)
        .await
        .context("reading the failure")?
        .map(|r| r.get("reason"));
    if let Some(order_id) = order {
        tx.commit().await?;
        store
            .confirm(ticket.product(), &[(ticket, order_id as u64)])
            .await?;
        return Ok(false);
    }
    let reason = match reason {
        Some(r) => r,
        None => {
            sqlx::query("INSERT INTO failed_tickets (ticket, product_id, user_id, reason) VALUES (?, ?, ?, 'lost')")
                .bind(ticket.as_str())
                .bind(ticket.product().as_i64())
                .bind(user as i64)
                .execute(&mut *tx)
                .await
                .context("recording a lost ticket")?;
            "lost".to_owned()
        }
    };
    tx.commit().await.context("committing a lost ticket")?;
    let given_back = store.compensate(ticket, &reason).await?;
    tracing::warn!(%ticket, "stuck ticket failed: its message was lost");
    Ok(given_back)
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReconcileReport {
    pub stock_db: i64,
    pub stock_redis: i64,
    pub confirmed: i64,
    pub failed: i64,
    /// Ticket records rewritten from MySQL.
    pub restored: u64,
    /// Pending entries dropped because their ticket record was gone.
    pub pruned: u64,
}

/// Rebuilds a product's Redis state from MySQL. `Ok(None)` for a product MySQL does not know.
pub async fn reconcile(
    store: &TicketStore,
    db: &MySqlPool,
    product: ProductId,
) -> anyhow::Result<Option<ReconcileReport>> {
    // One transaction, so the stock and the rows come from one snapshot.
    let mut tx = db.begin().await.context("starting a transaction")?;
    let Some(p) = db::product(&mut *tx, product).await? else {
        return Ok(None);
    };
    let orders: Vec<(Ticket, u64, String)> =
        sqlx::query("SELECT ticket, user_id, id FROM orders WHERE product_id = ?")
            .bind(product.as_i64())
            .fetch_all(&mut *tx)
            .await
            .context("reading orders")?
            .into_iter()
            .filter_map(|r| {
                let t = Ticket::parse(r.get::<&str, _>("ticket")).ok()?;
                Some((
                    t,
                    r.get::<i64, _>("user_id") as u64,
                    r.get::<i64, _>("id").to_string(),
                ))
            })
            .collect();
    let failed: Vec<(Ticket, u64, String)> =
        sqlx::query("SELECT ticket, user_id, reason FROM failed_tickets WHERE product_id = ?")
            .bind(product.as_i64())
            .fetch_all(&mut *tx)
            .await
            .context("reading failed tickets")?
            .into_iter()
            .filter_map(|r| {
                let t = Ticket::parse(r.get::<&str, _>("ticket")).ok()?;
                Some((
                    t,
                    r.get::<i64, _>("user_id") as u64,
                    r.get::<String, _>("reason"),
                ))
            })
            .collect();
    tx.commit().await?;

    let mut restored = store
        .restore_settled(product, TicketStatus::Confirmed, &orders)
        .await?;
    restored += store
        .restore_settled(product, TicketStatus::Failed, &failed)
        .await?;
    let pruned = store.prune_pending(product).await?;
    let stock_redis = store
        .rebuild(
            product,
            p.stock,
            p.initial_stock,
            orders.len() as i64,
            failed.len() as i64,
            p.starts_at_ms,
            p.ends_at_ms,
        )
        .await?;
    Ok(Some(ReconcileReport {
        stock_db: p.stock,
        stock_redis,
        confirmed: orders.len() as i64,
        failed: failed.len() as i64,
        restored,
        pruned,
    }))
}
