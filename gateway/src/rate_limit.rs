//! Per-user rate limit of the buy path: a token bucket per user in Redis, so that every
//! gateway draws from the same bucket. On one Redis server the buy takes its token inside the
//! reservation script ([`RateLimiter::user_limit`]); on a Redis Cluster, whose bucket lives in
//! another slot than the product's, it is one more script call (`EVALSHA`) per buy.
//!
//! The bucket of user `U` in namespace `NS` is the string `sk:{NS:rl:U}:b` (its own Cluster
//! slot), `"<tokens> <ts>"` (`ts` on the Redis server's clock, ms). It refills at
//! `SECKILL_RATE_LIMIT_PER_USER_PER_SEC` tokens a second up to `SECKILL_RATE_LIMIT_BURST`, and
//! expires once it would be full again.

use redis::{Script, ScriptInvocation, Value};
use seckill_shared::config::GatewaySettings;
use seckill_shared::reservation::{UserLimit, TOKEN_BUCKET_LUA};
use seckill_shared::store::script::{self, RedisScript};
use seckill_shared::store::RedisConn;
use seckill_shared::UserId;
use std::sync::LazyLock;
use std::time::Duration;

/// `rate_limit.lua` (with `token_bucket.lua` prepended): one token from a user's bucket.
pub struct TakeToken<'a> {
    /// The user's bucket (`sk:{<ns>:rl:<user>}:b`).
    pub key: &'a str,
    /// Tokens per second (> 0).
    pub rate: f64,
    /// The bucket's size (>= 1).
    pub burst: u64,
}

impl RedisScript for TakeToken<'_> {
    const NAME: &'static str = "rate-limit";
    type Reply = Decision;

    fn script() -> &'static Script {
        static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
            Script::new(&format!(
                "{TOKEN_BUCKET_LUA}{}",
                include_str!("rate_limit.lua")
            ))
        });
        &SCRIPT
    }

    fn args(&self, call: &mut ScriptInvocation<'static>) {
        call.key(self.key).arg(self.rate).arg(self.burst);
    }

    /// `{1, 0}` when a token was taken, `{0, ms}` when none was.
    fn reply(value: Value) -> anyhow::Result<Decision> {
        let (allowed, wait_ms): (i64, i64) = script::parse(value)?;
        Ok(match allowed {
            1 => Decision::Allowed,
            0 => Decision::Limited {
                retry_after: Duration::from_millis(wait_ms.max(1) as u64),
            },
            other => anyhow::bail!("{other} is no reply of rate_limit.lua"),
        })
    }
}

/// What the bucket said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No token now; the next one comes after this long.
    Limited {
        retry_after: Duration,
    },
}

impl Decision {
    /// `Retry-After` in whole seconds, rounded up, at least 1.
    pub fn retry_after_secs(retry_after: Duration) -> u64 {
        retry_after.as_millis().div_ceil(1000).max(1) as u64
    }
}

pub struct RateLimiter {
    conn: RedisConn,
    namespace: String,
    /// `rl` for buys, `rlq` for waiting-room joins and polls: separate buckets.
    kind: &'static str,
    rate: f64,
    burst: u64,
}

impl RateLimiter {
    /// `None` when the limit is off (`SECKILL_RATE_LIMIT_PER_USER_PER_SEC=0`).
    pub fn new(conn: RedisConn, namespace: &str, gateway: &GatewaySettings) -> Option<Self> {
        gateway.rate_limit_enabled().then(|| Self {
            conn,
            namespace: namespace.to_owned(),
            kind: "rl",
            rate: gateway.rate_limit_per_user_per_sec,
            burst: gateway.rate_limit_burst,
        })
    }

    /// The limit of waiting-room joins and polls (`SECKILL_QUEUE_RATE_LIMIT_PER_USER_PER_SEC`,
    /// the same burst as buys, `SECKILL_RATE_LIMIT_BURST`); `None` when off.
    pub fn for_queue(conn: RedisConn, namespace: &str, per_sec: f64, burst: u64) -> Option<Self> {
        (per_sec > 0.0).then(|| Self {
            conn,
            namespace: namespace.to_owned(),
            kind: "rlq",
            rate: per_sec,
            burst,
        })
    }

    /// The limit of waiting-room joins per client address
    /// (`SECKILL_QUEUE_JOINS_PER_ADDRESS_PER_MIN`, a minute's worth as its burst); `None` when
    /// off.
    pub fn for_address_joins(conn: RedisConn, namespace: &str, per_min: u32) -> Option<Self> {
        (per_min > 0).then(|| Self {
            conn,
            namespace: namespace.to_owned(),
            kind: "rlqa",
            rate: f64::from(per_min) / 60.0,
            burst: u64::from(per_min),
        })
    }

    /// Takes one token from `address`'s bucket (an IPv6 address by its /64), if there is one.
    pub async fn check_address(&self, address: std::net::IpAddr) -> anyhow::Result<Decision> {
        let key = Self::key_of(
            &self.namespace,
            self.kind,
            crate::auth::address::limit_key(address),
        );
        let take = TakeToken {
            key: &key,
            rate: self.rate,
            burst: self.burst,
        };
        script::run(&self.conn, &take).await
    }

    /// The Redis key of a user's bucket.
    pub fn key(namespace: &str, user: UserId) -> String {
        Self::key_of(namespace, "rl", user)
    }

    fn key_of(namespace: &str, kind: &str, id: impl std::fmt::Display) -> String {
        format!("sk:{{{namespace}:{kind}:{id}}}:b")
    }

    /// The user's bucket, rate and burst, for the reservation script to take the token in
    /// the same call; `None` on a Redis Cluster (see the module docs).
    pub fn user_limit(&self, user: UserId) -> Option<UserLimit> {
        self.conn.is_single_server().then(|| UserLimit {
            key: self.bucket(user),
            rate: self.rate,
            burst: self.burst,
        })
    }

    fn bucket(&self, user: UserId) -> String {
        Self::key_of(&self.namespace, self.kind, user)
    }

    /// Takes one token from the user's bucket, if there is one.
    pub async fn check(&self, user: UserId) -> anyhow::Result<Decision> {
        let key = self.bucket(user);
        let take = TakeToken {
            key: &key,
            rate: self.rate,
            burst: self.burst,
        };
        script::run(&self.conn, &take).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let secs = |ms| Decision::retry_after_secs(Duration::from_millis(ms));
        assert_eq!(secs(1), 1);
        assert_eq!(secs(1000), 1);
        assert_eq!(secs(1001), 2);
        assert_eq!(secs(2500), 3);
    }

    #[test]
    fn the_buckets_replies_are_named_and_others_refused() {
        let reply = |a, w| TakeToken::reply(Value::Array(vec![Value::Int(a), Value::Int(w)]));
        assert_eq!(reply(1, 0).unwrap(), Decision::Allowed);
        assert_eq!(
            reply(0, 1500).unwrap(),
            Decision::Limited {
                retry_after: Duration::from_millis(1500)
            }
        );
        assert!(reply(2, 0).is_err());
    }

    #[test]
    fn keys_are_per_namespace_and_user_in_their_own_slot() {
        let user = UserId::new(42).unwrap();
        assert_eq!(RateLimiter::key("ns", user), "sk:{ns:rl:42}:b");
    }
}
