//! More than one unit per order (issue 38): a buy takes its `quantity` whole or not at all,
//! within the product's `max_per_buyer`; every store counts units; a failed, cancelled or
//! expired order gives every unit back once; an order borrows across stock buckets.

use crate::helpers::*;
use crate::payments::sale::Sale;
use reqwest::StatusCode;
use seckill_shared::ProductId;
use serde_json::{json, Value};
use sqlx::Row;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(30);

/// Creates and preloads a product from `body`.
async fn product(gw: &TestGateway, body: Value) -> ProductId {
    let (status, created) = gw.admin_post("/admin/products", body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = ProductId::new(created["id"].as_u64().unwrap()).unwrap();
    let (status, loaded) = gw
        .admin_post(&format!("/admin/products/{id}/preload"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{loaded}");
    id
}

/// `user` buys `body` (their `user_id` added).
async fn buy(gw: &TestGateway, product: ProductId, user: u64, body: Value) -> (StatusCode, Value) {
    let mut body = body;
    body["user_id"] = user.into();
    let res = gw
        .http
        .post(format!("{}/v1/seckill/{product}", gw.base))
        .bearer_auth(token(user))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.expect("a buy answers JSON");
    if let Some(t) = body["ticket"].as_str() {
        gw.owns(t, user);
    }
    (status, body)
}

/// `user` buys `q` units and the order is confirmed; its settled ticket.
async fn confirmed(gw: &TestGateway, product: ProductId, user: u64, q: u64) -> Value {
    let (status, body) = buy(gw, product, user, json!({ "quantity": q })).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body["quantity"], q, "{body}");
    let settled = gw.settled(body["ticket"].as_str().unwrap(), SETTLE).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(settled["quantity"], q, "{settled}");
    settled
}

/// (ticket, user, quantity, status) of every order row of a product.
async fn order_rows(env: &TestEnv, product: ProductId) -> Vec<(String, i64, i64, String)> {
    sqlx::query(
        "SELECT ticket, user_id, CAST(quantity AS SIGNED) AS q, status FROM orders WHERE product_id = ? ORDER BY id",
    )
    .bind(product.as_i64())
    .fetch_all(&env.db)
    .await
    .unwrap()
    .into_iter()
    .map(|r| (r.get("ticket"), r.get("user_id"), r.get("q"), r.get("status")))
    .collect()
}

/// The admin view's (stock_db, stock_redis, pending, confirmed).
async fn counts(gw: &TestGateway, product: ProductId) -> (i64, i64, i64, i64) {
    let (status, v) = gw.admin_get(&format!("/admin/products/{product}")).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    (
        v["stock_db"].as_i64().unwrap(),
        v["stock_redis"].as_i64().unwrap(),
        v["pending"].as_i64().unwrap(),
        v["confirmed"].as_i64().unwrap(),
    )
}

#[tokio::test]
async fn an_order_takes_all_its_units_or_none_and_every_store_counts_units() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let p = product(
        &gw,
        json!({"name": "four each", "stock": 10, "max_per_buyer": 4}),
    )
    .await;
    let (_, view) = gw.admin_get(&format!("/admin/products/{p}")).await;
    assert_eq!(view["max_per_buyer"], 4, "{view}");
    let (_, sale) = gw.get_json(&format!("/v1/seckill/{p}")).await;
    assert_eq!(sale["max_per_buyer"], 4, "{sale}");

    let first = confirmed(&gw, p, 1, 3).await;
    assert_eq!(counts(&gw, p).await, (7, 7, 0, 3));
    // Buying again answers the order held, whatever quantity is asked.
    let (status, again) = buy(&gw, p, 1, json!({"quantity": 1})).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        (&again["ticket"], &again["quantity"]),
        (&first["ticket"], &json!(3))
    );
    confirmed(&gw, p, 2, 4).await;
    // Three left: four are refused whole, with the number left, and nothing is held.
    let (status, body) = buy(&gw, p, 3, json!({"quantity": 4})).await;
    assert_eq!(
        (status, body["error"].as_str(), body["left"].as_i64()),
        (StatusCode::CONFLICT, Some("not_enough_stock"), Some(3)),
        "{body}"
    );
    assert_eq!(counts(&gw, p).await, (3, 3, 0, 7));
    // No sold-out marker: a smaller order of the same buyer goes through at once.
    let third = confirmed(&gw, p, 3, 3).await;
    let (status, body) = buy(&gw, p, 4, json!({})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("sold_out")),
        "{body}"
    );
    assert_eq!(counts(&gw, p).await, (0, 0, 0, 10));
    let rows = order_rows(&env, p).await;
    let units: Vec<(i64, i64)> = rows.iter().map(|r| (r.1, r.2)).collect();
    assert_eq!(units, [(1, 3), (2, 4), (3, 3)]);
    assert_eq!(rows[2].0, third["ticket"].as_str().unwrap());
}

