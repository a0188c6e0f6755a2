//! Interleavings chosen by hand: each replays one race found before, step by step.

use crate::interleavings::actors::{Pick, Role, DUE_NOW};
use crate::interleavings::stage::{exact, stage, Bench};
use seckill_shared::now_ms;
use seckill_shared::payments as payment;
use seckill_shared::payments::attempts as payments;
use seckill_shared::payments::cancel::{self, BuyerCancel};
use seckill_shared::recovery::{self, SweepAction};
use seckill_shared::settle::Outcome;
use seckill_shared::store::RecordStatus;

/// Bug 1 of issue 32: the buyer cancels between the worker's MySQL commit and its confirm.
/// Before the fix `cancel.lua` took only a `confirmed` ticket, `restore_due` was cleared
/// anyway, and the confirm made it `confirmed` again: Redis never got the unit back and the
/// buyer could never buy again.
#[tokio::test]
async fn a_cancel_between_the_commit_and_the_confirm_gives_the_unit_back() {
    let bench = Bench::new().await;
    let actors = [(Role::Worker, 0), (Role::Buyer, 0)];
    // worker: claim, commit; buyer: cancel's commit, cancel.lua; worker: confirm.
    exact(&bench, &[true], &actors, &[0, 0, 1, 1, 0]).await;
    // And the payment expiry in the same place.
    let actors = [(Role::Worker, 0), (Role::Expiry, 0)];
    exact(&bench, &[true], &actors, &[0, 0, 1, 1, 0]).await;
}

/// Found by the model checker: a payment lands between the worker's MySQL commit and its
/// confirm (the pay reads MySQL, which has the order). `paid.lua` took only a `confirmed`
/// ticket, and the confirm then left Redis `confirmed` for a paid order (or, had the worker
/// died, `processing` for good).
#[tokio::test]
async fn a_payment_between_the_commit_and_the_confirm_is_followed_by_redis() {
    let bench = Bench::new().await;
    let actors = [(Role::Worker, 0), (Role::Payer, 0)];
    // worker: claim, commit; payer: record, callback, paid.lua; worker: confirm.
    exact(&bench, &[true], &actors, &[0, 0, 1, 1, 1, 0]).await;
}

/// Found by the step harness: the gateway that applied a payment stops between its MySQL
/// commit and `paid.lua`, and the worker's confirm then leaves Redis `confirmed` for a paid
/// order. The commit now sets `restore_due` with `paid`, and a worker's round makes Redis
/// follow.
#[tokio::test]
async fn a_payment_whose_gateway_stops_before_redis_is_followed_later() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[true]).await;
    let actors = [(Role::Worker, 0), (Role::Payer, 0)];
    // worker: claim, commit; payer: record, callback, then it stops; worker: confirm.
    let order = [
        Pick::Actor(0),
        Pick::Actor(0),
        Pick::Actor(1),
        Pick::Actor(1),
        Pick::Crash(1),
        Pick::Actor(0),
    ];
    if let Err(e) = stage(sale, &actors).run(&bench.env, &order).await {
        panic!("{e}");
    }
}

/// Bug 2 of issue 32: two sweepers. One completes an acknowledged order whose message Kafka
/// lost (its claim makes the ticket `processing`); the other reads `processing` before the
/// first one's commit. Before the fix it wrote `lost` and gave the unit back: the buyer's
/// `202` ended failed.
#[tokio::test]
async fn two_sweepers_complete_an_acknowledged_order_once() {
    let bench = Bench::new().await;
    let actors = [(Role::Sweeper, 0), (Role::Sweeper, 0)];
    // first: read + claim; second: read (processing) + act; first: commit, confirm.
    exact(&bench, &[true], &actors, &[0, 1, 1, 1, 0, 0]).await;
    // The same with a worker that read the message and claimed it, then stalled.
    let actors = [(Role::Worker, 0), (Role::Sweeper, 0)];
    exact(&bench, &[true], &actors, &[0, 1, 1, 1, 0, 0]).await;
    // And with the whole of the real sweep (every live product) as the second sweeper.
    let actors = [(Role::Sweeper, 0), (Role::Sweep, 0)];
    exact(&bench, &[true], &actors, &[0, 1, 0, 0]).await;
}

