//! The settings' layering, limits, redaction, and the example file.

use super::*;
use secrecy::ExposeSecret;
use std::time::Duration;

/// Settings with `tweak` applied to the defaults.
fn with(tweak: impl FnOnce(&mut Settings)) -> Settings {
    let mut s = Settings::default();
    tweak(&mut s);
    s
}

fn assert_same(a: &Settings, b: &Settings) {
    assert_eq!(a.redacted_toml(), b.redacted_toml());
    assert_eq!(a.redis.url.expose_secret(), b.redis.url.expose_secret());
    assert_eq!(a.mysql.url.expose_secret(), b.mysql.url.expose_secret());
    assert_eq!(a.admin.token.expose_secret(), b.admin.token.expose_secret());
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_are_valid_and_loopback() {
    let s = Settings::from_sources(None, env(&[])).unwrap();
    assert_same(&s, &Settings::default());
    assert!(s.redis.url.expose_secret().contains("127.0.0.1"));
    assert!(Settings::env_names().contains(&"SECKILL_REDIS_URL".to_string()));
}

#[test]
fn env_overrides_file_which_overrides_defaults() {
    let file = "redis_url = \"redis://file:1/\"\nworker_batch_size = 7\n";
    let s = Settings::from_sources(
        Some(file),
        env(&[
            ("SECKILL_WORKER_BATCH_SIZE", "9"),
            ("SECKILL_CHAOS_FAIL_RATE", "0.25"),
            ("OTHER", "x"),
        ]),
    )
    .unwrap();
    assert_eq!(s.redis.url.expose_secret(), "redis://file:1/");
    assert_eq!(s.worker.batch_size, 9);
    assert_eq!(s.chaos.fail_rate, 0.25);
}

#[test]
fn errors_name_the_setting() {
    let err =
        Settings::from_sources(None, env(&[("SECKILL_WORKER_BATCH_SIZE", "lots")])).unwrap_err();
    assert!(
        format!("{err:#}").contains("SECKILL_WORKER_BATCH_SIZE"),
        "{err:#}"
    );
    let err = Settings::from_sources(None, env(&[("SECKILL_CHAOS_FAIL_RATE", "2")])).unwrap_err();
    assert!(err.to_string().contains("SECKILL_CHAOS_FAIL_RATE"), "{err}");
    let err = Settings::from_sources(None, env(&[("SECKILL_HTTP_ADDR", "nowhere")])).unwrap_err();
    assert!(err.to_string().contains("SECKILL_HTTP_ADDR"), "{err}");
    let err =
        Settings::from_sources(None, env(&[("SECKILL_CHAOS_FAIL_USERS", "1,x")])).unwrap_err();
    assert!(
        err.to_string().contains("SECKILL_CHAOS_FAIL_USERS"),
        "{err}"
    );
    let err = Settings::from_sources(Some("nope = 1"), env(&[])).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

#[test]
fn limits_are_validated() {
    let s = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "0.5"),
            ("SECKILL_RATE_LIMIT_BURST", "3"),
            ("SECKILL_MAX_IN_FLIGHT", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(
        (
            s.gateway.rate_limit_per_user_per_sec,
            s.gateway.rate_limit_burst,
            s.gateway.max_in_flight
        ),
        (0.5, 3, 1)
    );
    assert!(s.gateway.rate_limit_enabled());
    let off =
        Settings::from_sources(None, env(&[("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "0")])).unwrap();
    assert!(!off.gateway.rate_limit_enabled());
    let s = Settings::from_sources(None, env(&[("SECKILL_WORKER_SESSION_TIMEOUT_MS", "3001")]))
        .unwrap();
    assert_eq!(s.worker.session_timeout_ms, 3001);
    assert_eq!(Settings::default().admin.auth_failures_per_min, 10);
    let off =
        Settings::from_sources(None, env(&[("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "0")])).unwrap();
    assert_eq!(off.admin.auth_failures_per_min, 0);
    // A pending timeout the sweeper could reach while Kafka still takes the order (the
    // delivery timeout is 3000 ms by default) is refused.
    let err = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_PENDING_TIMEOUT_MS", "3000"),
            ("SECKILL_PENDING_LAST_RESORT_MS", "900000"),
        ]),
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("SECKILL_PENDING_TIMEOUT_MS"),
        "{err:#}"
    );
    Settings::from_sources(None, env(&[("SECKILL_PENDING_TIMEOUT_MS", "3011")])).unwrap();
    Settings::from_sources(
        None,
        env(&[
            ("SECKILL_PENDING_TIMEOUT_MS", "1000"),
            ("SECKILL_KAFKA_DELIVERY_TIMEOUT_MS", "500"),
        ]),
    )
    .unwrap();
    for (name, bad) in [
        ("SECKILL_MAX_IN_FLIGHT", "0"),
        ("SECKILL_RATE_LIMIT_BURST", "0"),
        ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "-1"),
        ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "NaN"),
        ("SECKILL_WORKER_STATS_INTERVAL_MS", "5"),
        ("SECKILL_HTTP_CLIENT_REQUEST_TIMEOUT_MS", "500"),
        ("SECKILL_HTTP_MAX_CONNECTIONS", "0"),
        ("SECKILL_WORKER_SESSION_TIMEOUT_MS", "3000"),
        ("SECKILL_WORKER_SESSION_TIMEOUT_MS", "300001"),
        ("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "10001"),
        ("SECKILL_ADMIN_AUTH_FAILURES_PER_MIN", "-1"),
        // Each section's limits name the variable, renamed fields included.
        ("SECKILL_NAMESPACE", "a b"),
        ("SECKILL_REDIS_TIMEOUT_MS", "1"),
        ("SECKILL_REDIS_URL", "http://x"),
        ("SECKILL_TICKET_TTL_SECS", "1"),
        ("SECKILL_MYSQL_URL", "postgres://x"),
        ("SECKILL_KAFKA_PARTITIONS", "0"),
        ("SECKILL_KAFKA_TOPIC", "a/b"),
        ("SECKILL_ZK_HOSTS", " "),
        ("SECKILL_AUTH_LEEWAY_SECS", "3601"),
        ("SECKILL_HTTP_WORKERS", "257"),
        ("SECKILL_WORKER_BATCH_SIZE", "0"),
        ("SECKILL_WORKER_HTTP_ADDR", "nowhere"),
        ("SECKILL_PENDING_LAST_RESORT_MS", "1"),
        ("SECKILL_PAYMENT_WINDOW_SECS", "604801"),
        ("SECKILL_PAYMENT_PROVIDER_URL", "https://psp"),
        ("SECKILL_PAYMENT_RECONCILE_AFTER_MS", "5"),
        ("SECKILL_ADMISSION_TTL_SECS", "0"),
        ("SECKILL_QUEUE_RATE_LIMIT_PER_USER_PER_SEC", "-1"),
        ("SECKILL_CHAOS_FAIL_RATE", "1.5"),
    ] {
        let err = Settings::from_sources(None, env(&[(name, bad)])).unwrap_err();
        assert!(format!("{err:#}").contains(name), "{name}={bad}: {err:#}");
    }
}

#[test]
fn admin_token_is_required_unless_dev() {
    let mut s = Settings::default();
    assert!(s.require_admin_token(false).is_err());
    s.require_admin_token(true).unwrap();
    assert_eq!(s.admin.token.expose_secret(), DEV_ADMIN_TOKEN);
}

#[test]
fn a_short_admin_token_is_refused() {
    let err =
        Settings::from_sources(None, env(&[("SECKILL_ADMIN_TOKEN", "short-token")])).unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("SECKILL_ADMIN_TOKEN") && err.contains("32 bytes"),
        "{err}"
    );
    let err =
        Settings::from_sources(None, env(&[("SECKILL_ADMIN_TOKEN", &"x".repeat(31))])).unwrap_err();
    assert!(
        format!("{err:#}").contains("SECKILL_ADMIN_TOKEN"),
        "{err:#}"
    );
    let s = Settings::from_sources(None, env(&[("SECKILL_ADMIN_TOKEN", &"x".repeat(32))])).unwrap();
    assert_eq!(s.admin.token.expose_secret().len(), 32);
    assert!(DEV_ADMIN_TOKEN.len() >= MIN_ADMIN_TOKEN_BYTES);
}

#[test]
fn the_admission_secret_is_required_unless_dev_and_derived_from_nothing() {
    // An admin token and an HS256 secret do not stand in for it.
    let mut s = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_ADMIN_TOKEN", "an-admin-token-of-at-least-32-bytes"),
            (
                "SECKILL_AUTH_HS256_SECRET",
                "an-hs256-secret-of-at-least-32-bytes",
            ),
        ]),
    )
    .unwrap();
    let err = s.require_admission_secret(false).unwrap_err().to_string();
    assert!(
        err.contains("SECKILL_ADMISSION_SECRET must be set") && err.contains("--dev"),
        "{err}"
    );
    assert!(s.waiting_room.admission_secret.expose_secret().is_empty());
    s.require_admission_secret(true).unwrap();
    assert_eq!(
        s.waiting_room.admission_secret.expose_secret(),
        DEV_ADMISSION_SECRET
    );
    // A set one is kept.
    let mut s = with(|s| {
        s.waiting_room.admission_secret = "an-admission-secret-of-32-bytes-or-more".into();
    });
    s.require_admission_secret(false).unwrap();
    assert_eq!(
        s.waiting_room.admission_secret.expose_secret(),
        "an-admission-secret-of-32-bytes-or-more"
    );
    let short = Settings::from_sources(None, env(&[("SECKILL_ADMISSION_SECRET", "short")]));
    assert!(format!("{:#}", short.unwrap_err()).contains("SECKILL_ADMISSION_SECRET"));
}

#[test]
fn an_admission_secret_equal_to_another_secret_is_refused() {
    let same = "one-secret-of-at-least-32-bytes-long";
    let err = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_ADMIN_TOKEN", same),
            ("SECKILL_ADMISSION_SECRET", same),
        ]),
    )
    .unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("SECKILL_ADMISSION_SECRET")
            && err.contains("must differ from SECKILL_ADMIN_TOKEN"),
        "{err}"
    );
    let err = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_AUTH_HS256_SECRET", same),
            ("SECKILL_ADMISSION_SECRET", same),
        ]),
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("must differ from SECKILL_AUTH_HS256_SECRET"),
        "{err:#}"
    );
    // `--dev` fills the admin token in after loading: the same check then.
    let mut s = with(|s| {
        s.waiting_room.admission_secret = DEV_ADMIN_TOKEN.into();
    });
    s.require_admin_token(true).unwrap();
    assert!(s.require_admission_secret(true).is_err());
    assert_ne!(DEV_ADMISSION_SECRET, DEV_ADMIN_TOKEN);
    assert_ne!(DEV_ADMISSION_SECRET, DEV_AUTH_HS256_SECRET);
}

