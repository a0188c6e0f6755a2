//! Configuration: defaults, then an optional TOML file, then `SECKILL_*` environment variables,
//! layered by [figment].
//!
//! Every setting is one field of [`Settings`]. Its TOML key is the field name and its
//! environment variable is `SECKILL_` followed by the field name in upper case, so
//! `redis_url` is `SECKILL_REDIS_URL`. See `config.example.toml` for every field.
//!
//! Secrets ([`Settings::admin_token`], [`Settings::auth_hs256_secret`],
//! [`Settings::admission_secret`], and [`Settings::mysql_url`] and [`Settings::redis_url`],
//! which may hold passwords) are
//! [`SecretString`]s: `{:?}` prints them as `[REDACTED]`, and serialising [`Settings`]
//! (`--print-config`) redacts them too. Read one with [`ExposeSecret::expose_secret`].

use anyhow::{anyhow, bail, Context};
use figment::error::{Kind, OneOf};
use figment::providers::{Env, Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::net::SocketAddr;

/// The Kafka consumer's `heartbeat.interval.ms`. `SECKILL_WORKER_SESSION_TIMEOUT_MS` must
/// allow more than three of them.
pub const HEARTBEAT_INTERVAL_MS: u64 = 1000;
use std::time::Duration;

/// Environment variables that configure the system start with this.
pub const ENV_PREFIX: &str = "SECKILL_";

/// How the gateway settles a buy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GatewayMode {
    /// The order goes through Kafka to the workers; the buyer polls the ticket.
    #[default]
    Async,
    /// The request waits while the gateway settles the order in MySQL itself.
    Sync,
}

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One JSON object a line.
    #[default]
    Json,
    /// Compact, human-readable lines.
    Pretty,
}

impl GatewayMode {
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayMode::Async => "async",
            GatewayMode::Sync => "sync",
        }
    }
}

impl LogFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            LogFormat::Json => "json",
            LogFormat::Pretty => "pretty",
        }
    }
}

impl fmt::Display for GatewayMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the gateway knows who a buyer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// A signed JWT (`Authorization: Bearer`): the buyer is its `sub` claim.
    #[default]
    Jwt,
    /// No authentication: the body's `user_id` is trusted. Only with `--dev`.
    None,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Jwt => "jwt",
            AuthMode::None => "none",
        }
    }
}

