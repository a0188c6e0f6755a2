//! Checks 13-15: the waiting room (`load --waiting-room`). They run only when the history has
//! waiting-room lines, so an audit of any other run has its twelve checks as before.
//!
//! - 13: every promise went to a buyer who held an admission: its buy carried a token of an
//!   admission the buyer was shown, and the buy was sent before that admission lapsed; and
//!   Redis's `qdone` says `bought` for every buyer with an order (the stores agree they were
//!   admitted).
//! - 14: the cap. Admitted-not-bought never exceeded `ceil(factor × units left)` in the admin
//!   view's samples the load took during the sale, nor in Redis at the end.
//! - 15: no place admitted twice: no buyer holds two tickets or two orders, no buyer had two
//!   entries, no entry is both in line and admitted (or bought and still in line or
//!   admitted), and every entry Redis holds is of a buyer who joined.

use super::{AuditInput, CheckResult, Problems, Status};
use crate::history::{WaitingRoomLine, WrBuyLine};
use std::collections::{BTreeMap, BTreeSet};

/// One admin-view sample: the admitted-not-bought count against the cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapSample {
    pub at_ms: i64,
    pub admitted: u64,
    /// `None` while Redis had lost the product.
    pub stock_redis: Option<i64>,
    /// `ceil(factor × stock_redis)`.
    pub cap: Option<u64>,
    /// The factor, as text (for the messages).
    pub factor: String,
}

/// What the history's waiting-room lines say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomHistory {
    /// Users with a join attempt.
    pub tried_to_join: BTreeSet<u64>,
    /// The queue ids each user's joins were answered with.
    pub entries: BTreeMap<u64, BTreeSet<String>>,
    /// The admissions (expiry, ms) each user was shown.
    pub admissions: BTreeMap<u64, BTreeSet<i64>>,
    /// Buys answered with a ticket (202, 200, 201), by ticket.
    pub buys: BTreeMap<String, Vec<WrBuyLine>>,
    pub samples: Vec<CapSample>,
}

impl RoomHistory {
    pub fn from_lines(lines: &[WaitingRoomLine]) -> Self {
        let mut h = Self::default();
        for l in lines {
            match l {
                WaitingRoomLine::WrJoin(j) => {
                    h.tried_to_join.insert(j.user_id);
                    if let (Some(202), Some(q)) = (j.status, &j.queue_id) {
                        h.entries.entry(j.user_id).or_default().insert(q.clone());
                    }
                }
                WaitingRoomLine::WrAdmitted(a) => {
                    h.admissions
                        .entry(a.user_id)
                        .or_default()
                        .insert(a.admitted_until_ms);
                }
                WaitingRoomLine::WrBuy(b) => {
                    if let (Some(200..=202), Some(t)) = (b.status, &b.ticket) {
                        h.buys.entry(t.clone()).or_default().push(b.clone());
                    }
                }
                WaitingRoomLine::WrEnd(_) => {}
                WaitingRoomLine::WrSample(s) => h.samples.push(CapSample {
                    at_ms: s.at_ms,
                    admitted: s.admitted,
                    stock_redis: s.stock_redis,
                    cap: s
                        .stock_redis
                        .map(|st| crate::load::waiting_room::cap(s.max_admitted_factor, st)),
                    factor: s.max_admitted_factor.to_string(),
                }),
            }
        }
        h
    }
}

/// The waiting room in Redis after the sale.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomRedis {
    /// `adm`: user → admission expiry (ms).
    pub admitted: BTreeMap<u64, i64>,
    /// `qdone`: user → `bought` or `expired`.
    pub done: BTreeMap<u64, String>,
    /// `q`: users in line.
    pub queue: BTreeSet<u64>,
    /// `wr_factor` in the meta hash; `None` when missing.
    pub factor: Option<String>,
}

/// The waiting room's facts: present when the history has waiting-room lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomFacts {
    pub history: RoomHistory,
    /// `None`: Redis has no waiting room for the product (it was lost, or never set).
    pub redis: Option<RoomRedis>,
}

