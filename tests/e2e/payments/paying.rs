//! Paying: in time, once per idempotency key, only by the owner with a key and a reachable
//! provider; the provider's callbacks, forged, stale or missing; nothing recorded once the
//! window has closed.

use crate::helpers::*;
use crate::payments::sale::Sale;
use reqwest::StatusCode;
use seckill_shared::now_ms;
use seckill_shared::payments;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn an_order_paid_in_time_is_paid_and_a_repeated_callback_changes_nothing() {
    let sale = Sale::new().await;
    let product = sale.product(2, 60).await;
    let order = sale.confirmed(product, 7).await;
    let ticket = order["ticket"].as_str().unwrap();
    let pay_by = order["pay_by_ms"]
        .as_i64()
        .expect("a confirmed order has pay_by_ms");
    assert!(
        (now_ms() + 50_000..=now_ms() + 60_000).contains(&pay_by),
        "{order}"
    );

    let (status, paid) = sale.pay(ticket, 7, "k1").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paid}");
    assert_eq!(paid["status"], "processing");
    let payment_id = paid["payment_id"].as_str().unwrap();
    let charges = sale.provider.charges();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].payment_id, payment_id);
    assert_eq!(charges[0].ticket, ticket);
    assert_eq!(
        (charges[0].amount, charges[0].currency.as_str()),
        (1999, "EUR")
    );
    assert_eq!(
        charges[0].callback_url,
        "http://gateway.invalid/v1/payments/callback"
    );

    let (status, body) = sale.callback(payment_id, "succeeded").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("succeeded")),
        "{body}"
    );
    let body = sale.ticket(ticket, 7).await;
    assert_eq!(body["status"], "paid", "{body}");
    assert!(body["paid_at_ms"].as_i64().is_some(), "{body}");
    assert_eq!(body["pay_by_ms"].as_i64(), Some(pay_by));

    // The same callback again, and a contradicting one: nothing changes.
    for outcome in ["succeeded", "declined"] {
        let (status, body) = sale.callback(payment_id, outcome).await;
        assert_eq!(
            (status, body["status"].as_str()),
            (StatusCode::OK, Some("succeeded")),
            "{body}"
        );
    }
    assert_eq!(sale.ticket(ticket, 7).await["status"], "paid");
    assert_eq!(
        sale.gw
            .metric(r#"seckill_gateway_payments_total{status="succeeded"}"#)
            .await,
        1.0
    );
    // A paid order is final: neither paid again nor cancelled.
    let (status, body) = sale.pay(ticket, 7, "k2").await;
    assert_eq!(
        (status, body["error"].as_str(), body["state"].as_str()),
        (StatusCode::CONFLICT, Some("not_payable"), Some("paid")),
        "{body}"
    );
    let (status, body) = sale.cancel(ticket, 7).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("not_cancellable")),
        "{body}"
    );
    assert_eq!(sale.env.mysql_stock(product).await, 1);
}

#[tokio::test]
async fn one_idempotency_key_charges_once_and_a_second_key_waits_for_the_first() {
    let sale = Sale::new().await;
    let product = sale.product(1, 60).await;
    let ticket = sale.confirmed_ticket(product, 8).await;

    let (s1, first) = sale.pay(&ticket, 8, "same-key").await;
    let (s2, again) = sale.pay(&ticket, 8, "same-key").await;
    assert_eq!((s1, s2), (StatusCode::ACCEPTED, StatusCode::ACCEPTED));
    assert_eq!(first, again, "the same key answers the same payment");
    assert_eq!(sale.provider.charges().len(), 1, "one charge for one key");

    // A second key while the first payment is in progress: refused, nothing charged.
    let (status, body) = sale.pay(&ticket, 8, "other-key").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("payment_in_progress")),
        "{body}"
    );
    assert_eq!(sale.provider.charges().len(), 1);

    // Declined: the order stays confirmed and the buyer pays again with a new key.
    let (status, body) = sale
        .callback(first["payment_id"].as_str().unwrap(), "declined")
        .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("declined")),
        "{body}"
    );
    assert_eq!(sale.ticket(&ticket, 8).await["status"], "confirmed");
    let (status, second) = sale.pay(&ticket, 8, "other-key").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{second}");
    assert_ne!(second["payment_id"], first["payment_id"]);
    assert_eq!(sale.provider.charges().len(), 2);
    let (_, body) = sale
        .callback(second["payment_id"].as_str().unwrap(), "succeeded")
        .await;
    assert_eq!(body["status"], "succeeded");
    assert_eq!(sale.ticket(&ticket, 8).await["status"], "paid");
    // The declined key still answers its own (declined) payment, and charges nothing.
    let (status, body) = sale.pay(&ticket, 8, "same-key").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::ACCEPTED, Some("declined")),
        "{body}"
    );
    assert_eq!(sale.provider.charges().len(), 2);
}

#[tokio::test]
async fn paying_needs_the_owner_a_key_and_a_reachable_provider() {
    let sale = Sale::new().await;
    let product = sale.product(1, 60).await;
    let ticket = sale.confirmed_ticket(product, 9).await;
    let (status, body) = sale.pay(&ticket, 10, "k").await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_ticket")),
        "{body}"
    );
    let (status, body) = sale
        .post_as(&format!("/v1/orders/{ticket}/pay"), 9, None)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "{body}"
    );
    let (status, body) = sale.cancel(&ticket, 10).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_ticket")),
        "{body}"
    );

    // The provider is down: 503, nothing charged; the same key succeeds once it is back.
    sale.provider
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = sale.pay(&ticket, 9, "k").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    sale.provider
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = sale.pay(&ticket, 9, "k").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(sale.provider.charges().len(), 1);
}

