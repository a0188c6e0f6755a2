//! Tells every gateway that units of a product are back on sale (`"false"` in ZooKeeper), off
//! the settle path.
//!
//! The batch pipeline and the sweeper only queue the product id; one task publishes, taking
//! every id queued meanwhile at once, so a product is published once however many batches
//! gave units back. With ZooKeeper down the task retries with backoff while the pipeline
//! keeps settling; a publish that is lost altogether is covered by the gateways' marker TTL
//! (`SECKILL_SOLD_OUT_TTL_MS`).

use backon::BackoffBuilder;
use seckill_shared::{sold_out, ProductId};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Product ids queued at most; beyond that a queue call is dropped (the marker TTL covers it).
const QUEUE: usize = 4096;

#[derive(Clone)]
pub struct Announcer {
    tx: mpsc::Sender<ProductId>,
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
        if self.tx.try_send(product).is_err() {
            tracing::warn!(%product, "announce queue full; the gateways' marker TTL covers it");
        }
    }
}

async fn run(
    publisher: Arc<sold_out::Publisher>,
    mut rx: mpsc::Receiver<ProductId>,
    shutdown: CancellationToken,
) {
    let mut due: BTreeSet<ProductId> = BTreeSet::new();
    let policy = crate::retry::retry_policy();
    let mut delays = policy.build();
    loop {
        if due.is_empty() {
            tokio::select! {
                p = rx.recv() => match p {
                    Some(p) => { due.insert(p); }
                    None => return,
                },
                _ = shutdown.cancelled() => return,
            }
        }
        while let Ok(p) = rx.try_recv() {
            due.insert(p);
        }
        let mut failed = false;
        while let Some(product) = due.first().copied() {
            match publisher
                .not_sold_out(product, Duration::from_secs(2))
                .await
            {
                Ok(()) => {
                    due.remove(&product);
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
