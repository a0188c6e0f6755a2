//! The stale-reservation sweeper.
//!
//! A gateway can die after reserving a unit and before Kafka took the order, and
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

use super::reconcile::reconcile_lost;
use crate::db;
use crate::domain::{FailureReason, OrderMessage, ProductId, Ticket, UserId};
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
                    let (user, quantity) = (record.user_id, record.quantity);
                    if expire(store, db, &ticket, user, quantity, cutoff).await? == Some(true) {
                        *report.given_back.entry(product).or_default() += u64::from(quantity);
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
    Ok(OrderMessage::of(
        ticket.clone(),
        UserId::new(record.user_id).context("a reservation's user")?,
        record.created_at_ms,
        record.quantity,
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
    quantity: u16,
    cutoff_ms: i64,
) -> anyhow::Result<Option<bool>> {
    let expired = store
        .expire_pending(ticket, FailureReason::Expired, cutoff_ms)
        .await?;
    if expired.is_some() {
        record_expired(store, db, ticket, user, quantity).await?;
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

/// The expire's `failed_tickets(expired)` row ([`db::record_failure`]), only where the ticket
/// has no order row: a Redis that lost its data between the expire's script and this insert
/// lets a redelivered message's claim adopt the ticket, and a worker confirm it; its order
/// stands. A failure row of another reason stands too, and the record takes its reason: a
/// gateway's `kafka_unavailable`, written after Redis came back from an older snapshot with
/// the ticket pending again (found by the lifecycle model).
async fn record_expired(
    store: &TicketStore,
    db: &MySqlPool,
    ticket: &Ticket,
    user: u64,
    quantity: u16,
) -> anyhow::Result<()> {
    if let db::Recorded::Failed(reason) =
        db::record_failure(db, ticket, user, quantity, FailureReason::Expired).await?
    {
        if reason != FailureReason::Expired && store.follow_failure(ticket, reason).await? {
            tracing::warn!(%ticket, %reason, "expired ticket takes MySQL's earlier reason");
        }
    }
    Ok(())
}
