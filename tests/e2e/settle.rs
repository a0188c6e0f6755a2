//! The settle step, driven directly: order ids reach Redis right, whichever way MySQL hands
//! them out.

use crate::helpers::*;
use seckill_shared::settle::ClaimStatus;
use seckill_shared::settle::{OrderIds, Outcome, Settler};
use seckill_shared::store::RecordStatus;
use seckill_shared::{now_ms, OrderMessage, ProductId, UserId};
use sqlx::Row;

/// 37 orders: inserted in chunks of 32, 4 and 1. Every confirmed order's id, as the batch
/// reports it and as Redis stores it, is the id of its row in MySQL.
async fn order_ids_match_mysql(read_back: bool) {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 100).await;
    let settler = Settler {
        store: env.store.clone(),
        db: env.db.clone(),
        chaos: Default::default(),
        ids: if read_back {
            OrderIds::read_back()
        } else {
            OrderIds::default()
        },
    };
    let mut orders = Vec::new();
    for u in 1..=37 {
        let user = UserId::new(1000 + u).unwrap();
        let at = now_ms();
        let (ticket, _) = env.store.reserve(product, user, at, false).await.unwrap();
        orders.push(OrderMessage::new(ticket, user, at));
    }
    // Rows of another batch first, so ids do not start at 1.
    settler.settle(&orders[..3]).await.unwrap();
    let report = settler.settle(&orders[3..]).await.unwrap();
    assert_eq!(report.outcomes.len(), 34);
    for (ticket, outcome) in &report.outcomes {
        let Outcome::Confirmed { order_id, .. } = outcome else {
            panic!("{ticket}: {outcome:?}");
        };
        let row_id: i64 = sqlx::query("SELECT id FROM orders WHERE ticket = ?")
            .bind(ticket.as_str())
            .fetch_one(&env.db)
            .await
            .unwrap()
            .get("id");
        assert_eq!(*order_id, row_id as u64, "{ticket}");
        let record = env.store.ticket(ticket).await.unwrap().unwrap();
        assert_eq!(record.order_id, Some(*order_id), "{ticket}: {record:?}");
    }
}

#[tokio::test]
async fn order_ids_follow_the_insert() {
    order_ids_match_mysql(false).await;
}

#[tokio::test]
async fn order_ids_read_back_by_ticket() {
    order_ids_match_mysql(true).await;
}

/// One confirm call of more tickets than one `ZREM` takes (the script removes them from the
/// pending set in chunks of 1,000), with a ticket listed twice: each is confirmed and counted
/// once, and none is left pending.
#[tokio::test]
async fn a_confirm_of_thousands_counts_each_ticket_once() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    const N: u64 = 2_100;
    let product = env.product(&gw, N as i64).await;
    let orders = claimed_orders(&env, product, 5001..=5000 + N).await;
    let mut confirm: Vec<_> = orders
        .iter()
        .enumerate()
        .map(|(i, m)| (&m.ticket, 1 + i as u64, None))
        .collect();
    confirm.push(confirm[7]);
    assert_eq!(env.store.confirm(product, &confirm).await.unwrap(), N);
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!(
        (counts.pending, counts.confirmed),
        (0, N as i64),
        "{counts:?}"
    );
    assert_eq!(counts.stock, Some(0), "{counts:?}");
    for (i, m) in orders.iter().enumerate().step_by(97) {
        let record = env.store.ticket(&m.ticket).await.unwrap().unwrap();
        assert_eq!(record.order_id, Some(1 + i as u64), "{record:?}");
    }
    // Confirming them again changes nothing.
    assert_eq!(env.store.confirm(product, &confirm).await.unwrap(), 0);
    let again = env.store.counts(product).await.unwrap();
    assert_eq!(again, counts);
}

