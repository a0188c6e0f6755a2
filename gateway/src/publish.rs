//! Hands orders to Kafka and waits for the broker's acknowledgement.

mod deliveries;
mod polled;

use anyhow::{anyhow, Context};
use deliveries::{Deliveries, Inbox, Pending};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;
use rdkafka::ClientConfig;
use seckill_shared::config::KafkaSettings;
use seckill_shared::kafka::{producer_config, TICKET_HEADER};
use seckill_shared::telemetry::TRACEPARENT;
use seckill_shared::OrderMessage;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The producer: librdkafka with its polling thread ([`polled`]), whose delivery reports go back to the
/// sending threads in batches ([`deliveries`]).
type KafkaProducer = polled::PolledProducer<Deliveries>;

/// How long a buy waits before it tries again when librdkafka's queue is full.
const QUEUE_FULL_RETRY: Duration = Duration::from_millis(100);

pub struct OrderPublisher {
    /// The producer and its generation. An idempotent producer that hits a fatal error (say,
    /// the broker lost its state) refuses every later message, so it is replaced.
    producer: RwLock<(u64, KafkaProducer)>,
    /// A replacement is being created.
    replacing: AtomicBool,
    /// When a delivery last succeeded (or the producer was created), ms since the epoch.
    last_delivery_ms: AtomicI64,
    config: ClientConfig,
    topic: String,
    timeout: Duration,
    /// Orders handed to Kafka whose delivery report has not come back yet: each one's unit is
    /// reserved in Redis and its buyer not yet answered (`seckill_gateway_awaiting_kafka`).
    awaiting: AtomicI64,
}

impl OrderPublisher {
    pub fn new(kafka: &KafkaSettings) -> anyhow::Result<Self> {
        let config = producer_config(kafka);
        let producer = create(&config).context("creating the Kafka producer")?;
        Ok(Self {
            producer: RwLock::new((0, producer)),
            replacing: AtomicBool::new(false),
            last_delivery_ms: AtomicI64::new(seckill_shared::now_ms()),
            config,
            topic: kafka.topic.clone(),
            timeout: kafka.delivery_timeout(),
            awaiting: AtomicI64::new(0),
        })
    }

    fn current(&self) -> (u64, KafkaProducer) {
        self.producer.read().expect("lock poisoned").clone()
    }

    /// The current producer's generation, without cloning the producer.
    fn generation(&self) -> u64 {
        self.producer.read().expect("lock poisoned").0
    }

    /// Notes a delivery. The time is written only once it has moved by a tenth of a second: it
    /// is judged in seconds, and a write on every accept would bounce its cache line between
    /// the HTTP worker threads.
    fn delivered(&self) {
        let now = seckill_shared::now_ms();
        if now - self.last_delivery_ms.load(Ordering::Relaxed) >= 100 {
            self.last_delivery_ms.store(now, Ordering::Relaxed);
        }
    }

