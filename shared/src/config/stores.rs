//! The sections of the servers every process talks to: Redis, MySQL, Kafka and ZooKeeper.

use super::{redacted_secret_url, rules, Section, Topology};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The Kafka consumer's `heartbeat.interval.ms`. `SECKILL_WORKER_SESSION_TIMEOUT_MS` must
/// allow more than three of them.
pub const HEARTBEAT_INTERVAL_MS: u64 = 1000;

/// Redis: stock, tickets, markers' mirror, the waiting rooms.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct RedisSettings {
    /// Redis, e.g. `redis://127.0.0.1:6379/`, or a Redis Cluster: several nodes
    /// (`redis+cluster://h1:7001,h2:7002`). Secret, because it may hold a password
    /// (`redis://:password@host:6379/`).
    #[serde(rename = "redis_url", serialize_with = "redacted_secret_url")]
    #[garde(skip)]
    // Parsed with `cluster` in `RedisSettings::topology`, by `Settings::validate`.
    pub url: SecretString,
    /// Redis commands fail after this long, so a dead Redis gets a quick 503.
    #[serde(rename = "redis_timeout_ms")]
    #[garde(range(min = 10))]
    pub timeout_ms: u64,
    /// `redis_url` names a node of a Redis Cluster (a URL with several nodes says so itself).
    #[serde(rename = "redis_cluster")]
    #[garde(skip)]
    pub cluster: bool,
    /// How long the fast Redis copy of a ticket lives once its order settled (an order in
    /// flight keeps it); after that, reads fall back to MySQL.
    #[serde(rename = "ticket_ttl_secs")]
    #[garde(range(min = 60))]
    pub ticket_ttl_secs: u64,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            url: "redis://127.0.0.1:6379/".into(),
            timeout_ms: 1000,
            cluster: false,
            ticket_ttl_secs: 86_400,
        }
    }
}

impl Section for RedisSettings {
    const TITLE: &'static str = "Redis";
    const PREFIX: &'static str = "redis_";
    const RENAMED: &'static [(&'static str, &'static str)] =
        &[("ticket_ttl_secs", "ticket_ttl_secs")];
}

impl RedisSettings {
    /// One Redis server, or a cluster (see [`Topology`]).
    pub fn topology(&self) -> anyhow::Result<Topology> {
        Topology::parse(self.url.expose_secret(), self.cluster)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub fn ticket_ttl(&self) -> Duration {
        Duration::from_secs(self.ticket_ttl_secs)
    }
}

/// MySQL (or MariaDB): the orders of record.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct MysqlSettings {
    /// `mysql://user:password@host:port/database`. Secret, because it holds the password.
    #[serde(rename = "mysql_url", serialize_with = "redacted_secret_url")]
    #[garde(custom(mysql_url))]
    pub url: SecretString,
}

fn mysql_url(url: &SecretString, _: &()) -> garde::Result {
    match url.expose_secret().starts_with("mysql://") {
        true => Ok(()),
        false => Err(garde::Error::new("must start with mysql://")),
    }
}

impl Default for MysqlSettings {
    fn default() -> Self {
        Self {
            url: "mysql://seckill:seckill@127.0.0.1:3306/seckill".into(),
        }
    }
}

impl Section for MysqlSettings {
    const TITLE: &'static str = "MySQL";
    const PREFIX: &'static str = "mysql_";
}

/// Kafka: the orders' way from the gateways to the workers.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct KafkaSettings {
    /// Kafka bootstrap servers, comma separated.
    #[serde(rename = "kafka_brokers")]
    #[garde(custom(rules::not_blank))]
    pub brokers: String,
    /// The topic orders go through: 1-200 characters of a-z, A-Z, 0-9, '.', '_' and '-'.
    #[serde(rename = "kafka_topic")]
    #[garde(pattern(r"^[A-Za-z0-9._-]{1,200}$"))]
    pub topic: String,
    /// Partitions the worker gives the topic when it has to create it.
    #[serde(rename = "kafka_partitions")]
    #[garde(range(min = 1, max = 1024))]
    pub partitions: i32,
    /// Replicas of each partition when the worker creates the topic. At 2 or more the topic
    /// also gets `min.insync.replicas` = this − 1, so an `acks=all` produce (the gateway's)
    /// is on two brokers at least before its `202`.
    #[serde(rename = "kafka_replication_factor")]
    #[garde(range(min = 1, max = 7))]
    pub replication_factor: i32,
    /// The gateway answers 503 when Kafka has not acknowledged an order within this time.
    #[serde(rename = "kafka_delivery_timeout_ms")]
    #[garde(range(min = 100, max = 60_000))]
    pub delivery_timeout_ms: u64,
    /// Producer `linger.ms`.
    #[serde(rename = "kafka_linger_ms")]
    #[garde(range(max = 1000))]
    pub linger_ms: u64,
}

impl Default for KafkaSettings {
    fn default() -> Self {
        Self {
            brokers: "127.0.0.1:9092".into(),
            topic: "seckill-orders".into(),
            partitions: 8,
            replication_factor: 1,
            delivery_timeout_ms: 3000,
            linger_ms: 5,
        }
    }
}

impl Section for KafkaSettings {
    const TITLE: &'static str = "Kafka";
    const PREFIX: &'static str = "kafka_";
}

impl KafkaSettings {
    pub fn delivery_timeout(&self) -> Duration {
        Duration::from_millis(self.delivery_timeout_ms)
    }
}

/// ZooKeeper: the sold-out markers every gateway watches.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct ZooKeeperSettings {
    /// ZooKeeper connection string, e.g. `127.0.0.1:2181`.
    #[serde(rename = "zk_hosts")]
    #[garde(custom(rules::not_blank))]
    pub hosts: String,
}

impl Default for ZooKeeperSettings {
    fn default() -> Self {
        Self {
            hosts: "127.0.0.1:2181".into(),
        }
    }
}

impl Section for ZooKeeperSettings {
    const TITLE: &'static str = "ZooKeeper";
    const PREFIX: &'static str = "zk_";
}