#[test]
fn buyer_keys_are_required_and_no_auth_needs_dev() {
    let mut s = Settings::default();
    assert!(s.require_auth(false).is_err(), "no key");
    s.require_auth(true).unwrap();
    assert_eq!(s.auth.hs256_secret.expose_secret(), DEV_AUTH_HS256_SECRET);
    let mut s = with(|s| {
        s.auth.jwks_file = "keys.json".into();
    });
    s.require_auth(false).unwrap();
    let mut none = with(|s| {
        s.auth.mode = AuthMode::None;
    });
    assert!(none.require_auth(false).is_err(), "none without --dev");
    none.require_auth(true).unwrap();
    let env = |k: &str, v: &str| vec![(k.to_owned(), v.to_owned())];
    let short = Settings::from_sources(None, env("SECKILL_AUTH_HS256_SECRET", "too-short"));
    assert!(format!("{:#}", short.unwrap_err()).contains("SECKILL_AUTH_HS256_SECRET"));
    let proxies = Settings::from_sources(
        None,
        env("SECKILL_TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.1"),
    )
    .unwrap();
    assert_eq!(proxies.gateway.trusted_proxies().unwrap().len(), 2);
    let bad = Settings::from_sources(None, env("SECKILL_TRUSTED_PROXIES", "10.0.0.0/8,nope"));
    assert!(format!("{:#}", bad.unwrap_err()).contains("SECKILL_TRUSTED_PROXIES"));
    assert_eq!(
        Settings::from_sources(None, env("SECKILL_AUTH_MODE", "none"))
            .unwrap()
            .auth
            .mode,
        AuthMode::None
    );
}