#[tokio::test]
async fn a_quantity_over_the_limit_or_out_of_range_is_refused_and_holds_nothing() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let two = product(&gw, json!({"name": "two", "stock": 5, "max_per_buyer": 2})).await;
    let (status, body) = buy(&gw, two, 1, json!({"quantity": 3})).await;
    assert_eq!(
        (
            status,
            body["error"].as_str(),
            body["max_per_buyer"].as_i64()
        ),
        (StatusCode::CONFLICT, Some("quantity_over_limit"), Some(2)),
        "{body}"
    );
    for bad in [
        json!(0),
        json!(101),
        json!(-1),
        json!(1.5),
        json!("2"),
        json!(null),
    ] {
        let (status, body) = buy(&gw, two, 1, json!({ "quantity": bad })).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("bad_request")),
            "quantity {bad}: {body}"
        );
    }
    assert_eq!(env.redis_stock(two).await, 5, "no refused buy took a unit");
    // Without a quantity: one unit.
    let (status, body) = buy(&gw, two, 1, json!({})).await;
    assert_eq!(
        (status, &body["quantity"]),
        (StatusCode::ACCEPTED, &json!(1)),
        "{body}"
    );
    // A product created without a limit sells one unit per buyer, as before.
    let one = env.product(&gw, 5).await;
    let (status, body) = buy(&gw, one, 2, json!({"quantity": 2})).await;
    assert_eq!(
        (status, body["max_per_buyer"].as_i64()),
        (StatusCode::CONFLICT, Some(1)),
        "{body}"
    );
    assert_eq!(env.redis_stock(one).await, 5);
    for bad in [0, 101] {
        let (status, body) = gw
            .admin_post(
                "/admin/products",
                json!({"name": "x", "stock": 1, "max_per_buyer": bad}),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
}

#[tokio::test]
async fn a_failed_order_gives_every_unit_back_once() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker_with(|s| s.chaos.fail_users = "1".into()).await;
    let p = product(&gw, json!({"name": "x", "stock": 6, "max_per_buyer": 4})).await;
    let (status, body) = buy(&gw, p, 1, json!({"quantity": 4})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let failed = gw.settled(body["ticket"].as_str().unwrap(), SETTLE).await;
    assert_eq!(
        (failed["status"].as_str(), failed["quantity"].as_i64()),
        (Some("failed"), Some(4)),
        "{failed}"
    );
    assert_eq!(counts(&gw, p).await, (6, 6, 0, 0));
    let (_, view) = gw.admin_get(&format!("/admin/products/{p}")).await;
    assert_eq!(view["failed"], 4, "failed counts units: {view}");
    let q: i64 =
        sqlx::query_scalar("SELECT CAST(quantity AS SIGNED) FROM failed_tickets WHERE ticket = ?")
            .bind(body["ticket"].as_str().unwrap())
            .fetch_one(&env.db)
            .await
            .unwrap();
    assert_eq!(q, 4);
    // All six go to others.
    confirmed(&gw, p, 2, 4).await;
    confirmed(&gw, p, 3, 2).await;
    assert_eq!(counts(&gw, p).await, (0, 0, 0, 6));
}

/// A priced product with a window, sold up to `max` units per buyer.
async fn priced(sale: &Sale, stock: i64, max: i64, window_secs: i64) -> ProductId {
    product(
        &sale.gw,
        json!({"name": "paid", "stock": stock, "price": 1999, "currency": "EUR",
               "payment_window_secs": window_secs, "max_per_buyer": max}),
    )
    .await
}

#[tokio::test]
async fn a_cancelled_order_gives_back_every_unit_once_and_a_payment_charges_every_unit() {
    let sale = Sale::new().await;
    let p = priced(&sale, 5, 3, 60).await;
    let mine = confirmed(&sale.gw, p, 13, 3).await;
    let ticket = mine["ticket"].as_str().unwrap();
    let theirs = confirmed(&sale.gw, p, 14, 2).await;
    assert_eq!(sale.stocks(p).await, (0, 0));

    let (status, paying) = sale.pay(theirs["ticket"].as_str().unwrap(), 14, "k").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paying}");
    let charges = sale.provider.charges();
    assert_eq!(charges.last().unwrap().amount, 2 * 1999, "price × quantity");

    let (status, body) = sale.cancel(ticket, 13).await;
    assert_eq!(
        (status, body["status"].as_str(), body["quantity"].as_i64()),
        (StatusCode::OK, Some("cancelled"), Some(3)),
        "{body}"
    );
    assert_eq!(sale.stocks(p).await, (3, 3), "all three back at once");
    let (status, _) = sale.cancel(ticket, 13).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sale.stocks(p).await, (3, 3), "and only once");
    let (_, view) = sale.gw.admin_get(&format!("/admin/products/{p}")).await;
    assert_eq!(
        (view["confirmed"].as_i64(), view["cancelled"].as_i64()),
        (Some(2), Some(3)),
        "{view}"
    );
    // The units sell again, whole.
    confirmed(&sale.gw, p, 15, 3).await;
    assert_eq!(sale.stocks(p).await, (0, 0));
}

