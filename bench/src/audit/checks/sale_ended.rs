//! Check 7: the load finished, and a sale that had to sell out did.

use super::{AuditInput, CheckResult, Status};
use crate::history::SaleEndCheck;
use seckill_shared::OrderStatus;

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
    let (allowed, excused) = leftover_allowed(input);
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

/// The units a sale that sold out may still hold at the end, and why: what check 7 allows, and
/// check 16 over the buckets.
pub(super) fn leftover_allowed(input: &AuditInput) -> (i64, String) {
    let h = &input.history;
    // A unit left over is excused only as one a buyer reserved without being told (the last
    // request went unanswered) whose ticket then failed, giving the unit back after the load
    // was done with that buyer.
    // In units: an order of several gives each back.
    let unanswered: i64 = h
        .last_unanswered_users
        .iter()
        .filter_map(|u| input.mysql.failed_units.get(u))
        .sum();
    let allowed_failures: i64 = input
        .history
        .tickets
        .iter()
        .filter(|(t, _)| input.allowed_failure(t, input.state(t)))
        .map(|(_, h)| h.units())
        .sum();
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
    (allowed, excused)
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
        .map(|o| i64::from(o.quantity))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{cancel, healthy, paid_sale, stores_settled, ticket, PAY_BY};
    use super::*;
    use seckill_shared::CancelReason;

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
        unanswered.mysql.failed_units.insert(9, 1);
        assert_eq!(sale_ended(&unanswered).status, Status::Pass);
        unanswered.redis.stock = Some(2);
        assert_eq!(sale_ended(&unanswered).status, Status::Fail);
        // A buyer answered after the unanswered request excuses nothing.
        let mut answered_later = left.clone();
        answered_later.history.unanswered_users.insert(9);
        answered_later.mysql.failed_users.insert(9);
        answered_later.mysql.failed_units.insert(9, 1);
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
}
