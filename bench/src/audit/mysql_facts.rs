//! Reads the product's rows from MySQL: its stock, orders, failed tickets and payments.

use super::checks::{MysqlFacts, OrderRow, PaymentRow};
use anyhow::Context;
use seckill_shared::payments::PaymentStatus;
use seckill_shared::{CancelReason, OrderStatus, ProductId};
use sqlx::mysql::MySqlPool;
use sqlx::Row;

/// Whether the schema under audit has `table` (with `column`, when given): a build from
/// before the payment window has no order status and no payments.
async fn schema_has(pool: &MySqlPool, table: &str, column: Option<&str>) -> anyhow::Result<bool> {
    let n: i64 = match column {
        Some(c) => sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?",
        )
        .bind(table)
        .bind(c),
        None => sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = DATABASE() AND table_name = ?",
        )
        .bind(table),
    }
    .fetch_one(pool)
    .await
    .with_context(|| format!("looking for {table} {column:?} in the schema"))?;
    Ok(n > 0)
}

fn order_row(r: &sqlx::mysql::MySqlRow, payment_window: bool) -> anyhow::Result<OrderRow> {
    let mut o = OrderRow::confirmed(
        r.get::<i64, _>("id") as u64,
        r.get::<String, _>("ticket"),
        r.get::<i64, _>("user_id") as u64,
    );
    if !payment_window {
        return Ok(o);
    }
    let status: String = r.get("status");
    o.status = OrderStatus::parse(&status)
        .with_context(|| format!("order {} has unknown status {status:?}", o.id))?;
    o.pay_by_ms = r.get("pay_by_ms");
    o.paid_at_ms = r.get("paid_at_ms");
    o.cancelled_at_ms = r.get("cancelled_at_ms");
    o.cancel_reason = r
        .get::<Option<String>, _>("cancel_reason")
        .map(|c| {
            CancelReason::parse(&c)
                .with_context(|| format!("order {} has unknown cancel_reason {c:?}", o.id))
        })
        .transpose()?;
    o.restore_due = r.get::<i8, _>("restore_due") != 0;
    if let Ok(q) = r.try_get::<u16, _>("quantity") {
        o.quantity = q.max(1);
    }
    Ok(o)
}

pub(super) async fn mysql_facts(
    pool: &MySqlPool,
    product: ProductId,
) -> anyhow::Result<MysqlFacts> {
    // The payment columns only where the schema has them, so older builds can be audited too.
    let (stock, initial_stock): (i64, i64) =
        sqlx::query_as("SELECT stock, initial_stock FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_optional(pool)
            .await
            .context("reading the product")?
            .with_context(|| format!("product {product} is not in MySQL"))?;
    let closed = schema_has(pool, "products", Some("closed_at_ms")).await?
        && sqlx::query_scalar::<_, Option<i64>>("SELECT closed_at_ms FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_one(pool)
            .await
            .context("reading when the sale closed")?
            .is_some();
    let payment_window = schema_has(pool, "orders", Some("status")).await?;
    let buckets: u16 = if schema_has(pool, "products", Some("buckets")).await? {
        sqlx::query_scalar("SELECT buckets FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_one(pool)
            .await
            .context("reading the product's buckets")?
    } else {
        1
    };
    let quantities = schema_has(pool, "orders", Some("quantity")).await?;
    let query = if payment_window && quantities {
        "SELECT id, ticket, user_id, status, pay_by_ms, paid_at_ms, cancelled_at_ms, \
         cancel_reason, restore_due, quantity FROM orders WHERE product_id = ? ORDER BY id"
    } else if payment_window {
        "SELECT id, ticket, user_id, status, pay_by_ms, paid_at_ms, cancelled_at_ms, \
         cancel_reason, restore_due FROM orders WHERE product_id = ? ORDER BY id"
    } else {
        "SELECT id, ticket, user_id FROM orders WHERE product_id = ? ORDER BY id"
    };
    let orders = sqlx::query(query)
        .bind(product.as_i64())
        .fetch_all(pool)
        .await
        .context("reading orders")?
        .iter()
        .map(|r| order_row(r, payment_window))
        .collect::<anyhow::Result<_>>()?;
    let failed_query = if quantities {
        "SELECT ticket, user_id, quantity FROM failed_tickets WHERE product_id = ?"
    } else {
        "SELECT ticket, user_id, 1 AS quantity FROM failed_tickets WHERE product_id = ?"
    };
    let failed: Vec<(String, i64, i64)> = sqlx::query(failed_query)
        .bind(product.as_i64())
        .fetch_all(pool)
        .await
        .context("reading failed tickets")?
        .into_iter()
        .map(|r| {
            let q = r
                .try_get::<u16, _>("quantity")
                .map(i64::from)
                .or_else(|_| r.try_get::<i64, _>("quantity"))
                .unwrap_or(1);
            (r.get("ticket"), r.get("user_id"), q)
        })
        .collect();
    let failed_users = failed.iter().map(|(_, u, _)| *u as u64).collect();
    let mut failed_units = std::collections::BTreeMap::new();
    for (_, u, q) in &failed {
        *failed_units.entry(*u as u64).or_insert(0) += q;
    }
    let failed_tickets = failed.into_iter().map(|(t, _, _)| t).collect();
    let payments = if schema_has(pool, "payments", None).await? {
        // A ticket is `<product>-<hex>`: the prefix finds the product's payments, those of
        // tickets without an order row too.
        sqlx::query(
            "SELECT payment_id, ticket, user_id, status, settled_at_ms FROM payments \
             WHERE ticket LIKE ? ORDER BY created_at_ms, payment_id",
        )
        .bind(format!("{product}-%"))
        .fetch_all(pool)
        .await
        .context("reading payments")?
        .iter()
        .map(|r| {
            let payment_id: String = r.get("payment_id");
            let status: String = r.get("status");
            Ok(PaymentRow {
                status: PaymentStatus::parse(&status).with_context(|| {
                    format!("payment {payment_id} has unknown status {status:?}")
                })?,
                payment_id,
                ticket: r.get("ticket"),
                user_id: r.get::<i64, _>("user_id") as u64,
                settled_at_ms: r.get("settled_at_ms"),
            })
        })
        .collect::<anyhow::Result<_>>()?
    } else {
        vec![]
    };
    Ok(MysqlFacts {
        stock,
        initial_stock,
        orders,
        failed_tickets,
        failed_users,
        failed_units,
        payments,
        buckets,
        closed,
    })
}
