//! Every documented status is produced by some request, and every answer matches the document.
//! The payments' and the waiting room's requests are in `payment_statuses.rs` and
//! `queue_statuses.rs`.

use crate::helpers::token as buyer;
use crate::helpers::*;
use crate::openapi::payment_statuses::payment_statuses;
use crate::openapi::queue_statuses::queue_statuses;
use crate::openapi::recorder::Recorder;
use crate::openapi::spec::Spec;
use crate::openapi::stream_statuses::stream_statuses;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::Duration;

#[tokio::test]
async fn every_documented_status_is_produced_and_every_answer_matches_the_document() {
    let env = TestEnv::new().await;
    // Two buys per user, then 429.
    let gw = env
        .gateway_with(|s| {
            s.gateway.rate_limit_burst = 2;
            s.gateway.rate_limit_per_user_per_sec = 0.05;
        })
        .await;
    // Sync mode confirms a buy in the request, and this one has a payment provider.
    let (_provider, provider_url) = Provider::start().await;
    let sync = env
        .gateway_with(|s| {
            s.gateway.mode = seckill_shared::GatewayMode::Sync;
            s.payment.provider_url = provider_url.clone();
            s.payment.callback_url = "http://127.0.0.1:1/v1/payments/callback".into();
            s.payment.webhook_secret = WEBHOOK_SECRET.into();
        })
        .await;
    let redis_down = env
        .gateway_with(|s| s.redis.url = "redis://127.0.0.1:1/".into())
        .await;
    let mysql_down = env
        .gateway_with(|s| {
            s.mysql.url = "mysql://seckill:seckill@127.0.0.1:1/nothing".into();
            s.payment.webhook_secret = WEBHOOK_SECRET.into();
        })
        .await;
    // One buyer request per second per client address.
    let limited = env
        .gateway_with(|s| s.gateway.rate_limit_per_address_per_sec = 1)
        .await;
    // One wrong admin token per minute per client address.
    let locked = env
        .gateway_with(|s| s.admin.auth_failures_per_min = 1)
        .await;
    gw.wait_for_zookeeper().await;
    let r = Recorder {
        spec: Spec::fetch(&gw).await,
        http: reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(2))
            .build()
            .unwrap(),
        seen: Mutex::default(),
    };
    let t = Some(ADMIN_TOKEN);
    // Buyers' tokens.
    let tokens = [1, 2, 3, 4, 5, 9].map(buyer);
    let [u1, u2, u3, u4, u5, u9] = tokens.each_ref().map(|t| Some(t.as_str()));
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(5000));
    use Method as M;

    // Admin.
    let (s, created) = r
        .json(
            &gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "a", "stock": 5}),
        )
        .await;
    assert_eq!(s, 201);
    let p = created["id"].as_u64().unwrap();
    r.json(
        &gw,
        M::POST,
        "/admin/products",
        t,
        json!({"name": "", "stock": 1}),
    )
    .await;
    r.json(
        &gw,
        M::POST,
        "/admin/products",
        None,
        json!({"name": "a", "stock": 1}),
    )
    .await;
    r.json(
        &gw,
        M::POST,
        "/admin/products",
        Some("wrong"),
        json!({"name": "a", "stock": 1}),
    )
    .await;
    r.send(
        &gw,
        M::POST,
        "/admin/products",
        t,
        Some("application/json"),
        Some(big.clone()),
    )
    .await;
    r.send(
        &gw,
        M::POST,
        "/admin/products",
        t,
        Some("text/plain"),
        Some("{}".into()),
    )
    .await;
    for sub in ["", "/preload", "/reconcile"] {
        let m = if sub.is_empty() { M::GET } else { M::POST };
        let good = format!("/admin/products/{p}{sub}");
        r.send(&gw, m.clone(), &good, None, None, None).await;
        r.send(&gw, m.clone(), &good, Some("wrong"), None, None)
            .await;
        r.send(
            &gw,
            m.clone(),
            &format!("/admin/products/abc{sub}"),
            t,
            None,
            None,
        )
        .await;
        r.send(
            &gw,
            m.clone(),
            &format!("/admin/products/424242{sub}"),
            t,
            None,
            None,
        )
        .await;
    }
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{p}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    assert_eq!(
        r.send(&gw, M::GET, &format!("/admin/products/{p}"), t, None, None)
            .await
            .0,
        200
    );

    // Buy.
    let buy = format!("/v1/seckill/{p}");
    let (s, first) = r.json(&gw, M::POST, &buy, u1, json!({"user_id": 1})).await;
    assert_eq!(s, 202, "{first}");
    assert_eq!(r.json(&gw, M::POST, &buy, u1, json!({})).await.0, 200);
    assert_eq!(
        r.json(&gw, M::POST, &buy, u1, json!({"user_id": 1}))
            .await
            .0,
        429
    );
    r.json(&gw, M::POST, "/v1/seckill/abc", u2, json!({"user_id": 2}))
        .await;
    r.json(
        &gw,
        M::POST,
        "/v1/seckill/999999",
        u2,
        json!({"user_id": 2}),
    )
    .await;
    r.send(&gw, M::POST, &buy, u2, Some("application/json"), Some(big))
        .await;
    r.send(
        &gw,
        M::POST,
        &buy,
        u2,
        Some("text/plain"),
        Some("{}".into()),
    )
    .await;
    // No token, a bad one, or a body naming another user.
    let (s, body) = r
        .json(&gw, M::POST, &buy, None, json!({"user_id": 2}))
        .await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    let (s, body) = r
        .json(&gw, M::POST, &buy, Some("not.a.jwt"), json!({"user_id": 2}))
        .await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    let (s, body) = r.json(&gw, M::POST, &buy, u2, json!({"user_id": 3})).await;
    assert_eq!((s, body["error"].as_str()), (403, Some("user_mismatch")));
    r.send(&gw, M::GET, &buy, None, None, None).await; // 405
    r.send(&gw, M::GET, "/nowhere", None, None, None).await; // 404
    let (_, later) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "later", "stock": 1, "starts_at": "2999-01-01T00:00:00Z"}),
        )
        .await;
    let later = later["id"].as_u64().unwrap();
    gw.admin_post(&format!("/admin/products/{later}/preload"), Value::Null)
        .await;
    let (s, body) = r
        .json(
            &gw,
            M::POST,
            &format!("/v1/seckill/{later}"),
            u2,
            json!({"user_id": 2}),
        )
        .await;
    assert_eq!((s, body["error"].as_str()), (403, Some("sale_not_started")));
    // Sync mode: 201, then sold out.
    let (_, one) = gw
        .admin_post("/admin/products", json!({"name": "one", "stock": 1}))
        .await;
    let one = one["id"].as_u64().unwrap();
    gw.admin_post(&format!("/admin/products/{one}/preload"), Value::Null)
        .await;
    let one = format!("/v1/seckill/{one}");
    assert_eq!(
        r.json(&sync, M::POST, &one, u3, json!({"user_id": 3}))
            .await
            .0,
        201
    );
    assert_eq!(
        r.json(&sync, M::POST, &one, u4, json!({"user_id": 4}))
            .await
            .0,
        409
    );

    // Orders: a ticket answers its owner only.
    let ticket = first["ticket"].as_str().unwrap();
    let mine = format!("/v1/orders/{ticket}");
    assert_eq!(r.send(&gw, M::GET, &mine, u1, None, None).await.0, 200);
    let (s, body) = r.send(&gw, M::GET, &mine, u2, None, None).await;
    assert_eq!((s, body["error"].as_str()), (404, Some("unknown_ticket")));
    let (s, body) = r.send(&gw, M::GET, &mine, None, None, None).await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    r.send(&gw, M::GET, "/v1/orders/nope", u1, None, None).await;
    let unknown = format!("/v1/orders/{p}-{}", "0".repeat(32));
    let (s, body) = r.send(&gw, M::GET, &unknown, u1, None, None).await;
    assert_eq!((s, body["error"].as_str()), (404, Some("unknown_ticket")));

    // The caller's own ticket for a product.
    let my = format!("/v1/seckill/{p}/order");
    let (s, body) = r.send(&gw, M::GET, &my, u1, None, None).await;
    assert_eq!((s, &body["ticket"]), (200, &first["ticket"]), "{body}");
    let (s, body) = r
        .send(&gw, M::GET, &format!("{my}?user_id=1"), u1, None, None)
        .await;
    assert_eq!((s, &body["ticket"]), (200, &first["ticket"]), "{body}");
    let (s, body) = r.send(&gw, M::GET, &my, u5, None, None).await;
    assert_eq!((s, body["error"].as_str()), (404, Some("no_order")));
    let (s, body) = r
        .send(&gw, M::GET, &format!("{my}?user_id=2"), u1, None, None)
        .await;
    assert_eq!((s, body["error"].as_str()), (403, Some("user_mismatch")));
    let (s, body) = r.send(&gw, M::GET, &my, None, None, None).await;
    assert_eq!((s, body["error"].as_str()), (401, Some("unauthenticated")));
    for bad in [
        format!("{my}?user_id=abc"),
        format!("{my}?other=1"),
        "/v1/seckill/abc/order".into(),
    ] {
        let (s, body) = r.send(&gw, M::GET, &bad, u1, None, None).await;
        assert_eq!(
            (s, body["error"].as_str()),
            (400, Some("bad_request")),
            "{bad}"
        );
    }

    // The per-address limit, on every buyer endpoint, before the token is looked at.
    for (m, path) in [
        (M::POST, buy.clone()),
        (M::GET, mine.clone()),
        (M::GET, my.clone()),
    ] {
        eventually(
            &format!("{m} {path} to be over the per-address limit"),
            Duration::from_secs(10),
            || async {
                let (s, body) = if m == M::POST {
                    r.json(&limited, m.clone(), &path, None, json!({})).await
                } else {
                    r.send(&limited, m.clone(), &path, None, None, None).await
                };
                (s == 429).then(|| assert_eq!(body["error"], "rate_limited", "{body}"))
            },
        )
        .await;
    }

    // Redis loses a product on sale (its keys are gone): its buys, and the polls of a ticket
    // only Kafka holds, get 503 with Retry-After while the gateway rebuilds it.
    let lost = env.product(&gw, 5).await;
    let (s, pending) = gw.buy(lost, 101).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{pending}");
    env.lose_redis_keys(&format!("{lost}}}:*")).await;
    let (s, body) = r
        .json(
            &gw,
            M::POST,
            &format!("/v1/seckill/{lost}"),
            Some(&buyer(102)),
            json!({"user_id": 102}),
        )
        .await;
    assert_eq!(s, 503, "{body}");
    let in_kafka = format!("/v1/orders/{}", pending["ticket"].as_str().unwrap());
    let (s, body) = r
        .send(&gw, M::GET, &in_kafka, Some(&buyer(101)), None, None)
        .await;
    assert_eq!(s, 503, "{body}");

    payment_statuses(&r, &gw, &sync, &limited, &mysql_down, t).await;
    queue_statuses(&r, &gw, &limited, &redis_down, t, p).await;
    stream_statuses(&r, &env, &gw, &sync, &redis_down, &mysql_down, &limited, t).await;

    // The product list and the dashboard's overview.
    for path in ["/admin/products", "/admin/overview"] {
        assert_eq!(r.send(&gw, M::GET, path, t, None, None).await.0, 200);
        let bad = format!("{path}?limit=0");
        assert_eq!(r.send(&gw, M::GET, &bad, t, None, None).await.0, 400);
        assert_eq!(r.send(&gw, M::GET, path, None, None, None).await.0, 401);
        let wrong = Some("wrong");
        assert_eq!(r.send(&gw, M::GET, path, wrong, None, None).await.0, 403);
        assert_eq!(
            r.send(&mysql_down, M::GET, path, t, None, None).await.0,
            503
        );
    }

    // Past its wrong admin tokens, an address gets 429 on every admin route, right token or not.
    let wrong = Some("wrong");
    assert_eq!(
        r.send(&locked, M::GET, "/admin/products", wrong, None, None)
            .await
            .0,
        403
    );
    assert_eq!(
        r.send(&locked, M::GET, "/admin/products", wrong, None, None)
            .await
            .0,
        429
    );
    let new_product = json!({"name": "a", "stock": 1});
    assert_eq!(
        r.json(&locked, M::POST, "/admin/products", t, new_product)
            .await
            .0,
        429
    );
    for (m, path) in [
        (M::GET, "/admin/products".to_owned()),
        (M::GET, "/admin/overview".to_owned()),
        (M::GET, format!("/admin/products/{p}")),
        (M::POST, format!("/admin/products/{p}/preload")),
        (M::POST, format!("/admin/products/{p}/reconcile")),
    ] {
        assert_eq!(
            r.send(&locked, m, &path, t, None, None).await.0,
            429,
            "{path}"
        );
    }

    // Operations, and the dashboard's page (it holds no data, and asks for the token).
    for path in [
        "/healthz",
        "/readyz",
        "/livez",
        "/metrics",
        "/openapi.json",
        "/admin/dashboard",
        "/admin/dashboard/app.js",
        "/admin/dashboard/style.css",
    ] {
        assert_eq!(
            r.send(&gw, M::GET, path, None, None, None).await.0,
            200,
            "{path}"
        );
    }

    // Dependencies down: 503 everywhere they are needed.
    let (admin_p, preload_p, reconcile_p) = (
        format!("/admin/products/{p}"),
        format!("/admin/products/{p}/preload"),
        format!("/admin/products/{p}/reconcile"),
    );
    futures::join!(
        r.json(&redis_down, M::POST, &buy, u9, json!({"user_id": 9})),
        r.send(&redis_down, M::GET, &unknown, u9, None, None),
        r.send(&redis_down, M::GET, &my, u9, None, None),
        r.send(&redis_down, M::GET, "/healthz", None, None, None),
        r.send(&redis_down, M::GET, "/readyz", None, None, None),
        r.json(
            &mysql_down,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "a", "stock": 1})
        ),
        r.send(&mysql_down, M::GET, &admin_p, t, None, None),
        r.send(&mysql_down, M::POST, &preload_p, t, None, None),
        r.send(&mysql_down, M::POST, &reconcile_p, t, None, None),
    );
    assert_eq!(
        r.send(
            &gw,
            M::POST,
            &format!("/admin/products/{p}/reconcile"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );

    // Every documented status was produced, except the unexpected-error 500s.
    let seen = r.seen.lock().unwrap().clone();
    let missing: Vec<_> = r
        .spec
        .documented()
        .into_iter()
        .filter(|k| k.2 != 500 && !seen.contains(k))
        .collect();
    assert!(
        missing.is_empty(),
        "documented but never produced: {missing:?}"
    );
    assert_eq!(StatusCode::OK, gw.get_json("/livez").await.0);
}
