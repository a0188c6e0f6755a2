//! The sale's sections: the payment window and the waiting rooms.

use super::{redacted_token, rules, Section, MIN_HS256_SECRET_BYTES};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The longest payment window, for a product or by default: 7 days.
pub const MAX_PAYMENT_WINDOW_SECS: u64 = 7 * 86_400;

/// The payment window and the payment provider.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct PaymentSettings {
    /// The payment window of a priced product that sets none: a confirmed order must be paid
    /// within this many seconds, or a worker cancels it and its unit goes back on sale.
    /// 0 turns the window off (a confirmed order is final).
    #[serde(rename = "payment_window_secs")]
    #[garde(range(max = MAX_PAYMENT_WINDOW_SECS))]
    pub window_secs: u64,
    /// Gateway: the payment provider; a payment is `POST {url}/charges`. Empty: paying
    /// answers `503`. The gateway's HTTP client is built without TLS: reach an HTTPS provider
    /// through a local egress proxy (docs/SECURITY.md).
    #[serde(rename = "payment_provider_url")]
    #[garde(custom(valid_provider_url))]
    pub provider_url: String,
    /// Gateway: how long the provider may take to accept a charge.
    #[serde(rename = "payment_provider_timeout_ms")]
    #[garde(range(min = 100, max = 60_000))]
    pub provider_timeout_ms: u64,
    /// Gateway: a payment still waiting for the provider's callback this long after it was
    /// sent is asked about (`GET {url}/charges/{payment_id}`), and settled as the callback
    /// would have. 0 turns it off.
    #[serde(rename = "payment_reconcile_after_ms")]
    #[garde(custom(rules::off_or::<100, 86_400_000>))]
    pub reconcile_after_ms: u64,
    /// Gateway: the public address of `POST /v1/payments/callback`, sent to the provider with
    /// each charge.
    #[serde(rename = "payment_callback_url")]
    #[garde(custom(valid_callback_url))]
    pub callback_url: String,
    /// Gateway: the provider signs its callbacks with this (HMAC-SHA256). Required to accept
    /// callbacks. Secret.
    #[serde(rename = "payment_webhook_secret", serialize_with = "redacted_token")]
    #[garde(skip)]
    pub webhook_secret: SecretString,
}

fn valid_provider_url(url: &str, _: &()) -> garde::Result {
    match url.is_empty() || url.starts_with("http://") {
        true => Ok(()),
        false => Err(garde::Error::new(
            "must be empty or start with http:// (TLS through a local egress proxy)",
        )),
    }
}

fn valid_callback_url(url: &str, _: &()) -> garde::Result {
    match url.is_empty() || url.starts_with("http://") || url.starts_with("https://") {
        true => Ok(()),
        false => Err(garde::Error::new(
            "must be empty or start with http:// or https://",
        )),
    }
}

impl Default for PaymentSettings {
    fn default() -> Self {
        Self {
            window_secs: 900,
            provider_url: String::new(),
            provider_timeout_ms: 3000,
            reconcile_after_ms: 60_000,
            callback_url: String::new(),
            webhook_secret: SecretString::default(),
        }
    }
}

impl Section for PaymentSettings {
    const TITLE: &'static str = "Payment";
    const PREFIX: &'static str = "payment_";
}

impl PaymentSettings {
    pub fn provider_timeout(&self) -> Duration {
        Duration::from_millis(self.provider_timeout_ms)
    }
}

/// The waiting rooms: admission tokens and the joins' rate limit.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct WaitingRoomSettings {
    /// Gateway: admission tokens of waiting rooms are signed with this (HMAC-SHA256), so that
    /// any gateway accepts another's: the same on every gateway, at least 32 bytes, and not
    /// the admin token or the HS256 secret. Required by the gateway unless `--dev`. Secret.
    #[serde(serialize_with = "redacted_token")]
    #[garde(custom(rules::secret_at_least::<MIN_HS256_SECRET_BYTES>))]
    pub admission_secret: SecretString,
    /// Gateway: how long an admission lasts; an admitted buyer who has not bought by then
    /// gives the place up.
    #[garde(range(min = 1, max = 3600))]
    pub admission_ttl_secs: u64,
    /// Gateway: waiting-room joins and polls each buyer may make per second (a token bucket
    /// shared through Redis, like the buy limit); 0 turns it off.
    #[serde(rename = "queue_rate_limit_per_user_per_sec")]
    #[garde(custom(rules::finite), range(min = 0.0, max = 1_000_000.0))]
    pub rate_limit_per_user_per_sec: f64,
    /// Gateway: waiting-room joins each client address may make per minute, counted in Redis
    /// for the whole fleet (a bot cannot spread its accounts' joins over gateways); 0 turns it
    /// off. Behind a proxy, set `trusted_proxies`.
    #[garde(range(max = 1_000_000))]
    pub queue_joins_per_address_per_min: u32,
}

impl Default for WaitingRoomSettings {
    fn default() -> Self {
        Self {
            admission_secret: SecretString::default(),
            admission_ttl_secs: 60,
            rate_limit_per_user_per_sec: 5.0,
            queue_joins_per_address_per_min: 0,
        }
    }
}

impl Section for WaitingRoomSettings {
    const TITLE: &'static str = "Waiting room";
    const PREFIX: &'static str = "";
    const RENAMED: &'static [(&'static str, &'static str)] = &[(
        "rate_limit_per_user_per_sec",
        "queue_rate_limit_per_user_per_sec",
    )];
}
