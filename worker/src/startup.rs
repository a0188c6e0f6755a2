//! Building and running a worker.

use crate::announce::Announcer;
use crate::consume::{Assignment, DetachedClose, Pipeline, WorkerContext};
use crate::health;
use crate::metrics::Metrics;
use actix_web::dev::Server;
use anyhow::Context;
use backon::{ExponentialBuilder, Retryable};
use rdkafka::consumer::{Consumer, StreamConsumer};
use seckill_shared::live::LivePublisher;
use seckill_shared::settle::{BatchReport, Chaos, Settler};
use seckill_shared::store::TicketStore;
use seckill_shared::{db, kafka, recovery, sold_out, OrderMessage, Settings};
use secrecy::ExposeSecret;
use std::future::Future;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub struct Worker {
    settings: Settings,
    pipeline: Pipeline,
    announcer_stop: CancellationToken,
    /// The group's committed offsets, for the sweeper.
    offsets: kafka::GroupOffsets,
    assigned: Assignment,
    http: std::sync::Mutex<Option<Server>>,
    port: u16,
}

/// Retries `op` with backoff until it succeeds or `limit` has passed.
async fn with_retry<T, F, Fut>(what: &str, limit: Duration, op: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let policy = ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(3))
        .without_max_times()
        .with_total_delay(Some(limit));
    op.retry(policy)
        .sleep(tokio::time::sleep)
        .notify(|e, _| tracing::warn!(error = format!("{e:#}"), "{what} failed; retrying"))
        .await
        .with_context(|| format!("{what} (gave up after {limit:?})"))
}

