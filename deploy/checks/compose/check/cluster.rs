//! The `cluster` profile: the Redis Cluster's nodes, the one-shot service that makes them a
//! cluster, and the cluster URL the file documents.

use crate::documented::documented_redis_urls;
use crate::expected::{
    Host, CLUSTER_INIT, CLUSTER_NODE_PREFIX, CLUSTER_PRIMARIES, CLUSTER_PROFILES, CLUSTER_REPLICAS,
    GATEWAYS, WORKERS,
};
use crate::yaml::{
    argv_of, depends_on, env_of, environment, flag_value, healthcheck, interpolate, mounts,
    profiles, redis_port, scalar, url_host_port,
};
use seckill_shared::store::Topology;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The `cluster` profile: its six nodes, the one-shot service that makes them a cluster of
/// three primaries with a replica each, the programs' wait for it, and the cluster URL the
/// file tells its users to set.
pub(crate) fn check_cluster_profile(
    text: &str,
    doc: &Value,
    services: &BTreeMap<String, &Value>,
    problems: &mut Vec<String>,
) {
    let count = CLUSTER_PRIMARIES * (1 + CLUSTER_REPLICAS);
    let node_names: Vec<String> = (1..=count)
        .map(|n| format!("{CLUSTER_NODE_PREFIX}{n}"))
        .collect();
    let port_of = |name: &str| services.get(name).and_then(|s| redis_port(s));

    // The nodes.
    for name in services.keys() {
        if name.starts_with(CLUSTER_NODE_PREFIX) && !node_names.contains(name) {
            problems.push(format!(
                "{name}: not one of the cluster nodes {node_names:?}"
            ));
        }
    }
    let single_image = services
        .get("redis")
        .and_then(|s| s.get("image"))
        .and_then(scalar);
    let declared: BTreeSet<String> = doc
        .get("volumes")
        .and_then(Value::as_mapping)
        .map(|m| m.keys().filter_map(scalar).collect())
        .unwrap_or_default();
    for name in &node_names {
        let Some(node) = services.get(name) else {
            problems.push(format!("service `{name}` is missing"));
            continue;
        };
        let mut problem = |p: String| problems.push(format!("{name}: {p}"));
        let image = node.get("image").and_then(scalar);
        if image.is_none() || image != single_image {
            problem(format!(
                "runs image {image:?}, not {single_image:?} as `redis` does"
            ));
        }
        if profiles(node) != CLUSTER_PROFILES {
            problem(format!(
                "has profiles {:?}, not {CLUSTER_PROFILES:?}",
                profiles(node)
            ));
        }
        let argv = argv_of(node);
        if argv.first().map(String::as_str) != Some("redis-server") {
            problem(format!("runs {argv:?}, not redis-server"));
        }
        for (flag, want) in [
            ("--cluster-enabled", "yes"),
            ("--cluster-node-timeout", "5000"),
            ("--appendonly", "yes"),
        ] {
            if flag_value(&argv, flag).as_deref() != Some(want) {
                problem(format!("does not run with `{flag} {want}`"));
            }
        }
        let port = port_of(name).unwrap_or_default();
        match healthcheck(node) {
            Some(t)
                if t.contains("redis-cli")
                    && t.contains("ping")
                    && t.contains(&format!("-p {port}")) => {}
            Some(t) => problem(format!(
                "healthcheck `{t}` does not ping port {port} with redis-cli"
            )),
            None => problem("no healthcheck".into()),
        }
        let data: Vec<String> = mounts(node)
            .into_iter()
            .filter(|(_, target)| target == "/data")
            .map(|(source, _)| source)
            .collect();
        match data.as_slice() {
            [volume] if declared.contains(volume) => {
                for (other, service) in services {
                    if other != name && mounts(service).iter().any(|(s, _)| s == volume) {
                        problem(format!("shares volume `{volume}` with `{other}`"));
                    }
                }
            }
            _ => problem(format!(
                "does not keep /data on a named volume of its own (mounts {data:?} there)"
            )),
        }
    }

    // The service that creates the cluster.
    match services.get(CLUSTER_INIT) {
        None => problems.push(format!("service `{CLUSTER_INIT}` is missing")),
        Some(init) => check_cluster_init(init, services, &node_names, problems),
    }

    // The programs wait for it, with the profile only.
    let apps = GATEWAYS.iter().map(|g| g.0).chain(WORKERS);
    for app in apps {
        let Some(service) = services.get(app) else {
            continue; // reported already
        };
        match depends_on(service).get(CLUSTER_INIT) {
            Some(d) if d.condition == "service_completed_successfully" && !d.required => {}
            _ => problems.push(format!(
                "{app}: does not depend on `{CLUSTER_INIT}` with condition: \
                 service_completed_successfully and required: false"
            )),
        }
    }

    // What the file tells its users to set.
    let urls = documented_redis_urls(text);
    if urls.is_empty() {
        problems.push("no `SECKILL_REDIS_URL=redis+cluster://...` documented".into());
    }
    for url in &urls {
        let mut problem =
            |p: String| problems.push(format!("documented SECKILL_REDIS_URL={url}: {p}"));
        let nodes = match Topology::parse(url, false) {
            Ok(Topology::Cluster(nodes)) => nodes,
            Ok(Topology::Single(_)) => {
                problem("is one server, not a cluster".into());
                continue;
            }
            Err(e) => {
                problem(format!("{e:#}"));
                continue;
            }
        };
        let mut named = BTreeSet::new();
        for node in &nodes {
            match url_host_port(node) {
                Ok((host, port)) => {
                    if !node_names.contains(&host) || !services.contains_key(&host) {
                        problem(format!("`{host}` is not a cluster node"));
                    } else if port != port_of(&host) {
                        problem(format!(
                            "{host} listens on {:?}, not {port:?}",
                            port_of(&host)
                        ));
                    }
                    named.insert(host);
                }
                Err(e) => problem(e),
            }
        }
        let missing: Vec<&String> = node_names.iter().filter(|n| !named.contains(*n)).collect();
        if !missing.is_empty() {
            problem(format!("does not name {missing:?}"));
        }
    }
}

