//! Model providers: one [`Provider`] trait, and [`HttpProvider`] speaking the
//! real wire formats of OpenAI Chat Completions (and any OpenAI-compatible
//! server such as Ollama, vLLM or llama.cpp), Anthropic Messages and Gemini.

mod anthropic;
mod gemini;
mod http;
mod openai;
pub mod schema;
mod spec;
pub(crate) mod sse;
mod types;
pub(crate) mod wire;

pub use http::{HttpProvider, RetryPolicy};
pub use spec::{ModelSpec, ProviderKind};
pub use types::{
    ChatRequest, ChatResponse, Message, ToolCallRequest, ToolDefinition, ToolResultMessage, Usage,
};
pub use wire::WireError;

/// The wire format a provider family speaks.
pub(crate) fn wire_for(kind: ProviderKind) -> Box<dyn wire::Wire> {
    match kind {
        ProviderKind::Anthropic => Box::new(anthropic::Anthropic),
        ProviderKind::Gemini => Box::new(gemini::Gemini),
        _ => Box::new(openai::OpenAi),
    }
}

use std::time::Duration;

/// Receives streamed text as it arrives.
pub type TextSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A chat model that can call tools.
#[async_trait::async_trait]
pub trait Provider: Send + Sync + 'static {
    /// A short name for messages, e.g. `openai:gpt-4o-mini`.
    fn name(&self) -> String;

    /// Sends one request. With `stream`, asks for a streamed answer and hands
    /// each piece of text to it as it arrives; the whole answer is returned
    /// either way.
    async fn chat(
        &self,
        request: &ChatRequest,
        stream: Option<TextSink<'_>>,
    ) -> Result<ChatResponse, ProviderError>;
}

/// Why a model request failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The API key is not set.
    #[error("{provider} needs an API key: set the environment variable {variable}")]
    MissingKey {
        /// The provider.
        provider: &'static str,
        /// The variable to set.
        variable: &'static str,
    },
    /// A `--model` value that names no known provider.
    #[error("{0}")]
    BadSpec(String),
    /// A provider that has no default address was given none.
    #[error("{provider} needs --base-url (e.g. http://localhost:8000/v1)")]
    MissingBaseUrl {
        /// The provider.
        provider: &'static str,
    },
    /// The server answered with an error status.
    #[error("{provider} answered {status}: {message}{hint}")]
    Status {
        /// The provider.
        provider: String,
        /// HTTP status code.
        status: u16,
        /// The provider's error message.
        message: String,
        /// What to do about it.
        hint: String,
        /// When the server asked to retry (429, 503).
        retry_after: Option<Duration>,
    },
    /// The server could not be reached or the connection broke.
    #[error("cannot reach {provider} at {url}: {reason}")]
    Transport {
        /// The provider.
        provider: String,
        /// The URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The answer did not have the documented shape.
    #[error("{provider} sent an unexpected answer: {reason}")]
    Malformed {
        /// The provider.
        provider: String,
        /// What was wrong.
        reason: WireError,
    },
}

impl ProviderError {
    /// Whether trying again may help (rate limits, server errors, broken
    /// connections).
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => *status == 429 || *status >= 500,
            ProviderError::Transport { .. } => true,
            _ => false,
        }
    }

    /// A short name of what went wrong (`error.type` in traces).
    pub fn kind(&self) -> &'static str {
        match self {
            ProviderError::MissingKey { .. } => "missing_key",
            ProviderError::BadSpec(_) => "bad_spec",
            ProviderError::MissingBaseUrl { .. } => "missing_base_url",
            ProviderError::Status { .. } => "status",
            ProviderError::Transport { .. } => "transport",
            ProviderError::Malformed { .. } => "malformed",
        }
    }
}
