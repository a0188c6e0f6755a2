//! The payment window (issue 12): paying in time, idempotent payments, declines, expiry that
//! resells the unit, buyer cancels, the pay/cancel race, and signed callbacks.
//!
//! The test plays the payment provider: a real HTTP server takes the gateway's charges, and
//! the test sends the provider's signed callbacks when it chooses, so each race is exact.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::payments;
use seckill_shared::payments::cancel;
use seckill_shared::{now_ms, ProductId};
use serde_json::{json, Value};
use sqlx::Row;
use std::time::Duration;

struct Sale {
    env: TestEnv,
    gw: TestGateway,
    provider: Provider,
    _worker: TestWorker,
}

impl Sale {
    async fn new() -> Self {
        Self::new_with(|_| {}).await
    }

    /// [`Sale::new`], with the gateway's settings changed by `tweak` too.
    async fn new_with(tweak: impl FnOnce(&mut seckill_shared::Settings)) -> Self {
        let env = TestEnv::new().await;
        let (provider, url) = Provider::start().await;
        let gw = env
            .gateway_with(|s| {
                s.payment_provider_url = url.clone();
                s.payment_callback_url = "http://gateway.invalid/v1/payments/callback".into();
                s.payment_webhook_secret = WEBHOOK_SECRET.into();
                tweak(s);
            })
            .await;
        let worker = env.worker().await;
        Self {
            env,
            gw,
            provider,
            _worker: worker,
        }
    }

