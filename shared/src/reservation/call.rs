//! One reservation: what a buyer's call carries, and what it got.

use crate::domain::{Ticket, UserId};

/// What the reservation script decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    Reserved,
    /// The user already holds this live ticket.
    AlreadyHolds(Ticket),
    SoldOut,
    UnknownProduct,
    NotStarted,
    Ended,
    /// A waiting-room product, and no verified admission token.
    AdmissionRequired,
    /// A waiting-room product, and the buyer is not admitted now (lapsed, or taken back).
    NotAdmitted,
    /// The buyer's per-user limit, taken in the same call ([`UserLimit`]): no token; the next
    /// comes after this many ms.
    RateLimited {
        retry_after_ms: u64,
    },
}

/// The buyer's per-user limit, taken inside the reservation script when Redis is one server
/// ([`RedisConn::is_single_server`]): one call per buy instead of two.
#[derive(Debug, Clone, PartialEq)]
pub struct UserLimit {
    /// The buyer's bucket (`sk:{<ns>:rl:<user>}:b`).
    pub key: String,
    /// Tokens per second.
    pub rate: f64,
    pub burst: u64,
}

/// What one run of the reservation script asks for next.
pub(crate) enum ReserveStep {
    Done(Reservation),
    /// The home bucket is empty and holds the buyer's place: borrow a unit elsewhere.
    Borrow,
    /// The product has this many buckets, not the number assumed.
    Buckets(u16),
}

/// One buyer's part of a `reserve.lua` call (see `TicketStore::reserve_step`).
pub struct ReserveCall {
    pub ticket: Ticket,
    pub user: UserId,
    pub now_ms: i64,
    pub admission_verified: bool,
    pub buckets: u16,
    pub limit: Option<UserLimit>,
}

/// `reserve.lua`'s reply: its code, and the value that comes with some codes.
pub type Reply = anyhow::Result<(i64, Option<String>)>;
