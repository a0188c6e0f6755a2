//! Logs and traces.
//!
//! Logs: `tracing` to stderr, JSON lines or readable ones; the level comes from `RUST_LOG`
//! (default `info`).
//!
//! Traces (issue 37): OpenTelemetry over OTLP/HTTP, configured by the standard variables and
//! off unless an endpoint is set ([`TraceSettings`]). When off, nothing on a request's path
//! changes but one load of [`enabled`]. When on:
//! - a request is traced or not from its start ([`sample_request`]); a traced one gets its
//!   spans from callsites of target [`TRACED`], the only spans the OpenTelemetry layer sees,
//!   so an untraced request costs that layer nothing;
//! - what is known only at the end (an error, a slow order, the worker's batch) is recorded
//!   afterwards, with its real start and end ([`late`]): a failed or slow order's spans are
//!   kept whatever the sampler said.
//!
//! Every traced root span records `trace_id` and `span_id` as fields, so a log line written
//! in it names its trace.

pub mod late;
mod settings;

pub use late::Late;
pub use opentelemetry::trace::{SpanContext, SpanKind};
pub use opentelemetry::KeyValue;
pub use settings::{Sampler, TraceSettings};

use crate::config::LogFormat;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The target of every span meant for traces: `info_span!(target: TRACED, ...)`.
pub const TRACED: &str = "seckill_trace";
/// The W3C trace-context header, on HTTP requests and on the order's Kafka message.
pub const TRACEPARENT: &str = "traceparent";

/// This process's tracer, once traces are on.
struct Tracing {
    tracer: SdkTracer,
    sampler: Sampler,
    slow: Duration,
}

static TRACING: OnceLock<Tracing> = OnceLock::new();

/// What [`init`] set up; [`Telemetry::shutdown`] sends the spans still buffered.
#[must_use = "keep it until the process ends, then call shutdown"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported (an endpoint is set).
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Sends what is buffered and stops the exporter, waiting at most a few seconds. Blocks:
    /// call it off the runtime's threads, or after the runtime.
    pub fn shutdown(self) {
        if let Some(p) = self.provider {
            if let Err(e) = p.shutdown_with_timeout(Duration::from_secs(5)) {
                tracing::warn!(error = %e, "the trace exporter did not stop cleanly");
            }
        }
    }
}

/// Installs the global subscriber, and the trace exporter if the `OTEL_*` variables ask for
/// one. `service` names the process when `OTEL_SERVICE_NAME` does not; orders slower than
/// `slow` from reservation to settlement keep their traces. Safe to call more than once:
/// later calls change nothing.
pub fn init(format: LogFormat, service: &str, slow: Duration) -> anyhow::Result<Telemetry> {
    let settings = TraceSettings::from_vars(service, |k| std::env::var(k).ok())?;
    init_with(format, settings, slow)
}

/// [`init`] with the trace settings already read (`None`: no traces).
pub fn init_with(
    format: LogFormat,
    settings: Option<TraceSettings>,
    slow: Duration,
) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // OpenTelemetry's own records: its warnings and errors (a failed export), not its
        // start and stop.
        EnvFilter::new("info,opentelemetry=warn,opentelemetry_sdk=warn,opentelemetry-otlp=warn")
    });
    let Some(settings) = settings else {
        // `try_init` also forwards the `log` crate's records (librdkafka's, through rdkafka).
        let _ = dispatch(format, filter, None, std::io::stderr).try_init();
        return Ok(Telemetry { provider: None });
    };
    let provider = provider(&settings)?;
    let tracer = provider.tracer("seckill");
    let installed = dispatch(format, filter, Some(tracer.clone()), std::io::stderr).try_init();
    if installed.is_err() {
        // Another subscriber was first (a test process): no traces from this one.
        let _ = provider.shutdown();
        return Ok(Telemetry { provider: None });
    }
    let _ = TRACING.set(Tracing {
        tracer,
        sampler: settings.sampler,
        slow,
    });
    tracing::info!(
        endpoint = %settings.endpoint,
        service = %settings.service,
        sampler = ?settings.sampler,
        "exporting traces"
    );
    Ok(Telemetry {
        provider: Some(provider),
    })
}

