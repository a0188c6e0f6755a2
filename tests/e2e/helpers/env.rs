//! `TestEnv`: one test's private slice of the real services (its own namespace: a MySQL
//! database, a Kafka topic and group, a Redis key prefix and a ZooKeeper root), with typed
//! helpers, and the panic watch every test ends with.

use super::apps::{TestGateway, TestWorker};
use super::basics::{ADMIN_TOKEN, ADMISSION_SECRET, JWT_SECRET};
use anyhow::Context;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use reqwest::StatusCode;
use seckill_gateway::Application;
use seckill_shared::store::TicketStore;
use seckill_shared::{db, kafka, LogFormat, OrderMessage, ProductId, Settings};
use seckill_worker::Worker;
use secrecy::ExposeSecret;
use serde_json::{json, Value};
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::future::Future;
use std::sync::{Arc, LazyLock, Mutex, Once};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

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
            // Logs only: traces are tried on processes of their own (`traces.rs`).
            let _ = seckill_shared::telemetry::init_with(
                LogFormat::Pretty,
                None,
                std::time::Duration::from_secs(2),
            );
        }
        let base = Settings::load(None).expect("loading settings from the environment");
        let ns = format!("t{:012x}", rand::random::<u64>() >> 16);
        let server_url = base
            .mysql
            .url
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
        settings.common.namespace = ns.clone();
        settings.mysql.url = format!("{server_url}/sk_{ns}").into();
        settings.kafka.topic = format!("orders-{ns}");
        settings.worker.group = format!("workers-{ns}");
        settings.gateway.http_addr = "127.0.0.1:0".into();
        settings.worker.http_addr = "127.0.0.1:0".into();
        settings.admin.token = ADMIN_TOKEN.into();
        settings.auth.hs256_secret = JWT_SECRET.into();
        settings.waiting_room.admission_secret = ADMISSION_SECRET.into();
        // Every test client is 127.0.0.1; `auth/limits.rs` tests the per-address limits on its
        // own.
        settings.gateway.rate_limit_per_address_per_sec = 0;
        settings.admin.auth_failures_per_min = 0;
        settings.worker.batch_linger_ms = 5;
        settings.kafka.partitions = 4;
        settings.common.log_format = LogFormat::Pretty;
        tweak(&mut settings);

        let db = db::pool(settings.mysql.url.expose_secret(), 4).unwrap();
        db::migrate(&db).await.expect("migrating the test database");
        kafka::ensure_topic(
            &settings.kafka.brokers,
            &settings.kafka.topic,
            settings.kafka.partitions,
        )
        .await
        .expect("creating the test topic");
        let store = TicketStore::new(
            &settings.redis.topology().unwrap(),
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
            ("SECKILL_REDIS_URL", s.redis.url.expose_secret()),
            ("SECKILL_MYSQL_URL", s.mysql.url.expose_secret()),
            ("SECKILL_KAFKA_BROKERS", &s.kafka.brokers),
            ("SECKILL_KAFKA_TOPIC", &s.kafka.topic),
            ("SECKILL_ZK_HOSTS", &s.zookeeper.hosts),
            ("SECKILL_NAMESPACE", &s.common.namespace),
            ("SECKILL_WORKER_GROUP", &s.worker.group),
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
            .arg(format!("sk:{{{}:{pattern}", self.settings.common.namespace))
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
        let producer: FutureProducer = kafka::producer_config(&self.settings.kafka)
            .create()
            .unwrap();
        let payload = order.encode();
        producer
            .send(
                FutureRecord::to(&self.settings.kafka.topic)
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
