//! The `cluster` profile, and what the checker catches there.

use crate::check::compose::check_compose_in;
use crate::expected::{host, CLUSTER_PROFILE};
use crate::fixtures::{
    assert_rejected, cluster_host, compose_text, compose_with, documented_cluster_url,
};
use seckill_shared::store::Topology;

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
