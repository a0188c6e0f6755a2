//! The `ha` profile, and what the checker catches there.

use crate::check::compose::check_compose_in;
use crate::expected::{host, HA_GUARD, HA_PROFILE, PROMETHEUS_CONFIG_VAR, PROMETHEUS_HA_CONFIG};
use crate::fixtures::{
    assert_rejected, assert_rejected_in, assert_rejected_on_ha, compose_text, compose_with,
    documented_cluster_url, ha_host_of, ha_host_with,
};

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