/// A ticket's Redis record has no expiry while its order is in flight, however long that
/// takes, and expires `SECKILL_TICKET_TTL_SECS` after whatever settled it: a confirm (plus the
/// payment window for an order to be paid), a compensation, or a release.
#[tokio::test]
async fn a_record_expires_only_once_its_order_settles() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let ttl = env.store.ticket_ttl_secs() as i64;
    let mut conn = env.store.connection();
    let keys = env.store.keys(product);
    let orders = reserved_orders(&env, product, 7001..=7004).await;
    for m in &orders {
        assert_eq!(
            ttl_of(&mut conn, keys.ticket(&m.ticket)).await,
            -1,
            "pending {}",
            m.ticket
        );
    }
    let [paid, unpaid, failed, released] = &orders[..] else {
        unreachable!()
    };
    let claimed = env
        .store
        .claim(product, &[paid, unpaid, failed])
        .await
        .unwrap();
    assert_eq!(claimed, [ClaimStatus::Claimed; 3]);
    for m in [paid, unpaid, failed] {
        assert_eq!(
            ttl_of(&mut conn, keys.ticket(&m.ticket)).await,
            -1,
            "processing {}",
            m.ticket
        );
    }
    let pay_by = now_ms() + 600_000;
    let confirmed = [(&paid.ticket, 1, Some(pay_by)), (&unpaid.ticket, 2, None)];
    assert_eq!(env.store.confirm(product, &confirmed).await.unwrap(), 2);
    let near = |got: i64, want: i64| (want - 5..=want).contains(&got);
    let t = ttl_of(&mut conn, keys.ticket(&paid.ticket)).await;
    assert!(
        near(t, ttl + 601),
        "to be paid: {t} s against {}",
        ttl + 601
    );
    let t = ttl_of(&mut conn, keys.ticket(&unpaid.ticket)).await;
    assert!(near(t, ttl), "confirmed: {t} s against {ttl}");
    assert!(env
        .store
        .compensate(&failed.ticket, seckill_shared::FailureReason::Chaos)
        .await
        .unwrap());
    let t = ttl_of(&mut conn, keys.ticket(&failed.ticket)).await;
    assert!(near(t, ttl), "compensated: {t} s against {ttl}");
    let released_ticket = &released.ticket;
    assert!(env
        .store
        .release(
            released_ticket,
            released.user_id,
            seckill_shared::FailureReason::KafkaUnavailable,
            60_000
        )
        .await
        .unwrap());
    let t = ttl_of(&mut conn, keys.ticket(released_ticket)).await;
    assert!(near(t, ttl), "released: {t} s against {ttl}");
}

async fn ttl_of(conn: &mut seckill_shared::store::RedisConn, key: String) -> i64 {
    redis::cmd("TTL").arg(key).query_async(conn).await.unwrap()
}

/// A buyer whose home bucket is empty borrows a unit from another bucket: its record, which
/// had the `borrowing` record's expiry, has none once it is pending.
#[tokio::test]
async fn a_borrowed_ticket_keeps_no_expiry_while_in_flight() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = crate::buckets::bucketed_product(&env, &gw, 2, 2).await;
    let mut conn = env.store.connection();
    let users = crate::buckets::users_homed_in(0, 2, 1, 2);
    let mut tickets = Vec::new();
    for &u in &users {
        let (status, body) = gw.buy(product, u).await;
        assert_eq!(status, reqwest::StatusCode::ACCEPTED, "user {u}: {body}");
        tickets.push(ticket_of(&body));
    }
    let borrowed = &tickets[1];
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!(counts.buckets[0].borrowed, 1, "{counts:?}");
    let record = env.store.ticket(borrowed).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Pending, "{record:?}");
    for t in &tickets {
        let key = env.store.ticket_keys(t).ticket(t);
        assert_eq!(ttl_of(&mut conn, key).await, -1, "in flight: {t}");
    }
}

