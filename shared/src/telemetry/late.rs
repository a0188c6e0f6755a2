//! Spans recorded after the fact, with their real start and end: for what is decided only at
//! the end (a request that failed or was slow, an order's outcome, a batch shared by several
//! orders), and for steps that ran before anyone knew they would be kept.

use super::{SpanContext, SpanKind, TRACING};
use opentelemetry::trace::{Link, Span as _, Status, TraceContextExt, Tracer as _};
use opentelemetry::KeyValue;
use std::time::SystemTime;

/// One span, finished.
#[derive(Debug, Clone)]
pub struct Late {
    pub name: &'static str,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Vec<KeyValue>,
    /// Spans of other traces this one is about.
    pub links: Vec<SpanContext>,
    /// Marks the span failed, with this description.
    pub error: Option<String>,
}

impl Late {
    pub fn new(name: &'static str, start: SystemTime, end: SystemTime) -> Self {
        Self {
            name,
            kind: SpanKind::Internal,
            start,
            end,
            attributes: Vec::new(),
            links: Vec::new(),
            error: None,
        }
    }

    pub fn kind(mut self, kind: SpanKind) -> Self {
        self.kind = kind;
        self
    }

    pub fn attr(mut self, kv: KeyValue) -> Self {
        self.attributes.push(kv);
        self
    }

    pub fn links(mut self, links: Vec<SpanContext>) -> Self {
        self.links = links;
        self
    }

    pub fn error(mut self, error: Option<String>) -> Self {
        self.error = error;
        self
    }

    /// Exports it as a child of `parent` (a new trace's root without one). Returns its
    /// context, for its children and links; `None` when traces are off.
    pub fn emit(self, parent: Option<&SpanContext>) -> Option<SpanContext> {
        let t = TRACING.get()?;
        let cx = match parent {
            Some(p) if p.is_valid() => {
                opentelemetry::Context::new().with_remote_span_context(p.clone())
            }
            _ => opentelemetry::Context::new(),
        };
        let mut span = t.tracer.build_with_context(
            t.tracer
                .span_builder(self.name)
                .with_kind(self.kind)
                .with_start_time(self.start)
                .with_attributes(self.attributes)
                .with_links(self.links.into_iter().map(Link::with_context).collect()),
            &cx,
        );
        if let Some(e) = self.error {
            span.set_status(Status::error(e));
        }
        let sc = span.span_context().clone();
        span.end_with_timestamp(self.end.max(self.start));
        Some(sc)
    }
}
