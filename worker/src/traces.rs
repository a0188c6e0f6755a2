//! The worker's spans of each order (issue 37), recorded once its batch has gone through
//! every step, when its outcome is known: so a failed order, or one slower than
//! `SECKILL_TRACE_SLOW_MS` from its reservation, keeps its trace whatever the sampler said,
//! and the others are kept as the gateway's sampling decided (the `traceparent` flag).
//!
//! An order's span (`order.settle`) is a child of the gateway's `kafka.publish` span (from the
//! message's `traceparent`), with a child for each step its batch ran: `redis.claim`,
//! `mysql.transaction` and `redis.confirm` (or `redis.compensate` for a failed order, whose
//! unit goes back). The MySQL transaction is one for the whole batch: it is a span of the
//! batch's own trace (`settle.batch`), and each order's `mysql.transaction` links to it.

use seckill_shared::settle::{BatchReport, Outcome};
use seckill_shared::telemetry::{self, KeyValue, Late, SpanContext, SpanKind};
use seckill_shared::{OrderMessage, ProductId, Ticket};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::SystemTime;

/// When a step ran: (start, end).
pub(crate) type Took = (SystemTime, SystemTime);

/// When each of a batch's steps ran (its last run, for a step that was retried).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Timings {
    pub claim: Option<Took>,
    pub persist: Option<Took>,
    pub finish: Option<Took>,
}

/// Runs `step`, noting when.
pub(crate) async fn timed<T>(step: impl Future<Output = T>) -> (T, Took) {
    let start = SystemTime::now();
    let out = step.await;
    (out, (start, SystemTime::now()))
}

/// Why an order's trace is kept.
fn why_kept(
    order: &OrderMessage,
    outcome: &Outcome,
    parent: Option<&SpanContext>,
) -> Option<&'static str> {
    let slow = telemetry::slow()?;
    if matches!(outcome, Outcome::Failed { .. }) {
        return Some("failed");
    }
    let took_ms = seckill_shared::now_ms() - order.reserved_at_ms;
    if took_ms >= slow.as_millis() as i64 {
        return Some("slow");
    }
    telemetry::sample_order(parent).then_some("sampled")
}

fn outcome_attributes(outcome: &Outcome) -> (&'static str, Option<String>) {
    match outcome {
        Outcome::Confirmed { .. } => ("confirmed", None),
        Outcome::Failed { reason } => ("failed", Some(reason.as_str().to_owned())),
        Outcome::Cancelled { reason, .. } => ("cancelled", Some(reason.as_str().to_owned())),
        Outcome::Skipped { .. } => ("skipped", None),
    }
}

/// What [`record`] leaves to do.
#[derive(Default)]
pub(crate) struct Kept {
    /// For each product a failed order gave a unit back to, the spans of those orders: the
    /// ZooKeeper announcement joins them.
    pub announced: BTreeMap<ProductId, Vec<SpanContext>>,
    /// Confirmed orders kept though their buys were not sampled (slow ones): their rows are
    /// marked ([`seckill_shared::db::mark_traces_kept`]), so that their payment and expiry
    /// join their traces too.
    pub mark: Vec<String>,
}

/// Records the spans of the batch's kept orders; its first message came at `gathered`.
pub(crate) fn record(
    orders: &[OrderMessage],
    report: &BatchReport,
    gathered: SystemTime,
    t: &Timings,
) -> Kept {
    let mut kept = Kept::default();
    let by_ticket: HashMap<&Ticket, &OrderMessage> =
        orders.iter().map(|o| (&o.ticket, o)).collect();
    let keep: Vec<_> = report
        .outcomes
        .iter()
        .filter_map(|(ticket, outcome)| {
            let order = *by_ticket.get(ticket)?;
            let parent = order
                .traceparent
                .as_deref()
                .and_then(telemetry::parse_traceparent);
            let why = why_kept(order, outcome, parent.as_ref())?;
            Some((order, outcome, parent, why))
        })
        .collect();
    if keep.is_empty() {
        return kept;
    }
    let end = t.finish.map_or_else(SystemTime::now, |f| f.1);
    let size = KeyValue::new("seckill.batch_size", orders.len() as i64);
    let batch = Late::new("settle.batch", gathered, end)
        .attr(size.clone())
        .emit(None);
    let batch_tx = t.persist.and_then(|(start, stop)| {
        Late::new("mysql.transaction", start, stop)
            .kind(SpanKind::Client)
            .attr(KeyValue::new("db.system.name", "mysql"))
            .attr(size.clone())
            .emit(batch.as_ref())
    });
    for (order, outcome, parent, why) in keep {
        let (label, reason) = outcome_attributes(outcome);
        let failed = matches!(outcome, Outcome::Failed { .. });
        let mut span = Late::new("order.settle", gathered, end)
            .kind(SpanKind::Consumer)
            .attr(KeyValue::new(
                "seckill.ticket",
                order.ticket.as_str().to_owned(),
            ))
            .attr(KeyValue::new("product_id", order.product_id.as_i64()))
            .attr(KeyValue::new("user_id", order.user_id.as_i64()))
            .attr(KeyValue::new("seckill.outcome", label))
            .attr(KeyValue::new(
                "seckill.settled_after_ms",
                seckill_shared::now_ms() - order.reserved_at_ms,
            ))
            .attr(KeyValue::new("seckill.kept", why))
            .attr(size.clone())
            .error(failed.then(|| {
                format!(
                    "the order failed: {}",
                    reason.as_deref().unwrap_or("unknown")
                )
            }));
        if let Some(r) = &reason {
            span = span.attr(KeyValue::new("seckill.reason", r.clone()));
        }
        let Some(sc) = span.emit(parent.as_ref()) else {
            continue;
        };
        if let Some((start, stop)) = t.claim {
            Late::new("redis.claim", start, stop)
                .kind(SpanKind::Client)
                .emit(Some(&sc));
        }
        if let Some((start, stop)) = t.persist {
            Late::new("mysql.transaction", start, stop)
                .kind(SpanKind::Client)
                .attr(KeyValue::new("db.system.name", "mysql"))
                .attr(size.clone())
                .links(batch_tx.iter().cloned().collect())
                .emit(Some(&sc));
        }
        if let Some((start, stop)) = t.finish {
            let step = if failed {
                "redis.compensate"
            } else {
                "redis.confirm"
            };
            Late::new(step, start, stop)
                .kind(SpanKind::Client)
                .emit(Some(&sc));
        }
        if failed {
            kept.announced
                .entry(order.product_id)
                .or_default()
                .push(sc.clone());
        } else if matches!(outcome, Outcome::Confirmed { .. })
            && !parent.as_ref().is_some_and(SpanContext::is_sampled)
        {
            kept.mark.push(order.ticket.as_str().to_owned());
        }
        if why != "sampled" {
            tracing::info!(
                ticket = %order.ticket,
                trace_id = %sc.trace_id(),
                span_id = %sc.span_id(),
                outcome = label,
                kept = why,
                "kept the order's trace"
            );
        }
    }
    kept
}
