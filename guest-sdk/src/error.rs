use std::fmt;

/// Why a tool call failed. The message is read by the model, so it should say
/// what went wrong and, where possible, what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments do not fit the tool's parameters schema.
    InvalidArguments(String),
    /// The arguments were fine but the tool could not do its job.
    Failed(String),
    /// No tool of that name exists in this component (produced by the SDK).
    UnknownTool(String),
}

impl ToolError {
    /// A failure of the tool itself, e.g. a missing file or a division by zero.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// Arguments that decoded but make no sense, e.g. an empty expression.
    pub fn invalid_arguments(message: impl Into<String>) -> Self {
        Self::InvalidArguments(message.into())
    }

    /// The message without its kind.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidArguments(message)
            | Self::Failed(message)
            | Self::UnknownTool(message) => message,
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            Self::InvalidArguments(_) => "invalid arguments",
            Self::Failed(_) => "failed",
            Self::UnknownTool(_) => "unknown tool",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

impl std::error::Error for ToolError {}

impl From<std::io::Error> for ToolError {
    fn from(error: std::io::Error) -> Self {
        Self::Failed(error.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(error: serde_json::Error) -> Self {
        Self::Failed(format!("JSON error: {error}"))
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_owned())
    }
}

impl From<ToolError> for crate::bindings::wasm_agent::tool::types::ToolError {
    fn from(error: ToolError) -> Self {
        use crate::bindings::wasm_agent::tool::types::ToolError as Wit;
        match error {
            ToolError::InvalidArguments(message) => Wit::InvalidArguments(message),
            ToolError::Failed(message) => Wit::Failed(message),
            ToolError::UnknownTool(message) => Wit::UnknownTool(message),
        }
    }
}