    /// A priced product with a payment window, loaded for sale.
    async fn product(&self, stock: i64, window_secs: i64) -> ProductId {
        let (status, body) = self
            .gw
            .admin_post(
                "/admin/products",
                json!({"name": "paid item", "stock": stock, "price": 1999, "currency": "EUR", "payment_window_secs": window_secs}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let id = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
        let (status, body) = self
            .gw
            .admin_post(&format!("/admin/products/{id}/preload"), Value::Null)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        id
    }

    /// `user` buys and waits for the order to be confirmed; returns the ticket's body.
    async fn confirmed(&self, product: ProductId, user: u64) -> Value {
        let (status, body) = self.gw.buy(product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let body = self
            .gw
            .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
            .await;
        assert_eq!(body["status"], "confirmed", "{body}");
        body
    }

    async fn post_as(&self, path: &str, user: u64, key: Option<&str>) -> (StatusCode, Value) {
        let mut req = self
            .gw
            .http
            .post(format!("{}{path}", self.gw.base))
            .bearer_auth(token(user));
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn pay(&self, ticket: &str, user: u64, key: &str) -> (StatusCode, Value) {
        self.post_as(&format!("/v1/orders/{ticket}/pay"), user, Some(key))
            .await
    }

    async fn cancel(&self, ticket: &str, user: u64) -> (StatusCode, Value) {
        self.post_as(&format!("/v1/orders/{ticket}/cancel"), user, None)
            .await
    }

    /// The provider's callback, signed with `secret` at `t`.
    async fn callback_signed(&self, body: &Value, secret: &str, t: i64) -> (StatusCode, Value) {
        let raw = serde_json::to_vec(body).unwrap();
        let res = self
            .gw
            .http
            .post(format!("{}/v1/payments/callback", self.gw.base))
            .header("Content-Type", "application/json")
            .header(
                payments::SIGNATURE_HEADER,
                payments::sign(secret.as_bytes(), t, &raw),
            )
            .body(raw)
            .send()
            .await
            .unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn callback(&self, payment_id: &str, outcome: &str) -> (StatusCode, Value) {
        self.callback_signed(
            &json!({"payment_id": payment_id, "status": outcome}),
            WEBHOOK_SECRET,
            now_ms() / 1000,
        )
        .await
    }

    /// `user` buys as soon as a unit is back on sale (`202`), then waits for the order to
    /// settle; the settled ticket.
    async fn buy_when_back(&self, product: ProductId, user: u64) -> Value {
        let other = eventually("the unit back on sale", Duration::from_secs(10), || async {
            let (status, body) = self.gw.buy(product, user).await;
            (status == StatusCode::ACCEPTED).then_some(body)
        })
        .await;
        self.gw
            .settled(other["ticket"].as_str().unwrap(), Duration::from_secs(30))
            .await
    }

    /// The ticket of `user`'s order, once confirmed.
    async fn confirmed_ticket(&self, product: ProductId, user: u64) -> String {
        self.confirmed(product, user).await["ticket"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// (MySQL stock, Redis stock).
    async fn stocks(&self, product: ProductId) -> (i64, i64) {
        (
            self.env.mysql_stock(product).await,
            self.env.redis_stock(product).await,
        )
    }

    async fn ticket(&self, ticket: &str, user: u64) -> Value {
        let (status, body) = self
            .gw
            .get_as(&format!("/v1/orders/{ticket}"), Some(user))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    async fn payment_status(&self, payment_id: &str) -> String {
        sqlx::query("SELECT status FROM payments WHERE payment_id = ?")
            .bind(payment_id)
            .fetch_one(&self.env.db)
            .await
            .unwrap()
            .get("status")
    }

    /// Waits until the ticket is cancelled (by the workers' expiry).
    async fn cancelled(&self, ticket: &str, user: u64) -> Value {
        eventually(
            "the unpaid order to be cancelled",
            Duration::from_secs(20),
            || async {
                let body = self.ticket(ticket, user).await;
                (body["status"] == "cancelled").then_some(body)
            },
        )
        .await
    }
}

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
async fn an_unpaid_order_is_cancelled_at_its_deadline_and_its_unit_sold_again() {
    let sale = Sale::new().await;
    let product = sale.product(1, 2).await;
    let order = sale.confirmed(product, 11).await;
    let ticket = order["ticket"].as_str().unwrap();
    let pay_by = order["pay_by_ms"].as_i64().unwrap();
    let (status, _) = sale.gw.buy(product, 12).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "sold out while the order awaits payment"
    );

    let cancelled = sale.cancelled(ticket, 11).await;
    assert_eq!(cancelled["reason"], "payment_timeout", "{cancelled}");
    let at = cancelled["cancelled_at_ms"].as_i64().unwrap();
    assert!(
        at >= pay_by && at - pay_by < 1500,
        "cancelled {} ms after the deadline",
        at - pay_by
    );
    let (status, body) = sale.pay(ticket, 11, "late").await;
    assert_eq!(
        (status, body["state"].as_str()),
        (StatusCode::CONFLICT, Some("cancelled")),
        "{body}"
    );

    // The unit is on sale again, to someone else.
    let other = sale.buy_when_back(product, 12).await;
    assert_eq!(other["status"], "confirmed", "{other}");
    assert_eq!(sale.env.mysql_stock(product).await, 0);
    assert_eq!(sale.env.redis_stock(product).await, 0);
    // The first buyer was freed: their own order page shows their cancelled ticket.
    let (status, mine) = sale
        .gw
        .get_as(&format!("/v1/seckill/{product}/order"), Some(11))
        .await;
    assert_eq!(
        (status, mine["status"].as_str()),
        (StatusCode::OK, Some("cancelled")),
        "{mine}"
    );
}

#[tokio::test]
async fn a_buyer_cancels_and_the_unit_goes_back_at_once() {
    let sale = Sale::new().await;
    let product = sale.product(1, 60).await;
    let ticket = sale.confirmed_ticket(product, 13).await;
    let (status, body) = sale.cancel(&ticket, 13).await;
    assert_eq!(
        (status, body["status"].as_str(), body["reason"].as_str()),
        (StatusCode::OK, Some("cancelled"), Some("buyer_cancelled")),
        "{body}"
    );
    assert_eq!(
        sale.env.redis_stock(product).await,
        1,
        "back in Redis before the answer"
    );
    assert_eq!(sale.env.mysql_stock(product).await, 1);
    // Again: the same answer, no second unit.
    let (status, again) = sale.cancel(&ticket, 13).await;
    assert_eq!(
        (status, again["status"].as_str()),
        (StatusCode::OK, Some("cancelled")),
        "{again}"
    );
    assert_eq!(sale.env.redis_stock(product).await, 1);
    // Someone else buys it; the canceller, freed, may buy again but it is sold out now.
    let other = sale.confirmed(product, 14).await;
    assert_eq!(other["status"], "confirmed");
    let (status, _) = sale.gw.buy(product, 13).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(sale.stocks(product).await, (0, 0));
}

#[tokio::test]
async fn a_payment_that_lands_after_the_cancel_is_refund_due_and_nothing_is_oversold() {
    let sale = Sale::new().await;
    let product = sale.product(1, 2).await;
    let ticket = sale.confirmed_ticket(product, 15).await;
    let (status, paid) = sale.pay(&ticket, 15, "slow").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paid}");
    sale.cancelled(&ticket, 15).await;
    let other = sale.buy_when_back(product, 16).await;
    assert_eq!(other["status"], "confirmed");

    // The provider's success arrives now: the order stays cancelled, the payment is refunded.
    let payment_id = paid["payment_id"].as_str().unwrap();
    let (status, body) = sale.callback(payment_id, "succeeded").await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("refund_due")),
        "{body}"
    );
    assert_eq!(sale.payment_status(payment_id).await, "refund_due");
    assert_eq!(sale.ticket(&ticket, 15).await["status"], "cancelled");
    assert_eq!(
        sale.gw
            .metric(r#"seckill_gateway_payments_total{status="refund_due"}"#)
            .await,
        1.0
    );
    // One unit, one live order.
    let live: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status <> 'cancelled'",
    )
    .bind(product.as_i64())
    .fetch_one(&sale.env.db)
    .await
    .unwrap();
    assert_eq!(live, 1);
    assert_eq!(sale.stocks(product).await, (0, 0));
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

#[tokio::test]
async fn a_cancel_interrupted_after_its_commit_gives_its_unit_back_exactly_once() {
    let sale = Sale::new().await;
    let product = sale.product(3, 60).await;
    let mut tickets = vec![];
    for user in 20..23 {
        tickets.push(sale.confirmed_ticket(product, user).await);
    }
    // A worker's expiry round commits the cancels, then crashes before Redis: MySQL has the
    // units back, Redis not yet.
    sqlx::query("UPDATE orders SET pay_by_ms = ? WHERE product_id = ?")
        .bind(now_ms() + 3_600_000)
        .bind(product.as_i64())
        .execute(&sale.env.db)
        .await
        .unwrap();
    let crashed = cancel::cancel_overdue(&sale.env.db, now_ms() + 3_700_000, 100)
        .await
        .unwrap();
    assert_eq!(crashed.len(), 3);
    // Checked while the cancels still look an hour in the future, so the running worker
    // cannot have given the units back yet.
    assert_eq!(sale.stocks(product).await, (3, 0));
    // It committed with a clock an hour ahead; set the cancels to a few seconds ago, past the
    // grace a live round gets to finish its own give-back.
    sqlx::query("UPDATE orders SET cancelled_at_ms = ? WHERE product_id = ?")
        .bind(now_ms() - 5_000)
        .bind(product.as_i64())
        .execute(&sale.env.db)
        .await
        .unwrap();
    // The running worker finds them (`restore_due`) and gives each unit back.
    eventually(
        "the interrupted cancels finished",
        Duration::from_secs(20),
        || async { (sale.env.redis_stock(product).await == 3).then_some(()) },
    )
    .await;
    // Running the give-back again, as a second crashed worker would, changes nothing.
    let again = cancel::give_back(&sale.env.store, &sale.env.db, &crashed, now_ms())
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(sale.env.redis_stock(product).await, 3);
    let due: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE restore_due = 1")
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    assert_eq!(due, 0);
    for (t, user) in tickets.iter().zip(20..) {
        assert_eq!(sale.ticket(t, user).await["status"], "cancelled");
    }
}

#[tokio::test]
async fn a_product_without_a_window_sells_final_orders_as_before() {
    let sale = Sale::new().await;
    let product = sale.env.product(&sale.gw, 1).await;
    let order = sale.confirmed(product, 30).await;
    assert!(order.get("pay_by_ms").is_none(), "{order}");
    let ticket = order["ticket"].as_str().unwrap();
    let (status, body) = sale.pay(ticket, 30, "k").await;
    assert_eq!(
        (status, body["state"].as_str()),
        (StatusCode::CONFLICT, Some("confirmed")),
        "{body}"
    );
    let (status, body) = sale.cancel(ticket, 30).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // Bad terms are refused.
    for bad in [
        json!({"price": -1}),
        json!({"currency": "eur"}),
        json!({"payment_window_secs": 604801}),
        json!({"price": 1.5}),
    ] {
        let mut b = json!({"name": "x", "stock": 1});
        b.as_object_mut()
            .unwrap()
            .extend(bad.as_object().unwrap().clone());
        let (status, body) = sale.gw.admin_post("/admin/products", b).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
}

#[tokio::test]
async fn a_rebuild_after_redis_lost_the_sale_keeps_paid_cancelled_and_every_unit_once() {
    let sale = Sale::new().await;
    let product = sale.product(4, 60).await;
    let mut t = vec![];
    for user in 40..44 {
        t.push(sale.confirmed_ticket(product, user).await);
    }
    // 40 pays, 41 cancels, 42's order is cancelled by an expiry that crashed after its commit
    // (its unit is back in MySQL, not yet in Redis), 43 waits to pay.
    let (_, paid) = sale.pay(&t[0], 40, "k").await;
    sale.callback(paid["payment_id"].as_str().unwrap(), "succeeded")
        .await;
    assert_eq!(sale.cancel(&t[1], 41).await.0, StatusCode::OK);
    sqlx::query("UPDATE orders SET pay_by_ms = 0 WHERE ticket = ?")
        .bind(&t[2])
        .execute(&sale.env.db)
        .await
        .unwrap();
    // Stop the expiry from finishing it: the cancel is committed as of a moment ago. Every
    // test's worker runs an expiry round every 100 ms over the whole database, so one of them
    // may cancel it first and finish it, restore and all (or this call may take another
    // test's overdue order too): what follows must hold either way.
    let crashed = cancel::cancel_overdue(&sale.env.db, now_ms(), 100)
        .await
        .unwrap();
    if !crashed.iter().any(|c| c.ticket.as_str() == t[2]) {
        eprintln!("a worker's expiry round took 42's order before this test could");
        eventually("42's order cancelled", Duration::from_secs(10), || async {
            let status: String = sqlx::query_scalar("SELECT status FROM orders WHERE ticket = ?")
                .bind(&t[2])
                .fetch_one(&sale.env.db)
                .await
                .unwrap();
            (status == "cancelled").then_some(())
        })
        .await;
    }
    // Redis loses everything of the sale, then it is rebuilt from MySQL.
    sale.env.lose_redis_keys(&format!("{product}}}*")).await;
    let (status, body) = sale
        .gw
        .admin_post(&format!("/admin/products/{product}/reconcile"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Whatever the expiry's restore round does now, 41's and 42's units are back once each.
    eventually(
        "no cancel left to restore",
        Duration::from_secs(20),
        || async {
            let due: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE restore_due = 1")
                .fetch_one(&sale.env.db)
                .await
                .unwrap();
            (due == 0).then_some(())
        },
    )
    .await;
    assert_eq!(sale.stocks(product).await, (2, 2));
    assert_eq!(sale.ticket(&t[0], 40).await["status"], "paid");
    let b = sale.ticket(&t[1], 41).await;
    assert_eq!(
        (b["status"].as_str(), b["reason"].as_str()),
        (Some("cancelled"), Some("buyer_cancelled")),
        "{b}"
    );
    assert_eq!(sale.ticket(&t[2], 42).await["status"], "cancelled");
    assert_eq!(sale.ticket(&t[3], 43).await["status"], "confirmed");
    // The holders still hold (a second buy answers their ticket); the two units sell once each.
    let (status, again) = sale.gw.buy(product, 43).await;
    assert_eq!(
        (status, again["ticket"].as_str()),
        (StatusCode::OK, Some(t[3].as_str())),
        "{again}"
    );
    for user in [50, 51] {
        sale.confirmed(product, user).await;
    }
    let (status, _) = sale.gw.buy(product, 52).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(sale.stocks(product).await, (0, 0));
}

/// Pays each `(ticket, user)` twice at once, with two keys: each pair must answer one `202`
/// and one `409 payment_in_progress`, and the provider be asked once per ticket. The charges
/// asked for in all.
async fn pay_twice_at_once(sale: &Sale, tickets: &[(String, u64)]) -> usize {
    let answers = futures::future::join_all(tickets.iter().map(|(t, user)| async move {
        let (a, b) = tokio::join!(sale.pay(t, *user, "tap-1"), sale.pay(t, *user, "tap-2"));
        (t.clone(), a, b)
    }))
    .await;
    let charges = sale.provider.charges();
    for (ticket, (s1, b1), (s2, b2)) in &answers {
        let mut statuses = [*s1, *s2];
        statuses.sort();
        assert_eq!(
            statuses,
            [StatusCode::ACCEPTED, StatusCode::CONFLICT],
            "{ticket}: {b1} {b2}"
        );
        let refused = if *s1 == StatusCode::CONFLICT { b1 } else { b2 };
        assert_eq!(refused["error"], "payment_in_progress", "{refused}");
        let asked = charges.iter().filter(|c| &c.ticket == ticket).count();
        assert_eq!(asked, 1, "{ticket}: the provider was asked {asked} times");
    }
    charges.len()
}

/// Two pays of one order at once with two keys (a double tap, or two devices), for many
/// orders: for each, one attempt is sent and the other answers `409 payment_in_progress`,
/// and the provider is asked to charge once. The in-progress check and the insert used to be
/// two statements, and both pays of about one order in six passed the check.
#[tokio::test]
async fn two_pays_of_one_order_at_once_charge_once() {
    let sale = Sale::new().await;
    const N: u64 = 30;
    let product = sale.product(N as i64, 600).await;
    let mut tickets = Vec::new();
    for user in 1..=N {
        tickets.push((sale.confirmed_ticket(product, 500 + user).await, 500 + user));
    }
    let charges = pay_twice_at_once(&sale, &tickets).await;
    assert_eq!(charges, N as usize);
}

/// An attempt the provider never took (it was down) does not block the order until its
/// window closes: a pay with another key sends that attempt again, under its own payment id
/// (which the provider dedupes by), and never a second payment beside it.
#[tokio::test]
async fn a_pay_after_an_unsent_attempt_sends_that_attempt_again() {
    let sale = Sale::new().await;
    let product = sale.product(1, 600).await;
    let ticket = sale.confirmed_ticket(product, 21).await;
    sale.provider
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (status, body) = sale.pay(&ticket, 21, "first-device").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    sale.provider
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // While the first attempt may still be on its way (a call to the provider takes up to
    // its timeout, 3 s here), another key waits; then it sends that attempt.
    let body = eventually(
        "a second pay to be sent",
        Duration::from_secs(15),
        || async {
            let (status, body) = sale.pay(&ticket, 21, "second-device").await;
            match status {
                StatusCode::ACCEPTED => Some(body),
                StatusCode::CONFLICT => {
                    assert_eq!(body["error"], "payment_in_progress", "{body}");
                    None
                }
                _ => panic!("{status}: {body}"),
            }
        },
    )
    .await;
    let first: String = sqlx::query_scalar(
        "SELECT payment_id FROM payments WHERE ticket = ? AND idempotency_key = 'first-device'",
    )
    .bind(&ticket)
    .fetch_one(&sale.env.db)
    .await
    .unwrap();
    assert_eq!(
        body["payment_id"],
        first.as_str(),
        "the unsent attempt, sent again"
    );
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM payments WHERE ticket = ?")
        .bind(&ticket)
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    assert_eq!(n, 1, "no second attempt beside it");
    let charges = sale.provider.charges();
    assert_eq!(charges.len(), 1);
    assert_eq!(charges[0].payment_id, first);
    // The first key now answers the same payment, in progress, and charges nothing more.
    let (status, again) = sale.pay(&ticket, 21, "first-device").await;
    assert_eq!(
        (status, &again["payment_id"]),
        (StatusCode::ACCEPTED, &body["payment_id"])
    );
    assert_eq!(sale.provider.charges().len(), 1);
}

/// Two pays at once after a pay the provider never took (it was down): only one sends that
/// attempt again; the other answers `409 payment_in_progress`, and the provider is asked to
/// charge each order once. Found from outside: both read the unsent attempt under the order's
/// lock one after the other, and both sent it (6 of 20 orders asked to charge twice).
#[tokio::test]
async fn two_pays_at_once_after_an_unsent_attempt_send_it_once() {
    let sale = Sale::new().await;
    const N: u64 = 12;
    let product = sale.product(N as i64, 600).await;
    let mut tickets = Vec::new();
    for user in 1..=N {
        tickets.push((sale.confirmed_ticket(product, 700 + user).await, 700 + user));
    }
    sale.provider
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    for (t, user) in &tickets {
        let (status, body) = sale.pay(t, *user, "first").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    }
    sale.provider
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    // As the outside test did: wait past the time a call to the provider can take (its
    // timeout, 3 s, + 1 s), read from MySQL, so the attempts are free to send whatever claim
    // they held.
    let newest: i64 = sqlx::query_scalar("SELECT MAX(created_at_ms) FROM payments")
        .fetch_one(&sale.env.db)
        .await
        .unwrap();
    let wait_ms = (newest + 4_100 - now_ms()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait_ms)).await;
    pay_twice_at_once(&sale, &tickets).await;
}

/// A callback the provider never sends: the gateway asks the provider about a payment still
/// waiting after `SECKILL_PAYMENT_RECONCILE_AFTER_MS`, and settles it as the callback would
/// have. One the provider decided pays the order; one the provider never took (it forgot
/// it) is declined, and the buyer pays again. Before, both stayed `processing` until the
/// window closed, and the second blocked every new key.
#[tokio::test]
async fn a_callback_that_never_comes_is_asked_for() {
    let sale = Sale::new_with(|s| s.payment_reconcile_after_ms = 300).await;
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

/// The expiry takes the product's row before the overdue orders' rows, as a batch and a
/// buyer's cancel do. It used to lock the orders first and the product second: a batch that
/// holds the product's row and reads a redelivered order's row `FOR UPDATE` met it the other
/// way round, and InnoDB rolled one of them back (a deadlock).
#[tokio::test]
async fn the_expiry_locks_the_product_before_the_orders_as_a_batch_does() {
    let sale = Sale::new().await;
    let product = sale.product(3, 60).await;
    let ticket = sale.confirmed_ticket(product, 30).await;
    // A batch: the product's row first.
    let mut batch = sale.env.db.begin().await.unwrap();
    sqlx::query("SELECT id FROM products WHERE id = ? FOR UPDATE")
        .bind(product.as_i64())
        .fetch_optional(&mut *batch)
        .await
        .unwrap();
    // An expiry round with the deadline passed, meanwhile: it waits for a lock. (A pool of
    // its own: waiting for one of the shared pool's connections is not what is tested.)
    use secrecy::ExposeSecret;
    let db = seckill_shared::db::pool(sale.env.settings.mysql_url.expose_secret(), 1).unwrap();
    let expiry =
        tokio::spawn(async move { cancel::cancel_overdue(&db, now_ms() + 3_600_000, 100).await });
    let probe = seckill_shared::db::pool(sale.env.settings.mysql_url.expose_secret(), 1).unwrap();
    eventually(
        "the expiry waits for the product's row",
        Duration::from_secs(10),
        || async {
            // A statement of this test's database on the products' rows, still running: the
            // expiry's lock of them (or, before, its stock update after the orders' locks).
            let waiting: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE DB = DATABASE() AND (INFO LIKE 'SELECT id FROM products WHERE id IN%' \
                 OR INFO LIKE 'UPDATE products SET stock%')",
            )
            .fetch_one(&probe)
            .await
            .unwrap();
            (waiting > 0).then_some(())
        },
    )
    .await;
    // The batch then reads the order's row, as for a redelivered message.
    let order = sqlx::query("SELECT id FROM orders WHERE ticket = ? FOR UPDATE")
        .bind(ticket.as_str())
        .fetch_optional(&mut *batch)
        .await;
    assert!(order.is_ok(), "the batch gets the order's row: {order:?}");
    batch.commit().await.unwrap();
    let cancelled = tokio::time::timeout(Duration::from_secs(10), expiry)
        .await
        .expect("the expiry goes on once the batch commits")
        .unwrap()
        .expect("the expiry was not rolled back");
    assert_eq!(cancelled.len(), 1);
}
