//! The audit's checks: was every buyer's promise kept, and do the stores agree with what the
//! buyers were told and with each other? Pure functions over an [`AuditInput`] that
//! [`super::gather`] fills from the history file, Redis and MySQL.
//!
//! A promise is a ticket answered with `202`, `200` or `201`. It is kept when the buyer got
//! the unit: the ticket ends `confirmed`, then maybe `paid`, or `cancelled` (not paid in time,
//! or cancelled by the buyer: the unit went back on sale). It is also kept when the ticket
//! ends `failed` for a reason the run allows (`--allow-failure`, e.g. `chaos` when the workers
//! fail orders on purpose). Every other end breaks it.
//!
//! Checks 1-7 judge the promises and the units; [`payments`] (8-12) judges the payment window
//! against the orders, the payments and Redis; [`waiting_room`] (13-15), only for a run through
//! a waiting room, judges the admissions.

mod buckets;
mod payments;
mod waiting_room;

pub use payments::{
    all_units_paid, late_successes_refunded, order_decided_once, paid_within_stock,
    payers_told_truth, redis_follows_payments,
};
pub use waiting_room::{CapSample, RoomFacts, RoomHistory, RoomRedis};

use crate::history::{SaleEndCheck, SettledLine};
use seckill_shared::payments::PaymentStatus;
use seckill_shared::sale::BucketCounts;
use seckill_shared::{CancelReason, OrderStatus};
use serde::Serialize;
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
    /// Cardinality of the pending set.
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
    /// Every `payments` row of a ticket of the product (none before payments existed).
    pub payments: Vec<PaymentRow>,
    /// How many Redis stock buckets the product is split over.
    pub buckets: u16,
    /// The sweeper closed the sale (`products.closed_at_ms`): over, with nothing in flight.
    /// Its Redis keys expire after an hour, or go with a Redis restart, and are not rebuilt.
    pub closed: bool,
}

impl MysqlFacts {
    /// Order rows in `status`.
    pub fn count(&self, status: OrderStatus) -> i64 {
        self.orders.iter().filter(|o| o.status == status).count() as i64
    }

