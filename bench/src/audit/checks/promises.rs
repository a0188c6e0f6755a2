//! The promises made and what became of them: checks 1 (every promise kept) and 2 (no more
//! promises held than units).

use super::{AuditInput, CheckResult, Problems, TicketState};
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// The units of the tickets made, and of those kept.
    pub units_made: u64,
    pub units_kept: u64,
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
    for (ticket, h) in &input.history.tickets {
        let state = input.state(ticket);
        let units = h.units().max(0) as u64;
        p.made += 1;
        p.units_made += units;
        if input.kept(ticket, state) {
            p.kept += 1;
            p.units_kept += units;
        }
        *p.outcomes.entry(state.outcome()).or_default() += 1;
    }
    p
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
    // In units: an order of several holds each.
    let made: i64 = input.history.tickets.values().map(|t| t.units()).sum();
    let (mut failed, mut cancelled) = (0, 0);
    for (t, h) in &input.history.tickets {
        let state = input.state(t);
        if input.allowed_failure(t, state) {
            failed += h.units();
        } else if matches!(state, TicketState::Cancelled { .. }) {
            cancelled += h.units();
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
            "{} more units promised and held than the sale had: {held} units of tickets did not \
             end in an allowed failure or a cancel",
            held - initial
        ));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{answered_at_us, healthy, issue, paid_sale, ticket};
    use super::super::{AllowWindow, HistoryTicket, Status};
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn promises_count_outcomes_per_reason() {
        let mut input = healthy();
        issue(&mut input, 6, 6, "out_of_stock");
        input.history.tickets.insert(
            ticket(7),
            HistoryTicket {
                quantity: 1,
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
                quantity: 1,
                user: 6,
                other_users: BTreeSet::new(),
                settled: None,
            },
        );
        over.ticket_states
            .insert(ticket(6), TicketState::Pending { user_id: 6 });
        let r = promises_within_stock(&over);
        assert_eq!(r.status, Status::Fail);
        assert!(r.problems[0].starts_with("1 more units promised"), "{r:?}");

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
        assert!(r.problems[0].starts_with("1 more units promised"), "{r:?}");
    }
}
