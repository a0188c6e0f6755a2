//! Settling orders: the worker's batch step, also used by the gateway's `sync` mode.
//!
//! For a batch of order messages:
//! 1. Claim the tickets in Redis (`pending` → `processing`). A ticket that is gone (released by
//!    a gateway), confirmed or failed is skipped: a redelivered message changes nothing.
//! 2. Decide every claimed order in one MySQL transaction that locks the products' rows:
//!    already persisted, already failed, unknown product, user already has an order, out of
//!    stock, or accepted. Insert the accepted orders in one multi-row insert, decrement each
//!    product's stock once (guarded so it never goes below zero) and record the failures.
//! 3. After the commit, confirm in Redis and compensate the failures (the unit goes back, the
//!    user is freed), each exactly once.
//!
//! Every step is idempotent, so the caller retries the whole batch on any error.

mod redis_ops;
pub mod scripts;

pub use redis_ops::{ClaimStatus, GiveBack};

use crate::domain::{CancelReason, FailureReason, OrderMessage, OrderStatus, ProductId, Ticket};
use crate::store::TicketStore;
use anyhow::Context;
use sqlx::mysql::MySqlPool;
use sqlx::{MySql, QueryBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// Fault injection for tests and demos.
#[derive(Debug, Clone, Default)]
pub struct Chaos {
    pub fail_users: HashSet<u64>,
    pub fail_rate: f64,
    pub delay: Duration,
    /// Users whose settle fails once after the MySQL commit, as if the reply was lost.
    pub lose_commit_users: HashSet<u64>,
    /// Kill the process right after the commit that brings the orders committed to
    /// `SECKILL_CHAOS_ABORT_AFTER_COMMIT`.
    pub abort_after_commit: crate::crash_point::CrashPoint,
    /// Tickets whose commit was already "lost" once.
    lost_commits: std::sync::Arc<std::sync::Mutex<HashSet<String>>>,
}

impl Chaos {
    pub fn from_settings(s: &crate::config::ChaosSettings) -> Self {
        Self {
            fail_users: s.fail_users().unwrap_or_default(),
            lose_commit_users: s.lose_commit_users().unwrap_or_default(),
            lost_commits: Default::default(),
            abort_after_commit: crate::crash_point::CrashPoint::new(s.abort_after_commit),
            fail_rate: s.fail_rate,
            delay: s.delay(),
        }
    }

    /// Fails once, after the commit, if a claimed order is of a `lose_commit_users` user.
    fn lose_commit(&self, claimed: &[OrderMessage]) -> anyhow::Result<()> {
        if self.lose_commit_users.is_empty() {
            return Ok(());
        }
        let mut lost = self.lost_commits.lock().expect("lock poisoned");
        for m in claimed {
            if self.lose_commit_users.contains(&m.user_id.get())
                && lost.insert(m.ticket.as_str().to_owned())
            {
                anyhow::bail!("chaos: the reply of the commit of {} was lost", m.ticket);
            }
        }
        Ok(())
    }

    /// Kills the process if this commit brings the orders committed to `abort_after_commit`,
    /// after printing which tickets MySQL now holds and which Redis records still say
    /// `processing`.
    fn abort_after_commit(&self, claimed: &[OrderMessage], record_key: impl Fn(&Ticket) -> String) {
        self.abort_after_commit.count(claimed.len(), || {
            let tickets: Vec<&str> = claimed.iter().map(|m| m.ticket.as_str()).collect();
            let records: Vec<String> = claimed.iter().map(|m| record_key(&m.ticket)).collect();
            format!(
                "killing this worker after the commit of {} orders, before their Redis confirm: tickets {} records {}",
                claimed.len(),
                tickets.join(","),
                records.join(",")
            )
        });
    }

    /// Sleeps for the chaos users and says whether this order must fail.
    async fn should_fail(&self, user: u64) -> bool {
        let targeted = self.fail_users.contains(&user);
        if targeted && !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        targeted || (self.fail_rate > 0.0 && rand::random::<f64>() < self.fail_rate)
    }
}

/// An order row MySQL had already for a claimed ticket (a redelivery, or a Redis that came
/// back old).
struct Existing {
    id: u64,
    pay_by_ms: Option<i64>,
    status: OrderStatus,
    cancel_reason: Option<CancelReason>,
}

/// A ticket to confirm: its order id and payment deadline.
type Confirm<'a> = (&'a Ticket, u64, Option<i64>);