    /// Order rows holding a unit: confirmed or paid.
    pub fn sold(&self) -> i64 {
        self.orders.iter().filter(|o| o.sold()).count() as i64
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
    fn allowed_failure(&self, ticket: &str, state: &TicketState) -> bool {
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
    fn kept(&self, ticket: &str, state: &TicketState) -> bool {
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

    fn orders_by_ticket(&self) -> BTreeMap<&str, &OrderRow> {
        self.mysql
            .orders
            .iter()
            .map(|o| (o.ticket.as_str(), o))
            .collect()
    }
}

/// The promises made and what became of them, as the JSON report's `promises`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Promises {
    /// Tickets answered 202, 200 or 201.
    pub made: u64,
    /// Of those, confirmed, paid, cancelled for a known reason, or failed for an allowed
    /// reason.
    pub kept: u64,
    /// Tickets per outcome: `confirmed`, `paid`, `cancelled:<reason>`, `failed:<reason>`,
    /// `pending` and `unknown` (`confirmed`, `pending` and `unknown` always present).
    pub outcomes: BTreeMap<String, u64>,
}

impl Promises {
    /// `confirmed=3 failed:chaos=2 pending=0 unknown=0`.
    pub fn outcomes_text(&self) -> String {
        self.outcomes
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Counts the promises made and their outcomes.
pub fn promises(input: &AuditInput) -> Promises {
    let mut p = Promises::default();
    for key in ["confirmed", "pending", "unknown"] {
        p.outcomes.insert(key.to_owned(), 0);
    }
    for ticket in input.history.tickets.keys() {
        let state = input.state(ticket);
        p.made += 1;
        if input.kept(ticket, state) {
            p.kept += 1;
        }
        *p.outcomes.entry(state.outcome()).or_default() += 1;
    }
    p
}

/// Time from the answer that issued a ticket to its confirmation, over the tickets that became
/// orders (confirmed, then maybe paid or cancelled) and have both times, as the JSON report's
/// `settle_ms`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettleMs {
    pub count: u64,
    pub p99: f64,
    pub max: f64,
}

/// The ticket's answer (the settled line's `answered_at_us`, else its `reserved_at_ms`) to its
/// confirmation (the settled line's `confirmed_at_ms`, else Redis's), for every ticket that
/// became an order. `None` when no ticket has both times. Clocks differ a little between the
/// load tool, the gateways and the workers: a negative time counts as 0.
pub fn settle_ms(input: &AuditInput) -> Option<SettleMs> {
    let mut times: Vec<f64> = input
        .history
        .tickets
        .iter()
        .filter_map(|(ticket, h)| {
            let state = input.state(ticket);
            state.order()?;
            let s = h.settled.as_ref();
            let start_us = s.and_then(|s| {
                s.answered_at_us
                    .map(|us| us as i64)
                    .or(s.reserved_at_ms.map(|ms| ms.saturating_mul(1000)))
            })?;
            let end_ms = s
                .and_then(|s| s.confirmed_at_ms)
                .or(state.confirmed_at_ms())?;
            let us = end_ms.saturating_mul(1000).saturating_sub(start_us).max(0);
            Some(us as f64 / 1000.0)
        })
        .collect();
    if times.is_empty() {
        return None;
    }
    times.sort_by(f64::total_cmp);
    // Nearest rank.
    let rank = (0.99 * times.len() as f64).ceil() as usize;
    Some(SettleMs {
        count: times.len() as u64,
        p99: times[rank.clamp(1, times.len()) - 1],
        max: times[times.len() - 1],
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Pass,
    Fail,
    /// The check does not apply to this run; not a failure.
    Skip,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Self::Pass => "PASS",
            Self::Fail => "FAIL",
            Self::Skip => "SKIP",
        }
    }
}

/// Problems listed per check at most; the count is always exact.
const SAMPLES: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub id: u8,
    pub name: &'static str,
    pub status: Status,
    /// The numbers the check found.
    pub found: String,
    /// Violations (the first few).
    pub problems: Vec<String>,
    /// Worth knowing, not a failure.
    pub info: Vec<String>,
}

impl CheckResult {
    fn new(id: u8, name: &'static str, ok: bool, found: String) -> Self {
        Self {
            id,
            name,
            status: if ok { Status::Pass } else { Status::Fail },
            found,
            problems: vec![],
            info: vec![],
        }
    }

    /// A check with nothing to judge here, and why.
    pub(crate) fn skip(id: u8, name: &'static str, why: &str) -> Self {
        Self {
            status: Status::Skip,
            ..Self::new(id, name, true, why.to_owned())
        }
    }

    pub fn passed(&self) -> bool {
        self.status != Status::Fail
    }
}

/// Collects violations, keeping the first few as samples.
#[derive(Default)]
struct Problems {
    count: usize,
    samples: Vec<String>,
}

impl Problems {
    fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.samples.len() < SAMPLES {
            self.samples.push(what());
        }
    }
}

/// Check 1: every ticket answered 202, 200 or 201 ends confirmed, paid, or cancelled for a
/// known reason (`payment_timeout`, `buyer_cancelled`: the buyer had the unit), or failed for a
/// reason the run allows. Pending, unknown, a cancel no store gives a reason for, and any other
/// failure break the buyer's promise.
pub fn promise_kept(input: &AuditInput) -> CheckResult {
    let p = promises(input);
    let mut broken: BTreeMap<String, usize> = BTreeMap::new();
    let mut samples = Problems::default();
    for (ticket, h) in &input.history.tickets {
        let state = input.state(ticket);
        if !input.kept(ticket, state) {
            let outcome = state.outcome();
            samples.add(|| format!("ticket {ticket} of user {} ended {outcome}", h.user));
            *broken.entry(outcome).or_default() += 1;
        }
    }
    // An allowance fitted to its fault: no more allowed failures than it could have caused.
    let allowed_count = input
        .history
        .tickets
        .keys()
        .filter(|t| input.allowed_failure(t, input.state(t)))
        .count() as u64;
    let over_cap = input
        .allow_window
        .and_then(|w| w.at_most)
        .filter(|cap| allowed_count > *cap);
    let mut r = CheckResult::new(
        1,
        "promise kept",
        broken.is_empty() && over_cap.is_none(),
        format!("made={} kept={}: {}", p.made, p.kept, p.outcomes_text()),
    );
    // The count per broken outcome first, so that the reasons show before the samples.
    r.problems = broken
        .iter()
        .map(|(outcome, n)| format!("{n} promises ended {outcome}, which the run does not allow"))
        .chain(over_cap.map(|cap| {
            format!(
                "{allowed_count} tickets failed for an allowed reason, more than the {cap} the \
                 fault could have cost (tickets in flight at it)"
            )
        }))
        .chain(samples.samples)
        .collect();
    if !input.allowed_failures.is_empty() {
        let allowed: Vec<&str> = input.allowed_failures.iter().map(String::as_str).collect();
        r.info.push(match input.allow_window {
            None => format!("failures allowed: {}", allowed.join(", ")),
            Some(w) => format!(
                "failures allowed: {}, for tickets reserved from {} to {} ms, {} of at most {}",
                allowed.join(", "),
                w.from_ms,
                w.to_ms,
                allowed_count,
                w.at_most.map_or("any".to_owned(), |c| c.to_string())
            ),
        });
    }
    r
}

/// Check 2: the promises still held (every ticket but those that failed for an allowed
/// reason, and those cancelled: their units went back on sale) are no more than the units the
/// sale had.
pub fn promises_within_stock(input: &AuditInput) -> CheckResult {
    let made = input.history.tickets.len() as i64;
    let (mut failed, mut cancelled) = (0, 0);
    for t in input.history.tickets.keys() {
        let state = input.state(t);
        if input.allowed_failure(t, state) {
            failed += 1;
        } else if matches!(state, TicketState::Cancelled { .. }) {
            cancelled += 1;
        }
    }
    let held = made - failed - cancelled;
    let initial = input.initial_stock;
    let mut r = CheckResult::new(
        2,
        "no more promises than units",
        held <= initial,
        format!(
            "held={held} (made={made} - allowed failures={failed} - cancelled={cancelled}) \
             initial={initial}"
        ),
    );
    if held > initial {
        r.problems.push(format!(
            "{} more promises held than units: {held} tickets did not end in an allowed failure \
             or a cancel",
            held - initial
        ));
    }
    r
}

/// Check 3: the stores agree with each other. Redis's `confirmed` counter is the number of
/// units sold, the order rows `confirmed` or `paid` (a `cancelled` row holds no unit); Redis
/// stock + pending is MySQL's stock; nothing is left pending; MySQL stock + units sold is the
/// initial stock (no unit appeared or vanished, and every cancelled unit came back once); and
/// ticket by ticket, a ticket became an order (confirmed, paid or cancelled) exactly when it has
/// an order row, of the order id Redis gives. Whether Redis followed MySQL's payment decisions,
/// ticket by ticket, is [`redis_follows_payments`]'s.
pub fn stores_agree(input: &AuditInput) -> CheckResult {
    let rd = &input.redis;
    let my = &input.mysql;
    let sold = my.sold();
    let cancelled = my.count(OrderStatus::Cancelled);
    let initial = input.initial_stock;
    let mut problems = Problems::default();

    // A closed sale whose Redis keys are gone: the gateways answer it from MySQL, so MySQL
    // alone is compared with the buyers (below, and in the other checks).
    // Only a sale closed sold out: one closed with units left in MySQL is judged as lost.
    let keys_gone =
        my.closed && my.stock == 0 && rd.stock.is_none() && rd.pending == 0 && rd.confirmed == 0;
    if rd.confirmed != sold && !keys_gone {
        problems.add(|| {
            format!(
                "redis confirmed counter {} != {sold} MySQL order rows confirmed or paid \
                 ({:+})",
                rd.confirmed,
                rd.confirmed - sold
            )
        });
    }
    match rd.stock {
        None if keys_gone => {}
        None => problems.add(|| "the product has no stock key in Redis (not loaded?)".into()),
        Some(s) if s + rd.pending != my.stock => problems.add(|| {
            format!(
                "redis stock {s} + pending {} = {} != MySQL stock {} ({:+})",
                rd.pending,
                s + rd.pending,
                my.stock,
                s + rd.pending - my.stock
            )
        }),
        Some(_) => {}
    }
    if rd.pending != 0 {
        problems.add(|| {
            format!(
                "{} tickets still pending in Redis after settling",
                rd.pending
            )
        });
    }
    // What MySQL's CHECK constraints also hold, asserted here from the rows themselves: a
    // database without them (an older schema, a MySQL that ignores CHECK) is judged alike.
    if sold > initial {
        problems.add(|| {
            format!(
                "{sold} units sold of {initial}: oversold by {}",
                sold - initial
            )
        });
    }
    if my.stock < 0 {
        problems.add(|| format!("MySQL stock {} is below zero", my.stock));
    }
    if let Some(s) = rd.stock.filter(|s| *s < 0) {
        problems.add(|| format!("Redis stock {s} is below zero after settling"));
    }
    if my.stock + sold != initial {
        problems.add(|| {
            format!(
                "MySQL stock {} + {sold} order rows confirmed or paid = {} != initial stock \
                 {initial} ({:+})",
                my.stock,
                my.stock + sold,
                my.stock + sold - initial
            )
        });
    }

    let rows = input.orders_by_ticket();
    let mut ticket_mismatches = 0;
    for (ticket, state) in &input.ticket_states {
        let row = rows.get(ticket.as_str());
        let problem = match (state.order(), row) {
            (Some(_), None) => Some(format!(
                "ticket {ticket} is {} but has no order row",
                state.label()
            )),
            (Some(Some(id)), Some(row)) if id != row.id => Some(format!(
                "ticket {ticket} is {} as order {id} but its order row is {}",
                state.label(),
                row.id
            )),
            (Some(_), Some(_)) | (None, None) => None,
            (None, Some(row)) => Some(format!(
                "order row {} belongs to ticket {ticket}, which is {}",
                row.id,
                state.outcome()
            )),
        };
        if let Some(p) = problem {
            ticket_mismatches += 1;
            problems.add(|| p);
        }
    }
    for ticket in &my.failed_tickets {
        if let Some(row) = rows.get(ticket.as_str()) {
            ticket_mismatches += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} is in failed_tickets and has order row {}",
                    row.id
                )
            });
        }
    }

    let stock = rd.stock.map_or("none".to_owned(), |s| s.to_string());
    let mut r = CheckResult::new(
        3,
        "stores agree",
        problems.count == 0,
        format!(
            "redis stock={stock} pending={} confirmed={}; mysql stock={} sold={sold} \
             cancelled={cancelled}; initial={initial}; ticket mismatches={ticket_mismatches}",
            rd.pending, rd.confirmed, my.stock
        ),
    );
    r.problems = problems.samples;
    if keys_gone {
        r.info.push(
            "Redis holds none of the sale's keys: it was closed in MySQL, and closed sales \
             are not rebuilt (the gateways answer them from MySQL)"
                .into(),
        );
    }
    if let Some(s) = rd.stock {
        let sum = s + rd.pending + rd.confirmed;
        if sum != initial {
            r.info.push(format!(
                "redis stock + pending + confirmed = {sum}, not {initial} ({:+})",
                sum - initial
            ));
        }
    }
    if let Some(meta) = rd.initial.filter(|m| *m != initial) {
        r.info.push(format!("redis meta initial is {meta}"));
    }
    if my.initial_stock != initial {
        r.info.push(format!(
            "MySQL products.initial_stock is {}",
            my.initial_stock
        ));
    }
    r
}

