//! Configuration: defaults, then an optional TOML file, then `SECKILL_*` environment variables,
//! layered by [figment] (see `load`).
//!
//! [`Settings`] is made of sections, one per part of the system ([`RedisSettings`],
//! [`KafkaSettings`], [`GatewaySettings`], …). A component is built from its own section only;
//! the two binaries' startup code is what holds the whole of [`Settings`].
//!
//! The file and the environment stay flat: each setting has one name, its TOML key, and its
//! environment variable is `SECKILL_` followed by that name in upper case, so the Redis
//! section's `url` is `redis_url` in the file and `SECKILL_REDIS_URL` in the environment. A
//! section's fields are its settings' names without the section's prefix
//! ([`Section::PREFIX`]), save the few it lists in [`Section::RENAMED`]. See
//! `config.example.toml` for every setting.
//!
//! Each section states its limits on its fields (`#[garde(...)]`), checked at load; what
//! spans sections is in [`Settings::validate`].
//!
//! Secrets (the admin token, the HS256 and admission secrets, the webhook secret, and the
//! MySQL and Redis URLs, which may hold passwords) are [`SecretString`]s: `{:?}` prints them as
//! `[REDACTED]`, and `--print-config` ([`Settings::redacted_toml`]) redacts them too. Read one
//! with [`ExposeSecret::expose_secret`].

mod gateway;
mod load;
mod sale;
mod stores;
#[cfg(test)]
mod tests;
mod topology;
mod worker;

use anyhow::{anyhow, bail};
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize, Serializer};
use std::collections::HashSet;

pub use gateway::{AdminSettings, AuthMode, AuthSettings, GatewayMode, GatewaySettings};
pub use sale::{PaymentSettings, WaitingRoomSettings, MAX_PAYMENT_WINDOW_SECS};
pub use stores::{
    KafkaSettings, MysqlSettings, RedisSettings, ZooKeeperSettings, HEARTBEAT_INTERVAL_MS,
};
pub use topology::Topology;
pub use worker::{ChaosSettings, WorkerSettings};

/// Environment variables that configure the system start with this.
pub const ENV_PREFIX: &str = "SECKILL_";

/// The admin token `--dev` uses when none is set.
pub const DEV_ADMIN_TOKEN: &str = "dev-admin-token-for-local-use-only";

/// The admission-token secret `--dev` uses when none is set.
pub const DEV_ADMISSION_SECRET: &str = "dev-admission-secret-for-local-use-only";

/// The HS256 secret `--dev` uses when no buyer-token key is set.
pub const DEV_AUTH_HS256_SECRET: &str = "dev-hs256-secret-for-local-use-only!";

/// The shortest admin token accepted.
pub const MIN_ADMIN_TOKEN_BYTES: usize = 32;

/// The shortest HS256 secret accepted (RFC 7518 §3.2: at least the hash's size).
pub const MIN_HS256_SECRET_BYTES: usize = 32;

/// How logs are written to stderr.
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
pub enum LogFormat {
    /// One JSON object a line.
    #[default]
    Json,
    /// Compact, human-readable lines.
    Pretty,
}

/// Every setting, in sections. There is deliberately no `PartialEq`: it holds secrets.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// What every process shares: the namespace and the log format.
    pub common: CommonSettings,
    pub redis: RedisSettings,
    pub mysql: MysqlSettings,
    pub kafka: KafkaSettings,
    pub zookeeper: ZooKeeperSettings,
    pub admin: AdminSettings,
    pub auth: AuthSettings,
    pub gateway: GatewaySettings,
    pub worker: WorkerSettings,
    pub payment: PaymentSettings,
    pub waiting_room: WaitingRoomSettings,
    pub chaos: ChaosSettings,
}

/// One section of [`Settings`]: its fields are settings, loaded from the flat file and
/// environment by their names (each field's `#[serde(rename)]`), and checked by the limits
/// its fields state (`#[garde(...)]`).
pub trait Section: Serialize + DeserializeOwned + Default + garde::Validate<Context = ()> {
    /// Its heading in `--print-config`.
    const TITLE: &'static str;
    /// A field's setting is this followed by the field's name…
    const PREFIX: &'static str;
    /// …save these `(field, setting)`.
    const RENAMED: &'static [(&'static str, &'static str)] = &[];

