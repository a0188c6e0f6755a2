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

use crate::domain::{OrderMessage, ProductId, Ticket};
use crate::store::TicketStore;
use anyhow::Context;
use sqlx::mysql::MySqlPool;
use sqlx::{MySql, QueryBuilder, Row};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

/// Fault injection for tests and demos.
#[derive(Debug, Clone, Default)]
pub struct Chaos {
    pub fail_users: HashSet<u64>,
    pub fail_rate: f64,
    pub delay: Duration,
}

impl Chaos {
    pub fn from_settings(s: &crate::Settings) -> Self {
        Self {
            fail_users: s.chaos_fail_users().unwrap_or_default(),
            fail_rate: s.chaos_fail_rate,
            delay: Duration::from_millis(s.chaos_delay_ms),
        }
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

/// What became of one order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Confirmed {
        order_id: u64,
    },
    Failed {
        reason: String,
    },
    /// Not claimed: released, already settled earlier, or a duplicate within the batch.
    Skipped {
        status: String,
    },
}

#[derive(Debug, Default)]
pub struct BatchReport {
    pub outcomes: Vec<(Ticket, Outcome)>,
    /// Tickets this call confirmed in Redis (not counting ones confirmed before).
    pub newly_confirmed: u64,
    /// Products that got a unit back in Redis: their sold-out markers must go.
    pub given_back: BTreeMap<ProductId, u64>,
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
}

impl Settler {
    pub async fn settle(&self, orders: &[OrderMessage]) -> anyhow::Result<BatchReport> {
        let mut report = BatchReport::default();

        // 1. Claim, product by product (one script call each), dropping duplicate tickets.
        let mut by_product: BTreeMap<ProductId, Vec<&OrderMessage>> = BTreeMap::new();
        let mut seen = HashSet::new();
        for m in orders {
            if seen.insert(m.ticket.as_str()) {
                by_product.entry(m.product_id).or_default().push(m);
            } else {
                report.outcomes.push((
                    m.ticket.clone(),
                    Outcome::Skipped {
                        status: "duplicate".into(),
                    },
                ));
            }
        }
        let mut claimed: Vec<&OrderMessage> = Vec::with_capacity(orders.len());
        for (product, msgs) in &by_product {
            let statuses = self.store.claim(*product, msgs).await?;
            for (m, status) in msgs.iter().zip(statuses) {
                if status == "processing" {
                    claimed.push(m);
                } else {
                    report
                        .outcomes
                        .push((m.ticket.clone(), Outcome::Skipped { status }));
                }
            }
        }
        if claimed.is_empty() {
            return Ok(report);
        }

        // Fault injection happens after the claim, so a test can kill a worker mid-batch.
        let mut chaos_failed = HashSet::new();
        for m in &claimed {
            if self.chaos.should_fail(m.user_id.get()).await {
                chaos_failed.insert(m.ticket.as_str());
            }
        }

        // 2. Decide and persist in one transaction.
        let decided = self.persist(&claimed, &chaos_failed).await?;

        // 3. Make Redis follow MySQL.
        let mut confirms: BTreeMap<ProductId, Vec<(&Ticket, u64)>> = BTreeMap::new();
        for (m, outcome) in claimed.iter().zip(&decided) {
            if let Outcome::Confirmed { order_id } = outcome {
                confirms
                    .entry(m.product_id)
                    .or_default()
                    .push((&m.ticket, *order_id));
            }
        }
        for (product, list) in &confirms {
            report.newly_confirmed += self.store.confirm(*product, list).await?;
        }
        for (m, outcome) in claimed.iter().zip(&decided) {
            if let Outcome::Failed { reason } = outcome {
                if self.store.compensate(&m.ticket, reason).await? {
                    *report.given_back.entry(m.product_id).or_default() += 1;
                }
            }
        }
        report
            .outcomes
            .extend(claimed.iter().map(|m| m.ticket.clone()).zip(decided));
        Ok(report)
    }

