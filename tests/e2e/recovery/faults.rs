//! Faults the settle meets: MySQL out of stock while Redis sells, a hanging ZooKeeper, a sync
//! settle that fails after its commit.

use crate::helpers::*;
use reqwest::StatusCode;
use std::time::Duration;

/// Redis over-counts (its stock is higher than MySQL's): MySQL fails the extra reservations
/// as out of stock. Those units must not go back on sale, or each would fail one buyer after
/// another; the worker heals Redis from MySQL instead.
#[tokio::test]
async fn out_of_stock_in_mysql_heals_redis_instead_of_reselling_the_phantom_unit() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    // Three phantom units in Redis.
    let mut conn = env.store.connection();
    let _: i64 = redis::cmd("INCRBY")
        .arg(env.store.keys(product).stock())
        .arg(3)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut tickets = Vec::new();
    for user in 1..=8 {
        let (status, body) = gw.buy(product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        tickets.push(body["ticket"].as_str().unwrap().to_owned());
    }
    let _worker = env.worker().await;
    let mut reasons = Vec::new();
    for t in &tickets {
        let body = gw.settled(t, Duration::from_secs(60)).await;
        reasons.push(body["reason"].as_str().unwrap_or("confirmed").to_owned());
    }
    reasons.sort();
    assert_eq!(
        reasons,
        [
            "confirmed",
            "confirmed",
            "confirmed",
            "confirmed",
            "confirmed",
            "out_of_stock",
            "out_of_stock",
            "out_of_stock"
        ]
    );
    eventually(
        "Redis to agree with MySQL",
        Duration::from_secs(30),
        || async {
            let c = env.store.counts(product).await.unwrap();
            (c.stock == Some(0) && c.pending == 0 && c.confirmed == 5).then_some(())
        },
    )
    .await;
    assert_eq!(env.mysql_stock(product).await, 0);
    let (status, body) = gw.buy(product, 9).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "no phantom unit is resold: {body}"
    );
}

/// ZooKeeper hangs (a server that accepts connections and never answers). Batches that give
/// units back must not wait for the `"false"` publish: before, each such batch held all three
/// pipeline steps for the 2 s publish timeout.
#[tokio::test]
async fn a_hanging_zookeeper_does_not_stall_the_worker() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 20).await;
    // Accepts connections into its backlog and never answers.
    let blackhole = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let zk_hosts = blackhole.local_addr().unwrap().to_string();
    let _worker = env
        .worker_with(|s| {
            s.zookeeper.hosts = zk_hosts;
            s.chaos.fail_rate = 1.0;
        })
        .await;
    // Warm up: the first order waits for the consumer's first join.
    let (_, body) = gw.buy(product, 1).await;
    gw.settled(body["ticket"].as_str().unwrap(), Duration::from_secs(60))
        .await;

    // Five orders, one batch each, every one failed and given back. With the publish on the
    // settle path that takes at least 5 × 2 s.
    let started = std::time::Instant::now();
    for user in 2..=6 {
        let (status, body) = gw.buy(product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let body = gw
            .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(60))
            .await;
        assert_eq!(body["reason"], "chaos", "{body}");
    }
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "five batches took {took:?} with ZooKeeper hanging"
    );
    assert_eq!(env.redis_stock(product).await, 20, "every unit came back");
}

/// Sync mode: the settle fails right after the MySQL commit (as if its reply was lost). The
/// unit MySQL sold must not go back on sale: the gateway asks MySQL, under the product's row
/// lock, finds the order and answers `201`. Before, it gave the unit back and answered `503`
/// while MySQL kept the order.
#[tokio::test]
async fn a_sync_settle_that_fails_after_the_commit_keeps_the_order_and_the_unit_sold() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.gateway.mode = seckill_shared::GatewayMode::Sync;
            s.chaos.lose_commit_users = "7".into();
        })
        .await;
    let product = env.product(&gw, 3).await;
    let (status, body) = gw.buy(product, 7).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "confirmed", "{body}");
    assert_eq!(env.order_rows(product).await.len(), 1);
    let c = env.store.counts(product).await.unwrap();
    assert_eq!((c.stock, c.pending, c.confirmed), (Some(2), 0, 1), "{c:?}");
    assert_eq!(env.mysql_stock(product).await, 2);
}