/// What became of one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Confirmed {
        order_id: u64,
        /// The payment deadline, when the product has a payment window.
        pay_by_ms: Option<i64>,
        /// MySQL had the order already, and it is paid: Redis follows with `paid.lua`.
        paid: bool,
    },
    Failed {
        reason: FailureReason,
    },
    /// MySQL had the order already, and it was cancelled since (by its buyer or its
    /// deadline): Redis follows with `cancel.lua`. Only a ticket claimed again after the
    /// cancel's commit comes here: a redelivery, or a Redis that came back old.
    Cancelled {
        order_id: u64,
        reason: CancelReason,
    },
    /// Not claimed: already settled, its record expired, or a duplicate within the batch.
    Skipped {
        /// What the claim found; `None` for a duplicate within the batch.
        found: Option<ClaimStatus>,
    },
}

#[derive(Debug, Default)]
pub struct BatchReport {
    pub outcomes: Vec<(Ticket, Outcome)>,
    /// Tickets this call confirmed in Redis (not counting ones confirmed before).
    pub newly_confirmed: u64,
    /// Products that got a unit back in Redis: their sold-out markers must go.
    pub given_back: BTreeMap<ProductId, u64>,
    /// Products where MySQL had no unit for a ticket that Redis reserved: the stores have
    /// diverged, Redis over-counts, and the product must be reconciled.
    pub diverged: BTreeMap<ProductId, u64>,
}

impl BatchReport {
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|(_, o)| pred(o)).count()
    }
}

pub struct Settler {
    pub store: TicketStore,
    pub db: MySqlPool,
    pub chaos: Chaos,
    /// How new orders learn their ids; found out on first use.
    pub ids: OrderIds,
}

/// How a batch learns the ids MySQL gave its new orders.
///
/// With `innodb_autoinc_lock_mode` 0 or 1 (MariaDB's default), the rows of one multi-row
/// `INSERT` get consecutive ids, `auto_increment_increment` apart, starting at the id the
/// server reports: no query needed. With 2 (MySQL 8's default) that is not guaranteed, so
/// the ids are read back by ticket. Reading them back was ~20% of a 500-order transaction
/// (docs/BENCHMARKS.md).
#[derive(Debug, Default)]
pub struct OrderIds {
    /// `Some(increment)` when ids are consecutive, `None` when they must be read back.
    consecutive: tokio::sync::OnceCell<Option<u64>>,
    force_read_back: bool,
}

impl OrderIds {
    /// Always reads the ids back (tests of that path on servers that would not need it).
    pub fn read_back() -> Self {
        Self {
            force_read_back: true,
            ..Self::default()
        }
    }

    async fn step(&self, db: &MySqlPool) -> anyhow::Result<Option<u64>> {
        if self.force_read_back {
            return Ok(None);
        }
        self.consecutive
            .get_or_try_init(|| async {
                let (mode, increment): (i64, i64) = sqlx::query_as(
                    "SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED), CAST(@@auto_increment_increment AS SIGNED)",
                )
                .fetch_one(db)
                .await
                .context("reading the auto-increment settings")?;
                tracing::info!(
                    innodb_autoinc_lock_mode = mode,
                    auto_increment_increment = increment,
                    "order ids {}",
                    if mode <= 1 { "follow the insert" } else { "are read back" }
                );
                anyhow::Ok((mode <= 1 && increment >= 1).then_some(increment as u64))
            })
            .await
            .copied()
    }
}

