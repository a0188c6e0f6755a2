//! Prometheus metrics of one worker.

use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};
use seckill_shared::live::CONFIRM_LATENCY_BUCKETS;
use seckill_shared::ProductId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most products whose pending tickets one worker reports at once.
const MAX_TRACKED_PRODUCTS: usize = 10_000;

/// A product without orders in this worker's batches for this long is no longer reported.
const FORGET_AFTER: Duration = Duration::from_secs(600);

#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub batch_size: Histogram,
    pub commit_seconds: Histogram,
    pub orders: IntCounterVec,
    pub compensations: IntCounter,
    pub retries: IntCounter,
    pub swept: IntCounter,
    pub completed: IntCounter,
    /// Tickets MySQL failed as out of stock although Redis had reserved their unit.
    pub diverged: IntCounter,
    /// Products rebuilt from MySQL because Redis had lost or miscounted them.
    pub reconciled: IntCounter,
    /// Sales the sweeper found over and closed.
    pub closed: IntCounter,
    /// Messages read from Kafka, counted as they join a batch (before it settles).
    pub received: IntCounter,
    pub assigned_partitions: IntGauge,
    /// Orders cancelled because they were not paid by their deadline.
    pub expired: IntCounter,
    /// Units of cancelled orders given back in Redis.
    pub units_back: IntCounter,
    /// From an order's payment deadline to its unit being back on sale in Redis.
    pub expiry_lag: Histogram,
    /// Sum of `consumer_lag` over this worker's partitions, from librdkafka's statistics.
    pub consumer_lag: IntGauge,
    /// Unsettled tickets (`ZCARD` of the pending set) of each product this worker has seen,
    /// read when `/metrics` is scraped.
    pub pending_tickets: IntGaugeVec,
    /// Consumer lag of each partition this worker owns, from librdkafka's statistics.
    pub partition_lag: IntGaugeVec,
    /// The same, for the dashboard's heartbeat.
    pub partition_lags: Arc<Mutex<BTreeMap<i32, i64>>>,
    /// Age of the oldest unsettled ticket of the products this worker has seen (0: none).
    pub oldest_pending_age: Gauge,
    /// `SECKILL_PENDING_TIMEOUT_MS`, in seconds, for alerts to compare with.
    pub pending_timeout: Gauge,
    /// From the reservation (the 202) to the order confirmed in MySQL.
    pub confirm_latency: Histogram,
    /// 1 while the last check (every second) of each dependency passed.
    pub dependency_up: IntGaugeVec,
    /// Products seen in a batch, and when last: the ones `pending_tickets` reports.
    seen_products: Arc<Mutex<BTreeMap<ProductId, Instant>>>,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let batch_size = Histogram::with_opts(
            HistogramOpts::new("seckill_worker_batch_size", "Orders per batch").buckets(vec![
                1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 5000.0,
            ]),
        )
        .unwrap();
        let commit_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "seckill_worker_batch_seconds",
                "Time to settle one batch (claim, MySQL commit, Redis)",
            )
            .buckets(vec![
                0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ]),
        )
        .unwrap();
        let orders = IntCounterVec::new(
            Opts::new("seckill_worker_orders_total", "Orders settled, by outcome"),
            &["outcome"],
        )
        .unwrap();
        let compensations = IntCounter::new(
            "seckill_worker_compensations_total",
            "Units given back to Redis",
        )
        .unwrap();
        let retries = IntCounter::new(
            "seckill_worker_retries_total",
            "Batches retried after an error",
        )
        .unwrap();
        let swept = IntCounter::new(
            "seckill_worker_swept_total",
            "Stale reservations failed by the sweeper",
        )
        .unwrap();
        let completed = IntCounter::new(
            "seckill_worker_lost_orders_settled_total",
            "Orders Kafka acknowledged and then lost, settled by the sweeper from their reservation",
        )
        .unwrap();
        let diverged = IntCounter::new(
            "seckill_worker_store_divergence_total",
            "Tickets MySQL failed as out of stock although Redis had reserved a unit: the stores diverged",
        )
        .unwrap();
        let reconciled = IntCounter::new(
            "seckill_worker_reconciles_total",
            "Products rebuilt from MySQL after Redis lost or miscounted them",
        )
        .unwrap();
        let closed = IntCounter::new(
            "seckill_worker_sales_closed_total",
            "Sales the sweeper found over (sold out or ended, nothing in flight) and closed",
        )
        .unwrap();
        let received = IntCounter::new(
            "seckill_worker_received_total",
            "Messages read from Kafka, counted as they join a batch, before it settles",
        )
        .unwrap();
        let assigned_partitions = IntGauge::new(
            "seckill_worker_assigned_partitions",
            "Partitions assigned to this worker",
        )
        .unwrap();
        let consumer_lag = IntGauge::new(
            "seckill_worker_consumer_lag",
            "Messages not yet committed on this worker's partitions (librdkafka statistics)",
        )
        .unwrap();
        let pending_tickets = IntGaugeVec::new(
            Opts::new(
                "seckill_worker_pending_tickets",
                "Unsettled tickets of each product this worker has seen",
            ),
            &["product"],
        )
        .unwrap();
        let expired = IntCounter::new(
            "seckill_worker_orders_expired_total",
            "Orders cancelled because they were not paid by their deadline",
        )
        .unwrap();
        let units_back = IntCounter::new(
            "seckill_worker_cancelled_units_back_total",
            "Units of cancelled orders given back in Redis",
        )
        .unwrap();
        let expiry_lag = Histogram::with_opts(
            HistogramOpts::new(
                "seckill_worker_expiry_lag_seconds",
                "From an order's payment deadline to its unit back on sale in Redis",
            )
            .buckets(vec![0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0]),
        )
        .unwrap();
        registry.register(Box::new(expired.clone())).unwrap();
        registry.register(Box::new(units_back.clone())).unwrap();
        registry.register(Box::new(expiry_lag.clone())).unwrap();
        registry.register(Box::new(consumer_lag.clone())).unwrap();
        let partition_lag = IntGaugeVec::new(
            Opts::new(
                "seckill_worker_partition_lag",
                "Consumer lag of each partition this worker owns (librdkafka statistics)",
            ),
            &["partition"],
        )
        .unwrap();
        let oldest_pending_age = Gauge::new(
            "seckill_worker_oldest_pending_age_seconds",
            "Age of the oldest unsettled ticket of the products this worker has seen (0: none)",
        )
        .unwrap();
        let pending_timeout = Gauge::new(
            "seckill_worker_pending_timeout_seconds",
            "SECKILL_PENDING_TIMEOUT_MS in seconds: a ticket pending this long is failed by the sweeper",
        )
        .unwrap();
        let confirm_latency = Histogram::with_opts(
            HistogramOpts::new(
                "seckill_worker_confirm_latency_seconds",
                "From the reservation (the 202) to the order confirmed in MySQL",
            )
            .buckets(CONFIRM_LATENCY_BUCKETS.to_vec()),
        )
        .unwrap();
        let dependency_up = IntGaugeVec::new(
            Opts::new(
                "seckill_worker_dependency_up",
                "1 while the last check (every second) of the dependency passed",
            ),
            &["dependency"],
        )
        .unwrap();
        registry
            .register(Box::new(pending_tickets.clone()))
            .unwrap();
        registry.register(Box::new(partition_lag.clone())).unwrap();
        registry
            .register(Box::new(oldest_pending_age.clone()))
            .unwrap();
        registry
            .register(Box::new(pending_timeout.clone()))
            .unwrap();
        registry
            .register(Box::new(confirm_latency.clone()))
            .unwrap();
        registry.register(Box::new(dependency_up.clone())).unwrap();
        registry.register(Box::new(batch_size.clone())).unwrap();
        registry.register(Box::new(commit_seconds.clone())).unwrap();
        registry.register(Box::new(orders.clone())).unwrap();
        registry.register(Box::new(compensations.clone())).unwrap();
        registry.register(Box::new(retries.clone())).unwrap();
        registry.register(Box::new(swept.clone())).unwrap();
        registry.register(Box::new(completed.clone())).unwrap();
        registry.register(Box::new(diverged.clone())).unwrap();
        registry.register(Box::new(reconciled.clone())).unwrap();
        registry.register(Box::new(closed.clone())).unwrap();
        registry.register(Box::new(received.clone())).unwrap();
        registry
            .register(Box::new(assigned_partitions.clone()))
            .unwrap();
        Self {
            registry,
            batch_size,
            commit_seconds,
            orders,
            compensations,
            retries,
            swept,
            completed,
            diverged,
            reconciled,
            closed,
            received,
            assigned_partitions,
            expired,
            units_back,
            expiry_lag,
            consumer_lag,
            pending_tickets,
            partition_lag,
            partition_lags: Arc::default(),
            oldest_pending_age,
            pending_timeout,
            confirm_latency,
            dependency_up,
            seen_products: Arc::default(),
        }
    }

    /// Remembers products that had orders in a batch (up to a bound).
    pub fn saw_products(&self, products: impl IntoIterator<Item = ProductId>) {
        let now = Instant::now();
        let mut seen = self.seen_products.lock().expect("lock poisoned");
        for p in products {
            if seen.len() < MAX_TRACKED_PRODUCTS || seen.contains_key(&p) {
                seen.insert(p, now);
            }
        }
    }

    /// The products to report: seen within `FORGET_AFTER`. Older ones are forgotten, and
    /// their gauges removed, so the work and the series follow the sales going on.
    pub fn seen_products(&self) -> Vec<ProductId> {
        let mut seen = self.seen_products.lock().expect("lock poisoned");
        seen.retain(|p, last| {
            let keep = last.elapsed() < FORGET_AFTER;
            if !keep {
                let _ = self.pending_tickets.remove_label_values(&[&p.to_string()]);
            }
            keep
        });
        seen.keys().copied().collect()
    }

    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("encoding metrics");
        String::from_utf8(buf).expect("metrics are UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
