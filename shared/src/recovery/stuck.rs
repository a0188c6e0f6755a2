//! Settling one unsettled ticket through MySQL, when the outcome of its own settle is unknown.

use crate::domain::{FailureReason, Ticket};
use crate::store::TicketStore;
use anyhow::Context;
use sqlx::mysql::MySqlPool;

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
/// stuck in `processing` instead (`SweepAction::Complete`).
pub async fn settle_stuck(
    store: &TicketStore,
    db: &MySqlPool,
    ticket: &Ticket,
    user: u64,
    quantity: u16,
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
            sqlx::query("INSERT INTO failed_tickets (ticket, product_id, user_id, reason, quantity) VALUES (?, ?, ?, ?, ?)")
                .bind(ticket.as_str())
                .bind(ticket.product().as_i64())
                .bind(user as i64)
                .bind(FailureReason::Lost.as_str())
                .bind(quantity)
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
