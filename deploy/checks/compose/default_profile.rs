//! The compose file without profiles, the Dockerfile, secrets and interpolation, and what the
//! checker catches there.

use crate::check::compose::{check_compose, check_compose_exact};
use crate::check::dockerfile::check_dockerfile;
use crate::expected::{host, read_repo_file, with_secrets, Host, HOST_SECRETS};
use crate::fixtures::{assert_rejected, assert_rejected_in, compose_text, compose_with};
use crate::yaml::{interpolate, interpolate_in};

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
