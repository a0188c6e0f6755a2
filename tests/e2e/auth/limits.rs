//! The per-address limit comes before the token; too many wrong admin tokens from an address
//! lock it out of `/admin`.

use crate::auth::calls::buy_as;
use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::Settings;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[tokio::test]
async fn the_per_address_limit_answers_429_before_the_token_is_looked_at() {
    let env = TestEnv::new().await;
    let per_sec = 3;
    let gw = env
        .gateway_with(|s| s.gateway.rate_limit_per_address_per_sec = per_sec)
        .await;
    let product = env.product(&gw, 5).await;
    let path = format!("/v1/seckill/{product}");

    // A burst of garbage, each request claiming to come from elsewhere: no proxy is trusted,
    // so X-Forwarded-For changes nothing.
    let started = Instant::now();
    let mut answers = Vec::new();
    for i in 0..20 {
        let res = gw
            .http
            .post(format!("{}{path}", gw.base))
            .bearer_auth(format!("garbage-{i}"))
            .header("x-forwarded-for", format!("203.0.113.{i}"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let retry_after = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = res.json().await.unwrap();
        answers.push((status, retry_after, body));
    }
    let elapsed = started.elapsed();
    let statuses: Vec<u16> = answers.iter().map(|a| a.0.as_u16()).collect();
    let unauthenticated = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(
        unauthenticated + limited,
        answers.len(),
        "only 401 and 429: {statuses:?}"
    );
    // The bucket holds `per_sec` requests and refills at `per_sec` a second.
    assert!(
        statuses[..per_sec as usize].iter().all(|s| *s == 401),
        "{statuses:?}"
    );
    let refilled = (elapsed.as_secs_f64() * per_sec as f64).ceil() as usize;
    assert!(
        unauthenticated <= per_sec as usize + refilled,
        "{unauthenticated} let through in {elapsed:?}: {statuses:?}"
    );
    assert!(limited >= 1, "{statuses:?}");
    for (status, retry_after, body) in &answers {
        if *status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(body["error"], "rate_limited", "{body}");
            let secs: u64 = retry_after
                .as_deref()
                .expect("Retry-After")
                .parse()
                .unwrap();
            assert!(secs >= 1, "Retry-After {secs}");
        } else {
            assert_eq!(body["error"], "unauthenticated", "{body}");
        }
    }
    assert_eq!(env.redis_stock(product).await, 5);

    // The limit passes: a good token buys again.
    let body = eventually(
        "the address to be under its limit",
        Duration::from_secs(10),
        || async {
            let a = buy_as(&gw, product, &token(1), json!({})).await;
            match a.status {
                StatusCode::TOO_MANY_REQUESTS => None,
                StatusCode::ACCEPTED => Some(a.body),
                other => panic!("{other} {}", a.body),
            }
        },
    )
    .await;
    assert_eq!(body["user_id"], 1);
}

/// `SECKILL_ADMIN_AUTH_FAILURES_PER_MIN` (the default, 10): an address that sent that many
/// wrong admin tokens gets `429` with `Retry-After` on its next one, and then on every admin
/// request, the right token included, until one more failure is allowed (6 s later). Other
/// addresses, and the address's buys, are not affected; a missing token counts for nothing.
#[tokio::test]
async fn wrong_admin_tokens_from_an_address_lock_it_out_of_admin_even_with_the_right_token() {
    let env = TestEnv::new().await;
    let per_min = Settings::default().admin.auth_failures_per_min;
    assert_eq!(per_min, 10);
    // The client is the address 127.0.0.1 forwards (a trusted proxy), so that a test from
    // one host has several addresses.
    let gw = env
        .gateway_with(|s| {
            s.admin.auth_failures_per_min = per_min;
            s.gateway.trusted_proxies = "127.0.0.1".into();
        })
        .await;
    let product = env.product(&gw, 5).await;
    let path = format!("/admin/products/{product}");
    let (guesser, other) = ("203.0.113.7", "203.0.113.8");
    let admin = |token: Option<String>, from: &'static str| {
        let mut req = gw
            .http
            .get(format!("{}{path}", gw.base))
            .header("x-forwarded-for", from);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            let retry_after = res
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().parse::<u64>().unwrap());
            let body: Value = res.json().await.unwrap();
            (status, retry_after, body)
        }
    };

    // No token is no guess.
    for _ in 0..2 * per_min {
        assert_eq!(admin(None, guesser).await.0, StatusCode::UNAUTHORIZED);
    }
    for i in 0..per_min {
        let (status, _, body) = admin(Some(format!("wrong-token-{i}")), guesser).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "wrong token {i}: {body}");
    }
    let (status, retry_after, body) = admin(Some("wrong-token-last".into()), guesser).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("wrong admin tokens"),
        "{body}"
    );
    let secs = retry_after.expect("Retry-After");
    assert!((1..=6).contains(&secs), "Retry-After {secs}");

    // Now the right token is refused too, on every admin route, while the block lasts.
    let (status, retry_after, body) = admin(Some(ADMIN_TOKEN.into()), guesser).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"], "rate_limited", "{body}");
    assert!(retry_after.is_some_and(|s| s >= 1), "{body}");
    let res = gw
        .http
        .post(format!("{}/admin/products", gw.base))
        .header("x-forwarded-for", guesser)
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"name": "x", "stock": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        admin(None, guesser).await.0,
        StatusCode::TOO_MANY_REQUESTS,
        "blocked before the token is looked at"
    );

    // Another address is not; nor are the guesser's buys.
    let (status, _, body) = admin(Some(ADMIN_TOKEN.into()), other).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .header("x-forwarded-for", guesser)
        .bearer_auth(token(1))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::ACCEPTED);

    // The block passes: the right token works again.
    let body = eventually(
        "the guesser's block to end",
        Duration::from_secs(10),
        || async {
            let (status, _, body) = admin(Some(ADMIN_TOKEN.into()), guesser).await;
            match status {
                StatusCode::TOO_MANY_REQUESTS => None,
                StatusCode::OK => Some(body),
                other => panic!("{other} {body}"),
            }
        },
    )
    .await;
    assert_eq!(body["id"], product.as_i64());
}