#[test]
fn printed_config_redacts_secrets() {
    let s = with(|s| {
        s.admin.token = "hunter2".into();
        s.auth.hs256_secret = "jwt-secret-hunter3-of-32-bytes-long".into();
    });
    let out = s.redacted_toml();
    assert!(!out.contains("hunter2"));
    assert!(!out.contains("hunter3"), "{out}");
    assert!(!format!("{s:?}").contains("hunter3"));
    assert!(!out.contains(":seckill@"), "{out}");
    assert!(out.contains("mysql://seckill:<redacted>@127.0.0.1:3306/seckill"));
}

#[test]
fn debug_prints_no_secret() {
    let s = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_ADMIN_TOKEN", "tok-hunter2-admin-token-of-32-bytes"),
            ("SECKILL_MYSQL_URL", "mysql://app:pw-s3cr3t@db:3306/shop"),
        ]),
    )
    .unwrap();
    assert_eq!(
        s.admin.token.expose_secret(),
        "tok-hunter2-admin-token-of-32-bytes"
    );
    assert_eq!(
        s.mysql.url.expose_secret(),
        "mysql://app:pw-s3cr3t@db:3306/shop"
    );
    for shown in [format!("{s:?}"), format!("{s:#?}")] {
        assert!(!shown.contains("tok-hunter2"), "{shown}");
        assert!(!shown.contains("pw-s3cr3t"), "{shown}");
        assert!(shown.contains("REDACTED"), "{shown}");
    }
    let printed = s.redacted_toml();
    assert!(!printed.contains("tok-hunter2") && !printed.contains("pw-s3cr3t"));
}

