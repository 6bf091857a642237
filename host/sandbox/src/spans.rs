//! The spans of a call, named and attributed after the OpenTelemetry
//! GenAI and HTTP semantic conventions: `execute_tool {tool}` around the
//! whole call, with `validate`, `instantiate` and `guest` inside it and a
//! client span for each HTTP request and state operation the guest makes.
//! Tool calls made by a tool nest as `execute_tool` spans of their own.
//!
//! They are plain `tracing` spans: exported only where an OpenTelemetry
//! layer is installed, and nearly free where none is. Neither arguments nor
//! results are recorded, and URLs lose their query (it may hold secrets).

use tracing::field::Empty;
use tracing::{Span, info_span};

use crate::context::CallContext;
use crate::result::CallError;
use crate::runtime::accounting::usage::CallUsage;

/// The span of one call of `tool` (`None`: a name the host does not offer,
/// which is the caller's text and not recorded).
pub(crate) fn call(tool: Option<&str>, call_id: &str, context: &CallContext) -> Span {
    let tool = tool.unwrap_or("(unknown)");
    info_span!(
        target: "wasm_agent::call",
        "execute_tool",
        "otel.name" = %format_args!("execute_tool {tool}"),
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = tool,
        "gen_ai.tool.call.id" = call_id,
        "gen_ai.tool.type" = "extension",
        "wasm_agent.run.id" = context.run_id.as_str(),
        "wasm_agent.call.depth" = context.tool_call_depth,
        "error.type" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
        "wasm_agent.fuel_used" = Empty,
        "wasm_agent.peak_memory" = Empty,
        "wasm_agent.denials" = Empty,
        "wasm_agent.requests" = Empty,
    )
}

/// Records how the call ended and what it used.
pub(crate) fn finish_call(span: &Span, error: Option<&CallError>, usage: Option<&CallUsage>) {
    if span.is_disabled() {
        return;
    }
    if let Some(error) = error {
        failed(span, error.kind.as_str(), &error.message);
    }
    if let Some(usage) = usage {
        span.record("wasm_agent.fuel_used", usage.fuel_used);
        span.record("wasm_agent.peak_memory", usage.peak_memory);
        let activity = &usage.activity;
        span.record("wasm_agent.denials", activity.denials.len() as u64);
        let requests = activity.requests.len() as u64 + activity.more_requests;
        span.record("wasm_agent.requests", requests);
    }
}

/// Marks `span` failed with `kind` (`error.type`) and `message`.
pub(crate) fn failed(span: &Span, kind: &str, message: &str) {
    wasm_agent_telemetry::context::record_failure(span, kind, message);
}

/// Checking the arguments against the tool's schema and limits.
pub(crate) fn validate() -> Span {
    info_span!(target: "wasm_agent::call", "validate")
}

/// Making the call's instance (not when a kept one is reused).
pub(crate) fn instantiate() -> Span {
    info_span!(target: "wasm_agent::call", "instantiate")
}

/// Taking the instance made ahead for the call (see `call::ahead`).
pub(crate) fn made_ahead() -> Span {
    info_span!(target: "wasm_agent::call", "instantiate", "wasm_agent.made_ahead" = true)
}

/// The guest running, host calls included.
pub(crate) fn guest() -> Span {
    info_span!(target: "wasm_agent::call", "guest")
}

/// One outgoing HTTP request of a guest (a client span).
pub(crate) fn http_request(method: &str, scheme: &str, host: &str, port: u16, path: &str) -> Span {
    info_span!(
        target: "wasm_agent::network",
        "http_request",
        "otel.name" = method,
        "otel.kind" = "client",
        "http.request.method" = method,
        "url.full" = %wasm_agent_redact::text(&format!("{scheme}://{host}:{port}{path}")),
        "server.address" = host,
        "server.port" = port,
        "http.response.status_code" = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// One operation on the session's state (`get`, `set`).
pub(crate) fn state(operation: &'static str) -> Span {
    info_span!(
        target: "wasm_agent::call",
        "state",
        "otel.name" = %format_args!("state {operation}"),
        "otel.kind" = "client",
        "db.operation.name" = operation,
        "error.type" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// One call of a `host` import that is not state or HTTP (`log`, `emit`,
/// `delegate`, `call-tool`).
pub(crate) fn host_call(operation: &'static str) -> Span {
    info_span!(
        target: "wasm_agent::call",
        "host_call",
        "otel.name" = %format_args!("host.{operation}"),
        "wasm_agent.host.operation" = operation,
        "error.type" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// A guest's socket connection (or UDP send) being checked against its
/// grants; `wasm_agent.decision` says how it went.
pub(crate) fn connect(transport: &'static str, addr: std::net::SocketAddr) -> Span {
    info_span!(
        target: "wasm_agent::network",
        "connect",
        "otel.name" = %format_args!("connect {transport}"),
        "otel.kind" = "client",
        "network.transport" = transport,
        "server.address" = %addr.ip(),
        "server.port" = addr.port(),
        "wasm_agent.decision" = Empty,
    )
}
