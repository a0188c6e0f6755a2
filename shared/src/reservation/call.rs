//! One reservation: what a buyer's call carries, and what it got.

use crate::domain::{Ticket, UserId};

/// What the reservation script decided (its reply code for the buyer in brackets; the codes
/// that ask for another step are `ReserveStep`'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// `{1}`: the units asked for are the buyer's, the ticket `pending`.
    Reserved,
    /// `{2, ticket}`: the user already holds this live ticket.
    AlreadyHolds(Ticket),
    /// `{3}`: no unit left (and for a product in buckets, none to borrow).
    SoldOut,
    /// `{4}`: the product is not loaded: unknown, lost, or its state was another server run's.
    UnknownProduct,
    /// `{5}`: before the sale's start.
    NotStarted,
    /// `{6}`: at or after the sale's end.
    Ended,
    /// `{7}`: a waiting-room product, and no verified admission token.
    AdmissionRequired,
    /// `{8}`: a waiting-room product, and the buyer is not admitted now (lapsed, or taken back).
    NotAdmitted,
    /// `{11, ms}`: the buyer's per-user limit, taken in the same call ([`UserLimit`]): no
    /// token; the next comes after this many ms.
    RateLimited { retry_after_ms: u64 },
    /// `{12, max}`: more units asked for than the product's `max_per_buyer`.
    OverLimit { max_per_buyer: u16 },
    /// `{13, left}`: fewer units left than asked for (none taken); for a product in buckets,
    /// the units all the buckets could gather.
    NotEnough { left: u64 },
}

/// The buyer's per-user limit, taken inside the reservation script when Redis is one server
/// (`RedisConn::is_single_server`): one call per buy instead of two.
#[derive(Debug, Clone, PartialEq)]
pub struct UserLimit {
    /// The buyer's bucket (`sk:{<ns>:rl:<user>}:b`).
    pub key: String,
    /// Tokens per second.
    pub rate: f64,
    pub burst: u64,
}

/// One buyer's reply from the reservation script: a decision, or what to do next.
#[derive(Debug)]
pub(crate) enum ReserveStep {
    Done(Reservation),
    /// `{9}`: the home bucket is empty and holds the buyer's place (`borrowing`): borrow a
    /// unit elsewhere.
    Borrow,
    /// `{10, buckets}`: the product has this many buckets, not the number assumed: ask again.
    Buckets(u16),
}

/// One buyer's part of a `reserve.lua` call (see `TicketStore::reserve_step`).
pub(crate) struct ReserveCall {
    pub ticket: Ticket,
    pub user: UserId,
    pub now_ms: i64,
    pub admission_verified: bool,
    pub buckets: u16,
    pub limit: Option<UserLimit>,
    /// Units asked for.
    pub quantity: u16,
}

/// One buyer's reply from `reserve.lua` (`{0, error}`, its step failed, is an error).
pub(crate) type Reply = anyhow::Result<ReserveStep>;