#[test]
fn environment_text_is_kept_as_written() {
    // figment's `Env` would read these as numbers or arrays; a string setting keeps them.
    let s = Settings::from_sources(
        None,
        env(&[
            ("SECKILL_ADMIN_TOKEN", "0123456789012345678901234567890123"),
            ("SECKILL_NAMESPACE", "007"),
            ("SECKILL_CHAOS_FAIL_USERS", "6"),
            ("SECKILL_KAFKA_TOPIC", "1.50"),
            ("SECKILL_WORKER_GROUP", "[g]"),
            ("SECKILL_ZK_HOSTS", " \"zk:2181\" "),
            ("SECKILL_RATE_LIMIT_BURST", " 3 "),
            ("SECKILL_RATE_LIMIT_PER_USER_PER_SEC", "2"),
        ]),
    )
    .unwrap();
    assert_eq!(
        s.admin.token.expose_secret(),
        "0123456789012345678901234567890123"
    );
    assert_eq!(s.common.namespace, "007");
    assert_eq!(s.chaos.fail_users().unwrap(), HashSet::from([6]));
    assert_eq!(s.kafka.topic, "1.50");
    assert_eq!(s.worker.group, "[g]");
    assert_eq!(s.zookeeper.hosts, "\"zk:2181\"");
    assert_eq!(s.gateway.rate_limit_burst, 3);
    assert_eq!(s.gateway.rate_limit_per_user_per_sec, 2.0);
}

#[test]
fn unknown_environment_variables_are_left_alone() {
    let s = Settings::from_sources(
        None,
        env(&[("SECKILL_NOT_A_SETTING", "[x"), ("SECKILL_BASE", "1")]),
    )
    .unwrap();
    assert_same(&s, &Settings::default());
}

#[test]
fn modes_and_formats_are_enums() {
    let s = Settings::from_sources(
        Some("gateway_mode = \"sync\"\n"),
        env(&[("SECKILL_LOG_FORMAT", "pretty")]),
    )
    .unwrap();
    assert_eq!(s.gateway.mode, GatewayMode::Sync);
    assert_eq!(s.common.log_format, LogFormat::Pretty);
    let printed = s.redacted_toml();
    assert!(printed.contains("gateway_mode = \"sync\"\n"), "{printed}");
    assert!(printed.contains("log_format = \"pretty\"\n"), "{printed}");
    for (name, bad) in [
        ("SECKILL_GATEWAY_MODE", "SYNC"),
        ("SECKILL_GATEWAY_MODE", "kafka"),
        ("SECKILL_LOG_FORMAT", "text"),
    ] {
        let err = Settings::from_sources(None, env(&[(name, bad)])).unwrap_err();
        assert!(err.to_string().contains(name), "{name}={bad}: {err}");
    }
    let err = Settings::from_sources(Some("log_format = \"text\""), env(&[])).unwrap_err();
    assert!(err.to_string().contains("log_format"), "{err}");
}