    /// Replaces producer `generation` after a fatal error, once, however many requests saw it.
    /// The new producer is created off the runtime's threads and outside the lock, so no
    /// request waits on it: the others keep failing fast with the old one meanwhile.
    ///
    /// A producer that has delivered nothing for longer than twice the delivery timeout while
    /// deliveries kept failing is replaced too: after a broker lost its producer state (the
    /// local tansu broker on a restart), librdkafka's idempotent producer can keep failing
    /// every message with `UnknownProducerId` without ever raising a fatal error.
    async fn replace_if_fatal(&self, generation: u64, producer: &KafkaProducer) {
        let stuck_ms = seckill_shared::now_ms() - self.last_delivery_ms.load(Ordering::Relaxed);
        let (code, reason) = match producer.client().fatal_error() {
            Some((code, reason)) => (Some(code), reason),
            None if stuck_ms > 2 * self.timeout.as_millis() as i64 => (
                None,
                format!("no delivery for {stuck_ms} ms while deliveries failed"),
            ),
            None => return,
        };
        if self.replacing.swap(true, Ordering::SeqCst) {
            return; // another request is replacing it
        }
        let config = self.config.clone();
        let created = tokio::task::spawn_blocking(move || create(&config)).await;
        match created {
            Ok(Ok(fresh)) => {
                let unused = {
                    let mut slot = self.producer.write().expect("lock poisoned");
                    if slot.0 == generation {
                        tracing::error!(?code, %reason, "Kafka producer failed for good; replaced it");
                        // The fresh producer gets a full period before it can be judged stuck.
                        self.last_delivery_ms
                            .store(seckill_shared::now_ms(), Ordering::Relaxed);
                        std::mem::replace(&mut *slot, (generation + 1, fresh))
                    } else {
                        (generation, fresh)
                    }
                };
                // Dropping a producer joins its polling thread and flushes: not on this thread.
                tokio::task::spawn_blocking(move || drop(unused));
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "could not replace the failed Kafka producer")
            }
            Err(e) => tracing::error!(error = %e, "creating a Kafka producer panicked"),
        }
        self.replacing.store(false, Ordering::SeqCst);
    }

    /// Sends one order and waits for its delivery report, at most the delivery timeout.
    /// Returns where it landed: (partition, offset).
    ///
    /// The message has no key: librdkafka's sticky partitioner then sends a gateway's orders to
    /// one partition at a time, switching every `sticky.partitioning.linger.ms` (10 ms), so
    /// they fill one batch instead of one per partition (librdkafka sends each partition's
    /// batch in a request of its own). Over a sale they still reach every partition. The
    /// ticket is in the payload and the `ticket` header.
    ///
    /// `traceparent`, when traces are on, rides in the message's headers (W3C trace context),
    /// so the worker's spans of the order join its trace.
    pub async fn publish(
        &self,
        order: &OrderMessage,
        traceparent: Option<&str>,
    ) -> anyhow::Result<(i32, i64)> {
        let (generation, producer) = self.current();
        self.awaiting.fetch_add(1, Ordering::Relaxed);
        // Counted down however the send ends, a dropped request (the buyer gone) included.
        let _awaiting = CountDown(&self.awaiting);
        let result = self.send(&producer, order, traceparent).await;
        if result.is_ok() {
            self.delivered();
        } else {
            self.replace_if_fatal(generation, &producer).await;
        }
        if self.generation() != generation {
            // A replaced producer may be dropped here, its last user: that joins its polling
            // thread and flushes, which must not block this HTTP worker thread.
            tokio::task::spawn_blocking(move || drop(producer));
        }
        result
    }

    async fn send(
        &self,
        producer: &KafkaProducer,
        order: &OrderMessage,
        traceparent: Option<&str>,
    ) -> anyhow::Result<(i32, i64)> {
        let payload = order.encode();
        let mut headers = OwnedHeaders::new_with_capacity(2).insert(Header {
            key: TICKET_HEADER,
            value: Some(order.ticket.as_str()),
        });
        if let Some(tp) = traceparent {
            headers = headers.insert(Header {
                key: TRACEPARENT,
                value: Some(tp),
            });
        }
        let (reply, delivered) = oneshot::channel();
        let pending = Box::new(Pending {
            inbox: Inbox::current(),
            reply,
        });
        let mut record = BaseRecord::<(), _, _>::with_opaque_to(&self.topic, pending)
            .payload(&payload)
            .headers(headers);
        // A full queue is waited out for at most the delivery timeout. Once the order is
        // queued, librdkafka reports it within message.timeout.ms (the same timeout), so the
        // wait for its report is bounded from then on: an order is never given up on while
        // Kafka may still take it.
        let started = Instant::now();
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), again))
                    if started.elapsed() < self.timeout =>
                {
                    record = again;
                    tokio::time::sleep(QUEUE_FULL_RETRY).await;
                }
                Err((e, _)) => return Err(anyhow!(e).context("Kafka did not take the order")),
            }
        }
        match tokio::time::timeout(self.timeout + Duration::from_millis(500), delivered).await {
            Ok(Ok(Ok(landed))) => Ok(landed),
            Ok(Ok(Err(e))) => Err(anyhow!(e).context("Kafka did not take the order")),
            Ok(Err(_)) => Err(anyhow!("the Kafka producer dropped the order")),
            Err(_) => Err(anyhow!("Kafka delivery report timed out")),
        }
    }

    /// Orders handed to Kafka and not yet acknowledged (or refused), now.
    pub fn awaiting(&self) -> i64 {
        self.awaiting.load(Ordering::Relaxed)
    }

    /// Can the cluster be reached? Used by health checks.
    pub async fn check(&self) -> anyhow::Result<()> {
        let producer = self.current().1;
        let topic = self.topic.clone();
        tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_metadata(Some(&topic), Duration::from_secs(2))
                .map(drop)
                .context("fetching Kafka metadata")
        })
        .await
        .context("joining the metadata check")?
    }

    /// Waits for every queued order to be delivered. Called on shutdown.
    pub fn flush(&self, timeout: Duration) -> anyhow::Result<()> {
        self.current()
            .1
            .flush(Timeout::After(timeout))
            .context("flushing the Kafka producer")
    }
}

/// Counts one down from `counter` when dropped.
struct CountDown<'a>(&'a AtomicI64);

impl Drop for CountDown<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A producer of `config` with its polling thread.
fn create(config: &rdkafka::ClientConfig) -> anyhow::Result<KafkaProducer> {
    let base: BaseProducer<Deliveries> = config.create_with_context(Deliveries)?;
    Ok(polled::PolledProducer::new(base)?)
}
