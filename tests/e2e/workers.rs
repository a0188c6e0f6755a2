//! The worker pool: crashes, redelivery and the consumer group.

use crate::helpers::*;
use crate::process::{worker_std_command, worker_stdout};
use reqwest::StatusCode;
use seckill_shared::store::RecordStatus;
use seckill_shared::{OrderMessage, UserId};
use std::collections::HashSet;
use std::process::Stdio;
use std::time::Duration;

#[tokio::test]
async fn worker_killed_mid_batch_and_a_duplicate_delivery_leave_no_duplicate_rows() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 10).await;

    // Six orders wait in Kafka; no worker runs yet.
    let mut tickets = Vec::new();
    for user in 1..=6 {
        let (status, body) = gw.buy(product, user).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        tickets.push(ticket_of(&body));
    }

    // A worker process takes them in one batch, claims them, then stalls on user 6 (chaos
    // delay) and is killed with SIGKILL mid-batch.
    let mut child = worker_std_command(&[])
        .envs(env.process_env())
        .env("SECKILL_WORKER_BATCH_LINGER_MS", "1000")
        .env("SECKILL_CHAOS_FAIL_USERS", "6")
        .env("SECKILL_CHAOS_DELAY_MS", "60000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the worker binary");
    eventually(
        "the worker to claim the batch",
        Duration::from_secs(60),
        || async {
            let rec = env.store.ticket(&tickets[0]).await.unwrap().unwrap();
            (rec.state == RecordStatus::Processing).then_some(())
        },
    )
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        env.order_rows(product).await.is_empty(),
        "nothing was committed before the kill"
    );

    // The same message arrives twice.
    let dup = OrderMessage::new(
        tickets[0].clone(),
        UserId::new(1).unwrap(),
        seckill_shared::now_ms(),
    );
    env.publish_raw(&dup).await;

    // A healthy worker in the same group finishes the job.
    let _worker = env.worker().await;
    for t in &tickets {
        let body = gw.settled(t.as_str(), Duration::from_secs(60)).await;
        assert_eq!(body["status"], "confirmed", "{body}");
    }
    let rows = env.order_rows(product).await;
    let distinct: HashSet<_> = rows.iter().map(|r| r.0.clone()).collect();
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert_eq!(distinct.len(), 6);
    assert_eq!(
        (
            env.mysql_stock(product).await,
            env.redis_stock(product).await
        ),
        (4, 4)
    );
    assert_eq!(env.store.counts(product).await.unwrap().pending, 0);
}

#[tokio::test]
async fn two_workers_share_the_partitions_and_one_drains_everything_when_the_other_stops() {
    let env = TestEnv::new().await;
    let partitions = env.settings.kafka.partitions as usize;
    let gw = env.gateway().await;
    let a = env.worker().await;
    let b = env.worker().await;
    eventually(
        "both workers to get partitions",
        Duration::from_secs(60),
        || async {
            let (pa, pb) = (a.partitions(), b.partitions());
            (!pa.is_empty() && !pb.is_empty() && pa.len() + pb.len() == partitions).then_some(())
        },
    )
    .await;

    a.shutdown().await;
    eventually(
        "the remaining worker to own every partition",
        Duration::from_secs(60),
        || async { (b.partitions().len() == partitions).then_some(()) },
    )
    .await;

    let product = env.product(&gw, 30).await;
    let buys = futures::future::join_all((1..=30).map(|u| gw.buy(product, u))).await;
    for (status, body) in &buys {
        assert_eq!(*status, StatusCode::ACCEPTED);
        let t = gw
            .settled(body["ticket"].as_str().unwrap(), Duration::from_secs(30))
            .await;
        assert_eq!(t["status"], "confirmed");
    }
    assert_eq!(env.order_rows(product).await.len(), 30);
    assert_eq!(env.mysql_stock(product).await, 0);
}

#[tokio::test]
async fn the_worker_binary_explains_bad_settings_and_has_help() {
    let out = worker_std_command(&["--help"]).output().unwrap();
    assert!(out.status.success());
    assert!(worker_stdout(&String::from_utf8_lossy(&out.stdout)).contains("migrate"));
    let out = worker_std_command(&[])
        .env("SECKILL_WORKER_BATCH_SIZE", "zero")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("SECKILL_WORKER_BATCH_SIZE"));
}

/// A batch MySQL refuses is retried, and counted, until it goes through; nothing is lost.
#[tokio::test]
async fn a_failing_batch_is_retried_until_mysql_takes_it() {
    let env = TestEnv::new().await;
    let gw = env.gateway().await;
    let product = env.product(&gw, 5).await;
    let worker = seckill_worker::Worker::build(env.settings.clone())
        .await
        .unwrap();
    let metrics = format!("http://127.0.0.1:{}/metrics", worker.port());
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(worker.run_until_stopped(stop.clone()));
    let retries = || async {
        let text = reqwest::get(&metrics).await.ok()?.text().await.ok()?;
        crate::observability::sample(&text, "seckill_worker_retries_total", &[])
    };

    // The orders table is gone for a while.
    sqlx::query("RENAME TABLE orders TO orders_away")
        .execute(&env.db)
        .await
        .unwrap();
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let ticket = ticket_of(&body);
    eventually("a retry", Duration::from_secs(30), || async {
        retries().await.filter(|n| *n >= 1.0)
    })
    .await;
    let (_, now) = gw.get_json(&format!("/v1/orders/{ticket}")).await;
    assert_eq!(now["status"], "pending", "{now}");

    sqlx::query("RENAME TABLE orders_away TO orders")
        .execute(&env.db)
        .await
        .unwrap();
    let settled = gw.settled(ticket.as_str(), Duration::from_secs(30)).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(env.order_rows(product).await.len(), 1);
    stop.cancel();
    task.await.unwrap().unwrap();
}
