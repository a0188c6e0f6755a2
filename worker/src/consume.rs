//! The consumer loop and the Kafka context that tracks this worker's partitions.

use crate::metrics::Metrics;
use crate::startup::Worker;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{ClientContext, Statistics};
use seckill_shared::settle::{BatchReport, Outcome};
use seckill_shared::OrderMessage;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A message copied out of the client: where it was, and the order it carried (`None` when it
/// could not be decoded; it is logged and skipped, but its offset still counts).
struct Received {
    partition: i32,
    offset: i64,
    order: Option<OrderMessage>,
}

impl From<&BorrowedMessage<'_>> for Received {
    fn from(m: &BorrowedMessage<'_>) -> Self {
        let order = match OrderMessage::decode(m.payload().unwrap_or_default()) {
            Ok(o) => Some(o),
            Err(e) => {
                tracing::error!(error = %e, partition = m.partition(), offset = m.offset(), "skipping an undecodable message");
                None
            }
        };
        Self {
            partition: m.partition(),
            offset: m.offset(),
            order,
        }
    }
}

/// Partitions currently assigned to this worker.
pub type Assignment = Arc<Mutex<BTreeSet<i32>>>;

/// Records rebalances so that health checks and tests can see the assignment, and turns
/// librdkafka's statistics into the consumer-lag gauge.
pub struct WorkerContext {
    pub assigned: Assignment,
    pub metrics: Metrics,
}

impl ClientContext for WorkerContext {
    /// Called every `statistics.interval.ms` (`SECKILL_WORKER_STATS_INTERVAL_MS`), from the
    /// consumer's poll: while a batch is being settled the reports wait, so the gauge lags by
    /// up to one batch.
    fn stats(&self, statistics: Statistics) {
        self.metrics.consumer_lag.set(consumer_lag(&statistics));
    }
}

/// The sum of `consumer_lag` (high watermark less committed offset) over the partitions this
/// consumer has; librdkafka reports -1 for a partition whose lag it does not know, and uses
/// partition -1 for internal bookkeeping, so both are left out.
pub fn consumer_lag(statistics: &Statistics) -> i64 {
    statistics
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.partition >= 0 && p.consumer_lag >= 0)
        .map(|p| p.consumer_lag)
        .sum()
}

impl ConsumerContext for WorkerContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut set = self.assigned.lock().expect("lock poisoned");
        match rebalance {
            Rebalance::Assign(tpl) => {
                set.extend(tpl.elements().iter().map(|e| e.partition()));
                tracing::info!(partitions = ?*set, "partitions assigned");
            }
            Rebalance::Revoke(tpl) => {
                for e in tpl.elements() {
                    set.remove(&e.partition());
                }
                tracing::info!(partitions = ?*set, "partitions revoked");
            }
            Rebalance::Error(e) => tracing::warn!(error = %e, "rebalance error"),
        }
    }
}

