//! `TestEnv`: one test's private slice of the real services, with typed helpers.

use actix_web::{web, App, HttpResponse, HttpServer};
use anyhow::Context;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use reqwest::StatusCode;
use seckill_gateway::Application;
use seckill_shared::payments::Charge;
use seckill_shared::store::TicketStore;
use seckill_shared::{db, kafka, LogFormat, OrderMessage, ProductId, Settings, Ticket};
use seckill_worker::Worker;
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, Once};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The admin token of every test gateway and worker (at least 32 bytes, as the programs require).
pub const ADMIN_TOKEN: &str = "test-admin-token-of-32-bytes-or-more";

/// The secret the test gateways sign waiting-room admissions with.
pub const ADMISSION_SECRET: &str = "test-admission-secret-of-32-bytes-or-more";

/// The HS256 secret every test gateway verifies buyer tokens with.
pub const JWT_SECRET: &str = "test-hs256-secret-of-32-bytes-or-more";

/// A buyer's token for `user`, valid for 10 minutes.
pub fn token(user: u64) -> String {
    seckill_gateway::auth::mint_hs256(
        JWT_SECRET,
        seckill_shared::UserId::new(user).expect("a user id"),
        600,
        None,
        None,
    )
    .expect("signing a test token")
}

/// Polls `check` every 50 ms until it returns `Some`, or fails the test after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub struct TestEnv {
    pub settings: Settings,
    pub db: MySqlPool,
    pub store: TicketStore,
    /// When the test began, for the panics it must answer for ([`PANICS`]).
    born: Instant,
    /// The gateway and worker tasks of this test that ended with an error.
    ended_badly: Arc<Mutex<Vec<String>>>,
}

/// Every panic in this test process: when, on which thread, and what. A panic in a task or a
/// thread of an in-process gateway or worker does not fail its test by itself (the task just
/// ends, or actix restarts the thread), so [`TestEnv`]'s drop looks here.
static PANICS: LazyLock<Mutex<Vec<(Instant, String, String)>>> = LazyLock::new(Mutex::default);

fn watch_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current()
                .name()
                .unwrap_or("<unnamed>")
                .to_owned();
            PANICS.lock().unwrap_or_else(|e| e.into_inner()).push((
                Instant::now(),
                thread,
                info.to_string(),
            ));
            default(info);
        }));
    });
}

/// At the end of each test: every in-process gateway and worker task still runs or ended
/// `Ok`, and nothing panicked since the test began, on its own thread (where its tasks run)
/// or on a thread of no test (the gateways' actix threads, librdkafka's, tokio's blocking
/// pool). Panics on other tests' threads are theirs. A test that fails already is left to
/// its own failure.
impl Drop for TestEnv {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let me = std::thread::current().name().unwrap_or_default().to_owned();
        let panics: Vec<String> = PANICS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(at, thread, _)| *at >= self.born && (*thread == me || !thread.contains("::")))
            .map(|(_, thread, what)| format!("{thread}: {what}"))
            .collect();
        let ended = self.ended_badly.lock().unwrap().clone();
        assert!(
            panics.is_empty() && ended.is_empty(),
            "the test passed, but something under it did not: panics {panics:#?}, tasks that ended with an error {ended:#?}"
        );
    }
}

impl TestEnv {
    /// A fresh namespace on the servers named by the `SECKILL_*` environment (or the dev-up
    /// defaults).
    pub async fn new() -> Self {
        Self::new_with(|_| {}).await
    }

    /// [`Self::new`], with the settings changed by `tweak` before anything connects (say, to
    /// a Redis server of the test's own).
    pub async fn new_with(tweak: impl FnOnce(&mut Settings)) -> Self {
        watch_panics();
        let born = Instant::now();
        if std::env::var("TEST_LOG").is_ok() {
            seckill_shared::telemetry::init(LogFormat::Pretty);
        }
        let base = Settings::load(None).expect("loading settings from the environment");
        let ns = format!("t{:012x}", rand::random::<u64>() >> 16);
        let server_url = base
            .mysql_url
            .expose_secret()
            .rsplit_once('/')
            .expect("mysql url has a database")
            .0
            .to_owned();
        let root = MySqlPool::connect(&format!("{server_url}/mysql"))
            .await
            .expect("connecting to MySQL");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `sk_{ns}`")))
            .execute(&root)
            .await
            .unwrap();
        root.close().await;

        let mut settings = base.clone();
        settings.namespace = ns.clone();
        settings.mysql_url = format!("{server_url}/sk_{ns}").into();
        settings.kafka_topic = format!("orders-{ns}");
        settings.worker_group = format!("workers-{ns}");
        settings.http_addr = "127.0.0.1:0".into();
        settings.worker_http_addr = "127.0.0.1:0".into();
        settings.admin_token = ADMIN_TOKEN.into();
        settings.auth_hs256_secret = JWT_SECRET.into();
        settings.admission_secret = ADMISSION_SECRET.into();
        // Every test client is 127.0.0.1; `auth.rs` tests the per-address limits on its own.
        settings.rate_limit_per_address_per_sec = 0;
        settings.admin_auth_failures_per_min = 0;
        settings.worker_batch_linger_ms = 5;
        settings.kafka_partitions = 4;
        settings.log_format = LogFormat::Pretty;
        tweak(&mut settings);

        let db = db::pool(settings.mysql_url.expose_secret(), 4).unwrap();
        db::migrate(&db).await.expect("migrating the test database");
        kafka::ensure_topic(
            &settings.kafka_brokers,
            &settings.kafka_topic,
            settings.kafka_partitions,
        )
        .await
        .expect("creating the test topic");
        let store = TicketStore::new(
            &settings.redis_topology().unwrap(),
            &ns,
            3600,
            Duration::from_secs(2),
        )
        .unwrap();
        Self {
            settings,
            db,
            store,
            born,
            ended_badly: Arc::default(),
        }
    }