#[test]
fn file_errors_name_the_setting() {
    let err = Settings::from_sources(Some("worker_batch_size = \"x\""), env(&[])).unwrap_err();
    assert!(err.to_string().contains("worker_batch_size"), "{err}");
    let err = Settings::from_sources(Some("worker_batch_size = "), env(&[])).unwrap_err();
    assert!(err.to_string().contains("config file"), "{err}");
}

#[test]
fn durations() {
    let s = Settings::default();
    assert_eq!(s.redis.ticket_ttl(), Duration::from_secs(86_400));
    assert_eq!(
        s.gateway.http_client_request_timeout(),
        Duration::from_secs(5)
    );
    assert_eq!(s.worker.batch_linger(), Duration::from_millis(20));
    assert_eq!(s.chaos.delay(), Duration::ZERO);
    assert_eq!(s.worker.pending_timeout(), Duration::from_secs(30));
}

#[test]
fn chaos_users_parse() {
    let s = with(|s| {
        s.chaos.fail_users = " 1, 2 ,3".into();
    });
    assert_eq!(s.chaos.fail_users().unwrap(), HashSet::from([1, 2, 3]));
    assert!(s.chaos.enabled());
}

/// `config.example.toml` documents every setting with its default.
#[test]
fn example_config_lists_every_setting_with_its_default() {
    let text = include_str!("../../../config.example.toml");
    let table: toml::Table = toml::from_str(text).unwrap();
    let mut keys: Vec<String> = table
        .keys()
        .map(|k| format!("{ENV_PREFIX}{}", k.to_ascii_uppercase()))
        .collect();
    let mut names = Settings::env_names();
    keys.sort();
    names.sort();
    assert_eq!(keys, names);
    assert_same(
        &Settings::from_sources(Some(text), Vec::new()).unwrap(),
        &Settings::default(),
    );
}

/// Found from outside: a delivery timeout out of range panicked (the cross-check added to it
/// and overflowed) instead of being refused, and a NaN fail rate in a file was taken.
#[test]
fn out_of_range_values_are_refused_not_panicked_on() {
    for huge in ["18446744073709551615", "18446744073709551606", "60001"] {
        let err = Settings::from_sources(None, env(&[("SECKILL_KAFKA_DELIVERY_TIMEOUT_MS", huge)]))
            .unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("SECKILL_KAFKA_DELIVERY_TIMEOUT_MS"),
            "{huge}: {err}"
        );
        // Only the setting that is wrong is named, not one checked against it.
        assert!(!err.contains("SECKILL_PENDING_TIMEOUT_MS"), "{huge}: {err}");
    }
    let file = "kafka_delivery_timeout_ms = \"18446744073709551615\"\n";
    assert!(Settings::from_sources(Some(file), env(&[])).is_err());
    for nan in ["nan", "-nan", "inf"] {
        let file = format!("chaos_fail_rate = {nan}\n");
        let err = Settings::from_sources(Some(&file), env(&[])).unwrap_err();
        assert!(
            format!("{err:#}").contains("SECKILL_CHAOS_FAIL_RATE"),
            "{nan}: {err:#}"
        );
    }
}

/// A Redis URL whose userinfo has an `@` but no `:` prints without it.
#[test]
fn userinfo_without_a_colon_is_redacted_too() {
    let s = Settings::from_sources(
        None,
        env(&[("SECKILL_REDIS_URL", "redis://user@hunter2@h:1/")]),
    )
    .unwrap();
    let printed = s.redacted_toml();
    assert!(!printed.contains("hunter2"), "{printed}");
    assert!(
        printed.contains("redis_url = \"redis://<redacted>@h:1/\""),
        "{printed}"
    );
}