/// A batch after step 1: the orders this call claimed, and the ones it skipped.
#[derive(Debug, Default)]
pub struct Claimed {
    skipped: Vec<(Ticket, Outcome)>,
    claimed: Vec<OrderMessage>,
    chaos_failed: HashSet<String>,
}

impl Claimed {
    /// The orders this call claimed, which step 2 decides.
    pub fn claimed(&self) -> &[OrderMessage] {
        &self.claimed
    }
}

impl Settler {
    /// Steps 1 to 3 in a row. The worker runs them as a pipeline instead (one batch per step
    /// at a time); both are correct because every step is idempotent and only step 2 decides.
    pub async fn settle(&self, orders: &[OrderMessage]) -> anyhow::Result<BatchReport> {
        let claimed = self.claim(orders).await?;
        let decided = self.persist(&claimed).await?;
        self.finish(&claimed, &decided).await
    }

    /// Step 1: claim in Redis, product by product (one script call each), dropping duplicate
    /// tickets.
    pub async fn claim(&self, orders: &[OrderMessage]) -> anyhow::Result<Claimed> {
        let mut skipped = Vec::new();
        let mut by_product: BTreeMap<ProductId, Vec<&OrderMessage>> = BTreeMap::new();
        let mut seen = HashSet::new();
        for m in orders {
            if seen.insert(m.ticket.as_str()) {
                by_product.entry(m.product_id).or_default().push(m);
            } else {
                skipped.push((m.ticket.clone(), Outcome::Skipped { found: None }));
            }
        }
        let mut claimed = Vec::with_capacity(orders.len());
        for (product, msgs) in &by_product {
            let statuses = self.store.claim(*product, msgs).await?;
            for (m, status) in msgs.iter().zip(statuses) {
                if status == ClaimStatus::Claimed {
                    claimed.push((*m).clone());
                } else {
                    skipped.push((
                        m.ticket.clone(),
                        Outcome::Skipped {
                            found: Some(status),
                        },
                    ));
                }
            }
        }

        // Fault injection happens after the claim, so a test can kill a worker mid-batch.
        let mut chaos_failed = HashSet::new();
        for m in &claimed {
            if self.chaos.should_fail(m.user_id.get()).await {
                chaos_failed.insert(m.ticket.as_str().to_owned());
            }
        }
        Ok(Claimed {
            skipped,
            claimed,
            chaos_failed,
        })
    }

    /// Step 2: decide and persist the claimed orders in one MySQL transaction. Returns one
    /// outcome per claimed order, in order.
    pub async fn persist(&self, claimed: &Claimed) -> anyhow::Result<Vec<Outcome>> {
        if claimed.claimed.is_empty() {
            return Ok(Vec::new());
        }
        let decided = self.write(&claimed.claimed, &claimed.chaos_failed).await?;
        self.chaos
            .abort_after_commit(&claimed.claimed, |t| self.store.ticket_keys(t).ticket(t));
        self.chaos.lose_commit(&claimed.claimed)?;
        Ok(decided)
    }