/// A sweeper that read a `pending` ticket without a location decides to expire it; a worker
/// claims it first (its message was in Kafka after all). Before the fix the sweeper wrote an
/// `expired` failure row anyway, and the worker's transaction then failed the order.
#[tokio::test]
async fn a_sweeper_that_loses_to_a_worker_leaves_no_failure_row() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[false]).await;
    let t = sale.bought[0].order.ticket.clone();
    let record = bench.env.store.ticket(&t).await.unwrap().unwrap();
    let action = recovery::decide(&record, None, now_ms(), DUE_NOW, None);
    assert_eq!(action, SweepAction::Expire);
    let claimed = sale
        .settler
        .claim(std::slice::from_ref(&sale.bought[0].order))
        .await
        .unwrap();
    assert_eq!(claimed.claimed().len(), 1);
    let expired = recovery::expire(
        &bench.env.store,
        &bench.env.db,
        &t,
        record.user_id,
        record.quantity,
        now_ms(),
    )
    .await
    .unwrap();
    assert_eq!(expired, None, "the worker claimed it first");
    let decided = sale.settler.persist(&claimed).await.unwrap();
    assert!(
        matches!(decided[..], [Outcome::Confirmed { .. }]),
        "{decided:?}"
    );
    sale.settler.finish(&claimed, &decided).await.unwrap();
    let record = bench.env.store.ticket(&t).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Confirmed);
}

/// A redelivered message of an order MySQL cancelled since (a Redis that came back old holds
/// its ticket `pending`): the worker's batch finds the cancelled row and Redis follows it
/// (`cancelled`, the unit back), instead of confirming a cancelled order.
#[tokio::test]
async fn a_claim_of_an_order_cancelled_since_makes_redis_follow_the_cancel() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[true]).await;
    let env = &bench.env;
    let order = &sale.bought[0].order;
    sale.settler
        .settle(std::slice::from_ref(order))
        .await
        .unwrap();
    let BuyerCancel::Cancelled(c) =
        cancel::cancel_by_buyer(&env.db, &order.ticket, order.user_id, now_ms())
            .await
            .unwrap()
    else {
        panic!("not cancelled");
    };
    cancel::give_back(&env.store, &env.db, &[c], now_ms())
        .await
        .unwrap();
    assert_eq!(env.redis_stock(sale.product).await, 2);
    // Redis comes back old: the ticket is `pending` again, holding a unit, its buyer held.
    let keys = env.store.ticket_keys(&order.ticket);
    let mut conn = env.store.connection();
    let _: () = redis::pipe()
        .hset(keys.ticket(&order.ticket), "status", "pending")
        .hset(keys.buyers(), order.user_id.get(), order.ticket.as_str())
        .zadd(keys.pending(), order.ticket.as_str(), order.reserved_at_ms)
        .decr(keys.stock(), 1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let report = sale
        .settler
        .settle(std::slice::from_ref(order))
        .await
        .unwrap();
    assert!(
        matches!(report.outcomes[..], [(_, Outcome::Cancelled { .. })]),
        "{:?}",
        report.outcomes
    );
    let record = env.store.ticket(&order.ticket).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Cancelled);
    assert_eq!(env.redis_stock(sale.product).await, 2);
    assert_eq!(
        env.store.buyer(sale.product, order.user_id).await.unwrap(),
        None
    );
}

/// Found from outside (issue 32): an attempt the provider never took (it was down) is `unsent`,
/// and two pays of the order then come at once. Their transactions run one after the other
/// under the order's lock; before the claim, both read the old attempt as free and both sent
/// it (the provider asked twice). Here, step by step on the real transactions: the first
/// claims it, the second finds it being sent; a failed send gives the claim back.
#[tokio::test]
async fn two_pays_after_an_unsent_attempt_send_it_once() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[true]).await;
    let order = sale.bought[0].order.clone();
    // The worker settles the order: claim, commit, confirm.
    let settled = [Pick::Actor(0), Pick::Actor(0), Pick::Actor(0)];
    if let Err(e) = stage(sale, &[(Role::Worker, 0)])
        .run(&bench.env, &settled)
        .await
    {
        panic!("{e}");
    }
    let db = &bench.env.db;
    // A provider call may take this long: an attempt stamped later is being sent.
    const CALL_MS: i64 = 4_000;
    let attempt = || payments::Payment {
        payment_id: payments::new_payment_id(),
        ticket: order.ticket.to_string(),
        user_id: order.user_id.get(),
        status: payment::PaymentStatus::Unsent,
        amount: 500,
        currency: "EUR".into(),
    };
    let record = |p: payments::Payment, key: &'static str| async move {
        payments::record(db, &p, key, now_ms() - CALL_MS)
            .await
            .unwrap()
    };
    // Pay 0: recorded; its send fails (the provider is down), and it gives its claim back.
    let first = attempt();
    assert_eq!(record(first.clone(), "k0").await, payments::Recorded::New);
    payments::release(db, &first.payment_id, CALL_MS)
        .await
        .unwrap();
    // Pays 1 and 2, with new keys, one transaction after the other.
    let one = record(attempt(), "k1").await;
    let two = record(attempt(), "k2").await;
    assert_eq!(
        one,
        payments::Recorded::Unsent(first.clone()),
        "pay 1 sends it"
    );
    assert_eq!(two, payments::Recorded::InProgress, "pay 2 waits");
    // Pay 1's send fails too: the claim goes back, and pay 2 again sends it.
    payments::release(db, &first.payment_id, CALL_MS)
        .await
        .unwrap();
    assert_eq!(
        record(attempt(), "k2").await,
        payments::Recorded::Unsent(first.clone())
    );
    // The same key twice while it is being sent: the second waits too.
    assert_eq!(
        record(first.clone(), "k0").await,
        payments::Recorded::InProgress
    );
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM payments WHERE ticket = ?")
        .bind(order.ticket.to_string())
        .fetch_one(db)
        .await
        .unwrap();
    assert_eq!(n, 1, "one attempt, never a second beside it");
}

