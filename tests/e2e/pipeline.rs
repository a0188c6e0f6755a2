//! The buy path end to end: gateway → Redis → Kafka → worker → MySQL.

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

const SETTLE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn bought_unit_is_confirmed_and_stock_drops_in_mysql_and_redis() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = env.product(&gw, 5).await;

    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(token(42))
        .json(&json!({"user_id": 42}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["status"], "pending");
    assert_eq!(body["product_id"], product.get());
    assert_eq!(body["user_id"], 42);
    assert_eq!(
        location,
        format!("/v1/orders/{}", body["ticket"].as_str().unwrap())
    );

    gw.owns(body["ticket"].as_str().unwrap(), 42);
    let settled = gw.settled(body["ticket"].as_str().unwrap(), SETTLE).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert!(settled["order_id"].as_u64().is_some());

    let rows = env.order_rows(product).await;
    assert_eq!(
        rows,
        vec![(body["ticket"].as_str().unwrap().to_owned(), 42)]
    );
    assert_eq!(env.mysql_stock(product).await, 4);
    assert_eq!(env.redis_stock(product).await, 4);

    let (status, admin) = gw.admin_get(&format!("/admin/products/{product}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (
            admin["stock_db"].as_i64(),
            admin["stock_redis"].as_i64(),
            admin["pending"].as_i64(),
            admin["confirmed"].as_i64()
        ),
        (Some(4), Some(4), Some(0), Some(1)),
        "{admin}"
    );
}

#[tokio::test]
async fn stock_n_for_n_plus_k_users_confirms_exactly_n() {
    let (n, k) = (20u64, 7u64);
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = env.product(&gw, n as i64).await;

    let buys = futures::future::join_all((1..=n + k).map(|user| gw.buy(product, user))).await;
    let accepted: Vec<_> = buys
        .iter()
        .filter(|(s, _)| *s == StatusCode::ACCEPTED)
        .collect();
    let sold_out: Vec<_> = buys
        .iter()
        .filter(|(s, _)| *s == StatusCode::CONFLICT)
        .collect();
    assert_eq!(accepted.len() as u64, n, "{buys:?}");
    assert_eq!(sold_out.len() as u64, k);
    assert!(sold_out.iter().all(|(_, b)| b["error"] == "sold_out"));

    for (_, body) in &accepted {
        let t = gw.settled(body["ticket"].as_str().unwrap(), SETTLE).await;
        assert_eq!(t["status"], "confirmed", "{t}");
    }
    assert_eq!(env.order_rows(product).await.len() as u64, n);
    assert_eq!(env.mysql_stock(product).await, 0);
    assert_eq!(env.redis_stock(product).await, 0);
}

#[tokio::test]
async fn same_user_twice_gets_the_same_ticket_and_one_order() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = env.product(&gw, 3).await;

    let (first, a) = gw.buy(product, 7).await;
    assert_eq!(first, StatusCode::ACCEPTED);
    let (second, b) = gw.buy(product, 7).await;
    assert_eq!(second, StatusCode::OK, "{b}");
    assert_eq!(a["ticket"], b["ticket"]);

    gw.settled(a["ticket"].as_str().unwrap(), SETTLE).await;
    let (third, c) = gw.buy(product, 7).await;
    assert_eq!(third, StatusCode::OK);
    assert_eq!(
        (c["ticket"].clone(), c["status"].clone()),
        (a["ticket"].clone(), json!("confirmed"))
    );
    assert_eq!(env.order_rows(product).await.len(), 1);
    assert_eq!(env.redis_stock(product).await, 2);
}

