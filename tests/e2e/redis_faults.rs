//! What the lifecycle model found once Redis could lose its data or come back old (issue 32):
//! each test sets up, on the real stores, the state its counterexample reaches, and runs the
//! real script or transaction that broke a promise there. Each failed before its fix.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::recovery;
use seckill_shared::reservation::Reservation;
use seckill_shared::settle::GiveBack;
use seckill_shared::store::RecordStatus;
use seckill_shared::{now_ms, ProductId, Ticket, UserId};
use sqlx::Row;

async fn reserve(env: &TestEnv, product: ProductId, user: u64) -> (Ticket, UserId) {
    let user = UserId::new(user).unwrap();
    let (ticket, _) = env
        .store
        .reserve(product, user, now_ms(), false)
        .await
        .unwrap();
    (ticket, user)
}

async fn record(env: &TestEnv, ticket: &Ticket) -> Option<RecordStatus> {
    env.store.ticket(ticket).await.unwrap().map(|r| r.state)
}

/// A sweeper's expire and a gateway's release decide from Redis alone. On a state another
/// run of the server wrote (a restart from a snapshot, a failover to a lagging replica: it
/// may be old, and its `pending` an order MySQL has confirmed since), they change nothing
/// and drop the stock key, so that the product is rebuilt from MySQL. The model's trace: the
/// sweeper expired a ticket answered 202 whose order MySQL had (`every 202 ends kept`).
#[tokio::test]
async fn an_expire_or_a_release_on_another_runs_state_changes_nothing() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let (ticket, user) = reserve(&env, product, 61).await;
    let mut c = env.store.connection();
    let _: () = redis::cmd("HSET")
        .arg(env.store.keys(product).meta())
        .arg("run_id")
        .arg("0".repeat(40))
        .query_async(&mut c)
        .await
        .unwrap();

    let expired = env
        .store
        .expire_pending(
            &ticket,
            seckill_shared::FailureReason::Expired,
            now_ms() + 1,
        )
        .await
        .unwrap();
    assert_eq!(expired, None, "nothing expired from another run's state");
    assert_eq!(record(&env, &ticket).await, Some(RecordStatus::Pending));
    assert_eq!(
        env.store.stock(product).await.unwrap(),
        None,
        "the stock key is dropped: the product counts as lost and is rebuilt"
    );
    let released = env
        .store
        .release(
            &ticket,
            user,
            seckill_shared::FailureReason::KafkaUnavailable,
            60_000,
        )
        .await
        .unwrap();
    assert!(!released, "nothing released from another run's state");
    assert_eq!(record(&env, &ticket).await, Some(RecordStatus::Pending));
}

/// A rebuild sets the stock to MySQL's less the orders in flight, below zero when more are in
/// flight than MySQL has units (an order adopted after the loss). Each of them that fails
/// `out_of_stock` ('heal') frees a place: the unit goes back while the stock is below zero,
/// and only then. The model's trace: the stock stayed at -1 for good, one unit never sold.
#[tokio::test]
async fn a_heal_gives_a_unit_back_only_to_a_stock_below_zero() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let (first, _) = reserve(&env, product, 62).await;
    let (second, _) = reserve(&env, product, 63).await;
    let stock_key = env.store.keys(product).stock();
    let mut c = env.store.connection();
    let _: () = redis::cmd("SET")
        .arg(&stock_key)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();

    let back = env
        .store
        .compensate_with(
            &first,
            seckill_shared::FailureReason::OutOfStock,
            GiveBack::Heal,
        )
        .await
        .unwrap();
    assert!(back, "a stock below zero gets the unit");
    assert_eq!(env.redis_stock(product).await, 0);
    let back = env
        .store
        .compensate_with(
            &second,
            seckill_shared::FailureReason::OutOfStock,
            GiveBack::Heal,
        )
        .await
        .unwrap();
    assert!(
        !back,
        "a stock at zero does not: Redis over-counted that unit"
    );
    assert_eq!(env.redis_stock(product).await, 0);
    assert_eq!(
        record(&env, &second).await,
        Some(RecordStatus::Failed),
        "failed all the same"
    );
}

/// A payment does not take the product's row lock, so it can commit between a rebuild's read
/// of MySQL and its restore. `paid.lua` then finds no record; it writes a `paid` one for the
/// buyer, and the restore of the `confirmed` the rebuild read leaves it alone. The model's
/// trace: Redis `confirmed` for a paid order, for good.
#[tokio::test]
async fn a_payment_whose_record_redis_lost_stays_paid_through_a_rebuild() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let (ticket, user) = reserve(&env, product, 64).await;
    let mut c = env.store.connection();
    let _: () = redis::cmd("DEL")
        .arg(env.store.ticket_keys(&ticket).ticket(&ticket))
        .query_async(&mut c)
        .await
        .unwrap();

    env.store
        .paid(&ticket, 77, user.get(), 1, now_ms())
        .await
        .unwrap();
    let paid = env.store.ticket(&ticket).await.unwrap().expect("a record");
    assert_eq!(paid.state, RecordStatus::Paid);
    assert_eq!(
        paid.user_id,
        user.get(),
        "the buyer still sees their ticket"
    );
    assert_eq!(paid.order_id, Some(77));
    // The rebuild read the order while it was still confirmed.
    env.store
        .restore_settled(
            product,
            recovery::Settled::Orders {
                status: seckill_shared::OrderStatus::Confirmed,
                orders: &[recovery::RestoredOrder {
                    ticket: ticket.clone(),
                    user_id: user.get(),
                    order_id: 77,
                    cancel_reason: None,
                    quantity: 1,
                }],
            },
            60,
        )
        .await
        .unwrap();
    assert_eq!(record(&env, &ticket).await, Some(RecordStatus::Paid));
}

