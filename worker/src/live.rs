//! Once a second: the worker's gauges that are read rather than counted (its partitions, its
//! dependencies, the oldest pending ticket), and its share of the dashboard's live figures
//! (see [`seckill_shared::live`]).

use crate::consume::Assignment;
use crate::metrics::Metrics;
use seckill_shared::live::{self, field, Deltas, Heartbeat, LivePublisher, ProcessKind};
use seckill_shared::now_ms;
use seckill_shared::store::TicketStore;
use sqlx::MySqlPool;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A dependency check that takes longer than this failed.
const CHECK_TIMEOUT: Duration = Duration::from_millis(900);

pub struct LiveLoop {
    pub store: TicketStore,
    pub db: MySqlPool,
    pub assigned: Assignment,
    pub metrics: Metrics,
    pub publisher: LivePublisher,
}

impl LiveLoop {
    pub async fn run(self, stop: CancellationToken) {
        let id = live::process_id(ProcessKind::Worker);
        let mut deltas = Deltas::default();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let n = self.assigned.lock().map(|s| s.len()).unwrap_or(0);
            self.metrics.assigned_partitions.set(n as i64);
            let dependencies = self.check_dependencies().await;
            let oldest_pending_age_ms = refresh_pending(&self.store, &self.metrics).await;
            let now = now_ms();
            let heartbeat = Heartbeat {
                id: id.clone(),
                kind: ProcessKind::Worker,
                at_ms: now,
                dependencies,
                sold_out_markers: Vec::new(),
                partition_lag: self
                    .metrics
                    .partition_lags
                    .lock()
                    .expect("lock poisoned")
                    .clone(),
                oldest_pending_age_ms,
            };
            let totals = totals(&self.metrics);
            let pending = deltas.pending(&totals);
            match self
                .publisher
                .publish(now / 1000, &pending, &heartbeat)
                .await
            {
                Ok(()) => deltas.commit(&totals),
                Err(e) => tracing::debug!(error = %e, "could not publish live figures"),
            }
        }
    }

    async fn check_dependencies(&self) -> BTreeMap<String, bool> {
        let (redis, mysql) = tokio::join!(
            tokio::time::timeout(CHECK_TIMEOUT, self.store.ping()),
            tokio::time::timeout(CHECK_TIMEOUT, sqlx::query("SELECT 1").execute(&self.db)),
        );
        let checks = [
            ("redis", matches!(redis, Ok(Ok(())))),
            ("mysql", matches!(mysql, Ok(Ok(_)))),
        ];
        for (name, up) in checks {
            self.metrics
                .dependency_up
                .with_label_values(&[name])
                .set(up as i64);
        }
        checks.into_iter().map(|(n, up)| (n.into(), up)).collect()
    }
}

/// This worker's running totals of what the dashboard charts.
fn totals(m: &Metrics) -> Vec<(String, u64)> {
    let mut out = vec![
        (
            field::CONFIRMATIONS.to_string(),
            m.orders.with_label_values(&["confirmed"]).get(),
        ),
        (field::COMPENSATIONS.to_string(), m.compensations.get()),
        (field::BATCHES.to_string(), m.batch_size.get_sample_count()),
    ];
    // Buckets and count from one snapshot: read apart, an observation between the two reads
    // would land in `+Inf`.
    use prometheus::core::Metric;
    let snapshot = m.confirm_latency.metric();
    let h = snapshot.get_histogram();
    let cumulative: Vec<(f64, u64)> = h
        .get_bucket()
        .iter()
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    out.extend(live::latency_totals(&cumulative, h.get_sample_count()));
    out
}

/// Reads the pending tickets of every product this worker has seen, and the oldest one's
/// reservation time: `ZCARD` and `ZRANGE 0 0`, pipelined per product. Sets the gauges and returns
/// the oldest's age. On a Redis error the gauges keep their last values.
pub async fn refresh_pending(store: &TicketStore, metrics: &Metrics) -> Option<i64> {
    let products = metrics.seen_products();
    if products.is_empty() {
        metrics.oldest_pending_age.set(0.0);
        return None;
    }
    // One pipeline per product and stock bucket: in a Redis Cluster each lives in its own slot.
    let mut keys = vec![];
    for p in &products {
        let buckets = match store.buckets(*p).await {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!(error = %e, "could not read a product's buckets");
                return None;
            }
        };
        keys.extend((0..buckets).map(|b| (*p, store.bucket_keys(*p, b).pending())));
    }
    let reads = keys.iter().map(|(_, key)| {
        let key = key.clone();
        let mut conn = store.connection();
        async move {
            redis::pipe()
                .zcard(&key)
                .zrange_withscores(&key, 0, 0)
                .query_async::<(i64, Vec<(String, f64)>)>(&mut conn)
                .await
        }
    });
    let read = futures::future::try_join_all(reads);
    let replies = match tokio::time::timeout(Duration::from_secs(1), read).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "could not read pending tickets");
            return None;
        }
        Err(_) => {
            tracing::debug!("reading pending tickets timed out");
            return None;
        }
    };
    let mut oldest: Option<f64> = None;
    let mut pending: BTreeMap<seckill_shared::ProductId, i64> = BTreeMap::new();
    for ((p, _), (n, first)) in keys.iter().zip(replies) {
        *pending.entry(*p).or_default() += n;
        if let Some((_, at)) = first.first() {
            oldest = Some(oldest.map_or(*at, |o: f64| o.min(*at)));
        }
    }
    for (p, n) in pending {
        metrics
            .pending_tickets
            .with_label_values(&[&p.to_string()])
            .set(n);
    }
    let age_ms = oldest.map(|at| (now_ms() - at as i64).max(0));
    metrics
        .oldest_pending_age
        .set(age_ms.unwrap_or(0) as f64 / 1000.0);
    age_ms
}
