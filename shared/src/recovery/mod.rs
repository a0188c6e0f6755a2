//! Recovery paths: the stale-reservation sweeper and reconcile after Redis loses its data.
//!
//! **Sweeper.** A gateway can die after reserving a unit and before Kafka took the order, and
//! a broker can lose messages. Either way a ticket stays `pending` with no message behind it.
//! [`sweep`] settles such tickets, and never one whose order is only queued ([`decide`]):
//! - a ticket whose Kafka location (partition, offset) the gateway recorded had its `202`:
//!   Kafka acknowledged its order. Once the consumer group's committed offset on that partition
//!   has passed it (the message was read, and the ticket was still not claimed: the broker
//!   lost the message), and it is older than the pending timeout, or once it is older than the
//!   last-resort timeout (a broker that lost its log), the sweeper writes the order itself from
//!   the reservation, through the same claim, MySQL and confirm steps as a worker
//!   ([`SweepAction::Complete`]). The promise is kept whatever the broker lost;
//! - a `pending` ticket without a location (the gateway died before Kafka's ack, so the buyer
//!   got no `202`) is failed, and its unit given back, after the pending timeout. Only a
//!   ticket still `pending` is failed (atomically, in `compensate.lua`), and a worker must
//!   claim a ticket (`pending` → `processing`) before it writes the order, so the sweeper and
//!   a late message can never both win. The `expired` failure row is written only when this
//!   sweep failed the ticket.
//!
//! A ticket stuck in `processing` (a worker read its message and claimed it, then the worker
//! and the message were lost) follows the same timeouts, with three pending timeouts when its
//! location is unknown, and is completed from its reservation like a lost message. It is
//! never failed: a worker read its message, so its buyer may hold a `202`. Completing runs
//! the worker's own steps, and under the product's row lock, which every batch transaction
//! also takes, MySQL decides once: a worker or another sweeper settling the same ticket at the
//! same time finds the order row and confirms it.
//!
//! Every step is idempotent, so any number of workers may sweep at once.
//!
//! **Reconcile.** [`reconcile`] rebuilds a product's Redis state from MySQL: settled tickets,
//! buyers, counters and stock (MySQL stock less the tickets still in flight in Redis). It
//! holds the product's row lock while it rewrites Redis, so no batch commits in between, and
//! after a loss it first waits for the workers to read every order published before it
//! ([`Fence`]), so that those orders are counted as in flight. One pass is exact.

mod redis_ops;
pub mod scripts;

pub use redis_ops::Rebuild;
pub use scripts::{RestoredFailure, RestoredOrder, Settled};

use crate::db;
use crate::domain::{
    CancelReason, FailureReason, OrderMessage, OrderStatus, ProductId, Ticket, UserId,
};
use crate::kafka::Fence;
use crate::settle::{Chaos, Settler};
use crate::store::{RecordStatus, TicketRecord, TicketStore};
use anyhow::Context;
use sqlx::mysql::MySqlPool;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A `processing` ticket without a Kafka location is settled by the sweeper once it is this
/// many pending timeouts old.
pub const STUCK_FACTOR: i64 = 3;

/// Entries of a bucket's `located` list one sweep looks at for trimming, at most.
const TRIM_LIMIT: usize = 1000;

/// How long reconcile waits for the workers to read past its fence.
pub const FENCE_LIMIT: Duration = Duration::from_secs(60);

#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Units given back, by product.
    pub given_back: BTreeMap<ProductId, u64>,
    /// Acknowledged orders whose message Kafka lost, settled from their reservation.
    pub completed: u64,
    /// Products found without their Redis state (Redis lost it), and reconciled.
    pub reconciled: Vec<ProductId>,
    /// Sales found over and closed.
    pub closed: Vec<ProductId>,
}

/// The sweeper's timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepRules {
    pub timeout: Duration,
    pub last_resort: Duration,
}