    /// Runs a gateway's or worker's task, noting an error it ends with.
    fn spawn_checked<E>(
        &self,
        what: String,
        task: impl Future<Output = Result<(), E>> + Send + 'static,
    ) -> tokio::task::JoinHandle<Result<(), E>>
    where
        E: std::fmt::Debug + Send + 'static,
    {
        let ended = self.ended_badly.clone();
        tokio::spawn(async move {
            let result = task.await;
            if let Err(e) = &result {
                ended.lock().unwrap().push(format!("{what}: {e:?}"));
            }
            result
        })
    }

    pub async fn gateway(&self) -> TestGateway {
        self.gateway_with(|_| {}).await
    }

    pub async fn gateway_with(&self, tweak: impl FnOnce(&mut Settings)) -> TestGateway {
        let mut s = self.settings.clone();
        tweak(&mut s);
        let app = Application::build(s).await.expect("building the gateway");
        let gw = TestGateway {
            base: format!("http://127.0.0.1:{}", app.port()),
            // Idle connections are dropped before the server's 5 s keep-alive closes them.
            http: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
            owners: Default::default(),
        };
        self.spawn_checked(format!("gateway {}", gw.base), app.run_until_stopped());
        gw
    }

    pub async fn worker(&self) -> TestWorker {
        self.worker_with(|_| {}).await
    }

    pub async fn worker_with(&self, tweak: impl FnOnce(&mut Settings)) -> TestWorker {
        let mut s = self.settings.clone();
        tweak(&mut s);
        let worker = Worker::build(s).await.expect("building the worker");
        let assignment = worker.assignment();
        let stop = CancellationToken::new();
        let task = self.spawn_checked(
            "a worker".to_owned(),
            worker.run_until_stopped(stop.clone()),
        );
        TestWorker {
            stop,
            task,
            assignment,
        }
    }

