//! The states and reasons a ticket and its order go through, as clients and MySQL name them.

use serde::{Deserialize, Serialize};

/// What a client sees of a ticket. Internally a ticket that a worker has claimed is
/// `processing`; clients see it as `pending`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    Default,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum TicketStatus {
    #[default]
    Pending,
    /// Ordered; when the product has a payment window, to be paid by `pay_by_ms`.
    Confirmed,
    /// Paid within the window: final.
    Paid,
    /// Not paid in time, or cancelled by the buyer; its unit went back on sale.
    Cancelled,
    Failed,
}

impl TicketStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The state of an order row in MySQL (`orders.status`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
pub enum OrderStatus {
    Confirmed,
    Paid,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    pub fn public(self) -> TicketStatus {
        match self {
            Self::Confirmed => TicketStatus::Confirmed,
            Self::Paid => TicketStatus::Paid,
            Self::Cancelled => TicketStatus::Cancelled,
        }
    }
}

/// Why an order was cancelled (`orders.cancel_reason`, and the ticket's `reason`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum CancelReason {
    /// Not paid by `pay_by_ms`; a worker cancelled it.
    PaymentTimeout,
    /// The buyer cancelled it.
    BuyerCancelled,
}

impl CancelReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}

/// Why a ticket failed. Stored as its text in Redis (`reason`) and MySQL
/// (`failed_tickets.reason`), and shown to the buyer; every variant is one the code builds,
/// so the API document's list of reasons ([`strum::VariantArray::VARIANTS`]) names only
/// reasons that can happen.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum FailureReason {
    /// Failed on purpose by fault injection (`SECKILL_CHAOS_*`).
    Chaos,
    /// MySQL does not know the product.
    UnknownProduct,
    /// The user already holds an order for the product.
    DuplicateUser,
    /// MySQL had no unit left. Redis reserved one, so the stores had diverged.
    OutOfStock,
    /// No worker took the order: its message never reached the consumer group.
    Expired,
    /// A worker claimed it, then the worker and the message were both lost.
    Lost,
    /// The gateway could not hand the order to Kafka.
    KafkaUnavailable,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }
}
