//! [`AppState`]: what every request handler shares.

use crate::admission::Admission;
use crate::auth::admin::Admins;
use crate::auth::Authenticator;
use crate::metrics::Metrics;
use crate::publish::OrderPublisher;
use crate::rate_limit::RateLimiter;
use crate::recovery::Recovery;
use crate::sold_out::SoldOutMarkers;
use crate::waiting_room::Admissions;
use actix_web::web;
use seckill_shared::payments::attempts::Payments;
use seckill_shared::settle::Settler;
use seckill_shared::store::TicketStore;
use sqlx::MySqlPool;
use std::sync::Arc;

/// Everything a request needs. Shared by all of actix's worker threads.
pub struct AppState {
    /// Buyer identity: the per-address limit and token verification. Also app data of its
    /// own, for the identity extractors.
    pub auth: web::Data<Authenticator>,
    pub store: TicketStore,
    pub db: MySqlPool,
    pub publisher: OrderPublisher,
    pub sold_out: Arc<SoldOutMarkers>,
    pub metrics: Metrics,
    /// `SECKILL_NAMESPACE`: the prefix of every Redis key, topic and ZooKeeper node.
    pub namespace: String,
    pub sync_mode: bool,
    pub settler: Settler,
    /// Caps the buys in flight (`SECKILL_MAX_IN_FLIGHT`).
    pub admission: Admission,
    /// Rebuilds a product that Redis lost.
    pub recovery: Recovery,
    /// The payment provider and its callbacks' secret.
    pub payments: Payments,
    /// `SECKILL_PAYMENT_WINDOW_SECS`: the window of a priced product that sets none.
    pub default_payment_window_secs: u64,
    /// Waiting rooms' admission tokens.
    pub admissions: std::sync::Arc<Admissions>,
    /// The admin token, and wrong ones per client address
    /// (`SECKILL_ADMIN_AUTH_FAILURES_PER_MIN`). Also app data of its own, for [`crate::auth::admin::Admin`].
    pub admins: web::Data<Admins>,
    /// The last dependency check, which `/healthz` answers from.
    pub health: crate::dependencies::HealthCache,
    /// A held `pending` ticket with no Kafka location older than this (ms) lost its order
    /// with its gateway: any publish of it is over (the delivery timeout, its report's grace,
    /// the location's hold).
    pub republish_after_ms: i64,
    /// The live streams open on this gateway (`…/events`).
    pub streams: std::sync::Arc<crate::events::Streams>,
    /// The waiting rooms with live streams on this gateway.
    pub rooms: std::sync::Arc<crate::events::room::Rooms>,
    /// The products' buyer views read lately (`GET /v1/seckill/{product_id}`).
    pub sale_views: SaleViews,
    /// `SECKILL_SSE_HEARTBEAT_SECS`.
    pub sse_heartbeat: std::time::Duration,
}

/// The products' buyer views read lately, per product: (when, the view).
#[derive(Default)]
pub struct SaleViews(
    pub  std::sync::Mutex<
        std::collections::HashMap<seckill_shared::ProductId, (i64, seckill_shared::api::SaleView)>,
    >,
);

impl AppState {
    pub fn count(&self, route: &str, outcome: &str) {
        // The one counted on every accept, looked up once (`Metrics::buys_accepted`).
        if (route, outcome) == ("buy", "202") {
            return self.metrics.buys_accepted.inc();
        }
        self.metrics
            .requests
            .with_label_values(&[route, outcome])
            .inc();
    }
}

/// One actix worker thread's own Redis connection for the buy path and the waiting room's
/// joins and polls (`app_data`, made by the server's app factory on each worker thread). A
/// shared connection's driver task runs on the main runtime, so every call hopped to another
/// thread and back; this one's runs on the worker thread that first uses it.
pub struct ThreadRedis {
    pub store: TicketStore,
    /// The per-user rate limit of buys; `None` when it is off.
    pub rate_limiter: Option<RateLimiter>,
    /// Waiting-room joins and polls per buyer; `None` when off.
    pub queue_limiter: Option<RateLimiter>,
    /// Waiting-room joins per client address, for the whole fleet; `None` when off.
    pub join_address_limiter: Option<RateLimiter>,
}

impl ThreadRedis {
    /// A new connection for this thread; the shared one if it cannot be made (it can only
    /// fail on a URL, which the shared store already accepted).
    pub fn open(state: &AppState, settings: &seckill_shared::Settings) -> Self {
        let store = settings
            .redis
            .topology()
            .and_then(|t| state.store.on_new_connection(&t, settings.redis.timeout()))
            .unwrap_or_else(|e| {
                tracing::warn!(
                    error = format!("{e:#}"),
                    "no Redis connection of this worker's own; sharing one"
                );
                state.store.clone()
            });
        Self {
            rate_limiter: RateLimiter::new(
                store.connection(),
                &settings.common.namespace,
                &settings.gateway,
            ),
            queue_limiter: RateLimiter::for_queue(
                store.connection(),
                &settings.common.namespace,
                settings.waiting_room.rate_limit_per_user_per_sec,
                settings.gateway.rate_limit_burst,
            ),
            join_address_limiter: RateLimiter::for_address_joins(
                store.connection(),
                &settings.common.namespace,
                settings.waiting_room.queue_joins_per_address_per_min,
            ),
            store,
        }
    }
}
