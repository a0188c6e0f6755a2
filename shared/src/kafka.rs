//! Kafka settings shared by the gateway (producer) and the worker (consumer), and topic
//! creation.

use crate::config::Settings;
use anyhow::Context;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::ClientConfig;
use std::time::Duration;

/// Header that carries the ticket id, for tracing across the pipeline.
pub const TICKET_HEADER: &str = "ticket";

/// The consumer's `heartbeat.interval.ms`. `SECKILL_WORKER_SESSION_TIMEOUT_MS` must allow
/// more than three of them.
pub const HEARTBEAT_INTERVAL_MS: u64 = 1000;

/// Producer settings: idempotent, `acks=all`, and a delivery timeout of seconds, not minutes.
pub fn producer_config(s: &Settings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.kafka_brokers)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", s.kafka_linger_ms.to_string())
        .set(
            "message.timeout.ms",
            s.kafka_delivery_timeout_ms.to_string(),
        )
        .set("socket.connection.setup.timeout.ms", "3000")
        .set("queue.buffering.max.messages", "1000000")
        .set("client.id", "seckill-gateway");
    c
}

/// Consumer settings for at-least-once processing: offsets are stored by hand after the work
/// is durable and committed in the background.
pub fn consumer_config(s: &Settings) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &s.kafka_brokers)
        .set("group.id", &s.worker_group)
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "500")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set(
            "session.timeout.ms",
            s.worker_session_timeout_ms.to_string(),
        )
        .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS.to_string())
        // How long the broker may hold a fetch that has no data. Apache Kafka answers a
        // waiting fetch as soon as data arrives; the local tansu broker does not, so with the
        // default (500 ms) every order waited for the fetch to time out: at 1,050 orders/s,
        // p50 of 202 -> confirmed was 171 ms with 500 and 19 ms with 10 (docs/BENCHMARKS.md).
        // The price: an idle worker sends ~100 empty fetches a second. Apache Kafka shrugs
        // that off; tansu spends ~15% of a core on it per idle worker.
        .set("fetch.wait.max.ms", s.worker_fetch_wait_ms.to_string())
        .set("client.id", "seckill-worker");
    if s.worker_stats_interval_ms > 0 {
        // Feeds the worker's consumer-lag gauge (`ClientContext::stats`).
        c.set(
            "statistics.interval.ms",
            s.worker_stats_interval_ms.to_string(),
        );
    }
    c
}

/// Creates the topic with `partitions` partitions unless it exists.
pub async fn ensure_topic(brokers: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .context("creating a Kafka admin client")?;
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = admin
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
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