/// What the sweeper does with one unsettled ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepAction {
    Leave,
    /// Fail the `pending` ticket (`expired`) and give its unit back: its order never reached
    /// Kafka.
    Expire,
    /// Write the ticket's order from its reservation, through the same claim, MySQL and
    /// confirm steps as a worker: Kafka acknowledged it (a `pending` ticket with a location:
    /// the buyer had a `202`) or a worker read it (a `processing` ticket), and then the
    /// message or the worker was lost. Under the product's row lock MySQL decides once,
    /// whoever else settles it at the same time (a worker, another sweeper).
    Complete,
}

/// The sweeper's rule for one ticket (see the module docs). `location` is where its order
/// landed in Kafka (partition, offset), when its gateway recorded it; `committed` holds the
/// group's committed offsets, `None` when Kafka could not be asked.
pub fn decide(
    record: &TicketRecord,
    location: Option<(i32, i64)>,
    now_ms: i64,
    rules: SweepRules,
    committed: Option<&HashMap<i32, i64>>,
) -> SweepAction {
    let age = now_ms - record.created_at_ms;
    let timeout = rules.timeout.as_millis() as i64;
    let act = match (record.state, location) {
        (RecordStatus::Pending, Some(_)) => SweepAction::Complete,
        (RecordStatus::Pending, None) => SweepAction::Expire,
        (RecordStatus::Processing, _) => SweepAction::Complete,
        (state, _) if state.is_settled() => return SweepAction::Leave,
        (_, _) => unreachable!("pending and processing are matched above"),
    };
    if age >= rules.last_resort.as_millis() as i64 {
        return act;
    }
    let due = match location {
        Some((partition, offset)) => {
            let read_past = committed
                .and_then(|c| c.get(&partition))
                .is_some_and(|next| *next > offset);
            read_past && age >= timeout
        }
        None if record.state == RecordStatus::Pending => age >= timeout,
        None => age >= STUCK_FACTOR * timeout,
    };
    if due {
        act
    } else {
        SweepAction::Leave
    }
}

/// How long a closed sale's Redis keys live on: buyers who retry still get their ticket.
pub const CLOSED_SALE_GRACE: Duration = Duration::from_secs(3600);

