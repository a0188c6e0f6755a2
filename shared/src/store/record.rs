//! The Redis copy of a ticket, typed.

use crate::domain::TicketStatus;

/// The `status` field of a Redis ticket record, parsed once where it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordStatus {
    /// Reserved; no worker has claimed it yet.
    Pending,
    /// Claimed by a worker, not yet settled.
    Processing,
    /// Holding its buyer's place in an empty bucket while a unit is borrowed from another.
    Borrowing,
    /// A borrow the sweeper is giving up.
    Voiding,
    Confirmed,
    /// Paid in MySQL; Redis follows (best effort: MySQL decides).
    Paid,
    /// Cancelled in MySQL, and its unit given back in Redis.
    Cancelled,
    Failed,
}

impl RecordStatus {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "processing" => Self::Processing,
            "borrowing" => Self::Borrowing,
            "voiding" => Self::Voiding,
            "confirmed" => Self::Confirmed,
            "paid" => Self::Paid,
            "cancelled" => Self::Cancelled,
            "failed" => Self::Failed,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Borrowing => "borrowing",
            Self::Voiding => "voiding",
            Self::Confirmed => "confirmed",
            Self::Paid => "paid",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }

    /// What a client sees: `processing` is shown as `pending`.
    pub fn public(self) -> TicketStatus {
        match self {
            Self::Pending | Self::Processing | Self::Borrowing | Self::Voiding => {
                TicketStatus::Pending
            }
            Self::Confirmed => TicketStatus::Confirmed,
            Self::Paid => TicketStatus::Paid,
            Self::Cancelled => TicketStatus::Cancelled,
            Self::Failed => TicketStatus::Failed,
        }
    }

    /// Settled by MySQL: nothing more for a worker to do.
    pub fn is_settled(self) -> bool {
        !matches!(
            self,
            Self::Pending | Self::Processing | Self::Borrowing | Self::Voiding
        )
    }
}

/// The Redis copy of a ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketRecord {
    pub state: RecordStatus,
    pub status: TicketStatus,
    pub user_id: u64,
    pub order_id: Option<u64>,
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub confirmed_at_ms: Option<i64>,
    pub paid_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
    /// Where the order landed in Kafka (partition, offset), as builds before 2026-12-04
    /// recorded it, on the record itself. Newer gateways record it in the bucket's `located`
    /// list ([`TicketStore::locations`]); the sweeper reads both, so a mixed fleet keeps
    /// every promise.
    pub location: Option<(i32, i64)>,
}
