//! Rate limiting and admission on the buy path.

use crate::helpers::*;
use redis::AsyncCommands;
use reqwest::StatusCode;
use seckill_gateway::rate_limit::RateLimiter;
use seckill_shared::UserId;
use serde_json::json;
use std::time::{Duration, Instant};

async fn buy_raw(
    gw: &TestGateway,
    product: impl std::fmt::Display,
    user: u64,
) -> reqwest::Response {
    gw.http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(token(user))
        .json(&json!({ "user_id": user }))
        .send()
        .await
        .unwrap()
}

/// The bucket reads back what it wrote (a fraction in exponent form too), a refused buy leaves
/// it as it was, a damaged one (or a key of another type) counts as full, and a refill rate so slow that the bucket would outlive Redis's expiry range still
/// works: its expiry is capped, not written as a number Redis cannot read.
#[tokio::test]
async fn the_bucket_survives_odd_values_and_a_tiny_rate() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.gateway.rate_limit_per_user_per_sec = 1e-17;
            s.gateway.rate_limit_burst = 2;
        })
        .await;
    let (first, second) = (env.product(&gw, 5).await, env.product(&gw, 5).await);
    let key = RateLimiter::key(&env.settings.common.namespace, UserId::new(7).unwrap());
    let mut conn = env.store.connection();

    // burst / rate is 2 × 10^20 ms, past what Redis takes as an expiry: capped at 2^31 − 1 ms.
    assert_eq!(gw.buy(first, 7).await.0, StatusCode::ACCEPTED);
    let ttl: i64 = conn.pttl(&key).await.unwrap();
    assert!((2_000_000_000..=2_147_483_647).contains(&ttl), "PTTL {ttl}");
    let left: String = conn.get(&key).await.unwrap();
    assert!(left.starts_with("1 "), "one token left: {left:?}");

    // A hundred-thousandth of a token, as Lua writes such a number: no token.
    let (secs, micros): (String, String) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let now_ms = secs.parse::<i64>().unwrap() * 1000 + micros.parse::<i64>().unwrap() / 1000;
    let _: () = conn.set(&key, format!("1e-05 {now_ms}")).await.unwrap();
    assert_eq!(
        buy_raw(&gw, second, 7).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // A refused buy writes nothing: the bucket still counts from when it was written.
    let kept: String = conn.get(&key).await.unwrap();
    assert_eq!(kept, format!("1e-05 {now_ms}"));

    // Damaged: read as a full bucket, and rewritten whole; a count that is no number (nan)
    // too.
    let _: () = conn.set(&key, "garbage").await.unwrap();
    assert_eq!(gw.buy(second, 7).await.0, StatusCode::ACCEPTED);
    let left: String = conn.get(&key).await.unwrap();
    assert!(left.starts_with("1 "), "rewritten: {left:?}");
    let nan = env.product(&gw, 5).await;
    let _: () = conn.set(&key, format!("nan {now_ms}")).await.unwrap();
    assert_eq!(gw.buy(nan, 7).await.0, StatusCode::ACCEPTED);
    let left: String = conn.get(&key).await.unwrap();
    assert!(left.starts_with("1 "), "rewritten: {left:?}");

    // Another type at the key (one server reads it with MGET, a cluster with GET): the same,
    // never an error that would lock the buyer out.
    let third = env.product(&gw, 5).await;
    let _: () = conn.del(&key).await.unwrap();
    let _: () = conn.hset(&key, "f", "v").await.unwrap();
    assert_eq!(gw.buy(third, 7).await.0, StatusCode::ACCEPTED);
    let left: String = conn.get(&key).await.unwrap();
    assert!(left.starts_with("1 "), "replaced: {left:?}");
}

/// The bucket is in Redis: what a user spends on one gateway is gone on the other.
#[tokio::test]
async fn a_user_over_the_burst_gets_429_with_retry_after_on_every_gateway() {
    let env = TestEnv::new().await;
    // Three buys at once, then one every two seconds.
    let limits = |s: &mut seckill_shared::Settings| {
        s.gateway.rate_limit_per_user_per_sec = 0.5;
        s.gateway.rate_limit_burst = 3;
    };
    let a = env.gateway_with(limits).await;
    let b = env.gateway_with(limits).await;
    let product = env.product(&a, 10).await;
    let other = env.product(&a, 10).await;

    assert_eq!(a.buy(product, 7).await.0, StatusCode::ACCEPTED);
    assert_eq!(a.buy(product, 7).await.0, StatusCode::OK);
    assert_eq!(b.buy(product, 7).await.0, StatusCode::OK);
    // A gateway with a bucket of its own would still let these through.
    for gw in [&b, &a] {
        let res = buy_raw(gw, other, 7).await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let retry: u64 = res.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=2).contains(&retry), "Retry-After {retry}");
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["error"], "rate_limited", "{body}");
        assert!(body["message"].is_string());
    }
    // The limit runs before the reservation: nothing was reserved on the other product.
    let counts = env.store.counts(other).await.unwrap();
    assert_eq!((counts.stock, counts.buyers), (Some(10), 0), "{counts:?}");
    // Per user: another user is not limited.
    assert_eq!(b.buy(product, 8).await.0, StatusCode::ACCEPTED);
    assert_eq!(
        b.metric("seckill_gateway_requests_total{outcome=\"429\",route=\"buy\"}")
            .await,
        1.0
    );

    // The bucket expires once it would be full again: burst / rate + 1 s.
    let key = RateLimiter::key(&env.settings.common.namespace, UserId::new(7).unwrap());
    let mut conn = env.store.connection();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!((1..=7000).contains(&ttl), "PTTL {key} = {ttl}");

    // A token comes back after Retry-After.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(b.buy(other, 7).await.0, StatusCode::ACCEPTED);

    // A damaged count below zero is no debt: the buyer waits for one token, not for ever.
    let third = env.product(&a, 10).await;
    let (secs, micros): (String, String) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let now_ms = secs.parse::<i64>().unwrap() * 1000 + micros.parse::<i64>().unwrap() / 1000;
    let _: () = conn.set(&key, format!("-1e300 {now_ms}")).await.unwrap();
    let res = buy_raw(&a, third, 7).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["retry-after"], "2");
}