#[tokio::test]
async fn an_expired_order_gives_back_every_unit_once() {
    let sale = Sale::new().await;
    let p = priced(&sale, 4, 4, 1).await;
    let order = confirmed(&sale.gw, p, 21, 4).await;
    let ticket = order["ticket"].as_str().unwrap();
    let cancelled = sale.cancelled(ticket, 21).await;
    assert_eq!(
        (cancelled["reason"].as_str(), cancelled["quantity"].as_i64()),
        (Some("payment_timeout"), Some(4)),
        "{cancelled}"
    );
    eventually("the units back in both stores", SETTLE, || async {
        (sale.stocks(p).await == (4, 4)).then_some(())
    })
    .await;
    confirmed(&sale.gw, p, 22, 4).await;
    assert_eq!(sale.stocks(p).await, (0, 0));
}

#[tokio::test]
async fn a_rebuild_counts_the_units_of_every_order() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let p = product(&gw, json!({"name": "x", "stock": 10, "max_per_buyer": 3})).await;
    confirmed(&gw, p, 1, 3).await;
    confirmed(&gw, p, 2, 2).await;
    env.lose_redis_keys(&format!("{p}}}*")).await;
    let (status, body) = gw
        .admin_post(&format!("/admin/products/{p}/reconcile"), Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(counts(&gw, p).await, (5, 5, 0, 5));
    // The limit came back with the rebuild, and so did the buyers.
    let (status, body) = buy(&gw, p, 3, json!({"quantity": 4})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("quantity_over_limit")),
        "{body}"
    );
    let (status, _) = buy(&gw, p, 1, json!({"quantity": 3})).await;
    assert_eq!(status, StatusCode::OK, "the buyer still holds their order");
    confirmed(&gw, p, 3, 3).await;
    confirmed(&gw, p, 4, 2).await;
    assert_eq!(counts(&gw, p).await, (0, 0, 0, 10));
}

