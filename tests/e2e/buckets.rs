//! Stock buckets: a product's stock split over several Redis hash tags, a buyer's home bucket,
//! loans from other buckets, the sweeper's end of a borrow a gateway never finished, and a
//! rebuild after Redis lost one bucket.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::{home_bucket, ProductId, UserId};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// A product of `stock` units in `buckets` stock buckets, preloaded.
pub(crate) async fn bucketed_product(
    env: &TestEnv,
    gw: &TestGateway,
    stock: i64,
    buckets: u16,
) -> ProductId {
    let (status, body) = gw
        .admin_post(
            "/admin/products",
            json!({"name": "hot item", "stock": stock, "buckets": buckets}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = ProductId::new(body["id"].as_u64().unwrap()).unwrap();
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{id}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stock_redis"], stock, "{body}");
    let _ = env;
    id
}

/// The first `n` user ids (from `from`) whose home bucket is `bucket`.
pub(crate) fn users_homed_in(bucket: u16, buckets: u16, from: u64, n: usize) -> Vec<u64> {
    (from..)
        .filter(|u| home_bucket(UserId::new(*u).unwrap(), buckets) == bucket)
        .take(n)
        .collect()
}

async fn view(gw: &TestGateway, product: ProductId) -> Value {
    let (status, body) = gw.admin_get(&format!("/admin/products/{product}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Every bucket keeps `initial − lent + borrowed = stock + pending + confirmed`, and the
/// loans cancel out.
fn assert_balanced(v: &Value) {
    let buckets = v["buckets"].as_array().unwrap();
    let (mut lent, mut borrowed) = (0, 0);
    for b in buckets {
        let n = |f: &str| b[f].as_i64().unwrap_or_else(|| panic!("{f} in {b}"));
        assert_eq!(
            n("initial") - n("lent") + n("borrowed"),
            n("stock") + n("pending") + n("confirmed"),
            "{b}"
        );
        assert_eq!(n("borrowing"), 0, "{b}");
        lent += n("lent");
        borrowed += n("borrowed");
    }
    assert_eq!(lent, borrowed, "{v}");
}

#[tokio::test]
async fn buyers_of_an_empty_bucket_borrow_and_nothing_is_left_unsold() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = bucketed_product(&env, &gw, 8, 4).await;
    let v = view(&gw, product).await;
    let stocks: Vec<i64> = v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["stock"].as_i64().unwrap())
        .collect();
    assert_eq!(stocks, vec![2, 2, 2, 2], "{v}");

    // Eight buyers who all live in bucket 0: two buy there, six borrow from the others.
    let buyers = users_homed_in(0, 4, 1, 8);
    let mut tickets = vec![];
    for &u in &buyers {
        let (status, body) = gw.buy(product, u).await;
        assert_eq!(status, StatusCode::ACCEPTED, "user {u}: {body}");
        let t = ticket_of(&body);
        assert_eq!(t.bucket(), 0, "a ticket lives in its buyer's home bucket");
        tickets.push(t);
    }
    // A buyer who already holds a ticket gets it again, from its home bucket.
    let (status, body) = gw.buy(product, buyers[3]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ticket_of(&body), tickets[3]);
    // A buyer of bucket 2 finds every bucket empty: sold out, only now.
    let late = users_homed_in(2, 4, 1, 1)[0];
    let (status, body) = gw.buy(product, late).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");

    for t in &tickets {
        let body = gw.settled(t.as_str(), Duration::from_secs(20)).await;
        assert_eq!(body["status"], "confirmed", "{body}");
    }
    let v = view(&gw, product).await;
    assert_eq!(v["stock_redis"], 0, "{v}");
    assert_eq!(v["stock_db"], 0, "{v}");
    assert_eq!(v["confirmed"], 8, "{v}");
    let lent: i64 = v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["lent"].as_i64().unwrap())
        .sum();
    assert_eq!(lent, 6, "{v}");
    assert_balanced(&v);
    let rows: BTreeSet<i64> = env
        .order_rows(product)
        .await
        .into_iter()
        .map(|(_, u)| u)
        .collect();
    assert_eq!(rows.len(), 8);
}

/// Many buyers at once, most of them living in one bucket: exactly the stock is sold, once per
/// buyer (the crowded bucket's buyers borrow the others' units), and the buckets balance.
#[tokio::test]
async fn a_concurrent_crowd_buys_exactly_the_stock_across_buckets() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = bucketed_product(&env, &gw, 25, 4).await;
    // 7 + 6 + 6 + 6 units; 60 buyers of bucket 0 and 2 of each other bucket: without loans
    // only 7 + 2 + 2 + 2 = 13 units could sell.
    let mut crowd = users_homed_in(0, 4, 1, 60);
    for b in 1..4 {
        crowd.extend(users_homed_in(b, 4, 1, 2));
    }
    let answers = futures::future::join_all(crowd.into_iter().map(|u| {
        let gw = &gw;
        async move { (u, gw.buy(product, u).await) }
    }))
    .await;
    let mut accepted = vec![];
    for (u, (status, body)) in answers {
        match status {
            StatusCode::ACCEPTED => accepted.push((u, ticket_of(&body))),
            StatusCode::CONFLICT => {}
            other => panic!("user {u}: {other} {body}"),
        }
    }
    assert_eq!(accepted.len(), 25, "exactly the stock is promised");
    for (u, t) in &accepted {
        assert_eq!(t.bucket(), home_bucket(UserId::new(*u).unwrap(), 4));
        let body = gw.settled(t.as_str(), Duration::from_secs(20)).await;
        assert_eq!(body["status"], "confirmed", "{body}");
    }
    let v = view(&gw, product).await;
    assert_eq!(
        (v["stock_redis"].as_i64(), v["stock_db"].as_i64()),
        (Some(0), Some(0)),
        "{v}"
    );
    assert_balanced(&v);
}

/// A gateway died between taking a loan and finishing the borrow: the sweeper gives the unit
/// back to the bucket that lent it, frees the buyer, and the buyer can buy again.
#[tokio::test]
async fn the_sweeper_ends_a_borrow_its_gateway_never_finished() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    // Bucket 0 holds 2 units, bucket 1 one.
    let product = bucketed_product(&env, &gw, 3, 2).await;
    // Bucket 0 is emptied by its own buyers.
    let home0 = users_homed_in(0, 2, 1, 2);
    for &u in &home0 {
        assert_eq!(gw.buy(product, u).await.0, StatusCode::ACCEPTED);
    }
    // A third buyer of bucket 0 borrowed bucket 1's unit, and its gateway died before it
    // finished: the state the two scripts leave, written here by hand.
    let buyer = users_homed_in(0, 2, home0[1] + 1, 1)[0];
    let ticket = seckill_shared::Ticket::generate_in(product, 0);
    let (home, donor) = (
        env.store.bucket_keys(product, 0),
        env.store.bucket_keys(product, 1),
    );
    let long_ago = seckill_shared::now_ms() - 60_000;
    let mut c = env.store.connection();
    // One pipeline per bucket: on a Redis Cluster they live in different slots.
    let _: () = redis::pipe()
        .hset(home.buyers(), buyer, ticket.as_str())
        .zadd(home.borrowing(), ticket.as_str(), long_ago)
        .hset_multiple(
            home.ticket(&ticket),
            &[
                ("status", "borrowing".to_string()),
                ("user_id", buyer.to_string()),
                ("product_id", product.to_string()),
                ("created_at", long_ago.to_string()),
            ],
        )
        .query_async(&mut c)
        .await
        .unwrap();
    let _: () = redis::pipe()
        .decr(donor.stock(), 1)
        .hset(donor.loans(), ticket.as_str(), "taken")
        .hincr(donor.meta(), "lent", 1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(env.redis_stock(product).await, 0);
    // Meanwhile the buyer holds the ticket: a second buy gets it, pending.
    let (status, body) = gw.buy(product, buyer).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "pending");

    let _worker = env
        .worker_with(|s| {
            s.kafka.delivery_timeout_ms = 500;
            s.worker.pending_timeout_ms = 1000;
        })
        .await;
    let rec = eventually(
        "the sweeper to void the borrow",
        Duration::from_secs(20),
        || async {
            let r = env.store.ticket(&ticket).await.unwrap()?;
            (r.status == seckill_shared::TicketStatus::Failed).then_some(r)
        },
    )
    .await;
    assert_eq!(rec.reason.as_deref(), Some("expired"));
    let loan: Option<String> = redis::cmd("HGET")
        .arg(donor.loans())
        .arg(ticket.as_str())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(loan.as_deref(), Some("returned"));
    // The unit is back in bucket 1 and the buyer is free: this buy borrows it again.
    let (status, body) = gw.buy(product, buyer).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let again = ticket_of(&body);
    assert_ne!(again, ticket);
    assert_eq!(
        gw.settled(again.as_str(), Duration::from_secs(20)).await["status"],
        "confirmed"
    );
    let v = eventually("every unit confirmed", Duration::from_secs(20), || async {
        let v = view(&gw, product).await;
        (v["confirmed"] == 3).then_some(v)
    })
    .await;
    assert_eq!(
        (v["stock_redis"].as_i64(), v["stock_db"].as_i64()),
        (Some(0), Some(0)),
        "{v}"
    );
    assert_balanced(&v);
}

