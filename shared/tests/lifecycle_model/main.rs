//! Model checks of a ticket's lifecycle (`model.rs` here; the table it runs is
//! `seckill_shared::lifecycle`).
//!
//! Each `old_model_*` test puts back exactly one of today's behaviours into the fixed model,
//! asserts that the checker finds a counterexample to the invariant it breaks, and prints the
//! trace (run with `--nocapture` to read it). `fixed_model_keeps_every_promise` explores
//! several bounded scenarios exhaustively with every fix in.

mod model;

use std::collections::BTreeSet;
use std::time::Instant;

use model::*;
use seckill_shared::lifecycle::Actor;
use stateright::{Checker, HasDiscoveries, Model};

/// Every kind of actor that the model lets crash.
const CRASHING: [Actor; 6] = [
    Actor::Gateway,
    Actor::Worker,
    Actor::Sweeper,
    Actor::Expiry,
    Actor::Buyer,
    Actor::Recovery,
];

/// 3 buyers for 2 units: the sale itself, with Kafka failing, losing and redelivering.
fn selling_out() -> Bounds {
    Bounds {
        units: 2,
        owners: vec![0, 1, 2],
        workers: 1,
        sweepers: 1,
        may_crash: vec![Actor::Gateway, Actor::Worker],
        redeliveries: 1,
        lost_messages: 1,
        kafka_failures: 1,
        expiry: false,
        buyer_cancels: 0,
        pay_requests: 0,
    }
}

/// 2 workers and 2 sweepers on 2 tickets.
fn concurrent_settles() -> Bounds {
    Bounds {
        units: 2,
        owners: vec![0, 1],
        workers: 2,
        sweepers: 2,
        may_crash: vec![Actor::Worker, Actor::Sweeper],
        redeliveries: 1,
        lost_messages: 1,
        kafka_failures: 0,
        expiry: false,
        buyer_cancels: 0,
        pay_requests: 0,
    }
}

/// One ticket and everything that can happen to it: crashes of every actor, Kafka faults,
/// the expiry, a cancel, and two pay requests.
fn after_the_sale() -> Bounds {
    Bounds {
        units: 1,
        owners: vec![0],
        workers: 1,
        sweepers: 1,
        may_crash: CRASHING.to_vec(),
        redeliveries: 1,
        lost_messages: 1,
        kafka_failures: 1,
        expiry: true,
        buyer_cancels: 1,
        pay_requests: 2,
    }
}

/// One ticket, 2 workers and 2 sweepers racing the expiry and a cancel.
fn cancels_racing_settles() -> Bounds {
    Bounds {
        units: 1,
        owners: vec![0],
        workers: 2,
        sweepers: 2,
        may_crash: CRASHING.to_vec(),
        redeliveries: 1,
        lost_messages: 1,
        kafka_failures: 0,
        expiry: true,
        buyer_cancels: 1,
        pay_requests: 0,
    }
}

/// One buyer who cancels and buys again (its second ticket waits for the first to free it).
fn buying_again() -> Bounds {
    Bounds {
        units: 1,
        owners: vec![0, 0],
        workers: 1,
        sweepers: 1,
        may_crash: vec![Actor::Worker, Actor::Buyer],
        redeliveries: 1,
        lost_messages: 1,
        kafka_failures: 0,
        expiry: false,
        buyer_cancels: 1,
        pay_requests: 0,
    }
}

/// The fixed model with one of today's behaviours put back.
fn fixed_but(today: impl FnOnce(&mut Fixes)) -> Fixes {
    let mut fixes = Fixes::ALL;
    today(&mut fixes);
    fixes
}

/// Explores until `property` has a counterexample (breadth first, so the trace is about as
/// short as one can be), asserts there is one, prints it and returns it.
fn counterexample(fixes: Fixes, bounds: Bounds, property: &'static str) -> String {
    let start = Instant::now();
    let checker = Seckill::new(fixes, bounds)
        .checker()
        .finish_when(HasDiscoveries::AllOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("no counterexample to {property:?}"));
    let trace = checker.model().explain(&path, property);
    println!(
        "counterexample to {property:?} ({} states, {:.1?}):\n{trace}",
        checker.unique_state_count(),
        start.elapsed()
    );
    trace
}

/// The smallest sale: one unit, one buyer, one worker, one sweeper, no fault. Each old bug
/// is shown on it plus what the bug needs, so that its trace has nothing else in it.
fn minimal() -> Bounds {
    Bounds {
        units: 1,
        owners: vec![0],
        workers: 1,
        sweepers: 1,
        may_crash: vec![],
        redeliveries: 0,
        lost_messages: 0,
        kafka_failures: 0,
        expiry: false,
        buyer_cancels: 0,
        pay_requests: 0,
    }
}

#[test]
fn old_model_finds_cancel_during_processing() {
    let fixes = fixed_but(|f| f.cancel_takes_in_flight = false);
    let bounds = Bounds {
        buyer_cancels: 1,
        ..minimal()
    };
    let trace = counterexample(fixes, bounds, UNITS_COME_BACK_ONCE);
    assert!(trace.contains("cancel.lua t1 => nothing changes (t1 record processing)"));
    assert!(trace.contains("confirm.lua t1 => record t1 processing -> confirmed"));
}

