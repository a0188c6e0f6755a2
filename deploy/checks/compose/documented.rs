//! What the compose file's comments tell its users to run: the `ha` command's variables and the
//! cluster URLs.

use crate::expected::{Host, HA_PROFILE};

/// The host of the `COMPOSE_PROFILES=ha VAR=value ... docker compose up` the text documents.
pub(crate) fn documented_ha_host(text: &str) -> Option<Host> {
    let marker = format!("COMPOSE_PROFILES={HA_PROFILE}");
    let (start, _) = text.match_indices(&marker).find(|(i, m)| {
        text[i + m.len()..]
            .chars()
            .next()
            .is_some_and(char::is_whitespace)
    })?;
    let rest = &text[start..];
    let command = &rest[..rest.find("docker compose")?];
    Some(
        command
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Every `SECKILL_REDIS_URL=redis...` that the text shows its users.
pub(crate) fn documented_redis_urls(text: &str) -> Vec<String> {
    text.match_indices("SECKILL_REDIS_URL=")
        .map(|(i, m)| &text[i + m.len()..])
        .filter(|rest| rest.starts_with("redis"))
        .map(|rest| {
            rest.split(|c: char| c.is_whitespace() || "\"'`;".contains(c))
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}
