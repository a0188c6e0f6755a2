//! Reading a compose file as compose does: scalars, environments, `${VAR}` interpolation,
//! healthchecks, dependencies, profiles, ports, mounts and addresses.

use crate::expected::{repo_root, Host, HOST_SECRETS};
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// A YAML scalar as compose reads it into a string.
pub(crate) fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `environment:` as a mapping or a list of `KEY=VALUE`; `None` for a value taken from the
/// host (`KEY:` with no value, or `- KEY`).
pub(crate) fn environment(service: &Value) -> Result<BTreeMap<String, Option<String>>, String> {
    let mut env = BTreeMap::new();
    match service.get("environment") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(map)) => {
            for (k, v) in map {
                let key = scalar(k).ok_or("environment: a key is not a string")?;
                let value = match v {
                    Value::Null => None,
                    v => Some(
                        scalar(v).ok_or_else(|| format!("environment: {key} is not a scalar"))?,
                    ),
                };
                env.insert(key, value);
            }
        }
        Some(Value::Sequence(items)) => {
            for item in items {
                let item = scalar(item).ok_or("environment: an entry is not a string")?;
                match item.split_once('=') {
                    Some((k, v)) => env.insert(k.to_string(), Some(v.to_string())),
                    None => env.insert(item, None),
                };
            }
        }
        Some(_) => return Err("environment is neither a mapping nor a list".into()),
    }
    Ok(env)
}

/// One environment value of a service, interpolated.
pub(crate) fn env_of(service: &Value, key: &str, vars: &Host) -> Option<String> {
    let value = environment(service).ok()?.remove(key)??;
    interpolate_in(&value, vars).ok()
}

/// Compose's `${VAR:-default}` interpolation, as on a host where no variable is set.
pub(crate) fn interpolate(raw: &str) -> Result<String, String> {
    interpolate_in(raw, &Host::new())
}

