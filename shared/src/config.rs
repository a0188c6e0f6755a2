//! Configuration: defaults, then an optional TOML file, then `SECKILL_*` environment variables.
//!
//! Every setting is one field of [`Settings`]. Its TOML key is the field name and its
//! environment variable is `SECKILL_` followed by the field name in upper case, so
//! `redis_url` is `SECKILL_REDIS_URL`. See `config.example.toml` for every field.

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

/// Environment variables that configure the system start with this.
pub const ENV_PREFIX: &str = "SECKILL_";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Redis, e.g. `redis://127.0.0.1:6379/`.
    pub redis_url: String,
    /// MySQL (or MariaDB): `mysql://user:password@host:port/database`.
    pub mysql_url: String,
    /// Kafka bootstrap servers, comma separated.
    pub kafka_brokers: String,
    /// The topic orders go through.
    pub kafka_topic: String,
    /// Partitions the worker gives the topic when it has to create it.
    pub kafka_partitions: i32,
    /// The gateway answers 503 when Kafka has not acknowledged an order within this time.
    pub kafka_delivery_timeout_ms: u64,
    /// Producer `linger.ms`.
    pub kafka_linger_ms: u64,
    /// ZooKeeper connection string, e.g. `127.0.0.1:2181`.
    pub zk_hosts: String,
    /// Prefixes Redis keys and the ZooKeeper root, so that several systems share servers.
    pub namespace: String,
    /// Bearer token for `/admin`. Required unless the binary runs with `--dev`.
    pub admin_token: String,

    /// Gateway: where the HTTP API listens.
    pub http_addr: String,
    /// Gateway: actix worker threads; 0 means one per core.
    pub http_workers: usize,
    /// Gateway: a client has this long after connecting to send its request's head (method,
    /// path and headers); a client that is slower, or sends nothing, gets `408` and is
    /// disconnected. actix reads the time from a clock it updates every 500 ms, so a client
    /// may get up to 500 ms less.
    pub http_client_request_timeout_ms: u64,
    /// Gateway: most connections each actix worker thread holds open at once. At the limit
    /// the gateway stops accepting (new connections wait in the listen backlog) until one
    /// closes.
    pub http_max_connections: usize,
    /// Gateway: `async` (Kafka, the default) or `sync` (the request waits for MySQL).
    pub gateway_mode: String,
    /// Gateway: a local sold-out marker is dropped after this long at the latest.
    pub sold_out_ttl_ms: u64,
    /// Redis commands fail after this long, so a dead Redis gets a quick 503.
    pub redis_timeout_ms: u64,
    /// How long the fast Redis copy of a ticket lives; after that, reads fall back to MySQL.
    pub ticket_ttl_secs: u64,
    /// Gateway: buys each user may make per second, refilling a token bucket shared by every
    /// gateway through Redis; 0 turns the limit off. Over the limit a buy gets `429`.
    pub rate_limit_per_user_per_sec: f64,
    /// Gateway: the size of each user's bucket: buys a user may make at once.
    pub rate_limit_burst: u64,
    /// Gateway: buys one gateway process handles at once (reservation to Kafka ack). Beyond
    /// this a buy gets `503` at once instead of queueing.
    pub max_in_flight: usize,

    /// Worker: the Kafka consumer group.
    pub worker_group: String,
    /// Worker: where health and metrics listen.
    pub worker_http_addr: String,
    /// Worker: most orders in one MySQL transaction.
    pub worker_batch_size: usize,
    /// Worker: how long a batch waits to fill up.
    pub worker_batch_linger_ms: u64,
    /// Worker: the sweeper fails a ticket still `pending` (unclaimed) after this long, and
    /// gives its unit back, only once the consumer group has read past its message (the
    /// message was lost) or when the gateway never learnt where it landed (it died before
    /// Kafka's ack). An order queued in Kafka is never failed for waiting.
    pub pending_timeout_ms: u64,
    /// Worker: the last resort. A ticket still unsettled after this long is failed even though
    /// the group has not read past its message: the broker lost its log.
    pub pending_last_resort_ms: u64,
    /// Worker: how often librdkafka reports statistics (consumer lag); 0 turns them off.
    pub worker_stats_interval_ms: u64,
    /// Worker: the consumer's `fetch.wait.max.ms`, how long the broker may hold a fetch that
    /// has no data (see `kafka::consumer_config`).
    pub worker_fetch_wait_ms: u64,
    /// Worker: the consumer's `session.timeout.ms`. A worker that dies without leaving the
    /// group keeps its partitions, unconsumed, until the broker has heard nothing from it for
    /// this long; one that stops cleanly leaves the group, and its partitions move on without
    /// that wait. More than 3 heartbeats ([`crate::kafka::HEARTBEAT_INTERVAL_MS`]). With the
    /// local tansu broker every rebalance (the first join of a new group included) takes
    /// about half of it.
    pub worker_session_timeout_ms: u64,

    /// Fault injection (tests and demos only): comma-separated user ids whose orders fail.
    pub chaos_fail_users: String,
    /// Fault injection: the share of all orders that fail, 0..1.
    pub chaos_fail_rate: f64,
    /// Fault injection: a delay before each order of the chaos users is processed.
    pub chaos_delay_ms: u64,

    /// Log format: `json` or `pretty`.
    pub log_format: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            redis_url: "redis://127.0.0.1:6379/".into(),
            mysql_url: "mysql://seckill:seckill@127.0.0.1:3306/seckill".into(),
            kafka_brokers: "127.0.0.1:9092".into(),
            kafka_topic: "seckill-orders".into(),
            kafka_partitions: 8,
            kafka_delivery_timeout_ms: 3000,
            kafka_linger_ms: 5,
            zk_hosts: "127.0.0.1:2181".into(),
            namespace: "seckill".into(),
            admin_token: String::new(),
            http_addr: "127.0.0.1:8080".into(),
            http_workers: 0,
            http_client_request_timeout_ms: 5000,
            http_max_connections: 50_000,
            gateway_mode: "async".into(),
            sold_out_ttl_ms: 5000,
            redis_timeout_ms: 1000,
            ticket_ttl_secs: 86_400,
            rate_limit_per_user_per_sec: 5.0,
            rate_limit_burst: 10,
            max_in_flight: 2048,
            worker_group: "seckill-workers".into(),
            worker_http_addr: "127.0.0.1:9090".into(),
            worker_batch_size: 500,
            worker_batch_linger_ms: 20,
            pending_timeout_ms: 30_000,
            pending_last_resort_ms: 900_000,
            worker_stats_interval_ms: 5000,
            worker_fetch_wait_ms: 10,
            worker_session_timeout_ms: 6000,
            chaos_fail_users: String::new(),
            chaos_fail_rate: 0.0,
            chaos_delay_ms: 0,
            log_format: "json".into(),
        }
    }
}