/// The one-shot service that creates the cluster from exactly the nodes, once.
fn check_cluster_init(
    init: &Value,
    services: &BTreeMap<String, &Value>,
    node_names: &[String],
    problems: &mut Vec<String>,
) {
    let mut problem = |p: String| problems.push(format!("{CLUSTER_INIT}: {p}"));
    if profiles(init) != CLUSTER_PROFILES {
        problem(format!(
            "has profiles {:?}, not {CLUSTER_PROFILES:?}",
            profiles(init)
        ));
    }
    // Restarted after it exits 0, it would never count as completed.
    let restart = init.get("restart").and_then(scalar);
    if !matches!(restart.as_deref(), None | Some("no") | Some("on-failure")) {
        problem(format!(
            "restart: {restart:?} restarts it after it completes"
        ));
    }
    let deps = depends_on(init);
    for node in node_names {
        if deps.get(node).map(|d| d.condition.as_str()) != Some("service_healthy") {
            problem(format!(
                "does not wait for `{node}` with condition: service_healthy"
            ));
        }
    }

    // CLUSTER_NODES: every node, on its port, and nothing else.
    let listed: Vec<String> = env_of(init, "CLUSTER_NODES", &Host::new())
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let listed_count = listed.len();
    let listed: BTreeSet<String> = listed.into_iter().collect();
    let want: BTreeSet<String> = node_names
        .iter()
        .map(|n| {
            let port = services.get(n).and_then(|s| redis_port(s)).unwrap_or(6379);
            format!("{n}:{port}")
        })
        .collect();
    if listed != want || listed_count != want.len() {
        problem(format!(
            "CLUSTER_NODES {listed:?} are not exactly the nodes {want:?}"
        ));
    }

    // The script, as the container's shell gets it.
    let script = match interpolate(&argv_of(init).join(" ")) {
        Ok(s) => s,
        Err(e) => {
            problem(format!("command: {e}"));
            return;
        }
    };
    let Some(create_at) = script.find("--cluster create") else {
        problem("does not run `redis-cli --cluster create`".into());
        return;
    };
    if !script.contains("$CLUSTER_NODES") && !script.contains("${CLUSTER_NODES}") {
        problem("does not create the cluster from $CLUSTER_NODES".into());
    }
    let create_line: Vec<String> = script[create_at..]
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if !create_line.iter().any(|w| w == "--cluster-yes") {
        problem("`--cluster create` without --cluster-yes waits for a `yes` nobody types".into());
    }
    match flag_value(&create_line, "--cluster-replicas").map(|r| r.parse::<usize>()) {
        Some(Ok(replicas)) => {
            let per_shard = replicas + 1;
            let primaries = listed_count / per_shard;
            if !listed_count.is_multiple_of(per_shard)
                || primaries != CLUSTER_PRIMARIES
                || replicas != CLUSTER_REPLICAS
            {
                problem(format!(
                    "makes {listed_count} nodes into {primaries} primaries with {replicas} \
                     replicas each, not {CLUSTER_PRIMARIES} with {CLUSTER_REPLICAS}"
                ));
            }
        }
        _ => problem("`--cluster create` without a number of --cluster-replicas".into()),
    }
    // Idempotent: `--cluster create` fails on nodes that already are a cluster.
    let guard = ["cluster_known_nodes", "cluster_state:ok"]
        .iter()
        .filter_map(|g| script.find(g))
        .min();
    if guard.is_none_or(|g| g > create_at) {
        problem(
            "runs `--cluster create` without first checking whether the cluster exists \
             (cluster_known_nodes or cluster_state:ok), so it fails on a restart"
                .into(),
        );
    }
    // It refuses to go on when the programs would not use the cluster; it must see what
    // they see.
    let raw = |service: &Value, key: &str| environment(service).ok()?.remove(key)?;
    let apps_url = raw(init, "APPS_REDIS_URL");
    for app in GATEWAYS.iter().map(|g| g.0).chain(WORKERS) {
        if let Some(service) = services.get(app) {
            if apps_url.is_none() || apps_url != raw(service, "SECKILL_REDIS_URL") {
                problem(format!(
                    "APPS_REDIS_URL {apps_url:?} is not what `{app}` gets as SECKILL_REDIS_URL"
                ));
            }
        }
    }
    if !script.contains("$APPS_REDIS_URL") {
        problem("does not check APPS_REDIS_URL".into());
    }
}
