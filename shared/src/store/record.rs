//! The Redis copy of a ticket, typed.

use crate::domain::TicketStatus;
use anyhow::Context;
use std::collections::HashMap;

/// The `status` field of a Redis ticket record, parsed once where it is read.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::Display,
    strum::VariantArray,
)]
#[strum(serialize_all = "lowercase")]
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
        s.parse().ok()
    }

    pub fn as_str(self) -> &'static str {
        self.into()
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
    /// Units the order holds: the record's `qty`, 1 when it has none (every order of one
    /// unit, and every record written before quantities).
    pub quantity: u16,
    pub order_id: Option<u64>,
    pub reason: Option<String>,
    pub created_at_ms: i64,
    pub confirmed_at_ms: Option<i64>,
    pub paid_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
    /// Where the order landed in Kafka (partition, offset), when it is recorded on the record
    /// itself: `locate_held.lua` writes it there for a buy again, and an older gateway wrote
    /// it there for every order. Otherwise it is in the bucket's `located` list
    /// (`TicketStore::locations`); the sweeper reads both, so a mixed fleet keeps every
    /// promise.
    pub location: Option<(i32, i64)>,
}

impl TicketRecord {
    /// A record from its hash's fields (`HGETALL`), or `None` for one without a status (no
    /// record).
    pub fn from_fields(h: &HashMap<String, String>) -> anyhow::Result<Option<Self>> {
        let Some(raw) = h.get("status") else {
            return Ok(None);
        };
        let state = RecordStatus::parse(raw)
            .with_context(|| format!("unknown ticket status {raw:?} in Redis"))?;
        let num = |f: &str| h.get(f).and_then(|v| v.parse::<i64>().ok());
        Ok(Some(Self {
            state,
            status: state.public(),
            user_id: num("user_id").unwrap_or_default() as u64,
            quantity: num("qty").map_or(1, |q| q.clamp(1, i64::from(crate::MAX_PER_BUYER)) as u16),
            order_id: num("order_id").map(|v| v as u64),
            reason: h.get("reason").cloned(),
            created_at_ms: num("created_at").unwrap_or_default(),
            confirmed_at_ms: num("confirmed_at"),
            paid_at_ms: num("paid_at"),
            cancelled_at_ms: num("cancelled_at"),
            location: num("kp").zip(num("ko")).map(|(p, o)| (p as i32, o)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::RecordStatus::{self, *};
    use strum::VariantArray;

    /// The text of each status, pinned: it is the `status` field of every record in Redis.
    #[test]
    fn statuses_are_pinned_and_round_trip() {
        let pinned = [
            (Pending, "pending"),
            (Processing, "processing"),
            (Borrowing, "borrowing"),
            (Voiding, "voiding"),
            (Confirmed, "confirmed"),
            (Paid, "paid"),
            (Cancelled, "cancelled"),
            (Failed, "failed"),
        ];
        assert_eq!(pinned.len(), RecordStatus::VARIANTS.len());
        for (s, text) in pinned {
            assert_eq!(s.as_str(), text);
            assert_eq!(s.to_string(), text);
            assert_eq!(RecordStatus::parse(text), Some(s));
        }
        assert_eq!(RecordStatus::parse("expired"), None);
    }
}
