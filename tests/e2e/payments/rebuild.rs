//! A product without a window, and a rebuild after Redis lost a sale with a window.

use crate::helpers::*;
use crate::payments::sale::Sale;
use reqwest::StatusCode;
use seckill_shared::now_ms;
use seckill_shared::payments::cancel;
use serde_json::{json, Value};
use std::time::Duration;

#[tokio::test]
async fn a_product_without_a_window_sells_final_orders_as_before() {
    let sale = Sale::new().await;
    let product = sale.env.product(&sale.gw, 1).await;
    let order = sale.confirmed(product, 30).await;
    assert!(order.get("pay_by_ms").is_none(), "{order}");
    let ticket = order["ticket"].as_str().unwrap();
    let (status, body) = sale.pay(ticket, 30, "k").await;
    assert_eq!(
        (status, body["state"].as_str()),
        (StatusCode::CONFLICT, Some("confirmed")),
        "{body}"
    );
    let (status, body) = sale.cancel(ticket, 30).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // Bad terms are refused.
    for bad in [
        json!({"price": -1}),
        json!({"currency": "eur"}),
        json!({"payment_window_secs": 604801}),
        json!({"price": 1.5}),
    ] {
        let mut b = json!({"name": "x", "stock": 1});
        b.as_object_mut()
            .unwrap()
            .extend(bad.as_object().unwrap().clone());
        let (status, body) = sale.gw.admin_post("/admin/products", b).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
}

#[tokio::test]
async fn a_rebuild_after_redis_lost_the_sale_keeps_paid_cancelled_and_every_unit_once() {
    let sale = Sale::new().await;
    let product = sale.product(4, 60).await;
    let mut t = vec![];
    for user in 40..44 {
        t.push(sale.confirmed_ticket(product, user).await);
    }
    // 40 pays, 41 cancels, 42's order is cancelled by an expiry that crashed after its commit
    // (its unit is back in MySQL, not yet in Redis), 43 waits to pay.
    let (_, paid) = sale.pay(&t[0], 40, "k").await;
    sale.callback(paid["payment_id"].as_str().unwrap(), "succeeded")
        .await;
    assert_eq!(sale.cancel(&t[1], 41).await.0, StatusCode::OK);
    sqlx::query("UPDATE orders SET pay_by_ms = 0 WHERE ticket = ?")
        .bind(&t[2])
        .execute(&sale.env.db)
        .await
        .unwrap();
    // Stop the expiry from finishing it: the cancel is committed as of a moment ago. Every
    // test's worker runs an expiry round every 100 ms over the whole database, so one of them
    // may cancel it first and finish it, restore and all (or this call may take another
    // test's overdue order too): what follows must hold either way.
    let crashed = cancel::cancel_overdue(&sale.env.db, now_ms(), 100)
        .await
        .unwrap();
    if !crashed.iter().any(|c| c.ticket.as_str() == t[2]) {
        eprintln!("a worker's expiry round took 42's order before this test could");
        eventually("42's order cancelled", Duration::from_secs(10), || async {
            let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE ticket = ?")
                .bind(&t[2])
                .fetch_one(&sale.env.db)
                .await
                .unwrap();
            (status == "cancelled").then_some(())
        })
        .await;
    }
    // Redis loses everything of the sale, then it is rebuilt from MySQL.
    sale.env.lose_redis_keys(&format!("{product}}}*")).await;
    let (status, body) = sale
        .gw
        .admin_post(&format!("/admin/products/{product}/reconcile"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Whatever the expiry's restore round does now, 41's and 42's units are back once each.
    eventually(
        "no cancel left to restore",
        Duration::from_secs(20),
        || async {
            let due: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE restore_due = 1")
                .fetch_one(&sale.env.db)
                .await
                .unwrap();
            (due == 0).then_some(())
        },
    )
    .await;
    assert_eq!(sale.stocks(product).await, (2, 2));
    assert_eq!(sale.ticket(&t[0], 40).await["status"], "paid");
    let b = sale.ticket(&t[1], 41).await;
    assert_eq!(
        (b["status"].as_str(), b["reason"].as_str()),
        (Some("cancelled"), Some("buyer_cancelled")),
        "{b}"
    );
    assert_eq!(sale.ticket(&t[2], 42).await["status"], "cancelled");
    assert_eq!(sale.ticket(&t[3], 43).await["status"], "confirmed");
    // The holders still hold (a second buy answers their ticket); the two units sell once each.
    let (status, again) = sale.gw.buy(product, 43).await;
    assert_eq!(
        (status, again["ticket"].as_str()),
        (StatusCode::OK, Some(t[3].as_str())),
        "{again}"
    );
    for user in [50, 51] {
        sale.confirmed(product, user).await;
    }
    let (status, _) = sale.gw.buy(product, 52).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(sale.stocks(product).await, (0, 0));
}