/// Sweeps every live product (loaded, and not closed). See the module docs. A product Redis
/// lost is reconciled; one whose sale is over with nothing in flight (sold out, or past its
/// end) is closed: no later sweep reads it, and its Redis keys expire after
/// [`CLOSED_SALE_GRACE`]. So a sweep costs in proportion to the sales going on, not to every
/// sale ever held.
pub async fn sweep(
    store: &TicketStore,
    db: &MySqlPool,
    rules: SweepRules,
    committed: Option<&HashMap<i32, i64>>,
    fence: Option<&Fence>,
) -> anyhow::Result<SweepReport> {
    let mut report = SweepReport::default();
    let now = crate::now_ms();
    let cutoff = now - rules.timeout.as_millis() as i64;
    for (product, buckets) in db::live_products_with_buckets(db).await? {
        store.learn_buckets(product, buckets);
        let old = store.check_epoch(product).await?;
        if old > 0 {
            tracing::warn!(%product, buckets = old, "Redis came back with another run's state, which may be old (a restart from a snapshot, or a failover to a lagging replica); rebuilding the product");
        }
        let counts = store.counts(product).await?;
        if let Some(stock) = counts.stock {
            // Locations of settled orders are no longer needed: the list stays about as long
            // as the orders in flight.
            store.trim_located(product, TRIM_LIMIT).await?;
            for ticket in store.stale_borrows(product, cutoff).await? {
                let back = store.void_borrow(&ticket).await?;
                if back > 0 {
                    *report.given_back.entry(product).or_default() += back;
                }
            }
            if counts.pending == 0 {
                let ended = counts.ends_at_ms.is_some_and(|end| end <= now);
                if (stock <= 0 || ended) && close(store, db, product, now).await? {
                    report.closed.push(product);
                }
                continue;
            }
        } else {
            tracing::warn!(%product, "Redis lost the product's state; reconciling it");
            // One product's failed rebuild does not stop the sweep of the others.
            match reconcile_lost(store, db, product, fence).await {
                Ok(Some(_)) => report.reconciled.push(product),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(%product, error = format!("{e:#}"), "could not rebuild the product")
                }
            }
            // Still without stock (a product in buckets left frozen until its tickets in
            // flight settle): its overdue tickets are settled below all the same, or it would
            // stay frozen for good. With no stock key an expire gives nothing back.
            if counts.pending == 0 || store.stock(product).await?.is_some() {
                continue;
            }
        }
        // Each bucket's locations are read once per sweep, when one of its tickets is overdue.
        let mut located: HashMap<u16, HashMap<String, (i32, i64)>> = HashMap::new();
        for ticket in store.unsettled_before(product, cutoff, 1000).await? {
            let Some(record) = store.ticket(&ticket).await? else {
                continue;
            };
            let bucket = ticket.bucket();
            let located = match located.entry(bucket) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(store.locations(product, bucket).await?),
            };
            let location = located.get(ticket.as_str()).copied().or(record.location);
            match decide(&record, location, now, rules, committed) {
                SweepAction::Leave => {}
                SweepAction::Expire => {
                    if expire(store, db, &ticket, record.user_id, cutoff).await? == Some(true) {
                        *report.given_back.entry(product).or_default() += 1;
                    }
                }
                SweepAction::Complete => {
                    let settled = Settler {
                        store: store.clone(),
                        db: db.clone(),
                        chaos: Chaos::default(),
                        ids: Default::default(),
                    }
                    .settle(std::slice::from_ref(&from_reservation(&ticket, &record)?))
                    .await?;
                    for (product, n) in settled.given_back {
                        *report.given_back.entry(product).or_default() += n;
                    }
                    report.completed += 1;
                    tracing::warn!(%ticket, ?location, state = ?record.state, outcome = ?settled.outcomes, "an acknowledged order was lost in Kafka or with its worker; settled it from its reservation");
                }
            }
        }
    }
    // A closed sale's keys live on for its buyers' polls. A Redis that came back from another
    // run (a snapshot, a lagging replica) may hold an old state of it: records still pending
    // that MySQL has settled, stock that was sold. It is rebuilt from MySQL, and keeps its
    // closing grace.
    let grace = CLOSED_SALE_GRACE.as_millis() as i64;
    for (product, buckets) in db::recently_closed_products(db, now - grace).await? {
        store.learn_buckets(product, buckets);
        if store.check_epoch(product).await? == 0 {
            continue;
        }
        tracing::warn!(%product, "Redis came back with another run's state of a closed sale; rebuilding it from MySQL");
        match reconcile_lost(store, db, product, fence).await {
            Ok(Some(_)) => {
                store.expire_sale(product, CLOSED_SALE_GRACE).await?;
                report.reconciled.push(product);
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(%product, error = format!("{e:#}"), "could not rebuild the closed sale")
            }
        }
    }
    Ok(report)
}

/// The order of an unsettled ticket, as its reservation recorded it: what the sweeper
/// writes when it completes the ticket ([`SweepAction::Complete`]).
pub fn from_reservation(ticket: &Ticket, record: &TicketRecord) -> anyhow::Result<OrderMessage> {
    Ok(OrderMessage::new(
        ticket.clone(),
        UserId::new(record.user_id).context("a reservation's user")?,
        record.created_at_ms,
    ))
}

