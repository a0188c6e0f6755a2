//! The gateway's sections: its HTTP server and limits, admin access, and buyer identity.

use super::{redacted_token, rules, Section, MIN_ADMIN_TOKEN_BYTES, MIN_HS256_SECRET_BYTES};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How the gateway settles a buy.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum GatewayMode {
    /// The order goes through Kafka to the workers; the buyer polls the ticket.
    #[default]
    Async,
    /// The request waits while the gateway settles the order in MySQL itself.
    Sync,
}

/// How the gateway knows who a buyer is.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    strum::Display,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum AuthMode {
    /// A signed JWT (`Authorization: Bearer`): the buyer is its `sub` claim.
    #[default]
    Jwt,
    /// No authentication: the body's `user_id` is trusted. Only with `--dev`.
    None,
}

/// The gateway: its HTTP server, the buy path's limits and the sold-out markers' lifetime.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct GatewaySettings {
    /// `async` (Kafka, the default) or `sync` (the request waits for MySQL).
    #[serde(rename = "gateway_mode")]
    #[garde(skip)]
    pub mode: GatewayMode,
    /// Where the HTTP API listens.
    #[garde(custom(rules::socket_addr))]
    pub http_addr: String,
    /// actix worker threads; 0 means one per core.
    #[garde(range(max = 256))]
    pub http_workers: usize,
    /// A client has this long after connecting to send its request's head (method, path and
    /// headers); a client that is slower, or sends nothing, gets `408` and is disconnected.
    /// actix reads the time from a clock it updates every 500 ms, so a client may get up to
    /// 500 ms less.
    #[garde(range(min = 1000, max = 300_000))]
    pub http_client_request_timeout_ms: u64,
    /// Most connections each actix worker thread holds open at once. At the limit the
    /// gateway stops accepting (new connections wait in the listen backlog) until one closes.
    #[garde(range(min = 1, max = 1_000_000))]
    pub http_max_connections: usize,
    /// A local sold-out marker is dropped after this long at the latest.
    #[garde(range(min = 1))]
    pub sold_out_ttl_ms: u64,
    /// Requests to the buyer endpoints each client address may make per second, per gateway
    /// process, checked before the token; 0 turns the limit off.
    #[garde(skip)]
    pub rate_limit_per_address_per_sec: u32,
    /// Comma-separated addresses or CIDR blocks of proxies whose `X-Forwarded-For` names the
    /// client.
    #[garde(custom(valid_proxies))]
    pub trusted_proxies: String,
    /// Buys each user may make per second, refilling a token bucket shared by every gateway
    /// through Redis; 0 turns the limit off. Over the limit a buy gets `429`.
    #[garde(custom(rules::finite), range(min = 0.0, max = 1_000_000.0))]
    pub rate_limit_per_user_per_sec: f64,
    /// The size of each user's bucket: buys a user may make at once.
    #[garde(range(min = 1, max = 1_000_000))]
    pub rate_limit_burst: u64,
    /// Buys one gateway process handles at once (reservation to Kafka ack). Beyond this a
    /// buy gets `503` at once instead of queueing.
    #[garde(range(min = 1, max = 1_000_000))]
    pub max_in_flight: usize,
    /// Live streams (`…/events`) one gateway process holds open at once. Beyond this a new
    /// stream gets `503` with `Retry-After`, and the buyer polls instead.
    #[garde(range(min = 1, max = 1_000_000))]
    pub sse_max_streams: usize,
    /// Live streams one buyer may hold open at once on one gateway process. A newer one ends
    /// the buyer's oldest.
    #[garde(range(min = 1, max = 100))]
    pub sse_max_per_buyer: usize,
    /// A live stream with nothing to say sends a comment this often, so that proxies and load
    /// balancers do not close it as idle, and reads its state once again.
    #[garde(range(min = 1, max = 300))]
    pub sse_heartbeat_secs: u64,
}

impl Default for GatewaySettings {
    fn default() -> Self {
        Self {
            mode: GatewayMode::Async,
            http_addr: "127.0.0.1:8080".into(),
            http_workers: 0,
            http_client_request_timeout_ms: 5000,
            http_max_connections: 50_000,
            sold_out_ttl_ms: 5000,
            rate_limit_per_address_per_sec: 100,
            trusted_proxies: String::new(),
            rate_limit_per_user_per_sec: 5.0,
            rate_limit_burst: 10,
            max_in_flight: 2048,
            sse_max_streams: 20_000,
            sse_max_per_buyer: 4,
            sse_heartbeat_secs: 15,
        }
    }
}

