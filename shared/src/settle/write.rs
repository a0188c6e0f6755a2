//! Step 2: the MySQL transaction that decides and persists a batch's claimed orders.

use super::statements::{padded, pow2_chunks, push_padded};
use super::{Outcome, Settler};
use crate::domain::{CancelReason, FailureReason, OrderMessage, OrderStatus, ProductId};
use anyhow::Context;
use sqlx::{MySql, QueryBuilder};
use std::collections::{BTreeMap, HashMap, HashSet};

/// An order row MySQL had already for a claimed ticket (a redelivery, or a Redis that came
/// back old).
struct Existing {
    id: u64,
    pay_by_ms: Option<i64>,
    status: OrderStatus,
    cancel_reason: Option<CancelReason>,
}

impl Settler {
    /// The MySQL transaction of [`Self::persist`].
    pub(super) async fn write(
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
                } else if stock[&key.0] < i64::from(m.quantity) {
                    // All of the order's units, or none.
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
                        let q = i64::from(m.quantity);
                        *stock.get_mut(&key.0).expect("checked above") -= q;
                        *sold.entry(key.0).or_default() += q;
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
                    "INSERT INTO orders (ticket, product_id, user_id, reserved_at_ms, pay_by_ms, traceparent, quantity) ",
                );
                q.push_values(chunk, |mut b, m| {
                    b.push_bind(m.ticket.as_str())
                        .push_bind(m.product_id.as_i64())
                        .push_bind(m.user_id.as_i64())
                        .push_bind(m.reserved_at_ms)
                        .push_bind(pay_by(m.product_id.as_i64()))
                        .push_bind(m.traceparent.as_deref())
                        .push_bind(m.quantity);
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
                "INSERT IGNORE INTO failed_tickets (ticket, product_id, user_id, reason, quantity) ",
            );
            q.push_values(chunk, |mut b, (m, reason)| {
                b.push_bind(m.ticket.as_str())
                    .push_bind(m.product_id.as_i64())
                    .push_bind(m.user_id.as_i64())
                    .push_bind(reason.as_str())
                    .push_bind(m.quantity);
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
