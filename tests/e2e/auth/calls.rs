//! A gateway that takes the test keys, the buyer requests the tests send with a token, and
//! what a refused one must look like.

use crate::auth::tokens::{JwksFile, AUDIENCE, ISSUER};
use crate::helpers::*;
use reqwest::header::{HeaderMap, AUTHORIZATION};
use reqwest::StatusCode;
use seckill_shared::{ProductId, Settings};
use serde_json::Value;

/// A gateway that takes HS256 tokens (the suite's secret) and the keys of `jwks`, and checks
/// the issuer and the audience when `strict`.
pub(crate) async fn gateway(env: &TestEnv, jwks: &JwksFile, strict: bool) -> TestGateway {
    let path = jwks.path();
    env.gateway_with(move |s: &mut Settings| {
        s.auth.jwks_file = path;
        if strict {
            s.auth.issuer = ISSUER.into();
            s.auth.audience = AUDIENCE.into();
        }
    })
    .await
}

/// One answer: status, headers, JSON body (`null` if none).
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

/// A request to a buyer endpoint with `authorization` as the whole header value (`None`: no
/// header). `body` makes it a `POST` with that JSON body, else a `GET`.
pub(crate) async fn call(
    gw: &TestGateway,
    path: &str,
    authorization: Option<&str>,
    body: Option<Value>,
) -> Answer {
    let url = format!("{}{path}", gw.base);
    let mut req = match &body {
        Some(b) => gw.http.post(url).json(b),
        None => gw.http.get(url),
    };
    if let Some(a) = authorization {
        req = req.header(AUTHORIZATION, a);
    }
    let res = req.send().await.expect("the gateway answers");
    let status = res.status();
    let headers = res.headers().clone();
    let body = res.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

pub(crate) fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

pub(crate) async fn buy_as(
    gw: &TestGateway,
    product: ProductId,
    token: &str,
    body: Value,
) -> Answer {
    call(
        gw,
        &format!("/v1/seckill/{product}"),
        Some(&bearer(token)),
        Some(body),
    )
    .await
}

pub(crate) async fn my_order(gw: &TestGateway, product: ProductId, token: &str) -> Answer {
    call(
        gw,
        &format!("/v1/seckill/{product}/order"),
        Some(&bearer(token)),
        None,
    )
    .await
}

pub(crate) async fn poll_as(gw: &TestGateway, ticket: &str, token: &str) -> Answer {
    call(
        gw,
        &format!("/v1/orders/{ticket}"),
        Some(&bearer(token)),
        None,
    )
    .await
}

/// A `401` as RFC 6750 has it, whose message says what is wrong without repeating the
/// credentials it was sent.
pub(crate) fn assert_unauthenticated(what: &str, a: &Answer, authorization: Option<&str>) {
    assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{what}: {}", a.body);
    assert_eq!(
        a.headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some(r#"Bearer error="invalid_token""#),
        "{what}"
    );
    assert_eq!(a.body["error"], "unauthenticated", "{what}: {}", a.body);
    let message = a.body["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no message: {}", a.body));
    assert!(!message.is_empty(), "{what}");
    if let Some(sent) = authorization {
        // Neither the token nor any piece of it that could identify it.
        for piece in sent.split([' ', '.']).filter(|p| p.len() >= 8) {
            assert!(
                !message.contains(piece),
                "{what}: the message repeats the credentials: {message}"
            );
        }
    }
}