#[tokio::test]
async fn rate_limit_zero_turns_it_off() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.gateway.rate_limit_per_user_per_sec = 0.0;
            s.gateway.rate_limit_burst = 1;
        })
        .await;
    let product = env.product(&gw, 1).await;
    for _ in 0..5 {
        assert!(gw.buy(product, 3).await.0.is_success());
    }
}

/// Past `max_in_flight`, a buy is refused at once with 503 instead of waiting; the local
/// sold-out marker still answers 409 without taking a place.
#[tokio::test]
async fn past_max_in_flight_a_buy_is_refused_at_once() {
    let env = TestEnv::new().await;
    // Kafka never answers, so a buy holds its place for the whole delivery timeout.
    let gw = env
        .gateway_with(|s| {
            s.gateway.max_in_flight = 1;
            s.kafka.brokers = "127.0.0.1:1".into();
            s.kafka.delivery_timeout_ms = 1500;
            s.gateway.sold_out_ttl_ms = 60_000;
        })
        .await;
    gw.wait_for_zookeeper().await;
    let product = env.product(&gw, 5).await;
    let gone = env.product(&gw, 0).await;
    assert_eq!(
        gw.buy(gone, 5).await.0,
        StatusCode::CONFLICT,
        "sets the marker"
    );
    assert_eq!(gw.metric("seckill_gateway_sold_out_markers").await, 1.0);
    assert_eq!(gw.metric("seckill_gateway_max_in_flight").await, 1.0);

    let slow = tokio::spawn({
        let url = format!("{}/v1/seckill/{product}", gw.base);
        let http = gw.http.clone();
        async move {
            let res = http
                .post(url)
                .bearer_auth(token(1))
                .json(&json!({"user_id": 1}))
                .send()
                .await
                .unwrap();
            (res.status(), res.json::<serde_json::Value>().await.unwrap())
        }
    });
    eventually(
        "the slow buy to take the place",
        Duration::from_secs(5),
        || async { (gw.metric("seckill_gateway_in_flight").await == 1.0).then_some(()) },
    )
    .await;
    // Reserved in Redis and handed to Kafka, whose report never comes.
    eventually(
        "the slow buy to await Kafka's report",
        Duration::from_secs(5),
        || async { (gw.metric("seckill_gateway_awaiting_kafka").await == 1.0).then_some(()) },
    )
    .await;

    let t0 = Instant::now();
    let res = buy_raw(&gw, product, 2).await;
    assert!(t0.elapsed() < Duration::from_millis(500), "refused at once");
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(res.headers()["retry-after"], "1");
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"], "unavailable", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("capacity"),
        "{body}"
    );
    // The marker comes first and needs no place.
    assert_eq!(gw.buy(gone, 6).await.0, StatusCode::CONFLICT);

    let (status, body) = slow.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body["message"].as_str().unwrap().contains("Kafka"),
        "{body}"
    );
    assert_eq!(gw.metric("seckill_gateway_in_flight").await, 0.0);
    assert_eq!(gw.metric("seckill_gateway_awaiting_kafka").await, 0.0);
    assert_eq!(
        gw.metric("seckill_gateway_requests_total{outcome=\"overloaded\",route=\"buy\"}")
            .await,
        1.0
    );
    assert_eq!(
        gw.metric("seckill_gateway_requests_total{outcome=\"sold_out_marker\",route=\"buy\"}")
            .await,
        1.0
    );
    // Nothing was reserved, and the place is free again.
    assert_eq!(env.redis_stock(product).await, 5);
    let (status, body) = gw.buy(product, 3).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body["message"].as_str().unwrap().contains("Kafka"),
        "admitted: {body}"
    );
}

/// On one Redis server the buy takes its token inside the reservation script: no separate
/// rate-limit call (on a cluster, one per buy). Either way a product in buckets, whose first
/// buy on a gateway is asked again in the right bucket, costs one token, not two.
#[tokio::test]
async fn the_token_is_taken_once_per_buy_and_in_the_reservation_on_one_server() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.gateway.rate_limit_per_user_per_sec = 0.1;
            s.gateway.rate_limit_burst = 1;
        })
        .await;
    // Created and loaded through another gateway, so this one has not learnt the bucket count.
    let admin = env.gateway().await;
    let (status, body) = admin
        .admin_post(
            "/admin/products",
            json!({"name": "hot", "stock": 10, "buckets": 4}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let product = body["id"].as_u64().unwrap();
    let (status, body) = admin
        .admin_post(
            &format!("/admin/products/{product}/preload"),
            serde_json::Value::Null,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A buyer who does not live in bucket 0: this gateway first asks bucket 0, learns the
    // product has 4 buckets, and asks the buyer's own.
    let user = (1..)
        .find(|u| seckill_shared::home_bucket(UserId::new(*u).unwrap(), 4) != 0)
        .unwrap();
    let res = buy_raw(&gw, product, user).await;
    assert_eq!(res.status(), StatusCode::ACCEPTED, "one token, burst 1");
    let res = buy_raw(&gw, product, user).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);

    let separate = gw
        .metric("seckill_gateway_latency_seconds_count{step=\"rate_limit\"}")
        .await;
    let single = env.store.connection().is_single_server();
    assert_eq!(
        separate,
        if single { 0.0 } else { 2.0 },
        "single server: {single}"
    );
}