/// The sweeper's [`SweepAction::Expire`]: fails a ticket still `pending` and reserved at or
/// before `cutoff_ms`, gives its unit back, then records the failure in MySQL. Only a ticket
/// this call failed gets its failure row: one a worker claimed meanwhile is the worker's to
/// settle, and an `expired` row would fail it there. `Some(given_back)` when this call failed
/// it, `None` when it changed nothing.
pub async fn expire(
    store: &TicketStore,
    db: &MySqlPool,
    ticket: &Ticket,
    user: u64,
    cutoff_ms: i64,
) -> anyhow::Result<Option<bool>> {
    let expired = store
        .expire_pending(ticket, FailureReason::Expired, cutoff_ms)
        .await?;
    if expired.is_some() {
        record_expired(db, ticket, user).await?;
        tracing::warn!(%ticket, "stale reservation expired: its order never reached Kafka");
    }
    Ok(expired)
}

/// Closes a sale that is over, if MySQL agrees nothing is left to sell or the end has passed.
/// `true` when this call closed it.
async fn close(
    store: &TicketStore,
    db: &MySqlPool,
    product: ProductId,
    now_ms: i64,
) -> anyhow::Result<bool> {
    // Under the product's row lock, which a buyer's cancel and the expiry take first: a
    // cancel committing between the reads could leave a unit back in MySQL in a closed sale,
    // whose buyers would be told it ended.
    let mut tx = db.begin().await.context("starting a transaction")?;
    let Some(p) = db::product_for_update(&mut *tx, product).await? else {
        return Ok(false);
    };
    let over = p.stock == 0 || p.ends_at_ms.is_some_and(|end| end <= now_ms);
    // An order still to be paid may be cancelled, and its unit must find Redis keys to go
    // back to: the sale stays open until every order is paid or cancelled.
    if !over
        || db::awaiting_payment(&mut *tx, product).await?
        || !db::close_sale(&mut *tx, product, now_ms).await?
    {
        return Ok(false);
    }
    tx.commit().await.context("closing the sale")?;
    store.expire_sale(product, CLOSED_SALE_GRACE).await?;
    tracing::info!(%product, "sale closed: over, with nothing in flight");
    Ok(true)
}

/// The expire's `failed_tickets(expired)` row, under the product's row lock that every batch
/// transaction also takes, and only where the ticket has no order row. A Redis that lost its
/// data between the expire's script and this insert lets a redelivered message's claim adopt
/// the ticket, and a worker confirm it: its order stands, and a failure row beside it would
/// contradict it (found by the lifecycle model).
async fn record_expired(db: &MySqlPool, ticket: &Ticket, user: u64) -> anyhow::Result<()> {
    let mut tx = db.begin().await.context("starting a transaction")?;
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(ticket.product().as_i64())
        .fetch_optional(&mut *tx)
        .await
        .context("locking the product")?;
    sqlx::query(
        "INSERT IGNORE INTO failed_tickets (ticket, product_id, user_id, reason) \
         SELECT ?, ?, ?, ? FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM orders WHERE ticket = ?)",
    )
    .bind(ticket.as_str())
    .bind(ticket.product().as_i64())
    .bind(user as i64)
    .bind(FailureReason::Expired.as_str())
    .bind(ticket.as_str())
    .execute(&mut *tx)
    .await
    .context("recording a failed ticket")?;
    tx.commit().await.context("committing a failed ticket")?;
    Ok(())
}

/// How [`settle_stuck`] settled a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stuck {
    /// MySQL had its order.
    Confirmed { order_id: u64 },
    /// MySQL had no order: the ticket failed for good; `given_back` when its unit went back.
    Failed { given_back: bool },
}

