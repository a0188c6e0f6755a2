//! What the checks look at: the history's facts, Redis's, MySQL's, and each ticket's final
//! state, gathered into one [`AuditInput`].

use super::RoomFacts;
use crate::history::{SaleEndCheck, SettledLine};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::sale::BucketCounts;
use seckill_shared::{CancelReason, OrderStatus};
use std::collections::{BTreeMap, BTreeSet};

/// Where a ticket ended, from its Redis record or, once that is gone, from MySQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TicketState {
    /// Pending or processing.
    Pending { user_id: u64 },
    /// Ordered, not (yet) paid.
    Confirmed {
        user_id: u64,
        order_id: Option<u64>,
        /// When the worker confirmed it in Redis, ms since the epoch (worker clock); `None` once
        /// only MySQL knows the ticket.
        confirmed_at_ms: Option<i64>,
    },
    /// Ordered and paid: the unit is sold for good.
    Paid {
        user_id: u64,
        order_id: Option<u64>,
        confirmed_at_ms: Option<i64>,
    },
    /// Ordered, then cancelled: its unit went back on sale and the buyer was free to buy again.
    Cancelled {
        user_id: u64,
        order_id: Option<u64>,
        confirmed_at_ms: Option<i64>,
        /// From the Redis record, else from the order row (a record rebuilt from MySQL has
        /// none). `None`: neither store says why.
        reason: Option<CancelReason>,
    },
    Failed {
        user_id: u64,
        reason: Option<String>,
    },
    /// Neither Redis nor MySQL knows it.
    Unknown,
}

/// How a failure or a cancel without a reason is counted: `failed:none`, `cancelled:none`.
const NO_REASON: &str = "none";

impl TicketState {
    /// The user the stores file the ticket under.
    pub fn user_id(&self) -> Option<u64> {
        match self {
            Self::Pending { user_id }
            | Self::Confirmed { user_id, .. }
            | Self::Paid { user_id, .. }
            | Self::Cancelled { user_id, .. }
            | Self::Failed { user_id, .. } => Some(*user_id),
            Self::Unknown => None,
        }
    }

    /// `pending`, `confirmed`, `paid`, `cancelled`, `failed` or `unknown`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Pending { .. } => "pending",
            Self::Confirmed { .. } => "confirmed",
            Self::Paid { .. } => "paid",
            Self::Cancelled { .. } => "cancelled",
            Self::Failed { .. } => "failed",
            Self::Unknown => "unknown",
        }
    }

    /// The outcome the ticket is counted under: `confirmed`, `paid`, `cancelled:<reason>`,
    /// `failed:<reason>`, `pending` or `unknown`.
    pub fn outcome(&self) -> String {
        match self {
            Self::Failed { reason, .. } => {
                format!("failed:{}", reason.as_deref().unwrap_or(NO_REASON))
            }
            Self::Cancelled { reason, .. } => {
                format!(
                    "cancelled:{}",
                    reason.map_or(NO_REASON, CancelReason::as_str)
                )
            }
            other => other.label().to_owned(),
        }
    }

    /// The order the ticket became, if it became one (`confirmed`, `paid` or `cancelled`):
    /// its id, when the store that answered gave one.
    pub fn order(&self) -> Option<Option<u64>> {
        match self {
            Self::Confirmed { order_id, .. }
            | Self::Paid { order_id, .. }
            | Self::Cancelled { order_id, .. } => Some(*order_id),
            _ => None,
        }
    }

    /// The order's status in MySQL's words, for a ticket that became an order.
    pub fn order_status(&self) -> Option<OrderStatus> {
        match self {
            Self::Confirmed { .. } => Some(OrderStatus::Confirmed),
            Self::Paid { .. } => Some(OrderStatus::Paid),
            Self::Cancelled { .. } => Some(OrderStatus::Cancelled),
            _ => None,
        }
    }

    /// When it was confirmed in Redis, for a ticket that became an order.
    pub fn confirmed_at_ms(&self) -> Option<i64> {
        match self {
            Self::Confirmed {
                confirmed_at_ms, ..
            }
            | Self::Paid {
                confirmed_at_ms, ..
            }
            | Self::Cancelled {
                confirmed_at_ms, ..
            } => *confirmed_at_ms,
            _ => None,
        }
    }
}

/// What the history says of one ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryTicket {
    /// The user the ticket was first answered to.
    pub user: u64,
    /// Other users the same ticket was answered to; there must be none.
    pub other_users: BTreeSet<u64>,
    /// What the buyer saw when the polling ended.
    pub settled: Option<SettledLine>,
    /// The units the first answered buy asked for.
    pub quantity: u16,
}