    /// Step 3: make Redis follow MySQL (confirm, and compensate the failures), given what
    /// step 2 decided.
    pub async fn finish(
        &self,
        claimed: &Claimed,
        decided: &[Outcome],
    ) -> anyhow::Result<BatchReport> {
        let mut report = BatchReport {
            outcomes: claimed.skipped.clone(),
            ..BatchReport::default()
        };
        let claimed = &claimed.claimed;
        let mut confirms: BTreeMap<ProductId, Vec<Confirm>> = BTreeMap::new();
        for (m, outcome) in claimed.iter().zip(decided) {
            if let Outcome::Confirmed {
                order_id,
                pay_by_ms,
                ..
            } = outcome
            {
                confirms
                    .entry(m.product_id)
                    .or_default()
                    .push((&m.ticket, *order_id, *pay_by_ms));
            }
        }
        for (product, list) in &confirms {
            report.newly_confirmed += self.store.confirm(*product, list).await?;
        }
        // Orders MySQL paid or cancelled before this claim: Redis follows MySQL.
        for (m, outcome) in claimed.iter().zip(decided) {
            match outcome {
                Outcome::Confirmed {
                    paid: true,
                    order_id,
                    ..
                } => {
                    self.store
                        .paid(&m.ticket, *order_id, m.user_id.get(), crate::now_ms())
                        .await?;
                }
                Outcome::Cancelled { order_id, reason }
                    if self
                        .store
                        .cancel(&m.ticket, *order_id, *reason, crate::now_ms())
                        .await? =>
                {
                    *report.given_back.entry(m.product_id).or_default() += 1;
                }
                _ => {}
            }
        }
        for (m, outcome) in claimed.iter().zip(decided) {
            let Outcome::Failed { reason } = outcome else {
                continue;
            };
            // MySQL out of stock for a unit Redis reserved: Redis over-counts. Giving the unit
            // back would sell it again and fail the next buyer too, so it is healed instead.
            let give_back = if *reason == FailureReason::OutOfStock {
                *report.diverged.entry(m.product_id).or_default() += 1;
                GiveBack::Heal
            } else {
                GiveBack::Unit
            };
            if self
                .store
                .compensate_with(&m.ticket, *reason, give_back)
                .await?
            {
                *report.given_back.entry(m.product_id).or_default() += 1;
            }
        }
        report.outcomes.extend(
            claimed
                .iter()
                .map(|m| m.ticket.clone())
                .zip(decided.iter().cloned()),
        );
        Ok(report)
    }

