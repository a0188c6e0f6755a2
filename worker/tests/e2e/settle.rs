//! The settle step, driven directly: order ids reach Redis right, whichever way MySQL hands
//! them out.

use crate::helpers::*;
use seckill_shared::settle::{OrderIds, Outcome, Settler};
use seckill_shared::{now_ms, OrderMessage, UserId};
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
