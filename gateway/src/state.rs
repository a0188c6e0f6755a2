//! [`AppState`]: what every request handler shares.

use crate::admission::Admission;
use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::payments::Payments;
use crate::publish::{Locator, OrderPublisher};
use crate::rate_limit::RateLimiter;
use crate::recovery::Recovery;
use crate::sold_out::SoldOutMarkers;
use crate::waiting_room::Admissions;
use seckill_shared::settle::Settler;
use seckill_shared::store::TicketStore;
use secrecy::SecretString;
use sqlx::MySqlPool;
use std::sync::Arc;

/// Everything a request needs. Shared by all of actix's worker threads.
pub struct AppState {
    /// Buyer identity: the per-address limit and token verification.
    pub auth: Authenticator,
    pub store: TicketStore,
    pub db: MySqlPool,
    pub publisher: OrderPublisher,
    pub sold_out: Arc<SoldOutMarkers>,
    pub metrics: Metrics,
    pub admin_token: SecretString,
    /// `SECKILL_NAMESPACE`: the prefix of every Redis key, topic and ZooKeeper node.
    pub namespace: String,
    pub sync_mode: bool,
    pub settler: Settler,
    /// Caps the buys in flight (`SECKILL_MAX_IN_FLIGHT`).
    pub admission: Admission,
    /// The per-user rate limit; `None` when it is off.
    pub rate_limiter: Option<RateLimiter>,
    /// Rebuilds a product that Redis lost.
    pub recovery: Recovery,
    /// Records each accepted order's Kafka location, in batches.
    pub locator: Locator,
    /// The payment provider and its callbacks' secret.
    pub payments: Payments,
    /// `SECKILL_PAYMENT_WINDOW_SECS`: the window of a priced product that sets none.
    pub default_payment_window_secs: u64,
    /// Waiting rooms' admission tokens.
    pub admissions: Admissions,
    /// Waiting-room joins and polls per buyer; `None` when off.
    pub queue_limiter: Option<RateLimiter>,
}

impl AppState {
    pub fn count(&self, route: &str, outcome: &str) {
        self.metrics
            .requests
            .with_label_values(&[route, outcome])
            .inc();
    }
}