    /// The MySQL transaction of [`Self::persist`].
    async fn write(
        &self,
        claimed: &[OrderMessage],
        chaos_failed: &HashSet<String>,
    ) -> anyhow::Result<Vec<Outcome>> {
        let id_step = self.ids.step(&self.db).await?;
        let started = std::time::Instant::now();
        let mut tx = self.db.begin().await.context("starting a transaction")?;

        // Lock the products first, in id order, so concurrent workers queue instead of deadlocking.
        let products: Vec<ProductId> = claimed
            .iter()
            .map(|m| m.product_id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut q = QueryBuilder::<MySql>::new(
            "SELECT id, stock, payment_window_secs FROM products WHERE id IN (",
        );
        let ids: Vec<i64> = products.iter().map(|p| p.as_i64()).collect();
        push_padded(&mut q, &ids);
        q.push(") ORDER BY id FOR UPDATE");
        #[derive(sqlx::FromRow)]
        struct ProductRow {
            id: i64,
            stock: i64,
            payment_window_secs: i64,
        }
        let mut stock: HashMap<i64, i64> = HashMap::new();
        let mut window_ms: HashMap<i64, i64> = HashMap::new();
        for r in q
            .build_query_as::<ProductRow>()
            .fetch_all(&mut *tx)
            .await
            .context("locking products")?
        {
            stock.insert(r.id, r.stock);
            window_ms.insert(r.id, r.payment_window_secs * 1000);
        }
        // Orders of a product with a payment window must be paid by then.
        let now = crate::now_ms();
        let pay_by = |product: i64| match window_ms.get(&product) {
            Some(&w) if w > 0 => Some(now + w),
            _ => None,
        };

        let locked = started.elapsed();
        let tickets: Vec<&str> = claimed.iter().map(|m| m.ticket.as_str()).collect();
        let already_failed: HashMap<String, FailureReason> = {
            #[derive(sqlx::FromRow)]
            struct FailedRow {
                ticket: String,
                reason: String,
            }
            let mut q = QueryBuilder::<MySql>::new(
                "SELECT ticket, reason FROM failed_tickets WHERE ticket IN (",
            );
            push_padded(&mut q, &tickets);
            q.push(")");
            q.build_query_as::<FailedRow>()
                .fetch_all(&mut *tx)
                .await
                .context("reading failed tickets")?
                .into_iter()
                .map(|r| {
                    let reason = FailureReason::parse(&r.reason).with_context(|| {
                        format!("unknown failure reason {:?} in MySQL", r.reason)
                    })?;
                    anyhow::Ok((r.ticket, reason))
                })
                .collect::<anyhow::Result<_>>()?
        };
        // The orders of these (product, user) pairs: who already holds a unit, and which of
        // these tickets are persisted already (a ticket's row has its message's pair). One
        // indexed lookup serves both.
        // A cancelled order frees its buyer, so it holds nothing.
        let mut holders: HashSet<(i64, i64)> = HashSet::new();
        let mut existing: HashMap<String, Existing> = HashMap::new();
        {
            #[derive(sqlx::FromRow)]
            struct OrderRow {
                ticket: String,
                id: i64,
                product_id: i64,
                user_id: i64,
                status: String,
                cancel_reason: Option<String>,
                pay_by_ms: Option<i64>,
            }
            let mut q = QueryBuilder::<MySql>::new(
                "SELECT ticket, id, product_id, user_id, status, cancel_reason, pay_by_ms FROM orders WHERE (product_id, user_id) IN (",
            );
            // Bound, not inlined, and padded like every list (see `push_padded`).
            let pairs: Vec<(i64, i64)> = claimed
                .iter()
                .map(|m| (m.product_id.as_i64(), m.user_id.as_i64()))
                .collect();
            let mut sep = q.separated(", ");
            for (p, u) in padded(&pairs) {
                sep.push("(")
                    .push_bind_unseparated(p)
                    .push_unseparated(", ")
                    .push_bind_unseparated(u)
                    .push_unseparated(")");
            }
            q.push(")");
            for r in q
                .build_query_as::<OrderRow>()
                .fetch_all(&mut *tx)
                .await
                .context("reading the buyers' orders")?
            {
                let status = crate::db::order_status(&r.status)?;
                if status != OrderStatus::Cancelled {
                    holders.insert((r.product_id, r.user_id));
                }
                existing.insert(
                    r.ticket,
                    Existing {
                        id: r.id as u64,
                        pay_by_ms: r.pay_by_ms,
                        status,
                        cancel_reason: r.cancel_reason.as_deref().and_then(CancelReason::parse),
                    },
                );
            }
        }

        let looked_up = started.elapsed();
        // Decide, in message order.
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(claimed.len());
        let mut accepted: Vec<&OrderMessage> = Vec::new();
        let mut sold: BTreeMap<i64, i64> = BTreeMap::new();
        let mut failures: Vec<(&OrderMessage, FailureReason)> = Vec::new();
        for m in claimed {
            let t = m.ticket.as_str();
            let key = (m.product_id.as_i64(), m.user_id.as_i64());
            let fail = |reason: FailureReason| Some(Outcome::Failed { reason });
            let outcome = if let Some(e) = existing.get(t) {
                Some(match e.status {
                    OrderStatus::Cancelled => Outcome::Cancelled {
                        order_id: e.id,
                        reason: e.cancel_reason.unwrap_or(CancelReason::PaymentTimeout),
                    },
                    status => Outcome::Confirmed {
                        order_id: e.id,
                        pay_by_ms: e.pay_by_ms,
                        paid: status == OrderStatus::Paid,
                    },
                })
            } else if let Some(reason) = already_failed.get(t) {
                fail(*reason)
            } else {
                let reason = if chaos_failed.contains(t) {
                    Some(FailureReason::Chaos)
                } else if !stock.contains_key(&key.0) {
                    Some(FailureReason::UnknownProduct)
                } else if holders.contains(&key) {
                    Some(FailureReason::DuplicateUser)
                } else if stock[&key.0] <= 0 {
                    Some(FailureReason::OutOfStock)
                } else {
                    None
                };
                match reason {
                    Some(r) => {
                        failures.push((m, r));
                        fail(r)
                    }
                    None => {
                        *stock.get_mut(&key.0).expect("checked above") -= 1;
                        *sold.entry(key.0).or_default() += 1;
                        holders.insert(key);
                        accepted.push(m);
                        None // filled in after the insert
                    }
                }
            };
            outcomes.push(outcome);
        }

        let mut new_ids: HashMap<String, u64> = HashMap::new();
        if !accepted.is_empty() {
            for chunk in pow2_chunks(&accepted) {
                let mut q = QueryBuilder::<MySql>::new(
                    "INSERT INTO orders (ticket, product_id, user_id, reserved_at_ms, pay_by_ms) ",
                );
                q.push_values(chunk, |mut b, m| {
                    b.push_bind(m.ticket.as_str())
                        .push_bind(m.product_id.as_i64())
                        .push_bind(m.user_id.as_i64())
                        .push_bind(m.reserved_at_ms)
                        .push_bind(pay_by(m.product_id.as_i64()));
                });
                let res = q
                    .build()
                    .execute(&mut *tx)
                    .await
                    .context("inserting orders")?;
                anyhow::ensure!(
                    res.rows_affected() == chunk.len() as u64,
                    "inserted {} of {} orders",
                    res.rows_affected(),
                    chunk.len()
                );
                if let Some(step) = id_step {
                    // The id the server reports is the first row's.
                    let first = res.last_insert_id();
                    for (i, m) in chunk.iter().enumerate() {
                        new_ids.insert(m.ticket.as_str().to_owned(), first + i as u64 * step);
                    }
                }
            }
            for (product, n) in &sold {
                let res = sqlx::query(
                    "UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ?",
                )
                .bind(n)
                .bind(product)
                .bind(n)
                .execute(&mut *tx)
                .await
                .context("decrementing stock")?;
                anyhow::ensure!(
                    res.rows_affected() == 1,
                    "stock of product {product} would go below zero"
                );
            }
        }
        for chunk in pow2_chunks(&failures) {
            let mut q = QueryBuilder::<MySql>::new(
                "INSERT IGNORE INTO failed_tickets (ticket, product_id, user_id, reason) ",
            );
            q.push_values(chunk, |mut b, (m, reason)| {
                b.push_bind(m.ticket.as_str())
                    .push_bind(m.product_id.as_i64())
                    .push_bind(m.user_id.as_i64())
                    .push_bind(reason.as_str());
            });
            q.build()
                .execute(&mut *tx)
                .await
                .context("recording failed tickets")?;
        }
        let written = started.elapsed();
        if id_step.is_none() && !accepted.is_empty() {
            let accepted_tickets: Vec<&str> = accepted.iter().map(|m| m.ticket.as_str()).collect();
            new_ids = ticket_map(
                &mut tx,
                "SELECT ticket, id FROM orders WHERE ticket IN (",
                &accepted_tickets,
            )
            .await
            .context("reading new order ids")?
            .into_iter()
            .map(|(ticket, id)| (ticket, id as u64))
            .collect();
        }
        let read_ids = started.elapsed();
        tx.commit().await.context("committing the batch")?;
        tracing::debug!(
            orders = claimed.len(),
            lock_us = locked.as_micros() as u64,
            lookups_us = (looked_up - locked).as_micros() as u64,
            writes_us = (written - looked_up).as_micros() as u64,
            ids_us = (read_ids - written).as_micros() as u64,
            commit_us = (started.elapsed() - read_ids).as_micros() as u64,
            "batch persisted"
        );

        Ok(claimed
            .iter()
            .zip(outcomes)
            .map(|(m, o)| {
                o.unwrap_or_else(|| Outcome::Confirmed {
                    order_id: new_ids.get(m.ticket.as_str()).copied().unwrap_or_default(),
                    pay_by_ms: pay_by(m.product_id.as_i64()),
                    paid: false,
                })
            })
            .collect())
    }
}

// The statements of a batch are prepared, and sqlx caches 100 of them per connection. Their
// texts must not vary with every batch size: evicting a statement sends COM_STMT_CLOSE, which
// the server does not answer, and since sqlx 0.9.0 leaves Nagle on (transact-rs/sqlx#4335) the
// next packet then waits for the server's delayed ACK, ~40 ms, in the middle of the
// transaction. So every list is padded to a power of two, and every multi-row insert is cut
// into power-of-two chunks: a batch of up to 2^k orders uses at most k + 1 texts of each
// statement (docs/BENCHMARKS.md has the measurements).

/// `values`, then its last value again up to the next power of two. Repeating a value changes
/// nothing in an `IN` list.
fn padded<T: Copy>(values: &[T]) -> impl Iterator<Item = T> + '_ {
    let extra = values.len().next_power_of_two() - values.len();
    values
        .iter()
        .copied()
        .chain(values.last().copied().into_iter().cycle().take(extra))
}