    /// The environment a gateway or worker process needs to join this test's namespace,
    /// secrets included (both binaries refuse to start without an admin token unless `--dev`,
    /// and the gateway without an admission secret).
    pub fn process_env(&self) -> Vec<(String, String)> {
        let s = &self.settings;
        [
            ("SECKILL_REDIS_URL", s.redis_url.expose_secret()),
            ("SECKILL_MYSQL_URL", s.mysql_url.expose_secret()),
            ("SECKILL_KAFKA_BROKERS", &s.kafka_brokers),
            ("SECKILL_KAFKA_TOPIC", &s.kafka_topic),
            ("SECKILL_ZK_HOSTS", &s.zk_hosts),
            ("SECKILL_NAMESPACE", &s.namespace),
            ("SECKILL_WORKER_GROUP", &s.worker_group),
            ("SECKILL_WORKER_HTTP_ADDR", "127.0.0.1:0"),
            ("SECKILL_ADMIN_TOKEN", ADMIN_TOKEN),
            ("SECKILL_AUTH_HS256_SECRET", JWT_SECRET),
            ("SECKILL_ADMISSION_SECRET", ADMISSION_SECRET),
            ("SECKILL_RATE_LIMIT_PER_ADDRESS_PER_SEC", "0"),
            ("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "0"),
            ("SECKILL_LOG_FORMAT", "pretty"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// Creates a product through the admin API and loads it for sale.
    pub async fn product(&self, gw: &TestGateway, stock: i64) -> ProductId {
        let (status, body) = gw
            .admin_post(
                "/admin/products",
                json!({"name": "test item", "stock": stock}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let id = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
        let (status, body) = gw
            .admin_post(&format!("/admin/products/{id}/preload"), Value::Null)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        id
    }

    pub async fn mysql_stock(&self, product: ProductId) -> i64 {
        sqlx::query("SELECT stock FROM products WHERE id = ?")
            .bind(product.as_i64())
            .fetch_one(&self.db)
            .await
            .unwrap()
            .get("stock")
    }

    /// (ticket, user) of every order row of a product.
    pub async fn order_rows(&self, product: ProductId) -> Vec<(String, i64)> {
        sqlx::query("SELECT ticket, user_id FROM orders WHERE product_id = ? ORDER BY id")
            .bind(product.as_i64())
            .fetch_all(&self.db)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.get("ticket"), r.get("user_id")))
            .collect()
    }

    /// Deletes the Redis keys of this namespace whose hash-tag tail matches `pattern` (`*`
    /// for all, or a product id), as a Redis restart without persistence loses them.
    pub async fn lose_redis_keys(&self, pattern: &str) {
        let mut conn = self.store.connection();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("sk:{{{}:{pattern}", self.settings.namespace))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(!keys.is_empty(), "no Redis keys match {pattern}");
        let _: () = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    pub async fn redis_stock(&self, product: ProductId) -> i64 {
        self.store
            .stock(product)
            .await
            .unwrap()
            .expect("product is loaded")
    }

    /// Puts a message on the test topic directly, as a redelivery would.
    pub async fn publish_raw(&self, order: &OrderMessage) {
        let producer: FutureProducer = kafka::producer_config(&self.settings).create().unwrap();
        let payload = order.encode();
        producer
            .send(
                FutureRecord::to(&self.settings.kafka_topic)
                    .key(order.ticket.as_str())
                    .payload(&payload),
                Timeout::After(Duration::from_secs(5)),
            )
            .await
            .map_err(|(e, _)| e)
            .context("publishing a raw message")
            .unwrap();
    }
}

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

/// The secret the test payment provider signs callbacks with.
pub const WEBHOOK_SECRET: &str = "test-webhook-secret";

/// A provider that records the charges it is asked for and answers `201`, or `503` while
/// `down` is set.
#[derive(Clone, Default)]
pub struct Provider {
    pub charges: std::sync::Arc<std::sync::Mutex<Vec<Charge>>>,
    pub down: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// What `GET /charges/{payment_id}` says of a charge the test decided (without sending
    /// its callback): "succeeded" or "declined".
    pub decisions: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, String>>>,
}

impl Provider {
    pub async fn start() -> (Self, String) {
        let p = Provider::default();
        let state = p.clone();
        let server = HttpServer::new(move || {
            let state = state.clone();
            let seen = state.clone();
            App::new()
                .route(
                    "/charges",
                    web::post().to(move |charge: web::Json<Charge>| {
                        let state = state.clone();
                        async move {
                            if state.down.load(std::sync::atomic::Ordering::SeqCst) {
                                return HttpResponse::ServiceUnavailable().finish();
                            }
                            let id = charge.payment_id.clone();
                            state.charges.lock().unwrap().push(charge.into_inner());
                            HttpResponse::Created()
                                .json(json!({"payment_id": id, "status": "pending"}))
                        }
                    }),
                )
                .route(
                    "/charges/{payment_id}",
                    web::get().to(move |id: web::Path<String>| {
                        let state = seen.clone();
                        async move {
                            let id = id.into_inner();
                            if !state
                                .charges
                                .lock()
                                .unwrap()
                                .iter()
                                .any(|c| c.payment_id == id)
                            {
                                return HttpResponse::NotFound()
                                    .json(json!({"error": "no charge"}));
                            }
                            let decision = state.decisions.lock().unwrap().get(&id).cloned();
                            HttpResponse::Ok().json(json!({"payment_id": id, "decision": decision}))
                        }
                    }),
                )
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .unwrap();
        let url = format!("http://{}", server.addrs()[0]);
        tokio::spawn(server.run());
        (p, url)
    }

    pub fn charges(&self) -> Vec<Charge> {
        self.charges.lock().unwrap().clone()
    }
}

/// One sample's value in a Prometheus text; see [`TestGateway::metric`].
pub fn sample_value(text: &str, sample: &str) -> f64 {
    if let Some(v) = text.lines().find_map(|l| {
        l.strip_prefix(sample)
            .and_then(|rest| rest.strip_prefix(' '))
    }) {
        return v.trim().parse().unwrap();
    }
    assert_declared(text, sample.split('{').next().unwrap());
    0.0
}

/// Panics unless the Prometheus text declares the metric `family` (`_bucket`, `_sum`,
/// `_count` and `_total` samples count as their family's).
pub fn assert_declared(text: &str, family: &str) {
    let declared = text.lines().any(|l| {
        l.strip_prefix("# TYPE ")
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|name| {
                name == family
                    || family
                        .strip_prefix(name)
                        .is_some_and(|s| ["_bucket", "_sum", "_count", "_total"].contains(&s))
            })
    });
    assert!(declared, "no metric {family} in /metrics");
}

#[test]
fn a_missing_metric_is_not_read_as_zero() {
    let text = "# TYPE seckill_buys_total counter\nseckill_buys_total{outcome=\"accepted\"} 3\n\
                # TYPE seckill_wait_seconds histogram\nseckill_wait_seconds_count 2\n";
    assert_eq!(
        sample_value(text, "seckill_buys_total{outcome=\"accepted\"}"),
        3.0
    );
    assert_eq!(
        sample_value(text, "seckill_buys_total{outcome=\"sold_out\"}"),
        0.0
    );
    assert_eq!(sample_value(text, "seckill_wait_seconds_count"), 2.0);
    assert_eq!(sample_value(text, "seckill_wait_seconds_sum"), 0.0);
    let typo = std::panic::catch_unwind(|| sample_value(text, "seckill_buy_total"));
    assert!(typo.is_err(), "a metric that does not exist fails");
}
