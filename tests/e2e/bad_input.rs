//! Hostile and malformed input always gets a 4xx with a JSON body.

use crate::helpers::*;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

#[tokio::test]
async fn malformed_requests_get_4xx_with_a_json_body() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let buy = format!("/v1/seckill/{product}");
    let big = format!("{{\"user_id\": 1, \"pad\": \"{}\"}}", "x".repeat(10_000));

    // (method, path, content type, body, expected status)
    type Case<'a> = (Method, String, Option<&'a str>, Option<String>, u16);
    let cases: Vec<Case> = vec![
        (
            Method::POST,
            "/v1/seckill/abc".into(),
            Some("application/json"),
            Some(r#"{"user_id":1}"#.into()),
            400,
        ),
        (
            Method::POST,
            "/v1/seckill/0".into(),
            Some("application/json"),
            Some(r#"{"user_id":1}"#.into()),
            400,
        ),
        (
            Method::POST,
            "/v1/seckill/-3".into(),
            Some("application/json"),
            Some(r#"{"user_id":1}"#.into()),
            400,
        ),
        (
            Method::POST,
            "/v1/seckill/99999999999999999999999".into(),
            Some("application/json"),
            Some(r#"{"user_id":1}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            None,
            400,
        ),
        (Method::POST, buy.clone(), None, None, 415),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":null}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some("not json".into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":"1"}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":0}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":-1}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":1.5}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":18446744073709551616}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(r#"{"user_id":1,"extra":true}"#.into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some("[1]".into()),
            400,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("text/plain"),
            Some(r#"{"user_id":1}"#.into()),
            415,
        ),
        (
            Method::POST,
            buy.clone(),
            Some("application/json"),
            Some(big),
            413,
        ),
        (Method::PUT, buy.clone(), None, None, 405),
        (
            Method::GET,
            "/v1/orders/not-a-ticket".into(),
            None,
            None,
            400,
        ),
        (
            Method::GET,
            format!("/v1/orders/{product}-{}", "0".repeat(32)),
            None,
            None,
            404,
        ),
        (
            Method::GET,
            format!("/v1/seckill/{product}/order?user_id=abc"),
            None,
            None,
            400,
        ),
        (
            Method::GET,
            format!("/v1/seckill/{product}/order?other=1"),
            None,
            None,
            400,
        ),
        (
            Method::GET,
            format!("/v1/seckill/{product}/order?user_id=1&user_id=1"),
            None,
            None,
            400,
        ),
        (Method::GET, "/v1/seckill/abc/order".into(), None, None, 400),
        (Method::GET, "/nowhere".into(), None, None, 404),
        (
            Method::POST,
            "/admin/products".into(),
            Some("application/json"),
            Some(r#"{"name":"x","stock":1}"#.into()),
            401,
        ),
    ];
    // A case for a buyer endpoint is sent with user 1's token, so that what is checked is the
    // input itself; then without one: `401`, before the path or the body is looked at.
    let send =
        |method: Method, path: String, ctype: Option<&str>, body: Option<String>, bearer: bool| {
            let mut req = gw.http.request(method, format!("{}{path}", gw.base));
            if bearer {
                req = req.bearer_auth(token(1));
            }
            if let Some(c) = ctype {
                req = req.header("content-type", c);
            }
            if let Some(b) = body {
                req = req.body(b);
            }
            async move {
                let res = req.send().await.unwrap();
                let status = res.status().as_u16();
                let text = res.text().await.unwrap();
                (status, text)
            }
        };
    for (method, path, ctype, body, expected) in cases {
        let buyer = path.starts_with("/v1/") && expected != 405;
        let runs: &[bool] = if buyer { &[true, false] } else { &[false] };
        for &bearer in runs {
            // A buy checks its path and body before the token (and the sold-out marker
            // between the two); the polls check the token first.
            let is_buy = method == Method::POST && path.starts_with("/v1/seckill/");
            let checked_before_token = is_buy && [400, 413, 415].contains(&expected);
            let expected = if buyer && !bearer && !checked_before_token {
                401
            } else {
                expected
            };
            let (status, text) =
                send(method.clone(), path.clone(), ctype, body.clone(), bearer).await;
            let what = format!("{method} {path} {body:?} (token: {bearer})");
            let json: Value = serde_json::from_str(&text)
                .unwrap_or_else(|_| panic!("{what}: body is not JSON: {text}"));
            assert_eq!(status, expected, "{what}: {text}");
            assert!(json["error"].is_string(), "{what}: {text}");
            if expected == 401 && buyer {
                assert_eq!(json["error"], "unauthenticated", "{what}: {text}");
            }
        }
    }
    // Nothing above reserved anything.
    assert_eq!(env.redis_stock(product).await, 5);

    // `user_id` is optional: `{}` with a token buys for the token's user.
    let (status, text) = send(
        Method::POST,
        buy.clone(),
        Some("application/json"),
        Some("{}".into()),
        true,
    )
    .await;
    assert_eq!(status, 202, "{text}");
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["user_id"], 1, "{text}");
    assert_eq!(env.redis_stock(product).await, 4);
}

#[tokio::test]
async fn admin_endpoints_need_the_right_token_and_valid_input() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let url = format!("{}/admin/products", gw.base);
    let body = json!({"name": "x", "stock": 1});

    let res = gw.http.post(&url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let res = gw
        .http
        .post(&url)
        .bearer_auth("wrong")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let res = gw.http.get(format!("{url}/1")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    for bad in [
        json!({"name": "", "stock": 1}),
        json!({"name": "x", "stock": -1}),
        json!({"name": "x"}),
        json!({"name": "x", "stock": 1, "starts_at": "yesterday"}),
        json!({"name": "x", "stock": 1, "starts_at": "2030-01-02T00:00:00Z", "ends_at": "2030-01-01T00:00:00Z"}),
    ] {
        let (status, res) = gw.admin_post("/admin/products", bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {res}");
        assert_eq!(res["error"], "bad_request");
    }
    let (status, _) = gw
        .admin_post("/admin/products/424242/preload", Value::Null)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
