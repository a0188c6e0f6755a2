//! The `tracing` profile, and what the checker catches there.

use crate::check::compose::check_compose_in;
use crate::expected::{host, Host, TRACING_PROFILE};
use crate::fixtures::{assert_rejected_in, compose_text, compose_with};

/// The host of the command the compose file documents for the profile.
fn tracing_host(extra: &[(&str, &str)]) -> Host {
    let mut vars = vec![
        ("COMPOSE_PROFILES", TRACING_PROFILE),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector:4318"),
    ];
    vars.extend_from_slice(extra);
    host(&vars)
}

#[test]
fn compose_file_runs_on_the_tracing_profile_with_either_collector_file() {
    assert!(
        compose_text().contains(
            "COMPOSE_PROFILES=tracing OTEL_EXPORTER_OTLP_ENDPOINT=http://otel-collector:4318"
        ),
        "the command the tests try is the one the file documents"
    );
    for extra in [
        vec![],
        vec![
            ("OTEL_COLLECTOR_CONFIG", "collector-tail.yaml"),
            ("OTEL_TRACES_SAMPLER", "always_on"),
        ],
    ] {
        if let Err(problems) = check_compose_in(&compose_text(), &tracing_host(&extra)) {
            panic!("with {extra:?}:\n  {}", problems.join("\n  "));
        }
    }
}

#[test]
fn checker_catches_traces_sent_where_no_collector_runs() {
    let text = compose_text();
    // The endpoint without the profile: no collector runs.
    assert_rejected_in(
        &text,
        &host(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector:4318")]),
        &["gateway-1", "runs only with the `tracing` profile"],
    );
    // The profile without the endpoint: nothing is sent.
    assert_rejected_in(
        &text,
        &host(&[("COMPOSE_PROFILES", TRACING_PROFILE)]),
        &["no gateway or worker sends traces"],
    );
    for (endpoint, needle) in [
        ("http://otel-colector:4318", "is not `otel-collector`"),
        ("http://otel-collector:4317", "OTLP/HTTP port"),
        ("https://otel-collector:4318", "https is not built in"),
    ] {
        assert_rejected_in(
            &text,
            &tracing_host(&[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)]),
            &["worker-2", needle],
        );
    }
}

#[test]
fn checker_catches_settings_the_programs_refuse_and_a_broken_collector() {
    let text = compose_text();
    assert_rejected_in(
        &text,
        &tracing_host(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]),
        &["gateway-2", "OTEL_TRACES_SAMPLER"],
    );
    assert_rejected_in(
        &text,
        &tracing_host(&[("OTEL_TRACES_SAMPLER_ARG", "2")]),
        &["worker-1", "OTEL_TRACES_SAMPLER_ARG"],
    );
    assert_rejected_in(
        &text,
        &tracing_host(&[("OTEL_COLLECTOR_CONFIG", "collector-missing.yaml")]),
        &["otel-collector", "collector-missing.yaml"],
    );
    assert_rejected_in(
        &compose_with("      - ./deploy/otel:/etc/otelcol:ro\n", ""),
        &tracing_host(&[]),
        &["otel-collector", "does not mount ./deploy/otel"],
    );
    assert_rejected_in(
        &compose_with(
            "  jaeger:\n    image: jaegertracing/all-in-one:1.64.0\n    profiles: [tracing]",
            "  jaeger:\n    image: jaegertracing/all-in-one:1.64.0\n    profiles: [jaeger]",
        ),
        &tracing_host(&[]),
        &["otel-collector", "sends to `jaeger`, which does not run"],
    );
}