    /// The setting a field of this section holds.
    fn setting(field: &str) -> String {
        match Self::RENAMED.iter().find(|(f, _)| *f == field) {
            Some((_, setting)) => (*setting).to_owned(),
            None => format!("{}{field}", Self::PREFIX),
        }
    }

    /// Every limit the fields state, as one line per broken limit, naming the variable.
    fn check(&self) -> Vec<String> {
        match garde::Validate::validate(self) {
            Ok(()) => Vec::new(),
            Err(report) => report
                .iter()
                .map(|(path, error)| {
                    let setting = Self::setting(&path.to_string());
                    format!("{ENV_PREFIX}{}: {error}", setting.to_ascii_uppercase())
                })
                .collect(),
        }
    }
}

/// What every process shares.
#[derive(Debug, Clone, Serialize, Deserialize, garde::Validate)]
#[serde(default)]
pub struct CommonSettings {
    /// Prefixes Redis keys and the ZooKeeper root, so that several systems share servers.
    #[garde(pattern(r"^[A-Za-z0-9_-]{1,64}$"))]
    pub namespace: String,
    /// Log format: `json` or `pretty`.
    #[garde(skip)]
    pub log_format: LogFormat,
    /// With traces on (`OTEL_EXPORTER_OTLP_ENDPOINT`), an order slower than this from its
    /// reservation to its settlement, or a request slower than this, keeps its trace whatever
    /// the sampler says; so does every failed one.
    #[garde(range(min = 1, max = 3_600_000))]
    pub trace_slow_ms: u64,
}

impl CommonSettings {
    pub fn trace_slow(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.trace_slow_ms)
    }
}

impl Default for CommonSettings {
    fn default() -> Self {
        Self {
            namespace: "seckill".into(),
            log_format: LogFormat::Json,
            trace_slow_ms: 2_000,
        }
    }
}

impl Section for CommonSettings {
    const TITLE: &'static str = "Common";
    const PREFIX: &'static str = "";
}

/// Calls `$visit!(field, Type)` for each section of [`Settings`], in print order.
macro_rules! for_each_section {
    ($visit:ident) => {
        $visit!(common, CommonSettings);
        $visit!(redis, RedisSettings);
        $visit!(mysql, MysqlSettings);
        $visit!(kafka, KafkaSettings);
        $visit!(zookeeper, ZooKeeperSettings);
        $visit!(admin, AdminSettings);
        $visit!(auth, AuthSettings);
        $visit!(gateway, GatewaySettings);
        $visit!(worker, WorkerSettings);
        $visit!(payment, PaymentSettings);
        $visit!(waiting_room, WaitingRoomSettings);
        $visit!(chaos, ChaosSettings);
    };
}
pub(crate) use for_each_section;

impl Settings {
    /// Loads defaults, then `file` (TOML) if given, then the process environment.
    pub fn load(file: Option<&std::path::Path>) -> anyhow::Result<Self> {
        load::from_process(file)
    }

    /// The layering itself, from explicit sources so that tests need no process environment.
    /// `env` holds whole variable names (`SECKILL_REDIS_URL`); others are ignored. Names are
    /// matched regardless of case.
    pub fn from_sources(
        file: Option<&str>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Self> {
        load::from_sources(file, env)
    }

    /// Every setting's TOML key.
    pub fn keys() -> Vec<String> {
        let mut keys = Vec::new();
        macro_rules! keys_of {
            ($field:ident, $section:ty) => {
                keys.extend(table(&<$section>::default()).keys().cloned());
            };
        }
        for_each_section!(keys_of);
        keys
    }

    /// Every setting's environment variable name.
    pub fn env_names() -> Vec<String> {
        Self::keys()
            .iter()
            .map(|k| format!("{ENV_PREFIX}{}", k.to_ascii_uppercase()))
            .collect()
    }

    /// Every section's own limits, then what spans sections. Each error names the setting.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut errors = Vec::new();
        macro_rules! check {
            ($field:ident, $section:ty) => {
                errors.extend(Section::check(&self.$field));
            };
        }
        for_each_section!(check);
        if let Err(e) = self.redis.topology() {
            errors.push(format!("{ENV_PREFIX}REDIS_URL: {e}"));
        }
        // The sweeper fails a pending ticket with no known Kafka location at this age. The
        // gateway learns the location up to the delivery timeout after the reservation, and
        // then holds it up to HOLD_LOCATED_MS for a buyer to ride with: a shorter timeout
        // could fail an order Kafka is still taking, whose buyer then holds a 202 for a
        // failed ticket. (Gateways and workers must share these settings to agree.)
        // Only against a delivery timeout that is itself valid: one out of range is already
        // reported, and adding to it could overflow.
        let kafka_ok = Section::check(&self.kafka).is_empty();
        if kafka_ok
            && self.worker.pending_timeout_ms
                <= self
                    .kafka
                    .delivery_timeout_ms
                    .saturating_add(crate::domain::HOLD_LOCATED_MS)
        {
            errors.push(format!("{ENV_PREFIX}PENDING_TIMEOUT_MS: must exceed kafka_delivery_timeout_ms plus 10 ms (the hold of a Kafka location)"));
        }
        if let Err(e) = self.check_admission_secret_is_its_own() {
            errors.push(e.to_string());
        }
        match errors.is_empty() {
            true => Ok(()),
            false => Err(anyhow!(errors.join("\n"))),
        }
    }

