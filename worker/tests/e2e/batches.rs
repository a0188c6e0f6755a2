//! Reservations batched per stock bucket (`store/batch.rs`): buys that arrive together share
//! one Redis call, and each still gets the answer it would have got alone.

use crate::helpers::*;
use futures::future::join_all;
use redis::AsyncCommands;
use reqwest::StatusCode;
use seckill_shared::store::{Reservation, UserLimit};
use seckill_shared::{now_ms, UserId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// 201 buyers at once, 21 of them twice (one twice in the first call), for 50 units, on one
/// connection: the calls go in batches (the first holds the most a batch takes), and the
/// promises hold: 50 reservations to 50 distinct buyers, a buyer's second buy finds its first
/// ticket, even in the same call, the rest are sold out, and Redis's stock, buyers and pending
/// set agree with the answers.
#[tokio::test]
async fn buys_that_arrive_together_share_a_call_and_keep_every_promise() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 50).await;
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let seen = sizes.clone();
    let store = env
        .store
        .clone()
        .with_batch_observer(Arc::new(move |n| seen.lock().unwrap().push(n)));
    let users: Vec<u64> = [500, 500]
        .into_iter()
        .chain(1..=200)
        .chain(1..=20)
        .collect();
    let answers = join_all(users.iter().map(|u| {
        let store = store.clone();
        async move {
            let user = UserId::new(*u).unwrap();
            (
                *u,
                store.reserve(product, user, now_ms(), false).await.unwrap(),
            )
        }
    }))
    .await;

    let sizes = sizes.lock().unwrap().clone();
    assert_eq!(sizes.iter().sum::<usize>(), users.len(), "{sizes:?}");
    assert_eq!(sizes[0], 32, "the first batch takes all it may: {sizes:?}");
    assert!(sizes.iter().all(|n| (1..=32).contains(n)), "{sizes:?}");

    let mut reserved: HashMap<u64, String> = HashMap::new();
    let (mut sold_out, mut again) = (0, 0);
    for (u, (ticket, r)) in &answers {
        match r {
            Reservation::Reserved => {
                let first = reserved.insert(*u, ticket.to_string());
                assert!(first.is_none(), "user {u} reserved twice");
            }
            Reservation::SoldOut => sold_out += 1,
            Reservation::AlreadyHolds(held) => {
                again += 1;
                assert_eq!(reserved.get(u), Some(&held.to_string()), "user {u}");
            }
            other => panic!("user {u}: {other:?}"),
        }
    }
    assert_eq!(reserved.len(), 50);
    // User 500 and users 1..=20 come first, so each of them reserved and then found its
    // ticket.
    assert_eq!(again, 21);
    assert_eq!(sold_out, users.len() - 71);

    let k = env.store.keys(product);
    let mut c = env.store.connection();
    let stock: i64 = c.get(k.stock()).await.unwrap();
    let buyers: HashMap<String, String> = c.hgetall(k.buyers()).await.unwrap();
    let pending: usize = c.zcard(k.pending()).await.unwrap();
    assert_eq!(stock, 0);
    assert_eq!(pending, 50);
    let told: HashMap<String, String> = reserved
        .iter()
        .map(|(u, t)| (u.to_string(), t.clone()))
        .collect();
    assert_eq!(
        buyers, told,
        "Redis's buyers are the buyers told they hold a unit"
    );

    // The gateway counts the buyers it sent, per call.
    for u in 1000..1003 {
        assert_eq!(gw.buy(product, u).await.0, StatusCode::CONFLICT);
    }
    assert!(gw.metric("seckill_gateway_reserve_batch_size_sum").await >= 1.0);
}

/// A buyer whose reservation fails inside Redis (here its rate-limit key holds a hash, so the
/// limiter's `GET` errors) gets that error, alone: the others in its call still reserve.
#[tokio::test]
async fn one_buyers_error_leaves_the_rest_of_its_batch_alone() {
    let env = TestEnv::new().await;
    if !env.store.connection().is_single_server() {
        eprintln!("skipped: the limit rides in the reservation only on one Redis server");
        return;
    }
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let ns = &env.settings.namespace;
    let limit = |u: u64| UserLimit {
        key: format!("sk:{{{ns}:rl:{u}}}:b"),
        rate: 5.0,
        burst: 10,
    };
    let mut c = env.store.connection();
    let _: () = c.hset(limit(3).key, "f", "v").await.unwrap();
    let limits: Vec<UserLimit> = (1..=5).map(limit).collect();
    let answers = join_all(limits.iter().enumerate().map(|(i, l)| {
        let store = env.store.clone();
        async move {
            let user = UserId::new(i as u64 + 1).unwrap();
            store
                .reserve_limited(product, user, now_ms(), false, Some(l))
                .await
        }
    }))
    .await;
    for (i, a) in answers.iter().enumerate() {
        if i + 1 == 3 {
            let e = format!("{:#}", a.as_ref().unwrap_err());
            assert!(e.contains("WRONGTYPE"), "{e}");
        } else {
            assert_eq!(
                a.as_ref().unwrap().1,
                Reservation::Reserved,
                "user {}",
                i + 1
            );
        }
    }
    assert_eq!(env.redis_stock(product).await, 6);
}
