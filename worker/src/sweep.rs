//! The sweeper loop. The logic is `seckill_shared::recovery::sweep`.

use crate::announce::Announcer;
use crate::metrics::Metrics;
use seckill_shared::kafka::{Fence, GroupOffsets};
use seckill_shared::recovery::{self, SweepRules};
use seckill_shared::store::TicketStore;
use sqlx::MySqlPool;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub struct Sweeper {
    pub store: TicketStore,
    pub db: MySqlPool,
    pub announcer: Announcer,
    pub offsets: GroupOffsets,
    pub fence: Arc<Fence>,
    pub rules: SweepRules,
    pub metrics: Metrics,
}

impl Sweeper {
    /// Sweeps every quarter of the pending timeout (between 0.2 s and 5 s) until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let every =
            (self.rules.timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {},
                _ = shutdown.cancelled() => return,
            }
            // Without the group's offsets, tickets with a known location wait (for the next
            // sweep, or the last resort); the others follow the pending timeout.
            let committed = match self.offsets.committed().await {
                Ok(c) => Some(c),
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "could not read the group's offsets"
                    );
                    None
                }
            };
            match recovery::sweep(
                &self.store,
                &self.db,
                self.rules,
                committed.as_ref(),
                Some(&self.fence),
            )
            .await
            {
                Ok(report) => {
                    self.metrics
                        .reconciled
                        .inc_by(report.reconciled.len() as u64);
                    self.metrics.completed.inc_by(report.completed);
                    let products = report
                        .given_back
                        .iter()
                        .map(|(p, units)| {
                            self.metrics.swept.inc_by(*units);
                            *p
                        })
                        .chain(report.reconciled.iter().copied());
                    for product in products {
                        self.announcer.not_sold_out(product);
                    }
                }
                Err(e) => tracing::warn!(error = format!("{e:#}"), "sweep failed; will retry"),
            }
        }
    }
}
