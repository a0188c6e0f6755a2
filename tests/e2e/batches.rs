//! Reservations batched per stock bucket (`store/batch.rs`): buys that arrive together share
//! one Redis call, and each still gets the answer it would have got alone.

use crate::helpers::*;
use futures::future::join_all;
use redis::AsyncCommands;
use reqwest::StatusCode;
use seckill_gateway::rate_limit::RateLimiter;
use seckill_shared::locations::Located;
use seckill_shared::reservation::{Reservation, UserLimit};
use seckill_shared::{now_ms, Ticket, UserId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// A call of `reserve.lua` takes one limit's numbers for all its buyers, so buys that arrive
/// together with other numbers go in calls of their own, and each gets the answer it would
/// have got alone: a limit Redis refuses (a negative refill rate) fails its buyer alone, a
/// stricter limit still holds its buyer to it, and a buy without a limit goes with any call.
#[tokio::test]
async fn buyers_with_other_limits_get_their_own_answers() {
    let env = TestEnv::new().await;
    if !env.store.connection().is_single_server() {
        eprintln!("skipped: the limit rides in the reservation only on one Redis server");
        return;
    }
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let ns = &env.settings.common.namespace;
    let limit = |u: u64, rate: f64, burst: u64| UserLimit {
        key: RateLimiter::key(ns, UserId::new(u).unwrap()),
        rate,
        burst,
    };
    // In arrival order: user 6 twice, with one token and next to no refill.
    let buys: Vec<(u64, Option<UserLimit>)> = vec![
        (1, Some(limit(1, 5.0, 10))),
        (2, Some(limit(2, 5.0, 10))),
        (3, Some(limit(3, -5.0, 10))),
        (4, Some(limit(4, 5.0, 10))),
        (5, Some(limit(5, 5.0, 10))),
        (6, Some(limit(6, 0.001, 1))),
        (6, Some(limit(6, 0.001, 1))),
        (7, None),
    ];
    let answers = join_all(buys.iter().map(|(u, l)| {
        let store = env.store.clone();
        async move {
            let user = UserId::new(*u).unwrap();
            store
                .reserve_limited(product, user, now_ms(), false, l.as_ref())
                .await
        }
    }))
    .await;
    for (i, a) in answers.iter().enumerate() {
        let u = buys[i].0;
        match i {
            2 => {
                let e = format!("{:#}", a.as_ref().unwrap_err());
                assert!(e.contains("a rate limit needs rate > 0"), "{e}");
            }
            6 => assert!(
                matches!(a.as_ref().unwrap().1, Reservation::RateLimited { .. }),
                "user 6's second buy finds its one token spent: {a:?}"
            ),
            _ => assert_eq!(a.as_ref().unwrap().1, Reservation::Reserved, "user {u}"),
        }
    }
    assert_eq!(env.redis_stock(product).await, 4);
}

/// The Kafka locations of accepted orders ride their bucket's next reservation call: one that
/// waits with a buyer is recorded by the time that buyer has its answer, and one that waits
/// alone goes in a call of its own once no buyer came to carry it. A damaged record beside it
/// costs the buyers of its call nothing, and a location never creates a record.
#[tokio::test]
async fn kafka_locations_ride_the_next_reservation() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let store = env.store.clone();
    let user = |u: u64| UserId::new(u).unwrap();
    let location = |t: &Ticket| {
        let store = store.clone();
        let t = t.clone();
        async move { store.location(&t).await.unwrap() }
    };

    let (first, r) = store
        .reserve(product, user(1), now_ms(), false)
        .await
        .unwrap();
    assert_eq!(r, Reservation::Reserved);
    // With a buyer: recorded in the buyer's call.
    store.locate_soon(located(&first, 3, 41));
    let (second, r) = store
        .reserve(product, user(2), now_ms(), false)
        .await
        .unwrap();
    assert_eq!(r, Reservation::Reserved);
    assert_eq!(location(&first).await, Some((3, 41)));

    // A damaged record beside a good one, with a buyer: the buyer still reserves.
    let damaged = Ticket::generate(product);
    let mut c = env.store.connection();
    let _: () = c
        .set(env.store.keys(product).ticket(&damaged), "not a hash")
        .await
        .unwrap();
    store.locate_soon(located(&damaged, 0, 1));
    store.locate_soon(located(&second, 0, 7));
    let (_, r) = store
        .reserve(product, user(3), now_ms(), false)
        .await
        .unwrap();
    assert_eq!(r, Reservation::Reserved);
    assert_eq!(location(&second).await, Some((0, 7)));

    // Alone: in a call of its own, soon.
    let (third, _) = store
        .reserve(product, user(4), now_ms(), false)
        .await
        .unwrap();
    store.locate_soon(located(&third, 1, 9));
    eventually("the lone location", Duration::from_secs(10), || async {
        (location(&third).await == Some((1, 9))).then_some(())
    })
    .await;
    // An order whose record is gone (expired, or lost with Redis) gets none back.
    let gone = Ticket::generate(product);
    store.locate_soon(located(&gone, 1, 10));
    let _ = store
        .reserve(product, user(5), now_ms(), false)
        .await
        .unwrap();
    let exists: bool = c
        .exists(env.store.keys(product).ticket(&gone))
        .await
        .unwrap();
    assert!(!exists, "a gone record is not recreated");
    assert_eq!(env.redis_stock(product).await, 5);
}