/// A confirm call that meets a damaged record (not a hash) fails before it confirms anything:
/// the other tickets stay `processing` and pending, so a retry without the damaged one
/// confirms them.
#[tokio::test]
async fn a_confirm_that_meets_a_damaged_record_changes_nothing() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let orders = claimed_orders(&env, product, 8001..=8004).await;
    let damaged = &orders[2].ticket;
    let mut conn = env.store.connection();
    let _: () = redis::cmd("SET")
        .arg(env.store.keys(product).ticket(damaged))
        .arg("damaged")
        .query_async(&mut conn)
        .await
        .unwrap();
    let all: Vec<_> = orders.iter().map(|m| (&m.ticket, 1, None)).collect();
    let err = env.store.confirm(product, &all).await.unwrap_err();
    assert!(format!("{err:#}").contains("WRONGTYPE"), "{err:#}");
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!((counts.pending, counts.confirmed), (4, 0), "{counts:?}");
    let rest: Vec<_> = all.into_iter().filter(|(t, ..)| *t != damaged).collect();
    for (t, ..) in &rest {
        let record = env.store.ticket(t).await.unwrap().unwrap();
        assert_eq!(record.state, RecordStatus::Processing, "{record:?}");
    }
    assert_eq!(env.store.confirm(product, &rest).await.unwrap(), 3);
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!((counts.pending, counts.confirmed), (1, 3), "{counts:?}");
}

/// Reserves one unit for each of `users` in `product`: the orders the gateway would publish.
async fn reserved_orders(
    env: &TestEnv,
    product: ProductId,
    users: impl IntoIterator<Item = u64>,
) -> Vec<OrderMessage> {
    let mut orders = Vec::new();
    for u in users {
        let user = UserId::new(u).unwrap();
        let at = now_ms();
        let (ticket, _) = env.store.reserve(product, user, at, false).await.unwrap();
        orders.push(OrderMessage::new(ticket, user, at));
    }
    orders
}

/// [`reserved_orders`], then claimed, as a worker does before writing them to MySQL.
async fn claimed_orders(
    env: &TestEnv,
    product: ProductId,
    users: impl IntoIterator<Item = u64>,
) -> Vec<OrderMessage> {
    let orders = reserved_orders(env, product, users).await;
    let claimed = env
        .store
        .claim(product, &orders.iter().collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(
        claimed.iter().all(|s| *s == ClaimStatus::Claimed),
        "{claimed:?}"
    );
    orders
}

/// A release (Kafka refused the order) of a product whose stock key is gone (Redis lost it, or
/// a bucket reconcile froze it) fails the ticket and frees its buyer, but does not recreate
/// the stock key: that would put the product back on sale before its rebuild, and hide the
/// loss from whoever looks for it.
#[tokio::test]
async fn a_release_does_not_recreate_a_lost_stock_key() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 3).await;
    let user = UserId::new(31).unwrap();
    let (ticket, _) = env
        .store
        .reserve(product, user, now_ms(), false)
        .await
        .unwrap();
    env.lose_redis_keys(&format!("{product}}}:stock")).await;
    assert!(env
        .store
        .release(
            &ticket,
            user,
            seckill_shared::FailureReason::KafkaUnavailable,
            60_000
        )
        .await
        .unwrap());
    assert_eq!(env.store.stock(product).await.unwrap(), None, "still lost");
    let record = env.store.ticket(&ticket).await.unwrap().unwrap();
    assert_eq!(record.state, RecordStatus::Failed);
    assert_eq!(env.store.buyer(product, user).await.unwrap(), None);
}

/// A preload of a product on sale, while a batch has committed in MySQL and not yet confirmed
/// in Redis: Redis ends with MySQL's stock. The preload used to read MySQL without the row
/// lock and subtract the ticket still pending in Redis from a stock that already counted it:
/// one unit was never sold again.
#[tokio::test]
async fn a_preload_between_a_commit_and_its_confirm_keeps_redis_exact() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let orders = reserved_orders(&env, product, 41..=41).await;
    let settler = Settler {
        store: env.store.clone(),
        db: env.db.clone(),
        chaos: Default::default(),
        ids: OrderIds::default(),
    };
    let claimed = settler.claim(&orders).await.unwrap();
    let decided = settler.persist(&claimed).await.unwrap();
    assert_eq!(env.mysql_stock(product).await, 4);
    let (status, body) = gw
        .admin_post(
            &format!("/admin/products/{product}/preload"),
            serde_json::Value::Null,
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    settler.finish(&claimed, &decided).await.unwrap();
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!((counts.stock, counts.pending), (Some(4), 0), "{counts:?}");
    assert_eq!(counts.confirmed, 1, "{counts:?}");
}