/// The admin token `--dev` uses when none is set.
pub const DEV_ADMIN_TOKEN: &str = "dev-admin-token";

impl Settings {
    /// Loads defaults, then `file` (TOML) if given, then the process environment.
    pub fn load(file: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let file_text = match file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?,
            ),
            None => None,
        };
        Self::from_sources(file_text.as_deref(), std::env::vars())
    }

    /// The layering itself, from explicit sources so that tests need no process environment.
    pub fn from_sources(
        file: Option<&str>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let Value::Object(mut merged) = serde_json::to_value(Settings::default())? else {
            unreachable!("Settings serialises to an object")
        };
        if let Some(text) = file {
            let table: toml::Table = toml::from_str(text).context("parsing config file")?;
            for (key, value) in table {
                if !merged.contains_key(&key) {
                    bail!("config file: unknown setting `{key}`");
                }
                merged.insert(key, serde_json::to_value(value)?);
            }
        }
        for (name, raw) in env {
            let Some(key) = name.strip_prefix(ENV_PREFIX) else {
                continue;
            };
            let key = key.to_ascii_lowercase();
            let Some(default) = merged.get(&key) else {
                // Not ours (a script's own variable, say): leave it alone.
                continue;
            };
            let value = env_value(default, &raw).with_context(|| format!("{name}={raw:?}"))?;
            merged.insert(key, value);
        }
        let settings: Settings =
            serde_json::from_value(Value::Object(merged)).map_err(|e| anyhow!("{e}"))?;
        settings.validate()?;
        Ok(settings)
    }

    /// Every setting's environment variable name.
    pub fn env_names() -> Vec<String> {
        let Value::Object(map) = serde_json::to_value(Settings::default()).unwrap() else {
            unreachable!()
        };
        map.keys()
            .map(|k| format!("{ENV_PREFIX}{}", k.to_ascii_uppercase()))
            .collect()
    }

    /// Checks values and combinations. Each error names the setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        fn check(ok: bool, name: &str, why: &str) -> anyhow::Result<()> {
            if ok {
                Ok(())
            } else {
                Err(anyhow!("{ENV_PREFIX}{}: {why}", name.to_ascii_uppercase()))
            }
        }
        check(
            self.redis_url.starts_with("redis://") || self.redis_url.starts_with("rediss://"),
            "redis_url",
            "must start with redis:// or rediss://",
        )?;
        check(
            self.mysql_url.starts_with("mysql://"),
            "mysql_url",
            "must start with mysql://",
        )?;
        check(
            !self.kafka_brokers.trim().is_empty(),
            "kafka_brokers",
            "must not be empty",
        )?;
        check(
            !self.kafka_topic.is_empty()
                && self.kafka_topic.len() <= 200
                && self
                    .kafka_topic
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "kafka_topic",
            "must be 1-200 characters of a-z, A-Z, 0-9, '.', '_' and '-'",
        )?;
        check(
            (1..=1024).contains(&self.kafka_partitions),
            "kafka_partitions",
            "must be 1..=1024",
        )?;
        check(
            (100..=60_000).contains(&self.kafka_delivery_timeout_ms),
            "kafka_delivery_timeout_ms",
            "must be 100..=60000",
        )?;
        check(
            self.kafka_linger_ms <= 1000,
            "kafka_linger_ms",
            "must be at most 1000",
        )?;
        check(
            !self.zk_hosts.trim().is_empty(),
            "zk_hosts",
            "must not be empty",
        )?;
        check(
            !self.namespace.is_empty()
                && self.namespace.len() <= 64
                && self
                    .namespace
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b)),
            "namespace",
            "must be 1-64 characters of a-z, A-Z, 0-9, '_' and '-'",
        )?;
        check(
            self.http_addr.parse::<SocketAddr>().is_ok(),
            "http_addr",
            "must be host:port, e.g. 127.0.0.1:8080",
        )?;
        check(
            self.worker_http_addr.parse::<SocketAddr>().is_ok(),
            "worker_http_addr",
            "must be host:port, e.g. 127.0.0.1:9090",
        )?;
        check(
            self.http_workers <= 256,
            "http_workers",
            "must be at most 256",
        )?;
        check(
            (1000..=300_000).contains(&self.http_client_request_timeout_ms),
            "http_client_request_timeout_ms",
            "must be 1000..=300000",
        )?;
        check(
            (1..=1_000_000).contains(&self.http_max_connections),
            "http_max_connections",
            "must be 1..=1000000",
        )?;
        check(
            matches!(self.gateway_mode.as_str(), "async" | "sync"),
            "gateway_mode",
            "must be `async` or `sync`",
        )?;
        check(
            self.sold_out_ttl_ms >= 1,
            "sold_out_ttl_ms",
            "must be at least 1",
        )?;
        check(
            self.redis_timeout_ms >= 10,
            "redis_timeout_ms",
            "must be at least 10",
        )?;
        check(
            self.ticket_ttl_secs >= 60,
            "ticket_ttl_secs",
            "must be at least 60",
        )?;
        check(
            self.rate_limit_per_user_per_sec.is_finite()
                && (0.0..=1_000_000.0).contains(&self.rate_limit_per_user_per_sec),
            "rate_limit_per_user_per_sec",
            "must be between 0 (off) and 1000000",
        )?;
        check(
            (1..=1_000_000).contains(&self.rate_limit_burst),
            "rate_limit_burst",
            "must be 1..=1000000",
        )?;
        check(
            (1..=1_000_000).contains(&self.max_in_flight),
            "max_in_flight",
            "must be 1..=1000000",
        )?;
        check(
            !self.worker_group.is_empty(),
            "worker_group",
            "must not be empty",
        )?;
        check(
            (1..=10_000).contains(&self.worker_batch_size),
            "worker_batch_size",
            "must be 1..=10000",
        )?;
        check(
            self.worker_batch_linger_ms <= 10_000,
            "worker_batch_linger_ms",
            "must be at most 10000",
        )?;
        check(
            self.worker_stats_interval_ms == 0
                || (100..=600_000).contains(&self.worker_stats_interval_ms),
            "worker_stats_interval_ms",
            "must be 0 (off) or 100..=600000",
        )?;
        check(
            (1..=10_000).contains(&self.worker_fetch_wait_ms),
            "worker_fetch_wait_ms",
            "must be 1..=10000",
        )?;
        check(
            (1000..=300_000).contains(&self.worker_session_timeout_ms)
                && self.worker_session_timeout_ms > 3 * crate::kafka::HEARTBEAT_INTERVAL_MS,
            "worker_session_timeout_ms",
            "must be 3001..=300000 (more than 3 heartbeats of 1000 ms)",
        )?;
        check(
            self.pending_last_resort_ms >= self.pending_timeout_ms,
            "pending_last_resort_ms",
            "must be at least pending_timeout_ms",
        )?;
        check(
            (0.0..=1.0).contains(&self.chaos_fail_rate),
            "chaos_fail_rate",
            "must be between 0 and 1",
        )?;
        self.chaos_fail_users()
            .map_err(|e| anyhow!("{ENV_PREFIX}CHAOS_FAIL_USERS: {e}"))?;
        check(
            matches!(self.log_format.as_str(), "json" | "pretty"),
            "log_format",
            "must be `json` or `pretty`",
        )?;
        Ok(())
    }

    /// Applies `--dev`: a missing admin token becomes the dev token. Without `--dev` a missing
    /// token is an error.
    pub fn require_admin_token(&mut self, dev: bool) -> anyhow::Result<()> {
        if self.admin_token.is_empty() {
            if !dev {
                bail!("{ENV_PREFIX}ADMIN_TOKEN must be set (or pass --dev to use a development token)");
            }
            tracing::warn!("--dev: using the development admin token {DEV_ADMIN_TOKEN:?}; never do this in production");
            self.admin_token = DEV_ADMIN_TOKEN.into();
        }
        Ok(())
    }

    pub fn chaos_fail_users(&self) -> Result<HashSet<u64>, String> {
        self.chaos_fail_users
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| format!("{s:?} is not a user id"))
            })
            .collect()
    }

    pub fn chaos_enabled(&self) -> bool {
        !self.chaos_fail_users.trim().is_empty()
            || self.chaos_fail_rate > 0.0
            || self.chaos_delay_ms > 0
    }

    /// The effective settings as TOML, with secrets redacted.
    pub fn redacted_toml(&self) -> String {
        let mut s = self.clone();
        if !s.admin_token.is_empty() {
            s.admin_token = "<redacted>".into();
        }
        s.mysql_url = redact_url_password(&s.mysql_url);
        s.redis_url = redact_url_password(&s.redis_url);
        toml::to_string(&s).expect("settings serialise to TOML")
    }

    pub fn sold_out_ttl(&self) -> Duration {
        Duration::from_millis(self.sold_out_ttl_ms)
    }
    pub fn delivery_timeout(&self) -> Duration {
        Duration::from_millis(self.kafka_delivery_timeout_ms)
    }
    pub fn pending_timeout(&self) -> Duration {
        Duration::from_millis(self.pending_timeout_ms)
    }
    pub fn pending_last_resort(&self) -> Duration {
        Duration::from_millis(self.pending_last_resort_ms)
    }
    pub fn redis_timeout(&self) -> Duration {
        Duration::from_millis(self.redis_timeout_ms)
    }
    /// Whether the per-user rate limit is on.
    pub fn rate_limit_enabled(&self) -> bool {
        self.rate_limit_per_user_per_sec > 0.0
    }
}

