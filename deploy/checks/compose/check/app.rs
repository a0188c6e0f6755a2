//! One gateway or worker: its settings, the services it connects to, its ports, mounts,
//! healthcheck and the services it waits for.

use crate::expected::{
    repo_root, Host, Role, CLUSTER_PROFILES, CONNECTIONS, HA_BROKERS, HA_PROFILE,
    HA_REPLICATION_FACTOR, ZK_ENSEMBLE,
};
use crate::yaml::{
    build_dockerfile, depends_on, env_of, environment, healthcheck, host_port_list, image_name,
    interpolate_in, is_cluster_node, is_on, profiles, published_ports, scalar, url_host_port,
    words,
};
use seckill_shared::store::Topology;
use seckill_shared::Settings;
use secrecy::ExposeSecret;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

/// One gateway or worker.
pub(crate) fn check_app(
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
        Role::Gateway { .. } => &settings.gateway.http_addr,
        Role::Worker => &settings.worker.http_addr,
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
    let topology = match settings.redis.topology() {
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
                settings.redis.url.expose_secret()
            ));
        }
    }
    let ha = on.contains(HA_PROFILE);
    if ha && settings.kafka.replication_factor != HA_REPLICATION_FACTOR {
        problem(format!(
            "the `{HA_PROFILE}` profile is on, but SECKILL_KAFKA_REPLICATION_FACTOR is {}, \
             not {HA_REPLICATION_FACTOR}",
            settings.kafka.replication_factor
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
                url_host_port(settings.mysql.url.expose_secret()).map(|e| vec![e])
            }
            "SECKILL_KAFKA_BROKERS" => host_port_list(&settings.kafka.brokers),
            "SECKILL_ZK_HOSTS" => {
                // An optional chroot follows the last host: `zk1:2181,zk2:2181/app`.
                let hosts = settings
                    .zookeeper
                    .hosts
                    .split('/')
                    .next()
                    .unwrap_or_default();
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
                let rf = settings.kafka.replication_factor;
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
                    settings.mysql.url.expose_secret(),
                    &host,
                    target,
                    vars,
                    &mut problem,
                );
            }
        }
    }
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