/// Check 4: each ticket belongs to exactly one user, and each user holds at most one ticket
/// that did not fail or get cancelled (and at most one order row not cancelled). A cancel frees
/// its buyer, who may buy again: several tickets, and several order rows, are fine as long as
/// all but one are cancelled (or failed).
///
/// The load tool records the user each request named, not the `user_id` of the answer (the
/// request line and the settled line both carry the requested user). So "the answer's user is
/// the one the request named" is checked against the user the stores file the ticket under:
/// the order row's user, else the Redis record's or `failed_tickets`'s, which is what the
/// gateways answer with when the ticket is polled.
pub fn identity(input: &AuditInput) -> CheckResult {
    let rows = input.orders_by_ticket();
    let mut problems = Problems::default();
    let (mut shared, mut wrong_user) = (0, 0);
    let mut held: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (ticket, h) in &input.history.tickets {
        if !h.other_users.is_empty() {
            shared += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} was answered to user {} and to users {:?}",
                    h.user, h.other_users
                )
            });
        }
        let state = input.state(ticket);
        let stored_user = match rows.get(ticket.as_str()) {
            Some(row) => Some(("its order row is for", row.user_id)),
            None => state.user_id().map(|u| ("the stores file it under", u)),
        };
        if let Some((whose, user)) = stored_user.filter(|(_, u)| *u != h.user) {
            wrong_user += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} was answered to user {} but {whose} user {user}",
                    h.user
                )
            });
        } else if let Some(s) = h.settled.as_ref().filter(|s| s.user_id != h.user) {
            wrong_user += 1;
            problems.add(|| {
                format!(
                    "ticket {ticket} was answered to user {} but its settled line names user {}",
                    h.user, s.user_id
                )
            });
        }
        if !matches!(
            state,
            TicketState::Failed { .. } | TicketState::Cancelled { .. }
        ) {
            held.entry(h.user).or_default().push(ticket);
        }
    }
    let mut double = 0;
    for (user, tickets) in held.iter().filter(|(_, t)| t.len() > 1) {
        double += 1;
        problems.add(|| {
            format!(
                "user {user} holds {} tickets that did not fail nor get cancelled: {}",
                tickets.len(),
                tickets.join(", ")
            )
        });
    }
    // UNIQUE(product_id, live_user_id) and UNIQUE(ticket) forbid these; cheap to look anyway.
    let mut rows_per_user: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for o in input.mysql.orders.iter().filter(|o| o.sold()) {
        rows_per_user.entry(o.user_id).or_default().push(o.id);
    }
    for (user, ids) in rows_per_user.iter().filter(|(_, ids)| ids.len() > 1) {
        double += 1;
        problems.add(|| {
            format!(
                "user {user} has {} order rows not cancelled: {ids:?}",
                ids.len()
            )
        });
    }
    let mut rows_per_ticket: BTreeMap<&str, usize> = BTreeMap::new();
    for o in &input.mysql.orders {
        *rows_per_ticket.entry(&o.ticket).or_default() += 1;
    }
    for (ticket, n) in rows_per_ticket.iter().filter(|(_, n)| **n > 1) {
        double += 1;
        problems.add(|| format!("ticket {ticket} has {n} order rows"));
    }
    let mut r = CheckResult::new(
        4,
        "one ticket, one user",
        problems.count == 0,
        format!(
            "tickets answered to several users={shared} user differs={wrong_user} \
             users holding several={double}"
        ),
    );
    r.problems = problems.samples;
    r
}

/// Check 5: the history is complete. Every 2xx carries a ticket, every order row's ticket is in
/// the history (each chaos run has its own database), and every ticket has a settled line.
pub fn history_complete(input: &AuditInput) -> CheckResult {
    let h = &input.history;
    let mut problems = Problems::default();
    for m in &h.malformed {
        problems.add(|| m.clone());
    }
    let mut not_in_history = 0;
    let mut unanswered = 0;
    for row in &input.mysql.orders {
        if !h.tickets.contains_key(&row.ticket) {
            // A request that got no answer may have bought: the buyer was told nothing, so no
            // promise was made, but the row must belong to that buyer.
            if h.unanswered_users.contains(&row.user_id) {
                unanswered += 1;
                continue;
            }
            not_in_history += 1;
            problems.add(|| {
                format!(
                    "order row {} (ticket {}, user {}) is not in the history",
                    row.id, row.ticket, row.user_id
                )
            });
        }
    }
    let mut unsettled = 0;
    for (ticket, t) in &h.tickets {
        if t.settled.is_none() {
            unsettled += 1;
            problems.add(|| format!("ticket {ticket} has no settled line"));
        }
    }
    for s in &h.stray_settled {
        problems.add(|| format!("settled line of ticket {s}, which no request was answered"));
    }
    let mut r = CheckResult::new(
        5,
        "history complete",
        problems.count == 0,
        format!(
            "2xx without a ticket={} rows not in history={not_in_history} \
             tickets without settled line={unsettled} stray settled lines={}",
            h.malformed.len(),
            h.stray_settled.len()
        ),
    );
    r.problems = problems.samples;
    if unanswered > 0 {
        r.info.push(format!(
            "{unanswered} order rows belong to buyers whose request got no answer (a transport \
             error): they bought without being told; a retry answers 200 with the ticket"
        ));
    }
    r
}

/// Check 6: what each buyer was told when the polling ended is the final state: the same
/// status, the order row's id for a ticket that became an order, the same reason for a failed
/// or cancelled one. A buyer still told `pending` was never told the outcome. Reports the time
/// from the answer to the confirmation ([`settle_ms`]).
///
/// Payment comes after the polling: a buyer told `confirmed` was told the truth when the order
/// is now paid or cancelled. For a ticket that became an order, MySQL decides `paid` and
/// `cancelled` (the gateways answer its word), so the order row's status and cancel reason are
/// the final state; whether Redis followed is [`redis_follows_payments`]'s.
pub fn buyer_told_truth(input: &AuditInput) -> CheckResult {
    let rows = input.orders_by_ticket();
    let mut problems = Problems::default();
    let (mut settled, mut still_pending, mut status_differs) = (0, 0, 0);
    let (mut order_differs, mut reason_differs) = (0, 0);
    for (ticket, h) in &input.history.tickets {
        let Some(s) = &h.settled else { continue };
        settled += 1;
        let state = input.state(ticket);
        let row = rows.get(ticket.as_str());
        // The order the stores know: the row's status and id, else what Redis says.
        let order = state.order_status().map(|status| match row {
            Some(row) => (row.status, Some(row.id)),
            None => (status, state.order().flatten()),
        });
        let now = match order {
            Some((status, _)) => status.as_str().to_owned(),
            None => state.outcome(),
        };
        let told = s.status.as_str();
        let order_told = match (told, order) {
            ("pending", _) => {
                still_pending += 1;
                problems.add(|| {
                    format!(
                        "ticket {ticket}: the buyer was still told pending when the polling \
                         ended (now {now})"
                    )
                });
                continue;
            }
            ("failed", None) => {
                if let TicketState::Failed { reason, .. } = state {
                    if s.reason != *reason {
                        reason_differs += 1;
                        problems.add(|| {
                            format!(
                                "ticket {ticket}: the buyer was told failed ({:?}), the stores \
                                 say {:?}",
                                s.reason, reason
                            )
                        });
                    }
                    continue;
                }
                None
            }
            // Told before the payment decided, or told the decision.
            ("confirmed", Some((_, id))) => Some(id),
            ("paid", Some((OrderStatus::Paid, id))) => Some(id),
            ("cancelled", Some((OrderStatus::Cancelled, id))) => {
                let reason = row
                    .and_then(|r| r.cancel_reason)
                    .or(match state {
                        TicketState::Cancelled { reason, .. } => *reason,
                        _ => None,
                    })
                    .map(CancelReason::as_str);
                if s.reason.as_deref() != reason {
                    reason_differs += 1;
                    problems.add(|| {
                        format!(
                            "ticket {ticket}: the buyer was told cancelled ({:?}), the stores \
                             say {reason:?}",
                            s.reason
                        )
                    });
                }
                Some(id)
            }
            _ => None,
        };
        match order_told {
            Some(expected) => {
                if s.order_id != expected {
                    order_differs += 1;
                    problems.add(|| {
                        format!(
                            "ticket {ticket}: the buyer was told order {:?}, the stores say {:?}",
                            s.order_id, expected
                        )
                    });
                }
            }
            None => {
                status_differs += 1;
                problems.add(|| {
                    format!("ticket {ticket}: the buyer was told {told}, the stores say {now}")
                });
            }
        }
    }
    let times = settle_ms(input);
    let timing = match &times {
        Some(t) => format!(
            "answer->confirmed p99={:.1} ms max={:.1} ms over {}",
            t.p99, t.max, t.count
        ),
        None => "answer->confirmed: no timings".into(),
    };
    if settled == 0 {
        // No buyer's polling ended: nothing to compare (check 5 fails a ticket without its
        // settled line).
        return CheckResult::skip(
            6,
            "buyer told the final state",
            "no ticket was polled to its end: nothing to judge",
        );
    }
    let mut r = CheckResult::new(
        6,
        "buyer told the final state",
        problems.count == 0,
        format!(
            "settled={settled} still pending={still_pending} status differs={status_differs} \
             order id differs={order_differs} reason differs={reason_differs}; {timing}"
        ),
    );
    r.problems = problems.samples;
    r
}

