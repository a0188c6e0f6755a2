//! What the files must hold: the services of each profile, the connections every program sets,
//! the secrets the host gives; the host's environment; the repository's files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Infrastructure services; each must have a healthcheck.
pub(crate) const INFRA: [&str; 4] = ["redis", "mysql", "zookeeper", "kafka"];
/// Gateways and the host port each publishes; the last runs with the `ha` profile only.
pub(crate) const GATEWAYS: [(&str, u16); 3] = [
    ("gateway-1", 8081),
    ("gateway-2", 8082),
    ("gateway-3", 8083),
];
pub(crate) const WORKERS: [&str; 3] = ["worker-1", "worker-2", "worker-3"];
/// Gateways and workers that run with the `ha` profile only.
pub(crate) const HA_ONLY_APPS: [&str; 2] = ["gateway-3", "worker-3"];
/// Connections every gateway and worker sets: the variable, the image (last path part,
/// without tag) of the service it must point at, and the port that service listens on.
pub(crate) const CONNECTIONS: [(&str, &str, u16); 4] = [
    ("SECKILL_REDIS_URL", "redis", 6379),
    ("SECKILL_MYSQL_URL", "mysql", 3306),
    ("SECKILL_KAFKA_BROKERS", "kafka", 9092),
    ("SECKILL_ZK_HOSTS", "zookeeper", 2181),
];
/// The profile that runs Redis as a cluster, its nodes (`redis-node-1`...), and the one-shot
/// service that creates it.
pub(crate) const CLUSTER_PROFILE: &str = "cluster";
/// The profiles the cluster's nodes and init run with: `cluster`, and `ha`, which includes it.
pub(crate) const CLUSTER_PROFILES: [&str; 2] = [CLUSTER_PROFILE, HA_PROFILE];
pub(crate) const CLUSTER_NODE_PREFIX: &str = "redis-node-";
pub(crate) const CLUSTER_INIT: &str = "redis-cluster-init";
/// Three primaries, each with one replica.
pub(crate) const CLUSTER_PRIMARIES: usize = 3;
pub(crate) const CLUSTER_REPLICAS: usize = 1;
/// The profile that runs the production topology: a ZooKeeper ensemble, three Kafka brokers,
/// the Redis Cluster, three gateways and three workers.
pub(crate) const HA_PROFILE: &str = "ha";
pub(crate) const ZK_ENSEMBLE: [&str; 3] = ["zookeeper-1", "zookeeper-2", "zookeeper-3"];
pub(crate) const HA_BROKERS: [&str; 3] = ["kafka-1", "kafka-2", "kafka-3"];
/// The topic's replicas and the writes' minimum in-sync replicas on the ha brokers.
pub(crate) const HA_REPLICATION_FACTOR: i32 = 3;
pub(crate) const HA_MIN_INSYNC: i32 = 2;
/// The one-shot service that stops the programs from starting with single-server settings.
pub(crate) const HA_GUARD: &str = "ha-guard";
/// The host variable that picks Prometheus's configuration in deploy/prometheus (the guard
/// gets it under the same name): `prometheus-ha.yml` with the `ha` profile.
pub(crate) const PROMETHEUS_CONFIG_VAR: &str = "PROMETHEUS_CONFIG";
pub(crate) const PROMETHEUS_HA_CONFIG: &str = "prometheus-ha.yml";
pub(crate) const PROMETHEUS: &str = "prometheus";
/// The profile that runs the OpenTelemetry Collector and Jaeger; the collector's service, the
/// host variable that picks its file in deploy/otel, and the programs' endpoint variable.
pub(crate) const TRACING_PROFILE: &str = "tracing";
pub(crate) const OTEL_COLLECTOR: &str = "otel-collector";
pub(crate) const OTEL_COLLECTOR_CONFIG_VAR: &str = "OTEL_COLLECTOR_CONFIG";
pub(crate) const OTLP_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// What the `ha` profile needs from the host: the programs' settings, and the variable the
/// guard gets each in.
pub(crate) const HA_VARS: [(&str, &str); 4] = [
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
pub(crate) const HOST_SECRETS: [(&str, &str); 4] = [
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
pub(crate) type Host = BTreeMap<String, String>;

/// `host` with each of [`HOST_SECRETS`] it does not set.
pub(crate) fn with_secrets(host: &Host) -> Host {
    let mut host = host.clone();
    for (name, value) in HOST_SECRETS {
        host.entry(name.to_string())
            .or_insert_with(|| value.to_string());
    }
    host
}

pub(crate) fn host(vars: &[(&str, &str)]) -> Host {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn read_repo_file(name: &str) -> String {
    let path = repo_root().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A YAML file of the repository (`dir/file`), or why it cannot be read.
pub(crate) fn read_repo_yaml(dir: &str, file: &str) -> Result<serde_norway::Value, String> {
    std::fs::read_to_string(repo_root().join(dir).join(file))
        .map_err(|e| e.to_string())
        .and_then(|t| serde_norway::from_str(&t).map_err(|e| e.to_string()))
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Role {
    Gateway { host_port: u16 },
    Worker,
}

impl Role {
    pub(crate) fn program(self) -> &'static str {
        match self {
            Role::Gateway { .. } => "gateway",
            Role::Worker => "worker",
        }
    }

    /// The setting it listens on (its HTTP address).
    pub(crate) fn listen_var(self) -> &'static str {
        match self {
            Role::Gateway { .. } => "SECKILL_HTTP_ADDR",
            Role::Worker => "SECKILL_WORKER_HTTP_ADDR",
        }
    }
}
