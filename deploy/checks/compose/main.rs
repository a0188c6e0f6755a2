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
/// Gateways and the host port each publishes; the last runs with the `ha` profile only.
const GATEWAYS: [(&str, u16); 3] = [
    ("gateway-1", 8081),
    ("gateway-2", 8082),
    ("gateway-3", 8083),
];
const WORKERS: [&str; 3] = ["worker-1", "worker-2", "worker-3"];
/// Gateways and workers that run with the `ha` profile only.
const HA_ONLY_APPS: [&str; 2] = ["gateway-3", "worker-3"];
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
/// The profiles the cluster's nodes and init run with: `cluster`, and `ha`, which includes it.
const CLUSTER_PROFILES: [&str; 2] = [CLUSTER_PROFILE, HA_PROFILE];
const CLUSTER_NODE_PREFIX: &str = "redis-node-";
const CLUSTER_INIT: &str = "redis-cluster-init";
/// Three primaries, each with one replica.
const CLUSTER_PRIMARIES: usize = 3;
const CLUSTER_REPLICAS: usize = 1;
/// The profile that runs the production topology: a ZooKeeper ensemble, three Kafka brokers,
/// the Redis Cluster, three gateways and three workers.
const HA_PROFILE: &str = "ha";
const ZK_ENSEMBLE: [&str; 3] = ["zookeeper-1", "zookeeper-2", "zookeeper-3"];
const HA_BROKERS: [&str; 3] = ["kafka-1", "kafka-2", "kafka-3"];
/// The topic's replicas and the writes' minimum in-sync replicas on the ha brokers.
const HA_REPLICATION_FACTOR: i32 = 3;
const HA_MIN_INSYNC: i32 = 2;
/// The one-shot service that stops the programs from starting with single-server settings.
const HA_GUARD: &str = "ha-guard";
/// The host variable that picks Prometheus's configuration in deploy/prometheus (the guard
/// gets it under the same name): `prometheus-ha.yml` with the `ha` profile.
const PROMETHEUS_CONFIG_VAR: &str = "PROMETHEUS_CONFIG";
const PROMETHEUS_HA_CONFIG: &str = "prometheus-ha.yml";
const PROMETHEUS: &str = "prometheus";
/// What the `ha` profile needs from the host: the programs' settings, and the variable the
/// guard gets each in.
const HA_VARS: [(&str, &str); 4] = [
    ("SECKILL_REDIS_URL", "APPS_REDIS_URL"),
    ("SECKILL_ZK_HOSTS", "APPS_ZK_HOSTS"),
    ("SECKILL_KAFKA_BROKERS", "APPS_KAFKA_BROKERS"),
    (
        "SECKILL_KAFKA_REPLICATION_FACTOR",
        "APPS_KAFKA_REPLICATION_FACTOR",
    ),
];

/// The secrets compose takes from the host only (`${VAR:?message}`: no default, so compose
/// refuses to start without each), with values the programs accept, for the checks that are
/// about something else.
const HOST_SECRETS: [(&str, &str); 4] = [
    (
        "SECKILL_ADMIN_TOKEN",
        "compose-check-admin-token-of-32-bytes",
    ),
    (
        "SECKILL_AUTH_HS256_SECRET",
        "compose-check-hs256-secret-of-32-bytes",
    ),
    (
        "SECKILL_ADMISSION_SECRET",
        "compose-check-admission-secret-of-32-bytes",
    ),
    ("GRAFANA_ADMIN_PASSWORD", "compose-check-grafana-password"),
];

/// The host's environment that compose interpolates `${VAR}` from (and reads
/// `COMPOSE_PROFILES` from).
type Host = BTreeMap<String, String>;

/// `host` with each of [`HOST_SECRETS`] it does not set.
fn with_secrets(host: &Host) -> Host {
    let mut host = host.clone();
    for (name, value) in HOST_SECRETS {
        host.entry(name.to_string())
            .or_insert_with(|| value.to_string());
    }
    host
}

fn host(vars: &[(&str, &str)]) -> Host {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
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

    /// The setting it listens on (its HTTP address).
    fn listen_var(self) -> &'static str {
        match self {
            Role::Gateway { .. } => "SECKILL_HTTP_ADDR",
            Role::Worker => "SECKILL_WORKER_HTTP_ADDR",
        }
    }
}

// ---------------------------------------------------------------- the checks

/// Checks a compose file's text, as `docker compose up` sees it on a host that sets the
/// secrets ([`HOST_SECRETS`]) and nothing else; `Err` lists every problem found.
fn check_compose(text: &str) -> Result<(), Vec<String>> {
    check_compose_in(text, &Host::new())
}

/// Checks a compose file's text as `docker compose up` sees it on a host with `host`'s
/// variables (its `COMPOSE_PROFILES` are the profiles on), plus the secrets it does not set.
fn check_compose_in(text: &str, host: &Host) -> Result<(), Vec<String>> {
    check_compose_exact(text, &with_secrets(host))
}

