//! The consumer loop and the Kafka context that tracks this worker's partitions.

use crate::announce::Announcer;
use crate::metrics::Metrics;
use crate::retry::{retry_policy, MAX_RETRY_DELAY};
use crate::traces;
use backon::BackoffBuilder;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{ClientContext, Statistics};
use seckill_shared::settle::{BatchReport, Claimed, Outcome, Settler};
use seckill_shared::telemetry::SpanContext;
use seckill_shared::{kafka, recovery, OrderMessage, Ticket};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long a stopping worker waits for each blocking step of leaving Kafka (the final
/// commit and leaving the group; closing the consumer).
pub(crate) const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

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
        let lags = partition_lags(&statistics);
        let mut known = self.metrics.partition_lags.lock().expect("lock poisoned");
        for gone in known.keys().filter(|p| !lags.contains_key(p)) {
            let _ = self
                .metrics
                .partition_lag
                .remove_label_values(&[&gone.to_string()]);
        }
        for (p, lag) in &lags {
            self.metrics
                .partition_lag
                .with_label_values(&[&p.to_string()])
                .set(*lag);
        }
        *known = lags;
    }
}

/// The `consumer_lag` of each partition this consumer has (see [`consumer_lag`]).
pub fn partition_lags(statistics: &Statistics) -> BTreeMap<i32, i64> {
    statistics
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.partition >= 0 && p.consumer_lag >= 0)
        .map(|p| (p.partition, p.consumer_lag))
        .collect()
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

/// A batch copied out of the client, so nothing of the client's is held while it settles (a
/// rebalance may happen meanwhile): the orders, and the highest offset of each partition.
#[derive(Default)]
struct Batch {
    orders: Vec<OrderMessage>,
    high: BTreeMap<i32, i64>,
    messages: usize,
    gathered: Option<Instant>,
    /// When each step that finished ran: for its traces.
    timings: traces::Timings,
}

impl Batch {
    /// Takes one message. One that cannot be decoded is logged and skipped, but its offset
    /// still counts.
    fn push(&mut self, m: &BorrowedMessage<'_>) {
        if kafka::is_fence(m.headers()) {
            tracing::debug!(
                partition = m.partition(),
                offset = m.offset(),
                "read a fence"
            );
        } else {
            match OrderMessage::decode(m.payload().unwrap_or_default()) {
                Ok(mut o) => {
                    o.traceparent = kafka::traceparent(m.headers());
                    self.orders.push(o)
                }
                Err(e) => {
                    tracing::error!(error = %e, partition = m.partition(), offset = m.offset(), "skipping an undecodable message");
                }
            }
        }
        let h = self.high.entry(m.partition()).or_insert(m.offset());
        *h = (*h).max(m.offset());
        self.messages += 1;
        self.gathered.get_or_insert_with(Instant::now);
    }
}

/// A Kafka consumer whose close never blocks the thread that drops it. Dropping a librdkafka
/// consumer closes it, and the close can hang for good in a rebalance
/// (confluentinc/librdkafka#4884, fede1024/rust-rdkafka#509). A worker stopped gracefully
/// closes it itself, bounded ([`Self::into_inner`], in `run_until_stopped`); one whose task is
/// dropped unfinished (its runtime shut down, as at the end of a test) would close it on a
/// runtime's thread and stall that thread. Dropped, this closes it on a thread of its own.
pub struct DetachedClose<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> DetachedClose<T> {
    pub fn new(inner: T) -> Self {
        Self(Some(inner))
    }

    /// The consumer, to close where the caller bounds it.
    pub fn into_inner(mut self) -> T {
        self.0.take().expect("present until taken")
    }
}

impl<T: Send + 'static> std::ops::Deref for DetachedClose<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("present until taken")
    }
}

impl<T: Send + 'static> Drop for DetachedClose<T> {
    fn drop(&mut self) {
        if let Some(inner) = self.0.take() {
            // If no thread can be made, the closure (and the consumer) drops here instead.
            let _ = std::thread::Builder::new()
                .name("consumer-close".into())
                .spawn(move || drop(inner));
        }
    }
}

/// One worker's batch pipeline: reads orders from Kafka, settles them in batches
/// (claim in Redis | write to MySQL | confirm in Redis), stores the offsets, and queues the
/// `"false"`s. Built by [`crate::startup::Worker`], which runs it.
pub struct Pipeline {
    pub(crate) consumer: Arc<DetachedClose<StreamConsumer<WorkerContext>>>,
    pub(crate) settler: Settler,
    pub(crate) metrics: Metrics,
    /// Publishes `"false"` off the settle path.
    pub(crate) announcer: Announcer,
    /// Reconcile's fence, after a divergence.
    pub(crate) fence: Arc<kafka::Fence>,
    pub(crate) topic: String,
    pub(crate) batch_size: usize,
    pub(crate) linger: Duration,
}