/// Redis lost one bucket mid-sale: the next buy sent there answers `503` while the whole
/// product is rebuilt from MySQL, and every promise is kept.
#[tokio::test]
async fn a_lost_bucket_is_rebuilt_with_the_rest_and_every_unit_sells_once() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let product = bucketed_product(&env, &gw, 12, 3).await;
    let mut accepted = vec![];
    for u in 1..=5u64 {
        let (status, body) = gw.buy(product, u).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        accepted.push(ticket_of(&body));
    }
    for t in &accepted {
        gw.settled(t.as_str(), Duration::from_secs(20)).await;
    }
    env.lose_redis_keys(&format!("{product}.1.*")).await;
    // Fresh buyers until the sale answers sold out; buys sent to the lost bucket get `503`
    // until the product is rebuilt.
    let mut saw_503 = false;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for user in 100u64.. {
        assert!(
            std::time::Instant::now() < deadline,
            "the sale never sold out"
        );
        let (status, body) = gw.buy(product, user).await;
        match status {
            StatusCode::ACCEPTED => accepted.push(ticket_of(&body)),
            StatusCode::SERVICE_UNAVAILABLE => {
                saw_503 = true;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            StatusCode::CONFLICT => break,
            other => panic!("{other} {body}"),
        }
    }
    assert!(
        saw_503,
        "a buy sent to the lost bucket waits for the rebuild"
    );
    assert_eq!(accepted.len(), 12, "every unit sold once");
    for t in &accepted {
        let body = gw.settled(t.as_str(), Duration::from_secs(20)).await;
        assert_eq!(body["status"], "confirmed", "{body}");
    }
    let v = view(&gw, product).await;
    assert_eq!(
        (v["stock_redis"].as_i64(), v["stock_db"].as_i64()),
        (Some(0), Some(0)),
        "{v}"
    );
    assert_eq!(v["confirmed"], 12, "{v}");
    assert_balanced(&v);
}

#[tokio::test]
async fn bucket_counts_out_of_range_or_with_a_waiting_room_are_refused() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    for (body, says) in [
        (
            json!({"name": "x", "stock": 1, "buckets": 0}),
            "buckets must be between 1 and 64",
        ),
        (
            json!({"name": "x", "stock": 1, "buckets": 65}),
            "buckets must be between 1 and 64",
        ),
        (
            json!({"name": "x", "stock": 1, "buckets": 2, "waiting_room": {}}),
            "waiting room",
        ),
    ] {
        let (status, answer) = gw.admin_post("/admin/products", body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap_or_default()
                .contains(says)
                || answer.to_string().contains(says),
            "{answer}"
        );
    }
    // A ticket naming a bucket its product does not have is unknown, like any forged one.
    let product = env.product(&gw, 1).await;
    let forged = format!("{product}-0123456789abcdef0123456789abcdef-63");
    let (status, body) = gw.get_as(&format!("/v1/orders/{forged}"), Some(7)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}