/// Each bucket keeps `initial − lent + borrowed = stock + pending + confirmed`, and the loans
/// cancel out over the product.
fn assert_buckets_balance(view: &Value) {
    let buckets = view["buckets"].as_array().expect("buckets");
    let (mut lent, mut borrowed) = (0, 0);
    for b in buckets {
        let n = |f: &str| b[f].as_i64().unwrap_or_else(|| panic!("{f} in {b}"));
        assert_eq!(
            n("initial") - n("lent") + n("borrowed"),
            n("stock") + n("pending") + n("confirmed"),
            "{b}"
        );
        lent += n("lent");
        borrowed += n("borrowed");
    }
    assert_eq!(lent, borrowed, "{view}");
}

#[tokio::test]
async fn an_order_borrows_its_units_across_buckets_or_gives_them_all_back() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    // Two units in each of four buckets: no bucket alone holds an order of four.
    let p = product(
        &gw,
        json!({"name": "x", "stock": 8, "buckets": 4, "max_per_buyer": 4}),
    )
    .await;
    confirmed(&gw, p, 1, 4).await;
    let (_, view) = gw.admin_get(&format!("/admin/products/{p}")).await;
    assert_buckets_balance(&view);
    assert_eq!(counts(&gw, p).await, (4, 4, 0, 4));
    confirmed(&gw, p, 2, 1).await;
    // Three left, spread: an order of four gathers them and gives them all back.
    let (status, body) = buy(&gw, p, 3, json!({"quantity": 4})).await;
    assert_eq!(
        (status, body["error"].as_str(), body["left"].as_i64()),
        (StatusCode::CONFLICT, Some("not_enough_stock"), Some(3)),
        "{body}"
    );
    assert_eq!(counts(&gw, p).await, (3, 3, 0, 5));
    let (_, view) = gw.admin_get(&format!("/admin/products/{p}")).await;
    assert_buckets_balance(&view);
    // The same buyer takes the three.
    confirmed(&gw, p, 3, 3).await;
    assert_eq!(counts(&gw, p).await, (0, 0, 0, 8));
    let (_, view) = gw.admin_get(&format!("/admin/products/{p}")).await;
    assert_buckets_balance(&view);
    let units: i64 = order_rows(&env, p).await.iter().map(|r| r.2).sum();
    assert_eq!(units, 8);
}

