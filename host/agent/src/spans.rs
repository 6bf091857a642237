//! The spans of an agent run, after the OpenTelemetry GenAI conventions:
//! `invoke_agent` around the run, a client span `chat {model}` for each
//! model request (retries included), and the sandbox's `execute_tool` span
//! for each tool call inside it. Prompts, answers and arguments are never
//! recorded; token counts are.

use tracing::field::Empty;
use tracing::{Span, info_span};

use super::provider::{ChatResponse, ProviderKind, Usage};

/// The span of one run.
pub(crate) fn run(run_id: &str, session_id: &str) -> Span {
    info_span!(
        target: "wasm_agent::agent",
        "invoke_agent",
        "otel.name" = "invoke_agent wasm-agent",
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = "wasm-agent",
        "gen_ai.conversation.id" = session_id,
        "wasm_agent.run.id" = run_id,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "wasm_agent.roundtrips" = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
    )
}

/// Records what a run used and, if it failed, why.
pub(crate) fn finish_run(span: &Span, usage: &Usage, roundtrips: usize, error: Option<&str>) {
    span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
    span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
    span.record("wasm_agent.roundtrips", roundtrips);
    if let Some(kind) = error {
        span.record("error.type", kind);
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of one model request of `kind` for `model` at `base_url`.
pub(crate) fn chat(kind: ProviderKind, model: &str, base_url: &str) -> Span {
    let server = reqwest::Url::parse(base_url).ok();
    let address = server
        .as_ref()
        .and_then(|url| url.host_str().map(str::to_string));
    let port = server
        .as_ref()
        .and_then(reqwest::Url::port_or_known_default);
    info_span!(
        target: "wasm_agent::agent",
        "chat",
        "otel.name" = %format_args!("chat {model}"),
        "otel.kind" = "client",
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider_name(kind),
        "gen_ai.request.model" = model,
        "server.address" = address,
        "server.port" = port,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "error.type" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// Records a model's answer.
pub(crate) fn answered(span: &Span, response: &ChatResponse) {
    span.record("gen_ai.usage.input_tokens", response.usage.prompt_tokens);
    span.record(
        "gen_ai.usage.output_tokens",
        response.usage.completion_tokens,
    );
    if let Some(reason) = &response.stop_reason {
        span.record("gen_ai.response.finish_reasons", reason.as_str());
    }
}

/// Records a failed model request.
pub(crate) fn chat_failed(span: &Span, kind: &str, message: &str) {
    wasm_agent_telemetry::context::record_failure(span, kind, message);
}

/// `gen_ai.provider.name` (well-known values where the conventions have one).
fn provider_name(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::OpenAi => "openai",
        ProviderKind::Anthropic => "anthropic",
        ProviderKind::Gemini => "gcp.gemini",
        ProviderKind::Ollama => "ollama",
        ProviderKind::OpenAiCompatible => "openai-compatible",
    }
}
