//! Every order of the actors, as proptest chooses them, keeps every promise.

use crate::interleavings::actors::{Pick, Role};
use crate::interleavings::stage::{stage, Bench};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// One sale of `stock` units with a reservation per entry of `located` (see [`Bench::sale`])
/// per case, `actors` on it in an order proptest chooses (up to `max_picks` picks, a crash
/// among them now and then), `INTERLEAVING_CASES` (48) cases. With `messages_survive`, a
/// crashed worker's message always comes again.
fn every_order(
    stock: i64,
    located: &[bool],
    actors: &[(Role, usize)],
    max_picks: usize,
    messages_survive: bool,
) {
    let orders: Vec<(bool, u16)> = located.iter().map(|&l| (l, 1)).collect();
    every_order_of(stock, &orders, actors, max_picks, messages_survive);
}

/// [`every_order`] with orders of several units: (located, units) per reservation.
fn every_order_of(
    stock: i64,
    orders: &[(bool, u16)],
    actors: &[(Role, usize)],
    max_picks: usize,
    messages_survive: bool,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let bench = rt.block_on(Bench::new());
    let cases = std::env::var("INTERLEAVING_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let order = prop::collection::vec(
        (any::<u8>(), prop::bool::weighted(0.05)).prop_map(|(n, crash)| Pick::Nth(n, crash)),
        0..max_picks,
    );
    let runs = std::sync::atomic::AtomicU32::new(0);
    runner
        .run(&order, |order| {
            runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            rt.block_on(async {
                let sale = bench.sale_of(stock, orders).await;
                let staged = stage(sale, actors);
                let staged = if messages_survive {
                    staged.messages_survive()
                } else {
                    staged
                };
                staged.run(&bench.env, &order).await
            })
            .map(|_| ())
            .map_err(TestCaseError::fail)
        })
        .unwrap();
    let runs = runs.into_inner();
    assert!(runs >= cases, "ran {runs} of {cases} cases");
}

/// proptest chooses the order of the steps of a worker, two sweepers, the buyer's cancel and
/// the expiry on one acknowledged ticket, of a worker and a sweeper on a ticket whose
/// location is unknown, and of a worker on a third; any of them may crash between steps
/// (a crashed worker's message comes again). After every step and once quiet, every
/// invariant holds.
#[test]
fn every_order_of_the_actors_keeps_every_promise() {
    let actors = [
        (Role::Worker, 0),
        (Role::Sweeper, 0),
        (Role::Sweeper, 0),
        (Role::Buyer, 0),
        (Role::Expiry, 0),
        (Role::Payer, 2),
        (Role::Payer, 2),
        (Role::Worker, 1),
        (Role::Sweeper, 1),
        (Role::Worker, 2),
    ];
    every_order(3, &[true, false, true], &actors, 30, false);
}

/// proptest chooses the order of a gateway whose publish failed (its message landed), the
/// worker that gets that message (again, if it crashes), a sweeper, and a Redis that loses
/// the product and is rebuilt, on one ticket; and of a worker on a second, acknowledged one.
/// Kafka loses no message (a crashed worker's comes again). Once quiet, the buyer told 503
/// holds no unit, and one told 202 has its order.
#[test]
fn every_order_of_a_failed_publish_keeps_every_promise() {
    let actors = [
        (Role::Gateway, 0),
        (Role::Worker, 0),
        (Role::Sweeper, 0),
        (Role::RedisLoss, 0),
        (Role::Worker, 1),
    ];
    every_order(2, &[false, true], &actors, 16, true);
}

/// The first test's actors on orders of 2, 1 and 2 units (5 in stock, all sold): every
/// give-back of a cancel, an expiry or a failure brings back its order's units, once.
#[test]
fn every_order_of_the_actors_on_orders_of_several_units_keeps_every_promise() {
    let actors = [
        (Role::Worker, 0),
        (Role::Sweeper, 0),
        (Role::Buyer, 0),
        (Role::Expiry, 0),
        (Role::Payer, 2),
        (Role::Worker, 1),
        (Role::Sweeper, 1),
        (Role::Worker, 2),
        (Role::Buyer, 2),
    ];
    every_order_of(5, &[(true, 2), (false, 1), (true, 2)], &actors, 30, false);
}

/// A failed publish of an order of 3 units against its worker, a sweeper and a Redis that
/// loses the product and is rebuilt (counting the units in flight), beside an order of 2.
#[test]
fn every_order_of_a_failed_publish_of_several_units_keeps_every_promise() {
    let actors = [
        (Role::Gateway, 0),
        (Role::Worker, 0),
        (Role::Sweeper, 0),
        (Role::RedisLoss, 0),
        (Role::Worker, 1),
    ];
    every_order_of(5, &[(false, 3), (true, 2)], &actors, 16, true);
}