/// Check 7: the load finished (the history has its summary line), and with `--until-sold-out`
/// the sale sold out: the load found it over, and no unit is left over in Redis or MySQL.
///
/// A load that waited for the sale to end (its summary has `sale_end`) kept offering fresh
/// buyers until the units of failed orders had come back and were sold again; what it may
/// leave is at most one unit per buyer whose request got no HTTP answer (the buyer was never
/// told, and the reservation may be handed back after the load stopped). A load that stopped
/// at its first round of 409s (an older history) may also leave the units of the failures the
/// run allows: they may have come back after the last buyer. Either may leave the unit of
/// every order cancelled after its last answer (not paid in time, or cancelled by its buyer,
/// once no one was buying).
pub fn sale_ended(input: &AuditInput) -> CheckResult {
    let h = &input.history;
    let reached = h
        .sold_out_reached
        .map_or("none".to_owned(), |b| b.to_string());
    let stock = input
        .redis
        .stock
        .map_or("none".to_owned(), |s| s.to_string());
    // A unit left over is excused only as one a buyer reserved without being told (the last
    // request went unanswered) whose ticket then failed, giving the unit back after the load
    // was done with that buyer.
    let unanswered = h
        .last_unanswered_users
        .iter()
        .filter(|u| input.mysql.failed_users.contains(u))
        .count() as i64;
    let allowed_failures = input
        .history
        .tickets
        .keys()
        .filter(|t| input.allowed_failure(t, input.state(t)))
        .count() as i64;
    let late_cancels = late_cancels(input);
    let (allowed, excused) = match h.sale_end_checked_by {
        Some(_) => (
            unanswered,
            "failed tickets of buyers whose last request got no answer",
        ),
        None => (
            allowed_failures + unanswered,
            "allowed failures and failed tickets of buyers whose last request got no answer",
        ),
    };
    let (allowed, excused) = match late_cancels {
        0 => (allowed, excused.to_owned()),
        n => (
            allowed + n,
            format!("{excused}, and orders cancelled after the load's last answer"),
        ),
    };
    let found = format!(
        "summary={} until_sold_out={} sold_out_reached={reached} end checked by={}; \
         left: redis={stock} mysql={} (at most {allowed}: {excused})",
        if h.has_summary { "yes" } else { "missing" },
        h.until_sold_out,
        h.sale_end_checked_by.map_or("none", SaleEndCheck::label),
        input.mysql.stock
    );
    if !h.has_summary {
        let mut r = CheckResult::new(7, "sale ended", false, found);
        r.problems
            .push("the history has no summary line: the load did not finish".into());
        return r;
    }
    if !input.until_sold_out {
        return CheckResult {
            status: Status::Skip,
            info: vec!["not audited as --until-sold-out".into()],
            ..CheckResult::new(7, "sale ended", true, found)
        };
    }
    let mut problems = vec![];
    let mut info = vec![];
    if !h.until_sold_out {
        problems.push("the load did not run --until-sold-out".to_owned());
    }
    match h.sold_out_reached {
        Some(true) => {
            let left = [
                ("Redis", input.redis.stock),
                ("MySQL", Some(input.mysql.stock)),
            ];
            for (store, s) in left {
                if let Some(s) = s.filter(|s| *s > allowed) {
                    problems.push(match h.sale_end_checked_by {
                        Some(how) => format!(
                            "{s} units left in {store}, though the load waited for the sale to \
                             end ({}): only the {allowed} {excused} could have left any",
                            how.label()
                        ),
                        None => format!(
                            "{s} units left in {store}, more than the {allowed} {excused} \
                             could have handed back"
                        ),
                    });
                }
            }
            match h.sale_end_checked_by {
                Some(SaleEndCheck::Probes) if !problems.is_empty() => info.push(
                    "the load checked the end by probes and did not see pending orders: \
                     give it --admin-token to wait for them"
                        .into(),
                ),
                None => info.push(
                    "a load that stopped at its first round of 409s: the units of allowed \
                     failures may have come back after its last buyer"
                        .into(),
                ),
                _ => {}
            }
        }
        Some(false) => problems.push(
            "the sale never sold out: the load stopped before it found the sale over (every \
             gateway answering 409, and no unit coming back)"
                .into(),
        ),
        None => problems.push("the summary does not say whether the sale sold out".into()),
    }
    let mut r = CheckResult::new(7, "sale ended", problems.is_empty(), found);
    r.problems = problems;
    r.info = info;
    r
}

/// Orders cancelled after the load's last answer (server clock against the load tool's): no
/// buyer was left to take their units.
fn late_cancels(input: &AuditInput) -> i64 {
    let last_ms = input
        .history
        .last_answer_us
        .map_or(i64::MIN, |us| (us / 1000) as i64);
    input
        .mysql
        .orders
        .iter()
        .filter(|o| o.status == OrderStatus::Cancelled)
        .filter(|o| o.cancelled_at_ms.is_none_or(|at| at > last_ms))
        .count() as i64
}