/// The expire's `failed_tickets(expired)` row is written under the product's row lock, and
/// only where the ticket has no order row. A Redis loss between the expire's script and its
/// insert lets a redelivered message's claim adopt the ticket and a worker confirm it; the
/// model's trace ended with both rows for one ticket.
#[tokio::test]
async fn an_expire_writes_no_failure_row_beside_an_order() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let (ticket, user) = reserve(&env, product, 65).await;
    // The order a worker confirmed meanwhile.
    sqlx::query(
        "INSERT INTO orders (ticket, product_id, user_id, reserved_at_ms) VALUES (?, ?, ?, ?)",
    )
    .bind(ticket.as_str())
    .bind(product.as_i64())
    .bind(user.get() as i64)
    .bind(now_ms())
    .execute(&env.db)
    .await
    .unwrap();

    let expired = recovery::expire(&env.store, &env.db, &ticket, user.get(), 1, now_ms() + 1)
        .await
        .unwrap();
    assert!(expired.is_some(), "Redis still had it pending");
    let rows: i64 = sqlx::query("SELECT COUNT(*) AS n FROM failed_tickets WHERE ticket = ?")
        .bind(ticket.as_str())
        .fetch_one(&env.db)
        .await
        .unwrap()
        .get("n");
    assert_eq!(rows, 0, "no failure row beside the order");
}

/// Sets the `run_id` of one bucket's meta to another server run's, as a bucket whose primary
/// failed over to a lagging replica (or restarted from a snapshot) has.
async fn age_bucket(env: &TestEnv, product: ProductId, bucket: u16) {
    let mut c = env.store.connection();
    let _: () = redis::cmd("HSET")
        .arg(env.store.bucket_keys(product, bucket).meta())
        .arg("run_id")
        .arg("0".repeat(40))
        .query_async(&mut c)
        .await
        .unwrap();
}

async fn bucket_stock(env: &TestEnv, product: ProductId, bucket: u16) -> Option<i64> {
    let mut c = env.store.connection();
    redis::cmd("GET")
        .arg(env.store.bucket_keys(product, bucket).stock())
        .query_async(&mut c)
        .await
        .unwrap()
}

/// A buyer whose home bucket is empty borrows from another bucket. A donor bucket whose state
/// another run wrote (it may be old: the unit it would lend may be lent or sold already, and
/// then counted twice) lends nothing; its stock is dropped and the buy is told the product
/// must be rebuilt (`503`). The sweeper's epoch check finds such a bucket without a buy.
#[tokio::test]
async fn a_donor_bucket_from_another_run_lends_nothing_and_is_rebuilt() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = crate::buckets::bucketed_product(&env, &gw, 4, 2).await;
    let homed = crate::buckets::users_homed_in(0, 2, 7000, 3);
    for &u in &homed[..2] {
        let (_, r) = env
            .store
            .reserve(product, UserId::new(u).unwrap(), now_ms(), false)
            .await
            .unwrap();
        assert_eq!(r, Reservation::Reserved);
    }
    assert_eq!(bucket_stock(&env, product, 0).await, Some(0), "home empty");
    assert_eq!(bucket_stock(&env, product, 1).await, Some(2));
    age_bucket(&env, product, 1).await;

    let (_, r) = env
        .store
        .reserve(product, UserId::new(homed[2]).unwrap(), now_ms(), false)
        .await
        .unwrap();
    assert_eq!(r, Reservation::UnknownProduct, "no loan from an old donor");
    assert_eq!(
        bucket_stock(&env, product, 1).await,
        None,
        "the donor is dropped"
    );
    assert_eq!(bucket_stock(&env, product, 0).await, Some(0));

    // The same bucket found by the sweeper's check instead.
    let other = crate::buckets::bucketed_product(&env, &gw, 4, 2).await;
    age_bucket(&env, other, 1).await;
    assert_eq!(env.store.check_epoch(other).await.unwrap(), 1);
    assert_eq!(bucket_stock(&env, other, 1).await, None);
    assert_eq!(
        bucket_stock(&env, other, 0).await,
        Some(2),
        "this run's bucket stays"
    );
}

