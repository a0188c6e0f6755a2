//! The `tracing` profile: the programs send their traces to the collector that runs, the
//! collector's file exists, takes OTLP/HTTP where the programs send it and passes it to
//! Jaeger, and Grafana's Jaeger data source reaches Jaeger.

use crate::expected::{
    read_repo_yaml, Host, GATEWAYS, OTEL_COLLECTOR, OTEL_COLLECTOR_CONFIG_VAR, OTLP_ENDPOINT_VAR,
    TRACING_PROFILE, WORKERS,
};
use crate::yaml::{argv_of, env_of, interpolate_in, is_on, mounts, scalar, url_host_port};
use seckill_shared::telemetry::TraceSettings;
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Jaeger's query API, as Grafana's data source must name it.
const JAEGER_QUERY: (&str, u16) = ("jaeger", 16686);
/// Jaeger's OTLP/gRPC receiver, where the collector sends.
const JAEGER_OTLP: (&str, u16) = ("jaeger", 4317);

pub(crate) fn check_tracing(
    services: &BTreeMap<String, &Value>,
    host: &Host,
    on: &BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let collector = services.get(OTEL_COLLECTOR).copied();
    let receiver_port = collector
        .filter(|c| is_on(c, on))
        .and_then(|c| check_collector(c, services, host, on, problems));

    let mut senders = 0;
    for name in GATEWAYS.iter().map(|g| g.0).chain(WORKERS) {
        let Some(service) = services.get(name).filter(|s| is_on(s, on)) else {
            continue;
        };
        let mut problem = |p: String| problems.push(format!("{name}: {p}"));
        let settings = TraceSettings::from_vars(name, |k| env_of(service, k, host));
        let settings = match settings {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                problem(format!("traces: {e:#}"));
                continue;
            }
        };
        senders += 1;
        let (to, port) = match url_host_port(&settings.endpoint) {
            Ok(hp) => hp,
            Err(e) => {
                problem(format!("{OTLP_ENDPOINT_VAR}: {e}"));
                continue;
            }
        };
        if !settings.endpoint.starts_with("http://") {
            problem(format!(
                "{OTLP_ENDPOINT_VAR} `{}` is not http:// (the collector's receiver has no TLS)",
                settings.endpoint
            ));
        }
        match services.get(&to) {
            Some(target) if to == OTEL_COLLECTOR && is_on(target, on) => {
                if port != receiver_port {
                    problem(format!(
                        "{OTLP_ENDPOINT_VAR} `{}` is not {OTEL_COLLECTOR}'s OTLP/HTTP port {receiver_port:?}",
                        settings.endpoint
                    ));
                }
            }
            Some(_) if to == OTEL_COLLECTOR => problem(format!(
                "sends traces to `{to}`, which runs only with the `{TRACING_PROFILE}` profile"
            )),
            _ => problem(format!(
                "{OTLP_ENDPOINT_VAR} `{}` is not `{OTEL_COLLECTOR}`",
                settings.endpoint
            )),
        }
    }
    if on.contains(TRACING_PROFILE) && senders == 0 {
        problems.push(format!(
            "the `{TRACING_PROFILE}` profile is on, but no gateway or worker sends traces: set {OTLP_ENDPOINT_VAR}"
        ));
    }

    // Grafana's data source, whether the profile is on or not.
    let url = read_repo_yaml("deploy/grafana/provisioning/datasources", "jaeger.yml")
        .ok()
        .and_then(|d| {
            d.get("datasources")?
                .as_sequence()?
                .iter()
                .find(|s| s.get("type").and_then(scalar).as_deref() == Some("jaeger"))?
                .get("url")
                .and_then(scalar)
        });
    match url.as_deref().map(url_host_port) {
        Some(Ok((h, Some(p)))) if (h.as_str(), p) == JAEGER_QUERY => {}
        other => problems.push(format!(
            "deploy/grafana/provisioning/datasources/jaeger.yml: the Jaeger data source's url is {other:?}, not http://{}:{}",
            JAEGER_QUERY.0, JAEGER_QUERY.1
        )),
    }
}

/// The collector's configuration file: mounted, read from deploy/otel, an `otlp` receiver
/// over HTTP and an OTLP exporter to Jaeger in the traces pipeline. Returns the HTTP port.
fn check_collector(
    collector: &Value,
    services: &BTreeMap<String, &Value>,
    host: &Host,
    on: &BTreeSet<String>,
    problems: &mut Vec<String>,
) -> Option<u16> {
    let mut problem = |p: String| problems.push(format!("{OTEL_COLLECTOR}: {p}"));
    if !mounts(collector)
        .iter()
        .any(|(from, to)| from == "./deploy/otel" && to == "/etc/otelcol")
    {
        problem("does not mount ./deploy/otel at /etc/otelcol".into());
    }
    let Some(file) = argv_of(collector).iter().find_map(|w| {
        let w = interpolate_in(w, host).ok()?;
        w.strip_prefix("--config=/etc/otelcol/").map(str::to_string)
    }) else {
        problem(format!(
            "no --config=/etc/otelcol/<file> (the file {OTEL_COLLECTOR_CONFIG_VAR} picks)"
        ));
        return None;
    };
    let config = match read_repo_yaml("deploy/otel", &file) {
        Ok(c) => c,
        Err(e) => {
            problem(format!("--config {file}: {e}"));
            return None;
        }
    };
    let at = |path: &[&str]| -> Option<&Value> { path.iter().try_fold(&config, |v, k| v.get(*k)) };
    let http = at(&["receivers", "otlp", "protocols", "http", "endpoint"])
        .and_then(scalar)
        .and_then(|e| e.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()));
    if http.is_none() {
        problem(format!("{file}: no otlp receiver with an HTTP endpoint"));
    }
    let pipeline = |part: &str| -> Vec<String> {
        at(&["service", "pipelines", "traces", part])
            .and_then(Value::as_sequence)
            .map(|s| s.iter().filter_map(scalar).collect())
            .unwrap_or_default()
    };
    if !pipeline("receivers").iter().any(|r| r == "otlp") {
        problem(format!(
            "{file}: the traces pipeline does not receive from otlp"
        ));
    }
    let to_jaeger = pipeline("exporters").into_iter().any(|name| {
        let endpoint = at(&["exporters", &name, "endpoint"]).and_then(scalar);
        name.split('/').next() == Some("otlp")
            && endpoint.as_deref().and_then(|e| {
                let (h, p) = e.rsplit_once(':')?;
                Some((h.to_string(), p.parse::<u16>().ok()?))
            }) == Some((JAEGER_OTLP.0.to_string(), JAEGER_OTLP.1))
    });
    if !to_jaeger {
        problem(format!(
            "{file}: the traces pipeline has no otlp exporter to {}:{}",
            JAEGER_OTLP.0, JAEGER_OTLP.1
        ));
    }
    if !services.get(JAEGER_OTLP.0).is_some_and(|j| is_on(j, on)) {
        problem(format!("sends to `{}`, which does not run", JAEGER_OTLP.0));
    }
    http
}
