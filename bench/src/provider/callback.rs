//! The callbacks: after a charge's delay, decide it, sign the callback's body once and POST
//! those exact bytes to its `callback_url`, retrying with backoff while the receiver fails.

use super::ledger::{Ledger, Plan};
use anyhow::Context;
use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use seckill_shared::payments::{self, Callback, Charge};
use secrecy::{ExposeSecret, SecretString};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// How a failed callback is retried: `attempts` retries after the first try, the delays
/// doubling from `first_delay` up to `max_delay` (with jitter), `total` at most in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub first_delay: Duration,
    pub max_delay: Duration,
    pub attempts: usize,
    pub total: Duration,
}

impl Default for Retry {
    /// About ten retries over about 30 s. The signature's `t` stays well inside
    /// [`payments::MAX_SKEW_SECS`] of the last one.
    fn default() -> Self {
        Self {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(4),
            attempts: 10,
            total: Duration::from_secs(30),
        }
    }
}

impl Retry {
    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.first_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.attempts)
            .with_total_delay(Some(self.total))
            .with_jitter()
    }
}

/// Schedules and sends the callbacks. Cheap to clone.
#[derive(Clone)]
pub struct Dispatcher {
    ledger: Arc<Ledger>,
    client: reqwest::Client,
    secret: Arc<SecretString>,
    retry: Retry,
    /// Callbacks run here, not on the HTTP worker that took the charge.
    runtime: Handle,
    stop: CancellationToken,
}

impl Dispatcher {
    pub fn new(
        ledger: Arc<Ledger>,
        client: reqwest::Client,
        secret: SecretString,
        retry: Retry,
        runtime: Handle,
        stop: CancellationToken,
    ) -> Self {
        Self {
            ledger,
            client,
            secret: Arc::new(secret),
            retry,
            runtime,
            stop,
        }
    }

    /// Starts `charge`'s callback; it gives up when the provider stops.
    pub fn schedule(&self, charge: Charge, plan: Plan) {
        let this = self.clone();
        self.runtime.spawn(async move {
            tokio::select! {
                () = this.stop.cancelled() => {}
                () = this.settle(charge, plan) => {}
            }
        });
    }

    async fn settle(&self, charge: Charge, plan: Plan) {
        tokio::time::sleep(plan.after).await;
        self.ledger.decide(&charge.payment_id, plan.outcome);
        let body = Bytes::from(
            serde_json::to_vec(&Callback {
                payment_id: charge.payment_id.clone(),
                status: plan.outcome,
            })
            .expect("a callback serializes"),
        );
        let signature = payments::sign(self.secret.expose_secret().as_bytes(), unix_now(), &body);
        let copies = if plan.duplicate { 2 } else { 1 };
        for _ in 0..copies {
            if let Err(e) = self
                .deliver(&charge.payment_id, &charge.callback_url, &body, &signature)
                .await
            {
                eprintln!(
                    "provider: giving up on the callback of {} to {}: {e:#}",
                    charge.payment_id, charge.callback_url
                );
                return;
            }
        }
    }

    /// POSTs `body` until the receiver answers a 2xx, or the retries run out.
    async fn deliver(
        &self,
        payment_id: &str,
        url: &str,
        body: &Bytes,
        signature: &str,
    ) -> anyhow::Result<()> {
        let attempt = || async {
            let sent = self
                .client
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(payments::SIGNATURE_HEADER, signature)
                .body(body.clone())
                .send()
                .await
                .context("sending the callback")
                .and_then(|r| {
                    let status = r.status();
                    anyhow::ensure!(status.is_success(), "the receiver answered {status}");
                    Ok(())
                });
            if sent.is_err() {
                self.ledger.callback_failed();
            }
            sent
        };
        attempt
            .retry(self.retry.backoff())
            .sleep(tokio::time::sleep)
            .await?;
        self.ledger.callback_sent(payment_id);
        Ok(())
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}
