//! Redis lost a product: its buys get `503` with `Retry-After`, not `404`, while the gateway
//! rebuilds it from MySQL (`seckill_shared::recovery::reconcile`, fenced against the orders
//! still in Kafka). One rebuild per product at a time in this process; several gateways (and
//! the workers' sweepers) may rebuild the same product at once, which is safe: each rebuild
//! holds the product's row lock while it rewrites Redis.

use crate::error::ApiError;
use seckill_shared::config::KafkaSettings;
use seckill_shared::kafka::Fence;
use seckill_shared::store::TicketStore;
use seckill_shared::{db, recovery, ProductId};
use sqlx::MySqlPool;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub struct Recovery {
    fence: Arc<Fence>,
    running: Arc<Mutex<HashSet<ProductId>>>,
    namespace: String,
    /// The database was seen to belong to this namespace ([`db::claim_namespace`]).
    owned: AtomicBool,
}

impl Recovery {
    /// Fences `kafka`'s topic against the workers' consumer `group`, in `namespace`.
    pub fn new(kafka: &KafkaSettings, group: &str, namespace: &str) -> anyhow::Result<Self> {
        Ok(Self {
            fence: Arc::new(Fence::new(kafka, group)?),
            running: Arc::default(),
            namespace: namespace.to_owned(),
            owned: AtomicBool::new(false),
        })
    }

    /// Claims the database for this gateway's namespace, or finds it claimed by it. Startup
    /// calls it once (a database of another namespace stops the gateway there); while MySQL
    /// was down then, every rebuild and preload calls it first.
    pub async fn claim(&self, pool: &MySqlPool) -> anyhow::Result<db::Owner> {
        let owner = db::claim_namespace(pool, &self.namespace).await?;
        if owner == db::Owner::Ours {
            self.owned.store(true, Ordering::Relaxed);
        }
        Ok(owner)
    }

    /// `Ok` once the database is known to be this namespace's. Writing another namespace's
    /// products into this Redis would sell their stock twice.
    pub async fn ensure_owned(&self, pool: &MySqlPool) -> Result<(), ApiError> {
        if self.owned.load(Ordering::Relaxed) {
            return Ok(());
        }
        let owner = self
            .claim(pool)
            .await
            .map_err(|e| ApiError::unavailable("MySQL", e))?;
        owner
            .ensure_ours(
                &self.namespace,
                "refusing to write its products into this Redis",
            )
            .map_err(|e| {
                tracing::error!(
                    error = format!("{e:#}"),
                    "the database is another namespace's"
                );
                ApiError::Unavailable(
                    "this gateway's MySQL database belongs to another namespace (a \
                     misconfiguration; the gateway's log names both)"
                        .into(),
                )
            })
    }

    pub fn fence(&self) -> &Fence {
        &self.fence
    }

    /// Redis does not know `product`. A product MySQL has loaded for sale, and not closed, was
    /// lost by Redis: start rebuilding it and answer `503`. A closed sale answers `409` (sold
    /// out) or `403` (ended); any other product is unknown (`404`).
    pub async fn on_unknown_product(
        &self,
        store: &TicketStore,
        pool: &MySqlPool,
        product: ProductId,
    ) -> ApiError {
        let p = match db::product(pool, product).await {
            Ok(Some(p)) if p.loaded_at_ms.is_some() => p,
            Ok(_) => return ApiError::UnknownProduct,
            Err(e) => return ApiError::unavailable("MySQL", e),
        };
        if p.closed_at_ms.is_some() {
            // The sale is over and its Redis keys have expired.
            return if p.stock == 0 {
                ApiError::SoldOut
            } else {
                ApiError::SaleEnded
            };
        }
        if let Err(e) = self.ensure_owned(pool).await {
            return e;
        }
        if self.running.lock().expect("lock poisoned").insert(product) {
            tracing::warn!(%product, "Redis lost the product's state; rebuilding it from MySQL");
            let (store, pool) = (store.clone(), pool.clone());
            let (fence, running) = (self.fence.clone(), self.running.clone());
            tokio::spawn(async move {
                match recovery::reconcile_lost(&store, &pool, product, Some(&fence)).await {
                    Ok(report) => tracing::warn!(%product, ?report, "product rebuilt"),
                    Err(e) => {
                        tracing::error!(error = format!("{e:#}"), %product, "could not rebuild the product")
                    }
                }
                running.lock().expect("lock poisoned").remove(&product);
            });
        }
        ApiError::Unavailable(
            "Redis holds no state for this product, which MySQL has on sale (Redis restarted \
             or lost its data): it is being rebuilt from MySQL, retry shortly"
                .into(),
        )
    }
}
