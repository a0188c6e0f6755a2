//! The audit's invariants, as pure functions over an [`AuditInput`] that
//! [`super::gather`] fills from the history file, Redis and MySQL.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A ticket's state now, from its Redis record or, once that is gone, from MySQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TicketState {
    /// Pending or processing.
    Pending,
    Confirmed,
    Failed,
    /// Neither Redis nor MySQL knows it.
    Unknown,
}

/// What the history file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryFacts {
    pub requests: u64,
    /// Every ticket answered with 202, 200 or 201, and the user it was answered to.
    pub tickets: BTreeMap<String, u64>,
    /// Users answered 202, 200 or 201.
    pub accepted_users: BTreeSet<u64>,
    /// Users answered 409.
    pub sold_out_users: BTreeSet<u64>,
    /// The history has a summary line.
    pub has_summary: bool,
    pub until_sold_out: bool,
    pub sold_out_reached: Option<bool>,
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
    /// The `confirmed` counter in the meta hash.
    pub confirmed: i64,
    pub failed: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRow {
    pub id: u64,
    pub ticket: String,
    pub user_id: u64,
}

/// The MySQL view of the product.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MysqlFacts {
    pub stock: i64,
    pub initial_stock: i64,
    /// Every `orders` row of the product.
    pub orders: Vec<OrderRow>,
    /// `GROUP BY user_id HAVING COUNT(*) > 1` over the product's orders: (user, rows).
    pub duplicate_users: Vec<(u64, i64)>,
    /// `GROUP BY ticket HAVING COUNT(*) > 1` over the product's orders: (ticket, rows).
    pub duplicate_tickets: Vec<(String, i64)>,
    /// Tickets of the product in `failed_tickets`.
    pub failed_tickets: BTreeSet<String>,
}

/// Everything the checks look at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditInput {
    pub product: u64,
    /// Units the sale started with (`--initial-stock`, else `products.initial_stock`).
    pub initial_stock: i64,
    pub history: HistoryFacts,
    pub redis: RedisFacts,
    pub mysql: MysqlFacts,
    /// The state now of every history ticket and every order row's ticket.
    pub ticket_states: BTreeMap<String, TicketState>,
}

