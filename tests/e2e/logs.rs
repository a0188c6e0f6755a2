//! Logs: JSON lines in production (`SECKILL_LOG_FORMAT=json`), readable lines in development,
//! the level from `RUST_LOG`; a buy's events carry its product, user and ticket, and the
//! ticket travels with the order in a Kafka header.

use crate::helpers::*;
use crate::process::Proc;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use reqwest::StatusCode;
use seckill_shared::kafka::TICKET_HEADER;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Parses each line as a JSON log event: an object with a level and a message.
pub fn events(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"));
            assert!(
                matches!(
                    v["level"].as_str(),
                    Some("TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR")
                ),
                "no level: {l}"
            );
            assert!(v["fields"]["message"].is_string(), "no message: {l}");
            v
        })
        .collect()
}

pub fn message(event: &Value) -> &str {
    event["fields"]["message"].as_str().unwrap_or_default()
}

/// Runs a gateway process with these extra variables and arguments until it answers
/// `/livez`, stops it with SIGTERM, and returns its stderr (where it logs).
async fn gateway_run(env: &TestEnv, vars: &[(&str, &str)], args: &[&str]) -> Vec<String> {
    let (mut cmd, port) = Proc::gateway_command(env, args);
    cmd.envs(vars.iter().copied());
    let p = Proc::spawn(cmd, port, true);
    p.wait_until(|v| v["status"] == "ok", "/livez").await;
    p.sigterm();
    p.exits_cleanly("the gateway").await.stderr
}

#[tokio::test]
async fn gateway_logs_are_json_lines_at_the_level_rust_log_sets() {
    let env = TestEnv::new().await;
    let json = ("SECKILL_LOG_FORMAT", "json");

    let info = events(&gateway_run(&env, &[json, ("RUST_LOG", "info")], &[]).await);
    for expected in ["gateway listening", "gateway stopped"] {
        let e = info
            .iter()
            .find(|e| message(e) == expected)
            .unwrap_or_else(|| panic!("no {expected:?} event in {info:#?}"));
        assert_eq!(e["level"], "INFO", "{e}");
    }
    let listening = info
        .iter()
        .find(|e| message(e) == "gateway listening")
        .unwrap();
    assert!(listening["fields"]["port"].is_u64(), "{listening}");

    // RUST_LOG=warn: no info; the --dev warning still shows.
    let warn = events(
        &gateway_run(
            &env,
            &[json, ("RUST_LOG", "warn"), ("SECKILL_ADMIN_TOKEN", "")],
            &["--dev"],
        )
        .await,
    );
    assert!(
        warn.iter()
            .all(|e| matches!(e["level"].as_str(), Some("WARN" | "ERROR"))),
        "{warn:#?}"
    );
    assert!(
        warn.iter().any(|e| message(e).contains("--dev")),
        "{warn:#?}"
    );

    // Development: readable lines, not JSON.
    let pretty = gateway_run(
        &env,
        &[("SECKILL_LOG_FORMAT", "pretty"), ("RUST_LOG", "info")],
        &[],
    )
    .await;
    assert!(
        pretty
            .iter()
            .any(|l| l.contains("INFO") && l.contains("gateway listening")),
        "{pretty:#?}"
    );
    assert!(
        pretty
            .iter()
            .all(|l| serde_json::from_str::<Value>(l).is_err()),
        "{pretty:#?}"
    );
}

/// The worker binary: JSON on both of its streams, and `RUST_LOG` decides the level.
#[tokio::test]
async fn worker_logs_are_json_lines_at_the_level_rust_log_sets() {
    let env = TestEnv::new().await;
    for level in ["info", "warn"] {
        let (mut cmd, port) = Proc::worker_command(&env, &[]);
        cmd.env("SECKILL_LOG_FORMAT", "json").env("RUST_LOG", level);
        let p = Proc::spawn(cmd, port, true);
        p.wait_until(|v| v["status"] == "ok", "/livez").await;
        p.sigterm();
        let exited = p.exits_cleanly("the worker").await;
        let all: Vec<String> = exited.stdout.into_iter().chain(exited.stderr).collect();
        let events = events(&all);
        let started = events.iter().find(|e| message(e) == "worker started");
        if level == "info" {
            let started = started.unwrap_or_else(|| panic!("{events:#?}"));
            assert_eq!(started["level"], "INFO");
            assert!(
                events.iter().any(|e| message(e) == "worker stopped"),
                "{events:#?}"
            );
        } else {
            assert!(started.is_none(), "{events:#?}");
            assert!(
                events
                    .iter()
                    .all(|e| matches!(e["level"].as_str(), Some("WARN" | "ERROR"))),
                "{events:#?}"
            );
        }
    }
}

#[tokio::test]
async fn a_buys_log_events_carry_product_user_and_ticket_and_kafka_carries_the_ticket_unkeyed() {
    let env = TestEnv::new().await;
    let (mut cmd, port) = Proc::gateway_command(&env, &[]);
    cmd.env("SECKILL_LOG_FORMAT", "json")
        .env("RUST_LOG", "info,seckill_gateway=debug");
    let p = Proc::spawn(cmd, port, true);
    p.wait_until(|v| v["status"] == "ok", "/livez").await;
    let gw = TestGateway::at(p.base.clone(), reqwest::Client::new());
    let product = env.product(&gw, 5).await;
    let (status, body) = gw.buy(product, 42).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let ticket = ticket_of(&body).to_string();

    // The event about this buy's ticket names it, and carries the buy span's fields (`span`
    // is the innermost span).
    let event = eventually("a log event of the buy", Duration::from_secs(10), || {
        let lines = p.stderr_now();
        let ticket = ticket.clone();
        async move {
            events(&lines)
                .into_iter()
                .find(|e| e["fields"]["ticket"] == ticket.as_str())
        }
    })
    .await;
    assert_eq!(event["span"]["name"], "buy", "{event}");
    assert_eq!(event["span"]["product_id"], product.get(), "{event}");
    assert_eq!(event["span"]["user_id"], 42, "{event}");

    // The order on Kafka: the ticket in the `ticket` header, and no key (librdkafka's sticky
    // partitioner batches a gateway's orders one partition at a time).
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &env.settings.kafka.brokers)
        .set(
            "group.id",
            format!("probe-{}", env.settings.common.namespace),
        )
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut partitions = TopicPartitionList::new();
    for partition in 0..env.settings.kafka.partitions {
        partitions
            .add_partition_offset(&env.settings.kafka.topic, partition, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&partitions).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let key = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = tokio::time::timeout(left, consumer.recv())
            .await
            .expect("the order on Kafka within 30 s")
            .unwrap();
        let header = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == TICKET_HEADER))
            .and_then(|h| h.value)
            .map(|v| String::from_utf8_lossy(v).into_owned());
        if header.as_deref() == Some(ticket.as_str()) {
            break m.key().map(<[u8]>::to_vec);
        }
    };
    assert_eq!(key, None, "an order has no key");

    p.sigterm();
    p.exits_cleanly("the gateway").await;
}