/// A waiting room of a product sold up to 3 per buyer: the admitted who have not bought stay
/// within `ceil(factor × units left / 3)`, each admitted buyer buys 1 to 3 units (fewer when
/// told `not_enough_stock`), and every unit is sold.
#[tokio::test]
async fn a_waiting_room_admits_by_the_units_its_buyers_may_take() {
    use crate::waiting_room::{join, rfc3339};
    use futures::StreamExt;
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    const STOCK: i64 = 12;
    const BUYERS: u64 = 30;
    let p = product(
        &gw,
        json!({"name": "x", "stock": STOCK, "max_per_buyer": 3,
               "starts_at": rfc3339(seckill_shared::now_ms() + 2000),
               "waiting_room": {"admit_per_sec": 40, "max_admitted_factor": 1}}),
    )
    .await;
    let mut entries = vec![];
    for user in 1..=BUYERS {
        let (status, body) = join(&gw, p, user).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        entries.push((user, body["queue_id"].as_str().unwrap().to_owned()));
    }
    let sampler = {
        let store = env.store.clone();
        tokio::spawn(async move {
            let mut samples = 0;
            loop {
                let (admitted, stock) = store.admitted_and_stock(p).await.unwrap();
                let cap = (stock.max(0) as f64 / 3.0).ceil() as u64;
                assert!(
                    admitted <= cap,
                    "{admitted} admitted with {stock} units left"
                );
                samples += 1;
                if stock == 0 && admitted == 0 && samples > 10 {
                    return samples;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let gw = &gw;
    let bought: Vec<u64> = futures::stream::iter(entries)
        .map(|(user, id)| async move {
            let mut want = 1 + user % 3;
            loop {
                let (status, body) = gw
                    .get_as(&format!("/v1/seckill/{p}/queue/{id}"), Some(user))
                    .await;
                if status == StatusCode::TOO_MANY_REQUESTS {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    continue;
                }
                assert_eq!(status, StatusCode::OK, "{body}");
                match body["state"].as_str().unwrap() {
                    "admitted" => {
                        let res = gw
                            .http
                            .post(format!("{}/v1/seckill/{p}", gw.base))
                            .bearer_auth(token(user))
                            .header(
                                "Seckill-Admission",
                                body["admission_token"].as_str().unwrap(),
                            )
                            .json(&json!({ "quantity": want }))
                            .send()
                            .await
                            .unwrap();
                        let status = res.status();
                        let b: Value = res.json().await.unwrap();
                        match (status, b["error"].as_str()) {
                            (StatusCode::ACCEPTED, _) => return want,
                            (StatusCode::CONFLICT, Some("not_enough_stock")) => {
                                want = b["left"].as_u64().unwrap();
                            }
                            // Taken back to the head of the line to keep the cap, or sold out.
                            (StatusCode::FORBIDDEN | StatusCode::CONFLICT, _) => {}
                            _ => panic!("{status} {b}"),
                        }
                    }
                    "sold_out" => return 0,
                    "waiting" => tokio::time::sleep(Duration::from_millis(100)).await,
                    other => panic!("unexpected state {other}: {body}"),
                }
            }
        })
        .buffer_unordered(BUYERS as usize)
        .collect()
        .await;
    assert_eq!(bought.iter().sum::<u64>(), STOCK as u64, "{bought:?}");
    assert!(sampler.await.unwrap() > 10);
    eventually("every order confirmed", SETTLE, || async {
        (counts(gw, p).await == (0, 0, 0, STOCK)).then_some(())
    })
    .await;
    let units: i64 = order_rows(&env, p).await.iter().map(|r| r.2).sum();
    assert_eq!(units, STOCK);
}

/// A product whose Redis `meta` alone is gone (its window, limit and counters) sells nothing by
/// guess: the buy gets `503`, the product is rebuilt, and its limit holds again.
#[tokio::test]
async fn a_stock_without_its_meta_is_rebuilt_before_it_sells() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let p = product(&gw, json!({"name": "x", "stock": 20, "max_per_buyer": 5})).await;
    confirmed(&gw, p, 1, 4).await;
    let mut conn = env.store.connection();
    let _: () = redis::cmd("DEL")
        .arg(env.store.keys(p).meta())
        .query_async(&mut conn)
        .await
        .unwrap();
    let (status, body) = buy(&gw, p, 2, json!({"quantity": 2})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let third = eventually("the product rebuilt", SETTLE, || async {
        let (status, body) = buy(&gw, p, 3, json!({"quantity": 5})).await;
        (status == StatusCode::ACCEPTED).then_some(body)
    })
    .await;
    assert_eq!(third["quantity"], 5, "{third}");
    let (status, body) = buy(&gw, p, 4, json!({"quantity": 6})).await;
    assert_eq!(
        (status, body["max_per_buyer"].as_i64()),
        (StatusCode::CONFLICT, Some(5)),
        "{body}"
    );
    eventually("every order confirmed", SETTLE, || async {
        (counts(&gw, p).await == (11, 11, 0, 9)).then_some(())
    })
    .await;
}

/// A quantity out of range is the body's fault: `400`, even while the product is sold out.
#[tokio::test]
async fn a_quantity_out_of_range_is_refused_as_bad_input_when_sold_out_too() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let _worker = env.worker().await;
    let p = product(&gw, json!({"name": "x", "stock": 2, "max_per_buyer": 2})).await;
    confirmed(&gw, p, 1, 2).await;
    let (status, body) = buy(&gw, p, 2, json!({})).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("sold_out")),
        "{body}"
    );
    for bad in [0, 101] {
        let (status, body) = buy(&gw, p, 3, json!({ "quantity": bad })).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (StatusCode::BAD_REQUEST, Some("bad_request")),
            "{body}"
        );
    }
}
