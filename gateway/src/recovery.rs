//! Redis lost a product: its buys get `503` with `Retry-After`, not `404`, while the gateway
//! rebuilds it from MySQL (`seckill_shared::recovery::reconcile`, fenced against the orders
//! still in Kafka). One rebuild per product at a time in this process; several gateways (and
//! the workers' sweepers) may rebuild the same product at once, which is safe: each rebuild
//! holds the product's row lock while it rewrites Redis.

use crate::error::ApiError;
use seckill_shared::kafka::Fence;
use seckill_shared::store::TicketStore;
use seckill_shared::{db, recovery, ProductId, Settings};
use sqlx::MySqlPool;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

pub struct Recovery {
    fence: Arc<Fence>,
    running: Arc<Mutex<HashSet<ProductId>>>,
}

impl Recovery {
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        Ok(Self {
            fence: Arc::new(Fence::new(settings)?),
            running: Arc::default(),
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
            "the sale's state is being restored after a Redis restart, retry shortly".into(),
        )
    }
}