/// A buy again that located a held ticket (`locate_held.lua`) answered `200`: a late
/// failure of the first gateway's own publish must not release it (`kafka_unavailable`).
/// Found by a review: release.lua spared nothing located, and the worker's claim then
/// skipped the order the buy again had published.
#[tokio::test]
async fn a_release_leaves_a_ticket_a_buy_again_located() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let (ticket, user) = reserve(&env, product, 66).await;
    assert!(env.store.locate_held(&ticket, 0, 5).await.unwrap());
    let released = env
        .store
        .release(
            &ticket,
            user,
            seckill_shared::FailureReason::KafkaUnavailable,
            60_000,
        )
        .await
        .unwrap();
    assert!(!released);
    assert_eq!(record(&env, &ticket).await, Some(RecordStatus::Pending));
    assert_eq!(env.redis_stock(product).await, 2, "the unit stays held");
}

/// A rebuild of a product in buckets that finds more tickets in flight than MySQL has units
/// (orders adopted after a loss) cannot split a stock below zero over buckets that never go
/// below zero. Each bucket used to get 0: an order that then failed for a reason of its own
/// gave its bucket a unit MySQL did not have, and a buyer was told `202` for it. The buckets
/// now stay frozen (buys answer `503`) until the tickets in flight settle; the next rebuild
/// sets the stock from MySQL. (The review's finding: the below-zero heal did nothing here.)
#[tokio::test]
async fn a_bucketed_rebuild_owing_units_sells_none_until_the_orders_in_flight_settle() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = crate::buckets::bucketed_product(&env, &gw, 4, 2).await;
    let mut held = vec![];
    for user in [7101, 7102, 7103] {
        held.push(reserve(&env, product, user).await.0);
    }
    // MySQL has one unit for the three orders in flight.
    sqlx::query("UPDATE products SET stock = 1 WHERE id = ?")
        .bind(product.as_i64())
        .execute(&env.db)
        .await
        .unwrap();
    recovery::reconcile(&env.store, &env.db, product, None)
        .await
        .unwrap()
        .expect("rebuilt");

    // One order fails for a reason of its own: no bucket may take its unit back.
    env.store
        .compensate_with(
            &held[0],
            seckill_shared::FailureReason::Chaos,
            GiveBack::Unit,
        )
        .await
        .unwrap();
    for user in 7104..7110 {
        let (status, body) = gw.buy(product, user).await;
        assert_ne!(status, StatusCode::ACCEPTED, "a 202 with no unit: {body}");
    }
    for bucket in 0..2 {
        assert_eq!(
            bucket_stock(&env, product, bucket).await.unwrap_or(0),
            0,
            "bucket {bucket}: no unit for MySQL's none"
        );
    }

    // The others fail too; once nothing is in flight, a rebuild sets the stock from MySQL.
    env.store
        .compensate_with(
            &held[1],
            seckill_shared::FailureReason::Chaos,
            GiveBack::Unit,
        )
        .await
        .unwrap();
    env.store
        .compensate_with(
            &held[2],
            seckill_shared::FailureReason::Chaos,
            GiveBack::Unit,
        )
        .await
        .unwrap();
    recovery::reconcile(&env.store, &env.db, product, None)
        .await
        .unwrap()
        .expect("rebuilt");
    let mut total = 0;
    for bucket in 0..2 {
        total += bucket_stock(&env, product, bucket)
            .await
            .expect("selling again");
    }
    assert_eq!(total, 1, "MySQL's one unit, nothing in flight");
}

/// A product in buckets left frozen by a rebuild that owed units is still swept: its overdue
/// tickets (here: held, never published) are expired, which gives nothing back with no stock
/// key, and the next sweep's rebuild then finds nothing in flight and sells MySQL's stock.
/// Before, the sweep only tried to rebuild it, skipped its tickets, and it stayed frozen for
/// good (found by a review).
#[tokio::test]
async fn a_frozen_bucketed_product_is_swept_and_then_rebuilt() {
    use seckill_shared::recovery::{sweep, SweepRules};
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = crate::buckets::bucketed_product(&env, &gw, 4, 2).await;
    let mut held = vec![];
    for user in [7201, 7202, 7203] {
        held.push(reserve(&env, product, user).await.0);
    }
    sqlx::query("UPDATE products SET stock = 1 WHERE id = ?")
        .bind(product.as_i64())
        .execute(&env.db)
        .await
        .unwrap();
    recovery::reconcile(&env.store, &env.db, product, None)
        .await
        .unwrap();
    assert_eq!(env.store.stock(product).await.unwrap(), None, "frozen");

    let due_now = SweepRules {
        timeout: std::time::Duration::ZERO,
        last_resort: std::time::Duration::ZERO,
    };
    sweep(&env.store, &env.db, due_now, None, None)
        .await
        .unwrap();
    for ticket in &held {
        assert_eq!(
            record(&env, ticket).await,
            Some(RecordStatus::Failed),
            "{ticket} expired"
        );
    }
    sweep(&env.store, &env.db, due_now, None, None)
        .await
        .unwrap();
    let mut total = 0;
    for bucket in 0..2 {
        total += bucket_stock(&env, product, bucket)
            .await
            .expect("selling again");
    }
    assert_eq!(total, 1, "MySQL's one unit");
}
