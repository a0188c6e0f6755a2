//! `load --sample-admin-ms`: the product's admin view (`GET /admin/products/{id}`), read at a
//! steady pace while the load runs and its tickets settle, into the summary's
//! `admin_samples`. The chaos timeline (`seckill-bench plot chaos`) draws confirms,
//! compensations and pending from them.

use super::admin_api::AdminApi;
use super::args::LoadArgs;
use crate::now_us;
use seckill_shared::api::ProductView;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One look at the admin view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdminSample {
    /// When the look was sent, ms since the epoch (the load tool's clock).
    pub at_ms: u64,
    /// When its answer came. The view is read when the gateway answers, which can be long
    /// after the look was sent (a look waits for MySQL while it is down): a timeline places
    /// the view here.
    #[serde(default)]
    pub answered_ms: Option<u64>,
    /// `None` when no gateway answered in time (a gateway or a store down).
    pub view: Option<SampledView>,
}

/// The counters of the admin view that a timeline shows (Redis's, but `stock_db`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampledView {
    /// `None` while Redis has lost the product.
    pub stock_redis: Option<i64>,
    pub stock_db: i64,
    /// Reserved, not yet confirmed or failed.
    pub pending: i64,
    pub confirmed: i64,
    /// Failed tickets: each gave its unit back (a compensation).
    pub failed: i64,
    #[serde(default)]
    pub paid: i64,
    #[serde(default)]
    pub cancelled: i64,
}

impl SampledView {
    /// The counters of an admin view.
    pub fn of(v: &ProductView) -> Self {
        Self {
            stock_redis: v.stock_redis,
            stock_db: v.stock_db,
            pending: v.pending,
            confirmed: v.confirmed,
            failed: v.failed,
            paid: v.paid,
            cancelled: v.cancelled,
        }
    }
}

/// A look that takes longer than this is recorded as unanswered.
const LOOK_TIMEOUT: Duration = Duration::from_secs(2);

/// The sampling task; [`AdminSampler::finish`] stops it and hands the samples over.
pub struct AdminSampler {
    stop: CancellationToken,
    task: JoinHandle<Vec<AdminSample>>,
}

impl AdminSampler {
    /// `--sample-admin-ms` (with the admin token): a sampler of `product`'s view, started now.
    pub fn from_args(
        args: &LoadArgs,
        client: &reqwest::Client,
        gateways: &[String],
        product: u64,
    ) -> anyhow::Result<Option<Self>> {
        let Some(ms) = args.sample_admin_ms else {
            return Ok(None);
        };
        let token = args.admin_token.as_ref().ok_or_else(|| {
            anyhow::anyhow!("--sample-admin-ms needs --admin-token (or SECKILL_ADMIN_TOKEN)")
        })?;
        let api = AdminApi::new(client.clone(), gateways, product, token)?;
        Ok(Some(Self::spawn(api, Duration::from_millis(ms.max(10)))))
    }

    /// Looks every `every`, each in its own task: a look that hangs (a store down behind the
    /// admin view) does not hold back the next ones.
    pub fn spawn(api: AdminApi, every: Duration) -> Self {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut looks = Vec::new();
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = token.cancelled() => break,
                    _ = tick.tick() => {}
                }
                let mut api = api.clone();
                looks.push(tokio::spawn(async move {
                    let at_ms = now_us() / 1000;
                    let view = tokio::time::timeout(LOOK_TIMEOUT, api.view())
                        .await
                        .ok()
                        .and_then(Result::ok)
                        .map(|v| SampledView::of(&v));
                    AdminSample {
                        at_ms,
                        answered_ms: view.is_some().then(|| now_us() / 1000),
                        view,
                    }
                }));
            }
            // Each look ends within LOOK_TIMEOUT.
            let mut samples = Vec::with_capacity(looks.len());
            for l in looks {
                samples.extend(l.await.ok());
            }
            samples
        });
        Self { stop, task }
    }

    pub async fn finish(self) -> Vec<AdminSample> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}
