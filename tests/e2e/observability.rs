//! Metrics: the series the README lists are there and move.

use crate::helpers::*;
use reqwest::StatusCode;
use seckill_shared::kafka;
use seckill_worker::Worker;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The value of a sample in Prometheus text, whatever the order of its labels.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if n != name {
                return None;
            }
            let have: Vec<(&str, &str)> = rest
                .split(',')
                .filter(|p| !p.is_empty())
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    Some((k, v.trim_matches('"')))
                })
                .collect();
            (have.len() == labels.len() && labels.iter().all(|l| have.contains(l)))
                .then(|| value.parse().unwrap())
        })
}

async fn scrape(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}

#[tokio::test]
async fn gateway_and_worker_metrics_show_requests_pending_tickets_and_consumer_lag() {
    let env = TestEnv::new().await;
    // One partition, so that one stalled batch shows as lag.
    let topic = format!("{}-single", env.settings.kafka.topic);
    kafka::ensure_topic(&env.settings.kafka.brokers, &topic, 1)
        .await
        .unwrap();
    let gw = env.gateway_with(|s| s.kafka.topic = topic.clone()).await;
    let mut ws = env.settings.clone();
    ws.kafka.topic = topic.clone();
    ws.worker.stats_interval_ms = 200;
    ws.chaos.fail_users = "9".into();
    ws.chaos.delay_ms = 3000;
    let worker = Worker::build(ws).await.unwrap();
    let worker_metrics = format!("http://127.0.0.1:{}/metrics", worker.port());
    let assignment = worker.assignment();
    let stop = CancellationToken::new();
    let task = tokio::spawn(worker.run_until_stopped(stop.clone()));
    eventually(
        "the worker's partition",
        Duration::from_secs(60),
        || async { (!assignment.lock().unwrap().is_empty()).then_some(()) },
    )
    .await;
    let product = env.product(&gw, 5).await;
    let p = product.to_string();
    let http = reqwest::Client::new();

    // A buy settles; then the gateway has counted every route it served.
    let (status, body) = gw.buy(product, 1).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let ticket = body["ticket"].as_str().unwrap().to_owned();
    gw.settled(&ticket, Duration::from_secs(30)).await;
    gw.get_json("/nowhere").await;
    gw.get_json("/livez").await;
    gw.metrics().await; // a scrape is counted once it has answered: this one shows next time
    let text = gw.metrics().await;
    let count = |route, outcome| {
        sample(
            &text,
            "seckill_gateway_requests_total",
            &[("route", route), ("outcome", outcome)],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(count("buy", "202"), 1.0, "{text}");
    assert!(count("order", "200") >= 1.0, "{text}");
    assert_eq!(count("admin_create_product", "201"), 1.0, "{text}");
    assert_eq!(count("admin_preload", "200"), 1.0, "{text}");
    assert_eq!(count("unmatched", "404"), 1.0, "{text}");
    assert_eq!(count("livez", "200"), 1.0, "{text}");
    assert!(count("metrics", "200") >= 1.0, "{text}");
    // The per-user limit is a step of its own only on a Redis Cluster; on one server the
    // reservation script takes the token.
    let separate_limit = !env.store.connection().is_single_server();
    assert_eq!(
        sample(
            &text,
            "seckill_gateway_latency_seconds_count",
            &[("step", "rate_limit")]
        )
        .is_some(),
        separate_limit,
        "{text}"
    );
    for (name, labels) in [
        ("seckill_gateway_in_flight", vec![]),
        ("seckill_gateway_awaiting_kafka", vec![]),
        ("seckill_gateway_max_in_flight", vec![]),
        ("seckill_gateway_zookeeper_connected", vec![]),
        ("seckill_gateway_sold_out_markers", vec![]),
        (
            "seckill_gateway_latency_seconds_count",
            vec![("step", "redis_reserve")],
        ),
        (
            "seckill_gateway_latency_seconds_count",
            vec![("step", "kafka_ack")],
        ),
        (
            "seckill_gateway_latency_seconds_count",
            vec![("step", "request")],
        ),
    ] {
        assert!(
            sample(&text, name, &labels).is_some(),
            "{name} {labels:?}: {text}"
        );
    }

    let text = scrape(&http, &worker_metrics).await;
    assert_eq!(
        sample(
            &text,
            "seckill_worker_orders_total",
            &[("outcome", "confirmed")]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "seckill_worker_pending_tickets", &[("product", &p)]),
        Some(0.0),
        "{text}"
    );
    for name in [
        "seckill_worker_consumer_lag",
        "seckill_worker_assigned_partitions",
        "seckill_worker_batch_size_count",
        "seckill_worker_batch_seconds_count",
    ] {
        assert!(sample(&text, name, &[]).is_some(), "{name}: {text}");
    }

    // A batch stalls (chaos delay): its tickets show as pending and the messages behind it as
    // lag (librdkafka's reports arrive when the consumer polls, so the lag may show only once
    // the batch is done), until the batch is done and committed.
    for user in [9, 10, 11] {
        assert_eq!(gw.buy(product, user).await.0, StatusCode::ACCEPTED);
    }
    let (mut max_pending, mut max_lag) = (0.0f64, 0.0f64);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while max_pending < 1.0 || max_lag < 1.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "pending {max_pending} and lag {max_lag} never went up"
        );
        let text = scrape(&http, &worker_metrics).await;
        let pending = sample(&text, "seckill_worker_pending_tickets", &[("product", &p)]);
        let lag = sample(&text, "seckill_worker_consumer_lag", &[]);
        max_pending = max_pending.max(pending.unwrap_or(0.0));
        max_lag = max_lag.max(lag.unwrap_or(0.0));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eventually(
        "pending and lag back to 0",
        Duration::from_secs(30),
        || async {
            let text = scrape(&http, &worker_metrics).await;
            let pending = sample(&text, "seckill_worker_pending_tickets", &[("product", &p)])?;
            let lag = sample(&text, "seckill_worker_consumer_lag", &[])?;
            (pending == 0.0 && lag == 0.0).then_some(())
        },
    )
    .await;
    // User 9's order failed (chaos) and gave its unit back; the others were confirmed.
    let text = scrape(&http, &worker_metrics).await;
    for (name, labels, expected) in [
        (
            "seckill_worker_orders_total",
            vec![("outcome", "confirmed")],
            3.0,
        ),
        (
            "seckill_worker_orders_total",
            vec![("outcome", "failed")],
            1.0,
        ),
        ("seckill_worker_compensations_total", vec![], 1.0),
    ] {
        assert_eq!(
            sample(&text, name, &labels),
            Some(expected),
            "{name} {labels:?}: {text}"
        );
    }

    stop.cancel();
    task.await.unwrap().unwrap();
}
