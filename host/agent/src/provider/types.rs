//! Provider-neutral chat types: what the agent loop sends and receives.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as offered to a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDefinition {
    /// Public tool name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
    /// Ask for OpenAI Structured Outputs (ignored by other providers).
    pub strict: bool,
}

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// The provider's id for the call (generated when the provider has none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments exactly as the model wrote them (JSON text, maybe invalid).
    pub arguments: String,
}

/// The answer to one tool call, sent back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultMessage {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name (Gemini matches results by name).
    pub name: String,
    /// The text the model sees.
    pub content: String,
    /// True when the call failed.
    pub is_error: bool,
}

/// One message of a conversation; serialized as `{"role": ..., "content": ...}`
/// so a conversation can be stored and resumed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", content = "content", rename_all = "snake_case")]
pub enum Message {
    /// The user's input.
    User(String),
    /// The model's turn: text and/or tool calls.
    Assistant {
        /// Text the model wrote.
        text: String,
        /// Tools it asked to call.
        tool_calls: Vec<ToolCallRequest>,
    },
    /// The result of one tool call.
    ToolResult(ToolResultMessage),
}

/// One request to a model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The provider's model name (without the `provider:` prefix).
    pub model: String,
    /// System instructions.
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Upper bound on generated tokens (Anthropic requires one).
    pub max_tokens: Option<u32>,
}

/// Tokens used by one or more requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Tokens in the prompts.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Both.
    pub total_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        // Counts come from remote servers: never let one overflow.
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
    }
}

/// The model's answer to one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatResponse {
    /// Text the model wrote.
    pub text: String,
    /// Tools it asked to call, in order.
    pub tool_calls: Vec<ToolCallRequest>,
    /// Tokens used.
    pub usage: Usage,
    /// Why the model stopped, as the provider said it.
    pub stop_reason: Option<String>,
}
