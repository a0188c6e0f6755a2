//! Reconcile after Redis loses its data.
//!
//! [`reconcile`] rebuilds a product's Redis state from MySQL: settled tickets,
//! buyers, counters and stock (MySQL stock less the tickets still in flight in Redis). It
//! holds the product's row lock while it rewrites Redis, so no batch commits in between, and
//! after a loss it first waits for the workers to read every order published before it
//! ([`Fence`]), so that those orders are counted as in flight. One pass is exact.

use super::scripts::{Rebuild, RestoredFailure, RestoredOrder, Settled};
use crate::db;
use crate::domain::{CancelReason, FailureReason, OrderStatus, ProductId, Ticket};
use crate::kafka::Fence;
use crate::store::TicketStore;
use anyhow::Context;
use sqlx::mysql::MySqlPool;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long reconcile waits for the workers to read past its fence.
pub const FENCE_LIMIT: Duration = Duration::from_secs(60);

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
    /// Redis had lost the product: the workers' reading of older orders was awaited first.
    pub was_lost: bool,
}

/// Rebuilds a product's Redis state from MySQL. `Ok(None)` for a product MySQL does not know.
///
/// When Redis has lost the product (no stock key) and a `fence` is given, it first waits
/// until the workers have read every order published before the call ([`Fence::drain`]):
/// they adopt those orders (`claim.lua`), so the rebuilt stock counts them as in flight and
/// no unit they hold is sold again. Meanwhile buys of the product get `503`. Then, holding
/// the product's row lock so that no batch commits in between, it rewrites the settled
/// tickets, the buyers, the counters and the stock (MySQL stock less what is in flight).
pub async fn reconcile(
    store: &TicketStore,
    db: &MySqlPool,
    product: ProductId,
    fence: Option<&Fence>,
) -> anyhow::Result<Option<ReconcileReport>> {
    run_reconcile(store, db, product, fence, false).await
}

/// [`reconcile`], only for a product Redis lost (a bucket without its stock), checked again
/// under the row lock: `Ok(None)` when another process rebuilt it meanwhile. Gateways, workers
/// and the sweeper that found a product lost call this, so that they rebuild it once between
/// them.
pub async fn reconcile_lost(
    store: &TicketStore,
    db: &MySqlPool,
    product: ProductId,
    fence: Option<&Fence>,
) -> anyhow::Result<Option<ReconcileReport>> {
    run_reconcile(store, db, product, fence, true).await
}

async fn run_reconcile(
    store: &TicketStore,
    db: &MySqlPool,
    product: ProductId,
    fence: Option<&Fence>,
    only_lost: bool,
) -> anyhow::Result<Option<ReconcileReport>> {
    // Lost: loaded for sale once, and now without Redis state. A product never loaded has no
    // orders in Kafka to wait for.
    let Some(known) = db::product(db, product).await? else {
        return Ok(None);
    };
    store.learn_buckets(product, known.buckets);
    let lost = known.loaded_at_ms.is_some() && store.stock(product).await?.is_none();
    if only_lost && !lost {
        return Ok(None);
    }
    if lost {
        if let Some(fence) = fence {
            fence
                .drain(FENCE_LIMIT)
                .await
                .context("waiting for the workers to read the orders published before the loss")?;
        }
    }
    // One transaction that holds the product's row lock until Redis is rewritten: batches
    // take the same lock to commit, so MySQL cannot move between the read and the rebuild.
    let mut tx = db.begin().await.context("starting a transaction")?;
    let Some(p) = db::product_for_update(&mut *tx, product).await? else {
        return Ok(None);
    };
    if only_lost && store.stock(product).await?.is_some() {
        return Ok(None);
    }
    // Buckets are rebuilt one by one: first they all stop selling and lending.
    if p.buckets > 1 {
        store.freeze(product).await?;
    }
    #[derive(sqlx::FromRow)]
    struct OrderRow {
        ticket: String,
        user_id: i64,
        id: i64,
        status: String,
        cancel_reason: Option<String>,
        quantity: u16,
    }
    #[derive(sqlx::FromRow)]
    struct FailedRow {
        ticket: String,
        user_id: i64,
        reason: String,
        quantity: u16,
    }
    let mut orders: BTreeMap<OrderStatus, Vec<RestoredOrder>> = BTreeMap::new();
    for r in sqlx::query_as::<_, OrderRow>(
        "SELECT ticket, user_id, id, status, cancel_reason, quantity FROM orders WHERE product_id = ?",
    )
    .bind(product.as_i64())
    .fetch_all(&mut *tx)
    .await
    .context("reading orders")?
    {
        let Ok(t) = Ticket::parse(&r.ticket) else {
            continue;
        };
        let status = db::order_status(&r.status)?;
        let cancel_reason = r
            .cancel_reason
            .filter(|c| !c.is_empty())
            .map(|c| {
                CancelReason::parse(&c)
                    .with_context(|| format!("unknown cancel reason {c:?} in MySQL"))
            })
            .transpose()?;
        orders.entry(status).or_default().push(RestoredOrder {
            ticket: t,
            user_id: r.user_id as u64,
            order_id: r.id as u64,
            cancel_reason,
            quantity: r.quantity.max(1),
        });
    }
    let mut failed: Vec<RestoredFailure> = vec![];
    for r in sqlx::query_as::<_, FailedRow>(
        "SELECT ticket, user_id, reason, quantity FROM failed_tickets WHERE product_id = ?",
    )
    .bind(product.as_i64())
    .fetch_all(&mut *tx)
    .await
    .context("reading failed tickets")?
    {
        let Ok(ticket) = Ticket::parse(&r.ticket) else {
            continue;
        };
        failed.push(RestoredFailure {
            ticket,
            user_id: r.user_id as u64,
            reason: FailureReason::parse(&r.reason)
                .with_context(|| format!("unknown failure reason {:?} in MySQL", r.reason))?,
            quantity: r.quantity.max(1),
        });
    }

    // Records to be paid live for the window too (see `confirm.lua`).
    let ttl = store.ticket_ttl_secs() + p.payment_window_secs.max(0) as u64;
    let mut restored = 0;
    for (&status, orders) in &orders {
        let settled = Settled::Orders { status, orders };
        restored += store.restore_settled(product, settled, ttl).await?;
    }
    restored += store
        .restore_settled(product, Settled::Failed(&failed), ttl)
        .await?;
    let pruned = store.prune_pending(product).await?;
    // Every counter counts units.
    let count = |s: OrderStatus| {
        orders
            .get(&s)
            .map_or(0, |l| l.iter().map(|o| i64::from(o.quantity)).sum::<i64>())
    };
    let sold = count(OrderStatus::Confirmed) + count(OrderStatus::Paid);
    let failed_units = failed.iter().map(|f| i64::from(f.quantity)).sum::<i64>();
    // The waiting room before the stock: a buy finds no stock until the room is in place.
    store
        .set_waiting_room(product, p.waiting_room.as_ref())
        .await?;
    let stock_redis = if p.buckets > 1 {
        rebuild_buckets(store, product, &p, &orders, &failed).await?
    } else {
        store
            .rebuild(
                product,
                &Rebuild {
                    mysql_stock: p.stock,
                    initial: p.initial_stock,
                    sold,
                    paid: count(OrderStatus::Paid),
                    cancelled: count(OrderStatus::Cancelled),
                    failed: failed_units,
                    starts_at_ms: p.starts_at_ms,
                    ends_at_ms: p.ends_at_ms,
                    max_per_buyer: p.max_per_buyer,
                },
            )
            .await?
    };
    // The product is loaded for sale now, however it was opened: a product opened by a
    // reconcile alone (no preload) must count as lost if Redis loses it later.
    sqlx::query("UPDATE products SET loaded_at_ms = COALESCE(loaded_at_ms, ?) WHERE id = ?")
        .bind(crate::now_ms())
        .bind(product.as_i64())
        .execute(&mut *tx)
        .await
        .context("recording that the product is loaded")?;
    tx.commit()
        .await
        .context("releasing the product's row lock")?;
    Ok(Some(ReconcileReport {
        stock_db: p.stock,
        stock_redis,
        confirmed: sold,
        failed: failed.len() as i64,
        restored,
        pruned,
        was_lost: lost,
    }))
}