impl fmt::Display for AuthMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every setting. There is deliberately no `PartialEq`: it holds secrets.
///
/// `Serialize` writes the redacted view ([`Settings::redacted_toml`]): secrets never leave
/// through it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Redis, e.g. `redis://127.0.0.1:6379/`, or a Redis Cluster: several nodes
    /// (`redis+cluster://h1:7001,h2:7002`). Secret, because it may hold a password
    /// (`redis://:password@host:6379/`).
    #[serde(serialize_with = "redacted_secret_url")]
    pub redis_url: SecretString,
    /// MySQL (or MariaDB): `mysql://user:password@host:port/database`. Secret, because it
    /// holds the password.
    #[serde(serialize_with = "redacted_secret_url")]
    pub mysql_url: SecretString,
    /// Kafka bootstrap servers, comma separated.
    pub kafka_brokers: String,
    /// The topic orders go through.
    pub kafka_topic: String,
    /// Partitions the worker gives the topic when it has to create it.
    pub kafka_partitions: i32,
    /// Replicas of each partition when the worker creates the topic. At 2 or more the topic
    /// also gets `min.insync.replicas` = this − 1, so an `acks=all` produce (the gateway's)
    /// is on two brokers at least before its `202`.
    pub kafka_replication_factor: i32,
    /// The gateway answers 503 when Kafka has not acknowledged an order within this time.
    pub kafka_delivery_timeout_ms: u64,
    /// Producer `linger.ms`.
    pub kafka_linger_ms: u64,
    /// ZooKeeper connection string, e.g. `127.0.0.1:2181`.
    pub zk_hosts: String,
    /// Prefixes Redis keys and the ZooKeeper root, so that several systems share servers.
    pub namespace: String,
    /// Bearer token for `/admin`, at least 32 bytes. Required unless the binary runs with
    /// `--dev`. Secret.
    #[serde(serialize_with = "redacted_token")]
    pub admin_token: SecretString,
    /// Gateway: wrong admin tokens each client address may send per minute (a burst of this
    /// many, then one more every `60 / n` seconds). Past it, every admin request from that
    /// address gets `429`, even with the right token, until one more failure would be
    /// allowed. 0 turns the limit off.
    pub admin_auth_failures_per_min: u32,

    /// Gateway: `jwt` (the default: buyers send a signed token) or `none` (the body's
    /// `user_id` is trusted; only with `--dev`).
    pub auth_mode: AuthMode,
    /// Gateway: the shared secret for HS256 buyer tokens, at least 32 bytes. Secret.
    #[serde(serialize_with = "redacted_token")]
    pub auth_hs256_secret: SecretString,
    /// Gateway: a JWKS file of public keys (EdDSA/Ed25519, ES256, RS256) for buyer tokens,
    /// selected by `kid`. A changed file is picked up without a restart.
    pub auth_jwks_file: String,
    /// Gateway: when set, a token's `iss` must equal it.
    pub auth_issuer: String,
    /// Gateway: when set, a token's `aud` must contain it.
    pub auth_audience: String,
    /// Gateway: clock skew allowed on `exp` and `nbf`, in seconds.
    pub auth_leeway_secs: u64,
    /// Gateway: requests to the buyer endpoints each client address may make per second, per
    /// gateway process, checked before the token; 0 turns the limit off.
    pub rate_limit_per_address_per_sec: u32,
    /// Gateway: comma-separated addresses or CIDR blocks of proxies whose `X-Forwarded-For`
    /// names the client.
    pub trusted_proxies: String,

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
    pub gateway_mode: GatewayMode,
    /// Gateway: a local sold-out marker is dropped after this long at the latest.
    pub sold_out_ttl_ms: u64,
    /// Redis commands fail after this long, so a dead Redis gets a quick 503.
    pub redis_timeout_ms: u64,
    /// `redis_url` names a node of a Redis Cluster (a URL with several nodes says so itself).
    pub redis_cluster: bool,
    /// How long the fast Redis copy of a ticket lives once its order settled (an order in
    /// flight keeps it); after that, reads fall back to MySQL.
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
    /// that wait. More than 3 heartbeats ([`HEARTBEAT_INTERVAL_MS`]). With the
    /// local tansu broker every rebalance (the first join of a new group included) takes
    /// about half of it.
    pub worker_session_timeout_ms: u64,

    /// Fault injection (tests and demos only): comma-separated user ids whose orders fail.
    pub chaos_fail_users: String,
    /// Fault injection: the share of all orders that fail, 0..1.
    pub chaos_fail_rate: f64,
    /// Fault injection: a delay before each order of the chaos users is processed.
    pub chaos_delay_ms: u64,
    /// Fault injection: comma-separated user ids whose order is committed to MySQL, after
    /// which settling fails once, as if the commit's reply was lost.
    pub chaos_lose_commit_users: String,
    /// Fault injection: once the orders this worker has committed to MySQL reach this many
    /// (0: never), it kills itself (SIGKILL) right after that commit, before it confirms the
    /// batch in Redis: a crash at the worst point of a settle.
    pub chaos_abort_after_commit: u64,
    /// Fault injection: once the unpaid orders this worker has cancelled reach this many (0:
    /// never), it kills itself (SIGKILL) right after that cancel's MySQL commit, before the
    /// units go back to Redis: `restore_due` rows left for another worker to finish.
    pub chaos_abort_after_expiry: u64,

    /// The payment window of a priced product that sets none: a confirmed order must be paid
    /// within this many seconds, or a worker cancels it and its unit goes back on sale.
    /// 0 turns the window off (a confirmed order is final).
    pub payment_window_secs: u64,
    /// Gateway: the payment provider; a payment is `POST {url}/charges`. Empty: paying
    /// answers `503`.
    pub payment_provider_url: String,
    /// Gateway: how long the provider may take to accept a charge.
    pub payment_provider_timeout_ms: u64,
    /// Gateway: a payment still waiting for the provider's callback this long after it was
    /// sent is asked about (`GET {url}/charges/{payment_id}`), and settled as the callback
    /// would have. 0 turns it off.
    pub payment_reconcile_after_ms: u64,
    /// Gateway: the public address of `POST /v1/payments/callback`, sent to the provider with
    /// each charge.
    pub payment_callback_url: String,
    /// Gateway: the provider signs its callbacks with this (HMAC-SHA256). Required to accept
    /// callbacks. Secret.
    #[serde(serialize_with = "redacted_token")]
    pub payment_webhook_secret: SecretString,

    /// Gateway: admission tokens of waiting rooms are signed with this (HMAC-SHA256), so that
    /// any gateway accepts another's: the same on every gateway, at least 32 bytes, and not
    /// the admin token or the HS256 secret. Required by the gateway unless `--dev`. Secret.
    #[serde(serialize_with = "redacted_token")]
    pub admission_secret: SecretString,
    /// Gateway: how long an admission lasts; an admitted buyer who has not bought by then
    /// gives the place up.
    pub admission_ttl_secs: u64,
    /// Gateway: waiting-room joins and polls each buyer may make per second (a token bucket
    /// shared through Redis, like the buy limit); 0 turns it off.
    pub queue_rate_limit_per_user_per_sec: f64,

    /// Log format: `json` or `pretty`.
    pub log_format: LogFormat,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            redis_url: "redis://127.0.0.1:6379/".into(),
            mysql_url: "mysql://seckill:seckill@127.0.0.1:3306/seckill".into(),
            kafka_brokers: "127.0.0.1:9092".into(),
            kafka_topic: "seckill-orders".into(),
            kafka_partitions: 8,
            kafka_replication_factor: 1,
            kafka_delivery_timeout_ms: 3000,
            kafka_linger_ms: 5,
            zk_hosts: "127.0.0.1:2181".into(),
            namespace: "seckill".into(),
            admin_token: SecretString::default(),
            admin_auth_failures_per_min: 10,
            auth_mode: AuthMode::Jwt,
            auth_hs256_secret: SecretString::default(),
            auth_jwks_file: String::new(),
            auth_issuer: String::new(),
            auth_audience: String::new(),
            auth_leeway_secs: 30,
            rate_limit_per_address_per_sec: 100,
            trusted_proxies: String::new(),
            http_addr: "127.0.0.1:8080".into(),
            http_workers: 0,
            http_client_request_timeout_ms: 5000,
            http_max_connections: 50_000,
            gateway_mode: GatewayMode::Async,
            sold_out_ttl_ms: 5000,
            redis_timeout_ms: 1000,
            redis_cluster: false,
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
            chaos_lose_commit_users: String::new(),
            chaos_abort_after_commit: 0,
            chaos_abort_after_expiry: 0,
            payment_window_secs: 900,
            payment_provider_url: String::new(),
            payment_provider_timeout_ms: 3000,
            payment_reconcile_after_ms: 60_000,
            payment_callback_url: String::new(),
            payment_webhook_secret: SecretString::default(),
            admission_secret: SecretString::default(),
            admission_ttl_secs: 60,
            queue_rate_limit_per_user_per_sec: 5.0,
            log_format: LogFormat::Json,
        }
    }
}