/// Check 13: every promise went to an admitted buyer, and Redis agrees for every order.
pub fn bought_with_admission(input: &AuditInput, room: &RoomFacts) -> CheckResult {
    let h = &room.history;
    let mut problems = Problems::default();
    let mut with_token = 0;
    for (ticket, t) in &input.history.tickets {
        let buys = h.buys.get(ticket).map_or(&[][..], Vec::as_slice);
        let held = buys.iter().any(|b| {
            b.user_id == t.user
                && b.admission_token.as_deref().is_some_and(|s| !s.is_empty())
                && b.admitted_until_ms.is_some_and(|until| {
                    until * 1000 > b.sent_at_us as i64
                        && h.admissions
                            .get(&b.user_id)
                            .is_some_and(|a| a.contains(&until))
                })
        });
        if held {
            with_token += 1;
            continue;
        }
        problems.add(|| match buys.first() {
            None => format!(
                "ticket {ticket} (user {}) has no buy line with an admission",
                t.user
            ),
            Some(b) => {
                format!(
                "ticket {ticket} (user {}) was bought with token {} until {:?}, sent at {} ms, \
                 admissions the buyer was shown: {:?}",
                t.user,
                if b.admission_token.is_some() { "present" } else { "absent" },
                b.admitted_until_ms,
                b.sent_at_us / 1000,
                h.admissions.get(&b.user_id)
            )
            }
        });
    }
    let buyers: BTreeSet<u64> = input.mysql.orders.iter().map(|o| o.user_id).collect();
    let mut not_bought = 0;
    match &room.redis {
        None => problems.add(|| "Redis has no waiting room for the product".into()),
        Some(r) => {
            for u in &buyers {
                let done = r.done.get(u).map(String::as_str);
                if done != Some("bought") {
                    not_bought += 1;
                    problems.add(|| format!("user {u} has an order, and qdone says {done:?}"));
                }
            }
        }
    }
    let found = format!(
        "{} promises, {with_token} bought with an admission the buyer was shown; {} buyers with \
         an order, {not_bought} not `bought` in qdone",
        input.history.tickets.len(),
        buyers.len()
    );
    let mut r = CheckResult::new(13, "bought with an admission", problems.count == 0, found);
    r.problems = problems.samples;
    r
}

/// Check 14: admitted-not-bought within `ceil(factor × units left)` in every sample and at the
/// end. Without samples (a load without `--admin-token`) only the end is checked.
pub fn admission_cap(_input: &AuditInput, room: &RoomFacts) -> CheckResult {
    let mut problems = Problems::default();
    let samples: Vec<&CapSample> = room
        .history
        .samples
        .iter()
        .filter(|s| s.cap.is_some())
        .collect();
    let mut most_over = None::<i64>;
    for s in &samples {
        let cap = s.cap.unwrap_or(0);
        if s.admitted > cap {
            let over = s.admitted as i64 - cap as i64;
            most_over = Some(most_over.map_or(over, |m| m.max(over)));
            problems.add(|| {
                format!(
                    "at {} ms: {} admitted, cap ceil({} × {}) = {cap}",
                    s.at_ms,
                    s.admitted,
                    s.factor,
                    s.stock_redis.unwrap_or(0)
                )
            });
        }
    }
    let max_admitted = samples.iter().map(|s| s.admitted).max().unwrap_or(0);
    let mut end = "no waiting room in Redis".to_owned();
    if let Some(r) = &room.redis {
        match r.factor.as_deref().and_then(|f| f.parse::<f64>().ok()) {
            Some(f) => {
                // Units left come from the Redis facts of the product.
                let stock = _input.redis.stock.unwrap_or(0);
                let cap = crate::load::waiting_room::cap(f, stock);
                end = format!("{} admitted at the end, cap {cap}", r.admitted.len());
                if r.admitted.len() as u64 > cap {
                    problems.add(|| {
                        format!(
                            "at the end: {} admitted, cap ceil({f} × {stock}) = {cap}",
                            r.admitted.len()
                        )
                    });
                }
            }
            None => problems.add(|| format!("wr_factor in Redis is {:?}", r.factor)),
        }
    }
    let found = format!(
        "{} samples, at most {max_admitted} admitted, {} over the cap{}; {end}",
        samples.len(),
        problems.count,
        most_over.map_or(String::new(), |m| format!(" (by up to {m})"))
    );
    let mut r = CheckResult::new(14, "admission cap", problems.count == 0, found);
    r.problems = problems.samples;
    if samples.is_empty() {
        r.info.push(
            "no admin-view samples (a load without --admin-token): only the end is checked".into(),
        );
    }
    r
}

