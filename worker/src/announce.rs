//! Tells every gateway that units of a product are back on sale (`"false"` in ZooKeeper), off
//! the settle path.
//!
//! The batch pipeline and the sweeper only queue the product id; one task publishes, taking
//! every id queued meanwhile at once, so a product is published once however many batches
//! gave units back. With ZooKeeper down the task retries with backoff while the pipeline
//! keeps settling; a publish that is lost altogether is covered by the gateways' marker TTL
//! (`SECKILL_SOLD_OUT_TTL_MS`).

use backon::BackoffBuilder;
use seckill_shared::telemetry::{KeyValue, Late, SpanContext, SpanKind};
use seckill_shared::{sold_out, ProductId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Product ids queued at most; beyond that a queue call is dropped (the marker TTL covers it).
const QUEUE: usize = 4096;

#[derive(Clone)]
pub struct Announcer {
    tx: mpsc::Sender<(ProductId, Vec<SpanContext>)>,
}

impl Announcer {
    /// Starts the publishing task; it stops with `shutdown`.
    pub fn start(publisher: Arc<sold_out::Publisher>, shutdown: CancellationToken) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(publisher, rx, shutdown));
        Self { tx }
    }

    /// Queues `"false"` for `product`. Never waits.
    pub fn not_sold_out(&self, product: ProductId) {
        self.not_sold_out_traced(product, Vec::new());
    }

    /// [`Self::not_sold_out`] for orders whose traces are kept: the publish's span is a child
    /// of the first and links the others.
    pub fn not_sold_out_traced(&self, product: ProductId, traces: Vec<SpanContext>) {
        if self.tx.try_send((product, traces)).is_err() {
            tracing::warn!(%product, "announce queue full; the gateways' marker TTL covers it");
        }
    }
}

async fn run(
    publisher: Arc<sold_out::Publisher>,
    mut rx: mpsc::Receiver<(ProductId, Vec<SpanContext>)>,
    shutdown: CancellationToken,
) {
    // Each product due, with the traces its publish joins.
    let mut due: BTreeMap<ProductId, Vec<SpanContext>> = BTreeMap::new();
    let policy = crate::retry::retry_policy();
    let mut delays = policy.build();
    loop {
        if due.is_empty() {
            tokio::select! {
                p = rx.recv() => match p {
                    Some((p, traces)) => due.entry(p).or_default().extend(traces),
                    None => return,
                },
                _ = shutdown.cancelled() => return,
            }
        }
        while let Ok((p, traces)) = rx.try_recv() {
            due.entry(p).or_default().extend(traces);
        }
        let mut failed = false;
        while let Some(product) = due.keys().next().copied() {
            let started = std::time::SystemTime::now();
            match publisher
                .not_sold_out(product, Duration::from_secs(2))
                .await
            {
                Ok(()) => {
                    let traces = due.remove(&product).unwrap_or_default();
                    if let Some((first, others)) = traces.split_first() {
                        Late::new("zookeeper.announce", started, std::time::SystemTime::now())
                            .kind(SpanKind::Client)
                            .attr(KeyValue::new("product_id", product.as_i64()))
                            .attr(KeyValue::new("seckill.sold_out", "false"))
                            .links(others.to_vec())
                            .emit(Some(first));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = format!("{e:#}"), %product, "could not publish \"false\"; retrying");
                    failed = true;
                    break;
                }
            }
        }
        if failed {
            tokio::select! {
                _ = tokio::time::sleep(delays.next().unwrap_or(Duration::from_secs(5))) => {},
                _ = shutdown.cancelled() => return,
            }
        } else {
            delays = policy.build();
        }
    }
}
