//! The span of each MCP request, after the OpenTelemetry MCP conventions:
//! a server span named `{mcp.method.name} {tool}` (or the method alone),
//! child of the client's span when the request names one, in its `_meta`
//! (`traceparent`, `tracestate`; SEP-414) or in the HTTP request's headers.
//! Sandboxed calls made for it (`execute_tool` spans) nest inside.

use std::borrow::Cow;

use http::HeaderMap;
use rmcp::model::{CallToolResponse, ErrorData, ServerResult};
use serde::Deserialize;
use tracing::field::Empty;
use tracing::{Span, info_span};
use wasm_agent_telemetry::context::{TRACEPARENT, TRACESTATE, adopt_remote_parent, record_failure};

/// Longest method or tool name put in a span (they are the client's text).
const MAX_NAME: usize = 128;

/// How a request reached the server.
#[derive(Clone, Copy)]
pub(crate) struct Origin<'a> {
    /// `pipe` (stdio) or `tcp` (HTTP), as `network.transport` says it.
    transport: &'static str,
    /// The HTTP request's headers, if it came over HTTP.
    headers: Option<&'a HeaderMap>,
}

impl<'a> Origin<'a> {
    /// A request read from stdin.
    pub const STDIO: Origin<'static> = Origin {
        transport: "pipe",
        headers: None,
    };

    /// A request in the body of this HTTP request.
    pub fn http(headers: &'a HeaderMap) -> Self {
        Self {
            transport: "tcp",
            headers: Some(headers),
        }
    }

    fn header(&self, name: &str) -> Option<&'a str> {
        self.headers?.get(name)?.to_str().ok()
    }
}

/// What a request's parameters say about its span.
#[derive(Deserialize, Default)]
struct Peek<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, rename = "_meta", borrow)]
    meta: Option<TraceMeta<'a>>,
}

#[derive(Deserialize, Default)]
struct TraceMeta<'a> {
    #[serde(default, borrow)]
    traceparent: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tracestate: Option<Cow<'a, str>>,
}

/// The span of request `id` of `method` with JSON `params`.
pub(crate) fn request(
    method: &str,
    id: &impl std::fmt::Display,
    params: &str,
    origin: Origin<'_>,
) -> Span {
    let span = opened(method, id, origin);
    if span.is_disabled() {
        return span;
    }
    let peek: Peek<'_> = serde_json::from_str(params).unwrap_or_default();
    let meta = peek.meta.unwrap_or_default();
    named(&span, method, peek.name.as_deref());
    parented(
        &span,
        meta.traceparent.as_deref(),
        meta.tracestate.as_deref(),
        origin,
    );
    span
}

/// The span of `tools/call` request `id` of `tool`, its `_meta` already
/// parsed (rmcp's path).
pub(crate) fn tool_call(
    tool: &str,
    id: &impl std::fmt::Display,
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
    origin: Origin<'_>,
) -> Span {
    let span = opened("tools/call", id, origin);
    if span.is_disabled() {
        return span;
    }
    let field = |key| meta?.get(key)?.as_str();
    named(&span, "tools/call", Some(tool));
    parented(&span, field(TRACEPARENT), field(TRACESTATE), origin);
    span
}

fn opened(method: &str, id: &impl std::fmt::Display, origin: Origin<'_>) -> Span {
    info_span!(
        target: "wasm_agent::mcp",
        "mcp_request",
        "otel.name" = Empty,
        "otel.kind" = "server",
        "mcp.method.name" = cut(method),
        "jsonrpc.request.id" = %id,
        "network.transport" = origin.transport,
        "gen_ai.operation.name" = Empty,
        "gen_ai.tool.name" = Empty,
        "error.type" = Empty,
        "rpc.response.status_code" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

fn named(span: &Span, method: &str, tool: Option<&str>) {
    let method = cut(method);
    match tool.filter(|_| method == "tools/call") {
        Some(tool) => {
            let tool = cut(tool);
            span.record("otel.name", format!("{method} {tool}"));
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", tool);
        }
        None => {
            span.record("otel.name", method);
        }
    }
}

/// `_meta` names the client's span for this very message; the header, the
/// HTTP request's: the first one there is becomes the parent.
fn parented(span: &Span, traceparent: Option<&str>, tracestate: Option<&str>, origin: Origin<'_>) {
    let parent = traceparent.map(|parent| (parent, tracestate)).or_else(|| {
        origin
            .header(TRACEPARENT)
            .map(|parent| (parent, origin.header(TRACESTATE)))
    });
    if let Some((traceparent, tracestate)) = parent {
        adopt_remote_parent(span, traceparent, tracestate);
    }
}

/// Records how the request ended.
pub(crate) fn finish(span: &Span, answer: &Result<ServerResult, ErrorData>) {
    match answer {
        Err(error) => refused(span, error),
        Ok(ServerResult::CallToolResult(result)) if result.is_error == Some(true) => {
            tool_failed(span);
        }
        Ok(_) => {}
    }
}

/// Records how a `tools/call` (on rmcp's path) ended.
pub(crate) fn finish_call(span: &Span, answer: &Result<CallToolResponse, ErrorData>) {
    match answer {
        Err(error) => refused(span, error),
        Ok(CallToolResponse::Complete(result)) if result.is_error == Some(true) => {
            tool_failed(span);
        }
        Ok(_) => {}
    }
}

fn refused(span: &Span, error: &ErrorData) {
    let code = error.code.0.to_string();
    span.record("rpc.response.status_code", code.as_str());
    record_failure(span, &code, &error.message);
}

fn tool_failed(span: &Span) {
    span.record("error.type", "tool_error");
    span.record("otel.status_code", "ERROR");
}

fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(MAX_NAME)]
}