#[tokio::test]
async fn a_forged_or_stale_callback_gets_401_and_changes_nothing() {
    let sale = Sale::new().await;
    let product = sale.product(1, 60).await;
    let ticket = sale.confirmed_ticket(product, 17).await;
    let (_, paid) = sale.pay(&ticket, 17, "k").await;
    let body = json!({"payment_id": paid["payment_id"], "status": "succeeded"});
    let now = now_ms() / 1000;
    for (secret, t) in [
        ("wrong-secret", now),
        // Well past the 300 s either way: the gateway's clock may tick a second meanwhile.
        (WEBHOOK_SECRET, now - 310),
        (WEBHOOK_SECRET, now + 310),
    ] {
        let (status, answer) = sale.callback_signed(&body, secret, t).await;
        assert_eq!(
            (status, answer["error"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("invalid_signature")),
            "{secret} {t}: {answer}"
        );
    }
    // A valid signature over another body, and no signature at all.
    let raw = serde_json::to_vec(&body).unwrap();
    let signed_other = payments::sign(
        WEBHOOK_SECRET.as_bytes(),
        now,
        br#"{"payment_id":"x","status":"succeeded"}"#,
    );
    for header in [Some(signed_other), None] {
        let mut req = sale
            .gw
            .http
            .post(format!("{}/v1/payments/callback", sale.gw.base))
            .body(raw.clone());
        if let Some(h) = header {
            req = req.header(payments::SIGNATURE_HEADER, h);
        }
        assert_eq!(req.send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        sale.payment_status(paid["payment_id"].as_str().unwrap())
            .await,
        "processing"
    );
    assert_eq!(sale.ticket(&ticket, 17).await["status"], "confirmed");
    let (status, answer) = sale
        .callback("pay_00000000000000000000000000000000", "succeeded")
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown_payment")),
        "{answer}"
    );
}

/// A callback the provider never sends: the gateway asks the provider about a payment still
/// waiting after `SECKILL_PAYMENT_RECONCILE_AFTER_MS`, and settles it as the callback would
/// have. One the provider decided pays the order; one the provider never took (it forgot
/// it) is declined, and the buyer pays again. Before, both stayed `processing` until the
/// window closed, and the second blocked every new key.
#[tokio::test]
async fn a_callback_that_never_comes_is_asked_for() {
    let sale = Sale::new_with(|s| s.payment.reconcile_after_ms = 300).await;
    let product = sale.product(2, 600).await;

    // Decided by the provider, and its callback lost.
    let ticket = sale.confirmed_ticket(product, 61).await;
    let (status, paid) = sale.pay(&ticket, 61, "k").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paid}");
    let payment_id = paid["payment_id"].as_str().unwrap().to_owned();
    sale.provider
        .decisions
        .lock()
        .unwrap()
        .insert(payment_id, "succeeded".into());
    eventually(
        "the order paid without its callback",
        Duration::from_secs(20),
        || async { (sale.ticket(&ticket, 61).await["status"] == "paid").then_some(()) },
    )
    .await;

    // Taken and then forgotten by the provider: declined, and paid again with a new key.
    let other = sale.confirmed_ticket(product, 62).await;
    let (status, first) = sale.pay(&other, 62, "first").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{first}");
    sale.provider
        .charges
        .lock()
        .unwrap()
        .retain(|c| c.ticket != other);
    let declined: String = eventually(
        "the forgotten payment declined",
        Duration::from_secs(20),
        || async {
            sqlx::query_scalar::<_, String>("SELECT status FROM payments WHERE payment_id = ?")
                .bind(first["payment_id"].as_str().unwrap())
                .fetch_one(&sale.env.db)
                .await
                .ok()
                .filter(|s| s == "declined")
        },
    )
    .await;
    assert_eq!(declined, "declined");
    let (status, again) = sale.pay(&other, 62, "second").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_ne!(again["payment_id"], first["payment_id"]);
}

/// A pay that gets the order's lock after the payment deadline is refused there, not sent:
/// under load, a pair of pays once waited for the lock past the deadline and each reached the
/// provider, each charged and refunded (chaos scenario 18, herd, on the cluster). The route
/// checks the deadline when the request arrives; the record checks it again under the lock.
#[tokio::test]
async fn a_payment_is_not_recorded_once_the_window_has_closed() {
    let sale = Sale::new().await;
    let product = sale.product(1, 600).await;
    let ticket = sale.confirmed_ticket(product, 71).await;
    // The workers' expiry would cancel the overdue order first (CI once saw `cancelled` here):
    // it locks the product's row before the orders', so holding that row keeps it out until
    // the record has answered. The record locks only the order's row.
    let mut hold = sale.env.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(product.as_i64())
        .fetch_all(&mut *hold)
        .await
        .unwrap();
    sqlx::query("UPDATE orders SET pay_by_ms = ? WHERE ticket = ?")
        .bind(now_ms() - 1)
        .bind(&ticket)
        .execute(&sale.env.db)
        .await
        .unwrap();
    let p = seckill_shared::payments::attempts::Payment {
        payment_id: seckill_shared::payments::attempts::new_payment_id(),
        ticket: ticket.clone(),
        user_id: 71,
        status: payments::PaymentStatus::Unsent,
        amount: 1999,
        currency: "EUR".into(),
    };
    let recorded = seckill_shared::payments::attempts::record(&sale.env.db, &p, "late", 0)
        .await
        .unwrap();
    hold.rollback().await.unwrap();
    assert_eq!(
        recorded,
        seckill_shared::payments::attempts::Recorded::WindowClosed
    );
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM payments WHERE ticket = ?")
        .bind(&ticket)
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    assert_eq!(n, 0);
}
