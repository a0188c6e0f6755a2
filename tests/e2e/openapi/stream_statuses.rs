//! The buyer's page, the product's buyer view and the live ticket stream: their part of
//! `every_status.rs`.

use crate::helpers::token as buyer;
use crate::helpers::*;
use crate::openapi::recorder::Recorder;
use reqwest::Method;
use serde_json::json;

/// `GET /v1/orders/{ticket}/events`: a final ticket (one event, then the end), and every
/// refusal. Buyers of their own; a gateway that holds one stream only.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn stream_statuses(
    r: &Recorder,
    env: &TestEnv,
    gw: &TestGateway,
    sync: &TestGateway,
    redis_down: &TestGateway,
    mysql_down: &TestGateway,
    limited: &TestGateway,
    t: Option<&str>,
) {
    use Method as M;
    let stokens = [31, 32, 33].map(buyer);
    let [s1, s2, s3] = stokens.each_ref().map(|t| Some(t.as_str()));
    let (_, created) = r
        .json(
            gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "streamed", "stock": 5}),
        )
        .await;
    let p = created["id"].as_u64().unwrap();
    let preload = format!("/admin/products/{p}/preload");
    assert_eq!(r.send(gw, M::POST, &preload, t, None, None).await.0, 200);

    // The product as buyers see it, and their page: no token needed.
    let view = format!("/v1/seckill/{p}");
    let (s, body) = r.send(gw, M::GET, &view, None, None, None).await;
    assert_eq!(
        (s, body["name"].as_str()),
        (200, Some("streamed")),
        "{body}"
    );
    assert_eq!(
        r.send(gw, M::GET, "/v1/seckill/abc", None, None, None)
            .await
            .0,
        400
    );
    assert_eq!(
        r.send(gw, M::GET, "/v1/seckill/999999", None, None, None)
            .await
            .0,
        404
    );
    assert_eq!(
        r.send(mysql_down, M::GET, &view, None, None, None).await.0,
        503
    );
    for path in [
        format!("/sale/{p}"),
        "/sale/assets/sale.js".into(),
        "/sale/assets/style.css".into(),
        "/sale/assets/pow.js".into(),
    ] {
        assert_eq!(
            r.send(gw, M::GET, &path, None, None, None).await.0,
            200,
            "{path}"
        );
    }
    assert_eq!(
        r.send(gw, M::GET, "/sale/abc", None, None, None).await.0,
        400
    );
    // Sync mode confirms in the request: without a payment window, a final state.
    let (s, final_ticket) = r
        .json(sync, M::POST, &format!("/v1/seckill/{p}"), s1, json!({}))
        .await;
    assert_eq!(s, 201, "{final_ticket}");
    let events =
        |t: &serde_json::Value| format!("/v1/orders/{}/events", t["ticket"].as_str().unwrap());
    let (s, body) = r
        .send(gw, M::GET, &events(&final_ticket), s1, None, None)
        .await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = r
        .send_with(
            gw,
            M::GET,
            &events(&final_ticket),
            s1,
            &[("Last-Event-ID", "3".into())],
            None,
            None,
        )
        .await;
    assert_eq!(s, 204, "the final state was seen: {body}");
    r.send(gw, M::GET, "/v1/orders/nope/events", s1, None, None)
        .await; // 400
    r.send_with(
        gw,
        M::GET,
        &events(&final_ticket),
        s1,
        &[("Last-Event-ID", "x".into())],
        None,
        None,
    )
    .await; // 400
    r.send(gw, M::GET, &events(&final_ticket), None, None, None)
        .await; // 401
    r.send(gw, M::GET, &events(&final_ticket), s2, None, None)
        .await; // 404: another buyer's
    r.send(redis_down, M::GET, &events(&final_ticket), s1, None, None)
        .await; // 503
    r.send(limited, M::GET, &events(&final_ticket), s1, None, None)
        .await;
    r.send(limited, M::GET, &events(&final_ticket), s1, None, None)
        .await; // 429: one request a second per address

    // Held open: a pending ticket (no worker here) on a gateway of one stream.
    let one = env
        .gateway_with(|s| {
            s.gateway.sse_max_streams = 1;
            s.gateway.sse_max_per_buyer = 1;
        })
        .await;
    let (s, pending) = r
        .json(gw, M::POST, &format!("/v1/seckill/{p}"), s2, json!({}))
        .await;
    assert_eq!(s, 202, "{pending}");
    let held = reqwest::Client::new()
        .get(format!("{}{}", one.base, events(&pending)))
        .bearer_auth(buyer(32))
        .send()
        .await
        .unwrap();
    assert_eq!(held.status(), 200);
    let (s, mine) = r
        .json(gw, M::POST, &format!("/v1/seckill/{p}"), s3, json!({}))
        .await;
    assert_eq!(s, 202, "{mine}");
    let (s, body) = r.send(&one, M::GET, &events(&mine), s3, None, None).await;
    assert_eq!(s, 503, "{body}");
    drop(held);
}
