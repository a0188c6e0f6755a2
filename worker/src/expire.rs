//! The payment deadline: cancels unpaid orders once their `pay_by_ms` has passed, and puts
//! their units back on sale. The logic is `seckill_shared::payments::cancel`.
//!
//! Every worker runs this loop; `FOR UPDATE SKIP LOCKED` shares the due orders between them.
//! A round takes up to [`BATCH`] orders, oldest deadline first, and runs again at once while
//! it finds a full batch, so a wave of deadlines is worked off at MySQL's pace; otherwise it
//! looks every [`EVERY`].

use crate::announce::Announcer;
use crate::metrics::Metrics;
use backon::BackoffBuilder;
use seckill_shared::now_ms;
use seckill_shared::payments::cancel;
use seckill_shared::store::TicketStore;
use seckill_shared::telemetry::{self, KeyValue, Late};
use sqlx::MySqlPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Most orders one round cancels.
pub const BATCH: usize = 512;
/// How often an idle loop looks for due orders.
pub const EVERY: Duration = Duration::from_millis(100);
/// A cancel whose unit is not back in Redis this long after its commit was interrupted (a
/// crash): any worker finishes it.
const RESTORE_AFTER_MS: i64 = 2_000;

pub struct Expirer {
    pub store: TicketStore,
    pub db: MySqlPool,
    pub announcer: Announcer,
    pub metrics: Metrics,
    /// `SECKILL_CHAOS_ABORT_AFTER_EXPIRY`: dies after the cancel's commit, before the give-back.
    pub crash: seckill_shared::crash_point::CrashPoint,
}

impl Expirer {
    pub async fn run(self, shutdown: CancellationToken) {
        let policy = crate::retry::retry_policy();
        let mut delays = policy.build();
        loop {
            let wait = match self.round().await {
                Ok(full) => {
                    delays = policy.build();
                    if full {
                        Duration::ZERO
                    } else {
                        EVERY
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        error = format!("{e:#}"),
                        "expiring unpaid orders failed; retrying"
                    );
                    delays.next().unwrap_or(Duration::from_secs(5))
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {},
                _ = shutdown.cancelled() => return,
            }
        }
    }

    /// One round: cancel what is due, give the units back, finish interrupted cancels.
    /// `true` when it found a full batch (more may be due).
    async fn round(&self) -> anyhow::Result<bool> {
        let now = now_ms();
        let started = std::time::SystemTime::now();
        let due = cancel::cancel_overdue(&self.db, now, BATCH).await?;
        self.crash.count(due.len(), || {
            let tickets: Vec<&str> = due.iter().map(|c| c.ticket.as_str()).collect();
            format!(
                "killing this worker after the commit of {} payment-timeout cancels, before their units go back to Redis: tickets {}",
                due.len(),
                tickets.join(",")
            )
        });
        let mut all = due.clone();
        all.extend(cancel::restore_due(&self.db, now - RESTORE_AFTER_MS, BATCH).await?);
        // Payments whose gateway stopped before Redis followed them.
        let paid = cancel::paid_due(&self.db, now - RESTORE_AFTER_MS, BATCH).await?;
        if !paid.is_empty() {
            tracing::warn!(
                orders = paid.len(),
                "paid orders Redis had not followed; following them"
            );
            cancel::follow_paid(&self.store, &self.db, &paid, now).await?;
        }
        if all.is_empty() {
            return Ok(false);
        }
        let back = cancel::give_back(&self.store, &self.db, &all, now).await?;
        let done = now_ms();
        for c in &due {
            if let Some(by) = c.pay_by_ms {
                self.metrics
                    .expiry_lag
                    .observe((done - by).max(0) as f64 / 1000.0);
            }
        }
        self.metrics.expired.inc_by(due.len() as u64);
        for (product, n) in &back {
            self.metrics.units_back.inc_by(*n);
            self.announcer.not_sold_out(*product);
        }
        if telemetry::enabled() {
            trace_expiry(&due, started);
        }
        if !due.is_empty() {
            tracing::info!(
                cancelled = due.len(),
                units_back = back.values().sum::<u64>(),
                "unpaid orders cancelled"
            );
        }
        Ok(due.len() == BATCH)
    }
}

/// A span in the trace of each kept order the round cancelled (its row keeps the
/// `traceparent` its Kafka message had, flagged sampled when the buy was, or when the worker
/// kept a slow order), a child of the buy's `kafka.publish`, naming its ticket: the round's
/// time, and how many it cancelled.
fn trace_expiry(due: &[cancel::Cancelled], started: std::time::SystemTime) {
    let end = std::time::SystemTime::now();
    for c in due {
        let Some(order) = c
            .traceparent
            .as_deref()
            .and_then(telemetry::parse_traceparent)
            .filter(|sc| sc.is_sampled())
        else {
            continue;
        };
        Late::new("payment.expire", started, end)
            .attr(KeyValue::new("seckill.ticket", c.ticket.to_string()))
            .attr(KeyValue::new("seckill.reason", "payment_timeout"))
            .attr(KeyValue::new("seckill.round_cancelled", due.len() as i64))
            .emit(Some(&order));
    }
}
