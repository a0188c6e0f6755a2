use super::*;
use std::collections::HashMap;

fn read(vars: &[(&str, &str)]) -> anyhow::Result<Option<TraceSettings>> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    TraceSettings::from_vars("seckill-test", |k| vars.get(k).cloned())
}

/// Without an endpoint there are no traces: no settings, so no exporter is built, and a
/// process initialised that way exports nothing and decides no request traced.
#[test]
fn no_endpoint_builds_no_exporter() {
    assert_eq!(read(&[]).unwrap(), None);
    assert_eq!(
        read(&[
            ("OTEL_SERVICE_NAME", "x"),
            ("OTEL_TRACES_SAMPLER", "always_on")
        ])
        .unwrap(),
        None,
        "a sampler alone turns nothing on"
    );
    assert_eq!(read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]).unwrap(), None);
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
    assert_eq!(
        read(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]).unwrap(),
        None
    );
    assert_eq!(
        read(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
        None
    );

    let telemetry = init_with(LogFormat::Pretty, None, Duration::from_secs(1)).unwrap();
    assert!(!telemetry.exporting());
    assert!(!enabled());
    assert!(sample_request(Some(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ))
    .is_none());
    assert!(!sample_order(None));
}

#[test]
fn an_endpoint_turns_traces_on_with_the_standard_defaults() {
    let s = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")])
        .unwrap()
        .unwrap();
    assert_eq!(s.service, "seckill-test");
    assert_eq!(
        s.sampler,
        Sampler {
            parent_based: true,
            root: 1.0
        }
    );
    let s = read(&[
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://c:4318/v1/traces",
        ),
        ("OTEL_SERVICE_NAME", "gw-eu-1"),
        ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
        ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(s.endpoint, "http://c:4318/v1/traces");
    for fine in [
        "http://[::1]:4318",
        "http://otel-collector",
        "http://u:p@c:4318/x",
    ] {
        assert!(
            read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", fine)])
                .unwrap()
                .is_some(),
            "{fine}"
        );
    }
    assert_eq!(s.service, "gw-eu-1");
    assert_eq!(s.sampler.root, 0.01);
    // Building the exporter connects to nothing.
    provider(&s).unwrap().shutdown().unwrap();
}

#[test]
fn unsupported_settings_are_errors_that_name_the_variable() {
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318");
    for (var, value) in [
        ("OTEL_TRACES_SAMPLER", "jaeger_remote"),
        ("OTEL_TRACES_SAMPLER_ARG", "1.5"),
        ("OTEL_TRACES_SAMPLER_ARG", "often"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://127.0.0.1:4318"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://:4318"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:notaport"),
    ] {
        let sampler = ("OTEL_TRACES_SAMPLER", "traceidratio");
        let err = match read(&[endpoint, sampler, (var, value)]) {
            Err(e) => e.to_string(),
            Ok(s) => panic!("{var}={value} was taken: {s:?}"),
        };
        assert!(err.contains(var), "{err}");
    }
}

#[test]
fn the_sampler_follows_the_caller_when_parent_based() {
    let never = Sampler {
        parent_based: true,
        root: 0.0,
    };
    assert!(never.decide(Some(true)));
    assert!(!never.decide(Some(false)));
    assert!(!never.decide(None));
    let always = Sampler {
        parent_based: false,
        root: 1.0,
    };
    assert!(
        always.decide(Some(false)),
        "traceidratio ignores the caller"
    );
    let share = Sampler {
        parent_based: false,
        root: 0.25,
    };
    let n = (0..20_000).filter(|_| share.decide(None)).count();
    assert!((4_000..6_000).contains(&n), "{n} of 20000 at 0.25");
}

#[test]
fn traceparents_round_trip_and_bad_ones_are_refused() {
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let sc = parse_traceparent(tp).unwrap();
    assert!(sc.is_sampled() && sc.is_remote());
    assert_eq!(format_traceparent(&sc), tp);
    let fresh = unsampled_traceparent();
    let sc = parse_traceparent(&fresh).unwrap();
    assert!(!sc.is_sampled());
    assert_eq!(format_traceparent(&sc), fresh);
    // The W3C shape, strictly: the propagator alone takes one-digit flags and a 33-digit id.
    assert!(parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1").is_none());
    assert!(
        parse_traceparent("00-0af7651916cd43dd8448eb211c80319c1-b7ad6b7169203331-01").is_none()
    );
    assert!(parse_traceparent("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01").is_none());
    assert!(parse_traceparent("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").is_none());
    assert!(
        parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x").is_none()
    );
    assert!(
        parse_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x").is_some()
    );
    let caller = parse_traceparent(tp).unwrap();
    let carried = parse_traceparent(&unsampled_traceparent_under(Some(&caller))).unwrap();
    assert_eq!(carried.trace_id(), caller.trace_id(), "the caller's trace");
    assert_ne!(carried.span_id(), caller.span_id());
    assert!(!carried.is_sampled());
    for bad in [
        "",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        "zz-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
    ] {
        assert!(parse_traceparent(bad).is_none(), "{bad:?}");
    }
}