/// Pushes `v1, v2, …` as bound values, padded (see [`padded`]).
pub(crate) fn push_padded<T>(q: &mut QueryBuilder<MySql>, values: &[T])
where
    T: Copy + for<'t> sqlx::Encode<'t, MySql> + sqlx::Type<MySql>,
{
    let mut sep = q.separated(", ");
    for v in padded(values) {
        sep.push_bind(v);
    }
}

/// `items` cut into chunks whose lengths are powers of two, largest first.
fn pow2_chunks<T>(mut items: &[T]) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        if items.is_empty() {
            return None;
        }
        let (chunk, rest) = items.split_at(1 << items.len().ilog2());
        items = rest;
        Some(chunk)
    })
}

/// A ticket and its order's id, as [`ticket_map`] reads them.
#[derive(sqlx::FromRow)]
struct TicketIdRow {
    ticket: String,
    id: i64,
}

async fn ticket_map(
    tx: &mut sqlx::Transaction<'_, MySql>,
    head: &str,
    tickets: &[&str],
) -> Result<HashMap<String, i64>, sqlx::Error> {
    let mut q = QueryBuilder::<MySql>::new(head);
    push_padded(&mut q, tickets);
    q.push(")");
    Ok(q.build_query_as::<TicketIdRow>()
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .map(|r| (r.ticket, r.id))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_padded_to_a_power_of_two_with_their_last_value() {
        assert_eq!(padded(&[7]).collect::<Vec<_>>(), [7]);
        assert_eq!(padded(&[1, 2, 3]).collect::<Vec<_>>(), [1, 2, 3, 3]);
        assert_eq!(padded(&[1, 2, 3, 4]).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(padded(&[1, 2, 3, 4, 5]).count(), 8);
        assert_eq!(padded::<u8>(&[]).count(), 0);
    }

    #[test]
    fn inserts_are_cut_into_power_of_two_chunks_largest_first() {
        let items: Vec<u32> = (0..500).collect();
        let chunks: Vec<&[u32]> = pow2_chunks(&items).collect();
        let lens: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        assert_eq!(lens, [256, 128, 64, 32, 16, 4]);
        assert_eq!(chunks.concat(), items, "every item once, in order");
        assert_eq!(pow2_chunks::<u32>(&[]).count(), 0);
        assert_eq!(pow2_chunks(&[1]).count(), 1);
    }

    #[test]
    fn a_batch_of_up_to_512_orders_uses_at_most_ten_texts_per_statement() {
        let mut list_lens = HashSet::new();
        let mut chunk_lens = HashSet::new();
        for n in 1..=512usize {
            let items: Vec<usize> = (0..n).collect();
            list_lens.insert(padded(&items).count());
            chunk_lens.extend(pow2_chunks(&items).map(|c| c.len()));
        }
        assert_eq!(list_lens.len(), 10);
        assert_eq!(chunk_lens.len(), 10);
    }
}