/// The admin token `--dev` uses when none is set.
pub const DEV_ADMIN_TOKEN: &str = "dev-admin-token-for-local-use-only";

/// The admission-token secret `--dev` uses when none is set.
pub const DEV_ADMISSION_SECRET: &str = "dev-admission-secret-for-local-use-only";

/// The shortest admin token accepted.
pub const MIN_ADMIN_TOKEN_BYTES: usize = 32;

/// The HS256 secret `--dev` uses when no buyer-token key is set.
pub const DEV_AUTH_HS256_SECRET: &str = "dev-hs256-secret-for-local-use-only!";

/// The longest payment window, for a product or by default: 7 days.
pub const MAX_PAYMENT_WINDOW_SECS: u64 = 7 * 86_400;

/// The shortest HS256 secret accepted (RFC 7518 §3.2: at least the hash's size).
pub const MIN_HS256_SECRET_BYTES: usize = 32;

impl Settings {
    /// Loads defaults, then `file` (TOML) if given, then the process environment (figment's
    /// [`Env::prefixed`]).
    pub fn load(file: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let file_text = match file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?,
            ),
            None => None,
        };
        // `Env` reads names and values that are not UTF-8 without panicking (lossily).
        let env = Env::prefixed(ENV_PREFIX);
        let vars = env
            .iter()
            .map(|(key, value)| (key.as_str().to_owned(), value));
        Self::layered(file_text.as_deref(), EnvLayer::new(vars))
    }

    /// The layering itself, from explicit sources so that tests need no process environment.
    /// `env` holds whole variable names (`SECKILL_REDIS_URL`); others are ignored. Names are
    /// matched as [`Env::prefixed`] matches them: regardless of case.
    pub fn from_sources(
        file: Option<&str>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        let env = env.into_iter().filter_map(|(name, value)| {
            let prefix = name.get(..ENV_PREFIX.len())?;
            prefix.eq_ignore_ascii_case(ENV_PREFIX).then_some(())?;
            Some((name[ENV_PREFIX.len()..].to_ascii_lowercase(), value))
        });
        Self::layered(file, EnvLayer::new(env))
    }

    /// Defaults (`#[serde(default)]`, from [`Settings::default`]), then the file, then the
    /// environment, then [`Settings::validate`].
    fn layered(file: Option<&str>, env: EnvLayer) -> anyhow::Result<Self> {
        let mut figment = Figment::new();
        if let Some(text) = file {
            figment = figment.merge(Toml::string(text));
        }
        // Lossy: an environment value is text, and `SECKILL_WORKER_BATCH_SIZE=9` is a number
        // because the setting is one (see `EnvLayer`). The file may thereby quote a number too.
        let settings: Settings = figment.merge(env).extract_lossy().map_err(explain)?;
        settings.validate()?;
        Ok(settings)
    }

    /// Every setting's TOML key.
    pub fn keys() -> Vec<String> {
        // The redacted serialisation has every field; the values do not matter here.
        let table = toml::Table::try_from(Settings::default()).expect("settings serialise");
        table.keys().cloned().collect()
    }

    /// Every setting's environment variable name.
    pub fn env_names() -> Vec<String> {
        Self::keys()
            .iter()
            .map(|k| format!("{ENV_PREFIX}{}", k.to_ascii_uppercase()))
            .collect()
    }

    /// One Redis server, or a cluster (see [`crate::store::Topology`]).
    pub fn redis_topology(&self) -> anyhow::Result<crate::store::Topology> {
        crate::store::Topology::parse(self.redis_url.expose_secret(), self.redis_cluster)
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
        if let Err(e) = self.redis_topology() {
            return Err(anyhow!("{ENV_PREFIX}REDIS_URL: {e}"));
        }
        check(
            self.mysql_url.expose_secret().starts_with("mysql://"),
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
            (1..=7).contains(&self.kafka_replication_factor),
            "kafka_replication_factor",
            "must be 1..=7",
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
            self.payment_window_secs <= MAX_PAYMENT_WINDOW_SECS,
            "payment_window_secs",
            "must be at most 604800 (7 days)",
        )?;
        check(
            (1..=3600).contains(&self.admission_ttl_secs),
            "admission_ttl_secs",
            "must be 1..=3600",
        )?;
        check(
            self.queue_rate_limit_per_user_per_sec.is_finite()
                && (0.0..=1_000_000.0).contains(&self.queue_rate_limit_per_user_per_sec),
            "queue_rate_limit_per_user_per_sec",
            "must be between 0 (off) and 1000000",
        )?;
        let admin = self.admin_token.expose_secret();
        check(
            admin.is_empty() || admin.len() >= MIN_ADMIN_TOKEN_BYTES,
            "admin_token",
            "must be at least 32 bytes (e.g. `openssl rand -hex 32`)",
        )?;
        check(
            self.admin_auth_failures_per_min <= 10_000,
            "admin_auth_failures_per_min",
            "must be between 0 (off) and 10000",
        )?;
        check(
            self.admission_secret.expose_secret().is_empty()
                || self.admission_secret.expose_secret().len() >= MIN_HS256_SECRET_BYTES,
            "admission_secret",
            "must be at least 32 bytes",
        )?;
        self.check_admission_secret_is_its_own()?;
        check(
            self.payment_reconcile_after_ms == 0
                || (100..=86_400_000).contains(&self.payment_reconcile_after_ms),
            "payment_reconcile_after_ms",
            "must be 0 (off) or 100..=86400000",
        )?;
        check(
            (100..=60_000).contains(&self.payment_provider_timeout_ms),
            "payment_provider_timeout_ms",
            "must be 100..=60000",
        )?;
        // The gateway's HTTP client is built without TLS: reach an HTTPS provider through a
        // local egress proxy (docs/SECURITY.md).
        check(
            self.payment_provider_url.is_empty()
                || self.payment_provider_url.starts_with("http://"),
            "payment_provider_url",
            "must be empty or start with http:// (TLS through a local egress proxy)",
        )?;
        check(
            self.payment_callback_url.is_empty()
                || self.payment_callback_url.starts_with("http://")
                || self.payment_callback_url.starts_with("https://"),
            "payment_callback_url",
            "must be empty or start with http:// or https://",
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
                && self.worker_session_timeout_ms > 3 * HEARTBEAT_INTERVAL_MS,
            "worker_session_timeout_ms",
            "must be 3001..=300000 (more than 3 heartbeats of 1000 ms)",
        )?;
        check(
            self.pending_last_resort_ms >= self.pending_timeout_ms,
            "pending_last_resort_ms",
            "must be at least pending_timeout_ms",
        )?;
        // The sweeper fails a pending ticket with no known Kafka location at this age. The
        // gateway learns the location up to the delivery timeout after the reservation, and
        // then holds it up to HOLD_LOCATED_MS for a buyer to ride with: a shorter timeout
        // could fail an order Kafka is still taking, whose buyer then holds a 202 for a
        // failed ticket. (Gateways and workers must share these settings to agree.)
        check(
            self.pending_timeout_ms
                > self.kafka_delivery_timeout_ms + crate::locations::HOLD_LOCATED_MS,
            "pending_timeout_ms",
            "must exceed kafka_delivery_timeout_ms plus 10 ms (the hold of a Kafka location)",
        )?;
        check(
            (0.0..=1.0).contains(&self.chaos_fail_rate),
            "chaos_fail_rate",
            "must be between 0 and 1",
        )?;
        let secret = self.auth_hs256_secret.expose_secret();
        check(
            secret.is_empty() || secret.len() >= MIN_HS256_SECRET_BYTES,
            "auth_hs256_secret",
            "must be at least 32 bytes",
        )?;
        check(
            self.auth_leeway_secs <= 3600,
            "auth_leeway_secs",
            "must be 0..=3600",
        )?;
        self.trusted_proxies()
            .map_err(|e| anyhow!("{ENV_PREFIX}TRUSTED_PROXIES: {e}"))?;
        self.chaos_fail_users()
            .map_err(|e| anyhow!("{ENV_PREFIX}CHAOS_FAIL_USERS: {e}"))?;
        self.chaos_lose_commit_users()
            .map_err(|e| anyhow!("{ENV_PREFIX}CHAOS_LOSE_COMMIT_USERS: {e}"))?;
        Ok(())
    }

    /// Applies `--dev`: a missing admin token becomes the dev token. Without `--dev` a missing
    /// token is an error.
    pub fn require_admin_token(&mut self, dev: bool) -> anyhow::Result<()> {
        if self.admin_token.expose_secret().is_empty() {
            if !dev {
                bail!("{ENV_PREFIX}ADMIN_TOKEN must be set: at least 32 bytes, e.g. `openssl rand -hex 32` (or pass --dev to use a development token)");
            }
            tracing::warn!("--dev: using the development admin token {DEV_ADMIN_TOKEN:?}; never do this in production");
            self.admin_token = DEV_ADMIN_TOKEN.into();
        }
        Ok(())
    }

    /// Applies `--dev` to the waiting rooms' admission secret (the gateway signs admissions
    /// with it; every gateway needs the same): a missing one becomes
    /// [`DEV_ADMISSION_SECRET`] with `--dev`, and is an error without. Nothing is derived from
    /// another secret.
    pub fn require_admission_secret(&mut self, dev: bool) -> anyhow::Result<()> {
        if self.admission_secret.expose_secret().is_empty() {
            if !dev {
                bail!("{ENV_PREFIX}ADMISSION_SECRET must be set: at least 32 bytes, the same on every gateway, not the admin token (or pass --dev to use a development secret)");
            }
            tracing::warn!("--dev: signing admission tokens with the development secret; never do this in production");
            self.admission_secret = DEV_ADMISSION_SECRET.into();
        }
        self.check_admission_secret_is_its_own()
    }

    /// The admission secret (when set) is neither the admin token nor the HS256 secret: each
    /// secret signs or opens one thing only.
    fn check_admission_secret_is_its_own(&self) -> anyhow::Result<()> {
        let admission = self.admission_secret.expose_secret();
        if admission.is_empty() {
            return Ok(());
        }
        if admission == self.admin_token.expose_secret() {
            bail!("{ENV_PREFIX}ADMISSION_SECRET: must differ from {ENV_PREFIX}ADMIN_TOKEN");
        }
        if admission == self.auth_hs256_secret.expose_secret() {
            bail!("{ENV_PREFIX}ADMISSION_SECRET: must differ from {ENV_PREFIX}AUTH_HS256_SECRET");
        }
        Ok(())
    }

    /// Applies `--dev` to buyer authentication. `auth_mode = "none"` needs `--dev`; with no key
    /// set, `--dev` uses [`DEV_AUTH_HS256_SECRET`] and anything else is an error.
    pub fn require_auth(&mut self, dev: bool) -> anyhow::Result<()> {
        match self.auth_mode {
            AuthMode::None if !dev => {
                bail!("{ENV_PREFIX}AUTH_MODE=none trusts the body's user_id and needs --dev")
            }
            AuthMode::None => {
                tracing::warn!("--dev with {ENV_PREFIX}AUTH_MODE=none: buyers are not authenticated; anyone can buy as anyone");
            }
            AuthMode::Jwt
                if self.auth_hs256_secret.expose_secret().is_empty()
                    && self.auth_jwks_file.is_empty() =>
            {
                if !dev {
                    bail!("set {ENV_PREFIX}AUTH_HS256_SECRET or {ENV_PREFIX}AUTH_JWKS_FILE (or {ENV_PREFIX}AUTH_MODE=none with --dev)");
                }
                tracing::warn!("--dev: signing buyer tokens with the development HS256 secret; never do this in production");
                self.auth_hs256_secret = DEV_AUTH_HS256_SECRET.into();
            }
            AuthMode::Jwt => {}
        }
        Ok(())
    }

    /// [`Settings::trusted_proxies`], parsed.
    pub fn trusted_proxies(&self) -> Result<Vec<ipnet::IpNet>, String> {
        self.trusted_proxies
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<ipnet::IpNet>()
                    .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| format!("{s:?} is not an address or CIDR block"))
            })
            .collect()
    }

    pub fn chaos_fail_users(&self) -> Result<HashSet<u64>, String> {
        user_list(&self.chaos_fail_users)
    }

    pub fn chaos_lose_commit_users(&self) -> Result<HashSet<u64>, String> {
        user_list(&self.chaos_lose_commit_users)
    }

    pub fn chaos_enabled(&self) -> bool {
        !self.chaos_fail_users.trim().is_empty()
            || !self.chaos_lose_commit_users.trim().is_empty()
            || self.chaos_fail_rate > 0.0
            || self.chaos_delay_ms > 0
            || self.chaos_abort_after_commit > 0
            || self.chaos_abort_after_expiry > 0
    }

    /// The effective settings as TOML, with secrets redacted (what `--print-config` prints).
    pub fn redacted_toml(&self) -> String {
        toml::to_string(self).expect("settings serialise to TOML")
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
    pub fn http_client_request_timeout(&self) -> Duration {
        Duration::from_millis(self.http_client_request_timeout_ms)
    }
    pub fn payment_provider_timeout(&self) -> Duration {
        Duration::from_millis(self.payment_provider_timeout_ms)
    }
    pub fn ticket_ttl(&self) -> Duration {
        Duration::from_secs(self.ticket_ttl_secs)
    }
    pub fn worker_batch_linger(&self) -> Duration {
        Duration::from_millis(self.worker_batch_linger_ms)
    }
    pub fn chaos_delay(&self) -> Duration {
        Duration::from_millis(self.chaos_delay_ms)
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

/// `scheme://user:<redacted>@host` for a URL with a password, for `Serialize`.
fn redacted_url<S: Serializer>(url: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url_password(url))
}

fn redacted_secret_url<S: Serializer>(url: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    redacted_url(url.expose_secret(), s)
}

/// `<redacted>`, or `""` for a token that is not set (so that `--print-config` shows it is not).
fn redacted_token<S: Serializer>(token: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(if token.expose_secret().is_empty() {
        ""
    } else {
        "<redacted>"
    })
}

/// Names the environment layer in figment's errors.
const ENV_SOURCE: &str = "`SECKILL_` environment variable(s)";

/// The `SECKILL_*` layer: `(setting, value)` pairs, the setting in lower case without the
/// prefix. Variables that name no setting (a script's own `SECKILL_*`, say) are left alone.
///
/// Each value stays the text it is (trimmed). figment's own [`Env`] provider parses values
/// first, which would turn an admin token or namespace `0123`, or `SECKILL_CHAOS_FAIL_USERS=6`,
/// into a number: a string setting would then fail to load or change. Extraction is lossy
/// instead (see [`Settings::layered`]), so text becomes a number where the setting is one.
struct EnvLayer(Vec<(String, String)>);

impl EnvLayer {
    fn new(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let known: BTreeSet<String> = Settings::keys().into_iter().collect();
        Self(
            vars.into_iter()
                .filter(|(key, _)| known.contains(key))
                .map(|(key, value)| (key, value.trim().to_owned()))
                .collect(),
        )
    }
}

impl Provider for EnvLayer {
    fn metadata(&self) -> Metadata {
        Metadata::named(ENV_SOURCE).interpolater(|_: &Profile, keys: &[&str]| {
            format!("{ENV_PREFIX}{}", keys.join(".").to_ascii_uppercase())
        })
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let dict: Dict = self
            .0
            .iter()
            .map(|(key, value)| (key.clone(), Value::from(value.as_str())))
            .collect();
        Ok(Profile::Default.collect(dict))
    }
}

/// figment's errors, one line each, naming the setting as the user wrote it:
/// `SECKILL_WORKER_BATCH_SIZE: invalid type: …` or `config file: unknown setting `nope``.
fn explain(errors: figment::Error) -> anyhow::Error {
    let lines: Vec<String> = errors
        .into_iter()
        .map(|e| {
            let from_env = e.metadata.as_ref().is_some_and(|m| m.name == ENV_SOURCE);
            let key = e.path.join(".");
            let kind = match &e.kind {
                Kind::UnknownVariant(found, expected) => {
                    format!("`{found}` is not {}", OneOf(expected))
                }
                kind => kind.to_string(),
            };
            match &e.kind {
                Kind::UnknownField(field, _) => {
                    format!("config file: unknown setting `{field}`")
                }
                _ if from_env && !key.is_empty() => {
                    format!("{ENV_PREFIX}{}: {kind}", key.to_ascii_uppercase())
                }
                _ if !key.is_empty() => format!("config file: {key}: {kind}"),
                _ => format!("config file: {kind}"),
            }
        })
        .collect();
    anyhow!(lines.join("\n"))
}

/// Equality for tests: `Settings` has no `PartialEq`, because it holds secrets.
/// A comma-separated list of user ids.
fn user_list(text: &str) -> Result<HashSet<u64>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u64>()
                .map_err(|_| format!("{s:?} is not a user id"))
        })
        .collect()
}

