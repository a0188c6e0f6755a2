//! Layering: defaults, then the TOML file, then the `SECKILL_*` environment, each section
//! extracted from the same flat keys.

use super::{for_each_section, Settings, ENV_PREFIX};
use super::{
    AdminSettings, AuthSettings, ChaosSettings, CommonSettings, GatewaySettings, KafkaSettings,
    MysqlSettings, PaymentSettings, RedisSettings, WaitingRoomSettings, WorkerSettings,
    ZooKeeperSettings,
};
use anyhow::{anyhow, Context};
use figment::error::{Kind, OneOf};
use figment::providers::{Env, Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use std::collections::BTreeSet;

/// Loads defaults, then `file` (TOML) if given, then the process environment (figment's
/// [`Env::prefixed`]).
pub(super) fn from_process(file: Option<&std::path::Path>) -> anyhow::Result<Settings> {
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
    layered(file_text.as_deref(), EnvLayer::new(vars))
}

/// See [`Settings::from_sources`].
pub(super) fn from_sources(
    file: Option<&str>,
    env: impl IntoIterator<Item = (String, String)>,
) -> anyhow::Result<Settings> {
    let env = env.into_iter().filter_map(|(name, value)| {
        let prefix = name.get(..ENV_PREFIX.len())?;
        prefix.eq_ignore_ascii_case(ENV_PREFIX).then_some(())?;
        Some((name[ENV_PREFIX.len()..].to_ascii_lowercase(), value))
    });
    layered(file, EnvLayer::new(env))
}

/// Defaults (each section's `Default`, through `#[serde(default)]`), then the file, then the
/// environment, then [`Settings::validate`].
fn layered(file: Option<&str>, env: EnvLayer) -> anyhow::Result<Settings> {
    let mut figment = Figment::new();
    if let Some(text) = file {
        check_file_keys(text)?;
        figment = figment.merge(Toml::string(text));
    }
    let figment = figment.merge(env);
    // Lossy: an environment value is text, and `SECKILL_WORKER_BATCH_SIZE=9` is a number
    // because the setting is one (see `EnvLayer`). The file may thereby quote a number too.
    let mut errors = Vec::new();
    let mut settings = Settings::default();
    macro_rules! extract {
        ($field:ident, $section:ty) => {
            match figment.extract_lossy::<$section>() {
                Ok(section) => settings.$field = section,
                Err(e) => errors.extend(explain(e)),
            }
        };
    }
    for_each_section!(extract);
    if !errors.is_empty() {
        return Err(anyhow!(errors.join("\n")));
    }
    settings.validate()?;
    Ok(settings)
}

/// The file is TOML, and every key in it is a setting.
fn check_file_keys(text: &str) -> anyhow::Result<()> {
    let table: toml::Table = text.parse().map_err(|e| anyhow!("config file: {e}"))?;
    let known: BTreeSet<String> = Settings::keys().into_iter().collect();
    let unknown: Vec<String> = table
        .keys()
        .filter(|key| !known.contains(*key))
        .map(|key| format!("config file: unknown setting `{key}`"))
        .collect();
    match unknown.is_empty() {
        true => Ok(()),
        false => Err(anyhow!(unknown.join("\n"))),
    }
}

/// Names the environment layer in figment's errors.
const ENV_SOURCE: &str = "`SECKILL_` environment variable(s)";

/// The `SECKILL_*` layer: `(setting, value)` pairs, the setting in lower case without the
/// prefix. Variables that name no setting (a script's own `SECKILL_*`, say) are left alone.
///
/// Each value stays the text it is (trimmed). figment's own [`Env`] provider parses values
/// first, which would turn an admin token or namespace `0123`, or `SECKILL_CHAOS_FAIL_USERS=6`,
/// into a number: a string setting would then fail to load or change. Extraction is lossy
/// instead (see [`layered`]), so text becomes a number where the setting is one.
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
/// `SECKILL_WORKER_BATCH_SIZE: invalid type: …` or `config file: worker_batch_size: …`.
fn explain(errors: figment::Error) -> Vec<String> {
    errors
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
                _ if from_env && !key.is_empty() => {
                    format!("{ENV_PREFIX}{}: {kind}", key.to_ascii_uppercase())
                }
                _ if !key.is_empty() => format!("config file: {key}: {kind}"),
                _ => format!("config file: {kind}"),
            }
        })
        .collect()
}