/// Check 15: no place admitted twice.
pub fn one_admission_per_place(input: &AuditInput, room: &RoomFacts) -> CheckResult {
    let h = &room.history;
    let mut problems = Problems::default();
    let mut tickets_by_user: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for (ticket, t) in &input.history.tickets {
        tickets_by_user.entry(t.user).or_default().push(ticket);
    }
    for (u, ts) in tickets_by_user.iter().filter(|(_, ts)| ts.len() > 1) {
        problems.add(|| format!("user {u} was answered {} tickets: {ts:?}", ts.len()));
    }
    let mut orders_by_user: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for o in &input.mysql.orders {
        orders_by_user.entry(o.user_id).or_default().push(o.id);
    }
    for (u, os) in orders_by_user.iter().filter(|(_, os)| os.len() > 1) {
        problems.add(|| format!("user {u} has {} orders: {os:?}", os.len()));
    }
    for (u, ids) in h.entries.iter().filter(|(_, ids)| ids.len() > 1) {
        problems.add(|| format!("user {u} was given {} queue entries: {ids:?}", ids.len()));
    }
    let mut held = 0;
    if let Some(r) = &room.redis {
        for u in r.admitted.keys().filter(|u| r.queue.contains(u)) {
            problems.add(|| format!("user {u} is both admitted and in line"));
        }
        for (u, _) in r.done.iter().filter(|(_, d)| d.as_str() == "bought") {
            if r.admitted.contains_key(u) || r.queue.contains(u) {
                problems.add(|| format!("user {u} bought and is still admitted or in line"));
            }
        }
        let in_redis: BTreeSet<u64> = r
            .admitted
            .keys()
            .chain(r.done.keys())
            .chain(r.queue.iter())
            .copied()
            .collect();
        held = in_redis.len();
        for u in in_redis.iter().filter(|u| !h.tried_to_join.contains(u)) {
            problems.add(|| format!("user {u} has a place in Redis and never joined"));
        }
    }
    let found = format!(
        "{} buyers joined ({} entries answered), {held} places in Redis; {} problems",
        h.tried_to_join.len(),
        h.entries.values().map(BTreeSet::len).sum::<usize>(),
        problems.count
    );
    let mut r = CheckResult::new(15, "one admission per place", problems.count == 0, found);
    r.problems = problems.samples;
    r
}

