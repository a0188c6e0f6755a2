//! Hands orders to Kafka and waits for the broker's acknowledgement.

use anyhow::{anyhow, Context};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use seckill_shared::kafka::{producer_config, TICKET_HEADER};
use seckill_shared::{OrderMessage, Settings};
use std::time::Duration;

#[derive(Clone)]
pub struct OrderPublisher {
    producer: FutureProducer,
    topic: String,
    timeout: Duration,
}

impl OrderPublisher {
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let producer = producer_config(settings)
            .create()
            .context("creating the Kafka producer")?;
        Ok(Self {
            producer,
            topic: settings.kafka_topic.clone(),
            timeout: settings.delivery_timeout(),
        })
    }

    /// Sends one order and waits for its delivery report, at most the delivery timeout.
    pub async fn publish(&self, order: &OrderMessage) -> anyhow::Result<()> {
        let payload = order.encode();
        let ticket = order.ticket.as_str();
        let record = FutureRecord::to(&self.topic)
            .key(ticket)
            .payload(&payload)
            .headers(OwnedHeaders::new().insert(Header {
                key: TICKET_HEADER,
                value: Some(ticket),
            }));
        let delivery = self.producer.send(record, Timeout::After(self.timeout));
        // librdkafka enforces message.timeout.ms; this outer bound only guards against a stuck
        // report.
        match tokio::time::timeout(self.timeout + Duration::from_millis(500), delivery).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((e, _))) => Err(anyhow!(e).context("Kafka did not take the order")),
            Err(_) => Err(anyhow!("Kafka delivery report timed out")),
        }
    }

    /// Can the cluster be reached? Used by health checks.
    pub async fn check(&self) -> anyhow::Result<()> {
        let producer = self.producer.clone();
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
        self.producer
            .flush(Timeout::After(timeout))
            .context("flushing the Kafka producer")
    }
}