fn redact_url_password(url: &str) -> String {
    // scheme://user:password@host → scheme://user:<redacted>@host
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((creds, host)) = rest.rsplit_once('@') {
            if let Some((user, _)) = creds.split_once(':') {
                return format!("{scheme}://{user}:<redacted>@{host}");
            }
        }
    }
    url.to_owned()
}

/// Parses an environment value into the JSON type of the setting's default.
fn env_value(default: &Value, raw: &str) -> anyhow::Result<Value> {
    let raw = raw.trim();
    Ok(match default {
        Value::String(_) => Value::String(raw.to_owned()),
        Value::Bool(_) => Value::Bool(match raw {
            "1" | "true" | "yes" => true,
            "0" | "false" | "no" => false,
            _ => bail!("expected true or false"),
        }),
        Value::Number(n) if n.is_f64() => {
            let f: f64 = raw
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite())
                .ok_or_else(|| anyhow!("expected a number"))?;
            Value::from(f)
        }
        Value::Number(n) if n.is_i64() && n.as_i64().unwrap() < 0 => Value::from(
            raw.parse::<i64>()
                .map_err(|_| anyhow!("expected a whole number"))?,
        ),
        Value::Number(_) => Value::from(
            raw.parse::<u64>()
                .map_err(|_| anyhow!("expected a whole number ≥ 0"))?,
        ),
        other => bail!("cannot set a {other} from the environment"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_valid_and_loopback() {
        let s = Settings::from_sources(None, env(&[])).unwrap();
        assert_eq!(s, Settings::default());
        assert!(s.redis_url.contains("127.0.0.1"));
        assert!(Settings::env_names().contains(&"SECKILL_REDIS_URL".to_string()));
    }

    #[test]
    fn env_overrides_file_which_overrides_defaults() {
        let file = "redis_url = \"redis://file:1/\"\nworker_batch_size = 7\n";
        let s = Settings::from_sources(
            Some(file),
            env(&[
                ("SECKILL_WORKER_BATCH_SIZE", "9"),
                ("SECKILL_CHAOS_FAIL_RATE", "0.25"),
                ("OTHER", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(s.redis_url, "redis://file:1/");
        assert_eq!(s.worker_batch_size, 9);
        assert_eq!(s.chaos_fail_rate, 0.25);
    }

    #[test]
    fn errors_name_the_setting() {
        let err = Settings::from_sources(None, env(&[("SECKILL_WORKER_BATCH_SIZE", "lots")]))
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("SECKILL_WORKER_BATCH_SIZE"),
            "{err:#}"
        );
        let err =
            Settings::from_sources(None, env(&[("SECKILL_CHAOS_FAIL_RATE", "2")])).unwrap_err();
        assert!(err.to_string().contains("SECKILL_CHAOS_FAIL_RATE"), "{err}");
        let err =
            Settings::from_sources(None, env(&[("SECKILL_HTTP_ADDR", "nowhere")])).unwrap_err();
        assert!(err.to_string().contains("SECKILL_HTTP_ADDR"), "{err}");
        let err =
            Settings::from_sources(None, env(&[("SECKILL_CHAOS_FAIL_USERS", "1,x")])).unwrap_err();
        assert!(
            err.to_string().contains("SECKILL_CHAOS_FAIL_USERS"),
            "{err}"
        );
        let err = Settings::from_sources(Some("nope = 1"), env(&[])).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn limits_are_validated() {
        let s = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "0.5"),
                ("SECKILL_RATE_LIMIT_BURST", "3"),
                ("SECKILL_MAX_IN_FLIGHT", "1"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (
                s.rate_limit_per_user_per_sec,
                s.rate_limit_burst,
                s.max_in_flight
            ),
            (0.5, 3, 1)
        );
        assert!(s.rate_limit_enabled());
        let off =
            Settings::from_sources(None, env(&[("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "0")]))
                .unwrap();
        assert!(!off.rate_limit_enabled());
        let s = Settings::from_sources(None, env(&[("SECKILL_WORKER_SESSION_TIMEOUT_MS", "3001")]))
            .unwrap();
        assert_eq!(s.worker_session_timeout_ms, 3001);
        for (name, bad) in [
            ("SECKILL_MAX_IN_FLIGHT", "0"),
            ("SECKILL_RATE_LIMIT_BURST", "0"),
            ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "-1"),
            ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "NaN"),
            ("SECKILL_WORKER_STATS_INTERVAL_MS", "5"),
            ("SECKILL_HTTP_CLIENT_REQUEST_TIMEOUT_MS", "500"),
            ("SECKILL_HTTP_MAX_CONNECTIONS", "0"),
            ("SECKILL_WORKER_SESSION_TIMEOUT_MS", "3000"),
            ("SECKILL_WORKER_SESSION_TIMEOUT_MS", "300001"),
        ] {
            let err = Settings::from_sources(None, env(&[(name, bad)])).unwrap_err();
            assert!(format!("{err:#}").contains(name), "{name}={bad}: {err:#}");
        }
    }

    #[test]
    fn admin_token_is_required_unless_dev() {
        let mut s = Settings::default();
        assert!(s.require_admin_token(false).is_err());
        s.require_admin_token(true).unwrap();
        assert_eq!(s.admin_token, DEV_ADMIN_TOKEN);
    }

    #[test]
    fn printed_config_redacts_secrets() {
        let s = Settings {
            admin_token: "hunter2".into(),
            ..Settings::default()
        };
        let out = s.redacted_toml();
        assert!(!out.contains("hunter2"));
        assert!(!out.contains(":seckill@"), "{out}");
        assert!(out.contains("mysql://seckill:<redacted>@127.0.0.1:3306/seckill"));
    }

    #[test]
    fn chaos_users_parse() {
        let s = Settings {
            chaos_fail_users: " 1, 2 ,3".into(),
            ..Settings::default()
        };
        assert_eq!(s.chaos_fail_users().unwrap(), HashSet::from([1, 2, 3]));
        assert!(s.chaos_enabled());
    }
}

#[cfg(test)]
mod example_file {
    use super::*;

    /// `config.example.toml` documents every setting with its default.
    #[test]
    fn example_config_lists_every_setting_with_its_default() {
        let text = include_str!("../../config.example.toml");
        let table: toml::Table = toml::from_str(text).unwrap();
        let mut keys: Vec<String> = table
            .keys()
            .map(|k| format!("{ENV_PREFIX}{}", k.to_ascii_uppercase()))
            .collect();
        let mut names = Settings::env_names();
        keys.sort();
        names.sort();
        assert_eq!(keys, names);
        assert_eq!(
            Settings::from_sources(Some(text), Vec::new()).unwrap(),
            Settings::default()
        );
    }
}