    /// Applies `--dev`: a missing admin token becomes the dev token. Without `--dev` a missing
    /// token is an error.
    pub fn require_admin_token(&mut self, dev: bool) -> anyhow::Result<()> {
        if self.admin.token.expose_secret().is_empty() {
            if !dev {
                bail!("{ENV_PREFIX}ADMIN_TOKEN must be set: at least 32 bytes, e.g. `openssl rand -hex 32` (or pass --dev to use a development token)");
            }
            tracing::warn!("--dev: using the development admin token {DEV_ADMIN_TOKEN:?}; never do this in production");
            self.admin.token = DEV_ADMIN_TOKEN.into();
        }
        Ok(())
    }

    /// Applies `--dev` to the waiting rooms' admission secret (the gateway signs admissions
    /// with it; every gateway needs the same): a missing one becomes
    /// [`DEV_ADMISSION_SECRET`] with `--dev`, and is an error without. Nothing is derived from
    /// another secret.
    pub fn require_admission_secret(&mut self, dev: bool) -> anyhow::Result<()> {
        if self
            .waiting_room
            .admission_secret
            .expose_secret()
            .is_empty()
        {
            if !dev {
                bail!("{ENV_PREFIX}ADMISSION_SECRET must be set: at least 32 bytes, the same on every gateway, not the admin token (or pass --dev to use a development secret)");
            }
            tracing::warn!("--dev: signing admission tokens with the development secret; never do this in production");
            self.waiting_room.admission_secret = DEV_ADMISSION_SECRET.into();
        }
        self.check_admission_secret_is_its_own()
    }

    /// The admission secret (when set) is neither the admin token nor the HS256 secret: each
    /// secret signs or opens one thing only.
    fn check_admission_secret_is_its_own(&self) -> anyhow::Result<()> {
        let admission = self.waiting_room.admission_secret.expose_secret();
        if admission.is_empty() {
            return Ok(());
        }
        if admission == self.admin.token.expose_secret() {
            bail!("{ENV_PREFIX}ADMISSION_SECRET: must differ from {ENV_PREFIX}ADMIN_TOKEN");
        }
        if admission == self.auth.hs256_secret.expose_secret() {
            bail!("{ENV_PREFIX}ADMISSION_SECRET: must differ from {ENV_PREFIX}AUTH_HS256_SECRET");
        }
        Ok(())
    }

    /// Applies `--dev` to buyer authentication. `auth_mode = "none"` needs `--dev`; with no key
    /// set, `--dev` uses [`DEV_AUTH_HS256_SECRET`] and anything else is an error.
    pub fn require_auth(&mut self, dev: bool) -> anyhow::Result<()> {
        let auth = &mut self.auth;
        match auth.mode {
            AuthMode::None if !dev => {
                bail!("{ENV_PREFIX}AUTH_MODE=none trusts the body's user_id and needs --dev")
            }
            AuthMode::None => {
                tracing::warn!("--dev with {ENV_PREFIX}AUTH_MODE=none: buyers are not authenticated; anyone can buy as anyone");
            }
            AuthMode::Jwt
                if auth.hs256_secret.expose_secret().is_empty() && auth.jwks_file.is_empty() =>
            {
                if !dev {
                    bail!("set {ENV_PREFIX}AUTH_HS256_SECRET or {ENV_PREFIX}AUTH_JWKS_FILE (or {ENV_PREFIX}AUTH_MODE=none with --dev)");
                }
                tracing::warn!("--dev: signing buyer tokens with the development HS256 secret; never do this in production");
                auth.hs256_secret = DEV_AUTH_HS256_SECRET.into();
            }
            AuthMode::Jwt => {}
        }
        Ok(())
    }