/// The subscriber: logs to `writer` as `format` at `filter`'s levels, and with `tracer` the
/// spans of traced requests to OpenTelemetry. Public so that the benchmarks can compare the
/// two on the same spans.
pub fn dispatch<W>(
    format: LogFormat,
    filter: EnvFilter,
    tracer: Option<SdkTracer>,
    writer: W,
) -> tracing::Dispatch
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let Some(tracer) = tracer else {
        // As before traces existed: one global filter, no per-layer bookkeeping.
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(writer);
        return if format == LogFormat::Json {
            builder.json().with_current_span(true).finish().into()
        } else {
            builder.compact().finish().into()
        };
    };
    let fmt = if format == LogFormat::Json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_writer(writer)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .compact()
            .with_writer(writer)
            .boxed()
    };
    // The OpenTelemetry layer sees only the spans of traced requests (target `TRACED`): its
    // interest is decided once per callsite, so every other span and event skips it.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        // What it would add by default costs every poll of a traced buy (its span is entered
        // on each: busy and idle times, the OpenTelemetry context attached) or is the same on
        // every span (the target): off. Nothing here reads OpenTelemetry's current context.
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_context_activation(false)
        .with_filter(Targets::new().with_target(TRACED, LevelFilter::INFO));
    // One global filter, RUST_LOG's, with the traced spans always on (they are the traces);
    // the OpenTelemetry layer's own filter then takes only those. (EnvFilter as the log
    // layer's own filter instead lost the traced spans whenever RUST_LOG named a target at
    // another level, `info,seckill_gateway=debug`: neither layer saw them.)
    let filter = filter.add_directive(format!("{TRACED}=info").parse().expect("a valid directive"));
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .into()
}

/// The exporter and its provider. Building it connects to nothing.
pub fn provider(settings: &TraceSettings) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|e| anyhow::anyhow!("building the OTLP trace exporter: {e}"))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        // Which spans exist is decided by this module (`sample_request`, `late`): each one
        // made is meant to be kept.
        .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOn)
        .with_resource(
            Resource::builder()
                .with_service_name(settings.service.clone())
                .build(),
        )
        .build())
}

/// Whether this process exports traces.
#[inline]
pub fn enabled() -> bool {
    TRACING.get().is_some()
}

/// Orders slower than this keep their traces (`SECKILL_TRACE_SLOW_MS`); `None` when off.
pub fn slow() -> Option<Duration> {
    TRACING.get().map(|t| t.slow)
}

/// Whether a request is traced: `None` when traces are off or the sampler says no. Otherwise
/// the parent of its root span: the caller's span when the request carried a `traceparent`
/// (a parent-based sampler follows its flag), else none.
pub fn sample_request(traceparent: Option<&str>) -> Option<opentelemetry::Context> {
    let t = TRACING.get()?;
    let parent = traceparent.and_then(parse_traceparent);
    if !t
        .sampler
        .decide(parent.as_ref().map(SpanContext::is_sampled))
    {
        return None;
    }
    Some(match parent {
        Some(sc) => opentelemetry::Context::new().with_remote_span_context(sc),
        None => opentelemetry::Context::new(),
    })
}

/// Whether an order whose message carried `parent` is traced from the start (before its
/// outcome is known): the parent's flag for a parent-based sampler, else the ratio.
pub fn sample_order(parent: Option<&SpanContext>) -> bool {
    TRACING
        .get()
        .is_some_and(|t| t.sampler.decide(parent.map(SpanContext::is_sampled)))
}

/// Makes `span` (a [`TRACED`] span, just created) a child of `parent`, and records its ids in
/// its `trace_id` and `span_id` fields, for the log lines written in it.
pub fn adopt(span: &Span, parent: opentelemetry::Context) {
    let _ = span.set_parent(parent);
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    span.record("trace_id", tracing::field::display(sc.trace_id()));
    span.record("span_id", tracing::field::display(sc.span_id()));
}

/// The `traceparent` of a [`TRACED`] span, for the next hop.
pub fn traceparent_of(span: &Span) -> String {
    format_traceparent(span.context().span().span_context())
}

/// A `traceparent` for an untraced request, so that whoever keeps the order's trace later
/// (a failed or slow order, at the worker) keeps it under one id: fresh ids, not sampled.
pub fn unsampled_traceparent() -> String {
    unsampled_traceparent_under(None)
}