/// Settles an unsettled ticket through MySQL, under the product's row lock that every batch
/// transaction also takes: an existing order row confirms it in Redis, and otherwise a
/// `failed_tickets` row (`lost`, unless one exists) fails it for good before its unit goes
/// back. Used by the gateway's sync mode when the outcome of its own settle is unknown (its
/// buyer has no answer yet, so failing is a promise kept); the sweeper completes a ticket
/// stuck in `processing` instead ([`SweepAction::Complete`]).
pub async fn settle_stuck(
    store: &TicketStore,
    db: &MySqlPool,
    ticket: &Ticket,
    user: u64,
) -> anyhow::Result<Stuck> {
    let mut tx = db.begin().await.context("starting a transaction")?;
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(ticket.product().as_i64())
        .fetch_optional(&mut *tx)
        .await
        .context("locking the product")?;
    #[derive(sqlx::FromRow)]
    struct OrderRow {
        id: i64,
        pay_by_ms: Option<i64>,
    }
    let order: Option<OrderRow> =
        sqlx::query_as("SELECT id, pay_by_ms FROM orders WHERE ticket = ?")
            .bind(ticket.as_str())
            .fetch_optional(&mut *tx)
            .await
            .context("reading the order")?;
    let reason: Option<String> =
        sqlx::query_scalar("SELECT reason FROM failed_tickets WHERE ticket = ?")
            .bind(ticket.as_str())
            .fetch_optional(&mut *tx)
            .await
            .context("reading the failure")?;
    if let Some(order) = order {
        let order_id = order.id as u64;
        tx.commit().await?;
        store
            .confirm(ticket.product(), &[(ticket, order_id, order.pay_by_ms)])
            .await?;
        return Ok(Stuck::Confirmed { order_id });
    }
    let reason = match reason {
        Some(r) => FailureReason::parse(&r)
            .with_context(|| format!("unknown failure reason {r:?} in MySQL"))?,
        None => {
            sqlx::query("INSERT INTO failed_tickets (ticket, product_id, user_id, reason) VALUES (?, ?, ?, ?)")
                .bind(ticket.as_str())
                .bind(ticket.product().as_i64())
                .bind(user as i64)
                .bind(FailureReason::Lost.as_str())
                .execute(&mut *tx)
                .await
                .context("recording a lost ticket")?;
            FailureReason::Lost
        }
    };
    tx.commit().await.context("committing a lost ticket")?;
    let given_back = store.compensate(ticket, reason).await?;
    tracing::warn!(%ticket, %reason, "unsettled ticket failed through MySQL: its message was lost");
    Ok(Stuck::Failed { given_back })
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
    }
    #[derive(sqlx::FromRow)]
    struct FailedRow {
        ticket: String,
        user_id: i64,
        reason: String,
    }
    let mut orders: BTreeMap<OrderStatus, Vec<RestoredOrder>> = BTreeMap::new();
    for r in sqlx::query_as::<_, OrderRow>(
        "SELECT ticket, user_id, id, status, cancel_reason FROM orders WHERE product_id = ?",
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
        });
    }
    let mut failed: Vec<RestoredFailure> = vec![];
    for r in sqlx::query_as::<_, FailedRow>(
        "SELECT ticket, user_id, reason FROM failed_tickets WHERE product_id = ?",
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
    let count = |s: OrderStatus| orders.get(&s).map_or(0, |l| l.len() as i64);
    let sold = count(OrderStatus::Confirmed) + count(OrderStatus::Paid);
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
                    failed: failed.len() as i64,
                    starts_at_ms: p.starts_at_ms,
                    ends_at_ms: p.ends_at_ms,
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
            ..Rebuild::default()
        };
        n as usize
    ];
    for (status, list) in orders {
        for o in list {
            let Some(b) = each.get_mut(o.ticket.bucket() as usize) else {
                continue;
            };
            match status {
                OrderStatus::Confirmed => b.sold += 1,
                OrderStatus::Paid => {
                    b.sold += 1;
                    b.paid += 1;
                }
                OrderStatus::Cancelled => b.cancelled += 1,
            }
        }
    }
    for f in failed {
        if let Some(b) = each.get_mut(f.ticket.bucket() as usize) {
            b.failed += 1;
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
        tracing::warn!(%product, mysql_stock = p.stock, in_flight, "more tickets in flight than MySQL stock: the buckets stay frozen until they settle");
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