impl Pipeline {
    /// Consumes until `shutdown`, as a three-step pipeline: while one batch is claimed in
    /// Redis, the batch before it is written to MySQL and the one before that is confirmed in
    /// Redis. A batch's offsets are stored once its last step is done, oldest batch first.
    ///
    /// Each step of a batch runs after the step before it, and the MySQL step of a batch after
    /// that of the batch before it, so the decisions are the same as settling batch by batch.
    /// A step that fails is retried, with a back-off, before anything behind it moves on.
    /// On shutdown no new batch is taken; the ones in the pipeline are finished and the
    /// offsets committed before leaving the group. A batch that cannot be finished then is
    /// left uncommitted and redelivered to another worker.
    pub(crate) async fn consume(&self, shutdown: &CancellationToken) {
        let mut claiming: Option<Batch> = None;
        let mut persisting: Option<(Batch, Claimed)> = None;
        let mut finishing: Option<(Batch, Claimed, Vec<Outcome>)> = None;
        let backoff = retry_policy();
        let mut delays = backoff.build();
        loop {
            let busy = persisting.is_some() || finishing.is_some();
            if claiming.is_none() && !shutdown.is_cancelled() {
                claiming = self.gather(busy, shutdown).await;
            }
            if claiming.is_none() && !busy {
                if shutdown.is_cancelled() {
                    break; // stopped, and nothing in flight
                }
                continue;
            }

            let settler = &self.settler;
            let (finished, persisted, claimed) = tokio::join!(
                async {
                    match &finishing {
                        Some((_, c, decided)) => {
                            Some(traces::timed(settler.finish(c, decided)).await)
                        }
                        None => None,
                    }
                },
                async {
                    match &persisting {
                        Some((_, c)) => Some(traces::timed(settler.persist(c)).await),
                        None => None,
                    }
                },
                async {
                    match &claiming {
                        Some(b) => Some(traces::timed(settler.claim(&b.orders)).await),
                        None => None,
                    }
                },
            );

            // Oldest first; a batch moves on only into a free step.
            let mut failed = None;
            match finished {
                Some((Ok(report), took)) => {
                    let (mut batch, _, _) = finishing.take().expect("finished a batch");
                    batch.timings.finish = Some(took);
                    self.finished(&batch, report).await;
                }
                Some((Err(e), _)) => failed = Some(e.context("confirming in Redis")),
                None => {}
            }
            match persisted {
                Some((Ok(decided), took)) if finishing.is_none() => {
                    let (mut batch, c) = persisting.take().expect("persisted a batch");
                    batch.timings.persist = Some(took);
                    finishing = Some((batch, c, decided));
                }
                // Written, but the step after is still busy: written again next round, which
                // changes nothing.
                Some((Ok(_), _)) => {}
                Some((Err(e), _)) => failed = failed.or(Some(e.context("writing to MySQL"))),
                None => {}
            }
            match claimed {
                Some((Ok(c), took)) if persisting.is_none() => {
                    let mut batch = claiming.take().expect("claimed a batch");
                    batch.timings.claim = Some(took);
                    persisting = Some((batch, c));
                }
                Some((Ok(_), _)) => {}
                Some((Err(e), _)) => failed = failed.or(Some(e.context("claiming in Redis"))),
                None => {}
            }

            match failed {
                None => delays = backoff.build(),
                Some(e) => {
                    self.metrics.retries.inc();
                    tracing::warn!(error = format!("{e:#}"), "batch step failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(delays.next().unwrap_or(MAX_RETRY_DELAY)) => {},
                        // Stopped mid-retry: what is left in flight stays uncommitted and is
                        // redelivered; settling it again changes nothing.
                        _ = shutdown.cancelled() => break,
                    }
                }
            }
        }
        // The final commit and leaving the group block on the broker: off the runtime's threads,
        // and bounded. A broker that does not answer (or a rebalance librdkafka never finishes,
        // confluentinc/librdkafka#4884) must not keep a stopping worker alive: what was not
        // committed is redelivered, and settling it again changes nothing.
        let consumer = self.consumer.clone();
        let left = tokio::time::timeout(
            LEAVE_TIMEOUT,
            tokio::task::spawn_blocking(move || {
                if let Err(e) = consumer.commit_consumer_state(CommitMode::Sync) {
                    tracing::debug!(error = %e, "final commit");
                }
                consumer.unsubscribe();
            }),
        )
        .await;
        match left {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "leaving the group failed"),
            Err(_) => tracing::warn!(
                "the final commit and leaving the group took over {LEAVE_TIMEOUT:?}; stopping without"
            ),
        }
    }

    /// The next batch. With the pipeline empty it waits for a first message (or `shutdown`),
    /// then up to `SECKILL_WORKER_BATCH_LINGER_MS` for more; with batches in flight it takes
    /// only what has already arrived, and may return `None`.
    async fn gather(&self, busy: bool, shutdown: &CancellationToken) -> Option<Batch> {
        let size = self.batch_size;
        let mut batch = Batch::default();
        if !busy {
            let first = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return None,
                m = self.consumer.recv() => m,
            };
            match first {
                Ok(m) => {
                    batch.push(&m);
                    self.metrics.received.inc();
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Kafka receive error");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    return None;
                }
            }
        }
        let linger = if busy { Duration::ZERO } else { self.linger };
        // A zero linger still takes every message that is ready: the timeout polls the
        // receive before it looks at the clock.
        let deadline = tokio::time::Instant::now() + linger;
        while batch.messages < size {
            match tokio::time::timeout_at(deadline, self.consumer.recv()).await {
                Ok(Ok(m)) => {
                    batch.push(&m);
                    self.metrics.received.inc();
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "Kafka receive error");
                    break;
                }
                Err(_) => break,
            }
        }
        (batch.messages > 0).then_some(batch)
    }

    /// A batch went through every step: record it and store its offsets.
    async fn finished(&self, batch: &Batch, report: BatchReport) {
        if let Some(gathered) = batch.gathered {
            self.metrics
                .commit_seconds
                .observe(gathered.elapsed().as_secs_f64());
        }
        let kept = if seckill_shared::telemetry::enabled() {
            let gathered = batch.gathered.map_or_else(std::time::SystemTime::now, |g| {
                std::time::SystemTime::now() - g.elapsed()
            });
            traces::record(&batch.orders, &report, gathered, &batch.timings)
        } else {
            traces::Kept::default()
        };
        if !kept.mark.is_empty() {
            // Off the pipeline: a trace not marked only misses its payment's and expiry's spans.
            let (db, tickets) = (self.settler.db.clone(), kept.mark);
            tokio::spawn(async move {
                if let Err(e) = seckill_shared::db::mark_traces_kept(&db, &tickets).await {
                    tracing::warn!(error = format!("{e:#}"), "could not mark kept traces");
                }
            });
        }
        self.record(&batch.orders, &report, kept.announced).await;
        // The highest offset of each partition: librdkafka commits offset + 1.
        let topic = self.topic.as_str();
        for (&partition, &offset) in &batch.high {
            if let Err(e) = self.consumer.store_offset(topic, partition, offset) {
                // A partition revoked meanwhile: its new owner sees the batch again, and
                // settling it again changes nothing.
                tracing::warn!(error = %e, partition, "could not store an offset");
            }
        }
    }

    /// One batch through every step, in a row: settle these orders and tell the gateways
    /// about units given back. Public so that tests can drive the worker without Kafka timing.
    pub async fn process(&self, orders: &[OrderMessage]) -> anyhow::Result<BatchReport> {
        if orders.is_empty() {
            return Ok(BatchReport::default());
        }
        let report = self.settler.settle(orders).await?;
        self.record(orders, &report, BTreeMap::new()).await;
        Ok(report)
    }

    /// Metrics, and `"false"` in ZooKeeper for every product that got units back; its span
    /// joins the traces of the product's orders in `traced` that gave them back.
    async fn record(
        &self,
        orders: &[OrderMessage],
        report: &BatchReport,
        mut traced: BTreeMap<seckill_shared::ProductId, Vec<SpanContext>>,
    ) {
        if orders.is_empty() {
            return;
        }
        self.metrics
            .saw_products(orders.iter().map(|o| o.product_id));
        self.metrics.batch_size.observe(orders.len() as f64);
        let now_ms = seckill_shared::now_ms();
        let reserved_at: HashMap<&Ticket, i64> = orders
            .iter()
            .map(|o| (&o.ticket, o.reserved_at_ms))
            .collect();
        for (ticket, outcome) in &report.outcomes {
            let label = match outcome {
                Outcome::Confirmed { .. } => {
                    if let Some(at) = reserved_at.get(ticket) {
                        let secs = (now_ms - at).max(0) as f64 / 1000.0;
                        self.metrics.confirm_latency.observe(secs);
                    }
                    "confirmed"
                }
                Outcome::Failed { .. } => "failed",
                // Settled before (cancelled since): Redis only followed MySQL.
                Outcome::Skipped { .. } | Outcome::Cancelled { .. } => "skipped",
            };
            self.metrics.orders.with_label_values(&[label]).inc();
            tracing::debug!(%ticket, ?outcome, "settled");
        }
        for (&product, &tickets) in &report.diverged {
            // Redis reserved units MySQL did not have: rebuild the product from MySQL now,
            // instead of letting each phantom unit fail one buyer after another.
            self.metrics.diverged.inc_by(tickets);
            tracing::error!(%product, tickets, "MySQL was out of stock for units Redis reserved: the stores diverged; reconciling");
            // Off the pipeline: a product Redis lost (or that came back old) is rebuilt only
            // once the workers have read past the fence, and this worker must go on reading
            // for that.
            let (store, db) = (self.settler.store.clone(), self.settler.db.clone());
            let (fence, metrics) = (self.fence.clone(), self.metrics.clone());
            tokio::spawn(async move {
                match recovery::reconcile(&store, &db, product, Some(&fence)).await {
                    Ok(report) => {
                        metrics.reconciled.inc();
                        tracing::warn!(%product, ?report, "reconciled after a divergence");
                    }
                    Err(e) => {
                        tracing::error!(error = format!("{e:#}"), %product, "could not reconcile")
                    }
                }
            });
        }
        for (product, units) in &report.given_back {
            self.metrics.compensations.inc_by(*units);
            self.announcer
                .not_sold_out_traced(*product, traced.remove(product).unwrap_or_default());
        }
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
