//! Kafka settings shared by the gateway (producer) and the worker (consumer), and topic
//! creation.

use crate::config::{KafkaSettings, WorkerSettings, HEARTBEAT_INTERVAL_MS};
use anyhow::Context;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Header that carries the ticket id, for tracing across the pipeline.
pub const TICKET_HEADER: &str = "ticket";

/// Header of a fence message (see [`Fence`]); workers skip such messages.
pub const FENCE_HEADER: &str = "seckill-fence";

/// Is this a fence message? Workers skip it; its offset still counts.
pub fn is_fence(headers: Option<&rdkafka::message::BorrowedHeaders>) -> bool {
    headers.is_some_and(|h| h.iter().any(|x| x.key == FENCE_HEADER))
}

/// The `traceparent` header's value, if the message has a valid UTF-8 one.
pub fn traceparent(headers: Option<&rdkafka::message::BorrowedHeaders>) -> Option<String> {
    use rdkafka::message::Headers;
    let h = headers?;
    h.iter()
        .find(|x| x.key == crate::telemetry::TRACEPARENT)
        .and_then(|x| std::str::from_utf8(x.value?).ok())
        .map(str::to_owned)
}

/// Producer settings: idempotent, `acks=all`, and a delivery timeout of seconds, not minutes.
pub fn producer_config(k: &KafkaSettings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &k.brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", k.linger_ms.to_string())
        .set("message.timeout.ms", k.delivery_timeout_ms.to_string())
        .set("socket.connection.setup.timeout.ms", "3000")
        .set("queue.buffering.max.messages", "1000000")
        .set("client.id", "seckill-gateway");
    c
}

/// Consumer settings for at-least-once processing: offsets are stored by hand after the work
/// is durable and committed in the background.
pub fn consumer_config(k: &KafkaSettings, w: &WorkerSettings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &k.brokers)
        .set("group.id", &w.group)
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "500")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", w.session_timeout_ms.to_string())
        .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS.to_string())
        // How long the broker may hold a fetch that has no data. Apache Kafka answers a
        // waiting fetch as soon as data arrives; the local tansu broker does not, so with the
        // default (500 ms) every order waited for the fetch to time out: at 1,050 orders/s,
        // p50 of 202 -> confirmed was 171 ms with 500 and 19 ms with 10 (docs/BENCHMARKS.md).
        // The price: an idle worker sends ~100 empty fetches a second. Apache Kafka shrugs
        // that off; tansu spends ~15% of a core on it per idle worker.
        .set("fetch.wait.max.ms", w.fetch_wait_ms.to_string())
        .set("client.id", "seckill-worker");
    if w.stats_interval_ms > 0 {
        // Feeds the worker's consumer-lag gauge (`ClientContext::stats`).
        c.set("statistics.interval.ms", w.stats_interval_ms.to_string());
    }
    c
}

/// Creates the topic with `partitions` partitions unless it exists.
pub async fn ensure_topic(brokers: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    ensure_replicated_topic(brokers, topic, partitions, 1).await
}

/// [`ensure_topic`] with `replicas` copies of each partition, and then
/// `min.insync.replicas` = `replicas` − 1 (for an `acks=all` producer). A topic that exists
/// is left as it is.
pub async fn ensure_replicated_topic(
    brokers: &str,
    topic: &str,
    partitions: i32,
    replicas: i32,
) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .context("creating a Kafka admin client")?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let min_insync = (replicas - 1).max(1).to_string();
    let results = admin
        .create_topics(
            &[new_topic(topic, partitions, replicas, &min_insync)],
            &opts,
        )
        .await
        .with_context(|| format!("creating Kafka topic {topic}"))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => anyhow::bail!("creating Kafka topic {name}: {code}"),
        }
    }
    Ok(())
}

/// The topic to create: `replicas` copies of each partition and, from 2 up, `min_insync`.
fn new_topic<'a>(
    topic: &'a str,
    partitions: i32,
    replicas: i32,
    min_insync: &'a str,
) -> NewTopic<'a> {
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replicas));
    if replicas > 1 {
        new.set("min.insync.replicas", min_insync)
    } else {
        new
    }
}

/// Reads the worker group's committed offsets, without joining the group.
#[derive(Clone)]
pub struct GroupOffsets {
    consumer: Arc<BaseConsumer>,
    topic: String,
}

