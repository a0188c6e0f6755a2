//! Lifecycle: SIGTERM to a gateway process and a worker process during a load. Requests in
//! flight finish, the worker finishes its batch and commits, both exit 0; after a restart
//! every accepted ticket settles, nothing is lost and nothing is sold twice.
//!
//! The processes are started by [`crate::process::Proc`].

use crate::helpers::*;
use crate::process::Proc;
use reqwest::StatusCode;
use seckill_shared::ProductId;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Buyers: one connection per request, so that no idle keep-alive connection meets the
/// shutdown.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// Buys for each user at once. `Some((status, ticket))` per answer, `None` when the request
/// got no answer (the gateway was already closed).
async fn wave(base: &str, product: ProductId, users: impl IntoIterator<Item = u64>) -> Answers {
    let http = client();
    futures::future::join_all(users.into_iter().map(|u| {
        let http = http.clone();
        let url = format!("{base}/v1/seckill/{product}");
        async move {
            let res = http.post(url).json(&json!({ "user_id": u })).send().await;
            let answer = match res {
                Ok(r) => {
                    let status = r.status();
                    let body: Value = r.json().await.unwrap_or(Value::Null);
                    Some((status, body["ticket"].as_str().map(str::to_owned)))
                }
                Err(_) => None,
            };
            (u, answer)
        }
    }))
    .await
}

type Answers = Vec<(u64, Option<(StatusCode, Option<String>)>)>;

/// Records the ticket each answered user got; each answer must be 202 or 200, and a user
/// always gets the same ticket.
fn record(accepted: &mut BTreeMap<u64, String>, answers: Answers) {
    for (user, answer) in answers {
        if let Some((status, ticket)) = answer {
            assert!(
                [StatusCode::ACCEPTED, StatusCode::OK].contains(&status),
                "user {user}: {status}"
            );
            let ticket = ticket.expect("a ticket");
            if let Some(before) = accepted.insert(user, ticket.clone()) {
                assert_eq!(before, ticket, "user {user} got a second ticket");
            }
        }
    }
}

#[tokio::test]
async fn sigterm_lets_requests_and_batches_finish_and_a_restart_loses_nothing() {
    let env = TestEnv::new().await;
    let stock = 100;
    // Every buy waits ~1 s for the producer's batch: plenty of requests in flight.
    let g1 = Proc::gateway(&env, &[("SECKILL_KAFKA_LINGER_MS", "1000")]).await;
    // Batches gather for 3 s: a SIGTERM lands in the middle of one.
    let w1 = Proc::worker(&env, &[("SECKILL_WORKER_BATCH_LINGER_MS", "3000")]).await;
    let gw = TestGateway {
        base: g1.base.clone(),
        http: client(),
    };
    let product = env.product(&gw, stock).await;
    // Tickets each user was told about.
    let mut accepted: BTreeMap<u64, String> = BTreeMap::new();

    // The worker is consuming.
    record(&mut accepted, wave(&g1.base, product, [1000]).await);
    let warm_ticket = accepted[&1000].clone();
    gw.settled(&warm_ticket, Duration::from_secs(30)).await;

    // Wave 1: twenty buys in flight when the gateway gets SIGTERM.
    let base = g1.base.clone();
    let in_flight = tokio::spawn(async move { wave(&base, product, 1..=20).await });
    eventually("twenty reservations", Duration::from_secs(10), || async {
        (env.store.counts(product).await.unwrap().pending == 20).then_some(())
    })
    .await;
    g1.sigterm();
    // More buyers keep coming while it stops: answered in full, or refused outright.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let late = wave(&g1.base, product, 21..=30).await;
    let wave1 = in_flight.await.unwrap();
    assert!(
        wave1
            .iter()
            .all(|(_, a)| matches!(a, Some((StatusCode::ACCEPTED, Some(_))))),
        "every request in flight finishes: {wave1:?}"
    );
    record(&mut accepted, wave1);
    record(&mut accepted, late);
    g1.exits_cleanly("the gateway").await;

    // The worker has wave 1 in its batch (gathering for 3 s) when it gets SIGTERM.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    w1.sigterm();
    w1.exits_cleanly("the worker").await;
    // It finished the batch before leaving: wave 1 is in MySQL with no worker running.
    let rows: BTreeSet<String> = env
        .order_rows(product)
        .await
        .into_iter()
        .map(|r| r.0)
        .collect();
    for user in (1..=20).chain([1000]) {
        assert!(
            rows.contains(&accepted[&user]),
            "user {user}'s order is in MySQL"
        );
    }

    // Restart both.
    let g2 = Proc::gateway(&env, &[]).await;
    let w2 = Proc::worker(&env, &[]).await;
    let gw = TestGateway {
        base: g2.base.clone(),
        http: client(),
    };
    // New buyers, and wave-1 buyers again (they get their own ticket back).
    let wave2 = wave(&g2.base, product, (31..=50).chain(1..=5)).await;
    assert!(wave2.iter().all(|(_, a)| a.is_some()));
    record(&mut accepted, wave2);

    for ticket in accepted.values() {
        let t = gw.settled(ticket, Duration::from_secs(60)).await;
        assert_eq!(t["status"], "confirmed", "{t}");
    }
    // Nothing lost, nothing twice, stock conserved.
    let rows = env.order_rows(product).await;
    let by_user: BTreeMap<u64, String> = rows.iter().map(|(t, u)| (*u as u64, t.clone())).collect();
    assert_eq!(rows.len(), by_user.len(), "one order per user");
    assert_eq!(
        by_user, accepted,
        "an order for exactly the tickets buyers were given"
    );
    let sold = rows.len() as i64;
    assert_eq!(env.mysql_stock(product).await, stock - sold);
    let counts = env.store.counts(product).await.unwrap();
    assert_eq!(
        (counts.stock, counts.pending, counts.confirmed),
        (Some(stock - sold), 0, sold),
        "{counts:?}"
    );
    // The first worker committed what it did: nothing came back to the second one.
    assert_eq!(
        w2.metric("seckill_worker_orders_total", &[("outcome", "skipped")])
            .await,
        0.0
    );

    g2.sigterm();
    w2.sigterm();
    g2.exits_cleanly("the restarted gateway").await;
    w2.exits_cleanly("the restarted worker").await;
}
