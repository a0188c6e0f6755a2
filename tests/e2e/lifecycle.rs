//! Lifecycle: SIGTERM to a gateway process and a worker process during a load. Requests in
//! flight finish, the worker finishes its batch and commits, both exit 0; after a restart
//! every accepted ticket settles, nothing is lost and nothing is sold twice.
//!
//! A worker stopped by SIGTERM also leaves the consumer group, so that another worker takes
//! its partitions at once instead of after the session timeout.
//!
//! The processes are started by [`crate::process::Proc`].

use crate::helpers::*;
use crate::process::Proc;
use reqwest::StatusCode;
use seckill_shared::ProductId;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

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
            let res = http
                .post(url)
                .bearer_auth(token(u))
                .json(&json!({ "user_id": u }))
                .send()
                .await;
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
    let gw = TestGateway::at(g1.base.clone(), client());
    let product = env.product(&gw, stock).await;
    // Tickets each user was told about.
    let mut accepted: BTreeMap<u64, String> = BTreeMap::new();

    // The worker is consuming.
    record(&mut accepted, wave(&g1.base, product, [1000]).await);
    let warm_ticket = accepted[&1000].clone();
    gw.owns(&warm_ticket, 1000);
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

    // The worker has wave 1 in its batch (gathering for 3 s) when it gets SIGTERM: it has read
    // every message (the warm-up one and wave 1), and nothing of wave 1 is settled yet.
    eventually(
        "the worker to read wave 1",
        Duration::from_secs(10),
        || async {
            let text = client()
                .get(format!("{}/metrics", w1.base))
                .send()
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            let read: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix("seckill_worker_received_total "))?
                .trim()
                .parse()
                .ok()?;
            (read >= 21.0).then_some(())
        },
    )
    .await;
    let rows = env.order_rows(product).await;
    assert_eq!(
        rows.len(),
        1,
        "only the warm-up order is in MySQL: {rows:?}"
    );
    for user in 1..=20 {
        let ticket = seckill_shared::Ticket::parse(&accepted[&user]).unwrap();
        let rec = env.store.ticket(&ticket).await.unwrap().unwrap();
        assert_eq!(
            rec.status,
            seckill_shared::TicketStatus::Pending,
            "user {user}"
        );
    }
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
    let gw = TestGateway::at(g2.base.clone(), client());
    // New buyers, and wave-1 buyers again (they get their own ticket back).
    let wave2 = wave(&g2.base, product, (31..=50).chain(1..=5)).await;
    assert!(wave2.iter().all(|(_, a)| a.is_some()));
    record(&mut accepted, wave2);

    for (user, ticket) in &accepted {
        gw.owns(ticket, *user);
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

/// The partitions a worker process's `/healthz` reports; `None` while it does not answer.
async fn assigned(http: &reqwest::Client, worker: &Proc) -> Option<Vec<u64>> {
    let body: Value = http
        .get(format!("{}/healthz", worker.base))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    body["assigned_partitions"]
        .as_array()?
        .iter()
        .map(Value::as_u64)
        .collect()
}

#[tokio::test]
async fn a_worker_stopped_by_sigterm_leaves_the_group_so_the_other_takes_its_partitions_at_once() {
    let env = TestEnv::new().await;
    let partitions = env.settings.kafka.partitions as usize;
    // The broker evicts a member that stops without leaving only once it has not heard from
    // it for the session timeout. tansu also holds every rebalance (a join, a leave, an
    // eviction) open for about half of the session timeout. Measured with 30 s: after a
    // leave the other worker owns every partition ~16 s after the SIGTERM (one heartbeat,
    // then the rebalance); without one, ~45 s (the eviction at 30 s, then the rebalance).
    // The limit, 25 s, is below the session timeout and leaves ~9 s for a slow machine.
    let session_timeout = Duration::from_secs(30);
    let handover_limit = session_timeout * 5 / 6;
    let session = [(
        "SECKILL_WORKER_SESSION_TIMEOUT_MS",
        session_timeout.as_millis().to_string(),
    )];
    // Both join at once, so that one rebalance (~15 s) splits the partitions.
    let [a, b] = [(); 2].map(|_| {
        let (mut cmd, port) = Proc::worker_command(&env, &[]);
        cmd.envs(session.clone());
        Proc::spawn(cmd, port, false)
    });
    let http = reqwest::Client::new();
    eventually(
        "the two workers to split the partitions",
        Duration::from_secs(90),
        || async {
            let (pa, pb) = (assigned(&http, &a).await?, assigned(&http, &b).await?);
            (!pa.is_empty() && !pb.is_empty() && pa.len() + pb.len() == partitions).then_some(())
        },
    )
    .await;

    a.sigterm();
    let stopped = Instant::now();
    a.exits_cleanly("the stopped worker").await;
    let left = handover_limit
        .checked_sub(stopped.elapsed())
        .expect("the worker exits well within the limit");
    eventually(
        &format!(
            "the other worker to own every partition within {handover_limit:?} of the SIGTERM \
             (a member that does not leave is evicted only after {session_timeout:?})"
        ),
        left,
        || async { (assigned(&http, &b).await?.len() == partitions).then_some(()) },
    )
    .await;
    eprintln!("handover {:?} after the SIGTERM", stopped.elapsed());

    b.sigterm();
    b.exits_cleanly("the other worker").await;
}
