//! The `ha` profile: the ZooKeeper ensemble, the three Kafka brokers, and the guard that stops
//! the programs from starting with single-server settings.

use crate::documented::documented_ha_host;
use crate::expected::{
    Host, GATEWAYS, HA_BROKERS, HA_GUARD, HA_MIN_INSYNC, HA_PROFILE, HA_REPLICATION_FACTOR,
    HA_VARS, PROMETHEUS_CONFIG_VAR, WORKERS, ZK_ENSEMBLE,
};
use crate::yaml::{
    argv_of, depends_on, env_of, environment, healthcheck, interpolate, mounts, profiles, scalar,
};
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The `ha` profile: the ZooKeeper ensemble, the three Kafka brokers, and the guard that
/// stops the programs from starting with single-server settings. (Its Redis Cluster is the
/// `cluster` profile's, checked in `cluster.rs`; its programs are checked with the others, in
/// `app.rs`.)
pub(crate) fn check_ha_profile(
    text: &str,
    doc: &Value,
    services: &BTreeMap<String, &Value>,
    problems: &mut Vec<String>,
) {
    let declared: BTreeSet<String> = doc
        .get("volumes")
        .and_then(Value::as_mapping)
        .map(|m| m.keys().filter_map(scalar).collect())
        .unwrap_or_default();
    let none = Host::new();
    let image_of = |name: &str| {
        services
            .get(name)
            .and_then(|s| s.get("image"))
            .and_then(scalar)
    };
    // What every ha server has in common with its single counterpart.
    let common = |name: &str, like: &str, data: &[&str], problem: &mut dyn FnMut(String)| {
        let service = services[name];
        let image = service.get("image").and_then(scalar);
        if image.is_none() || image != image_of(like) {
            problem(format!(
                "runs image {image:?}, not {:?} as `{like}` does",
                image_of(like)
            ));
        }
        if profiles(service) != [HA_PROFILE] {
            problem(format!(
                "has profiles {:?}, not [{HA_PROFILE}]",
                profiles(service)
            ));
        }
        if healthcheck(service).is_none() {
            problem("no healthcheck".into());
        }
        for path in data {
            let sources: Vec<String> = mounts(service)
                .into_iter()
                .filter(|(_, target)| target == path)
                .map(|(source, _)| source)
                .collect();
            match sources.as_slice() {
                [volume] if declared.contains(volume) => {
                    for (other, s) in services {
                        if other != name && mounts(s).iter().any(|(v, _)| v == volume) {
                            problem(format!("shares volume `{volume}` with `{other}`"));
                        }
                    }
                }
                _ => problem(format!(
                    "does not keep {path} on a named volume of its own (mounts {sources:?} there)"
                )),
            }
        }
    };
    let number = |service: &Value, key: &str| {
        env_of(service, key, &none).and_then(|v| v.trim().parse::<i64>().ok())
    };

    // The ZooKeeper ensemble: distinct ids, and every server lists all of them (itself too)
    // under those ids, with the client port the programs use.
    let mut ids: BTreeMap<i64, &str> = BTreeMap::new();
    for name in ZK_ENSEMBLE {
        let Some(server) = services.get(name) else {
            problems.push(format!("service `{name}` is missing"));
            continue;
        };
        let mut problem = |p: String| problems.push(format!("{name}: {p}"));
        common(name, "zookeeper", &["/data", "/datalog"], &mut problem);
        match number(server, "ZOO_MY_ID") {
            Some(id) if (1..=255).contains(&id) => {
                if let Some(other) = ids.insert(id, name) {
                    problem(format!("ZOO_MY_ID {id} is also `{other}`'s"));
                }
            }
            other => problem(format!("ZOO_MY_ID {other:?} is not an id from 1 to 255")),
        }
    }
    let want: BTreeSet<(i64, String)> = ids.iter().map(|(id, n)| (*id, n.to_string())).collect();
    for name in ZK_ENSEMBLE {
        let Some(server) = services.get(name) else {
            continue;
        };
        let mut problem = |p: String| problems.push(format!("{name}: ZOO_SERVERS {p}"));
        let servers = env_of(server, "ZOO_SERVERS", &none).unwrap_or_default();
        let mut listed = BTreeSet::new();
        for entry in servers.split_whitespace() {
            // server.<id>=<host>:<quorum port>:<election port>[:<role>][;[<address>:]<client port>]
            let parsed = entry.strip_prefix("server.").and_then(|e| {
                let (id, rest) = e.split_once('=')?;
                let (peer, client) = rest.split_once(';').unwrap_or((rest, ""));
                let mut parts = peer.split(':');
                let host = parts.next()?.to_string();
                let quorum: u16 = parts.next()?.parse().ok()?;
                let election: u16 = parts.next()?.parse().ok()?;
                let client: Option<u16> = match client.rsplit(':').next() {
                    Some("") | None => None,
                    Some(p) => Some(p.parse().ok()?),
                };
                Some((id.parse::<i64>().ok()?, host, quorum, election, client))
            });
            match parsed {
                Some((_, _, quorum, election, _)) if quorum == election => {
                    problem(format!("`{entry}` uses one port for quorum and election"))
                }
                Some((_, _, _, _, Some(client))) if client != 2181 => {
                    problem(format!("`{entry}`: clients connect on 2181, not {client}"))
                }
                Some((id, host, ..)) => {
                    listed.insert((id, host));
                }
                None => problem(format!("cannot read `{entry}`")),
            }
        }
        if listed != want {
            problem(format!(
                "lists {listed:?}, not the ensemble's servers with their ZOO_MY_ID {want:?}"
            ));
        }
    }

    // The Kafka brokers: one cluster, whose three nodes are the voters of its quorum, with
    // every topic on three of them and writes on two.
    let mut node_ids: BTreeMap<i64, &str> = BTreeMap::new();
    let mut voters_want = BTreeSet::new();
    for name in HA_BROKERS {
        let Some(broker) = services.get(name) else {
            problems.push(format!("service `{name}` is missing"));
            continue;
        };
        let mut problem = |p: String| problems.push(format!("{name}: {p}"));
        common(name, "kafka", &["/var/lib/kafka/data"], &mut problem);
        let env = |key: &str| env_of(broker, key, &none).unwrap_or_default();
        let roles: BTreeSet<String> = env("KAFKA_PROCESS_ROLES")
            .split(',')
            .map(|r| r.trim().to_string())
            .collect();
        if !roles.contains("broker") || !roles.contains("controller") {
            problem(format!(
                "KAFKA_PROCESS_ROLES {roles:?} is not broker and controller"
            ));
        }
        let controller_port = env("KAFKA_LISTENERS")
            .split(',')
            .find_map(|l| l.trim().strip_prefix("CONTROLLER://"))
            .and_then(|a| a.rsplit(':').next()?.parse::<u16>().ok());
        match (number(broker, "KAFKA_NODE_ID"), controller_port) {
            (Some(id), Some(port)) => {
                if let Some(other) = node_ids.insert(id, name) {
                    problem(format!("KAFKA_NODE_ID {id} is also `{other}`'s"));
                }
                voters_want.insert(format!("{id}@{name}:{port}"));
            }
            (id, port) => problem(format!(
                "no KAFKA_NODE_ID ({id:?}) or CONTROLLER listener port ({port:?})"
            )),
        }
        for (key, want) in [
            ("KAFKA_DEFAULT_REPLICATION_FACTOR", HA_REPLICATION_FACTOR),
            ("KAFKA_MIN_INSYNC_REPLICAS", HA_MIN_INSYNC),
            (
                "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
                HA_REPLICATION_FACTOR,
            ),
            (
                "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                HA_REPLICATION_FACTOR,
            ),
            ("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", HA_MIN_INSYNC),
        ] {
            let got = number(broker, key);
            if got != Some(i64::from(want)) {
                problem(format!("{key} is {got:?}, not {want}"));
            }
        }
    }
    let first = HA_BROKERS.iter().find_map(|n| services.get(*n));
    for name in HA_BROKERS {
        let Some(broker) = services.get(name) else {
            continue;
        };
        let mut problem = |p: String| problems.push(format!("{name}: {p}"));
        let voters: Vec<String> = env_of(broker, "KAFKA_CONTROLLER_QUORUM_VOTERS", &none)
            .unwrap_or_default()
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        let set: BTreeSet<String> = voters.iter().cloned().collect();
        if set != voters_want || voters.len() != HA_BROKERS.len() {
            problem(format!(
                "KAFKA_CONTROLLER_QUORUM_VOTERS {voters:?} are not the {} brokers' controllers \
                 {voters_want:?}",
                HA_BROKERS.len()
            ));
        }
        let cluster_id = |s: &Value| env_of(s, "CLUSTER_ID", &none).unwrap_or_default();
        if cluster_id(broker).is_empty() || first.map(|f| cluster_id(f)) != Some(cluster_id(broker))
        {
            problem(format!(
                "CLUSTER_ID `{}` is not the same on every broker",
                cluster_id(broker)
            ));
        }
    }

    // The guard.
    let Some(guard) = services.get(HA_GUARD) else {
        problems.push(format!("service `{HA_GUARD}` is missing"));
        return;
    };
    check_ha_guard(text, guard, services, problems);
}