impl GroupOffsets {
    /// The offsets of the consumer group `group` on `k`'s topic.
    pub fn new(k: &KafkaSettings, group: &str) -> anyhow::Result<Self> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &k.brokers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("client.id", "seckill-offsets")
            .create()
            .context("creating the Kafka offsets reader")?;
        Ok(Self {
            consumer: Arc::new(consumer),
            topic: k.topic.clone(),
        })
    }

    /// The partitions of the order topic.
    pub async fn partitions(&self) -> anyhow::Result<Vec<i32>> {
        let (consumer, topic) = (self.consumer.clone(), self.topic.clone());
        tokio::task::spawn_blocking(move || partitions(&consumer, &topic))
            .await
            .context("joining the metadata request")?
    }

    /// The next offset the group will read, per partition of the topic. A partition the group
    /// has never committed is left out.
    pub async fn committed(&self) -> anyhow::Result<HashMap<i32, i64>> {
        let (consumer, topic) = (self.consumer.clone(), self.topic.clone());
        tokio::task::spawn_blocking(move || {
            let mut tpl = TopicPartitionList::new();
            for p in partitions(&consumer, &topic)? {
                tpl.add_partition(&topic, p);
            }
            let committed = consumer
                .committed_offsets(tpl, Duration::from_secs(5))
                .context("reading the group's committed offsets")?;
            Ok(committed
                .elements()
                .iter()
                .filter_map(|e| match e.offset() {
                    Offset::Offset(o) => Some((e.partition(), o)),
                    _ => None,
                })
                .collect())
        })
        .await
        .context("joining the offsets request")?
    }
}

fn partitions(consumer: &BaseConsumer, topic: &str) -> anyhow::Result<Vec<i32>> {
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(5))
        .context("fetching the topic's metadata")?;
    let parts: Vec<i32> = md
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    anyhow::ensure!(!parts.is_empty(), "topic {topic} has no partitions");
    Ok(parts)
}

/// The least delivery timeout of a fence message (ms).
const FENCE_DELIVERY_TIMEOUT_MS: u64 = 10_000;

/// Waits until the worker group has read every order published before it was called: it
/// writes one fence message into each partition and waits until the group's committed offset
/// has passed all of them. Reconcile uses it after Redis lost a product, so that every order
/// reserved before the loss has been adopted, and is counted, before the stock is rebuilt.
pub struct Fence {
    /// The fence's producer is made for each drain: a producer keeps a polling thread busy
    /// even when idle, and a drain is rare (after Redis lost a product).
    producer: ClientConfig,
    offsets: GroupOffsets,
    topic: String,
    /// A publish started before the loss lands within the delivery timeout: the fence is
    /// written after it.
    in_flight: Duration,
}

impl Fence {
    /// A fence on `k`'s topic, drained by the consumer group `group`.
    pub fn new(k: &KafkaSettings, group: &str) -> anyhow::Result<Self> {
        let mut producer = producer_config(k);
        producer.set("client.id", "seckill-fence");
        // A fence message is no order waiting on a buyer: a fresh producer first connects and
        // gets its idempotent producer id, which took longer than a short delivery timeout
        // (500 ms) against tansu, so every drain failed with `MessageTimedOut`.
        let timeout = k.delivery_timeout_ms.max(FENCE_DELIVERY_TIMEOUT_MS);
        producer.set("message.timeout.ms", timeout.to_string());
        // Refused settings show now, not at the first drain.
        let check: FutureProducer = producer.create().context("creating the fence producer")?;
        drop(check);
        Ok(Self {
            producer,
            offsets: GroupOffsets::new(k, group)?,
            topic: k.topic.clone(),
            in_flight: k.delivery_timeout() + Duration::from_millis(500),
        })
    }

    /// See [`Fence`]. Fails after `limit`, for instance when no worker is running.
    pub async fn drain(&self, limit: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + limit;
        // Every publish that was in flight when Redis was lost has landed after this.
        tokio::time::sleep(self.in_flight).await;
        let mut fence: HashMap<i32, i64> = HashMap::new();
        let producer: FutureProducer = self
            .producer
            .create()
            .context("creating the fence producer")?;
        for p in self.offsets.partitions().await? {
            let record = FutureRecord::<str, [u8]>::to(&self.topic)
                .partition(p)
                .key("fence")
                .payload(b"{}")
                .headers(OwnedHeaders::new().insert(Header {
                    key: FENCE_HEADER,
                    value: Some("1"),
                }));
            let delivery = producer
                .send(record, Timeout::After(Duration::from_secs(5)))
                .await
                .map_err(|(e, _)| e)
                .context("writing a fence message")?;
            fence.insert(delivery.partition, delivery.offset);
        }
        // Dropping a producer joins its polling thread and flushes: not on this thread.
        tokio::task::spawn_blocking(move || drop(producer));
        loop {
            let committed = self.offsets.committed().await?;
            let behind: Vec<i32> = fence
                .iter()
                .filter(|(p, o)| committed.get(p).is_none_or(|c| c <= o))
                .map(|(p, _)| *p)
                .collect();
            if behind.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                anyhow::bail!(
                    "the workers have not read past the fence within {limit:?} (partitions {behind:?})"
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[cfg(test)]
mod topic_tests {
    use super::*;

    #[test]
    fn a_replicated_topic_needs_all_but_one_replica_in_sync() {
        let t = new_topic("orders", 8, 3, "2");
        assert_eq!(t.num_partitions, 8);
        assert!(matches!(t.replication, TopicReplication::Fixed(3)));
        assert_eq!(t.config, vec![("min.insync.replicas", "2")]);
        let single = new_topic("orders", 8, 1, "1");
        assert!(matches!(single.replication, TopicReplication::Fixed(1)));
        assert!(
            single.config.is_empty(),
            "one broker: nothing to be in sync with"
        );
    }
}