/// Compose's `${VAR:-default}` interpolation, on a host with `vars` set.
pub(crate) fn interpolate_in(raw: &str, vars: &Host) -> Result<String, String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = r
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    depth == 0
                })
                .map(|(j, _)| j)
                .ok_or_else(|| format!("unclosed `${{` in {raw:?}"))?;
            let expr = &r[..end];
            rest = &r[end + 1..];
            let (name, op) = expr.split_at(expr.find(|c| !is_name(c)).unwrap_or(expr.len()));
            if name.is_empty() {
                return Err(format!("bad `${{{expr}}}` in {raw:?}"));
            }
            // With a colon, an empty value counts as unset.
            let value = vars.get(name).map(String::as_str);
            let set = value.is_some_and(|v| !op.starts_with(':') || !v.is_empty());
            if let Some(default) = op.strip_prefix(":-").or_else(|| op.strip_prefix('-')) {
                match value.filter(|_| set) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&interpolate_in(default, vars)?),
                }
            } else if op.starts_with(":?") || op.starts_with('?') {
                match value.filter(|_| set) {
                    Some(v) => out.push_str(v),
                    // A secret has no default on purpose.
                    None if HOST_SECRETS.iter().any(|(n, _)| *n == name) => {
                        return Err(format!(
                            "`${{{expr}}}` needs {name} from the host: compose refuses to start without it"
                        ))
                    }
                    None => {
                        return Err(format!(
                            "`${{{expr}}}` needs {name} from the host; give it a default (`${{{name}:-...}}`)"
                        ))
                    }
                }
            } else if let Some(alt) = op.strip_prefix(":+").or_else(|| op.strip_prefix('+')) {
                if set {
                    out.push_str(&interpolate_in(alt, vars)?);
                }
            } else if op.is_empty() {
                out.push_str(value.unwrap_or_default());
            } else {
                return Err(format!("bad `${{{expr}}}` in {raw:?}"));
            }
        } else {
            let n = rest.find(|c| !is_name(c)).unwrap_or(rest.len());
            if n == 0 {
                return Err(format!(
                    "a lone `$` in {raw:?}; write `$$` for a literal `$`"
                ));
            }
            out.push_str(vars.get(&rest[..n]).map_or("", String::as_str));
            rest = &rest[n..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// A command or entrypoint as words (the string form split on whitespace).
pub(crate) fn words(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().filter_map(scalar).collect(),
        v => scalar(v)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// The healthcheck command as one string, `None` when there is none or it is disabled.
pub(crate) fn healthcheck(service: &Value) -> Option<String> {
    let hc = service.get("healthcheck")?;
    if hc.get("disable").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let test = words(hc.get("test")?);
    match test.first().map(String::as_str) {
        None | Some("NONE") => None,
        Some("CMD") | Some("CMD-SHELL") => Some(test[1..].join(" ")).filter(|t| !t.is_empty()),
        Some(_) => Some(test.join(" ")),
    }
}

/// One `depends_on` entry.
pub(crate) struct Dependency {
    pub(crate) condition: String,
    /// `required: false` makes compose only warn when the service is not started.
    pub(crate) required: bool,
}

/// `depends_on` as service → dependency (the list form means `service_started`, required).
pub(crate) fn depends_on(service: &Value) -> BTreeMap<String, Dependency> {
    let started = || "service_started".to_string();
    match service.get("depends_on") {
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(scalar)
            .map(|s| {
                let how = Dependency {
                    condition: started(),
                    required: true,
                };
                (s, how)
            })
            .collect(),
        Some(Value::Mapping(map)) => map
            .iter()
            .filter_map(|(k, v)| {
                let how = Dependency {
                    condition: v.get("condition").and_then(scalar).unwrap_or_else(started),
                    required: v.get("required").and_then(scalar).as_deref() != Some("false"),
                };
                Some((scalar(k)?, how))
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The service's `profiles`; none means it always runs.
pub(crate) fn profiles(service: &Value) -> Vec<String> {
    service
        .get("profiles")
        .and_then(Value::as_sequence)
        .map(|p| p.iter().filter_map(scalar).collect())
        .unwrap_or_default()
}

/// Whether `up` starts the service with the profiles `on`.
pub(crate) fn is_on(service: &Value, on: &BTreeSet<String>) -> bool {
    let p = profiles(service);
    p.is_empty() || p.iter().any(|p| on.contains(p))
}

/// A command's `--flag value` (the last one, as redis-server reads it).
pub(crate) fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    argv.iter()
        .rposition(|w| w == flag)
        .and_then(|i| argv.get(i + 1).cloned())
}

/// The argv of a service: entrypoint and command.
pub(crate) fn argv_of(service: &Value) -> Vec<String> {
    let mut argv = service.get("entrypoint").map(words).unwrap_or_default();
    argv.extend(service.get("command").map(words).unwrap_or_default());
    argv
}

/// A Redis server started with `--cluster-enabled yes`.
pub(crate) fn is_cluster_node(service: &Value) -> bool {
    flag_value(&argv_of(service), "--cluster-enabled").as_deref() == Some("yes")
}

/// The port a redis-server listens on.
pub(crate) fn redis_port(service: &Value) -> Option<u16> {
    match flag_value(&argv_of(service), "--port") {
        Some(p) => p.parse().ok(),
        None => Some(6379),
    }
}

/// The Dockerfile a service builds from, if it has `build`.
pub(crate) fn build_dockerfile(service: &Value) -> Option<PathBuf> {
    let build = service.get("build")?;
    let (context, dockerfile) = match build {
        Value::Mapping(_) => (
            build
                .get("context")
                .and_then(scalar)
                .unwrap_or_else(|| ".".into()),
            build
                .get("dockerfile")
                .and_then(scalar)
                .unwrap_or_else(|| "Dockerfile".into()),
        ),
        v => (scalar(v)?, "Dockerfile".into()),
    };
    Some(repo_root().join(context).join(dockerfile))
}

/// Published ports as (host port, container port); `None` host port for an unpublished one.
pub(crate) fn published_ports(service: &Value) -> Result<Vec<(Option<u16>, u16)>, String> {
    let port = |s: &str| {
        s.trim()
            .parse::<u16>()
            .map_err(|_| format!("ports: cannot read `{s}`"))
    };
    let mut out = Vec::new();
    let Some(items) = service.get("ports") else {
        return Ok(out);
    };
    for item in items.as_sequence().ok_or("ports is not a list")? {
        match item {
            Value::Mapping(_) => {
                let target = item
                    .get("target")
                    .and_then(scalar)
                    .ok_or("ports: no target")?;
                let published = item.get("published").and_then(scalar);
                out.push((published.as_deref().map(port).transpose()?, port(&target)?));
            }
            v => {
                let s = scalar(v).ok_or("ports: an entry is not a string")?;
                let s = s.split('/').next().unwrap_or_default();
                // [IP:]HOST:CONTAINER, the IP possibly `[::1]`: split from the right.
                let mut parts = s.rsplitn(3, ':');
                let container = port(parts.next().unwrap_or_default())?;
                let host = parts
                    .next()
                    .filter(|h| !h.is_empty())
                    .map(port)
                    .transpose()?;
                out.push((host, container));
            }
        }
    }
    Ok(out)
}

/// A service's volumes as (source, target).
pub(crate) fn mounts(service: &Value) -> Vec<(String, String)> {
    let Some(items) = service.get("volumes").and_then(Value::as_sequence) else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|v| match v {
            Value::Mapping(_) => Some((
                v.get("source").and_then(scalar)?,
                v.get("target").and_then(scalar)?,
            )),
            v => {
                let s = scalar(v)?;
                let mut parts = s.split(':');
                Some((parts.next()?.to_string(), parts.next()?.to_string()))
            }
        })
        .collect()
}

/// `redis`, `mysql`, `kafka` from `redis:7`, `mysql:8.0`, `apache/kafka:3.8.0`.
pub(crate) fn image_name(image: &str) -> &str {
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split([':', '@']).next().unwrap_or(last)
}

/// Host and port of `scheme://[user[:password]@]host[:port][/path]`.
pub(crate) fn url_host_port(url: &str) -> Result<(String, Option<u16>), String> {
    let rest = url
        .split_once("://")
        .ok_or_else(|| format!("`{url}` is not a URL"))?
        .1;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    split_host_port(host_port)
}

/// `host:port,host:port`.
pub(crate) fn host_port_list(list: &str) -> Result<Vec<(String, Option<u16>)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(split_host_port)
        .collect()
}

fn split_host_port(s: &str) -> Result<(String, Option<u16>), String> {
    match s.rsplit_once(':') {
        Some((host, port)) => {
            let port = port.parse().map_err(|_| format!("bad port in `{s}`"))?;
            Ok((host.to_string(), Some(port)))
        }
        None => Ok((s.to_string(), None)),
    }
}