/// The seed's scenario: a failed order gives its unit back, and the other gateway's marker
/// goes at once, so the unit is sold to someone else.
#[tokio::test]
async fn failed_order_gives_the_unit_back_and_drops_the_other_gateways_marker() {
    let env = TestEnv::new().await;
    // Markers would expire after a minute: only ZooKeeper can drop them in time.
    let a = env
        .gateway_with(|s| s.gateway.sold_out_ttl_ms = 60_000)
        .await;
    let b = env
        .gateway_with(|s| s.gateway.sold_out_ttl_ms = 60_000)
        .await;
    let chaos = |s: &mut seckill_shared::Settings| {
        s.chaos.fail_users = "1".into();
        s.chaos.delay_ms = 1500;
    };
    let _w1 = env.worker_with(chaos).await;
    let _w2 = env.worker_with(chaos).await;
    b.wait_for_zookeeper().await;
    let product = env.product(&a, 1).await;

    let (status, one) = a.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{one}");
    let (status, two) = b.buy(product, 2).await;
    assert_eq!(status, StatusCode::CONFLICT, "{two}");
    assert_eq!(
        b.metric("seckill_gateway_sold_out_markers").await,
        1.0,
        "B's marker is set"
    );
    let (status, _) = b.buy(product, 4).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(
        b.metric("seckill_gateway_sold_out_marker_hits_total").await >= 1.0,
        "the marker answered"
    );

    let failed = a.settled(one["ticket"].as_str().unwrap(), SETTLE).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["reason"], "chaos");
    let seen_failed = Instant::now();
    eventually("B's marker to drop", Duration::from_secs(2), || async {
        (b.metric("seckill_gateway_sold_out_markers").await == 0.0).then_some(())
    })
    .await;
    assert!(seen_failed.elapsed() < Duration::from_secs(2));
    assert_eq!(
        b.metric("seckill_gateway_sold_out_marker_drops_total{cause=\"zk_false\"}")
            .await,
        1.0
    );

    let (status, three) = b.buy(product, 3).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{three}");
    let confirmed = b.settled(three["ticket"].as_str().unwrap(), SETTLE).await;
    assert_eq!(confirmed["status"], "confirmed", "{confirmed}");
    assert_eq!(
        env.order_rows(product)
            .await
            .iter()
            .map(|r| r.1)
            .collect::<Vec<_>>(),
        vec![3]
    );
    assert_eq!(
        (
            env.mysql_stock(product).await,
            env.redis_stock(product).await
        ),
        (0, 0)
    );
}

#[tokio::test]
async fn kafka_unreachable_answers_503_and_leaves_redis_unchanged() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.kafka.brokers = "127.0.0.1:1".into(); // nothing listens there
            s.kafka.delivery_timeout_ms = 1000;
        })
        .await;
    let product = env.product(&gw, 5).await;

    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(token(9))
        .json(&json!({"user_id": 9}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(res.headers().contains_key("retry-after"));
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["error"], "unavailable");

    let counts = env.store.counts(product).await.unwrap();
    assert_eq!(
        (counts.stock, counts.pending, counts.buyers),
        (Some(5), 0, 0),
        "{counts:?}"
    );
    assert_eq!(
        env.store
            .buyer(product, seckill_shared::UserId::new(9).unwrap())
            .await
            .unwrap(),
        None
    );
    // MySQL knows of the failure too, so that a message that reached Kafka after all, and is
    // delivered after Redis lost the record, fails instead of selling the unit to a buyer
    // told 503.
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT user_id, reason FROM failed_tickets WHERE product_id = ?")
            .bind(product.as_i64())
            .fetch_all(&env.db)
            .await
            .unwrap();
    assert_eq!(rows, vec![(9, "kafka_unavailable".to_owned())]);
}

#[tokio::test]
async fn ticket_status_falls_back_to_mysql_when_the_redis_copy_is_gone() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = env.product(&gw, 2).await;
    let (_, body) = gw.buy(product, 5).await;
    let ticket = ticket_of(&body);
    let confirmed = gw.settled(ticket.as_str(), SETTLE).await;

    // Expire the fast copy by hand.
    let mut conn = env.store.connection();
    let _: () = redis::cmd("DEL")
        .arg(env.store.keys(product).ticket(&ticket))
        .query_async(&mut conn)
        .await
        .unwrap();
    let (status, from_mysql) = gw.get_json(&format!("/v1/orders/{ticket}")).await;
    assert_eq!(status, StatusCode::OK);
    // The same ticket, status and order; only the Redis copy knows the confirmation time.
    let mut expected = confirmed.clone();
    expected.as_object_mut().unwrap().remove("confirmed_at_ms");
    assert_eq!(from_mysql, expected);

    let unknown = seckill_shared::Ticket::generate(product);
    let (status, body) = gw.get_as(&format!("/v1/orders/{unknown}"), Some(5)).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_ticket"))
    );
}

