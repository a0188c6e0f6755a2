//! Static checks of `docker-compose.yml` and `Dockerfile` at the repository root against the
//! settings the programs read. Nothing is started: the files are parsed and compared with
//! [`Settings`], so a misspelt variable, a host name that is not a service, a wrong port or a
//! value the programs would reject fails here instead of in a container.

use seckill_shared::store::Topology;
use seckill_shared::Settings;
use secrecy::ExposeSecret;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Infrastructure services; each must have a healthcheck.
const INFRA: [&str; 4] = ["redis", "mysql", "zookeeper", "kafka"];
/// Gateways and the host port each publishes.
const GATEWAYS: [(&str, u16); 2] = [("gateway-1", 8081), ("gateway-2", 8082)];
const WORKERS: [&str; 2] = ["worker-1", "worker-2"];
/// Connections every gateway and worker sets: the variable, the image (last path part,
/// without tag) of the service it must point at, and the port that service listens on.
const CONNECTIONS: [(&str, &str, u16); 4] = [
    ("SECKILL_REDIS_URL", "redis", 6379),
    ("SECKILL_MYSQL_URL", "mysql", 3306),
    ("SECKILL_KAFKA_BROKERS", "kafka", 9092),
    ("SECKILL_ZK_HOSTS", "zookeeper", 2181),
];
/// The profile that runs Redis as a cluster, its nodes (`redis-node-1`...), and the one-shot
/// service that creates it.
const CLUSTER_PROFILE: &str = "cluster";
const CLUSTER_NODE_PREFIX: &str = "redis-node-";
const CLUSTER_INIT: &str = "redis-cluster-init";
/// Three primaries, each with one replica.
const CLUSTER_PRIMARIES: usize = 3;
const CLUSTER_REPLICAS: usize = 1;

/// The host's environment that compose interpolates `${VAR}` from (and reads
/// `COMPOSE_PROFILES` from).
type Host = BTreeMap<String, String>;

