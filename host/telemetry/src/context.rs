//! W3C trace context across process boundaries.
//!
//! A remote parent comes in as a `traceparent` (and maybe `tracestate`)
//! value, from HTTP headers or an MCP request's `_meta`; malformed or
//! oversized values are ignored, as the W3C recommendation says. Nothing
//! here sends a context anywhere: callers decide where one may go.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The header and `_meta` key of the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The header and `_meta` key of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

/// Longest `traceparent` looked at (version 00 is 55 bytes; later
/// versions may append fields).
const MAX_TRACEPARENT: usize = 256;
/// Longest `tracestate` passed on (32 members of at most 256 bytes is the
/// W3C limit; 512 bytes is what it asks every system to keep).
const MAX_TRACESTATE: usize = 512;

/// Makes `span` a child of the remote span `traceparent` names, keeping
/// `tracestate` with it. Does nothing when `span` is not exported or the
/// value is malformed.
pub fn adopt_remote_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    if span.is_disabled() || traceparent.len() > MAX_TRACEPARENT {
        return;
    }
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert(TRACEPARENT.to_string(), traceparent.to_string());
    if let Some(state) = tracestate.filter(|s| s.len() <= MAX_TRACESTATE) {
        carrier.insert(TRACESTATE.to_string(), state.to_string());
    }
    let parent = TraceContextPropagator::new().extract(&carrier);
    if parent.span().span_context().is_valid() {
        // Fails only when no OpenTelemetry layer is installed.
        let _ = span.set_parent(parent);
    }
}

/// The `traceparent` value that names `span` as the parent of a request
/// it makes, when the span is exported.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Longest `otel.status_description` recorded (error messages are written
/// for people and models, and may quote a tool's text).
const MAX_DESCRIPTION: usize = 512;

/// Marks `span` failed: `error.type` is `kind`, the status is ERROR with
/// the first 512 bytes of `message` as its description. The span must
/// declare those three fields (as `Empty`).
pub fn record_failure(span: &tracing::Span, kind: &str, message: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
    let cut = message.floor_char_boundary(MAX_DESCRIPTION);
    span.record("otel.status_description", &message[..cut]);
}