impl AuditInput {
    pub fn state(&self, ticket: &str) -> TicketState {
        self.ticket_states
            .get(ticket)
            .copied()
            .unwrap_or(TicketState::Unknown)
    }
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

/// Check 1: no more order rows than units.
pub fn no_oversell(input: &AuditInput) -> CheckResult {
    let orders = input.mysql.orders.len() as i64;
    let mut r = CheckResult::new(
        1,
        "nothing oversold",
        orders <= input.initial_stock,
        format!(
            "orders={orders} initial={} (redis confirmed={})",
            input.initial_stock, input.redis.confirmed
        ),
    );
    if orders > input.initial_stock {
        r.problems
            .push(format!("{} units oversold", orders - input.initial_stock));
    }
    r
}

/// Check 2: one order per (product, user), one row per ticket.
pub fn no_duplicates(input: &AuditInput) -> CheckResult {
    let m = &input.mysql;
    let mut r = CheckResult::new(
        2,
        "no duplicate orders",
        m.duplicate_users.is_empty() && m.duplicate_tickets.is_empty(),
        format!(
            "users with >1 order={} tickets with >1 row={}",
            m.duplicate_users.len(),
            m.duplicate_tickets.len()
        ),
    );
    for (user, n) in m.duplicate_users.iter().take(SAMPLES) {
        r.problems.push(format!("user {user} has {n} orders"));
    }
    for (ticket, n) in m.duplicate_tickets.iter().take(SAMPLES) {
        r.problems.push(format!("ticket {ticket} has {n} rows"));
    }
    r
}

/// Check 3: every ticket the gateways handed out is settled: confirmed or failed.
pub fn nothing_lost(input: &AuditInput) -> CheckResult {
    let mut by_state: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut problems = Problems::default();
    for ticket in input.history.tickets.keys() {
        let state = input.state(ticket);
        let label = match state {
            TicketState::Pending => "pending",
            TicketState::Confirmed => "confirmed",
            TicketState::Failed => "failed",
            TicketState::Unknown => "unknown",
        };
        *by_state.entry(label).or_default() += 1;
        if matches!(state, TicketState::Pending | TicketState::Unknown) {
            problems.add(|| format!("ticket {ticket} is {label}"));
        }
    }
    let n = |k: &str| by_state.get(k).copied().unwrap_or(0);
    let mut r = CheckResult::new(
        3,
        "nothing lost",
        problems.count == 0,
        format!(
            "tickets={} confirmed={} failed={} pending={} unknown={}",
            input.history.tickets.len(),
            n("confirmed"),
            n("failed"),
            n("pending"),
            n("unknown")
        ),
    );
    r.problems = problems.samples;
    r
}

/// Check 4: confirmed tickets are exactly the tickets with an order row.
pub fn orders_match_tickets(input: &AuditInput) -> CheckResult {
    let rows: BTreeMap<&str, &OrderRow> = input
        .mysql
        .orders
        .iter()
        .map(|o| (o.ticket.as_str(), o))
        .collect();
    let mut problems = Problems::default();
    let (mut confirmed_without_row, mut failed_with_row, mut row_not_confirmed) = (0, 0, 0);
    let mut wrong_user = 0;
    for (ticket, user) in &input.history.tickets {
        match (input.state(ticket), rows.get(ticket.as_str())) {
            (TicketState::Confirmed, None) => {
                confirmed_without_row += 1;
                problems.add(|| format!("ticket {ticket} is confirmed but has no order row"));
            }
            (_, Some(row)) if row.user_id != *user => {
                wrong_user += 1;
                problems.add(|| {
                    format!(
                        "ticket {ticket} was handed to user {user} but its order is for user {}",
                        row.user_id
                    )
                });
            }
            _ => {}
        }
    }
    for ticket in &input.mysql.failed_tickets {
        if rows.contains_key(ticket.as_str()) {
            failed_with_row += 1;
            problems.add(|| format!("ticket {ticket} is in failed_tickets and has an order row"));
        }
    }
    let mut not_in_history = 0;
    for row in &input.mysql.orders {
        let state = input.state(&row.ticket);
        if state == TicketState::Failed && !input.mysql.failed_tickets.contains(&row.ticket) {
            failed_with_row += 1;
            problems.add(|| {
                format!(
                    "ticket {} is failed but has order row {}",
                    row.ticket, row.id
                )
            });
        } else if !matches!(state, TicketState::Confirmed | TicketState::Failed) {
            row_not_confirmed += 1;
            problems.add(|| {
                format!(
                    "order row {} belongs to ticket {} whose status is {state:?}",
                    row.id, row.ticket
                )
            });
        }
        if !input.history.tickets.contains_key(&row.ticket) {
            not_in_history += 1;
        }
    }
    let mut r = CheckResult::new(
        4,
        "orders match confirmed tickets",
        problems.count == 0,
        format!(
            "rows={} confirmed-without-row={confirmed_without_row} failed-with-row={failed_with_row} \
             row-not-confirmed={row_not_confirmed} wrong-user={wrong_user}",
            input.mysql.orders.len()
        ),
    );
    r.problems = problems.samples;
    if not_in_history > 0 {
        r.info.push(format!(
            "{not_in_history} order rows belong to tickets not in this history (other runs or clients)"
        ));
    }
    r
}

/// Check 5: units are conserved. In Redis `initial = stock + pending + confirmed`; in MySQL
/// `stock = initial - order rows`.
pub fn stock_conserved(input: &AuditInput) -> CheckResult {
    let initial = input.initial_stock;
    let rd = &input.redis;
    let orders = input.mysql.orders.len() as i64;
    let redis_sum = rd.stock.map(|s| s + rd.pending + rd.confirmed);
    let redis_ok = redis_sum == Some(initial);
    let mysql_ok = input.mysql.stock == initial - orders;
    let stock = rd.stock.map_or("none".to_owned(), |s| s.to_string());
    let mut r = CheckResult::new(
        5,
        "stock conserved",
        redis_ok && mysql_ok,
        format!(
            "initial={initial}; redis stock={stock} pending={} confirmed={}; \
             mysql stock={} orders={orders}",
            rd.pending, rd.confirmed, input.mysql.stock
        ),
    );
    match redis_sum {
        None => r
            .problems
            .push("the product has no stock key in Redis (not loaded?)".into()),
        Some(sum) if sum != initial => r.problems.push(format!(
            "redis: stock + pending + confirmed = {sum}, not {initial} ({:+})",
            sum - initial
        )),
        Some(_) => {}
    }
    if !mysql_ok {
        r.problems.push(format!(
            "mysql: stock {} != initial {initial} - orders {orders} = {}",
            input.mysql.stock,
            initial - orders
        ));
    }
    if let Some(meta) = rd.initial.filter(|m| *m != initial) {
        r.info.push(format!("redis meta initial is {meta}"));
    }
    r
}

/// Check 6: a run that went on until sold out, with at least as many buyers as units, sold
/// every unit.
pub fn no_undersell(input: &AuditInput) -> CheckResult {
    let h = &input.history;
    let demand = h.accepted_users.union(&h.sold_out_users).count() as i64;
    let orders = input.mysql.orders.len() as i64;
    let found = format!(
        "until_sold_out={} demand={demand} (ticket {} + 409 {}) initial={} orders={orders}",
        h.until_sold_out,
        h.accepted_users.len(),
        h.sold_out_users.len(),
        input.initial_stock
    );
    let skip = |why: String| CheckResult {
        id: 6,
        name: "nothing undersold",
        status: Status::Skip,
        found: found.clone(),
        problems: vec![],
        info: vec![why],
    };
    if !h.has_summary {
        return skip("the history has no summary line (the run did not finish)".into());
    }
    if !h.until_sold_out {
        return skip("the run was not --until-sold-out".into());
    }
    if demand < input.initial_stock {
        return skip(format!(
            "only {demand} distinct buyers for {} units",
            input.initial_stock
        ));
    }
    let mut r = CheckResult::new(
        6,
        "nothing undersold",
        orders == input.initial_stock,
        found.clone(),
    );
    if orders != input.initial_stock {
        r.problems.push(format!(
            "{} units unsold with {demand} buyers",
            input.initial_stock - orders
        ));
    }
    if h.sold_out_reached == Some(false) {
        r.info
            .push("the load stopped before every gateway answered 409".into());
    }
    r
}

pub fn run_all(input: &AuditInput) -> Vec<CheckResult> {
    vec![
        no_oversell(input),
        no_duplicates(input),
        nothing_lost(input),
        orders_match_tickets(input),
        stock_conserved(input),
        no_undersell(input),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(n: u64) -> String {
        format!("7-{n:032x}")
    }

    /// A sold-out run of 3 units over 5 users: users 1-3 confirmed, users 4 and 5 failed
    /// (say the worker refused them) and users 6 and 7 answered 409.
    fn healthy() -> AuditInput {
        let mut input = AuditInput {
            product: 7,
            initial_stock: 3,
            ..Default::default()
        };
        let h = &mut input.history;
        h.has_summary = true;
        h.until_sold_out = true;
        h.sold_out_reached = Some(true);
        h.requests = 7;
        for user in 1..=5 {
            h.tickets.insert(ticket(user), user);
            h.accepted_users.insert(user);
        }
        h.sold_out_users.extend([6, 7]);
        let mut orders = vec![];
        for user in 1..=3 {
            orders.push(OrderRow {
                id: user + 100,
                ticket: ticket(user),
                user_id: user,
            });
            input
                .ticket_states
                .insert(ticket(user), TicketState::Confirmed);
        }
        input.ticket_states.insert(ticket(4), TicketState::Failed);
        input.ticket_states.insert(ticket(5), TicketState::Failed);
        input.mysql = MysqlFacts {
            stock: 0,
            initial_stock: 3,
            orders,
            duplicate_users: vec![],
            duplicate_tickets: vec![],
            failed_tickets: [ticket(4), ticket(5)].into_iter().collect(),
        };
        input.redis = RedisFacts {
            stock: Some(0),
            initial: Some(3),
            pending: 0,
            confirmed: 3,
            failed: 2,
        };
        input
    }

    fn status_of(r: &CheckResult) -> Status {
        r.status
    }

    #[test]
    fn a_healthy_run_passes_every_check() {
        let input = healthy();
        for r in run_all(&input) {
            assert_eq!(r.status, Status::Pass, "{r:?}");
            assert!(r.problems.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn check1_oversold() {
        let mut input = healthy();
        assert_eq!(status_of(&no_oversell(&input)), Status::Pass);
        input.mysql.orders.push(OrderRow {
            id: 9,
            ticket: ticket(9),
            user_id: 9,
        });
        let r = no_oversell(&input);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("1 units oversold"), "{r:?}");
    }

    #[test]
    fn check2_duplicates() {
        let mut input = healthy();
        assert_eq!(status_of(&no_duplicates(&input)), Status::Pass);
        input.mysql.duplicate_users.push((2, 2));
        assert_eq!(status_of(&no_duplicates(&input)), Status::Fail);
        let mut input = healthy();
        input.mysql.duplicate_tickets.push((ticket(1), 2));
        let r = no_duplicates(&input);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("2 rows"), "{r:?}");
    }

    #[test]
    fn check3_lost_tickets() {
        let input = healthy();
        assert_eq!(status_of(&nothing_lost(&input)), Status::Pass);

        let mut pending = healthy();
        pending
            .ticket_states
            .insert(ticket(4), TicketState::Pending);
        let r = nothing_lost(&pending);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("pending=1"), "{r:?}");

        let mut unknown = healthy();
        unknown.ticket_states.remove(&ticket(5));
        let r = nothing_lost(&unknown);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("unknown"), "{r:?}");
    }

    #[test]
    fn check4_orders_and_tickets_agree() {
        let input = healthy();
        let r = orders_match_tickets(&input);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert!(r.info.is_empty());

        // A confirmed ticket without its row.
        let mut no_row = healthy();
        no_row.mysql.orders.retain(|o| o.user_id != 2);
        let r = orders_match_tickets(&no_row);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("confirmed-without-row=1"), "{r:?}");

        // A failed ticket with a row.
        let mut failed_row = healthy();
        failed_row.mysql.orders.push(OrderRow {
            id: 10,
            ticket: ticket(4),
            user_id: 4,
        });
        let r = orders_match_tickets(&failed_row);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("failed-with-row=1"), "{r:?}");

