//! The stale-reservation sweeper loop. The logic is `seckill_shared::recovery::sweep`.

use crate::metrics::Metrics;
use seckill_shared::recovery;
use seckill_shared::store::TicketStore;
use seckill_shared::zk;
use sqlx::MySqlPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Sweeps every quarter of the pending timeout (between 0.2 s and 5 s) until `shutdown`.
pub async fn run(
    store: TicketStore,
    db: MySqlPool,
    zk: Arc<zk::Publisher>,
    timeout: Duration,
    metrics: Metrics,
    shutdown: CancellationToken,
) {
    let every = (timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {},
            _ = shutdown.cancelled() => return,
        }
        match recovery::sweep(&store, &db, timeout).await {
            Ok(report) => {
                for (product, units) in report.given_back {
                    metrics.swept.inc_by(units);
                    if let Err(e) = zk.not_sold_out(product, Duration::from_secs(2)).await {
                        tracing::warn!(error = format!("{e:#}"), %product, "could not publish \"false\"");
                    }
                }
            }
            Err(e) => tracing::warn!(error = format!("{e:#}"), "sweep failed; will retry"),
        }
    }
}
