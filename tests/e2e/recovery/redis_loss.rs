//! Redis loses its data: the gateway rebuilds the product, mid-herd too, and a product opened by
//! `reconcile` is rebuilt.

use crate::helpers::*;
use reqwest::StatusCode;
use std::time::Duration;

/// Redis restarts without persistence while an order waits in Kafka with no worker running.
/// Buys get `503` (not `404`) while the gateway rebuilds the product by itself; the rebuild
/// waits until a worker has read the order that was in Kafka, so that order keeps its unit,
/// and the sale goes on to exactly the stock.
#[tokio::test]
async fn after_a_redis_loss_the_gateway_rebuilds_the_product_and_the_order_in_kafka_keeps_its_unit()
{
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

    env.lose_redis_keys("*").await;
    let (status, body) = gw.buy(product, 5).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable")),
        "a product MySQL knows is being rebuilt: {body}"
    );
    assert_eq!(gw.buy(product, 5).await.0, StatusCode::SERVICE_UNAVAILABLE);

    // The rebuild waits for a worker to read the order that was in Kafka.
    let _second = env.worker().await;
    let ticket = in_flight["ticket"].as_str().unwrap();
    let body = gw.settled(ticket, Duration::from_secs(60)).await;
    assert_eq!(body["status"], "confirmed", "{body}");
    // Polling as buyer 1 spends its rate-limit tokens while the rebuild runs: a `429` means
    // only that, so the poll waits for the next token as it waits out a `503`.
    let (status, again) = eventually(
        "buys to be served again",
        Duration::from_secs(60),
        || async {
            let (status, body) = gw.buy(product, 1).await;
            (status != StatusCode::SERVICE_UNAVAILABLE && status != StatusCode::TOO_MANY_REQUESTS)
                .then_some((status, body))
        },
    )
    .await;
    assert_eq!(
        (status, &again["ticket"], again["status"].as_str()),
        (StatusCode::OK, &held[0]["ticket"], Some("confirmed")),
        "a buyer who already holds a unit keeps it"
    );
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
            let body = gw
                .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
                .await;
            assert_eq!(body["status"], "confirmed", "{body}");
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

/// The scenario-8 mechanism: Redis is lost in the middle of a herd, while orders are in
/// Kafka, in workers' batches and being confirmed, and buys keep coming. Every buyer who got a
/// `202` ends confirmed, the sale sells exactly its stock, and the stores agree.
#[tokio::test]
async fn a_redis_loss_in_the_middle_of_a_herd_breaks_no_promise() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let stock = 100;
    let product = env.product(&gw, stock).await;
    let _w1 = env.worker().await;
    let _w2 = env.worker().await;

    let accepted = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let unavailable = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut herd = Vec::new();
    for user in 1..=300u64 {
        let (gw, mine, busy) = (gw.clone(), accepted.clone(), unavailable.clone());
        herd.push(tokio::spawn(async move {
            // Each buyer retries a 503 until the product answers.
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            loop {
                let (status, body) = gw.buy(product, user).await;
                match status {
                    StatusCode::ACCEPTED | StatusCode::OK => {
                        mine.lock()
                            .unwrap()
                            .push(body["ticket"].as_str().unwrap().to_owned());
                        return;
                    }
                    StatusCode::CONFLICT => return,
                    StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS => {
                        busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        assert!(
                            std::time::Instant::now() < deadline,
                            "user {user}: still 503"
                        );
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    other => panic!("user {user}: {other} {body}"),
                }
            }
        }));
        if user == 60 {
            // A third of the herd in, and some units sold, Redis loses everything.
            eventually("some buys accepted", Duration::from_secs(30), || async {
                (accepted.lock().unwrap().len() >= 10).then_some(())
            })
            .await;
            env.lose_redis_keys("*").await;
        }
    }
    for h in herd {
        h.await.unwrap();
    }
    assert!(
        unavailable.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "the loss hit the sale: some buys were answered 503 while the product was rebuilt"
    );
    let tickets = accepted.lock().unwrap().clone();
    let mut confirmed = 0;
    for t in &tickets {
        let body = gw.settled(t, Duration::from_secs(60)).await;
        assert_eq!(
            body["status"], "confirmed",
            "a 202 must mean a unit: {body}"
        );
        confirmed += 1;
    }
    let mut distinct = tickets.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len() as i64,
        stock,
        "exactly the stock was promised"
    );
    assert_eq!(confirmed as i64, stock);
    assert_eq!(env.order_rows(product).await.len() as i64, stock);
    assert_eq!(env.mysql_stock(product).await, 0);
    // Redis agrees, once a gateway or a worker's sweeper has found the loss (a gateway that
    // marked the product sold out before the loss answers 409 from its marker meanwhile).
    eventually("the stores to agree", Duration::from_secs(30), || async {
        let c = env.store.counts(product).await.unwrap();
        (c.stock == Some(0) && c.pending == 0 && c.confirmed == stock).then_some(())
    })
    .await;
}

/// A product opened by a reconcile alone (no preload) counts as loaded: when Redis then loses
/// it, buys get `503` and it is rebuilt, instead of `404 unknown_product` for good.
#[tokio::test]
async fn a_product_opened_by_reconcile_is_rebuilt_after_a_redis_loss() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            serde_json::json!({"name": "reconciled item", "stock": 5}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let product = seckill_shared::ProductId::new(body["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(
            &format!("/admin/products/{product}/reconcile"),
            serde_json::Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let _worker = env.worker().await;
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    gw.settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    env.lose_redis_keys(&format!("{product}}}*")).await;
    let body = eventually("the product rebuilt", Duration::from_secs(90), || async {
        let (status, body) = gw.buy(product, 2).await;
        // 503 while it is rebuilt, and 429 for the buyer's own retries meanwhile.
        assert!(
            [
                StatusCode::ACCEPTED,
                StatusCode::SERVICE_UNAVAILABLE,
                StatusCode::TOO_MANY_REQUESTS
            ]
            .contains(&status),
            "{status}: {body}"
        );
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await;
    gw.settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
        .await;
    assert_eq!(env.mysql_stock(product).await, 3);
}