impl Section for GatewaySettings {
    const TITLE: &'static str = "Gateway";
    const PREFIX: &'static str = "";
    const RENAMED: &'static [(&'static str, &'static str)] = &[("mode", "gateway_mode")];
}

impl GatewaySettings {
    /// [`GatewaySettings::trusted_proxies`], parsed.
    pub fn trusted_proxies(&self) -> Result<Vec<ipnet::IpNet>, String> {
        parse_proxies(&self.trusted_proxies)
    }

    /// Whether the per-user rate limit is on.
    pub fn rate_limit_enabled(&self) -> bool {
        self.rate_limit_per_user_per_sec > 0.0
    }

    pub fn sold_out_ttl(&self) -> Duration {
        Duration::from_millis(self.sold_out_ttl_ms)
    }

    pub fn http_client_request_timeout(&self) -> Duration {
        Duration::from_millis(self.http_client_request_timeout_ms)
    }
}

fn parse_proxies(text: &str) -> Result<Vec<ipnet::IpNet>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<ipnet::IpNet>()
                .or_else(|_| s.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| format!("{s:?} is not an address or CIDR block"))
        })
        .collect()
}

fn valid_proxies(text: &str, _: &()) -> garde::Result {
    parse_proxies(text).map(drop).map_err(garde::Error::new)
}

/// The admin API (`/admin`), on the gateway and the worker.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct AdminSettings {
    /// Bearer token for `/admin`, at least 32 bytes. Required unless the binary runs with
    /// `--dev`. Secret.
    #[serde(rename = "admin_token", serialize_with = "redacted_token")]
    #[garde(custom(rules::secret_at_least::<MIN_ADMIN_TOKEN_BYTES>))]
    pub token: SecretString,
    /// Gateway: wrong admin tokens each client address may send per minute (a burst of this
    /// many, then one more every `60 / n` seconds). Past it, every admin request from that
    /// address gets `429`, even with the right token, until one more failure would be
    /// allowed. 0 turns the limit off.
    #[serde(rename = "admin_auth_failures_per_min")]
    #[garde(range(max = 10_000))]
    pub auth_failures_per_min: u32,
}

impl Default for AdminSettings {
    fn default() -> Self {
        Self {
            token: SecretString::default(),
            auth_failures_per_min: 10,
        }
    }
}

impl Section for AdminSettings {
    const TITLE: &'static str = "Admin";
    const PREFIX: &'static str = "admin_";
}

/// Buyer identity: how the gateway checks a buyer's token.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct AuthSettings {
    /// `jwt` (the default: buyers send a signed token) or `none` (the body's `user_id` is
    /// trusted; only with `--dev`).
    #[serde(rename = "auth_mode")]
    #[garde(skip)]
    pub mode: AuthMode,
    /// The shared secret for HS256 buyer tokens, at least 32 bytes. Secret.
    #[serde(rename = "auth_hs256_secret", serialize_with = "redacted_token")]
    #[garde(custom(rules::secret_at_least::<MIN_HS256_SECRET_BYTES>))]
    pub hs256_secret: SecretString,
    /// A JWKS file of public keys (EdDSA/Ed25519, ES256, RS256) for buyer tokens, selected by
    /// `kid`. A changed file is picked up without a restart.
    #[serde(rename = "auth_jwks_file")]
    #[garde(skip)]
    pub jwks_file: String,
    /// When set, a token's `iss` must equal it.
    #[serde(rename = "auth_issuer")]
    #[garde(skip)]
    pub issuer: String,
    /// When set, a token's `aud` must contain it.
    #[serde(rename = "auth_audience")]
    #[garde(skip)]
    pub audience: String,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    #[serde(rename = "auth_leeway_secs")]
    #[garde(range(max = 3600))]
    pub leeway_secs: u64,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            mode: AuthMode::Jwt,
            hs256_secret: SecretString::default(),
            jwks_file: String::new(),
            issuer: String::new(),
            audience: String::new(),
            leeway_secs: 30,
        }
    }
}

impl Section for AuthSettings {
    const TITLE: &'static str = "Buyer identity";
    const PREFIX: &'static str = "auth_";
}