/// A bucket's `located` list loses an entry from its head once every order in it was
/// reserved before the oldest ticket in flight, and never one that may hold an order in
/// flight, nor any entry after it: the sweeper reads a pending order's location to know
/// whether its buyer had a `202`.
#[tokio::test]
async fn kafka_locations_are_trimmed_once_their_orders_settle() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let store = env.store.clone();
    let start = now_ms();
    let mut tickets = vec![];
    for u in 1..=3 {
        // One ms apart: each ticket's score in the pending set is its reservation time.
        let (t, r) = store
            .reserve(product, UserId::new(u).unwrap(), start + u as i64, false)
            .await
            .unwrap();
        assert_eq!(r, Reservation::Reserved);
        tickets.push(t);
    }
    let [first, second, third] = [&tickets[0], &tickets[1], &tickets[2]];
    let at = |t: &Ticket, u: i64, partition, offset| Located {
        ticket: t.clone(),
        reserved_at_ms: start + u,
        partition,
        offset,
    };
    let both = [at(first, 1, 0, 1), at(second, 2, 0, 2)];
    assert_eq!(store.locate(product, &both).await.unwrap(), 2);
    store.locate(product, &[at(third, 3, 1, 3)]).await.unwrap();
    let entries = || async {
        let mut c = env.store.connection();
        let n: usize = c.llen(env.store.keys(product).located()).await.unwrap();
        n
    };
    assert_eq!(entries().await, 2);

    assert_eq!(store.trim_located(product, 100).await.unwrap(), 0);
    // The head entry still has `first` in flight: nothing goes, not even `second`'s part.
    assert_eq!(
        store
            .expire_pending(second, seckill_shared::FailureReason::Expired, i64::MAX)
            .await
            .unwrap(),
        Some(true)
    );
    assert_eq!(store.trim_located(product, 100).await.unwrap(), 0);
    assert_eq!(store.location(first).await.unwrap(), Some((0, 1)));
    // Both settled: the head entry goes; the next holds `third`, in flight, and stays.
    assert_eq!(
        store
            .expire_pending(first, seckill_shared::FailureReason::Expired, i64::MAX)
            .await
            .unwrap(),
        Some(true)
    );
    assert_eq!(store.trim_located(product, 100).await.unwrap(), 1);
    assert_eq!(entries().await, 1);
    assert_eq!(store.location(first).await.unwrap(), None);
    assert_eq!(store.location(third).await.unwrap(), Some((1, 3)));
    assert_eq!(
        store
            .expire_pending(third, seckill_shared::FailureReason::Expired, i64::MAX)
            .await
            .unwrap(),
        Some(true)
    );
    assert_eq!(store.trim_located(product, 100).await.unwrap(), 1);
    assert_eq!(entries().await, 0);
}