/// Checks 13-15, or none when the run had no waiting room.
pub fn run(input: &AuditInput) -> Vec<CheckResult> {
    let Some(room) = &input.waiting_room else {
        return vec![];
    };
    let mut out = vec![
        bought_with_admission(input, room),
        admission_cap(input, room),
        one_admission_per_place(input, room),
    ];
    if room.history.tried_to_join.is_empty() {
        for r in &mut out {
            r.status = Status::Fail;
            r.problems
                .push("the history has waiting-room lines but no join".into());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{HistoryTicket, OrderRow, RedisFacts};
    use super::*;
    use crate::history::{WrAdmittedLine, WrJoinLine, WrSampleLine};

    const T1: &str = "5-00000000000000000000000000000001";
    const T2: &str = "5-00000000000000000000000000000002";

    fn join(user: u64, q: &str) -> WaitingRoomLine {
        WaitingRoomLine::WrJoin(WrJoinLine {
            user_id: user,
            gateway: "g".into(),
            status: Some(202),
            queue_id: Some(q.into()),
            state: Some("waiting".into()),
            error: None,
            sent_at_ms: 1,
            at_ms: 2,
        })
    }

    fn admitted(user: u64, until: i64) -> WaitingRoomLine {
        WaitingRoomLine::WrAdmitted(WrAdmittedLine {
            user_id: user,
            queue_id: "q".into(),
            admitted_until_ms: until,
            gateway: "g".into(),
            at_ms: 3,
        })
    }

    fn buy(user: u64, ticket: &str, until: i64, sent_ms: u64) -> WaitingRoomLine {
        WaitingRoomLine::WrBuy(WrBuyLine {
            user_id: user,
            admission_token: Some("tok".into()),
            admitted_until_ms: Some(until),
            sent_at_us: sent_ms * 1000,
            gateway: "g".into(),
            status: Some(202),
            ticket: Some(ticket.into()),
            error: None,
        })
    }

    fn sample(admitted: u64, stock: i64) -> WaitingRoomLine {
        WaitingRoomLine::WrSample(WrSampleLine {
            at_ms: 4,
            admitted,
            stock_redis: Some(stock),
            pending: 0,
            max_admitted_factor: 1.5,
        })
    }

    /// Users 1 and 2 joined, were admitted and bought; user 3 joined and waits in line. Two
    /// units of two sold.
    fn input(lines: &[WaitingRoomLine]) -> AuditInput {
        let mut input = AuditInput {
            product: 5,
            initial_stock: 2,
            redis: RedisFacts {
                stock: Some(0),
                ..Default::default()
            },
            ..Default::default()
        };
        for (t, u) in [(T1, 1), (T2, 2)] {
            input.history.tickets.insert(
                t.into(),
                HistoryTicket {
                    quantity: 1,
                    user: u,
                    other_users: Default::default(),
                    settled: None,
                },
            );
        }
        input.mysql.orders = vec![
            OrderRow::confirmed(10, T1, 1),
            OrderRow::confirmed(11, T2, 2),
        ];
        input.waiting_room = Some(RoomFacts {
            history: RoomHistory::from_lines(lines),
            redis: Some(RoomRedis {
                admitted: BTreeMap::new(),
                done: [(1, "bought".to_owned()), (2, "bought".to_owned())].into(),
                queue: [3].into(),
                factor: Some("1.5".into()),
            }),
        });
        input
    }

    fn good_lines() -> Vec<WaitingRoomLine> {
        vec![
            join(1, "q1"),
            join(2, "q2"),
            join(3, "q3"),
            sample(0, 2),
            admitted(1, 5000),
            admitted(2, 6000),
            sample(2, 2),
            buy(1, T1, 5000, 4000),
            buy(2, T2, 6000, 4500),
            sample(0, 0),
        ]
    }

    fn statuses(input: &AuditInput) -> Vec<Status> {
        run(input).iter().map(|r| r.status).collect()
    }

    #[test]
    fn a_sale_through_the_waiting_room_passes() {
        let input = input(&good_lines());
        let results = run(&input);
        assert_eq!(results.len(), 3);
        for r in &results {
            assert_eq!(r.status, Status::Pass, "{r:?}");
        }
        assert_eq!(
            results.iter().map(|r| r.id).collect::<Vec<_>>(),
            [13, 14, 15]
        );
    }

    #[test]
    fn without_waiting_room_lines_there_are_no_such_checks() {
        let mut input = input(&good_lines());
        input.waiting_room = None;
        assert!(run(&input).is_empty());
        assert_eq!(super::super::run_all(&input).len(), 13);
    }

    #[test]
    fn a_buy_without_an_admission_the_buyer_was_shown_fails_13() {
        // User 2 bought after its admission lapsed.
        let mut lines = good_lines();
        lines[8] = buy(2, T2, 6000, 6500);
        assert_eq!(
            statuses(&input(&lines)),
            [Status::Fail, Status::Pass, Status::Pass]
        );
        // ... with an admission no poll showed it.
        let mut lines = good_lines();
        lines[8] = buy(2, T2, 7000, 4500);
        assert_eq!(statuses(&input(&lines))[0], Status::Fail);
        // ... with no buy line at all.
        let mut lines = good_lines();
        lines.remove(8);
        assert_eq!(statuses(&input(&lines))[0], Status::Fail);
        // Redis does not say the buyer with an order bought.
        let mut input = input(&good_lines());
        let room = input.waiting_room.as_mut().unwrap();
        room.redis
            .as_mut()
            .unwrap()
            .done
            .insert(2, "expired".into());
        let r = &run(&input)[0];
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("user 2 has an order"), "{r:?}");
    }

    #[test]
    fn more_admitted_than_the_cap_fails_14() {
        // ceil(1.5 × 1) = 2: three admitted is over.
        let mut lines = good_lines();
        lines.push(sample(3, 1));
        let r = &run(&input(&lines))[1];
        assert_eq!(r.status, Status::Fail, "{r:?}");
        assert!(
            r.problems[0].contains("3 admitted, cap ceil(1.5 × 1) = 2"),
            "{r:?}"
        );
        // At the end, in Redis: one admitted with nothing left.
        let mut input = input(&good_lines());
        let room = input.waiting_room.as_mut().unwrap();
        room.redis.as_mut().unwrap().admitted.insert(3, 9000);
        room.redis.as_mut().unwrap().queue.clear();
        assert_eq!(run(&input)[1].status, Status::Fail);
    }

    #[test]
    fn a_place_admitted_twice_fails_15() {
        // Two orders for one user.
        let mut i = input(&good_lines());
        i.mysql.orders.push(OrderRow::confirmed(
            12,
            "5-00000000000000000000000000000003",
            1,
        ));
        assert_eq!(run(&i)[2].status, Status::Fail);
        // Two entries for one user.
        let mut lines = good_lines();
        lines.push(join(3, "q4"));
        assert_eq!(run(&input(&lines))[2].status, Status::Fail);
        // A place in Redis of a user who never joined.
        let mut i = input(&good_lines());
        let room = i.waiting_room.as_mut().unwrap();
        room.redis.as_mut().unwrap().queue.insert(99);
        let r = &run(&i)[2];
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].contains("user 99"), "{r:?}");
        // A buyer who bought and is admitted again.
        let mut i = input(&good_lines());
        let room = i.waiting_room.as_mut().unwrap();
        room.redis.as_mut().unwrap().admitted.insert(1, 9000);
        assert_eq!(run(&i)[2].status, Status::Fail);
    }
}