/// The last step of reconcile for a product in buckets (frozen by then): each bucket's counters
/// from its own tickets, and the MySQL stock less everything in flight split evenly over the
/// buckets. Returns the stock set, all buckets.
async fn rebuild_buckets(
    store: &TicketStore,
    product: ProductId,
    p: &db::Product,
    orders: &BTreeMap<OrderStatus, Vec<RestoredOrder>>,
    failed: &[RestoredFailure],
) -> anyhow::Result<i64> {
    let n = p.buckets;
    let mut each = vec![
        Rebuild {
            starts_at_ms: p.starts_at_ms,
            ends_at_ms: p.ends_at_ms,
            max_per_buyer: p.max_per_buyer,
            ..Rebuild::default()
        };
        n as usize
    ];
    for (status, list) in orders {
        for o in list {
            let Some(b) = each.get_mut(o.ticket.bucket() as usize) else {
                continue;
            };
            let q = i64::from(o.quantity);
            match status {
                OrderStatus::Confirmed => b.sold += q,
                OrderStatus::Paid => {
                    b.sold += q;
                    b.paid += q;
                }
                OrderStatus::Cancelled => b.cancelled += q,
            }
        }
    }
    for f in failed {
        if let Some(b) = each.get_mut(f.ticket.bucket() as usize) {
            b.failed += i64::from(f.quantity);
        }
    }
    let mut in_flight = 0;
    for bucket in 0..n {
        in_flight += store.in_flight(product, bucket).await?;
    }
    let left = p.stock - in_flight;
    if left < 0 {
        // More tickets in flight than MySQL has units (orders adopted after a loss). One
        // product's stock goes below zero and pays that back as they fail; buckets never go
        // below zero, so a bucket at 0 would take back the unit of an order that fails for
        // a reason of its own, a unit MySQL does not have, and sell it to a buyer whose order
        // then fails `out_of_stock`. So the buckets stay frozen as reconcile left them (buys
        // answer 503, and every script that gives a unit back finds no stock to give it to)
        // until the orders in flight have settled (the sweep settles the overdue ones); the
        // sweep or a buy then finds the product lost and rebuilds it. No bucket is written
        // meanwhile, not even at 0: a unit given back to it would be sold.
        tracing::warn!(%product, mysql_stock = p.stock, in_flight, "more units in flight than MySQL stock: the buckets stay frozen until they settle");
        return Ok(0);
    }
    let mut total = 0;
    for (bucket, (share, m)) in crate::sale::split(left, n)
        .into_iter()
        .zip(each)
        .enumerate()
    {
        let m = Rebuild {
            mysql_stock: share,
            ..m
        };
        total += store.rebuild_bucket(product, bucket as u16, n, &m).await?;
    }
    Ok(total)
}