#[cfg(test)]
fn assert_same(a: &Settings, b: &Settings) {
    assert_eq!(a.redacted_toml(), b.redacted_toml());
    assert_eq!(a.redis_url.expose_secret(), b.redis_url.expose_secret());
    assert_eq!(a.mysql_url.expose_secret(), b.mysql_url.expose_secret());
    assert_eq!(a.admin_token.expose_secret(), b.admin_token.expose_secret());
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
        assert_same(&s, &Settings::default());
        assert!(s.redis_url.expose_secret().contains("127.0.0.1"));
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
        assert_eq!(s.redis_url.expose_secret(), "redis://file:1/");
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
        assert_eq!(Settings::default().admin_auth_failures_per_min, 10);
        let off =
            Settings::from_sources(None, env(&[("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "0")]))
                .unwrap();
        assert_eq!(off.admin_auth_failures_per_min, 0);
        // A pending timeout the sweeper could reach while Kafka still takes the order (the
        // delivery timeout is 3000 ms by default) is refused.
        let err = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_PENDING_TIMEOUT_MS", "3000"),
                ("SECKILL_PENDING_LAST_RESORT_MS", "900000"),
            ]),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("SECKILL_PENDING_TIMEOUT_MS"),
            "{err:#}"
        );
        Settings::from_sources(None, env(&[("SECKILL_PENDING_TIMEOUT_MS", "3011")])).unwrap();
        Settings::from_sources(
            None,
            env(&[
                ("SECKILL_PENDING_TIMEOUT_MS", "1000"),
                ("SECKILL_KAFKA_DELIVERY_TIMEOUT_MS", "500"),
            ]),
        )
        .unwrap();
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
            ("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "10001"),
            ("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "-1"),
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
        assert_eq!(s.admin_token.expose_secret(), DEV_ADMIN_TOKEN);
    }

    #[test]
    fn a_short_admin_token_is_refused() {
        let err = Settings::from_sources(None, env(&[("SECKILL_ADMIN_TOKEN", "short-token")]))
            .unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("SECKILL_ADMIN_TOKEN") && err.contains("32 bytes"),
            "{err}"
        );
        let err = Settings::from_sources(None, env(&[("SECKILL_ADMIN_TOKEN", &"x".repeat(31))]))
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("SECKILL_ADMIN_TOKEN"),
            "{err:#}"
        );
        let s =
            Settings::from_sources(None, env(&[("SECKILL_ADMIN_TOKEN", &"x".repeat(32))])).unwrap();
        assert_eq!(s.admin_token.expose_secret().len(), 32);
        assert!(DEV_ADMIN_TOKEN.len() >= MIN_ADMIN_TOKEN_BYTES);
    }

    #[test]
    fn the_admission_secret_is_required_unless_dev_and_derived_from_nothing() {
        // An admin token and an HS256 secret do not stand in for it.
        let mut s = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_ADMIN_TOKEN", "an-admin-token-of-at-least-32-bytes"),
                (
                    "SECKILL_AUTH_HS256_SECRET",
                    "an-hs256-secret-of-at-least-32-bytes",
                ),
            ]),
        )
        .unwrap();
        let err = s.require_admission_secret(false).unwrap_err().to_string();
        assert!(
            err.contains("SECKILL_ADMISSION_SECRET must be set") && err.contains("--dev"),
            "{err}"
        );
        assert!(s.admission_secret.expose_secret().is_empty());
        s.require_admission_secret(true).unwrap();
        assert_eq!(s.admission_secret.expose_secret(), DEV_ADMISSION_SECRET);
        // A set one is kept.
        let mut s = Settings {
            admission_secret: "an-admission-secret-of-32-bytes-or-more".into(),
            ..Settings::default()
        };
        s.require_admission_secret(false).unwrap();
        assert_eq!(
            s.admission_secret.expose_secret(),
            "an-admission-secret-of-32-bytes-or-more"
        );
        let short = Settings::from_sources(None, env(&[("SECKILL_ADMISSION_SECRET", "short")]));
        assert!(format!("{:#}", short.unwrap_err()).contains("SECKILL_ADMISSION_SECRET"));
    }

    #[test]
    fn an_admission_secret_equal_to_another_secret_is_refused() {
        let same = "one-secret-of-at-least-32-bytes-long";
        let err = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_ADMIN_TOKEN", same),
                ("SECKILL_ADMISSION_SECRET", same),
            ]),
        )
        .unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("SECKILL_ADMISSION_SECRET")
                && err.contains("must differ from SECKILL_ADMIN_TOKEN"),
            "{err}"
        );
        let err = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_AUTH_HS256_SECRET", same),
                ("SECKILL_ADMISSION_SECRET", same),
            ]),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("must differ from SECKILL_AUTH_HS256_SECRET"),
            "{err:#}"
        );
        // `--dev` fills the admin token in after loading: the same check then.
        let mut s = Settings {
            admission_secret: DEV_ADMIN_TOKEN.into(),
            ..Settings::default()
        };
        s.require_admin_token(true).unwrap();
        assert!(s.require_admission_secret(true).is_err());
        assert_ne!(DEV_ADMISSION_SECRET, DEV_ADMIN_TOKEN);
        assert_ne!(DEV_ADMISSION_SECRET, DEV_AUTH_HS256_SECRET);
    }

    #[test]
    fn buyer_keys_are_required_and_no_auth_needs_dev() {
        let mut s = Settings::default();
        assert!(s.require_auth(false).is_err(), "no key");
        s.require_auth(true).unwrap();
        assert_eq!(s.auth_hs256_secret.expose_secret(), DEV_AUTH_HS256_SECRET);
        let mut s = Settings {
            auth_jwks_file: "keys.json".into(),
            ..Settings::default()
        };
        s.require_auth(false).unwrap();
        let mut none = Settings {
            auth_mode: AuthMode::None,
            ..Settings::default()
        };
        assert!(none.require_auth(false).is_err(), "none without --dev");
        none.require_auth(true).unwrap();
        let env = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
        let short = Settings::from_sources(None, env("SECKILL_AUTH_HS256_SECRET", "too-short"));
        assert!(format!("{:#}", short.unwrap_err()).contains("SECKILL_AUTH_HS256_SECRET"));
        let proxies = Settings::from_sources(
            None,
            env("SECKILL_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.1"),
        )
        .unwrap();
        assert_eq!(proxies.trusted_proxies().unwrap().len(), 2);
        let bad = Settings::from_sources(None, env("SECKILL_TRUSTED_PROXIES", "10.0.0.0/8,nope"));
        assert!(format!("{:#}", bad.unwrap_err()).contains("SECKILL_TRUSTED_PROXIES"));
        assert_eq!(
            Settings::from_sources(None, env("SECKILL_AUTH_MODE", "none"))
                .unwrap()
                .auth_mode,
            AuthMode::None
        );
    }

    #[test]
    fn printed_config_redacts_secrets() {
        let s = Settings {
            admin_token: "hunter2".into(),
            auth_hs256_secret: "jwt-secret-hunter3-of-32-bytes-long".into(),
            ..Settings::default()
        };
        let out = s.redacted_toml();
        assert!(!out.contains("hunter2"));
        assert!(!out.contains("hunter3"), "{out}");
        assert!(!format!("{s:?}").contains("hunter3"));
        assert!(!out.contains(":seckill@"), "{out}");
        assert!(out.contains("mysql://seckill:<redacted>@127.0.0.1:3306/seckill"));
    }

    #[test]
    fn debug_prints_no_secret() {
        let s = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_ADMIN_TOKEN", "tok-hunter2-admin-token-of-32-bytes"),
                ("SECKILL_MYSQL_URL", "mysql://app:pw-s3cr3t@db:3306/shop"),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.admin_token.expose_secret(),
            "tok-hunter2-admin-token-of-32-bytes"
        );
        assert_eq!(
            s.mysql_url.expose_secret(),
            "mysql://app:pw-s3cr3t@db:3306/shop"
        );
        for shown in [format!("{s:?}"), format!("{s:#?}")] {
            assert!(!shown.contains("tok-hunter2"), "{shown}");
            assert!(!shown.contains("pw-s3cr3t"), "{shown}");
            assert!(shown.contains("REDACTED"), "{shown}");
        }
        let printed = s.redacted_toml();
        assert!(!printed.contains("tok-hunter2") && !printed.contains("pw-s3cr3t"));
    }

    #[test]
    fn environment_text_is_kept_as_written() {
        // figment's `Env` would read these as numbers or arrays; a string setting keeps them.
        let s = Settings::from_sources(
            None,
            env(&[
                ("SECKILL_ADMIN_TOKEN", "0123456789012345678901234567890123"),
                ("SECKILL_NAMESPACE", "007"),
                ("SECKILL_CHAOS_FAIL_USERS", "6"),
                ("SECKILL_KAFKA_TOPIC", "1.50"),
                ("SECKILL_WORKER_GROUP", "[g]"),
                ("SECKILL_ZK_HOSTS", " \"zk:2181\" "),
                ("SECKILL_RATE_LIMIT_BURST", " 3 "),
                ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "2"),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.admin_token.expose_secret(),
            "0123456789012345678901234567890123"
        );
        assert_eq!(s.namespace, "007");
        assert_eq!(s.chaos_fail_users().unwrap(), HashSet::from([6]));
        assert_eq!(s.kafka_topic, "1.50");
        assert_eq!(s.worker_group, "[g]");
        assert_eq!(s.zk_hosts, "\"zk:2181\"");
        assert_eq!(s.rate_limit_burst, 3);
        assert_eq!(s.rate_limit_per_user_per_sec, 2.0);
    }

    #[test]
    fn unknown_environment_variables_are_left_alone() {
        let s = Settings::from_sources(
            None,
            env(&[("SECKILL_NOT_A_SETTING", "[x"), ("SECKILL_BASE", "1")]),
        )
        .unwrap();
        assert_same(&s, &Settings::default());
    }

    #[test]
    fn modes_and_formats_are_enums() {
        let s = Settings::from_sources(
            Some("gateway_mode = \"sync\"\n"),
            env(&[("SECKILL_LOG_FORMAT", "pretty")]),
        )
        .unwrap();
        assert_eq!(s.gateway_mode, GatewayMode::Sync);
        assert_eq!(s.log_format, LogFormat::Pretty);
        let printed = s.redacted_toml();
        assert!(printed.contains("gateway_mode = \"sync\"\n"), "{printed}");
        assert!(printed.contains("log_format = \"pretty\"\n"), "{printed}");
        for (name, bad) in [
            ("SECKILL_GATEWAY_MODE", "SYNC"),
            ("SECKILL_GATEWAY_MODE", "kafka"),
            ("SECKILL_LOG_FORMAT", "text"),
        ] {
            let err = Settings::from_sources(None, env(&[(name, bad)])).unwrap_err();
            assert!(err.to_string().contains(name), "{name}={bad}: {err}");
        }
        let err = Settings::from_sources(Some("log_format = \"text\""), env(&[])).unwrap_err();
        assert!(err.to_string().contains("log_format"), "{err}");
    }

    #[test]
    fn file_errors_name_the_setting() {
        let err = Settings::from_sources(Some("worker_batch_size = \"x\""), env(&[])).unwrap_err();
        assert!(err.to_string().contains("worker_batch_size"), "{err}");
        let err = Settings::from_sources(Some("worker_batch_size = "), env(&[])).unwrap_err();
        assert!(err.to_string().contains("config file"), "{err}");
    }

    #[test]
    fn durations() {
        let s = Settings::default();
        assert_eq!(s.ticket_ttl(), Duration::from_secs(86_400));
        assert_eq!(s.http_client_request_timeout(), Duration::from_secs(5));
        assert_eq!(s.worker_batch_linger(), Duration::from_millis(20));
        assert_eq!(s.chaos_delay(), Duration::ZERO);
        assert_eq!(s.pending_timeout(), Duration::from_secs(30));
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
        assert_same(
            &Settings::from_sources(Some(text), Vec::new()).unwrap(),
            &Settings::default(),
        );
    }
}