impl Worker {
    /// Applies migrations, creates the topic when it is missing, joins the consumer group and
    /// binds the health listener (port 0 picks a free one). Waits up to a minute for MySQL and
    /// Kafka to come up.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        if settings.chaos.enabled() {
            tracing::warn!(
                fail_users = %settings.chaos.fail_users,
                fail_rate = settings.chaos.fail_rate,
                delay_ms = settings.chaos.delay_ms,
                "FAULT INJECTION IS ON: orders will be failed on purpose"
            );
        }
        let pool = db::pool(settings.mysql.url.expose_secret(), 8)?;
        let startup_limit = Duration::from_secs(60);
        with_retry("applying migrations", startup_limit, || db::migrate(&pool)).await?;
        with_retry(
            "claiming the database for this namespace",
            startup_limit,
            || db::claim_namespace(&pool, &settings.common.namespace),
        )
        .await?
        .ensure_ours(&settings.common.namespace, "the worker cannot start")?;
        with_retry("creating the Kafka topic", startup_limit, || {
            kafka::ensure_replicated_topic(
                &settings.kafka.brokers,
                &settings.kafka.topic,
                settings.kafka.partitions,
                settings.kafka.replication_factor,
            )
        })
        .await?;

        let store = TicketStore::from_settings(&settings.redis, &settings.common.namespace)?;
        let metrics = Metrics::new();
        metrics
            .pending_timeout
            .set(settings.worker.pending_timeout().as_secs_f64());
        let assigned: Assignment = Arc::default();
        let consumer: StreamConsumer<WorkerContext> =
            kafka::consumer_config(&settings.kafka, &settings.worker)
                .create_with_context(WorkerContext {
                    assigned: assigned.clone(),
                    metrics: metrics.clone(),
                })
                .context("creating the Kafka consumer")?;
        let consumer = Arc::new(DetachedClose::new(consumer));

        let listener = TcpListener::bind(&settings.worker.http_addr).with_context(|| {
            format!(
                "binding SECKILL_WORKER_HTTP_ADDR={}",
                settings.worker.http_addr
            )
        })?;
        let port = listener.local_addr()?.port();
        let http = health::server(
            listener,
            store.clone(),
            pool.clone(),
            assigned.clone(),
            metrics.clone(),
        )?;

        let zk = Arc::new(sold_out::Publisher::new(
            &settings.zookeeper.hosts,
            &settings.common.namespace,
        ));
        let announcer_stop = CancellationToken::new();
        Ok(Self {
            pipeline: Pipeline {
                consumer,
                settler: Settler {
                    store,
                    db: pool,
                    chaos: Chaos::from_settings(&settings.chaos),
                    ids: Default::default(),
                },
                metrics,
                announcer: Announcer::start(zk.clone(), announcer_stop.clone()),
                fence: Arc::new(kafka::Fence::new(&settings.kafka, &settings.worker.group)?),
                topic: settings.kafka.topic.clone(),
                batch_size: settings.worker.batch_size,
                linger: settings.worker.batch_linger(),
            },
            announcer_stop,
            offsets: kafka::GroupOffsets::new(&settings.kafka, &settings.worker.group)?,
            settings,
            assigned,
            http: std::sync::Mutex::new(Some(http)),
            port,
        })
    }

    /// One batch through every step, in a row: settle these orders and tell the gateways about
    /// units given back. Tests drive the worker with it, without Kafka timing.
    pub async fn process(&self, orders: &[OrderMessage]) -> anyhow::Result<BatchReport> {
        self.pipeline.process(orders).await
    }

    /// Port of the health listener.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The partitions assigned now; shared, so it stays live after `run_until_stopped` takes
    /// the worker.
    pub fn assignment(&self) -> Assignment {
        self.assigned.clone()
    }

    /// Consumes until `shutdown` is cancelled: finishes the batch in hand, commits, leaves the
    /// group and stops the health listener.
    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let http = self
            .http
            .lock()
            .expect("lock poisoned")
            .take()
            .expect("run once");
        // Subscribed here, not in `build`: a worker that is built and dropped without running
        // (tests drive `process` that way) then never joins the group. Closing a consumer
        // whose first assignment is still on its way can hang in librdkafka
        // (confluentinc/librdkafka#4884).
        self.pipeline
            .consumer
            .subscribe(&[&self.settings.kafka.topic])
            .context("subscribing to the order topic")?;
        let http_handle = http.handle();
        let http_task = tokio::spawn(http);
        let live = tokio::spawn(
            crate::live::LiveLoop {
                store: self.pipeline.settler.store.clone(),
                db: self.pipeline.settler.db.clone(),
                assigned: self.assigned.clone(),
                metrics: self.pipeline.metrics.clone(),
                publisher: LivePublisher::new(
                    self.pipeline.settler.store.connection(),
                    &self.settings.common.namespace,
                ),
            }
            .run(shutdown.clone()),
        );
        let sweeper = tokio::spawn(
            crate::sweep::Sweeper {
                store: self.pipeline.settler.store.clone(),
                db: self.pipeline.settler.db.clone(),
                announcer: self.pipeline.announcer.clone(),
                offsets: self.offsets.clone(),
                fence: self.pipeline.fence.clone(),
                rules: recovery::SweepRules {
                    timeout: self.settings.worker.pending_timeout(),
                    last_resort: self.settings.worker.pending_last_resort(),
                },
                metrics: self.pipeline.metrics.clone(),
            }
            .run(shutdown.clone()),
        );
        let expirer = tokio::spawn(
            crate::expire::Expirer {
                store: self.pipeline.settler.store.clone(),
                db: self.pipeline.settler.db.clone(),
                announcer: self.pipeline.announcer.clone(),
                metrics: self.pipeline.metrics.clone(),
                crash: seckill_shared::crash_point::CrashPoint::new(
                    self.settings.chaos.abort_after_expiry,
                ),
            }
            .run(shutdown.clone()),
        );
        self.pipeline.consume(&shutdown).await;
        // Both stop at their next wait; one in the middle of a step that hangs on a dependency
        // is given up on, as a crash would be (every step they take is safe to redo).
        for (name, task) in [("sweeper", sweeper), ("expiry", expirer)] {
            let abort = task.abort_handle();
            if tokio::time::timeout(crate::consume::LEAVE_TIMEOUT, task)
                .await
                .is_err()
            {
                tracing::warn!("the {name} did not stop in time; abandoned");
                abort.abort();
            }
        }
        self.announcer_stop.cancel();
        live.abort();
        // Closing the consumer blocks on the broker (and can hang: confluentinc/librdkafka#4884),
        // so it happens off the runtime's threads, bounded. (Were another handle still alive,
        // the last one's drop closes it on a thread of its own.)
        let consumer = self.pipeline.consumer;
        match tokio::time::timeout(
            crate::consume::LEAVE_TIMEOUT,
            tokio::task::spawn_blocking(move || {
                if let Ok(only) = Arc::try_unwrap(consumer) {
                    drop(only.into_inner());
                }
            }),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "closing the consumer failed"),
            Err(_) => tracing::warn!(
                "closing the consumer hangs (confluentinc/librdkafka#4884); exiting without"
            ),
        }
        http_handle.stop(true).await;
        let _ = http_task.await;
        tracing::info!("worker stopped");
        Ok(())
    }
}
