//! A buyer buys again while holding a ticket whose gateway died before it was located.

use crate::helpers::*;
use crate::recovery::sweeper::fast_sweeper;
use reqwest::StatusCode;
use seckill_shared::{now_ms, UserId};
use std::time::Duration;

/// A gateway reserved a unit and died before Kafka took the order; its buyer buys again on
/// another gateway and is answered `200` with the ticket they hold. That answer is a promise:
/// the order is published again (and located) before it, so a worker confirms it. It used to
/// stay without a message, and the sweeper failed it (`expired`) after that `200`.
#[tokio::test]
async fn a_buyer_who_buys_again_after_their_gateway_died_keeps_the_ticket() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let user = UserId::new(81).unwrap();
    // Reserved long enough ago that any publish of it is over: no message, no location.
    let (ticket, r) = env
        .store
        .reserve(product, user, now_ms() - 10_000, false)
        .await
        .unwrap();
    assert_eq!(r, seckill_shared::reservation::Reservation::Reserved);
    let (status, body) = gw.buy(product, user.get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ticket"], ticket.as_str());
    assert!(
        env.store.location(&ticket).await.unwrap().is_some(),
        "located"
    );
    let _worker = env.worker_with(fast_sweeper).await;
    let body = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(body["status"], "confirmed", "{body}");
}

/// The same buy again, with a sweeper that had read the held ticket just before it: `pending`
/// and no location, so it decided to expire it. The buy again publishes and locates the
/// order and answers `200`; the sweeper's script then runs on the ticket and must leave it
/// alone. It used to fail it (`expired`) after that `200`, and the worker's claim then
/// skipped its message.
#[tokio::test]
async fn a_sweeper_that_read_no_location_before_a_buy_again_leaves_the_ticket() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let user = UserId::new(82).unwrap();
    let (ticket, _) = env
        .store
        .reserve(product, user, now_ms() - 10_000, false)
        .await
        .unwrap();
    // The sweeper's read: pending, no location anywhere: it will expire the ticket.
    let read = env.store.ticket(&ticket).await.unwrap().unwrap();
    assert_eq!(read.state, seckill_shared::store::RecordStatus::Pending);
    assert_eq!(read.location, None);
    assert_eq!(env.store.location(&ticket).await.unwrap(), None);
    // The buyer buys again meanwhile.
    let (status, body) = gw.buy(product, user.get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ticket"], ticket.as_str());
    // The sweeper's expire, as it decided from its read.
    let expired =
        seckill_shared::recovery::expire(&env.store, &env.db, &ticket, user.get(), 1, now_ms())
            .await
            .unwrap();
    assert_eq!(expired, None, "the ticket answered 200 is left alone");
    let _worker = env.worker_with(fast_sweeper).await;
    let body = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(body["status"], "confirmed", "{body}");
}

/// A buyer buys again at once, on another gateway, while the gateway of their first request
/// dies before Kafka took the order: the held ticket is young, without a location. The `200`
/// is a promise, so it waits until the order is located, or, once no publish of it can still
/// be under way, publishes it again. It used to answer `200` at once with nothing in Kafka,
/// and the sweeper later failed the ticket `expired` (chaos scenario 13, herd: 2 of 202).
#[tokio::test]
async fn a_buy_again_while_the_first_gateway_dies_keeps_the_ticket() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| s.kafka.delivery_timeout_ms = 500)
        .await;
    let product = env.product(&gw, 3).await;
    let user = UserId::new(83).unwrap();
    // Just reserved, by a gateway that dies now: no message, no location.
    let (ticket, _) = env
        .store
        .reserve(product, user, now_ms(), false)
        .await
        .unwrap();
    let (status, body) = gw.buy(product, user.get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ticket"], ticket.as_str());
    assert!(
        env.store.location(&ticket).await.unwrap().is_some(),
        "its order is in Kafka before the 200"
    );
    let _worker = env.worker_with(fast_sweeper).await;
    let body = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(body["status"], "confirmed", "{body}");
}

/// As above, with a pending timeout (3 s) shorter than a publish can take (delivery timeout
/// 2 s, twice over and 1.5 s more), and the sweeper running: the buy again publishes the order
/// again before the sweeper would fail the ticket. Before, it waited 5.5 s, the sweeper failed
/// the ticket `expired` at 3 s, and the buyer was answered `200` with a failed ticket (chaos
/// scenario 13, herd, on one server: 1 of 201 promises).
#[tokio::test]
async fn a_buy_again_publishes_before_the_sweeper_fails_the_held_ticket() {
    let env = TestEnv::new().await;
    let timeouts = |s: &mut seckill_shared::Settings| {
        s.kafka.delivery_timeout_ms = 2000;
        s.worker.pending_timeout_ms = 3000;
    };
    let gw = env.gateway_with(timeouts).await;
    let product = env.product(&gw, 3).await;
    let _worker = env.worker_with(timeouts).await;
    let user = UserId::new(84).unwrap();
    let (ticket, _) = env
        .store
        .reserve(product, user, now_ms(), false)
        .await
        .unwrap();
    let (status, body) = gw.buy(product, user.get()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["ticket"], ticket.as_str());
    assert_ne!(
        body["status"], "failed",
        "a 200 for a failed ticket: {body}"
    );
    let body = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(body["status"], "confirmed", "{body}");
}

/// A buy again whose publish Kafka refuses is answered `503`, as a new buy is, and a `503`
/// leaves no unit with the buyer: the held ticket is released (its unit back, the buyer free
/// to buy) and failed in MySQL, so that a message that reached Kafka after all is failed by
/// the worker that gets it. It used to leave the ticket pending: such a message was confirmed
/// for a buyer told 503 (found by the lifecycle model).
#[tokio::test]
async fn a_buy_again_that_kafka_refuses_gives_the_unit_back() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.kafka.brokers = "127.0.0.1:1".into(); // nothing listens there
            s.kafka.delivery_timeout_ms = 1000;
        })
        .await;
    let product = env.product(&gw, 3).await;
    let user = UserId::new(84).unwrap();
    // Held, old enough that any publish of it is over: no message, no location.
    let (ticket, _) = env
        .store
        .reserve(product, user, now_ms() - 10_000, false)
        .await
        .unwrap();
    let (status, body) = gw.buy(product, user.get()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let record = env.store.ticket(&ticket).await.unwrap().unwrap();
    assert_eq!(record.state, seckill_shared::store::RecordStatus::Failed);
    assert_eq!(record.reason.as_deref(), Some("kafka_unavailable"));
    assert_eq!(env.store.stock(product).await.unwrap(), Some(3));
    assert_eq!(env.store.buyer(product, user).await.unwrap(), None);
    let row: Option<String> =
        sqlx::query_scalar("SELECT reason FROM failed_tickets WHERE ticket = ?")
            .bind(ticket.as_str())
            .fetch_optional(&env.db)
            .await
            .unwrap();
    assert_eq!(row.as_deref(), Some("kafka_unavailable"));
}