    /// The MySQL transaction. Returns one outcome per claimed order, in order.
    async fn persist(
        &self,
        claimed: &[&OrderMessage],
        chaos_failed: &HashSet<&str>,
    ) -> anyhow::Result<Vec<Outcome>> {
        let mut tx = self.db.begin().await.context("starting a transaction")?;

        // Lock the products first, in id order, so concurrent workers queue instead of deadlocking.
        let products: Vec<ProductId> = claimed
            .iter()
            .map(|m| m.product_id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut q = QueryBuilder::<MySql>::new("SELECT id, stock FROM products WHERE id IN (");
        let mut sep = q.separated(", ");
        for p in &products {
            sep.push_bind(p.as_i64());
        }
        q.push(") ORDER BY id FOR UPDATE");
        let mut stock: HashMap<i64, i64> = q
            .build()
            .fetch_all(&mut *tx)
            .await
            .context("locking products")?
            .into_iter()
            .map(|r| (r.get::<i64, _>("id"), r.get::<i64, _>("stock")))
            .collect();

        let tickets: Vec<&str> = claimed.iter().map(|m| m.ticket.as_str()).collect();
        let existing = ticket_map(
            &mut tx,
            "SELECT ticket, id FROM orders WHERE ticket IN (",
            &tickets,
        )
        .await
        .context("reading existing orders")?;
        let already_failed: HashMap<String, String> = {
            let mut q = QueryBuilder::<MySql>::new(
                "SELECT ticket, reason FROM failed_tickets WHERE ticket IN (",
            );
            let mut sep = q.separated(", ");
            for t in &tickets {
                sep.push_bind(*t);
            }
            q.push(")");
            q.build()
                .fetch_all(&mut *tx)
                .await
                .context("reading failed tickets")?
                .into_iter()
                .map(|r| (r.get("ticket"), r.get("reason")))
                .collect()
        };
        let mut holders: HashSet<(i64, i64)> = {
            let mut q = QueryBuilder::<MySql>::new(
                "SELECT product_id, user_id FROM orders WHERE (product_id, user_id) IN (",
            );
            // Bound, not inlined: the text then depends only on the batch size, so the
            // prepared statement is reused. Inlined values made a new statement per batch;
            // once sqlx's per-connection cache (100) was full, each batch evicted one, and the
            // eviction's COM_STMT_CLOSE (no reply) held the next packet behind Nagle and the
            // server's delayed ACK: ~40 ms per batch (docs/BENCHMARKS.md).
            let mut sep = q.separated(", ");
            for m in claimed {
                sep.push("(")
                    .push_bind_unseparated(m.product_id.as_i64())
                    .push_unseparated(", ")
                    .push_bind_unseparated(m.user_id.as_i64())
                    .push_unseparated(")");
            }
            q.push(")");
            q.build()
                .fetch_all(&mut *tx)
                .await
                .context("reading buyers")?
                .into_iter()
                .map(|r| (r.get("product_id"), r.get("user_id")))
                .collect()
        };

        // Decide, in message order.
        let mut outcomes: Vec<Option<Outcome>> = Vec::with_capacity(claimed.len());
        let mut accepted: Vec<&OrderMessage> = Vec::new();
        let mut sold: BTreeMap<i64, i64> = BTreeMap::new();
        let mut failures: Vec<(&OrderMessage, &str)> = Vec::new();
        for m in claimed {
            let t = m.ticket.as_str();
            let key = (m.product_id.as_i64(), m.user_id.as_i64());
            let fail = |reason: &str| {
                Some(Outcome::Failed {
                    reason: reason.to_owned(),
                })
            };
            let outcome = if let Some(id) = existing.get(t) {
                Some(Outcome::Confirmed {
                    order_id: *id as u64,
                })
            } else if let Some(reason) = already_failed.get(t) {
                fail(reason)
            } else {
                let reason = if chaos_failed.contains(t) {
                    Some("chaos")
                } else if !stock.contains_key(&key.0) {
                    Some("unknown_product")
                } else if holders.contains(&key) {
                    Some("duplicate_user")
                } else if stock[&key.0] <= 0 {
                    Some("out_of_stock")
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

        if !accepted.is_empty() {
            let mut q = QueryBuilder::<MySql>::new(
                "INSERT INTO orders (ticket, product_id, user_id, reserved_at_ms) ",
            );
            q.push_values(&accepted, |mut b, m| {
                b.push_bind(m.ticket.as_str())
                    .push_bind(m.product_id.as_i64())
                    .push_bind(m.user_id.as_i64())
                    .push_bind(m.reserved_at_ms);
            });
            q.build()
                .execute(&mut *tx)
                .await
                .context("inserting orders")?;
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
        if !failures.is_empty() {
            let mut q = QueryBuilder::<MySql>::new(
                "INSERT IGNORE INTO failed_tickets (ticket, product_id, user_id, reason) ",
            );
            q.push_values(&failures, |mut b, (m, reason)| {
                b.push_bind(m.ticket.as_str())
                    .push_bind(m.product_id.as_i64())
                    .push_bind(m.user_id.as_i64())
                    .push_bind(*reason);
            });
            q.build()
                .execute(&mut *tx)
                .await
                .context("recording failed tickets")?;
        }
        let ids = if accepted.is_empty() {
            HashMap::new()
        } else {
            let accepted_tickets: Vec<&str> = accepted.iter().map(|m| m.ticket.as_str()).collect();
            ticket_map(
                &mut tx,
                "SELECT ticket, id FROM orders WHERE ticket IN (",
                &accepted_tickets,
            )
            .await
            .context("reading new order ids")?
        };
        tx.commit().await.context("committing the batch")?;

        Ok(claimed
            .iter()
            .zip(outcomes)
            .map(|(m, o)| {
                o.unwrap_or_else(|| Outcome::Confirmed {
                    order_id: ids.get(m.ticket.as_str()).copied().unwrap_or_default() as u64,
                })
            })
            .collect())
    }
}

async fn ticket_map(
    tx: &mut sqlx::Transaction<'_, MySql>,
    head: &str,
    tickets: &[&str],
) -> Result<HashMap<String, i64>, sqlx::Error> {
    let mut q = QueryBuilder::<MySql>::new(head);
    let mut sep = q.separated(", ");
    for t in tickets {
        sep.push_bind(*t);
    }
    q.push(")");
    Ok(q.build()
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .map(|r| (r.get("ticket"), r.get("id")))
        .collect())
}