pub fn run_all(input: &AuditInput) -> Vec<CheckResult> {
    // Checks 1, 2 and 4 judge the promises made: with none they have nothing to judge (a run
    // that had to sell out and made none fails check 7; rows without a promise fail check 5).
    let none_made = input.history.tickets.is_empty();
    let promises = |id, name, check: fn(&AuditInput) -> CheckResult| {
        if none_made {
            CheckResult::skip(id, name, "no promise was made: nothing to judge")
        } else {
            check(input)
        }
    };
    vec![
        promises(1, "promise kept", promise_kept),
        promises(2, "no more promises than units", promises_within_stock),
        stores_agree(input),
        promises(4, "one ticket, one user", identity),
        history_complete(input),
        buyer_told_truth(input),
        sale_ended(input),
        order_decided_once(input),
        paid_within_stock(input),
        redis_follows_payments(input),
        late_successes_refunded(input),
        all_units_paid(input),
        payers_told_truth(input),
    ]
    .into_iter()
    .chain(waiting_room::run(input))
    .chain(buckets::run(input))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn ticket(n: u64) -> String {
        format!("7-{n:032x}")
    }

    /// When the load received ticket `n`'s answer, µs; it is confirmed 40 ms + `n` µs later.
    pub(super) fn answered_at_us(n: u64) -> u64 {
        1_700_000_000_000_000 + n * 1000
    }

    /// A sale of `initial` units with nothing issued yet: the summary says it sold out.
    pub(super) fn sale(initial: i64) -> AuditInput {
        let mut input = AuditInput {
            product: 7,
            initial_stock: initial,
            until_sold_out: true,
            ..Default::default()
        };
        input.history.has_summary = true;
        input.history.until_sold_out = true;
        input.history.sold_out_reached = Some(true);
        input.history.sale_end_checked_by = Some(SaleEndCheck::AdminApi);
        input.mysql.initial_stock = initial;
        input.redis.initial = Some(initial);
        input
    }

    /// Ticket `n`, answered 202 to `user`, ended as `end`: `confirmed` (order row `1000 + n`)
    /// or a failure reason. Its settled line tells the buyer just that.
    pub(super) fn issue(input: &mut AuditInput, n: u64, user: u64, end: &str) {
        let t = ticket(n);
        input.history.requests += 1;
        let (state, order_id, reason) = if end == "confirmed" {
            input
                .mysql
                .orders
                .push(OrderRow::confirmed(1000 + n, t.clone(), user));
            let confirmed_at_ms = Some((answered_at_us(n) / 1000 + 40) as i64);
            let state = TicketState::Confirmed {
                user_id: user,
                order_id: Some(1000 + n),
                confirmed_at_ms,
            };
            (state, Some(1000 + n), None)
        } else {
            input.mysql.failed_tickets.insert(t.clone());
            let reason = Some(end.to_owned());
            let state = TicketState::Failed {
                user_id: user,
                reason: reason.clone(),
            };
            (state, None, reason)
        };
        let confirmed_at_ms = match &state {
            TicketState::Confirmed {
                confirmed_at_ms, ..
            } => *confirmed_at_ms,
            _ => None,
        };
        input.history.tickets.insert(
            t.clone(),
            HistoryTicket {
                user,
                other_users: BTreeSet::new(),
                settled: Some(SettledLine {
                    ticket: t.clone(),
                    user_id: user,
                    status: if end == "confirmed" {
                        "confirmed"
                    } else {
                        "failed"
                    }
                    .into(),
                    order_id,
                    reason,
                    answered_at_us: Some(answered_at_us(n)),
                    reserved_at_ms: Some((answered_at_us(n) / 1000) as i64),
                    confirmed_at_ms,
                }),
            },
        );
        input.ticket_states.insert(t, state);
    }

    /// Sets both stores' counters to what the tickets say, as after a clean sale.
    pub(super) fn stores_settled(input: &mut AuditInput) {
        let sold = input.mysql.sold();
        input.mysql.stock = input.initial_stock - sold;
        input.redis.stock = Some(input.mysql.stock);
        input.redis.pending = 0;
        input.redis.confirmed = sold;
        input.redis.paid = input.mysql.count(OrderStatus::Paid);
        input.redis.cancelled = input.mysql.count(OrderStatus::Cancelled);
        input.redis.failed = input.mysql.failed_tickets.len() as i64;
    }

    /// A sold-out run of 3 units: users 1-3 confirmed, users 4 and 5 failed with `chaos`,
    /// which the run allows.
    pub(super) fn healthy() -> AuditInput {
        let mut input = sale(3);
        input.allowed_failures.insert("chaos".into());
        for user in 1..=5 {
            issue(
                &mut input,
                user,
                user,
                if user <= 3 { "confirmed" } else { "chaos" },
            );
        }
        stores_settled(&mut input);
        input
    }

    pub(super) fn settled(input: &mut AuditInput, n: u64) -> &mut SettledLine {
        let t = input.history.tickets.get_mut(&ticket(n)).unwrap();
        t.settled.as_mut().unwrap()
    }

    pub(super) fn failing(input: &AuditInput) -> Vec<u8> {
        run_all(input)
            .into_iter()
            .filter(|r| !r.passed())
            .map(|r| r.id)
            .collect()
    }

    /// Every order's payment deadline in a sale with a payment window, ms.
    pub(super) const PAY_BY: i64 = 1_700_000_900_000;

    /// Gives every order a payment deadline.
    pub(super) fn windowed(input: &mut AuditInput) {
        for o in &mut input.mysql.orders {
            o.pay_by_ms = Some(PAY_BY);
        }
    }

    pub(super) fn row(input: &mut AuditInput, n: u64) -> &mut OrderRow {
        let t = ticket(n);
        input
            .mysql
            .orders
            .iter_mut()
            .find(|o| o.ticket == t)
            .unwrap()
    }

    /// Ticket `n`'s order is paid by payment `pay-<n>`, a second before its deadline.
    /// What the buyer of ticket `n` last saw: a `pay_end` line.
    pub(super) fn pay_end(
        n: u64,
        user_id: u64,
        status: &str,
        reason: Option<&str>,
    ) -> crate::history::PayEndLine {
        crate::history::PayEndLine {
            ticket: ticket(n),
            user_id,
            status: status.to_owned(),
            reason: reason.map(str::to_owned),
            pay_by_ms: Some(PAY_BY),
            paid_at_ms: None,
            cancelled_at_ms: None,
            attempts: 1,
            accepted: 1,
            at_ms: PAY_BY + 1000,
        }
    }

    pub(super) fn pay(input: &mut AuditInput, n: u64) {
        let at = PAY_BY - 1000;
        let o = row(input, n);
        o.status = OrderStatus::Paid;
        o.paid_at_ms = Some(at);
        let (id, user_id) = (o.id, o.user_id);
        input.mysql.payments.push(PaymentRow {
            payment_id: format!("pay-{n}"),
            ticket: ticket(n),
            user_id,
            status: PaymentStatus::Succeeded,
            settled_at_ms: Some(at),
        });
        // The buyer paid once, was answered 202, and last saw it paid.
        input.pays.push(crate::history::PayLine {
            ticket: ticket(n),
            user_id,
            attempt: 1,
            idempotency_key: format!("key-{n}"),
            status: Some(202),
            payment_id: Some(format!("pay-{n}")),
            error: None,
            state: None,
            sent_at_ms: at - 200,
            at_ms: at - 199,
        });
        input.pay_ends.push(pay_end(n, user_id, "paid", None));
        let confirmed_at_ms = input.state(&ticket(n)).confirmed_at_ms();
        input.ticket_states.insert(
            ticket(n),
            TicketState::Paid {
                user_id,
                order_id: Some(id),
                confirmed_at_ms,
            },
        );
    }

    /// Ticket `n`'s order is cancelled: at its deadline for a timeout, a minute before it by
    /// its buyer.
    pub(super) fn cancel(input: &mut AuditInput, n: u64, reason: CancelReason) {
        let at = match reason {
            CancelReason::PaymentTimeout => PAY_BY,
            CancelReason::BuyerCancelled => PAY_BY - 60_000,
        };
        let o = row(input, n);
        o.status = OrderStatus::Cancelled;
        o.cancelled_at_ms = Some(at);
        o.cancel_reason = Some(reason);
        let (id, user_id) = (o.id, o.user_id);
        input
            .pay_ends
            .push(pay_end(n, user_id, "cancelled", Some(reason.as_str())));
        let confirmed_at_ms = input.state(&ticket(n)).confirmed_at_ms();
        input.ticket_states.insert(
            ticket(n),
            TicketState::Cancelled {
                user_id,
                order_id: Some(id),
                confirmed_at_ms,
                reason: Some(reason),
            },
        );
    }

    /// A sale of 3 units with a payment window, every unit paid in the end. Users 1-3 ordered
    /// tickets 1-3. Ticket 1 was paid. Ticket 2 was not paid in time (its late success is
    /// `refund_due`); its buyer bought again (ticket 4) and paid. The buyer of ticket 3
    /// cancelled, bought again (ticket 5) and paid. Each buyer was told `confirmed`.
    pub(super) fn paid_sale() -> AuditInput {
        let mut input = sale(3);
        for (n, user) in [(1, 1), (2, 2), (3, 3), (4, 2), (5, 3)] {
            issue(&mut input, n, user, "confirmed");
        }
        windowed(&mut input);
        pay(&mut input, 1);
        cancel(&mut input, 2, CancelReason::PaymentTimeout);
        input.mysql.payments.push(PaymentRow {
            payment_id: "pay-2-late".into(),
            ticket: ticket(2),
            user_id: 2,
            status: PaymentStatus::RefundDue,
            settled_at_ms: Some(PAY_BY + 5),
        });
        cancel(&mut input, 3, CancelReason::BuyerCancelled);
        pay(&mut input, 4);
        pay(&mut input, 5);
        // The load kept buying until after the cancels.
        input.history.last_answer_us = Some((PAY_BY as u64 + 60_000) * 1000);
        input.expect_all_paid = true;
        stores_settled(&mut input);
        input
    }

    #[test]
    fn a_healthy_run_passes_every_check() {
        let input = healthy();
        for r in run_all(&input) {
            // No payment window, not audited as --expect-all-paid, and no buyer paid: the
            // payment checks have nothing to judge.
            let want = if (8..=12).contains(&r.id) || r.id == 17 {
                Status::Skip
            } else {
                Status::Pass
            };
            assert_eq!(r.status, want, "{r:?}");
            assert!(r.problems.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn checks_with_nothing_to_judge_say_skip_not_pass() {
        // No promise made (a sale of 0 units, audited without --until-sold-out): checks 1, 2,
        // 4 and 6 have nothing to judge. Before, they passed.
        let mut input = sale(0);
        input.until_sold_out = false;
        input.history.until_sold_out = false;
        input.history.sold_out_reached = None;
        let status = |input: &AuditInput, id: u8| {
            run_all(input)
                .into_iter()
                .find(|r| r.id == id)
                .map(|r| r.status)
                .unwrap()
        };
        for id in [1, 2, 4, 6] {
            assert_eq!(status(&input, id), Status::Skip, "check {id}");
        }
        // Promises made but no buyer's polling ended: check 6 skips, check 5 fails.
        let mut input = healthy();
        for t in input.history.tickets.values_mut() {
            t.settled = None;
        }
        assert_eq!(status(&input, 6), Status::Skip);
        assert_eq!(status(&input, 5), Status::Fail);
        assert_eq!(status(&input, 1), Status::Pass);
    }

    #[test]
    fn a_paid_sale_passes_every_check() {
        let input = paid_sale();
        for r in run_all(&input) {
            assert_eq!(r.status, Status::Pass, "{r:?}");
            assert!(r.problems.is_empty(), "{r:?}");
        }
        let p = promises(&input);
        assert_eq!((p.made, p.kept), (5, 5));
        assert_eq!(
            p.outcomes_text(),
            "cancelled:buyer_cancelled=1 cancelled:payment_timeout=1 confirmed=0 paid=3 \
             pending=0 unknown=0"
        );
    }

    #[test]
    fn promises_count_outcomes_per_reason() {
        let mut input = healthy();
        issue(&mut input, 6, 6, "out_of_stock");
        input.history.tickets.insert(
            ticket(7),
            HistoryTicket {
                user: 7,
                other_users: BTreeSet::new(),
                settled: None,
            },
        );
        let p = promises(&input);
        assert_eq!((p.made, p.kept), (7, 5));
        let want: BTreeMap<String, u64> = [
            ("confirmed", 3),
            ("failed:chaos", 2),
            ("failed:out_of_stock", 1),
            ("pending", 0),
            ("unknown", 1),
        ]
        .into_iter()
        .map(|(k, n)| (k.to_owned(), n))
        .collect();
        assert_eq!(p.outcomes, want);
        assert_eq!(
            p.outcomes_text(),
            "confirmed=3 failed:chaos=2 failed:out_of_stock=1 pending=0 unknown=1"
        );
    }

    #[test]
    fn check1_promise_kept() {
        let r = promise_kept(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("made=5 kept=5"), "{r:?}");

        // A failure the run does not allow.
        let mut expired = healthy();
        issue(&mut expired, 6, 6, "expired");
        let r = promise_kept(&expired);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("failed:expired=1"), "{r:?}");
        assert!(
            r.problems[0].starts_with("1 promises ended failed:expired"),
            "{r:?}"
        );

        // Still pending, unknown to the stores, or failed without a reason.
        for state in [
            TicketState::Pending { user_id: 4 },
            TicketState::Unknown,
            TicketState::Failed {
                user_id: 4,
                reason: None,
            },
        ] {
            let mut input = healthy();
            let outcome = state.outcome();
            input.ticket_states.insert(ticket(4), state);
            let r = promise_kept(&input);
            assert_eq!(r.status, Status::Fail, "{r:?}");
            assert!(r.found.contains(&format!("{outcome}=1")), "{r:?}");
        }

        // `chaos` is allowed only when the run says so.
        let mut strict = healthy();
        strict.allowed_failures.clear();
        let r = promise_kept(&strict);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].starts_with("2 promises ended failed:chaos"),
            "{r:?}"
        );
    }

    #[test]
    fn check2_promises_within_stock() {
        let r = promises_within_stock(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("held=3"), "{r:?}");

        // A fourth promise held for three units: it is still pending.
        let mut over = healthy();
        over.history.tickets.insert(
            ticket(6),
            HistoryTicket {
                user: 6,
                other_users: BTreeSet::new(),
                settled: None,
            },
        );
        over.ticket_states
            .insert(ticket(6), TicketState::Pending { user_id: 6 });
        let r = promises_within_stock(&over);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("1 more promises"), "{r:?}");

        // A failure the run does not allow still counts against the units.
        let mut strict = healthy();
        strict.allowed_failures.clear();
        assert_eq!(promises_within_stock(&strict).status, Status::Fail);
    }

    /// An allowance holds only for tickets reserved in its window, and for no more of them
    /// than its cap (scenario 7: the broker restart's window, the tickets in flight at it).
    #[test]
    fn check1_an_allowance_fits_its_fault() {
        let at = |n: u64| (answered_at_us(n) / 1000) as i64;
        let window = AllowWindow {
            from_ms: at(4),
            to_ms: at(5),
            at_most: Some(2),
        };
        let mut fitted = healthy();
        fitted.allow_window = Some(window);
        let r = promise_kept(&fitted);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info[0].contains("2 of at most 2"), "{r:?}");

        // Ticket 4 was reserved before the window: its failure is a broken promise.
        let mut early = healthy();
        early.allow_window = Some(AllowWindow {
            from_ms: at(5),
            ..window
        });
        let r = promise_kept(&early);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems.iter().any(|p| p.contains(&ticket(4))), "{r:?}");
        assert_eq!(promises(&early).kept, 4);

        // More failures than the fault could have cost.
        let mut capped = healthy();
        capped.allow_window = Some(AllowWindow {
            at_most: Some(1),
            ..window
        });
        let r = promise_kept(&capped);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("more than the 1"), "{r:?}");
    }

    #[test]
    fn check3_stores_agree() {
        let r = stores_agree(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info.is_empty(), "{r:?}");

        // Redis counted fewer confirmations than MySQL has rows, and kept their units.
        let mut counter = healthy();
        counter.redis.confirmed = 2;
        counter.redis.stock = Some(1);
        let r = stores_agree(&counter);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("!= 3 MySQL order rows confirmed or paid (-1)"),
            "{r:?}"
        );
        assert!(r.problems[1].contains("!= MySQL stock 0 (+1)"), "{r:?}");

        // Left pending after settling.
        let mut pending = healthy();
        pending.redis.pending = 1;
        pending.redis.stock = Some(-1);
        let r = stores_agree(&pending);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems.iter().any(|p| p.contains("still pending")),
            "{r:?}"
        );

        // A unit vanished from both stores alike.
        let mut vanished = healthy();
        vanished.mysql.orders.pop();
        vanished.redis.confirmed = 2;
        vanished
            .ticket_states
            .insert(ticket(3), TicketState::Unknown);
        let r = stores_agree(&vanished);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("!= initial stock 3 (-1)"), "{r:?}");

        // Ticket by ticket: confirmed without a row, a row of a failed ticket, another order id.
        let mut no_row = healthy();
        no_row.mysql.orders.retain(|o| o.user_id != 2);
        no_row.mysql.stock = 1;
        no_row.redis.stock = Some(1);
        no_row.redis.confirmed = 2;
        let r = stores_agree(&no_row);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("confirmed but has no order row"),
            "{r:?}"
        );
        let mut failed_row = healthy();
        failed_row.ticket_states.insert(
            ticket(1),
            TicketState::Failed {
                user_id: 1,
                reason: Some("chaos".into()),
            },
        );
        failed_row.mysql.failed_tickets.insert(ticket(1));
        let r = stores_agree(&failed_row);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        let mut other_id = healthy();
        other_id.mysql.orders[0].id = 77;
        let r = stores_agree(&other_id);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("its order row is 77"), "{r:?}");

        let mut unloaded = healthy();
        unloaded.redis.stock = None;
        assert_eq!(stores_agree(&unloaded).status, Status::Fail);

        // Oversold, and below zero, said as such (not only as a sum that does not add up).
        let mut oversold = healthy();
        oversold.mysql.stock = -1;
        oversold.redis.stock = Some(-1);
        oversold.initial_stock = 2;
        let r = stores_agree(&oversold);
        for said in [
            "oversold by 1",
            "MySQL stock -1 is below zero",
            "Redis stock -1",
        ] {
            assert!(r.problems.iter().any(|p| p.contains(said)), "{said}: {r:?}");
        }

        // A closed sale whose Redis keys are gone (a restart after the sweeper closed it):
        // MySQL alone is compared with the buyers, and still must agree.
        let mut gone = healthy();
        gone.mysql.closed = true;
        gone.redis.stock = None;
        gone.redis.confirmed = 0;
        let r = stores_agree(&gone);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info.iter().any(|i| i.contains("closed")), "{r:?}");
        // Not while the sale is open (Redis lost it), nor when MySQL lost a unit, nor when the
        // sale closed with units left.
        unloaded.redis.confirmed = 0;
        assert_eq!(stores_agree(&unloaded).status, Status::Fail);
        let mut left = gone.clone();
        left.initial_stock += 1;
        left.mysql.stock = 1;
        let r = stores_agree(&left);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems.iter().any(|p| p.contains("no stock key")),
            "{r:?}"
        );
        gone.mysql.orders.pop();
        assert_eq!(stores_agree(&gone).status, Status::Fail);
    }

    #[test]
    fn check4_identity() {
        let r = identity(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // One ticket answered to two users.
        let mut shared = healthy();
        shared
            .history
            .tickets
            .get_mut(&ticket(1))
            .unwrap()
            .other_users
            .insert(9);
        let r = identity(&shared);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("several users=1"), "{r:?}");

        // The order row is another user's.
        let mut row = healthy();
        row.mysql.orders[0].user_id = 99;
        let r = identity(&row);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("its order row is for user 99"),
            "{r:?}"
        );

        // A failed ticket filed under another user.
        let mut stored = healthy();
        stored.ticket_states.insert(
            ticket(4),
            TicketState::Failed {
                user_id: 98,
                reason: Some("chaos".into()),
            },
        );
        let r = identity(&stored);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("the stores file it under user 98"),
            "{r:?}"
        );

        // The settled line names another user.
        let mut told = healthy();
        settled(&mut told, 2).user_id = 97;
        assert_eq!(identity(&told).status, Status::Fail);

        // User 1 holds two tickets that did not fail (the second one is pending).
        let mut two = healthy();
        two.history.tickets.insert(
            ticket(6),
            HistoryTicket {
                user: 1,
                other_users: BTreeSet::new(),
                settled: None,
            },
        );
        two.ticket_states
            .insert(ticket(6), TicketState::Pending { user_id: 1 });
        let r = identity(&two);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("user 1 holds 2 tickets"), "{r:?}");
        // A second ticket that failed is fine.
        two.ticket_states.insert(
            ticket(6),
            TicketState::Failed {
                user_id: 1,
                reason: Some("duplicate_user".into()),
            },
        );
        assert_eq!(identity(&two).status, Status::Pass);
    }

    #[test]
    fn check5_history_complete() {
        let r = history_complete(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        let mut malformed = healthy();
        malformed
            .history
            .malformed
            .push("request 9: 202 to user 9 carries no ticket".into());
        let r = history_complete(&malformed);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("2xx without a ticket=1"), "{r:?}");

        // An order row whose ticket the history never saw.
        let mut foreign = healthy();
        foreign.history.tickets.remove(&ticket(3));
        let r = history_complete(&foreign);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("is not in the history"), "{r:?}");

        // ... unless its buyer's request got no answer (the gateway died mid-request).
        let mut unanswered = foreign.clone();
        unanswered.history.unanswered_users.insert(3);
        let r = history_complete(&unanswered);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info[0].contains("1 order rows belong to buyers"), "{r:?}");

        let mut unsettled = healthy();
        unsettled
            .history
            .tickets
            .get_mut(&ticket(5))
            .unwrap()
            .settled = None;
        let r = history_complete(&unsettled);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("without settled line=1"), "{r:?}");

        let mut stray = healthy();
        stray.history.stray_settled.push(ticket(8));
        assert_eq!(history_complete(&stray).status, Status::Fail);
    }

    #[test]
    fn check6_buyer_told_the_final_state() {
        let r = buyer_told_truth(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("p99=40.0 ms max=40.0 ms over 3"), "{r:?}");

        // Still pending when the polling ended, though it did settle later.
        let mut pending = healthy();
        settled(&mut pending, 1).status = "pending".into();
        let r = buyer_told_truth(&pending);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("still pending=1"), "{r:?}");

        // Told confirmed, but it failed.
        let mut status = healthy();
        settled(&mut status, 4).status = "confirmed".into();
        let r = buyer_told_truth(&status);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("status differs=1"), "{r:?}");

        // Told another order, or none.
        let mut order = healthy();
        settled(&mut order, 2).order_id = Some(5);
        settled(&mut order, 3).order_id = None;
        let r = buyer_told_truth(&order);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("order id differs=2"), "{r:?}");

        // Told another reason.
        let mut reason = healthy();
        settled(&mut reason, 5).reason = Some("out_of_stock".into());
        let r = buyer_told_truth(&reason);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("reason differs=1"), "{r:?}");
    }

    #[test]
    fn settle_times_from_the_answer_else_the_reservation() {
        let mut input = healthy();
        assert_eq!(
            settle_ms(&input),
            Some(SettleMs {
                count: 3,
                p99: 40.0,
                max: 40.0
            })
        );
        // Ticket 1: no answer time, reserved 100 ms before its confirmation.
        let s = settled(&mut input, 1);
        s.answered_at_us = None;
        s.reserved_at_ms = Some(s.confirmed_at_ms.unwrap() - 100);
        // Ticket 2: confirmed before the answer arrived (clocks): counts as 0.
        let s = settled(&mut input, 2);
        s.confirmed_at_ms = Some((s.answered_at_us.unwrap() / 1000) as i64 - 5);
        let t = settle_ms(&input).unwrap();
        assert_eq!((t.count, t.p99, t.max), (3, 100.0, 100.0));

        let mut none = sale(3);
        stores_settled(&mut none);
        assert_eq!(settle_ms(&none), None);
    }

    #[test]
    fn check7_sale_ended() {
        let r = sale_ended(&healthy());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        let mut never = healthy();
        never.history.sold_out_reached = Some(false);
        let r = sale_ended(&never);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("never sold out"), "{r:?}");

        let mut unsaid = healthy();
        unsaid.history.sold_out_reached = None;
        assert_eq!(sale_ended(&unsaid).status, Status::Fail);

        // No summary fails, --until-sold-out or not.
        let mut unfinished = healthy();
        unfinished.history.has_summary = false;
        unfinished.until_sold_out = false;
        let r = sale_ended(&unfinished);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("no summary line"), "{r:?}");

        // Not audited as --until-sold-out: a finished load is enough.
        let mut planned = never.clone();
        planned.until_sold_out = false;
        let r = sale_ended(&planned);
        assert_eq!(r.status, Status::Skip);
        assert!(r.passed());

        // The load waited for the sale to end: no unit may be left, though two orders failed.
        let mut left = healthy();
        left.redis.stock = Some(1);
        left.mysql.stock = 1;
        let r = sale_ended(&left);
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        assert!(r.problems[0].starts_with("1 units left in Redis"), "{r:?}");
        assert!(r.problems[0].contains("(admin_api)"), "{r:?}");
        // ... but for a failed ticket of a buyer whose last request got no answer.
        let mut unanswered = left.clone();
        unanswered.history.unanswered_users.insert(9);
        unanswered.history.last_unanswered_users.insert(9);
        assert_eq!(
            sale_ended(&unanswered).status,
            Status::Fail,
            "no ticket of theirs failed"
        );
        unanswered.mysql.failed_users.insert(9);
        assert_eq!(sale_ended(&unanswered).status, Status::Pass);
        unanswered.redis.stock = Some(2);
        assert_eq!(sale_ended(&unanswered).status, Status::Fail);
        // A buyer answered after the unanswered request excuses nothing.
        let mut answered_later = left.clone();
        answered_later.history.unanswered_users.insert(9);
        answered_later.mysql.failed_users.insert(9);
        assert_eq!(sale_ended(&answered_later).status, Status::Fail);
        // Checked by probes: the same rule, and a hint.
        let mut probes = left.clone();
        probes.history.sale_end_checked_by = Some(SaleEndCheck::Probes);
        let r = sale_ended(&probes);
        assert_eq!(r.status, Status::Fail);
        assert!(r.info[0].contains("--admin-token"), "{r:?}");

        // An older load stopped at its first round of 409s: the allowed failures (2) may
        // have come back too late.
        let mut old = healthy();
        old.history.sale_end_checked_by = None;
        old.redis.stock = Some(2);
        old.mysql.stock = 2;
        let r = sale_ended(&old);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info[0].contains("first round of 409s"), "{r:?}");
        old.redis.stock = Some(3);
        old.mysql.stock = 3;
        let r = sale_ended(&old);
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.problems.len(), 2, "{r:?}");
        assert!(r.problems[0].starts_with("3 units left in Redis"), "{r:?}");
        // With no failure allowed, a single unit left fails.
        let mut strict = old.clone();
        strict.allowed_failures.clear();
        strict.redis.stock = Some(1);
        strict.mysql.stock = 0;
        assert_eq!(sale_ended(&strict).status, Status::Fail);
    }

    #[test]
    fn check1_paid_and_cancelled_promises_are_kept() {
        let r = promise_kept(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("made=5 kept=5"), "{r:?}");

        // A cancel that no store gives a reason for breaks the promise.
        let mut no_reason = paid_sale();
        no_reason.ticket_states.insert(
            ticket(3),
            TicketState::Cancelled {
                user_id: 3,
                order_id: Some(1003),
                confirmed_at_ms: None,
                reason: None,
            },
        );
        let r = promise_kept(&no_reason);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].starts_with("1 promises ended cancelled:none"),
            "{r:?}"
        );
    }

    #[test]
    fn check2_cancelled_units_went_back() {
        // Five promises for three units: two were cancelled and their units sold again.
        let r = promises_within_stock(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r
            .found
            .contains("held=3 (made=5 - allowed failures=0 - cancelled=2)"));

        // Ticket 3's cancel never happened: four promises held for three units.
        let mut held = paid_sale();
        held.ticket_states.insert(
            ticket(3),
            TicketState::Confirmed {
                user_id: 3,
                order_id: Some(1003),
                confirmed_at_ms: None,
            },
        );
        let r = promises_within_stock(&held);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("1 more promises"), "{r:?}");
    }

    #[test]
    fn check3_cancelled_orders_hold_no_unit() {
        let r = stores_agree(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("sold=3 cancelled=2"), "{r:?}");

        // Redis still counts a cancelled order as sold, and kept its unit.
        let mut counted = paid_sale();
        counted.redis.confirmed = 4;
        counted.redis.stock = Some(-1);
        let r = stores_agree(&counted);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("counter 4 != 3 MySQL order rows confirmed or paid (+1)"),
            "{r:?}"
        );

        // MySQL did not put a cancelled unit back: a unit vanished.
        let mut kept = paid_sale();
        kept.mysql.stock = -1;
        kept.redis.stock = Some(-1);
        let r = stores_agree(&kept);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("= 2 != initial stock 3 (-1)")),
            "{r:?}"
        );

        // A unit given back twice: one more in both stores than the orders leave.
        let mut twice = paid_sale();
        twice.mysql.stock = 1;
        twice.redis.stock = Some(1);
        assert_eq!(stores_agree(&twice).status, Status::Fail);

        // Paid or cancelled in Redis, but no order row; or another order id.
        let mut no_row = paid_sale();
        no_row.mysql.orders.retain(|o| o.ticket != ticket(2));
        let r = stores_agree(&no_row);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("is cancelled but has no order row"),
            "{r:?}"
        );
        let mut other_id = paid_sale();
        row(&mut other_id, 4).id = 77;
        let r = stores_agree(&other_id);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.problems[0].contains("is paid as order 1004 but its order row is 77"),
            "{r:?}"
        );
    }

    #[test]
    fn check4_a_cancelled_buyer_may_buy_again() {
        let r = identity(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // User 2's first order was never cancelled: two live tickets, two live rows.
        let mut twice = paid_sale();
        let o = row(&mut twice, 2);
        o.status = OrderStatus::Confirmed;
        o.cancelled_at_ms = None;
        o.cancel_reason = None;
        twice.ticket_states.insert(
            ticket(2),
            TicketState::Confirmed {
                user_id: 2,
                order_id: Some(1002),
                confirmed_at_ms: None,
            },
        );
        let r = identity(&twice);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("users holding several=2"), "{r:?}");
        assert!(
            r.problems[0].starts_with("user 2 holds 2 tickets that did not fail nor get"),
            "{r:?}"
        );
        assert!(
            r.problems[1].starts_with("user 2 has 2 order rows not cancelled"),
            "{r:?}"
        );

        // Two cancelled orders and one live one are fine.
        let mut thrice = paid_sale();
        issue(&mut thrice, 6, 2, "confirmed");
        windowed(&mut thrice);
        cancel(&mut thrice, 4, CancelReason::BuyerCancelled);
        assert_eq!(identity(&thrice).status, Status::Pass);
    }

    #[test]
    fn check6_told_confirmed_then_paid_or_cancelled() {
        // Told confirmed: the payment came after the polling.
        let r = buyer_told_truth(&paid_sale());
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.found.contains("over 5"), "{r:?}");

        // Told the decision itself.
        let mut told = paid_sale();
        settled(&mut told, 1).status = "paid".into();
        let s = settled(&mut told, 2);
        s.status = "cancelled".into();
        s.reason = Some("payment_timeout".into());
        let r = buyer_told_truth(&told);
        assert_eq!(r.status, Status::Pass, "{r:?}");

        // MySQL decides: paid in MySQL, Redis lagging at confirmed, the buyer told paid.
        let mut lag = told.clone();
        lag.ticket_states.insert(
            ticket(1),
            TicketState::Confirmed {
                user_id: 1,
                order_id: Some(1001),
                confirmed_at_ms: None,
            },
        );
        assert_eq!(buyer_told_truth(&lag).status, Status::Pass);

        // Told paid, but it was cancelled; told cancelled, but it was paid.
        let mut wrong = paid_sale();
        settled(&mut wrong, 2).status = "paid".into();
        settled(&mut wrong, 4).status = "cancelled".into();
        let r = buyer_told_truth(&wrong);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("status differs=2"), "{r:?}");
        assert!(
            r.problems[0].contains("was told paid, the stores say cancelled"),
            "{r:?}"
        );

        // Told another cancel reason, or another order.
        let mut reason = told.clone();
        settled(&mut reason, 2).reason = Some("buyer_cancelled".into());
        settled(&mut reason, 1).order_id = Some(1002);
        let r = buyer_told_truth(&reason);
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.found.contains("order id differs=1 reason differs=1"),
            "{r:?}"
        );
    }

    #[test]
    fn check7_units_of_late_cancels_may_be_left() {
        // Tickets 2 and 5 were cancelled after the load's last answer: their units may be
        // left (ticket 2's was sold again).
        let mut late = paid_sale();
        cancel(&mut late, 5, CancelReason::PaymentTimeout);
        late.mysql.payments.retain(|p| p.ticket != ticket(5));
        late.history.last_answer_us = Some((PAY_BY as u64 - 10_000) * 1000);
        stores_settled(&mut late);
        let r = sale_ended(&late);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(
            r.found.contains(
                "(at most 2: failed tickets of buyers whose last request got no answer, and \
                 orders cancelled after the load's last answer)"
            ),
            "{r:?}"
        );

        // Cancelled while the load was still buying: the load should have sold it again.
        let mut early = late.clone();
        early.history.last_answer_us = Some((PAY_BY as u64 + 10_000) * 1000);
        let r = sale_ended(&early);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("1 units left in Redis"), "{r:?}");
    }

    /// Scenario 2 (10 % of orders fail on purpose), scaled down: 36 tickets for 30 units, 30
    /// confirmed and 6 failed with `chaos`; the stores agree and the sale sold out.
    fn scenario_2() -> AuditInput {
        let mut input = sale(30);
        for n in 1..=36 {
            issue(
                &mut input,
                n,
                n,
                if n % 6 == 0 { "chaos" } else { "confirmed" },
            );
        }
        stores_settled(&mut input);
        input
    }

    #[test]
    fn scenario_2_passes_only_when_chaos_is_allowed() {
        let mut input = scenario_2();
        assert_eq!(failing(&input), vec![1, 2]);
        input.allowed_failures.insert("chaos".into());
        assert_eq!(failing(&input), Vec::<u8>::new());
        let p = promises(&input);
        assert_eq!((p.made, p.kept), (36, 36));
        assert_eq!(p.outcomes["failed:chaos"], 6);
    }

    /// Scenario 3 (worker SIGKILL) as stored, scaled down: of 62 tickets for 30 units, 30
    /// confirmed and 32 failed `expired` (their orders waited in the dead worker's partitions
    /// past the pending timeout). The stores agree and the sale sold out.
    #[test]
    fn scenario_3_fails_expired_promises() {
        let mut input = sale(30);
        for n in 1..=62 {
            issue(
                &mut input,
                n,
                n,
                if n <= 30 { "confirmed" } else { "expired" },
            );
        }
        stores_settled(&mut input);
        assert_eq!(failing(&input), vec![1, 2]);
        let r = promise_kept(&input);
        assert!(r.found.contains("made=62 kept=30"), "{r:?}");
        assert!(
            r.problems[0].starts_with("32 promises ended failed:expired"),
            "{r:?}"
        );
        // Even a run that allowed chaos does not excuse them.
        input.allowed_failures.insert("chaos".into());
        assert_eq!(failing(&input), vec![1, 2]);
    }

    /// Scenario 8 (Redis restart and reconcile) as stored, scaled down: 300 tickets for 30
    /// units, 30 confirmed and 270 failed `out_of_stock`; Redis has stock 6 and counts 24
    /// confirmed, MySQL has 30 rows and stock 0; the sale never sold out.
    #[test]
    fn scenario_8_fails() {
        let mut input = sale(30);
        for n in 1..=300 {
            issue(
                &mut input,
                n,
                n,
                if n <= 30 { "confirmed" } else { "out_of_stock" },
            );
        }
        stores_settled(&mut input);
        input.redis.stock = Some(6);
        input.redis.confirmed = 24;
        input.history.sold_out_reached = Some(false);
        input.allowed_failures.insert("chaos".into());
        assert_eq!(failing(&input), vec![1, 2, 3, 7]);
        let r = promise_kept(&input);
        assert!(
            r.problems[0].starts_with("270 promises ended failed:out_of_stock"),
            "{r:?}"
        );
        let r = stores_agree(&input);
        assert!(
            r.problems[0].contains("redis confirmed counter 24 != 30"),
            "{r:?}"
        );
        assert!(r.problems[1].contains("redis stock 6 + pending 0"), "{r:?}");
    }
}
