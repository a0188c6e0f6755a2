//! Where the subcommands that read the stores directly (`audit`, `expiry`) find them.

use anyhow::Context;
use seckill_shared::Settings;
use secrecy::ExposeSecret;

/// The Redis URL, the MySQL URL and the namespace: each from its flag, else from the
/// `SECKILL_*` environment (as the gateway and the worker read it).
#[derive(Debug, Clone)]
pub struct Stores {
    pub redis_url: String,
    pub mysql_url: String,
    pub namespace: String,
}

impl Stores {
    pub fn resolve(
        redis_url: Option<&str>,
        mysql_url: Option<&str>,
        namespace: Option<&str>,
    ) -> anyhow::Result<Self> {
        let settings = Settings::load(None);
        let from_env = |what: &str| -> anyhow::Result<&Settings> {
            settings
                .as_ref()
                .map_err(|e| anyhow::anyhow!("{e:#}"))
                .with_context(|| format!("loading settings for the {what} (or pass it as a flag)"))
        };
        Ok(Self {
            redis_url: match redis_url {
                Some(u) => u.to_owned(),
                None => from_env("Redis URL")?.redis.url.expose_secret().to_owned(),
            },
            mysql_url: match mysql_url {
                Some(u) => u.to_owned(),
                None => from_env("MySQL URL")?.mysql.url.expose_secret().to_owned(),
            },
            namespace: match namespace {
                Some(n) => n.to_owned(),
                None => from_env("namespace")?.common.namespace.clone(),
            },
        })
    }
}
