use serde::Serialize;

use crate::ToolError;
use crate::bindings::wasm_agent::tool::types as wit;

/// What a successful call returns: text for the model plus artifacts for the
/// application (the model never sees artifacts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    content: String,
    artifacts: Vec<Artifact>,
}

/// Structured data attached to an [`Output`] for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// What the data is, in the tool's own vocabulary (e.g. `"chart"`).
    pub kind: String,
    /// The media type of `data`, when known.
    pub mime_type: Option<String>,
    /// The payload.
    pub data: Vec<u8>,
}

impl Output {
    /// An output whose content is `content` and that has no artifacts.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            artifacts: Vec::new(),
        }
    }

    /// Adds `value` serialised as a JSON artifact (`application/json`).
    ///
    /// Fails only if `value` cannot be represented as JSON (e.g. a map with
    /// non-string keys).
    pub fn with_json<T: Serialize + ?Sized>(
        self,
        kind: impl Into<String>,
        value: &T,
    ) -> Result<Self, ToolError> {
        let data = serde_json::to_vec(value)?;
        Ok(self.with_bytes(kind, "application/json", data))
    }

    /// Adds raw bytes of the given media type as an artifact.
    pub fn with_bytes(
        self,
        kind: impl Into<String>,
        mime_type: impl Into<String>,
        data: impl Into<Vec<u8>>,
    ) -> Self {
        self.with_artifact(Artifact {
            kind: kind.into(),
            mime_type: Some(mime_type.into()),
            data: data.into(),
        })
    }

    /// Adds an artifact built by hand (e.g. one without a media type).
    pub fn with_artifact(mut self, artifact: Artifact) -> Self {
        self.artifacts.push(artifact);
        self
    }

    /// The text sent back to the model.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The artifacts, in the order they were added.
    pub fn artifacts(&self) -> &[Artifact] {
        &self.artifacts
    }
}

impl From<String> for Output {
    fn from(content: String) -> Self {
        Self::text(content)
    }
}

impl From<&str> for Output {
    fn from(content: &str) -> Self {
        Self::text(content)
    }
}

impl From<Output> for wit::ToolOutput {
    fn from(output: Output) -> Self {
        Self {
            content: output.content,
            artifacts: output
                .artifacts
                .into_iter()
                .map(|artifact| wit::Artifact {
                    kind: artifact.kind,
                    mime_type: artifact.mime_type,
                    data: artifact.data,
                })
                .collect(),
        }
    }
}
