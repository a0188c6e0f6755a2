//! Recovery paths: stale reservations, stuck claims and Redis data loss.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::settle::Outcome;
use seckill_shared::{now_ms, OrderMessage, Ticket, UserId};
use seckill_worker::Worker;
use std::time::Duration;

fn fast_sweeper(s: &mut seckill_shared::Settings) {
    s.kafka_delivery_timeout_ms = 500;
    s.pending_timeout_ms = 1000;
}

/// A gateway died after reserving and before Kafka took the order.
#[tokio::test]
async fn sweeper_fails_a_reservation_whose_message_never_came_and_a_late_message_changes_nothing() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let user = UserId::new(77).unwrap();
    let ticket = Ticket::generate(product);
    let reserved_at = now_ms();
    env.store.reserve(&ticket, user, reserved_at).await.unwrap();
    assert_eq!(env.redis_stock(product).await, 2);

    let _worker = env.worker_with(fast_sweeper).await;
    let body = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(
        (body["status"].as_str(), body["reason"].as_str()),
        (Some("failed"), Some("expired")),
        "{body}"
    );
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!(
        (counts.stock, counts.pending, counts.buyers),
        (Some(3), 0, 0),
        "{counts:?}"
    );

    // The message turns up after all: the ticket is settled, so nothing is sold.
    let mut s = env.settings.clone();
    s.worker_group = format!("{}-step", s.worker_group);
    let step = Worker::build(s).await.unwrap();
    let report = step
        .process(&[OrderMessage::new(ticket.clone(), user, reserved_at)])
        .await
        .unwrap();
    assert_eq!(
        report.outcomes,
        vec![(
            ticket,
            Outcome::Skipped {
                status: "failed".into()
            }
        )]
    );
    assert!(env.order_rows(product).await.is_empty());
    assert_eq!(env.redis_stock(product).await, 3);
}

/// A worker claimed a ticket, then both the worker and the message were lost.
#[tokio::test]
async fn a_ticket_stuck_in_processing_is_settled_through_mysql() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 2).await;
    let ticket = Ticket::generate(product);
    let order = OrderMessage::new(ticket.clone(), UserId::new(5).unwrap(), now_ms());
    env.store
        .reserve(&ticket, order.user_id, order.reserved_at_ms)
        .await
        .unwrap();
    assert_eq!(
        env.store.claim(product, &[&order]).await.unwrap(),
        vec!["processing"]
    );

    let _worker = env.worker_with(fast_sweeper).await;
    let body = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(
        (body["status"].as_str(), body["reason"].as_str()),
        (Some("failed"), Some("lost")),
        "{body}"
    );
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!((counts.stock, counts.pending), (Some(2), 0));
    assert!(env.order_rows(product).await.is_empty());
}

/// Redis restarts without persistence: reconcile rebuilds the product from MySQL, an order
/// still in Kafka is adopted, and the sale goes on without overselling.
#[tokio::test]
async fn reconcile_rebuilds_redis_from_mysql_after_data_loss() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let first = env.worker().await;
    let mut held = Vec::new();
    for user in 1..=3 {
        let (_, body) = gw.buy(product, user).await;
        gw.settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
            .await;
        held.push(body);
    }
    first.shutdown().await;
    let (status, in_flight) = gw.buy(product, 4).await;
    assert_eq!(status, StatusCode::ACCEPTED);

    // Redis loses everything of this namespace.
    let mut conn = env.store.connection();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("sk:{{{}:*", env.settings.namespace))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    let _: () = redis::cmd("DEL")
        .arg(&keys)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        gw.buy(product, 5).await.0,
        StatusCode::NOT_FOUND,
        "the product is gone from Redis"
    );

    let (status, report) = gw
        .admin_post(
            &format!("/admin/products/{product}/reconcile"),
            serde_json::Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(
        (report["stock_redis"].as_i64(), report["confirmed"].as_i64()),
        (Some(7), Some(3)),
        "{report}"
    );
    let (status, again) = gw.buy(product, 1).await;
    assert_eq!(
        (status, &again["ticket"], again["status"].as_str()),
        (StatusCode::OK, &held[0]["ticket"], Some("confirmed"))
    );

    // The order that was in Kafka during the loss is adopted by the next worker.
    let _second = env.worker().await;
    let ticket = in_flight["ticket"].as_str().unwrap();
    eventually(
        "the in-flight order to be confirmed",
        Duration::from_secs(30),
        || async {
            let (status, body) = gw.get_json(&format!("/v1/orders/{ticket}")).await;
            (status == StatusCode::OK && body["status"] == "confirmed").then_some(())
        },
    )
    .await;
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!(
        (counts.stock, counts.pending, counts.confirmed),
        (Some(6), 0, 4),
        "{counts:?}"
    );

    // The sale goes on to exactly the stock.
    for user in 5..=11 {
        let (status, body) = gw.buy(product, user).await;
        if user <= 10 {
            assert_eq!(status, StatusCode::ACCEPTED, "user {user}: {body}");
            gw.settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
                .await;
        } else {
            assert_eq!(status, StatusCode::CONFLICT);
        }
    }
    assert_eq!(env.order_rows(product).await.len(), 10);
    assert_eq!(
        (
            env.mysql_stock(product).await,
            env.redis_stock(product).await
        ),
        (0, 0)
    );
}
