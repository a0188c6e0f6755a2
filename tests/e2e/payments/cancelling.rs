//! Cancelling: at the deadline and by the buyer, the unit sold again; a payment that lands
//! after the cancel; a cancel interrupted after its commit; the expiry's locks.

use crate::helpers::*;
use crate::payments::sale::Sale;
use reqwest::StatusCode;
use seckill_shared::now_ms;
use seckill_shared::payments::cancel;
use std::time::Duration;

#[tokio::test]
async fn an_unpaid_order_is_cancelled_at_its_deadline_and_its_unit_sold_again() {
    let sale = Sale::new().await;
    let product = sale.product(1, 2).await;
    let order = sale.confirmed(product, 11).await;
    let ticket = order["ticket"].as_str().unwrap();
    let pay_by = order["pay_by_ms"].as_i64().unwrap();
    let (status, _) = sale.gw.buy(product, 12).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "sold out while the order awaits payment"
    );

    let cancelled = sale.cancelled(ticket, 11).await;
    assert_eq!(cancelled["reason"], "payment_timeout", "{cancelled}");
    let at = cancelled["cancelled_at_ms"].as_i64().unwrap();
    assert!(
        at >= pay_by && at - pay_by < 1500,
        "cancelled {} ms after the deadline",
        at - pay_by
    );
    let (status, body) = sale.pay(ticket, 11, "late").await;
    assert_eq!(
        (status, body["state"].as_str()),
        (StatusCode::CONFLICT, Some("cancelled")),
        "{body}"
    );

    // The unit is on sale again, to someone else.
    let other = sale.buy_when_back(product, 12).await;
    assert_eq!(other["status"], "confirmed", "{other}");
    assert_eq!(sale.env.mysql_stock(product).await, 0);
    assert_eq!(sale.env.redis_stock(product).await, 0);
    // The first buyer was freed: their own order page shows their cancelled ticket.
    let (status, mine) = sale
        .gw
        .get_as(&format!("/v1/seckill/{product}/order"), Some(11))
        .await;
    assert_eq!(
        (status, mine["status"].as_str()),
        (StatusCode::OK, Some("cancelled")),
        "{mine}"
    );
}

#[tokio::test]
async fn a_buyer_cancels_and_the_unit_goes_back_at_once() {
    let sale = Sale::new().await;
    let product = sale.product(1, 60).await;
    let ticket = sale.confirmed_ticket(product, 13).await;
    let (status, body) = sale.cancel(&ticket, 13).await;
    assert_eq!(
        (status, body["status"].as_str(), body["reason"].as_str()),
        (StatusCode::OK, Some("cancelled"), Some("buyer_cancelled")),
        "{body}"
    );
    let (_, polled) = sale
        .gw
        .get_as(&format!("/v1/orders/{ticket}"), Some(13))
        .await;
    assert_eq!(body, polled, "the cancel answers the ticket as a poll does");
    assert_eq!(
        sale.env.redis_stock(product).await,
        1,
        "back in Redis before the answer"
    );
    assert_eq!(sale.env.mysql_stock(product).await, 1);
    // Again: the same answer, no second unit.
    let (status, again) = sale.cancel(&ticket, 13).await;
    assert_eq!(
        (status, again["status"].as_str()),
        (StatusCode::OK, Some("cancelled")),
        "{again}"
    );
    assert_eq!(sale.env.redis_stock(product).await, 1);
    // Someone else buys it; the canceller, freed, may buy again but it is sold out now.
    let other = sale.confirmed(product, 14).await;
    assert_eq!(other["status"], "confirmed");
    let (status, _) = sale.gw.buy(product, 13).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(sale.stocks(product).await, (0, 0));
}

#[tokio::test]
async fn a_payment_that_lands_after_the_cancel_is_refund_due_and_nothing_is_oversold() {
    let sale = Sale::new().await;
    let product = sale.product(1, 2).await;
    let ticket = sale.confirmed_ticket(product, 15).await;
    let (status, paid) = sale.pay(&ticket, 15, "slow").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paid}");
    sale.cancelled(&ticket, 15).await;
    let other = sale.buy_when_back(product, 16).await;
    assert_eq!(other["status"], "confirmed");

    // The provider's success arrives now: the order stays cancelled, the payment is refunded.
    let payment_id = paid["payment_id"].as_str().unwrap();
    let (status, body) = sale.callback(payment_id, "succeeded").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("refund_due")),
        "{body}"
    );
    assert_eq!(sale.payment_status(payment_id).await, "refund_due");
    assert_eq!(sale.ticket(&ticket, 15).await["status"], "cancelled");
    assert_eq!(
        sale.gw
            .metric(r#"seckill_gateway_payments_total{status="refund_due"}"#)
            .await,
        1.0
    );
    // One unit, one live order.
    let live: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status <> 'cancelled'",
    )
    .bind(product.as_i64())
    .fetch_one(&sale.env.db)
    .await
    .unwrap();
    assert_eq!(live, 1);
    assert_eq!(sale.stocks(product).await, (0, 0));
}