#[test]
fn old_model_finds_two_sweepers() {
    let fixes = fixed_but(|f| f.sweeper_settles_processing = false);
    // Without workers, only sweepers settle: Kafka has to lose the message.
    let bounds = Bounds {
        workers: 0,
        sweepers: 2,
        lost_messages: 1,
        ..minimal()
    };
    let trace = counterexample(fixes, bounds, EVERY_202_KEPT);
    assert!(trace.contains("sweeper s1: claim.lua t1"));
    assert!(trace.contains("sweeper s2: reads t1 processing: will settle stuck"));
    assert!(trace.contains("-> Failed(lost)"));
    // A worker in the place of the first sweeper does the same.
    let trace = counterexample(fixes, minimal(), EVERY_202_KEPT);
    assert!(trace.contains("worker w1: gets t1's message"));
}

#[test]
fn old_model_finds_double_pay() {
    let fixes = fixed_but(|f| f.pay_locks_order = false);
    let bounds = Bounds {
        pay_requests: 2,
        ..minimal()
    };
    let trace = counterexample(fixes, bounds, ONE_CHARGE_PER_ORDER);
    assert!(trace.contains("payment #2 unsent -> processing"));
}

/// Found by this checker, beyond the fixes asked for: a payment succeeding while a worker is
/// between its MySQL commit and its confirm.lua.
#[test]
fn old_model_finds_pay_during_processing() {
    let fixes = fixed_but(|f| f.paid_takes_processing = false);
    let bounds = Bounds {
        pay_requests: 1,
        ..minimal()
    };
    let trace = counterexample(fixes, bounds.clone(), STORES_AGREE);
    assert!(trace.contains("paid.lua t1 => nothing changes (t1 record processing)"));
    // If that worker crashed instead, the record stays processing: the sweeper's settle
    // finds the order paid, and paid.lua does not take a processing record.
    let bounds = Bounds {
        may_crash: vec![Actor::Worker],
        lost_messages: 1,
        ..bounds
    };
    counterexample(fixes, bounds, NO_TICKET_STUCK);
}

/// Today's unconditional failed_tickets(expired) row, beside the order a worker wrote.
#[test]
fn old_model_finds_expired_row_beside_an_order() {
    let fixes = fixed_but(|f| f.expired_row_only_if_expired = false);
    let bounds = Bounds {
        may_crash: vec![Actor::Gateway],
        ..minimal()
    };
    let trace = counterexample(fixes, bounds, STORES_AGREE);
    assert!(trace.contains("failed_tickets t1 expired"));
}

/// With all of today's behaviours at once, the larger scenario breaks the same promises (but
/// no ticket is stuck: today's sweeper fails a processing ticket it cannot settle).
#[test]
fn todays_model_breaks_its_promises() {
    let broken = BTreeSet::from([
        UNITS_COME_BACK_ONCE,
        EVERY_202_KEPT,
        ONE_CHARGE_PER_ORDER,
        STORES_AGREE,
    ]);
    let checker = Seckill::new(Fixes::TODAY, after_the_sale())
        .checker()
        .finish_when(HasDiscoveries::AllOf(broken.clone()))
        .spawn_bfs()
        .join();
    let found: BTreeSet<&str> = checker.discoveries().into_keys().collect();
    println!(
        "today's model ({} states): {found:?}",
        checker.unique_state_count()
    );
    assert!(found.is_superset(&broken), "{found:?}");
}

#[test]
fn fixed_model_keeps_every_promise() {
    let scenarios = [
        ("selling out", selling_out()),
        ("concurrent settles", concurrent_settles()),
        ("after the sale", after_the_sale()),
        ("cancels racing settles", cancels_racing_settles()),
        ("buying again", buying_again()),
    ];
    // The scenarios run side by side; each explores every state within its bounds.
    let reached: Vec<Vec<&'static str>> = std::thread::scope(|scope| {
        let runs: Vec<_> = scenarios
            .into_iter()
            .map(|(name, bounds)| {
                scope.spawn(move || {
                    let start = Instant::now();
                    let checker = Seckill::new(Fixes::ALL, bounds)
                        .checker()
                        .spawn_bfs()
                        .join();
                    let model = checker.model();
                    for property in model.properties() {
                        if property.expectation != stateright::Expectation::Always {
                            continue;
                        }
                        if let Some(path) = checker.discovery(property.name) {
                            panic!(
                                "{name}: counterexample to {:?}:\n{}",
                                property.name,
                                model.explain(&path, property.name)
                            );
                        }
                    }
                    println!(
                        "{name}: {} states ({} with repeats), depth {}, {:.1?}",
                        checker.unique_state_count(),
                        checker.state_count(),
                        checker.max_depth(),
                        start.elapsed()
                    );
                    checker.discoveries().into_keys().collect()
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    // Each `sometimes` property is reached in some scenario: the checks are not vacuous.
    for property in [
        SELLS_OUT,
        CANCEL_HAPPENS,
        PAYMENT_SUCCEEDS,
        LOST_MESSAGE_COMPLETED,
    ] {
        assert!(
            reached.iter().flatten().any(|&name| name == property),
            "never reached: {property:?}"
        );
    }
}