/// [`check_compose_in`] on exactly `host`'s variables.
fn check_compose_exact(text: &str, host: &Host) -> Result<(), Vec<String>> {
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

    let listen_var = role.listen_var();
    let mut required: Vec<&str> = CONNECTIONS.iter().map(|c| c.0).collect();
    required.push(listen_var);
    // The programs refuse to start without them unless run with --dev (the gateway also
    // without a buyer-token key or an admission secret).
    let secrets: &[&str] = match role {
        Role::Gateway { .. } => &[
            "SECKILL_ADMIN_TOKEN",
            "SECKILL_AUTH_HS256_SECRET",
            "SECKILL_ADMISSION_SECRET",
        ],
        Role::Worker => &["SECKILL_ADMIN_TOKEN"],
    };
    required.extend(secrets);
    for key in required {
        // A value that does not interpolate is reported with its error.
        if !is_set(key) && !matches!(env.get(key), Some(Some(_))) {
            problem(format!("does not set {key}"));
        }
    }
    // A secret is the host's alone: `${VAR:?...}`, neither a literal nor a default in the file.
    for key in secrets {
        let Some(Some(raw)) = env.get(*key) else {
            continue;
        };
        let from_host = raw
            .strip_prefix(&format!("${{{key}:?"))
            .is_some_and(|rest| rest.ends_with('}') && !rest.contains("${"));
        if !from_host {
            problem(format!(
                "{key} must be required from the host (`${{{key}:?...}}`), not written or defaulted in the file: {raw:?}"
            ));
        }
    }

    let settings = match Settings::from_sources(None, resolved.clone()) {
        Ok(s) => s,
        Err(e) => {
            problem(format!("settings do not load: {e:#}"));
            return;
        }
    };

    // The programs' own start-up checks, as without --dev.
    let mut started = settings.clone();
    let start = started
        .require_admin_token(false)
        .and_then(|()| match role {
            Role::Gateway { .. } => started
                .require_auth(false)
                .and_then(|()| started.require_admission_secret(false)),
            Role::Worker => Ok(()),
        });
    if let Err(e) = start {
        problem(format!(
            "{e:#}: the {} refuses to start without --dev",
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
    if let Some(profile) = CLUSTER_PROFILES.iter().find(|p| on.contains(**p)) {
        if !cluster {
            problem(format!(
                "the `{profile}` profile is on, but SECKILL_REDIS_URL `{}` is not a cluster",
                settings.redis_url.expose_secret()
            ));
        }
    }
    let ha = on.contains(HA_PROFILE);
    if ha && settings.kafka_replication_factor != HA_REPLICATION_FACTOR {
        problem(format!(
            "the `{HA_PROFILE}` profile is on, but SECKILL_KAFKA_REPLICATION_FACTOR is {}, \
             not {HA_REPLICATION_FACTOR}",
            settings.kafka_replication_factor
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
        // With the `ha` profile, the ensemble and all three brokers, and nothing else.
        let wanted: &[&str] = match key {
            "SECKILL_ZK_HOSTS" if ha => &ZK_ENSEMBLE,
            "SECKILL_KAFKA_BROKERS" if ha => &HA_BROKERS,
            _ => &[],
        };
        let named: BTreeSet<&str> = endpoints.iter().map(|(h, _)| h.as_str()).collect();
        let unnamed: Vec<&&str> = wanted.iter().filter(|w| !named.contains(**w)).collect();
        if !unnamed.is_empty() {
            problem(format!(
                "{key}: the `{HA_PROFILE}` profile is on, but it does not name {unnamed:?}"
            ));
        }
        for (host, got_port) in endpoints {
            let Some(target) = services.get(&host) else {
                problem(format!(
                    "{key}: host `{host}` is not a service in this file"
                ));
                continue;
            };
            if ha && key != "SECKILL_MYSQL_URL" && !profiles(target).iter().any(|p| p == HA_PROFILE)
            {
                problem(format!(
                    "{key}: the `{HA_PROFILE}` profile is on, but `{host}` is not one of its \
                     services (profiles {:?})",
                    profiles(target)
                ));
            }
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
                // The worker creates the topic with this many replicas: the broker's cluster
                // must have them (each of its nodes is a voter of its quorum).
                let nodes = env_of(target, "KAFKA_CONTROLLER_QUORUM_VOTERS", vars)
                    .map(|v| v.split(',').filter(|s| !s.trim().is_empty()).count())
                    .unwrap_or(0);
                let rf = settings.kafka_replication_factor;
                if usize::try_from(rf).map_or(true, |rf| rf > nodes) {
                    problem(format!(
                        "SECKILL_KAFKA_REPLICATION_FACTOR is {rf}, but `{host}`'s cluster has \
                         {nodes} nodes: the worker cannot create the topic"
                    ));
                }
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

/// The `ha` profile: the ZooKeeper ensemble, the three Kafka brokers, and the guard that
/// stops the programs from starting with single-server settings. (Its Redis Cluster is the
/// `cluster` profile's, checked above; its programs are checked with the others.)
fn check_ha_profile(
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

/// Prometheus scrapes exactly the gateways and workers that run with the host's profiles: its
/// `--config.file`, as the host interpolates it, names a file of deploy/prometheus (mounted at
/// /etc/prometheus) whose `gateway` and `worker` jobs list those services at the ports they
/// listen on. The guard, with the `ha` profile, sees the same file name.
fn check_prometheus(
    services: &BTreeMap<String, &Value>,
    host: &Host,
    on: &BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let Some(prometheus) = services.get(PROMETHEUS) else {
        problems.push(format!("service `{PROMETHEUS}` is missing"));
        return;
    };
    let mut problem = |p: String| problems.push(format!("{PROMETHEUS}: {p}"));
    if !mounts(prometheus)
        .iter()
        .any(|(from, to)| from == "./deploy/prometheus" && to == "/etc/prometheus")
    {
        problem("does not mount ./deploy/prometheus at /etc/prometheus".into());
    }
    let file = argv_of(prometheus).iter().find_map(|w| {
        let w = interpolate_in(w, host).ok()?;
        w.strip_prefix("--config.file=/etc/prometheus/")
            .map(str::to_string)
    });
    let Some(file) = file else {
        problem("no --config.file=/etc/prometheus/<file>".into());
        return;
    };
    let guard = services.get(HA_GUARD).filter(|g| is_on(g, on));
    if let Some(guard) = guard {
        let seen = env_of(guard, PROMETHEUS_CONFIG_VAR, host);
        if seen.as_deref() != Some(file.as_str()) {
            problem(format!(
                "reads {file}, but {HA_GUARD} checks {PROMETHEUS_CONFIG_VAR} {seen:?}"
            ));
        }
    }
    let config = match std::fs::read_to_string(repo_root().join("deploy/prometheus").join(&file))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_norway::from_str::<Value>(&t).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            problem(format!("--config.file {file}: {e}"));
            return;
        }
    };
    let apps = [
        (
            Role::Gateway { host_port: 0 },
            GATEWAYS.map(|g| g.0).to_vec(),
        ),
        (Role::Worker, WORKERS.to_vec()),
    ];
    for (role, names) in apps {
        let job = role.program();
        let want: BTreeSet<String> = names
            .iter()
            .filter_map(|n| {
                let service = services.get(*n).filter(|s| is_on(s, on))?;
                let addr = env_of(service, role.listen_var(), host)?;
                Some(format!("{n}:{}", addr.rsplit(':').next()?))
            })
            .collect();
        let got = scrape_targets(&config, job);
        if got != want {
            problem(format!(
                "{file} scrapes {got:?} as job {job}, but {want:?} run with profiles {on:?}"
            ));
        }
    }
}

/// The static targets of a Prometheus configuration's job.
fn scrape_targets(config: &Value, job: &str) -> BTreeSet<String> {
    let jobs = config
        .get("scrape_configs")
        .and_then(Value::as_sequence)
        .map(Vec::as_slice)
        .unwrap_or_default();
    jobs.iter()
        .filter(|j| j.get("job_name").and_then(scalar).as_deref() == Some(job))
        .flat_map(|j| {
            j.get("static_configs")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
        })
        .flat_map(|c| {
            c.get("targets")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
        })
        .filter_map(scalar)
        .collect()
}

/// The host of the `COMPOSE_PROFILES=ha VAR=value ... docker compose up` the text documents.
fn documented_ha_host(text: &str) -> Option<Host> {
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
            "${SECKILL_KAFKA_BROKERS:-kafka:9092}",
            "${SECKILL_KAFKA_BROKERS:-kafka:29092}",
        ),
        &["gateway-2", "kafka listens on 9092, not 29092"],
    );
    assert_rejected(
        &compose_with(
            "${SECKILL_ZK_HOSTS:-zookeeper:2181}",
            "${SECKILL_ZK_HOSTS:-redis:2181}",
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
    // The secrets' lines.
    let admin_line = compose_text()
        .lines()
        .find(|l| l.trim_start().starts_with("SECKILL_ADMIN_TOKEN: "))
        .expect("an SECKILL_ADMIN_TOKEN line")
        .to_owned();
    let admission_line = compose_text()
        .lines()
        .find(|l| l.trim_start().starts_with("SECKILL_ADMISSION_SECRET: "))
        .expect("an SECKILL_ADMISSION_SECRET line")
        .to_owned();
    assert_rejected(
        &compose_with(&format!("{admin_line}\n"), ""),
        &["worker-1", "does not set SECKILL_ADMIN_TOKEN"],
    );
    assert_rejected(
        &compose_with(&format!("{admission_line}\n"), ""),
        &["gateway-1", "does not set SECKILL_ADMISSION_SECRET"],
    );
    // A default, even a long one, is published with the file.
    let defaulted = compose_with(
        &admission_line,
        "  SECKILL_ADMISSION_SECRET: ${SECKILL_ADMISSION_SECRET:-change-me-to-another-secret-of-32-bytes}",
    );
    assert_rejected(
        &defaulted,
        &[
            "gateway-1",
            "SECKILL_ADMISSION_SECRET",
            "required from the host",
        ],
    );
    assert_rejected(
        &defaulted,
        &["compose starts without SECKILL_ADMISSION_SECRET"],
    );
    assert_rejected(&defaulted, &["change-me"]);
    // So is a value written in the file.
    assert_rejected(
        &compose_with(
            &admin_line,
            "  SECKILL_ADMIN_TOKEN: a-literal-admin-token-of-32-bytes-or-more",
        ),
        &["worker-2", "SECKILL_ADMIN_TOKEN", "required from the host"],
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

/// Compose reads the whole file before it starts anything: without any one of the secrets
/// on the host, it stops with that secret's message, and the programs would refuse the
/// settings too.
#[test]
fn compose_refuses_to_start_without_each_secret() {
    let text = compose_text();
    assert!(!text.contains("change-me"), "a published default secret");
    check_compose_exact(&text, &with_secrets(&Host::new())).expect("with every secret set");
    for (name, _) in HOST_SECRETS {
        let mut host = with_secrets(&Host::new());
        host.remove(name);
        let problems = check_compose_exact(&text, &host).expect_err(name);
        let refusal = format!("needs {name} from the host: compose refuses to start without it");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("compose refuses to start") && p.contains(&refusal)),
            "{name}: {problems:#?}"
        );
        // An empty value counts as unset (`:?`).
        host.insert(name.to_string(), String::new());
        assert!(
            check_compose_exact(&text, &host)
                .unwrap_err()
                .iter()
                .any(|p| p.contains(&refusal)),
            "{name} empty"
        );
    }
    // None at all: each gateway names each of its three, and the programs refuse to start.
    let problems = check_compose_exact(&text, &Host::new()).unwrap_err();
    for (app, name) in [
        ("gateway-1", "SECKILL_ADMIN_TOKEN"),
        ("gateway-2", "SECKILL_AUTH_HS256_SECRET"),
        ("gateway-1", "SECKILL_ADMISSION_SECRET"),
        ("worker-2", "SECKILL_ADMIN_TOKEN"),
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(&format!("{app}: {name}: "))
                    && p.contains("refuses to start")),
            "{app} {name}: {problems:#?}"
        );
    }
    assert!(
        problems.iter().any(|p| p.starts_with("gateway-1: ")
            && p.contains("the gateway refuses to start without --dev")),
        "{problems:#?}"
    );
}

/// The host's secrets are checked as the programs check them.
#[test]
fn checker_catches_weak_or_shared_secrets() {
    let text = compose_text();
    assert_rejected_in(
        &text,
        &host(&[("SECKILL_ADMIN_TOKEN", "short-admin-token")]),
        &[
            "gateway-1",
            "settings do not load",
            "SECKILL_ADMIN_TOKEN",
            "32 bytes",
        ],
    );
    assert_rejected_in(
        &text,
        &host(&[("SECKILL_ADMIN_TOKEN", "short-admin-token")]),
        &["worker-1", "settings do not load", "SECKILL_ADMIN_TOKEN"],
    );
    let same = "the-same-secret-of-at-least-32-bytes";
    assert_rejected_in(
        &text,
        &host(&[
            ("SECKILL_ADMIN_TOKEN", same),
            ("SECKILL_ADMISSION_SECRET", same),
        ]),
        &[
            "gateway-2",
            "SECKILL_ADMISSION_SECRET",
            "must differ from SECKILL_ADMIN_TOKEN",
        ],
    );
    assert_rejected_in(
        &text,
        &host(&[("SECKILL_ADMISSION_SECRET", "short")]),
        &["gateway-1", "SECKILL_ADMISSION_SECRET", "32 bytes"],
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
            "  profiles: [cluster, ha]\n  restart: unless-stopped\n  healthcheck:\n    test: [\"CMD\", \"redis-cli\", \"-p\", \"6379\", \"ping\"]",
            "  profiles: [cluster, ha]\n  restart: unless-stopped\n  healthcheck:\n    test: [\"NONE\"]",
        ),
        &["redis-node-4: no healthcheck"],
    );
    assert_rejected(
        &compose_with("  profiles: [cluster, ha]\n  restart: unless-stopped\n", ""),
        &["redis-node-2", "has profiles [], not [\"cluster\", \"ha\"]"],
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

// ---------------------------------------------------------------- the `ha` profile

/// The host of the `COMPOSE_PROFILES=ha ... docker compose up` that `text` documents.
fn ha_host_of(text: &str) -> Host {
    documented_ha_host(text).expect("docker-compose.yml documents no `COMPOSE_PROFILES=ha` command")
}

/// The documented ha host with `var` set to `value` (or removed, for `None`).
fn ha_host_with(var: &str, value: Option<&str>) -> Host {
    let mut vars = ha_host_of(&compose_text());
    match value {
        Some(v) => vars.insert(var.to_string(), v.to_string()),
        None => vars.remove(var),
    };
    vars
}

/// The checker, on `vars`, must reject `text` with a problem mentioning every one of `needles`.
fn assert_rejected_in(text: &str, vars: &Host, needles: &[&str]) {
    let problems =
        check_compose_in(text, vars).expect_err("the checker accepted a broken ha setup");
    assert!(
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n))),
        "no problem mentions {needles:?}; got:\n{}",
        problems.join("\n")
    );
}

/// The checker, with the profile on and the variables `text` documents, must reject `text`.
fn assert_rejected_on_ha(text: &str, needles: &[&str]) {
    assert_rejected_in(text, &ha_host_of(text), needles);
}

#[test]
fn compose_file_runs_on_the_ha_profile() {
    let text = compose_text();
    let vars = ha_host_of(&text);
    let want = host(&[
        ("COMPOSE_PROFILES", HA_PROFILE),
        ("SECKILL_REDIS_URL", &documented_cluster_url()),
        (
            "SECKILL_ZK_HOSTS",
            "zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181",
        ),
        (
            "SECKILL_KAFKA_BROKERS",
            "kafka-1:9092,kafka-2:9092,kafka-3:9092",
        ),
        ("SECKILL_KAFKA_REPLICATION_FACTOR", "3"),
        (PROMETHEUS_CONFIG_VAR, PROMETHEUS_HA_CONFIG),
    ]);
    assert_eq!(vars, want, "the documented ha command");
    if let Err(problems) = check_compose_in(&text, &vars) {
        panic!(
            "docker-compose.yml with {vars:?}:\n  {}",
            problems.join("\n  ")
        );
    }
}

#[test]
fn checker_catches_a_broken_zookeeper_ensemble() {
    assert_rejected(
        &compose_with("      ZOO_MY_ID: 3\n", "      ZOO_MY_ID: 2\n"),
        &["zookeeper-3", "ZOO_MY_ID 2 is also `zookeeper-2`'s"],
    );
    // A server missing from the list (every server shares it).
    assert_rejected(
        &compose_with(" server.3=zookeeper-3:2888:3888;2181", ""),
        &[
            "zookeeper-1",
            "ZOO_SERVERS lists",
            "not the ensemble's servers",
        ],
    );
    // Ids that are not the servers' own.
    assert_rejected(
        &compose_with(
            "server.1=zookeeper-1:2888:3888;2181 server.2=zookeeper-2:",
            "server.1=zookeeper-2:2888:3888;2181 server.2=zookeeper-1:",
        ),
        &["zookeeper-2", "ZOO_SERVERS lists", "(2, \"zookeeper-2\")"],
    );
    assert_rejected(
        &compose_with(
            "server.2=zookeeper-2:2888:3888;2181",
            "server.2=zookeeper-2:2888:3888;2182",
        ),
        &["zookeeper-3", "clients connect on 2181, not 2182"],
    );
    assert_rejected(
        &compose_with(
            "leader.\n    test: [\"CMD\", \"zkServer.sh\", \"status\"]",
            "leader.\n    test: [\"NONE\"]",
        ),
        &["zookeeper-2: no healthcheck"],
    );
    assert_rejected(
        &compose_with(
            "  image: zookeeper:3.8\n  profiles: [ha]",
            "  image: zookeeper:3.9\n  profiles: [ha]",
        ),
        &["zookeeper-1", "runs image Some(\"zookeeper:3.9\")"],
    );
    assert_rejected(
        &compose_with(
            "- zookeeper-3-datalog:/datalog",
            "- zookeeper-2-datalog:/datalog",
        ),
        &["zookeeper-3", "shares volume `zookeeper-2-datalog`"],
    );
    assert_rejected(
        &compose_with("      ZOO_MY_ID: 2\n", "      ZOO_MY_ID: 0\n"),
        &[
            "zookeeper-2",
            "ZOO_MY_ID Some(0) is not an id from 1 to 255",
        ],
    );
    assert_rejected(
        &compose_with(
            "server.1=zookeeper-1:2888:3888;2181",
            "server.1=zookeeper-1:3888:3888;2181",
        ),
        &["zookeeper-1", "one port for quorum and election"],
    );
    assert_rejected(
        &compose_with(
            "server.1=zookeeper-1:2888:3888;2181",
            "server.1=zookeeper-1;2181",
        ),
        &["zookeeper-2", "cannot read `server.1=zookeeper-1;2181`"],
    );
    assert_rejected(
        &compose_with(
            "  image: zookeeper:3.8\n  profiles: [ha]",
            "  image: zookeeper:3.8\n  profiles: [cluster]",
        ),
        &["zookeeper-3: has profiles [\"cluster\"], not [ha]"],
    );
    assert_rejected(
        &compose_with("- zookeeper-1-data:/data", "- ./zk1:/data"),
        &["zookeeper-1", "/data on a named volume of its own"],
    );
    assert_rejected(
        &compose_with(
            "  zookeeper-3:\n    <<: *zookeeper-server",
            "  zookeeper-4:\n    <<: *zookeeper-server",
        ),
        &["service `zookeeper-3` is missing"],
    );
}

#[test]
fn checker_catches_a_broken_kafka_quorum() {
    let two_voters = compose_with(
        "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093",
        "1@kafka-1:9093,2@kafka-2:9093",
    );
    assert_rejected(
        &two_voters,
        &[
            "kafka-3",
            "KAFKA_CONTROLLER_QUORUM_VOTERS",
            "not the 3 brokers'",
        ],
    );
    // ... and then the topic's 3 replicas do not fit.
    assert_rejected_on_ha(
        &two_voters,
        &[
            "worker-3",
            "REPLICATION_FACTOR is 3, but `kafka-1`'s cluster has 2 nodes",
        ],
    );
    assert_rejected(
        &compose_with(
            "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093",
            "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9092",
        ),
        &["kafka-1", "not the 3 brokers' controllers"],
    );
    assert_rejected(
        &compose_with("      KAFKA_NODE_ID: 3\n", "      KAFKA_NODE_ID: 2\n"),
        &["kafka-3", "KAFKA_NODE_ID 2 is also `kafka-2`'s"],
    );
    assert_rejected(
        &compose_with(
            "\n  KAFKA_PROCESS_ROLES: broker,controller",
            "\n  KAFKA_PROCESS_ROLES: broker",
        ),
        &["kafka-2", "is not broker and controller"],
    );
    assert_rejected(
        &compose_with(
            "      KAFKA_NODE_ID: 3\n",
            "      KAFKA_NODE_ID: 3\n      CLUSTER_ID: AAAAAAAAAAAAAAAAAAAAAA\n",
        ),
        &[
            "kafka-3",
            "CLUSTER_ID `AAAAAAAAAAAAAAAAAAAAAA` is not the same",
        ],
    );
    for (from, to, needle) in [
        (
            "KAFKA_DEFAULT_REPLICATION_FACTOR: 3",
            "KAFKA_DEFAULT_REPLICATION_FACTOR: 1",
            "KAFKA_DEFAULT_REPLICATION_FACTOR is Some(1), not 3",
        ),
        (
            "KAFKA_MIN_INSYNC_REPLICAS: 2",
            "KAFKA_MIN_INSYNC_REPLICAS: 1",
            "KAFKA_MIN_INSYNC_REPLICAS is Some(1), not 2",
        ),
        (
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 3",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR is Some(1), not 3",
        ),
        (
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 3",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: 2",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR is Some(2), not 3",
        ),
        (
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 2",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: 1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR is Some(1), not 2",
        ),
    ] {
        assert_rejected(&compose_with(from, to), &["kafka-1", needle]);
    }
    assert_rejected(
        &compose_with(
            "  profiles: [ha]\n  restart: unless-stopped\n  healthcheck:\n    test: [\"CMD\", \"/opt/kafka/",
            "  profiles: [ha]\n  restart: unless-stopped\n  healthcheck:\n    test: [\"NONE\"]\n    x: [\"",
        ),
        &["kafka-3: no healthcheck"],
    );
    assert_rejected(
        &compose_with(
            "  image: apache/kafka:3.8.0\n  profiles: [ha]",
            "  image: bitnami/kafka:3.8\n  profiles: []",
        ),
        &[
            "kafka-1",
            "runs image Some(\"bitnami/kafka:3.8\"), not Some(\"apache/kafka:3.8.0\")",
        ],
    );
    assert_rejected(
        &compose_with(
            "  image: apache/kafka:3.8.0\n  profiles: [ha]",
            "  image: apache/kafka:3.8.0\n  profiles: []",
        ),
        &["kafka-2: has profiles [], not [ha]"],
    );
    assert_rejected(
        &compose_with(
            "\n  KAFKA_LISTENERS: PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
            "\n  KAFKA_LISTENERS: PLAINTEXT://0.0.0.0:9092",
        ),
        &["kafka-1", "CONTROLLER listener port (None)"],
    );
    assert_rejected(
        &compose_with(
            "- kafka-2-data:/var/lib/kafka/data",
            "- kafka-1-data:/var/lib/kafka/data",
        ),
        &["kafka-2", "shares volume `kafka-1-data`"],
    );
    // The advertised name is what the programs reconnect to.
    assert_rejected_on_ha(
        &compose_with("PLAINTEXT://kafka-2:9092", "PLAINTEXT://kafka-1:9092"),
        &[
            "gateway-3",
            "kafka-2:9092 is not among the broker's advertised listeners",
        ],
    );
}

#[test]
fn checker_catches_a_wrong_number_of_gateways_or_workers() {
    // gateway-3 without its profile runs always.
    let always = compose_with(
        "    profiles: [ha]\n    command: [\"gateway\"]",
        "    command: [\"gateway\"]",
    );
    assert_rejected(&always, &["gateway-3: has profiles [], not [\"ha\"]"]);
    assert_rejected(&always, &["3 gateways run with profiles {}, not 2"]);
    let missing = compose_with("  worker-3:\n", "  worker-9:\n");
    assert_rejected(&missing, &["service `worker-3` is missing"]);
    assert_rejected_on_ha(&missing, &["2 workers run with profiles {\"ha\"}, not 3"]);
    assert_rejected_on_ha(
        &compose_with("\"8083:8080\"", "\"8084:8080\""),
        &["gateway-3", "does not publish 8083:8080"],
    );
    assert_rejected_on_ha(
        &compose_with(
            "    profiles: [ha]\n    command: [\"worker\"]",
            "    profiles: [ha]\n    command: [\"gateway\"]",
        ),
        &["worker-3", "not `worker`"],
    );
}

#[test]
fn checker_catches_programs_that_miss_the_ha_servers() {
    let text = compose_text();
    // The profile on, with the single servers' defaults.
    let defaults = host(&[("COMPOSE_PROFILES", HA_PROFILE)]);
    assert_rejected_in(
        &text,
        &defaults,
        &["worker-1", "`ha` profile is on, but SECKILL_REDIS_URL"],
    );
    assert_rejected_in(
        &text,
        &defaults,
        &[
            "gateway-3",
            "SECKILL_ZK_HOSTS: the `ha` profile is on, but `zookeeper` is not one of its services",
        ],
    );
    assert_rejected_in(
        &text,
        &defaults,
        &[
            "worker-2",
            "SECKILL_KAFKA_BROKERS: the `ha` profile is on, but it does not name",
        ],
    );
    assert_rejected_in(
        &text,
        &defaults,
        &["worker-3", "SECKILL_KAFKA_REPLICATION_FACTOR is 1, not 3"],
    );
    // One variable wrong at a time.
    for (var, value, needles) in [
        (
            "SECKILL_ZK_HOSTS",
            "zookeeper-1:2181,zookeeper-2:2181,zookeeper:2181",
            &["gateway-1", "`zookeeper` is not one of its services"][..],
        ),
        (
            "SECKILL_ZK_HOSTS",
            "zookeeper-1:2181,zookeeper-2:2181",
            &[
                "worker-1",
                "SECKILL_ZK_HOSTS",
                "does not name [\"zookeeper-3\"]",
            ],
        ),
        (
            "SECKILL_ZK_HOSTS",
            "zookeeper-1:2181,zookeeper-2:2888,zookeeper-3:2181",
            &["gateway-2", "zookeeper-2 listens on 2181, not 2888"],
        ),
        (
            "SECKILL_KAFKA_BROKERS",
            "kafka-1:9092,kafka-2:9092,kafka:9092",
            &["worker-3", "`kafka` is not one of its services"],
        ),
        (
            "SECKILL_KAFKA_BROKERS",
            "kafka-1:9092,kafka-3:9092",
            &["gateway-3", "does not name [\"kafka-2\"]"],
        ),
        (
            "SECKILL_KAFKA_BROKERS",
            "kafka-1:9092,kafka-2:9093,kafka-3:9092",
            &["worker-2", "kafka-2 listens on 9092, not 9093"],
        ),
        (
            "SECKILL_KAFKA_REPLICATION_FACTOR",
            "2",
            &["gateway-1", "SECKILL_KAFKA_REPLICATION_FACTOR is 2, not 3"],
        ),
        (
            "SECKILL_REDIS_URL",
            "redis+cluster://redis:6379",
            &[
                "worker-1",
                "SECKILL_REDIS_URL: the `ha` profile is on, but `redis` is not",
            ],
        ),
    ] {
        assert_rejected_in(&text, &ha_host_with(var, Some(value)), needles);
    }
    // The ha settings without the profile: those servers do not run.
    let mut off = ha_host_of(&text);
    off.remove("COMPOSE_PROFILES");
    assert_rejected_in(
        &text,
        &off,
        &["gateway-1", "`kafka-2` runs only with profiles"],
    );
    assert_rejected_in(
        &text,
        &off,
        &["worker-2", "`zookeeper-1` runs only with profiles"],
    );
    // More replicas than the single broker has.
    assert_rejected(
        &compose_with(
            "${SECKILL_KAFKA_REPLICATION_FACTOR:-1}",
            "${SECKILL_KAFKA_REPLICATION_FACTOR:-3}",
        ),
        &[
            "worker-1",
            "REPLICATION_FACTOR is 3, but `kafka`'s cluster has 1 nodes",
        ],
    );
    // A value the programs cannot be given from the host.
    assert_rejected_on_ha(
        &compose_with("${SECKILL_ZK_HOSTS:-zookeeper:2181}", "zookeeper:2181"),
        &["gateway-2", "`zookeeper` is not one of its services"],
    );
}

#[test]
fn checker_catches_a_required_or_missing_wait_for_the_ha_servers() {
    for (name, condition) in [
        ("kafka-2", "service_healthy"),
        ("zookeeper-3", "service_healthy"),
        ("ha-guard", "service_completed_successfully"),
    ] {
        let entry = format!("    {name}:\n      condition: {condition}\n      required: false\n");
        // Without `required: false`, `docker compose up` without the profile fails.
        assert_rejected(
            &compose_with(
                &entry,
                &format!("    {name}:\n      condition: {condition}\n"),
            ),
            &[
                "worker-2",
                &format!("depends on `{name}`"),
                "without `required: false`",
            ],
        );
        // Without the dependency, the programs start before the server is up.
        let needle = if name == HA_GUARD {
            format!("does not depend on `{name}` with condition: service_completed_successfully")
        } else {
            format!("does not depend on `{name}` with condition: service_healthy")
        };
        assert_rejected_on_ha(&compose_with(&entry, ""), &["gateway-3", &needle]);
    }
}

#[test]
fn checker_catches_a_guard_that_lets_single_servers_through() {
    assert_rejected(
        &compose_with(
            "        want SECKILL_KAFKA_BROKERS \"$$APPS_KAFKA_BROKERS\" kafka-1:9092,kafka-2:9092,kafka-3:9092\n",
            "",
        ),
        &["ha-guard: passes with SECKILL_KAFKA_BROKERS at its single-server default"],
    );
    assert_rejected(
        &compose_with(
            "          redis+cluster://*redis-node-*) ;;\n",
            "          *) ;;\n",
        ),
        &["ha-guard: passes with SECKILL_REDIS_URL at its single-server default"],
    );
    assert_rejected(
        &compose_with(
            "echo \"the ha profile is on, but $$1=$$2; set $$1=$$3\" >&2",
            "echo \"the ha profile is on\" >&2",
        ),
        &["ha-guard: with SECKILL_ZK_HOSTS at its default it fails without naming it"],
    );
    assert_rejected(
        &compose_with(
            "\"$$APPS_KAFKA_REPLICATION_FACTOR\" 3\n",
            "\"$$APPS_KAFKA_REPLICATION_FACTOR\" 2\n",
        ),
        &["ha-guard: fails with the documented settings"],
    );
    // It must see what the programs get.
    assert_rejected(
        &compose_with(
            "APPS_ZK_HOSTS: *zk-hosts",
            "APPS_ZK_HOSTS: zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181",
        ),
        &[
            "ha-guard",
            "APPS_ZK_HOSTS",
            "is not what `worker-3` gets as SECKILL_ZK_HOSTS",
        ],
    );
    assert_rejected(
        &compose_with(
            "    profiles: [ha]\n    restart: \"no\"\n",
            "    restart: \"no\"\n",
        ),
        &["ha-guard: has profiles [], not [ha]"],
    );
    assert_rejected(
        &compose_with(
            "    profiles: [ha]\n    restart: \"no\"\n",
            "    profiles: [ha]\n    restart: always\n",
        ),
        &["ha-guard", "restarts it after it completes"],
    );
    assert_rejected(
        &compose_with(
            "    entrypoint: [\"sh\", \"-euc\"]\n    command:\n      - |\n        ok=yes",
            "    entrypoint: [\"bash\", \"-euc\"]\n    command:\n      - |\n        ok=yes",
        ),
        &["ha-guard: runs [\"bash\", \"-euc\"", "not an `sh` script"],
    );
    assert_rejected(
        &compose_with("#   COMPOSE_PROFILES=ha \\\n", "#   \\\n"),
        &["no `COMPOSE_PROFILES=ha ... docker compose up` documented"],
    );
    // The header's command is what users run: all four variables.
    assert_rejected(
        &compose_with("#   SECKILL_KAFKA_REPLICATION_FACTOR=3 \\\n", ""),
        &["documented `COMPOSE_PROFILES=ha` command does not set [\"SECKILL_KAFKA_REPLICATION_FACTOR\"]"],
    );
    assert_rejected(
        &compose_with(
            "#   SECKILL_ZK_HOSTS=zookeeper-1:2181,",
            "#   SECKILL_ZK_HOSTS=zookeeper:2181,",
        ),
        &[
            "ha-guard: fails with the documented settings",
            "SECKILL_ZK_HOSTS=zookeeper:2181,",
        ],
    );
}

#[test]
fn the_cluster_nodes_run_with_the_ha_profile() {
    // Without `ha` in their profiles, the ha programs name nodes that do not run.
    assert_rejected_on_ha(
        &compose_with(
            "  image: redis:7\n  profiles: [cluster, ha]",
            "  image: redis:7\n  profiles: [cluster]",
        ),
        &[
            "gateway-3",
            "`redis-node-1` runs only with profiles [\"cluster\"]",
        ],
    );
    assert_rejected(
        &compose_with(
            "    image: redis:7\n    profiles: [cluster, ha]",
            "    image: redis:7\n    profiles: [cluster]",
        ),
        &["redis-cluster-init: has profiles [\"cluster\"], not [\"cluster\", \"ha\"]"],
    );
}

#[test]
fn checker_catches_prometheus_not_scraping_what_runs() {
    // With the ha profile but the default configuration, gateway-3 and worker-3 go unscraped
    // (and the guard names the variable).
    assert_rejected_in(
        &compose_text(),
        &ha_host_with(PROMETHEUS_CONFIG_VAR, None),
        &[
            "prometheus: prometheus.yml scrapes",
            "gateway-3:8080",
            "job gateway",
        ],
    );
    // A guard that does not check it.
    assert_rejected_on_ha(
        &compose_with(
            "        want PROMETHEUS_CONFIG \"$$PROMETHEUS_CONFIG\" prometheus-ha.yml\n",
            "",
        ),
        &[
            HA_GUARD,
            "passes with PROMETHEUS_CONFIG at its single-server default",
        ],
    );
    // Without it, the ha configuration would count gateway-3 and worker-3 as down.
    assert_rejected_in(
        &compose_text(),
        &host(&[(PROMETHEUS_CONFIG_VAR, PROMETHEUS_HA_CONFIG)]),
        &["prometheus-ha.yml scrapes", "worker-3:9090", "job worker"],
    );
    // A file that is not there, and a guard that checks another variable than Prometheus reads.
    assert_rejected(
        &compose_with(
            "--config.file=/etc/prometheus/${PROMETHEUS_CONFIG:-prometheus.yml}",
            "--config.file=/etc/prometheus/${PROMETHEUS_CONFIG:-prometheus-typo.yml}",
        ),
        &["prometheus: --config.file prometheus-typo.yml"],
    );
    assert_rejected_on_ha(
        &compose_with(
            "      PROMETHEUS_CONFIG: ${PROMETHEUS_CONFIG:-prometheus.yml}\n",
            "      PROMETHEUS_CONFIG: prometheus-ha.yml\n",
        )
        .replace(
            "--config.file=/etc/prometheus/${PROMETHEUS_CONFIG:-prometheus.yml}",
            "--config.file=/etc/prometheus/prometheus.yml",
        ),
        &["prometheus: reads prometheus.yml, but ha-guard checks"],
    );
}

#[test]
fn prometheus_configurations_differ_in_their_targets_only() {
    let read = |file: &str| -> Value {
        let mut config: Value =
            serde_norway::from_str(&read_repo_file(&format!("deploy/prometheus/{file}")))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
        let jobs = config
            .get_mut("scrape_configs")
            .and_then(Value::as_sequence_mut)
            .unwrap_or_else(|| panic!("{file}: no scrape_configs"));
        for job in jobs.iter_mut() {
            for c in job
                .get_mut("static_configs")
                .and_then(Value::as_sequence_mut)
                .into_iter()
                .flatten()
            {
                c.as_mapping_mut().map(|m| m.remove("targets"));
            }
        }
        config
    };
    assert_eq!(read("prometheus.yml"), read(PROMETHEUS_HA_CONFIG));
}