#[tokio::test]
async fn a_cancel_interrupted_after_its_commit_gives_its_unit_back_exactly_once() {
    let sale = Sale::new().await;
    let product = sale.product(3, 60).await;
    let mut tickets = vec![];
    for user in 20..23 {
        tickets.push(sale.confirmed_ticket(product, user).await);
    }
    // A worker's expiry round commits the cancels, then crashes before Redis: MySQL has the
    // units back, Redis not yet.
    sqlx::query("UPDATE orders SET pay_by_ms = ? WHERE product_id = ?")
        .bind(now_ms() + 3_600_000)
        .bind(product.as_i64())
        .execute(&sale.env.db)
        .await
        .unwrap();
    let crashed = cancel::cancel_overdue(&sale.env.db, now_ms() + 3_700_000, 100)
        .await
        .unwrap();
    assert_eq!(crashed.len(), 3);
    // Checked while the cancels still look an hour in the future, so the running worker
    // cannot have given the units back yet.
    assert_eq!(sale.stocks(product).await, (3, 0));
    // It committed with a clock an hour ahead; set the cancels to a few seconds ago, past the
    // grace a live round gets to finish its own give-back.
    sqlx::query("UPDATE orders SET cancelled_at_ms = ? WHERE product_id = ?")
        .bind(now_ms() - 5_000)
        .bind(product.as_i64())
        .execute(&sale.env.db)
        .await
        .unwrap();
    // The running worker finds them (`restore_due`) and gives each unit back.
    eventually(
        "the interrupted cancels finished",
        Duration::from_secs(20),
        || async { (sale.env.redis_stock(product).await == 3).then_some(()) },
    )
    .await;
    // Running the give-back again, as a second crashed worker would, changes nothing.
    let again = cancel::give_back(&sale.env.store, &sale.env.db, &crashed, now_ms())
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(sale.env.redis_stock(product).await, 3);
    let due: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE restore_due = 1")
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    assert_eq!(due, 0);
    for (t, user) in tickets.iter().zip(20..) {
        assert_eq!(sale.ticket(t, user).await["status"], "cancelled");
    }
}

/// The expiry takes the product's row before the overdue orders' rows, as a batch and a
/// buyer's cancel do. It used to lock the orders first and the product second: a batch that
/// holds the product's row and reads a redelivered order's row `FOR UPDATE` met it the other
/// way round, and InnoDB rolled one of them back (a deadlock).
#[tokio::test]
async fn the_expiry_locks_the_product_before_the_orders_as_a_batch_does() {
    let sale = Sale::new().await;
    let product = sale.product(3, 60).await;
    let ticket = sale.confirmed_ticket(product, 30).await;
    // A batch: the product's row first.
    let mut batch = sale.env.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(product.as_i64())
        .fetch_optional(&mut *batch)
        .await
        .unwrap();
    // An expiry round with the deadline passed, meanwhile: it waits for a lock. (A pool of
    // its own: waiting for one of the shared pool's connections is not what is tested.)
    use secrecy::ExposeSecret;
    let db = seckill_shared::db::pool(sale.env.settings.mysql.url.expose_secret(), 1).unwrap();
    let expiry =
        tokio::spawn(async move { cancel::cancel_overdue(&db, now_ms() + 3_600_000, 100).await });
    let probe = seckill_shared::db::pool(sale.env.settings.mysql.url.expose_secret(), 1).unwrap();
    eventually(
        "the expiry waits for the product's row",
        Duration::from_secs(10),
        || async {
            // A statement of this test's database on the products' rows, still running: the
            // expiry's lock of them (or, before, its stock update after the orders' locks).
            let waiting: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE DB = DATABASE() AND (INFO LIKE 'SELECT id FROM products WHERE id IN%' \
                 OR INFO LIKE 'UPDATE products SET stock%')",
            )
            .fetch_one(&probe)
            .await
            .unwrap();
            (waiting > 0).then_some(())
        },
    )
    .await;
    // The batch then reads the order's row, as for a redelivered message.
    let order = sqlx::query("SELECT id FROM orders WHERE ticket = ? FOR UPDATE")
        .bind(ticket.as_str())
        .fetch_optional(&mut *batch)
        .await;
    assert!(order.is_ok(), "the batch gets the order's row: {order:?}");
    batch.commit().await.unwrap();
    let cancelled = tokio::time::timeout(Duration::from_secs(10), expiry)
        .await
        .expect("the expiry goes on once the batch commits")
        .unwrap()
        .expect("the expiry was not rolled back");
    assert_eq!(cancelled.len(), 1);
}
