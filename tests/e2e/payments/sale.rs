//! A sale with a payment window, and the test's hand in it: the provider the gateway charges,
//! the signed callbacks, the expiry and the buyer's cancel.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::payments;
use seckill_shared::{now_ms, ProductId};
use serde_json::{json, Value};
use sqlx::Row;
use std::time::Duration;

pub(crate) struct Sale {
    pub(crate) env: TestEnv,
    pub(crate) gw: TestGateway,
    pub(crate) provider: Provider,
    _worker: TestWorker,
}

impl Sale {
    pub(crate) async fn new() -> Self {
        Self::new_with(|_| {}).await
    }

    /// [`Sale::new`], with the gateway's settings changed by `tweak` too.
    pub(crate) async fn new_with(tweak: impl FnOnce(&mut seckill_shared::Settings)) -> Self {
        let env = TestEnv::new().await;
        let (provider, url) = Provider::start().await;
        let gw = env
            .gateway_with(|s| {
                s.payment.provider_url = url.clone();
                s.payment.callback_url = "http://gateway.invalid/v1/payments/callback".into();
                s.payment.webhook_secret = WEBHOOK_SECRET.into();
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
    pub(crate) async fn product(&self, stock: i64, window_secs: i64) -> ProductId {
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
    pub(crate) async fn confirmed(&self, product: ProductId, user: u64) -> Value {
        let (status, body) = self.gw.buy(product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let body = self
            .gw
            .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
            .await;
        assert_eq!(body["status"], "confirmed", "{body}");
        body
    }

    pub(crate) async fn post_as(
        &self,
        path: &str,
        user: u64,
        key: Option<&str>,
    ) -> (StatusCode, Value) {
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

    pub(crate) async fn pay(&self, ticket: &str, user: u64, key: &str) -> (StatusCode, Value) {
        self.post_as(&format!("/v1/orders/{ticket}/pay"), user, Some(key))
            .await
    }

    pub(crate) async fn cancel(&self, ticket: &str, user: u64) -> (StatusCode, Value) {
        self.post_as(&format!("/v1/orders/{ticket}/cancel"), user, None)
            .await
    }

    /// The provider's callback, signed with `secret` at `t`.
    pub(crate) async fn callback_signed(
        &self,
        body: &Value,
        secret: &str,
        t: i64,
    ) -> (StatusCode, Value) {
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

    pub(crate) async fn callback(&self, payment_id: &str, outcome: &str) -> (StatusCode, Value) {
        self.callback_signed(
            &json!({"payment_id": payment_id, "status": outcome}),
            WEBHOOK_SECRET,
            now_ms() / 1000,
        )
        .await
    }

    /// `user` buys as soon as a unit is back on sale (`202`), then waits for the order to
    /// settle; the settled ticket.
    pub(crate) async fn buy_when_back(&self, product: ProductId, user: u64) -> Value {
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
    pub(crate) async fn confirmed_ticket(&self, product: ProductId, user: u64) -> String {
        self.confirmed(product, user).await["ticket"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// (MySQL stock, Redis stock).
    pub(crate) async fn stocks(&self, product: ProductId) -> (i64, i64) {
        (
            self.env.mysql_stock(product).await,
            self.env.redis_stock(product).await,
        )
    }

    pub(crate) async fn ticket(&self, ticket: &str, user: u64) -> Value {
        let (status, body) = self
            .gw
            .get_as(&format!("/v1/orders/{ticket}"), Some(user))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    pub(crate) async fn payment_status(&self, payment_id: &str) -> String {
        sqlx::query("SELECT status FROM payments WHERE payment_id = ?")
            .bind(payment_id)
            .fetch_one(&self.env.db)
            .await
            .unwrap()
            .get("status")
    }

    /// Waits until the ticket is cancelled (by the workers' expiry).
    pub(crate) async fn cancelled(&self, ticket: &str, user: u64) -> Value {
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