impl HistoryTicket {
    /// The units the ticket holds: as its settled answer says, else as its buy asked.
    pub fn units(&self) -> i64 {
        i64::from(self.settled.as_ref().map_or(self.quantity, |s| s.quantity))
    }
}

/// What the history file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFacts {
    pub requests: u64,
    /// Every ticket of the product answered with 202, 200 or 201: the promises made.
    pub tickets: BTreeMap<String, HistoryTicket>,
    /// Answers 202, 200 or 201 the audit cannot follow (no ticket, a ticket that does not
    /// parse, no user), described.
    pub malformed: Vec<String>,
    /// Settled lines of tickets that no request line was answered with.
    pub stray_settled: Vec<String>,
    /// Users with a request that got no HTTP answer (a transport error, say the gateway was
    /// killed mid-request). Their buy may have gone through without them being told.
    pub unanswered_users: BTreeSet<u64>,
    /// Users whose last request went unanswered: the only buyers who may hold a ticket they
    /// were never told of when the load stopped.
    pub last_unanswered_users: BTreeSet<u64>,
    /// The history has a summary line.
    pub has_summary: bool,
    /// The summary's `until_sold_out`: the load ran until every gateway answered 409.
    pub until_sold_out: bool,
    /// The summary's `sold_out_reached`.
    pub sold_out_reached: Option<bool>,
    /// The summary's `sale_end.checked_by`: the load kept offering fresh buyers until the sale
    /// was over, units of failed orders sold again. `None`: a load that stopped at its first
    /// round of 409s.
    pub sale_end_checked_by: Option<SaleEndCheck>,
    /// When the load received its last answer (or gave up on a request), µs since the epoch,
    /// client clock: the last moment a unit that came back could still be sold. `None` without
    /// requests.
    pub last_answer_us: Option<u64>,
}

/// The Redis view of the product (`TicketStore::counts`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisFacts {
    /// `None` when the product is not loaded.
    pub stock: Option<i64>,
    /// `initial` in the meta hash, for information.
    pub initial: Option<i64>,
    /// Units in flight: the pending set's tickets, each with its quantity.
    pub pending: i64,
    /// The `confirmed` counter in the meta hash: units sold (confirmed or paid).
    pub confirmed: i64,
    /// The `paid` counter in the meta hash.
    pub paid: i64,
    /// The `cancelled` counter in the meta hash.
    pub cancelled: i64,
    pub failed: i64,
    /// Each stock bucket, for a product split into several (else empty).
    pub buckets: Vec<BucketCounts>,
}

/// An `orders` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRow {
    pub id: u64,
    pub ticket: String,
    pub user_id: u64,
    pub status: OrderStatus,
    /// The payment deadline; `None` for a product without a payment window.
    pub pay_by_ms: Option<i64>,
    pub paid_at_ms: Option<i64>,
    pub cancelled_at_ms: Option<i64>,
    pub cancel_reason: Option<CancelReason>,
    /// The cancel committed, and its unit may not be back in Redis yet.
    pub restore_due: bool,
    /// Units the order holds.
    pub quantity: u16,
}

impl OrderRow {
    /// A `confirmed` order without a payment window, as every order was before payments.
    pub fn confirmed(id: u64, ticket: impl Into<String>, user_id: u64) -> Self {
        Self {
            id,
            ticket: ticket.into(),
            user_id,
            status: OrderStatus::Confirmed,
            pay_by_ms: None,
            paid_at_ms: None,
            cancelled_at_ms: None,
            cancel_reason: None,
            restore_due: false,
            quantity: 1,
        }
    }

    /// Confirmed or paid: the order holds a unit. A cancelled one gave it back.
    pub fn sold(&self) -> bool {
        self.status != OrderStatus::Cancelled
    }
}

/// A `payments` row of one of the product's tickets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRow {
    pub payment_id: String,
    pub ticket: String,
    pub user_id: u64,
    pub status: PaymentStatus,
    /// When the provider's callback settled it (server clock, the same `now` that paid the
    /// order or found it no longer payable).
    pub settled_at_ms: Option<i64>,
}

/// The MySQL view of the product.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MysqlFacts {
    pub stock: i64,
    /// `products.initial_stock`, for information only: the database under test does not say
    /// how many units the sale had.
    pub initial_stock: i64,
    /// Every `orders` row of the product.
    pub orders: Vec<OrderRow>,
    /// Tickets of the product in `failed_tickets`.
    pub failed_tickets: BTreeSet<String>,
    /// Their buyers.
    pub failed_users: BTreeSet<u64>,
    /// The units of their failed tickets, by buyer.
    pub failed_units: BTreeMap<u64, i64>,
    /// Every `payments` row of a ticket of the product (none before payments existed).
    pub payments: Vec<PaymentRow>,
    /// How many Redis stock buckets the product is split over.
    pub buckets: u16,
    /// The sweeper closed the sale (`products.closed_at_ms`): over, with nothing in flight.
    /// Its Redis keys expire after an hour, or go with a Redis restart, and are not rebuilt.
    pub closed: bool,
}