        // A failed ticket (in Redis only) with a row.
        let mut redis_failed = healthy();
        redis_failed.mysql.failed_tickets.clear();
        redis_failed
            .ticket_states
            .insert(ticket(1), TicketState::Failed);
        assert_eq!(orders_match_tickets(&redis_failed).status, Status::Fail);

        // A row whose ticket is still pending in Redis.
        let mut pending_row = healthy();
        pending_row
            .ticket_states
            .insert(ticket(3), TicketState::Pending);
        let r = orders_match_tickets(&pending_row);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("row-not-confirmed=1"), "{r:?}");

        // A row for another user than the history's.
        let mut wrong_user = healthy();
        wrong_user.mysql.orders[0].user_id = 99;
        let r = orders_match_tickets(&wrong_user);
        assert_eq!(r.status, Status::Fail);
        assert!(r.found.contains("wrong-user=1"), "{r:?}");

        // A confirmed row from outside the history is information only.
        let mut foreign = healthy();
        foreign.mysql.orders.pop();
        foreign.history.tickets.remove(&ticket(3));
        foreign.mysql.orders.push(OrderRow {
            id: 11,
            ticket: ticket(3),
            user_id: 3,
        });
        let r = orders_match_tickets(&foreign);
        assert_eq!(r.status, Status::Pass, "{r:?}");
        assert_eq!(r.info.len(), 1, "{r:?}");
    }

    #[test]
    fn check5_conservation() {
        let input = healthy();
        assert_eq!(status_of(&stock_conserved(&input)), Status::Pass);

        let mut mid_sale = healthy();
        // Still in flight: one unit pending instead of confirmed, one row fewer, and MySQL
        // stock one higher.
        mid_sale.redis.confirmed = 2;
        mid_sale.redis.pending = 1;
        mid_sale.mysql.orders.pop();
        mid_sale.mysql.stock = 1;
        assert_eq!(status_of(&stock_conserved(&mid_sale)), Status::Pass);

        let mut leaked = healthy();
        leaked.redis.stock = Some(1);
        let r = stock_conserved(&leaked);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("(+1)"), "{r:?}");

        let mut mysql = healthy();
        mysql.mysql.stock = 1;
        let r = stock_conserved(&mysql);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("mysql"), "{r:?}");

        let mut unloaded = healthy();
        unloaded.redis.stock = None;
        assert_eq!(status_of(&stock_conserved(&unloaded)), Status::Fail);
    }

    #[test]
    fn check6_undersold() {
        let input = healthy();
        assert_eq!(status_of(&no_undersell(&input)), Status::Pass);

        let mut under = healthy();
        under.mysql.orders.pop();
        let r = no_undersell(&under);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("1 units unsold"), "{r:?}");

        // Does not apply: not an until-sold-out run, too few buyers, or no summary.
        let mut planned = under.clone();
        planned.history.until_sold_out = false;
        assert_eq!(no_undersell(&planned).status, Status::Skip);
        let mut few = under.clone();
        few.history.accepted_users = [1].into_iter().collect();
        few.history.sold_out_users = [1].into_iter().collect();
        let r = no_undersell(&few);
        assert_eq!(r.status, Status::Skip, "{r:?}");
        assert!(r.passed());
        let mut unfinished = under;
        unfinished.history.has_summary = false;
        assert_eq!(no_undersell(&unfinished).status, Status::Skip);
    }
}
