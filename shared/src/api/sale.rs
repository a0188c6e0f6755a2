//! What a buyer's page shows of a product before the sale: `GET /v1/seckill/{product_id}`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A product as buyers see it (no stock figures: those are the admin's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SaleView {
    pub id: u64,
    pub name: String,
    /// In minor units (cents, fen); 0 for a product without a price.
    pub price: i64,
    /// ISO 4217.
    pub currency: String,
    /// When the sale starts, ms since the Unix epoch; absent: on sale once loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub starts_at_ms: Option<i64>,
    /// When the sale ends, ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub ends_at_ms: Option<i64>,
    /// A confirmed order must be paid within this; 0: the order is final.
    pub payment_window_secs: i64,
    /// The most units one buyer may take, in one order (a buy's `quantity`).
    pub max_per_buyer: u16,
    /// Buyers join its waiting room, and buy once admitted.
    pub waiting_room: bool,
    /// When the waiting room opens, ms since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub queue_opens_at_ms: Option<i64>,
    /// The gateway's clock when it answered, ms since the Unix epoch: a page counts down with
    /// it, not with the device's clock.
    pub now_ms: i64,
}