impl MysqlFacts {
    /// The units of the order rows in `status` (every Redis counter counts units too).
    pub fn count(&self, status: OrderStatus) -> i64 {
        self.orders
            .iter()
            .filter(|o| o.status == status)
            .map(|o| i64::from(o.quantity))
            .sum()
    }

    /// The units of the order rows holding theirs: confirmed or paid.
    pub fn sold(&self) -> i64 {
        self.orders
            .iter()
            .filter(|o| o.sold())
            .map(|o| i64::from(o.quantity))
            .sum()
    }
}

/// Everything the checks look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditInput {
    pub product: u64,
    /// Units the sale started with (`--initial-stock`, from the scenario).
    pub initial_stock: i64,
    /// Failure reasons the run allows (`--allow-failure`).
    pub allowed_failures: BTreeSet<String>,
    /// Where the allowance holds (`--allow-window`, `--allow-at-most`): `None` for the whole
    /// sale.
    pub allow_window: Option<AllowWindow>,
    /// The sale had to sell out (`--until-sold-out`).
    pub until_sold_out: bool,
    /// Every unit had to end paid (`--expect-all-paid`).
    pub expect_all_paid: bool,
    pub history: HistoryFacts,
    pub redis: RedisFacts,
    pub mysql: MysqlFacts,
    /// The final state of every history ticket and every order row's ticket.
    pub ticket_states: BTreeMap<String, TicketState>,
    /// A run through a waiting room (the history has its lines): what the load saw of it and
    /// what Redis holds. `None` otherwise.
    pub waiting_room: Option<RoomFacts>,
    /// The load's `pay` lines (each payment request and its answer) of this product.
    pub pays: Vec<crate::history::PayLine>,
    /// The load's `pay_end` lines (what each paying buyer last saw) of this product.
    pub pay_ends: Vec<crate::history::PayEndLine>,
}

/// An allowance fitted to its fault: only tickets reserved inside the window may fail for an
/// allowed reason, and at most `at_most` of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllowWindow {
    /// Reserved at or after this (ms since the epoch).
    pub from_ms: i64,
    /// Reserved at or before this.
    pub to_ms: i64,
    /// At most this many allowed failures in all (say, the tickets in flight at the fault).
    pub at_most: Option<u64>,
}

static UNKNOWN: TicketState = TicketState::Unknown;

impl AuditInput {
    pub fn state(&self, ticket: &str) -> &TicketState {
        self.ticket_states.get(ticket).unwrap_or(&UNKNOWN)
    }

    /// Failed for a reason the run allows, and, with an [`AllowWindow`], reserved inside it
    /// (a ticket whose reservation time the history does not give is not).
    pub(super) fn allowed_failure(&self, ticket: &str, state: &TicketState) -> bool {
        let reason_allowed = matches!(state, TicketState::Failed { reason: Some(r), .. } if self.allowed_failures.contains(r));
        reason_allowed
            && self.allow_window.is_none_or(|w| {
                self.reserved_at_ms(ticket)
                    .is_some_and(|t| (w.from_ms..=w.to_ms).contains(&t))
            })
    }

    /// When the ticket was reserved, as its settled line says.
    fn reserved_at_ms(&self, ticket: &str) -> Option<i64> {
        let s = self.history.tickets.get(ticket)?.settled.as_ref()?;
        // A record rebuilt from MySQL may not know it: the answer's time then (a reservation
        // precedes its answer by milliseconds), as chaos.sh's count of those in flight does.
        s.reserved_at_ms
            .or(s.answered_at_us.map(|us| (us / 1000) as i64))
    }

    /// The promise was kept: the buyer got the unit (confirmed, paid, or cancelled for a
    /// known reason afterwards), or it failed for a reason the run allows.
    pub(super) fn kept(&self, ticket: &str, state: &TicketState) -> bool {
        matches!(
            state,
            TicketState::Confirmed { .. }
                | TicketState::Paid { .. }
                | TicketState::Cancelled {
                    reason: Some(_),
                    ..
                }
        ) || self.allowed_failure(ticket, state)
    }

    pub(super) fn orders_by_ticket(&self) -> BTreeMap<&str, &OrderRow> {
        self.mysql
            .orders
            .iter()
            .map(|o| (o.ticket.as_str(), o))
            .collect()
    }
}