/// A buyer twice in one call spends its rate-limit bucket once per buy: the call reads the
/// buckets once (MGET), and the second buy sees what the first left.
#[tokio::test]
async fn a_buyer_twice_in_one_call_pays_its_bucket_twice() {
    let env = TestEnv::new().await;
    if !env.store.connection().is_single_server() {
        eprintln!("skipped: the limit rides in the reservation only on one Redis server");
        return;
    }
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let limit = UserLimit {
        key: RateLimiter::key(&env.settings.common.namespace, UserId::new(9).unwrap()),
        rate: 0.001,
        burst: 1,
    };
    let user = UserId::new(9).unwrap();
    let store = env.store.clone();
    let (a, b) = futures::join!(
        store.reserve_limited(product, user, now_ms(), false, Some(&limit)),
        store.reserve_limited(product, user, now_ms(), false, Some(&limit)),
    );
    assert_eq!(a.unwrap().1, Reservation::Reserved);
    assert!(
        matches!(b.unwrap().1, Reservation::RateLimited { .. }),
        "the second buy finds the token spent"
    );
    let mut c = env.store.connection();
    let bucket: String = c.get(&limit.key).await.unwrap();
    assert!(bucket.starts_with("0 "), "no token left: {bucket:?}");
    assert_eq!(env.redis_stock(product).await, 9);
}

/// A lane whose runtime stops before its driver ran (the gateway's HTTP workers at shutdown)
/// keeps its Kafka locations, and the store they came from records them
/// (`record_waiting_locations`, which the gateway runs on shutdown).
#[tokio::test]
async fn locations_left_by_a_stopped_runtime_are_recorded_at_shutdown() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let (ticket, r) = env
        .store
        .reserve(product, UserId::new(1).unwrap(), now_ms(), false)
        .await
        .unwrap();
    assert_eq!(r, Reservation::Reserved);
    let thread_store = env
        .store
        .on_new_connection(
            &env.settings.redis.topology().unwrap(),
            env.settings.redis.timeout(),
        )
        .unwrap();
    let t = ticket.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Queued, and its driver spawned; the runtime is dropped before the driver runs.
        rt.block_on(async { thread_store.locate_soon(located(&t, 2, 5)) });
    })
    .join()
    .unwrap();
    assert_eq!(env.store.location(&ticket).await.unwrap(), None);
    assert_eq!(env.store.record_waiting_locations().await, 1);
    assert_eq!(env.store.location(&ticket).await.unwrap(), Some((2, 5)));
}

/// The same, for locations already taken into a call in flight when the runtime stops: the
/// driver is stuck in its Redis call (a server that never answers), and the runtime is dropped
/// under it. They used to go with the dropped call.
#[tokio::test]
async fn locations_of_a_call_cut_off_by_a_stopped_runtime_are_recorded_at_shutdown() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let (ticket, r) = env
        .store
        .reserve(product, UserId::new(1).unwrap(), now_ms(), false)
        .await
        .unwrap();
    assert_eq!(r, Reservation::Reserved);
    // Accepts connections (the kernel's backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://127.0.0.1:{}/", silent.local_addr().unwrap().port());
    let stuck = env
        .store
        .on_new_connection(
            &seckill_shared::store::Topology::parse(&url, false).unwrap(),
            Duration::from_secs(30),
        )
        .unwrap();
    let t = ticket.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // The driver holds the location 10 ms for a buyer, then sends it alone and waits on
        // the silent server; the runtime goes while it waits.
        rt.block_on(async {
            stuck.locate_soon(located(&t, 2, 5));
            tokio::time::sleep(Duration::from_millis(300)).await;
        });
    })
    .join()
    .unwrap();
    drop(silent);
    assert_eq!(env.store.location(&ticket).await.unwrap(), None);
    assert_eq!(env.store.record_waiting_locations().await, 1);
    assert_eq!(env.store.location(&ticket).await.unwrap(), Some((2, 5)));
}

/// A reservation call that fails at its end (here the product's pending set is damaged: not a
/// sorted set) leaves no ticket record behind: the records, which have no expiry while their
/// orders are in flight, are written last. The buyer gets the error.
#[tokio::test]
async fn a_call_that_fails_at_its_end_leaves_no_ticket_record() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;
    let keys = env.store.keys(product);
    let mut c = env.store.connection();
    let _: () = c.set(keys.pending(), "damaged").await.unwrap();
    let err = env
        .store
        .reserve(product, UserId::new(3).unwrap(), now_ms(), false)
        .await
        .expect_err("the pending set cannot take the ticket");
    assert!(format!("{err:#}").contains("WRONGTYPE"), "{err:#}");
    let records: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}t:*", keys.stock().trim_end_matches("stock")))
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(records.is_empty(), "records left: {records:?}");
}

/// An order's Kafka location, reserved now.
fn located(ticket: &Ticket, partition: i32, offset: i64) -> Located {
    Located {
        ticket: ticket.clone(),
        reserved_at_ms: now_ms(),
        partition,
        offset,
    }
}
