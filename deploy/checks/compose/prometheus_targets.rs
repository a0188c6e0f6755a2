//! Prometheus's two configurations: what each scrapes, and how they differ.

use crate::expected::{
    host, read_repo_file, HA_GUARD, PROMETHEUS_CONFIG_VAR, PROMETHEUS_HA_CONFIG,
};
use crate::fixtures::{
    assert_rejected, assert_rejected_in, assert_rejected_on_ha, compose_text, compose_with,
    ha_host_with,
};
use serde_norway::Value;

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