/// The one-shot service that exits 1, with the profile on, when the programs would still use
/// a single server. Its script is run here with the local `sh` (it only compares strings):
/// it must pass with the settings the file's header documents, and fail, naming the
/// variable, when any one of them is left at its default.
fn check_ha_guard(
    text: &str,
    guard: &Value,
    services: &BTreeMap<String, &Value>,
    problems: &mut Vec<String>,
) {
    let mut problem = |p: String| problems.push(format!("{HA_GUARD}: {p}"));
    if profiles(guard) != [HA_PROFILE] {
        problem(format!(
            "has profiles {:?}, not [{HA_PROFILE}]",
            profiles(guard)
        ));
    }
    let restart = guard.get("restart").and_then(scalar);
    if !matches!(restart.as_deref(), None | Some("no") | Some("on-failure")) {
        problem(format!(
            "restart: {restart:?} restarts it after it completes"
        ));
    }
    // It must see what the programs see.
    let raw = |service: &Value, key: &str| environment(service).ok()?.remove(key)?;
    for (setting, var) in HA_VARS {
        let value = raw(guard, var);
        for app in GATEWAYS.iter().map(|g| g.0).chain(WORKERS) {
            if let Some(service) = services.get(app) {
                if value.is_none() || value != raw(service, setting) {
                    problem(format!(
                        "{var} {value:?} is not what `{app}` gets as {setting}"
                    ));
                }
            }
        }
    }
    // The programs wait for it (only with the profile).
    for app in GATEWAYS.iter().map(|g| g.0).chain(WORKERS) {
        let Some(service) = services.get(app) else {
            continue;
        };
        match depends_on(service).get(HA_GUARD) {
            Some(d) if d.condition == "service_completed_successfully" && !d.required => {}
            _ => problems.push(format!(
                "{app}: does not depend on `{HA_GUARD}` with condition: \
                 service_completed_successfully and required: false"
            )),
        }
    }

    let Some(documented) = documented_ha_host(text) else {
        problems.push(format!(
            "no `COMPOSE_PROFILES={HA_PROFILE} ... docker compose up` documented"
        ));
        return;
    };
    // What the guard checks: the programs' settings, and Prometheus's configuration.
    let checked = || HA_VARS.iter().map(|v| v.0).chain([PROMETHEUS_CONFIG_VAR]);
    let unset: Vec<&str> = checked().filter(|v| !documented.contains_key(*v)).collect();
    if !unset.is_empty() {
        problems.push(format!(
            "the documented `COMPOSE_PROFILES={HA_PROFILE}` command does not set {unset:?}"
        ));
    }
    let argv: Result<Vec<String>, String> = argv_of(guard).iter().map(|w| interpolate(w)).collect();
    let argv = match argv {
        Ok(a) if a.first().map(String::as_str) == Some("sh") => a,
        Ok(a) => {
            problems.push(format!("{HA_GUARD}: runs {a:?}, not an `sh` script"));
            return;
        }
        Err(e) => {
            problems.push(format!("{HA_GUARD}: command: {e}"));
            return;
        }
    };
    let run = |vars: &Host| -> Result<(bool, String), String> {
        let mut command = std::process::Command::new("sh");
        command.args(&argv[1..]).env_clear();
        if let Ok(path) = std::env::var("PATH") {
            command.env("PATH", path);
        }
        for var in HA_VARS.iter().map(|v| v.1).chain([PROMETHEUS_CONFIG_VAR]) {
            command.env(var, env_of(guard, var, vars).unwrap_or_default());
        }
        let out = command.output().map_err(|e| format!("running sh: {e}"))?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    };
    match run(&documented) {
        Ok((true, _)) => {}
        Ok((false, err)) => problems.push(format!(
            "{HA_GUARD}: fails with the documented settings: {}",
            err.trim()
        )),
        Err(e) => problems.push(format!("{HA_GUARD}: {e}")),
    }
    for setting in checked() {
        let mut vars = documented.clone();
        vars.remove(setting);
        match run(&vars) {
            Ok((false, err)) if err.contains(&format!("{setting}=")) => {}
            Ok((false, err)) => problems.push(format!(
                "{HA_GUARD}: with {setting} at its default it fails without naming it: {}",
                err.trim()
            )),
            Ok((true, _)) => problems.push(format!(
                "{HA_GUARD}: passes with {setting} at its single-server default"
            )),
            Err(e) => problems.push(format!("{HA_GUARD}: {e}")),
        }
    }
}
