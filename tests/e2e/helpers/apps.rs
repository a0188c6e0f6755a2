//! A gateway and a worker running in the test's process, on the test's namespace, and the ticket
//! of a buy's answer.

use super::basics::{eventually, token, ADMIN_TOKEN};
use super::metrics::sample_value;
use reqwest::StatusCode;
use seckill_shared::{ProductId, Ticket};
use serde_json::{json, Value};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub struct TestWorker {
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub assignment: seckill_worker::consume::Assignment,
}

impl TestWorker {
    pub fn partitions(&self) -> Vec<i32> {
        self.assignment.lock().unwrap().iter().copied().collect()
    }

    pub async fn shutdown(self) {
        self.stop.cancel();
        self.task.await.unwrap().unwrap();
    }
}

#[derive(Clone)]
pub struct TestGateway {
    pub base: String,
    pub http: reqwest::Client,
    /// The owner of each ticket this client was answered (or was told of with
    /// [`TestGateway::owns`]), so that polls of `/v1/orders/{ticket}` carry the owner's token,
    /// as a real client's would.
    pub owners: std::sync::Arc<dashmap::DashMap<String, u64>>,
}

impl TestGateway {
    /// A client of the gateway at `base`.
    pub fn at(base: String, http: reqwest::Client) -> Self {
        Self {
            base,
            http,
            owners: Default::default(),
        }
    }

    /// `user` buys one unit, with their token and their `user_id` in the body.
    pub async fn buy(&self, product: ProductId, user: u64) -> (StatusCode, Value) {
        let res = self
            .http
            .post(format!("{}/v1/seckill/{product}", self.base))
            .bearer_auth(token(user))
            .json(&json!({ "user_id": user }))
            .send()
            .await
            .expect("sending a buy");
        let status = res.status();
        let body: Value = res.json().await.expect("buy answers JSON");
        if let Some(ticket) = body["ticket"].as_str() {
            self.owns(ticket, user);
        }
        (status, body)
    }

    /// Records that `user` owns `ticket` (for tickets made without [`TestGateway::buy`]).
    pub fn owns(&self, ticket: &str, user: u64) {
        self.owners.insert(ticket.to_owned(), user);
    }

    /// `GET path`. A ticket poll (`/v1/orders/{ticket}`) carries its owner's token when the
    /// owner is known; anything else goes without a token.
    pub async fn get_json(&self, path: &str) -> (StatusCode, Value) {
        let owner = path
            .strip_prefix("/v1/orders/")
            .and_then(|t| self.owners.get(t).map(|u| *u));
        self.get_as(path, owner).await
    }

    /// `GET path` as `user` (with their token), or with no token.
    pub async fn get_as(&self, path: &str, user: Option<u64>) -> (StatusCode, Value) {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(user) = user {
            req = req.bearer_auth(token(user));
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(ADMIN_TOKEN);
        if !body.is_null() {
            req = req.json(&body);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn admin_get(&self, path: &str) -> (StatusCode, Value) {
        let res = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(ADMIN_TOKEN)
            .send()
            .await
            .unwrap();
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// Polls a ticket until it is confirmed or failed. A `503` (a product being rebuilt after
    /// a Redis loss) is polled again, as a client would after its `Retry-After`.
    pub async fn settled(&self, ticket: &str, timeout: Duration) -> Value {
        eventually(&format!("ticket {ticket} to settle"), timeout, || async {
            let (status, body) = self.get_json(&format!("/v1/orders/{ticket}")).await;
            if status == StatusCode::SERVICE_UNAVAILABLE {
                return None;
            }
            assert_eq!(status, StatusCode::OK, "{body}");
            (body["status"] != "pending").then_some(body)
        })
        .await
    }

    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The value of one sample of the Prometheus text, e.g. `name{label="x"}`: 0 for a sample
    /// of a declared metric that has none yet (a label set never counted), and a panic for a
    /// metric the gateway does not declare (a typo, or a metric gone), so that no check reads
    /// a missing metric as 0.
    pub async fn metric(&self, sample: &str) -> f64 {
        sample_value(&self.metrics().await, sample)
    }

    /// Waits until the gateway's ZooKeeper session and watch are up.
    pub async fn wait_for_zookeeper(&self) {
        eventually(
            "the gateway's ZooKeeper session",
            Duration::from_secs(20),
            || async {
                (self.metric("seckill_gateway_zookeeper_connected").await == 1.0).then_some(())
            },
        )
        .await
    }
}

pub fn ticket_of(body: &Value) -> Ticket {
    Ticket::parse(body["ticket"].as_str().expect("body has a ticket")).unwrap()
}