/// Kafka reports a publish failed though its message landed, and a worker claims it before
/// the gateway's release.lua: MySQL's `kafka_unavailable` row, written before the worker's
/// transaction, fails the order there, so the 503 holds (chaos scenario 19 had such buyers
/// told 503 for units they got; the model found the later fixes).
#[tokio::test]
async fn a_failed_publish_claimed_first_is_failed_by_mysql() {
    let bench = Bench::new().await;
    let actors = [(Role::Worker, 0), (Role::Gateway, 0)];
    // worker: claim; gateway: release.lua (moved on), MySQL decides; worker: commit, Redis.
    exact(&bench, &[false], &actors, &[0, 1, 1, 0, 0]).await;
}

/// The same, with the worker's commit first: the order stands, and the buyer is told 202.
#[tokio::test]
async fn a_failed_publish_committed_first_is_answered_202() {
    let bench = Bench::new().await;
    let actors = [(Role::Worker, 0), (Role::Gateway, 0)];
    // worker: claim, commit; gateway: release.lua, MySQL decides; worker: confirm.lua.
    exact(&bench, &[false], &actors, &[0, 0, 1, 1, 0]).await;
}

/// Found by the model checker: the release's failure known to Redis alone is undone by a
/// Redis that loses it; the message, delivered after the rebuild, was adopted by a claim and
/// confirmed for the buyer told 503. MySQL's row now fails it.
#[tokio::test]
async fn a_released_ticket_stays_failed_after_redis_loses_it() {
    let bench = Bench::new().await;
    let actors = [(Role::Gateway, 0), (Role::RedisLoss, 0), (Role::Worker, 0)];
    // gateway: release.lua, MySQL decides; Redis lost and rebuilt; worker: claim, commit, Redis.
    exact(&bench, &[false], &actors, &[0, 0, 1, 2, 2, 2]).await;
    // And with the loss between the release and MySQL's row.
    exact(&bench, &[false], &actors, &[0, 1, 0, 2, 2, 2]).await;
}

/// Found by the model checker: Redis comes back from an older snapshot with a released ticket
/// pending again, its gateway writes the `kafka_unavailable` row after the rebuild, and the
/// sweeper expires the pending record. Its `expired` row is not written beside the gateway's,
/// and the record now takes MySQL's reason (`fail_reason.lua`), so the stores agree.
#[tokio::test]
async fn an_expire_beside_a_release_row_takes_its_reason() {
    let bench = Bench::new().await;
    let sale = bench.sale(2, &[false]).await;
    let b = &sale.bought[0];
    let (t, user) = (&b.order.ticket, b.order.user_id.get());
    let row = seckill_shared::db::record_failure(
        &bench.env.db,
        t,
        user,
        1,
        seckill_shared::FailureReason::KafkaUnavailable,
    )
    .await
    .unwrap();
    assert_eq!(
        row,
        seckill_shared::db::Recorded::Failed(seckill_shared::FailureReason::KafkaUnavailable)
    );
    let expired = recovery::expire(&bench.env.store, &bench.env.db, t, user, 1, now_ms())
        .await
        .unwrap();
    assert_eq!(
        expired,
        Some(true),
        "the pending record expired, its unit back"
    );
    let record = bench.env.store.ticket(t).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Failed);
    assert_eq!(record.reason.as_deref(), Some("kafka_unavailable"));
}
