//! The dashboard's overview: the newest products, per-second series and every process.

use super::admin::ProductView;
use crate::live::{self, field, Heartbeat};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use utoipa::ToSchema;

/// Query of `GET /admin/overview`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OverviewQuery {
    /// Products shown (the newest), 1 to 50. Default 50.
    #[param(minimum = 1, maximum = 50)]
    pub limit: Option<u32>,
}

/// The body of `200` to `GET /admin/overview`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Overview {
    pub now_ms: i64,
    /// The series' step.
    pub step_ms: i64,
    /// The newest products, as `GET /admin/products/{id}` shows each.
    pub products: Vec<ProductView>,
    /// All products in MySQL.
    pub products_total: i64,
    pub series: Series,
    pub gateways: Vec<ProcessView>,
    pub workers: Vec<ProcessView>,
}

/// Per second, oldest first, summed over every gateway and worker of the namespace.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// The start of each second, ms since the epoch.
    pub t_ms: Vec<i64>,
    /// Buys answered `202`.
    pub reservations: Vec<u64>,
    /// Buys answered `409`.
    pub sold_out: Vec<u64>,
    /// Orders confirmed in MySQL.
    pub confirmations: Vec<u64>,
    /// Units given back to Redis.
    pub compensations: Vec<u64>,
    /// Batches the workers settled.
    pub batches: Vec<u64>,
    /// 202 → confirmed, the 99th percentile of the orders confirmed in that second; `null`
    /// when none were.
    pub confirm_p99_ms: Vec<Option<f64>>,
}

/// One gateway or worker, from its last heartbeat.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessView {
    pub id: String,
    pub seen_ms_ago: i64,
    /// Each dependency it checks, and whether the last check passed.
    pub dependencies: BTreeMap<String, bool>,
    /// Gateways: products whose local sold-out marker is set.
    pub sold_out_markers: Vec<u64>,
    /// Workers: consumer lag of each partition they own.
    pub partition_lag: BTreeMap<String, i64>,
    /// Workers: age of the oldest unsettled ticket.
    #[schema(required = true)]
    pub oldest_pending_age_ms: Option<i64>,
}

impl ProcessView {
    pub fn of(h: Heartbeat, now_ms: i64) -> Self {
        Self {
            id: h.id,
            seen_ms_ago: (now_ms - h.at_ms).max(0),
            dependencies: h.dependencies,
            sold_out_markers: h.sold_out_markers,
            partition_lag: h
                .partition_lag
                .into_iter()
                .map(|(p, lag)| (p.to_string(), lag))
                .collect(),
            oldest_pending_age_ms: h.oldest_pending_age_ms,
        }
    }
}

impl Series {
    pub fn of(seconds: Vec<(i64, HashMap<String, u64>)>) -> Self {
        let mut s = Series::default();
        for (sec, counts) in seconds {
            let n = |f: &str| counts.get(f).copied().unwrap_or(0);
            s.t_ms.push(sec * 1000);
            s.reservations.push(n(field::RESERVATIONS));
            s.sold_out.push(n(field::SOLD_OUT));
            s.confirmations.push(n(field::CONFIRMATIONS));
            s.compensations.push(n(field::COMPENSATIONS));
            s.batches.push(n(field::BATCHES));
            s.confirm_p99_ms.push(live::p99_ms(&counts));
        }
        s
    }
}