fn host(vars: &[(&str, &str)]) -> Host {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read_repo_file(name: &str) -> String {
    let path = repo_root().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[derive(Clone, Copy, PartialEq)]
enum Role {
    Gateway { host_port: u16 },
    Worker,
}

impl Role {
    fn program(self) -> &'static str {
        match self {
            Role::Gateway { .. } => "gateway",
            Role::Worker => "worker",
        }
    }
}

// ---------------------------------------------------------------- the checks

/// Checks a compose file's text, as `docker compose up` on a host with no variable set
/// sees it; `Err` lists every problem found.
fn check_compose(text: &str) -> Result<(), Vec<String>> {
    check_compose_in(text, &Host::new())
}

/// Checks a compose file's text as `docker compose up` sees it on a host with `host`'s
/// variables (its `COMPOSE_PROFILES` are the profiles on).
fn check_compose_in(text: &str, host: &Host) -> Result<(), Vec<String>> {
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

/// One gateway or worker.
fn check_app(
    name: &str,
    role: Role,
    service: &Value,
    services: &BTreeMap<String, &Value>,
    vars: &Host,
    on: &BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let mut problem = |p: String| problems.push(format!("{name}: {p}"));

    // The program: the image has no ENTRYPOINT, so the command names it.
    let argv = match service.get("entrypoint") {
        Some(entrypoint) => {
            let mut argv = words(entrypoint);
            argv.extend(service.get("command").map(words).unwrap_or_default());
            argv
        }
        None => service.get("command").map(words).unwrap_or_default(),
    };
    let program = argv.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    if program != Some(role.program()) {
        problem(format!("runs {argv:?}, not `{}`", role.program()));
    } else if role == Role::Worker && argv.get(1).map(String::as_str) == Some("migrate") {
        problem("runs `worker migrate`, which exits after migrating".into());
    }

    // Built from the repository's Dockerfile.
    match build_dockerfile(service) {
        Some(path) => {
            let ours = repo_root().join("Dockerfile").canonicalize().ok();
            if path.canonicalize().ok() != ours || ours.is_none() {
                problem(format!(
                    "builds from {}, not the repository's Dockerfile",
                    path.display()
                ));
            }
        }
        None => problem("has no `build` (it must be built from ./Dockerfile)".into()),
    }

    let env = match environment(service) {
        Ok(env) => env,
        Err(_) => return, // reported already
    };
    let mut resolved = Vec::new();
    for (key, value) in &env {
        let Some(value) = value else { continue };
        match interpolate_in(value, vars) {
            Ok(v) => resolved.push((key.clone(), v)),
            Err(e) => problem(format!("{key}: {e}")),
        }
    }
    let is_set = |key: &str| resolved.iter().any(|(k, _)| k == key);

    let listen_var = match role {
        Role::Gateway { .. } => "SECKILL_HTTP_ADDR",
        Role::Worker => "SECKILL_WORKER_HTTP_ADDR",
    };
    let mut required: Vec<&str> = CONNECTIONS.iter().map(|c| c.0).collect();
    required.push(listen_var);
    // Both programs refuse to start without it unless run with --dev.
    required.push("SECKILL_ADMIN_TOKEN");
    for key in required {
        if !is_set(key) {
            problem(format!("does not set {key}"));
        }
    }

    let settings = match Settings::from_sources(None, resolved.clone()) {
        Ok(s) => s,
        Err(e) => {
            problem(format!("settings do not load: {e:#}"));
            return;
        }
    };

    if settings.admin_token.expose_secret().trim().is_empty() {
        problem(format!(
            "SECKILL_ADMIN_TOKEN is empty: the {} refuses to start without --dev",
            role.program()
        ));
    }

    // Listen address: all interfaces (else nothing outside the container reaches it).
    let listen = match role {
        Role::Gateway { .. } => &settings.http_addr,
        Role::Worker => &settings.worker_http_addr,
    };
    let listen: SocketAddr = listen.parse().expect("validated by Settings");
    if !listen.ip().is_unspecified() {
        problem(format!(
            "{listen_var}={listen} is not reachable from outside the container; use 0.0.0.0"
        ));
    }

    // Healthcheck: curl on /livez at the listen port.
    match healthcheck(service) {
        Some(test) => {
            let url_part = format!(":{}/livez", listen.port());
            if !test.contains("curl") || !test.contains(&url_part) {
                problem(format!("healthcheck `{test}` does not curl {url_part}"));
            }
        }
        None => problem("no healthcheck".into()),
    }

    if let Role::Gateway { host_port } = role {
        match published_ports(service) {
            Ok(ports) => {
                if !ports.contains(&(Some(host_port), listen.port())) {
                    problem(format!(
                        "does not publish {host_port}:{} (publishes {ports:?})",
                        listen.port()
                    ));
                }
            }
            Err(e) => problem(e),
        }
    }

    // Redis: one server, or a cluster (whose nodes are checked like a single server, below).
    let topology = match settings.redis_topology() {
        Ok(t) => Some(t),
        Err(e) => {
            problem(format!("SECKILL_REDIS_URL: {e:#}"));
            None
        }
    };
    let cluster = matches!(topology, Some(Topology::Cluster(_)));
    if on.contains(CLUSTER_PROFILE) && !cluster {
        problem(format!(
            "the `{CLUSTER_PROFILE}` profile is on, but SECKILL_REDIS_URL `{}` is not a cluster",
            settings.redis_url.expose_secret()
        ));
    }

    // Connections: each host is a service of the right kind, on its port, and healthy first.
    let depends = depends_on(service);
    for (key, image, port) in CONNECTIONS {
        if !is_set(key) {
            continue;
        }
        let endpoints = match key {
            "SECKILL_REDIS_URL" => match &topology {
                None => continue, // reported above
                Some(Topology::Single(url)) => url_host_port(url).map(|e| vec![e]),
                Some(Topology::Cluster(nodes)) => nodes.iter().map(|n| url_host_port(n)).collect(),
            },
            "SECKILL_MYSQL_URL" => {
                url_host_port(settings.mysql_url.expose_secret()).map(|e| vec![e])
            }
            "SECKILL_KAFKA_BROKERS" => host_port_list(&settings.kafka_brokers),
            "SECKILL_ZK_HOSTS" => {
                // An optional chroot follows the last host: `zk1:2181,zk2:2181/app`.
                let hosts = settings.zk_hosts.split('/').next().unwrap_or_default();
                host_port_list(hosts)
            }
            _ => unreachable!(),
        };
        let endpoints = match endpoints {
            Ok(e) => e,
            Err(e) => {
                problem(format!("{key}: {e}"));
                continue;
            }
        };
        for (host, got_port) in endpoints {
            let Some(target) = services.get(&host) else {
                problem(format!(
                    "{key}: host `{host}` is not a service in this file"
                ));
                continue;
            };
            if !is_on(target, on) {
                problem(format!(
                    "{key}: `{host}` runs only with profiles {:?}, which are off",
                    profiles(target)
                ));
            }
            let target_image = target
                .get("image")
                .and_then(scalar)
                .map(|i| image_name(&i).to_string())
                .unwrap_or_default();
            if target_image != image {
                problem(format!(
                    "{key}: `{host}` runs image `{target_image}`, not {image}"
                ));
            }
            if got_port != Some(port) {
                let shown = got_port.map_or("no port".to_string(), |p| p.to_string());
                problem(format!("{key}: {host} listens on {port}, not {shown}"));
            }
            if key == "SECKILL_REDIS_URL" && is_cluster_node(target) != cluster {
                problem(format!(
                    "{key}: `{host}` {} a cluster node, but the URL names {}",
                    if cluster { "is not" } else { "is" },
                    if cluster { "a cluster" } else { "one server" },
                ));
            }
            if key == "SECKILL_REDIS_URL" && cluster {
                // A node is healthy before the cluster exists: wait for the service that
                // creates it, which waits for the node.
                let waits = depends.iter().any(|(dep, how)| {
                    how.condition == "service_completed_successfully"
                        && services.get(dep).is_some_and(|d| {
                            depends_on(d)
                                .get(&host)
                                .is_some_and(|h| h.condition == "service_healthy")
                        })
                });
                if !waits {
                    problem(format!(
                        "does not wait (condition: service_completed_successfully) for a \
                         service that creates the cluster once `{host}` is healthy"
                    ));
                }
            } else if depends.get(&host).map(|d| d.condition.as_str()) != Some("service_healthy") {
                problem(format!(
                    "does not depend on `{host}` with condition: service_healthy"
                ));
            }
            if key == "SECKILL_KAFKA_BROKERS" {
                // Clients reconnect to the advertised address, so it must be the same one.
                let advertised =
                    env_of(target, "KAFKA_ADVERTISED_LISTENERS", vars).unwrap_or_default();
                let wanted = format!("{host}:{}", got_port.unwrap_or(port));
                if !advertised
                    .split(',')
                    .any(|l| l.trim().ends_with(&format!("://{wanted}")))
                {
                    problem(format!(
                        "{key}: {wanted} is not among the broker's advertised listeners `{advertised}`"
                    ));
                }
            }
            if key == "SECKILL_MYSQL_URL" {
                check_mysql_credentials(
                    settings.mysql_url.expose_secret(),
                    &host,
                    target,
                    vars,
                    &mut problem,
                );
            }
        }
    }
}

/// The `cluster` profile: its six nodes, the one-shot service that makes them a cluster of
/// three primaries with a replica each, the programs' wait for it, and the cluster URL the
/// file tells its users to set.
fn check_cluster_profile(
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
        if profiles(node) != [CLUSTER_PROFILE] {
            problem(format!(
                "has profiles {:?}, not [{CLUSTER_PROFILE}]",
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
    if profiles(init) != [CLUSTER_PROFILE] {
        problem(format!(
            "has profiles {:?}, not [{CLUSTER_PROFILE}]",
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

/// Every `SECKILL_REDIS_URL=redis...` that the text shows its users.
fn documented_redis_urls(text: &str) -> Vec<String> {
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

/// The user, password and database in the URL are the ones the MySQL container creates.
fn check_mysql_credentials(
    url: &str,
    host: &str,
    mysql: &Value,
    vars: &Host,
    problem: &mut impl FnMut(String),
) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (creds, after) = rest.rsplit_once('@').unwrap_or(("", rest));
    let (user, password) = creds.split_once(':').unwrap_or((creds, ""));
    let database = after.split_once('/').map_or("", |(_, d)| d);
    let database = database.split('?').next().unwrap_or_default();
    for (what, got, var) in [
        ("user", user, "MYSQL_USER"),
        ("password", password, "MYSQL_PASSWORD"),
        ("database", database, "MYSQL_DATABASE"),
    ] {
        let want = env_of(mysql, var, vars).unwrap_or_default();
        if got != want {
            problem(format!(
                "SECKILL_MYSQL_URL: {what} `{got}` is not {host}'s {var} `{want}`"
            ));
        }
    }
}

/// Checks the Dockerfile builds and ships both programs.
fn check_dockerfile(text: &str, rust_version: &str) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    // Join continuation lines, drop comments.
    let joined = text.replace("\\\n", " ");
    let lines: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    let has_flag = |line: &str, flag: &str| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let parts: Vec<&str> = flag.split(' ').collect();
        words.windows(parts.len()).any(|w| w == parts.as_slice())
    };
    let builds: Vec<&&str> = lines.iter().filter(|l| l.contains("cargo build")).collect();
    if builds.is_empty() {
        problems.push("no `cargo build`".to_string());
    }
    for flag in ["--release", "--locked", "--bin gateway", "--bin worker"] {
        if !builds.iter().any(|l| has_flag(l, flag)) {
            problems.push(format!("`cargo build` lacks `{flag}`"));
        }
    }
    let froms: Vec<&&str> = lines.iter().filter(|l| l.starts_with("FROM ")).collect();
    if !froms
        .iter()
        .any(|l| l.starts_with(&format!("FROM rust:{rust_version}")))
    {
        problems.push(format!(
            "no builder `FROM rust:{rust_version}...` (the workspace's rust-version)"
        ));
    }
    if froms.len() < 2 {
        problems.push("not multi-stage".to_string());
    }
    // The runtime stage: after the last FROM.
    let last_from = lines
        .iter()
        .rposition(|l| l.starts_with("FROM "))
        .unwrap_or(0);
    let runtime = &lines[last_from..];
    for program in ["gateway", "worker"] {
        if !runtime
            .iter()
            .any(|l| l.starts_with("COPY ") && l.contains(program) && l.contains("/usr/local/bin"))
        {
            problems.push(format!(
                "the runtime stage does not copy `{program}` to /usr/local/bin"
            ));
        }
    }
    match runtime.iter().rev().find(|l| l.starts_with("USER ")) {
        Some(user) => {
            let who = user["USER ".len()..]
                .split(':')
                .next()
                .unwrap_or_default()
                .trim();
            if who == "root" || who == "0" {
                problems.push("the runtime stage runs as root".to_string());
            }
        }
        None => problems.push("the runtime stage has no USER (runs as root)".to_string()),
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

// ---------------------------------------------------------------- compose helpers

/// A YAML scalar as compose reads it into a string.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `environment:` as a mapping or a list of `KEY=VALUE`; `None` for a value taken from the
/// host (`KEY:` with no value, or `- KEY`).
fn environment(service: &Value) -> Result<BTreeMap<String, Option<String>>, String> {
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
fn env_of(service: &Value, key: &str, vars: &Host) -> Option<String> {
    let value = environment(service).ok()?.remove(key)??;
    interpolate_in(&value, vars).ok()
}

/// Compose's `${VAR:-default}` interpolation, as on a host where no variable is set.
fn interpolate(raw: &str) -> Result<String, String> {
    interpolate_in(raw, &Host::new())
}

/// Compose's `${VAR:-default}` interpolation, on a host with `vars` set.
fn interpolate_in(raw: &str, vars: &Host) -> Result<String, String> {
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
fn words(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().filter_map(scalar).collect(),
        v => scalar(v)
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    }
}

/// The healthcheck command as one string, `None` when there is none or it is disabled.
fn healthcheck(service: &Value) -> Option<String> {
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
struct Dependency {
    condition: String,
    /// `required: false` makes compose only warn when the service is not started.
    required: bool,
}

/// `depends_on` as service → dependency (the list form means `service_started`, required).
fn depends_on(service: &Value) -> BTreeMap<String, Dependency> {
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
fn profiles(service: &Value) -> Vec<String> {
    service
        .get("profiles")
        .and_then(Value::as_sequence)
        .map(|p| p.iter().filter_map(scalar).collect())
        .unwrap_or_default()
}

/// Whether `up` starts the service with the profiles `on`.
fn is_on(service: &Value, on: &BTreeSet<String>) -> bool {
    let p = profiles(service);
    p.is_empty() || p.iter().any(|p| on.contains(p))
}

/// A command's `--flag value` (the last one, as redis-server reads it).
fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    argv.iter()
        .rposition(|w| w == flag)
        .and_then(|i| argv.get(i + 1).cloned())
}

/// The argv of a service: entrypoint and command.
fn argv_of(service: &Value) -> Vec<String> {
    let mut argv = service.get("entrypoint").map(words).unwrap_or_default();
    argv.extend(service.get("command").map(words).unwrap_or_default());
    argv
}

/// A Redis server started with `--cluster-enabled yes`.
fn is_cluster_node(service: &Value) -> bool {
    flag_value(&argv_of(service), "--cluster-enabled").as_deref() == Some("yes")
}

/// The port a redis-server listens on.
fn redis_port(service: &Value) -> Option<u16> {
    match flag_value(&argv_of(service), "--port") {
        Some(p) => p.parse().ok(),
        None => Some(6379),
    }
}

/// The Dockerfile a service builds from, if it has `build`.
fn build_dockerfile(service: &Value) -> Option<PathBuf> {
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
fn published_ports(service: &Value) -> Result<Vec<(Option<u16>, u16)>, String> {
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
fn mounts(service: &Value) -> Vec<(String, String)> {
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
fn image_name(image: &str) -> &str {
    let last = image.rsplit('/').next().unwrap_or(image);
    last.split([':', '@']).next().unwrap_or(last)
}

/// Host and port of `scheme://[user[:password]@]host[:port][/path]`.
fn url_host_port(url: &str) -> Result<(String, Option<u16>), String> {
    let rest = url
        .split_once("://")
        .ok_or_else(|| format!("`{url}` is not a URL"))?
        .1;
    let authority = rest.split(['/', '?']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    split_host_port(host_port)
}

/// `host:port,host:port`.
fn host_port_list(list: &str) -> Result<Vec<(String, Option<u16>)>, String> {
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

// ---------------------------------------------------------------- the tests

fn compose_text() -> String {
    read_repo_file("docker-compose.yml")
}

/// The real compose file with one exact piece of text replaced (which must be there).
fn compose_with(from: &str, to: &str) -> String {
    let text = compose_text();
    assert!(
        text.contains(from),
        "docker-compose.yml no longer contains {from:?}; update the test"
    );
    text.replacen(from, to, 1)
}

/// The checker must reject `text` with a problem mentioning every one of `needles`.
fn assert_rejected(text: &str, needles: &[&str]) {
    let problems = check_compose(text).expect_err("the checker accepted a broken compose file");
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; got:\n{}",
        problems.join("\n")
    );
}

#[test]
fn compose_file_matches_the_settings() {
    if let Err(problems) = check_compose(&compose_text()) {
        panic!("docker-compose.yml:\n  {}", problems.join("\n  "));
    }
}

#[test]
fn dockerfile_builds_and_ships_both_programs() {
    let manifest = read_repo_file("Cargo.toml");
    let workspace: toml::Table = toml::from_str(&manifest).unwrap();
    let rust_version = workspace["workspace"]["package"]["rust-version"]
        .as_str()
        .expect("workspace.package.rust-version");
    if let Err(problems) = check_dockerfile(&read_repo_file("Dockerfile"), rust_version) {
        panic!("Dockerfile:\n  {}", problems.join("\n  "));
    }
    let ignore = read_repo_file(".dockerignore");
    for entry in ["target", ".dev", ".git"] {
        assert!(
            ignore.lines().any(|l| l.trim() == entry),
            ".dockerignore lacks {entry}"
        );
    }
}

#[test]
fn checker_catches_a_misspelled_setting() {
    let text = compose_with("  SECKILL_REDIS_URL: ", "  SECKILL_REDIS_ULR: ");
    assert_rejected(&text, &["SECKILL_REDIS_ULR is not a setting"]);
    // The real one is then missing, too.
    assert_rejected(&text, &["gateway-1", "does not set SECKILL_REDIS_URL"]);
}

#[test]
fn checker_catches_wrong_hosts_ports_and_values() {
    assert_rejected(
        &compose_with("redis://redis:6379/", "redis://localhost:6379/"),
        &["worker-1", "`localhost` is not a service"],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_KAFKA_BROKERS: kafka:9092",
            "SECKILL_KAFKA_BROKERS: kafka:29092",
        ),
        &["gateway-2", "kafka listens on 9092, not 29092"],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_ZK_HOSTS: zookeeper:2181",
            "SECKILL_ZK_HOSTS: redis:2181",
        ),
        &["worker-2", "runs image `redis`, not zookeeper"],
    );
    assert_rejected(
        &compose_with("\"8082:8080\"", "\"8082:8000\""),
        &["gateway-2", "does not publish 8082:8080"],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_WORKER_BATCH_SIZE: \"500\"",
            "SECKILL_WORKER_BATCH_SIZE: lots",
        ),
        &[
            "worker-1",
            "settings do not load",
            "SECKILL_WORKER_BATCH_SIZE",
        ],
    );
    assert_rejected(
        &compose_with(
            "SECKILL_HTTP_ADDR: 0.0.0.0:8080",
            "SECKILL_HTTP_ADDR: 127.0.0.1:8080",
        ),
        &["gateway-1", "use 0.0.0.0"],
    );
    let no_token = compose_with(
        "${SECKILL_ADMIN_TOKEN:-change-me}",
        "${SECKILL_ADMIN_TOKEN}",
    );
    assert_rejected(&no_token, &["gateway-1", "SECKILL_ADMIN_TOKEN is empty"]);
    assert_rejected(
        &no_token,
        &["worker-2", "SECKILL_ADMIN_TOKEN is empty", "worker refuses"],
    );
    assert_rejected(
        &compose_with(
            "  SECKILL_ADMIN_TOKEN: ${SECKILL_ADMIN_TOKEN:-change-me}\n",
            "",
        ),
        &["worker-1", "does not set SECKILL_ADMIN_TOKEN"],
    );
    assert_rejected(
        &compose_with(
            "KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://kafka:9092",
            "KAFKA_ADVERTISED_LISTENERS: PLAINTEXT://localhost:9092",
        ),
        &["advertised listeners"],
    );
    assert_rejected(
        &compose_with(
            "command: [\"worker\"]",
            "command: [\"worker\", \"migrate\"]",
        ),
        &["worker-1", "exits after migrating"],
    );
    assert_rejected(
        &compose_with("command: [\"gateway\"]", "command: [\"worker\"]"),
        &["gateway-1", "not `gateway`"],
    );
    assert_rejected(
        &compose_with("MYSQL_PASSWORD: seckill", "MYSQL_PASSWORD: other"),
        &[
            "worker-1",
            "password `seckill` is not mysql's MYSQL_PASSWORD `other`",
        ],
    );
    assert_rejected(
        &compose_with(
            "  redis:\n    image: redis:7\n",
            "  cache:\n    image: redis:7\n",
        ),
        &["service `redis` is missing"],
    );
}

#[test]
fn checker_reads_list_environments_and_merge_keys() {
    let text = "
x-env: &env
  - SECKILL_REDIS_URL=redis://r:6379/
  - SECKILL_MYSQL_URLL=mysql://x
services:
  a:
    <<: {environment: *env}
";
    let problems = check_compose(text).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p == "a: SECKILL_MYSQL_URLL is not a setting"),
        "{problems:?}"
    );
    assert!(
        !problems
            .iter()
            .any(|p| p.contains("SECKILL_REDIS_URL is not")),
        "{problems:?}"
    );
}

#[test]
fn checker_catches_a_broken_dockerfile() {
    let good = read_repo_file("Dockerfile");
    let bad = good.replace("--bin worker", "");
    let problems = check_dockerfile(&bad, "1.95").unwrap_err();
    assert!(
        problems.iter().any(|p| p.contains("--bin worker")),
        "{problems:?}"
    );
}

#[test]
fn interpolation_is_compose_like_with_an_empty_host_environment() {
    assert_eq!(interpolate("${A:-x}").unwrap(), "x");
    assert_eq!(interpolate("a-${A-y}-b").unwrap(), "a-y-b");
    assert_eq!(interpolate("${A:-${B:-nested}}").unwrap(), "nested");
    assert_eq!(interpolate("${A}$B.$$").unwrap(), ".$");
    assert_eq!(interpolate("${A:+set}").unwrap(), "");
    assert!(interpolate("${A:?required}").is_err());
    assert!(interpolate("${A").is_err());
    assert!(interpolate("a $ b").is_err());
}

#[test]
fn interpolation_reads_the_host_environment() {
    let vars = host(&[("A", "a"), ("E", "")]);
    assert_eq!(interpolate_in("${A:-x}", &vars).unwrap(), "a");
    assert_eq!(interpolate_in("${E:-x}", &vars).unwrap(), "x");
    assert_eq!(interpolate_in("${E-x}", &vars).unwrap(), "");
    assert_eq!(interpolate_in("${U-x}", &vars).unwrap(), "x");
    assert_eq!(
        interpolate_in("${A:+set}|${E:+set}", &vars).unwrap(),
        "set|"
    );
    assert_eq!(interpolate_in("$A-${A}-$$A", &vars).unwrap(), "a-a-$A");
    assert_eq!(interpolate_in("${A:?required}", &vars).unwrap(), "a");
    assert!(interpolate_in("${E:?required}", &vars).is_err());
}

/// The host of `COMPOSE_PROFILES=cluster SECKILL_REDIS_URL=<url> docker compose up`.
fn cluster_host(url: &str) -> Host {
    host(&[
        ("COMPOSE_PROFILES", CLUSTER_PROFILE),
        ("SECKILL_REDIS_URL", url),
    ])
}

/// The cluster URL the compose file documents (its header, and the init's error message).
fn documented_cluster_url() -> String {
    let urls = documented_redis_urls(&compose_text());
    assert!(
        !urls.is_empty(),
        "docker-compose.yml documents no cluster URL"
    );
    assert!(urls.iter().all(|u| *u == urls[0]), "{urls:?}");
    urls[0].clone()
}

#[test]
fn compose_file_runs_on_the_cluster_profile() {
    let url = documented_cluster_url();
    assert!(
        matches!(Topology::parse(&url, false), Ok(Topology::Cluster(ref n)) if n.len() == 6),
        "{url}"
    );
    if let Err(problems) = check_compose_in(&compose_text(), &cluster_host(&url)) {
        panic!(
            "docker-compose.yml with the cluster profile and SECKILL_REDIS_URL={url}:\n  {}",
            problems.join("\n  ")
        );
    }
}

/// The checker, with the profile on and the documented URL set, must reject `text`.
fn assert_rejected_on_the_cluster(text: &str, needles: &[&str]) {
    let problems = check_compose_in(text, &cluster_host(&documented_cluster_url()))
        .expect_err("the checker accepted a broken cluster profile");
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; got:\n{}",
        problems.join("\n")
    );
}

#[test]
fn checker_catches_a_broken_cluster_node() {
    assert_rejected(
        &compose_with(
            "\"--cluster-enabled\", \"yes\"",
            "\"--cluster-enabled\", \"no\"",
        ),
        &["redis-node-1", "does not run with `--cluster-enabled yes`"],
    );
    assert_rejected(
        &compose_with(
            "\"--cluster-node-timeout\", \"5000\"",
            "\"--cluster-node-timeout\", \"15000\"",
        ),
        &["redis-node-1", "`--cluster-node-timeout 5000`"],
    );
    // The nodes' healthcheck comes from their anchor.
    assert_rejected(
        &compose_with(
            "  profiles: [cluster]\n  restart: unless-stopped\n  healthcheck:\n    test: [\"CMD\", \"redis-cli\", \"-p\", \"6379\", \"ping\"]",
            "  profiles: [cluster]\n  restart: unless-stopped\n  healthcheck:\n    test: [\"NONE\"]",
        ),
        &["redis-node-4: no healthcheck"],
    );
    assert_rejected(
        &compose_with("  profiles: [cluster]\n  restart: unless-stopped\n", ""),
        &["redis-node-2", "has profiles [], not [cluster]"],
    );
    assert_rejected(
        &compose_with("- redis-node-2-data:/data", "- redis-node-1-data:/data"),
        &["redis-node-2", "shares volume `redis-node-1-data`"],
    );
    assert_rejected(
        &compose_with("- redis-node-3-data:/data", "- ./redis3:/data"),
        &["redis-node-3", "named volume of its own"],
    );
    assert_rejected(
        &compose_with("  redis-node-6:\n", "  redis-node-7:\n"),
        &["service `redis-node-6` is missing"],
    );
    assert_rejected(
        &compose_with(
            "  image: redis:7\n  profiles:",
            "  image: redis:latest\n  profiles:",
        ),
        &["redis-node-5", "runs image Some(\"redis:latest\")"],
    );
}

#[test]
fn checker_catches_a_wrong_cluster_init() {
    assert_rejected(
        &compose_with(
            "redis-node-5:6379 redis-node-6:6379\n",
            "redis-node-5:6379\n",
        ),
        &[
            "redis-cluster-init",
            "CLUSTER_NODES",
            "not exactly the nodes",
        ],
    );
    assert_rejected(
        &compose_with(
            "redis-node-5:6379 redis-node-6:6379\n",
            "redis-node-5:6379 redis-node-5:6379\n",
        ),
        &["redis-cluster-init", "not exactly the nodes"],
    );
    assert_rejected(
        &compose_with("--cluster-replicas 1", "--cluster-replicas 0"),
        &[
            "redis-cluster-init",
            "6 nodes into 6 primaries with 0 replicas",
        ],
    );
    assert_rejected(
        &compose_with("--cluster-replicas 1 --cluster-yes", "--cluster-replicas 1"),
        &["redis-cluster-init", "--cluster-yes"],
    );
    assert_rejected(
        &compose_with("s/^cluster_known_nodes://p", "s/^cluster_size://p"),
        &[
            "redis-cluster-init",
            "without first checking whether the cluster exists",
        ],
    );
    assert_rejected(
        &compose_with("    restart: \"no\"\n", "    restart: unless-stopped\n"),
        &["redis-cluster-init", "restarts it after it completes"],
    );
    assert_rejected(
        &compose_with(
            "      redis-node-3:\n        condition: service_healthy",
            "      redis-node-3:\n        condition: service_started",
        ),
        &["redis-cluster-init", "does not wait for `redis-node-3`"],
    );
    assert_rejected(
        &compose_with(
            "APPS_REDIS_URL: *redis-url",
            "APPS_REDIS_URL: redis+cluster://redis-node-1:6379",
        ),
        &["redis-cluster-init", "APPS_REDIS_URL", "gateway-1"],
    );
}

#[test]
fn checker_catches_a_wrong_documented_cluster_url() {
    let documented = format!("SECKILL_REDIS_URL={}", documented_cluster_url());
    let with_url = |url: &str| compose_with(&documented, &format!("SECKILL_REDIS_URL={url}"));
    assert_rejected(
        &with_url("redis+cluster://redis:6379,redis-node-2:6379,redis-node-3:6379,redis-node-4:6379,redis-node-5:6379,redis-node-6:6379"),
        &["documented SECKILL_REDIS_URL", "`redis` is not a cluster node"],
    );
    assert_rejected(
        &with_url("redis+cluster://redis-node-1:7001,redis-node-2:6379,redis-node-3:6379,redis-node-4:6379,redis-node-5:6379,redis-node-6:6379"),
        &["documented SECKILL_REDIS_URL", "redis-node-1 listens on Some(6379), not Some(7001)"],
    );
    assert_rejected(
        &with_url("redis://redis-node-1:6379/"),
        &["documented SECKILL_REDIS_URL", "one server, not a cluster"],
    );
    assert_rejected(
        &with_url("redis+cluster://redis-node-1:6379,redis-node-2:6379,redis-node-3:6379"),
        &[
            "documented SECKILL_REDIS_URL",
            "does not name",
            "redis-node-6",
        ],
    );
    assert_rejected(
        &with_url("redis+cluster://redis-node-1:6379/3"),
        &["documented SECKILL_REDIS_URL", "database 0 only"],
    );
}

#[test]
fn checker_catches_a_required_or_missing_wait_for_the_cluster() {
    // Without `required: false`, `docker compose up` without the profile fails.
    let required = compose_with(
        "      condition: service_completed_successfully\n      required: false\n",
        "      condition: service_completed_successfully\n",
    );
    assert_rejected(
        &required,
        &[
            "gateway-2",
            "depends on `redis-cluster-init`",
            "without `required: false`",
        ],
    );
    assert_rejected(
        &required,
        &[
            "worker-1",
            "does not depend on `redis-cluster-init`",
            "required: false",
        ],
    );
    // Started is not created: the programs would race the cluster's creation.
    let started = compose_with(
        "      condition: service_completed_successfully\n      required: false\n",
        "      condition: service_started\n      required: false\n",
    );
    assert_rejected(
        &started,
        &[
            "worker-2",
            "does not depend on `redis-cluster-init` with condition",
        ],
    );
    assert_rejected_on_the_cluster(
        &started,
        &[
            "gateway-1",
            "does not wait",
            "creates the cluster once `redis-node-1`",
        ],
    );
}

#[test]
fn checker_catches_programs_that_miss_the_cluster() {
    let text = compose_text();
    // The profile on, but SECKILL_REDIS_URL left at the single server.
    let problems =
        check_compose_in(&text, &host(&[("COMPOSE_PROFILES", CLUSTER_PROFILE)])).unwrap_err();
    assert!(
        problems.iter().any(|p| p.starts_with("worker-1:")
            && p.contains("`cluster` profile is on, but SECKILL_REDIS_URL `redis://redis:6379/` is not a cluster")),
        "{problems:?}"
    );
    // The cluster URL without the profile: its nodes do not run.
    let problems = check_compose_in(
        &text,
        &host(&[("SECKILL_REDIS_URL", &documented_cluster_url())]),
    )
    .unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("gateway-2:")
                && p.contains("`redis-node-3` runs only with profiles")),
        "{problems:?}"
    );
    // A URL the programs cannot be given from the host.
    assert_rejected_on_the_cluster(
        &compose_with(
            "${SECKILL_REDIS_URL:-redis://redis:6379/}",
            "redis://redis:6379/",
        ),
        &["gateway-1", "`cluster` profile is on", "is not a cluster"],
    );
    // One node of the cluster URL as a single server.
    let problems =
        check_compose_in(&text, &cluster_host("redis://redis-node-1:6379/")).unwrap_err();
    assert!(
        problems.iter().any(|p| p.starts_with("worker-2:")
            && p.contains("`redis-node-1` is a cluster node, but the URL names one server")),
        "{problems:?}"
    );
    // The single server named as a cluster.
    let problems =
        check_compose_in(&text, &cluster_host("redis+cluster://redis:6379")).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("gateway-1:") && p.contains("`redis` is not a cluster node")),
        "{problems:?}"
    );
}