#[tokio::test]
async fn sale_window_and_unknown_products_are_refused() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let create = |body| gw.admin_post("/admin/products", body);
    let (_, later) =
        create(json!({"name": "later", "stock": 1, "starts_at": "2999-01-01T00:00:00Z"})).await;
    let (_, over) = create(json!({"name": "over", "stock": 1, "starts_at": "2000-01-01T00:00:00Z", "ends_at": "2001-01-01T00:00:00Z"})).await;
    for id in [&later["id"], &over["id"]] {
        let (status, _) = gw
            .admin_post(
                &format!("/admin/products/{id}/preload"),
                serde_json::Value::Null,
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let later = seckill_shared::ProductId::new(later["id"].as_u64().unwrap()).unwrap();
    let over = seckill_shared::ProductId::new(over["id"].as_u64().unwrap()).unwrap();
    assert_eq!(
        gw.buy(later, 1).await,
        (
            StatusCode::FORBIDDEN,
            json!({"error": "sale_not_started", "message": "the sale has not started"})
        )
    );
    assert_eq!(
        gw.buy(over, 1).await,
        (
            StatusCode::FORBIDDEN,
            json!({"error": "sale_ended", "message": "the sale has ended"})
        )
    );
    let (status, body) = gw
        .buy(seckill_shared::ProductId::new(999_999).unwrap(), 1)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_product"))
    );
    // A product in MySQL that was never preloaded is not for sale either.
    let (_, fresh) = create(json!({"name": "fresh", "stock": 1})).await;
    let fresh = seckill_shared::ProductId::new(fresh["id"].as_u64().unwrap()).unwrap();
    assert_eq!(gw.buy(fresh, 1).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn sync_mode_confirms_inside_the_request() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| s.gateway.mode = seckill_shared::GatewayMode::Sync)
        .await;
    let product = env.product(&gw, 1).await;

    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["status"], "confirmed");
    assert!(body["order_id"].as_u64().is_some());
    assert_eq!(env.order_rows(product).await.len(), 1);
    let (status, retry) = gw.buy(product, 1).await;
    assert_eq!(
        (status, &retry["ticket"]),
        (StatusCode::OK, &body["ticket"]),
        "a retry returns the held ticket"
    );
    assert_eq!(gw.buy(product, 2).await.0, StatusCode::CONFLICT);
    assert_eq!(
        (
            env.mysql_stock(product).await,
            env.redis_stock(product).await
        ),
        (0, 0)
    );
}

#[tokio::test]
async fn health_reports_each_dependency() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    gw.wait_for_zookeeper().await;
    let (status, body) = gw.get_json("/healthz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for dep in ["redis", "mysql", "kafka", "zookeeper"] {
        assert_eq!(body["dependencies"][dep]["ok"], true, "{dep}: {body}");
    }
    let down = env
        .gateway_with(|s| s.redis.url = "redis://127.0.0.1:1/".into())
        .await;
    let (status, body) = down.get_json("/healthz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["dependencies"]["redis"]["ok"], false, "{body}");
    assert_eq!(body["dependencies"]["mysql"]["ok"], true, "{body}");
    let (status, body) = down
        .buy(seckill_shared::ProductId::new(1).unwrap(), 1)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable"))
    );
}

/// `/livez` touches no dependency: it answers at once with every one of them down, while
/// `/readyz` answers 503 and names each.
#[tokio::test]
async fn livez_needs_no_dependency_and_readyz_names_each_one_down() {
    let env = TestEnv::new().await;
    let gw = env
        .gateway_with(|s| {
            s.redis.url = "redis://127.0.0.1:1/".into();
            s.mysql.url = "mysql://seckill:seckill@127.0.0.1:1/seckill".into();
            s.kafka.brokers = "127.0.0.1:1".into();
            s.zookeeper.hosts = "127.0.0.1:1".into();
        })
        .await;
    let t0 = Instant::now();
    let (status, body) = gw.get_json("/livez").await;
    assert_eq!((status, body), (StatusCode::OK, json!({"status": "ok"})));
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    let (status, body) = gw.get_json("/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    for dep in ["redis", "mysql", "kafka", "zookeeper"] {
        assert_eq!(body["dependencies"][dep]["ok"], false, "{dep}: {body}");
    }
    // The open answer names what is down, not the dependency's own error (its address, the
    // driver's text); the admin sees that.
    for dep in ["redis", "mysql", "kafka"] {
        let error = body["dependencies"][dep]["error"]
            .as_str()
            .unwrap_or_default();
        assert!(
            ["unreachable", "timed out"].contains(&error),
            "{dep}: {body}"
        );
    }
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");
    let res = gw
        .http
        .get(format!("{}/healthz", gw.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    let admin: serde_json::Value = res.json().await.unwrap();
    assert_ne!(
        admin["dependencies"]["redis"]["error"], body["dependencies"]["redis"]["error"],
        "the admin sees the dependency's own error: {admin}"
    );

    // The worker, with Redis down (it cannot start without MySQL and Kafka).
    let mut ws = env.settings.clone();
    ws.redis.url = "redis://127.0.0.1:1/".into();
    let worker = seckill_worker::Worker::build(ws).await.unwrap();
    let base = format!("http://127.0.0.1:{}", worker.port());
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(worker.run_until_stopped(stop.clone()));
    let http = reqwest::Client::new();
    let livez = eventually("the worker's /livez", Duration::from_secs(10), || async {
        http.get(format!("{base}/livez")).send().await.ok()
    })
    .await;
    assert_eq!(livez.status(), StatusCode::OK);
    let res = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["dependencies"]["redis"]["ok"], false, "{body}");
    assert_eq!(body["dependencies"]["mysql"]["ok"], true, "{body}");
    stop.cancel();
    task.await.unwrap().unwrap();
}