    /// The effective settings as TOML, one commented heading a section, with secrets redacted
    /// (what `--print-config` prints). The keys are the flat names a file takes.
    pub fn redacted_toml(&self) -> String {
        let mut out = String::new();
        macro_rules! print_section {
            ($field:ident, $section:ty) => {
                out.push_str(&format!("# {}\n", <$section as Section>::TITLE));
                out.push_str(&toml::to_string(&self.$field).expect("settings serialise to TOML"));
                out.push('\n');
            };
        }
        for_each_section!(print_section);
        out.truncate(out.trim_end().len() + 1);
        out
    }
}

/// A section as a TOML table (redacted: secrets never leave through `Serialize`).
fn table(section: &impl Serialize) -> toml::Table {
    toml::Table::try_from(section).expect("settings serialise")
}

/// `scheme://user:password@host` → `scheme://user:<redacted>@host`. Userinfo without a `:`
/// but with an `@` of its own (`user@secret@host`) cannot be told apart: all of it is redacted.
fn redact_url_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        if let Some((creds, host)) = rest.rsplit_once('@') {
            if let Some((user, _)) = creds.split_once(':') {
                return format!("{scheme}://{user}:<redacted>@{host}");
            }
            if creds.contains('@') {
                return format!("{scheme}://<redacted>@{host}");
            }
        }
    }
    url.to_owned()
}

/// A secret URL for `Serialize`, its password redacted.
fn redacted_secret_url<S: Serializer>(url: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&redact_url_password(url.expose_secret()))
}

/// `<redacted>`, or `""` for a token that is not set (so that `--print-config` shows it is not).
fn redacted_token<S: Serializer>(token: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(if token.expose_secret().is_empty() {
        ""
    } else {
        "<redacted>"
    })
}

/// Limits on settings, for `#[garde(custom(...))]`.
mod rules {
    use super::*;

    /// A secret that, when set, is at least `MIN` bytes.
    pub fn secret_at_least<const MIN: usize>(secret: &SecretString, _: &()) -> garde::Result {
        let len = secret.expose_secret().len();
        match len == 0 || len >= MIN {
            true => Ok(()),
            false => Err(garde::Error::new(format!(
                "must be at least {MIN} bytes (e.g. `openssl rand -hex 32`)"
            ))),
        }
    }

    /// `host:port`.
    pub fn socket_addr(addr: &str, _: &()) -> garde::Result {
        addr.parse::<std::net::SocketAddr>()
            .map(drop)
            .map_err(|_| garde::Error::new("must be host:port, e.g. 127.0.0.1:8080"))
    }

    /// Not empty once trimmed.
    pub fn not_blank(text: &str, _: &()) -> garde::Result {
        match text.trim().is_empty() {
            true => Err(garde::Error::new("must not be empty")),
            false => Ok(()),
        }
    }

    /// A finite number (garde's `range` lets NaN through).
    pub fn finite(n: &f64, _: &()) -> garde::Result {
        match n.is_finite() {
            true => Ok(()),
            false => Err(garde::Error::new("must be a number")),
        }
    }

    /// 0 (off), or within `MIN..=MAX`.
    pub fn off_or<const MIN: u64, const MAX: u64>(n: &u64, _: &()) -> garde::Result {
        match *n == 0 || (MIN..=MAX).contains(n) {
            true => Ok(()),
            false => Err(garde::Error::new(format!(
                "must be 0 (off) or {MIN}..={MAX}"
            ))),
        }
    }

    /// A comma-separated list of user ids.
    pub fn user_list(text: &str, _: &()) -> garde::Result {
        super::user_list(text).map(drop).map_err(garde::Error::new)
    }
}

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