impl Worker {
    /// Consumes until `shutdown`: gathers a batch, settles it (retrying until it succeeds),
    /// then stores its offsets. On shutdown the batch in hand is finished and the offsets are
    /// committed before leaving the group.
    pub(crate) async fn consume(&self, shutdown: &CancellationToken) {
        let size = self.settings.worker_batch_size;
        let linger = Duration::from_millis(self.settings.worker_batch_linger_ms);
        let topic = self.settings.kafka_topic.as_str();
        loop {
            let first = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                m = self.consumer.recv() => m,
            };
            let first = match first {
                Ok(m) => Received::from(&m),
                Err(e) => {
                    tracing::warn!(error = %e, "Kafka receive error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            };
            // Messages are copied out of librdkafka at once, so nothing of the client's is
            // held while the batch settles (a rebalance may happen meanwhile).
            let mut batch = vec![first];
            let deadline = tokio::time::Instant::now() + linger;
            while batch.len() < size {
                match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                    Ok(Ok(m)) => batch.push(Received::from(&m)),
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "Kafka receive error");
                        break;
                    }
                    Err(_) => break,
                }
            }
            let orders: Vec<OrderMessage> = batch.iter().filter_map(|r| r.order.clone()).collect();
            if !self.settle_with_retry(&orders, shutdown).await {
                break; // stopped mid-retry: offsets stay unstored, the batch is redelivered
            }
            // The highest offset of each partition: librdkafka commits offset + 1.
            let mut high: BTreeMap<i32, i64> = BTreeMap::new();
            for r in &batch {
                let h = high.entry(r.partition).or_insert(r.offset);
                *h = (*h).max(r.offset);
            }
            for (partition, offset) in high {
                if let Err(e) = self.consumer.store_offset(topic, partition, offset) {
                    // A partition revoked meanwhile: its new owner sees the batch again, and
                    // settling it again changes nothing.
                    tracing::warn!(error = %e, partition, "could not store an offset");
                }
            }
        }
        if let Err(e) = self.consumer.commit_consumer_state(CommitMode::Sync) {
            tracing::debug!(error = %e, "final commit");
        }
        self.consumer.unsubscribe();
    }

    async fn settle_with_retry(
        &self,
        orders: &[OrderMessage],
        shutdown: &CancellationToken,
    ) -> bool {
        let mut backoff = Duration::from_millis(100);
        loop {
            let started = Instant::now();
            match self.process(orders).await {
                Ok(_) => {
                    self.metrics
                        .commit_seconds
                        .observe(started.elapsed().as_secs_f64());
                    return true;
                }
                Err(e) => {
                    self.metrics.retries.inc();
                    tracing::warn!(
                        error = format!("{e:#}"),
                        orders = orders.len(),
                        "batch failed; retrying"
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {},
                        _ = shutdown.cancelled() => return false,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// One step: settle these orders and tell the gateways about units given back. Public so
    /// that tests can drive the worker without Kafka timing.
    pub async fn process(&self, orders: &[OrderMessage]) -> anyhow::Result<BatchReport> {
        if orders.is_empty() {
            return Ok(BatchReport::default());
        }
        self.metrics
            .saw_products(orders.iter().map(|o| o.product_id));
        let report = self.settler.settle(orders).await?;
        self.metrics.batch_size.observe(orders.len() as f64);
        for (ticket, outcome) in &report.outcomes {
            let label = match outcome {
                Outcome::Confirmed { .. } => "confirmed",
                Outcome::Failed { .. } => "failed",
                Outcome::Skipped { .. } => "skipped",
            };
            self.metrics.orders.with_label_values(&[label]).inc();
            tracing::debug!(%ticket, ?outcome, "settled");
        }
        for (product, units) in &report.given_back {
            self.metrics.compensations.inc_by(*units);
            if let Err(e) = self.zk.not_sold_out(*product, Duration::from_secs(2)).await {
                // The units are back in Redis already; gateways' markers expire by TTL.
                tracing::warn!(error = format!("{e:#}"), %product, "could not publish \"false\"");
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::consumer_lag;
    use rdkafka::statistics::{Partition, Topic};
    use rdkafka::Statistics;

    #[test]
    fn lag_sums_known_partitions_only() {
        let partition = |partition, consumer_lag| {
            (
                partition,
                Partition {
                    partition,
                    consumer_lag,
                    ..Partition::default()
                },
            )
        };
        let mut stats = Statistics::default();
        assert_eq!(consumer_lag(&stats), 0);
        stats.topics.insert(
            "orders".into(),
            Topic {
                topic: "orders".into(),
                partitions: [
                    partition(0, 3),
                    partition(1, 4),
                    partition(2, -1),
                    partition(-1, 100),
                ]
                .into_iter()
                .collect(),
                ..Topic::default()
            },
        );
        assert_eq!(consumer_lag(&stats), 7);
    }
}
