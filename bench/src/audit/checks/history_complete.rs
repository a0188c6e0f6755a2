//! Check 5: the history is complete.

use super::{AuditInput, CheckResult, Problems};

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

#[cfg(test)]
mod tests {
    use super::super::fixtures::{healthy, ticket};
    use super::super::Status;
    use super::*;

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
}
