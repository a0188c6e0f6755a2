//! The worker's sections: its consumer and batches, the sweeper's timeouts, and fault
//! injection.

use super::{rules, user_list, Section, HEARTBEAT_INTERVAL_MS};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::Duration;

/// The worker: its Kafka consumer, its batches and its sweeper.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct WorkerSettings {
    /// The Kafka consumer group.
    #[serde(rename = "worker_group")]
    #[garde(length(min = 1))]
    pub group: String,
    /// Where health and metrics listen.
    #[serde(rename = "worker_http_addr")]
    #[garde(custom(rules::socket_addr))]
    pub http_addr: String,
    /// Most orders in one MySQL transaction.
    #[serde(rename = "worker_batch_size")]
    #[garde(range(min = 1, max = 10_000))]
    pub batch_size: usize,
    /// How long a batch waits to fill up.
    #[serde(rename = "worker_batch_linger_ms")]
    #[garde(range(max = 10_000))]
    pub batch_linger_ms: u64,
    /// How often librdkafka reports statistics (consumer lag); 0 turns them off.
    #[serde(rename = "worker_stats_interval_ms")]
    #[garde(custom(rules::off_or::<100, 600_000>))]
    pub stats_interval_ms: u64,
    /// The consumer's `fetch.wait.max.ms`, how long the broker may hold a fetch that has no
    /// data (see `kafka::consumer_config`).
    #[serde(rename = "worker_fetch_wait_ms")]
    #[garde(range(min = 1, max = 10_000))]
    pub fetch_wait_ms: u64,
    /// The consumer's `session.timeout.ms`. A worker that dies without leaving the group
    /// keeps its partitions, unconsumed, until the broker has heard nothing from it for this
    /// long; one that stops cleanly leaves the group, and its partitions move on without that
    /// wait. More than 3 heartbeats ([`HEARTBEAT_INTERVAL_MS`]). With the local tansu broker
    /// every rebalance (the first join of a new group included) takes about half of it.
    #[serde(rename = "worker_session_timeout_ms")]
    #[garde(range(min = 3 * HEARTBEAT_INTERVAL_MS + 1, max = 300_000))]
    pub session_timeout_ms: u64,
    /// The sweeper fails a ticket still `pending` (unclaimed) after this long, and gives its
    /// unit back, only once the consumer group has read past its message (the message was
    /// lost) or when the gateway never learnt where it landed (it died before Kafka's ack).
    /// An order queued in Kafka is never failed for waiting.
    #[serde(rename = "pending_timeout_ms")]
    #[garde(skip)] // Against the Kafka delivery timeout, in `Settings::validate`.
    pub pending_timeout_ms: u64,
    /// The last resort. A ticket still unsettled after this long is failed even though the
    /// group has not read past its message: the broker lost its log. At least
    /// `pending_timeout_ms`.
    #[serde(rename = "pending_last_resort_ms")]
    #[garde(range(min = self.pending_timeout_ms))]
    pub pending_last_resort_ms: u64,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            group: "seckill-workers".into(),
            http_addr: "127.0.0.1:9090".into(),
            batch_size: 500,
            batch_linger_ms: 20,
            stats_interval_ms: 5000,
            fetch_wait_ms: 10,
            session_timeout_ms: 6000,
            pending_timeout_ms: 30_000,
            pending_last_resort_ms: 900_000,
        }
    }
}

impl Section for WorkerSettings {
    const TITLE: &'static str = "Worker";
    const PREFIX: &'static str = "worker_";
    const RENAMED: &'static [(&'static str, &'static str)] = &[
        ("pending_timeout_ms", "pending_timeout_ms"),
        ("pending_last_resort_ms", "pending_last_resort_ms"),
    ];
}

impl WorkerSettings {
    pub fn batch_linger(&self) -> Duration {
        Duration::from_millis(self.batch_linger_ms)
    }

    pub fn pending_timeout(&self) -> Duration {
        Duration::from_millis(self.pending_timeout_ms)
    }

    pub fn pending_last_resort(&self) -> Duration {
        Duration::from_millis(self.pending_last_resort_ms)
    }
}

/// Fault injection, for tests and demos only: the worker fails, delays or crashes on purpose.
#[derive(Debug, Clone, Default, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct ChaosSettings {
    /// Comma-separated user ids whose orders fail.
    #[serde(rename = "chaos_fail_users")]
    #[garde(custom(rules::user_list))]
    pub fail_users: String,
    /// The share of all orders that fail, 0..1.
    #[serde(rename = "chaos_fail_rate")]
    #[garde(custom(rules::finite), range(min = 0.0, max = 1.0))]
    pub fail_rate: f64,
    /// A delay before each order of the chaos users is processed.
    #[serde(rename = "chaos_delay_ms")]
    #[garde(skip)]
    pub delay_ms: u64,
    /// Comma-separated user ids whose order is committed to MySQL, after which settling fails
    /// once, as if the commit's reply was lost.
    #[serde(rename = "chaos_lose_commit_users")]
    #[garde(custom(rules::user_list))]
    pub lose_commit_users: String,
    /// Once the orders this worker has committed to MySQL reach this many (0: never), it
    /// kills itself (SIGKILL) right after that commit, before it confirms the batch in
    /// Redis: a crash at the worst point of a settle.
    #[serde(rename = "chaos_abort_after_commit")]
    #[garde(skip)]
    pub abort_after_commit: u64,
    /// Once the unpaid orders this worker has cancelled reach this many (0: never), it kills
    /// itself (SIGKILL) right after that cancel's MySQL commit, before the units go back to
    /// Redis: `restore_due` rows left for another worker to finish.
    #[serde(rename = "chaos_abort_after_expiry")]
    #[garde(skip)]
    pub abort_after_expiry: u64,
}

impl Section for ChaosSettings {
    const TITLE: &'static str = "Fault injection";
    const PREFIX: &'static str = "chaos_";
}

impl ChaosSettings {
    pub fn fail_users(&self) -> Result<HashSet<u64>, String> {
        user_list(&self.fail_users)
    }

    pub fn lose_commit_users(&self) -> Result<HashSet<u64>, String> {
        user_list(&self.lose_commit_users)
    }

    /// Whether any fault is injected.
    pub fn enabled(&self) -> bool {
        !self.fail_users.trim().is_empty()
            || !self.lose_commit_users.trim().is_empty()
            || self.fail_rate > 0.0
            || self.delay_ms > 0
            || self.abort_after_commit > 0
            || self.abort_after_expiry > 0
    }

    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }
}
