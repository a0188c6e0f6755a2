//! The whole compose file, as `docker compose up` sees it on a host: its secrets, then every
//! service, profile and program (the other checks of this folder).

use crate::check::app::check_app;
use crate::check::cluster::check_cluster_profile;
use crate::check::ha::check_ha_profile;
use crate::check::prometheus::check_prometheus;
use crate::check::tracing::check_tracing;
use crate::expected::{
    with_secrets, Host, Role, GATEWAYS, HA_ONLY_APPS, HA_PROFILE, HOST_SECRETS, INFRA, WORKERS,
};
use crate::yaml::{depends_on, environment, healthcheck, interpolate_in, is_on, profiles, scalar};
use seckill_shared::Settings;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Checks a compose file's text, as `docker compose up` sees it on a host that sets the
/// secrets ([`HOST_SECRETS`]) and nothing else; `Err` lists every problem found.
pub(crate) fn check_compose(text: &str) -> Result<(), Vec<String>> {
    check_compose_in(text, &Host::new())
}

/// Checks a compose file's text as `docker compose up` sees it on a host with `host`'s
/// variables (its `COMPOSE_PROFILES` are the profiles on), plus the secrets it does not set.
pub(crate) fn check_compose_in(text: &str, host: &Host) -> Result<(), Vec<String>> {
    check_compose_exact(text, &with_secrets(host))
}

/// [`check_compose_in`] on exactly `host`'s variables.
pub(crate) fn check_compose_exact(text: &str, host: &Host) -> Result<(), Vec<String>> {
    let mut doc: Value =
        serde_norway::from_str(text).map_err(|e| vec![format!("not valid YAML: {e}")])?;
    // `<<: *anchor` merge keys are not applied by serde_norway on its own.
    doc.apply_merge()
        .map_err(|e| vec![format!("merge keys: {e}")])?;
    let services = doc
        .get("services")
        .and_then(Value::as_mapping)
        .ok_or_else(|| vec!["no `services` mapping".to_string()])?;
    let services: BTreeMap<String, &Value> = services
        .iter()
        .filter_map(|(k, v)| Some((scalar(k)?, v)))
        .collect();

    let mut problems = Vec::new();
    check_secrets(text, &doc, host, &mut problems);
    let known: BTreeSet<String> = Settings::env_names().into_iter().collect();
    let on: BTreeSet<String> = host
        .get("COMPOSE_PROFILES")
        .map(|p| p.split(',').map(|p| p.trim().to_string()).collect())
        .unwrap_or_default();

    let apps = GATEWAYS
        .iter()
        .map(|&(name, host_port)| (name, Role::Gateway { host_port }))
        .chain(WORKERS.iter().map(|&name| (name, Role::Worker)));
    for name in INFRA.iter().copied().chain(apps.clone().map(|(n, _)| n)) {
        if !services.contains_key(name) {
            problems.push(format!("service `{name}` is missing"));
        }
    }

    // Two gateways and two workers, and a third of each with the `ha` profile only.
    for (name, _) in apps.clone() {
        let Some(service) = services.get(name) else {
            continue; // reported above
        };
        let want: &[&str] = if HA_ONLY_APPS.contains(&name) {
            &[HA_PROFILE]
        } else {
            &[]
        };
        if profiles(service) != want {
            problems.push(format!(
                "{name}: has profiles {:?}, not {want:?}",
                profiles(service)
            ));
        }
    }
    let ha = on.contains(HA_PROFILE);
    for (what, names, want) in [
        ("gateways", GATEWAYS.map(|g| g.0), if ha { 3 } else { 2 }),
        ("workers", WORKERS, if ha { 3 } else { 2 }),
    ] {
        let running = names
            .iter()
            .filter(|n| services.get(**n).is_some_and(|s| is_on(s, &on)))
            .count();
        if running != want {
            problems.push(format!(
                "{running} {what} run with profiles {on:?}, not {want}"
            ));
        }
    }

    for name in INFRA {
        if let Some(service) = services.get(name) {
            if healthcheck(service).is_none() {
                problems.push(format!("{name}: no healthcheck"));
            }
        }
    }

    // Every SECKILL_* variable anywhere must be a setting: the programs ignore unknown ones,
    // so a typo would otherwise silently fall back to a default.
    for (name, service) in &services {
        match environment(service) {
            Ok(env) => {
                for key in env.keys() {
                    if key.starts_with(seckill_shared::config::ENV_PREFIX) && !known.contains(key) {
                        problems.push(format!("{name}: {key} is not a setting"));
                    }
                }
            }
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }

    // A dependency on a service whose profile is off must be `required: false`, or
    // `docker compose up` refuses to start without that profile.
    for (name, service) in &services {
        if !is_on(service, &on) {
            continue;
        }
        for (dep, how) in depends_on(service) {
            match services.get(&dep) {
                None => problems.push(format!("{name}: depends on `{dep}`, not a service")),
                Some(target) if !is_on(target, &on) && how.required => problems.push(format!(
                    "{name}: depends on `{dep}` (profiles {:?}) without `required: false`, \
                     so it does not start without that profile",
                    profiles(target)
                )),
                Some(_) => {}
            }
        }
    }

    check_cluster_profile(text, &doc, &services, &mut problems);
    check_ha_profile(text, &doc, &services, &mut problems);
    check_prometheus(&services, host, &on, &mut problems);
    check_tracing(&services, host, &on, &mut problems);

    for (name, role) in apps {
        if let Some(service) = services.get(name) {
            check_app(name, role, service, &services, host, &on, &mut problems);
        }
    }

    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Compose reads the whole file, and a `${VAR:?...}` without its variable stops every
/// command: on `host` each such error is a problem. Each of [`HOST_SECRETS`] must be one: the
/// file without it does not start (no default, no literal, nothing published), and no
/// `change-me` placeholder is left anywhere.
fn check_secrets(text: &str, doc: &Value, host: &Host, problems: &mut Vec<String>) {
    for e in interpolation_errors(doc, host) {
        problems.push(format!("compose refuses to start on this host: {e}"));
    }
    for (name, _) in HOST_SECRETS {
        let mut without = with_secrets(host);
        without.remove(name);
        if !interpolation_errors(doc, &without)
            .iter()
            .any(|e| e.contains(&format!("needs {name} from the host")))
        {
            problems.push(format!(
                "compose starts without {name}: take it from the host only, `${{{name}:?...}}`"
            ));
        }
    }
    if text.contains("change-me") {
        problems.push("a `change-me` placeholder is left: a published default secret".into());
    }
}

/// Every scalar of the document (keys too), interpolated on `host`: the errors compose would
/// stop with.
fn interpolation_errors(doc: &Value, host: &Host) -> BTreeSet<String> {
    fn walk(v: &Value, host: &Host, errors: &mut BTreeSet<String>) {
        match v {
            Value::String(s) => {
                if let Err(e) = interpolate_in(s, host) {
                    errors.insert(e);
                }
            }
            Value::Sequence(items) => items.iter().for_each(|i| walk(i, host, errors)),
            Value::Mapping(map) => map.iter().for_each(|(k, v)| {
                walk(k, host, errors);
                walk(v, host, errors);
            }),
            Value::Tagged(t) => walk(&t.value, host, errors),
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    let mut errors = BTreeSet::new();
    walk(doc, host, &mut errors);
    errors
}
