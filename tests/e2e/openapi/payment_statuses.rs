//! The payments' part of `every_status.rs`: paying, cancelling and the provider's
//! callbacks, on the sync gateway that has a payment provider.

use crate::helpers::token as buyer;
use crate::helpers::*;
use crate::openapi::recorder::Recorder;
use reqwest::Method;
use serde_json::{json, Value};

/// Payments: a priced product, an order confirmed in the request (sync mode). Buyers of their
/// own, whose per-user buckets are full.
pub(crate) async fn payment_statuses(
    r: &Recorder,
    gw: &TestGateway,
    sync: &TestGateway,
    limited: &TestGateway,
    mysql_down: &TestGateway,
    t: Option<&str>,
) {
    use Method as M;
    let ptokens = [11, 12, 13].map(buyer);
    let [u1, u2, u3] = ptokens.each_ref().map(|t| Some(t.as_str()));
    let (_, priced) = r
        .json(
            gw,
            M::POST,
            "/admin/products",
            t,
            json!({"name": "paid", "stock": 3, "price": 100, "payment_window_secs": 60}),
        )
        .await;
    let pp = priced["id"].as_u64().unwrap();
    assert_eq!(
        r.send(
            gw,
            M::POST,
            &format!("/admin/products/{pp}/preload"),
            t,
            None,
            None
        )
        .await
        .0,
        200
    );
    let (s, order) = r
        .json(sync, M::POST, &format!("/v1/seckill/{pp}"), u1, json!({}))
        .await;
    assert_eq!(s, 201, "{order}");
    let order_ticket = order["ticket"].as_str().unwrap().to_owned();
    let (s, order2) = r
        .json(sync, M::POST, &format!("/v1/seckill/{pp}"), u2, json!({}))
        .await;
    assert_eq!(s, 201, "{order2}");
    let ticket2 = order2["ticket"].as_str().unwrap().to_owned();
    let (pay, cancel) = (
        format!("/v1/orders/{order_ticket}/pay"),
        format!("/v1/orders/{order_ticket}/cancel"),
    );
    let key = |k: &str| [("Idempotency-Key", k.to_owned())];
    let (s, payment) = r
        .send_with(sync, M::POST, &pay, u1, &key("k1"), None, None)
        .await;
    assert_eq!(s, 202, "{payment}");
    r.send(sync, M::POST, &pay, u1, None, None).await; // 400: no key
    r.send_with(sync, M::POST, &pay, None, &key("k1"), None, None)
        .await; // 401
    r.send_with(sync, M::POST, &pay, u3, &key("k1"), None, None)
        .await; // 404
    let (s, _) = r
        .send_with(sync, M::POST, &pay, u1, &key("k2"), None, None)
        .await;
    assert_eq!(s, 409, "in progress");
    r.send_with(limited, M::POST, &pay, u1, &key("k1"), None, None)
        .await;
    r.send_with(limited, M::POST, &pay, u1, &key("k1"), None, None)
        .await; // 429
    r.send_with(mysql_down, M::POST, &pay, u1, &key("k1"), None, None)
        .await; // 503
    r.send(sync, M::POST, &cancel, None, None, None).await; // 401
    r.send(sync, M::POST, &cancel, u3, None, None).await; // 404
    r.send(sync, M::POST, "/v1/orders/nope/cancel", u1, None, None)
        .await; // 400
                // Another buyer's ticket (404), then 429: the owner's cancel must not go through here.
    r.send(limited, M::POST, &cancel, u3, None, None).await;
    r.send(limited, M::POST, &cancel, u3, None, None).await; // 429
    r.send(mysql_down, M::POST, &cancel, u1, None, None).await; // 503
    let (s, body) = r
        .send(
            sync,
            M::POST,
            &format!("/v1/orders/{ticket2}/cancel"),
            u2,
            None,
            None,
        )
        .await;
    assert_eq!(s, 200, "{body}");
    // The provider's callbacks.
    let signed = |body: &Value| {
        let raw = body.to_string();
        let sig = seckill_shared::payments::sign(
            WEBHOOK_SECRET.as_bytes(),
            seckill_shared::now_ms() / 1000,
            raw.as_bytes(),
        );
        (raw, [("Seckill-Signature", sig)])
    };
    let callback = "/v1/payments/callback";
    let (raw, sig) = signed(&json!({"payment_id": payment["payment_id"], "status": "succeeded"}));
    let (s, body) = r
        .send_with(
            sync,
            M::POST,
            callback,
            None,
            &sig,
            Some("application/json"),
            Some(raw.clone()),
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = r
        .send_with(sync, M::POST, &cancel, u1, &[], None, None)
        .await;
    assert_eq!(s, 409, "a paid order: {body}");
    r.send(
        sync,
        M::POST,
        callback,
        None,
        Some("application/json"),
        Some(raw.clone()),
    )
    .await; // 401
    let (raw_bad, sig_bad) = signed(&json!({"payment_id": 7}));
    r.send_with(
        sync,
        M::POST,
        callback,
        None,
        &sig_bad,
        Some("application/json"),
        Some(raw_bad),
    )
    .await; // 400
    let (raw_unknown, sig_unknown) = signed(
        &json!({"payment_id": "pay_00000000000000000000000000000000", "status": "declined"}),
    );
    r.send_with(
        sync,
        M::POST,
        callback,
        None,
        &sig_unknown,
        Some("application/json"),
        Some(raw_unknown),
    )
    .await; // 404
    r.send(
        sync,
        M::POST,
        callback,
        None,
        Some("application/json"),
        Some(format!("{{\"pad\": \"{}\"}}", "x".repeat(5000))),
    )
    .await; // 413
    r.send_with(
        mysql_down,
        M::POST,
        callback,
        None,
        &sig,
        Some("application/json"),
        Some(raw),
    )
    .await; // 503
}