/// [`unsampled_traceparent`], in the trace of `caller` (the request's own `traceparent`)
/// when it carried a valid one: the caller's trace id, a fresh span id, not sampled.
pub fn unsampled_traceparent_under(caller: Option<&SpanContext>) -> String {
    let span = rand::random::<u64>() | 1;
    match caller {
        Some(c) => format!("00-{:032x}-{span:016x}-00", c.trace_id()),
        None => format!("00-{:032x}-{span:016x}-00", rand::random::<u128>() | 1),
    }
}

/// An untraced request's trace all the same (traces on, the sampler said no): the
/// `traceparent` its next hop carries (in the caller's trace when the request had one), so
/// that what is kept later, a failed or slow order's spans at the worker and the request's
/// own span if it fails or is slow, shares one trace; and what that span would name, noted
/// as the request goes.
pub struct Carried {
    pub traceparent: String,
    product: AtomicU64,
    user: AtomicU64,
    ticket: Mutex<Option<String>>,
}

impl Carried {
    /// For a request whose own `traceparent` (if any) was `caller`.
    pub fn under(caller: Option<&str>) -> Self {
        let caller = caller.and_then(parse_traceparent);
        Self {
            traceparent: unsampled_traceparent_under(caller.as_ref()),
            product: AtomicU64::new(0),
            user: AtomicU64::new(0),
            ticket: Mutex::new(None),
        }
    }

    pub fn note_product(&self, id: u64) {
        self.product.store(id, Ordering::Relaxed);
    }

    pub fn note_user(&self, id: u64) {
        self.user.store(id, Ordering::Relaxed);
    }

    pub fn note_ticket(&self, ticket: &str) {
        *self.ticket.lock().unwrap_or_else(|e| e.into_inner()) = Some(ticket.to_owned());
    }

    /// `product_id`, `user_id` and `seckill.ticket`, those noted.
    pub fn attributes(&self) -> Vec<KeyValue> {
        let mut kv = Vec::new();
        for (key, n) in [("product_id", &self.product), ("user_id", &self.user)] {
            let n = n.load(Ordering::Relaxed);
            if n > 0 {
                kv.push(KeyValue::new(key, n as i64));
            }
        }
        if let Some(t) = self
            .ticket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            kv.push(KeyValue::new("seckill.ticket", t));
        }
        kv
    }

    /// The span the next hop is a child of (never exported): a kept span's parent too.
    pub fn parent(&self) -> Option<SpanContext> {
        parse_traceparent(&self.traceparent)
    }
}

/// `00-<trace id>-<span id>-<flags>`.
pub fn format_traceparent(sc: &SpanContext) -> String {
    format!(
        "00-{:032x}-{:016x}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags()
    )
}

/// A remote span context from a `traceparent`, if it is a valid one (W3C rules, by
/// OpenTelemetry's propagator).
pub fn parse_traceparent(value: &str) -> Option<SpanContext> {
    if !well_formed(value) {
        return None;
    }
    struct One<'a>(&'a str);
    impl Extractor for One<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            (key == TRACEPARENT).then_some(self.0)
        }
        fn keys(&self) -> Vec<&str> {
            vec![TRACEPARENT]
        }
    }
    let cx = TraceContextPropagator::new().extract(&One(value));
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// The W3C shape, strictly: `vv-<32 hex>-<16 hex>-<2 hex>`, lower case, a known version
/// (`00` has nothing after the flags; a later one may add `-...`), never version `ff`.
/// OpenTelemetry's propagator alone takes one-digit flags and a 33-digit trace id.
fn well_formed(v: &str) -> bool {
    let b = v.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b.get(r)
            .is_some_and(|s| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
    };
    let dash = |i: usize| b.get(i) == Some(&b'-');
    let shape =
        hex(0..2) && dash(2) && hex(3..35) && dash(35) && hex(36..52) && dash(52) && hex(53..55);
    if !shape || &v[..2] == "ff" {
        return false;
    }
    if &v[..2] == "00" {
        b.len() == 55
    } else {
        b.len() == 55 || dash(55)
    }
}

#[cfg(test)]
mod tests;
