//! What a tool call produces.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use serde::{Serialize, Serializer};

/// Structured data for the application; the model never sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// What the data is (`"json"`, `"image"`, ...), chosen by the tool.
    pub kind: String,
    /// MIME type, when the tool gave one.
    pub mime_type: Option<String>,
    /// The bytes.
    pub data: Vec<u8>,
}

/// JSON form: `{kind, mime_type, size, data_base64}`, plus `json` for
/// `application/json` artifacts and `text` for `text/*` ones.
impl Serialize for Artifact {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("kind", &self.kind)?;
        map.serialize_entry("mime_type", &self.mime_type)?;
        map.serialize_entry("size", &self.data.len())?;
        let mime = self.mime_type.as_deref().unwrap_or_default();
        if mime == "application/json"
            && let Ok(value) = serde_json::from_slice::<serde_json::Value>(&self.data)
        {
            map.serialize_entry("json", &value)?;
        } else if mime.starts_with("text/")
            && let Ok(text) = std::str::from_utf8(&self.data)
        {
            map.serialize_entry("text", text)?;
        }
        map.serialize_entry(
            "data_base64",
            &base64::engine::general_purpose::STANDARD.encode(&self.data),
        )?;
        map.end()
    }
}

/// What a call returned: the one output type of every entry point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// The text for the model (or the calling tool).
    pub content: String,
    /// Structured data for the application; the model never sees it.
    pub artifacts: Vec<Artifact>,
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        Self {
            content,
            artifacts: Vec::new(),
        }
    }
}

impl From<&str> for ToolOutput {
    fn from(content: &str) -> Self {
        content.to_string().into()
    }
}

/// Why a call failed. Serialized as the snake_case name.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, strum::EnumIter, strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum ErrorKind {
    /// The arguments are not valid JSON or violate the tool's schema.
    InvalidArguments,
    /// No tool has that name.
    UnknownTool,
    /// The tool reported a failure.
    Failed,
    /// The call ran past its wall-clock limit.
    Timeout,
    /// The call used up its instruction budget.
    OutOfFuel,
    /// The tool tried to use more memory than its limit.
    MemoryLimit,
    /// The tool overflowed its call stack.
    StackOverflow,
    /// The tool trapped for another reason.
    Trap,
    /// The result was larger than the policy allows.
    OutputTooLarge,
    /// The tool tried to use a capability its policy does not grant.
    CapabilityDenied,
    /// The caller cancelled the call.
    Cancelled,
    /// The call needed approval and did not get it.
    Denied,
    /// The session store failed or did not answer within the call's deadline.
    StoreUnavailable,
    /// The audit trail cannot be written and fails closed, so no call runs.
    AuditUnavailable,
    /// The caller is over a limit of calls at once or per time; it may try
    /// again later.
    RateLimited,
}

impl ErrorKind {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Whether it refuses what the caller or the tool tried (a denial, a
    /// limit, an unknown tool, bad arguments, no audit trail), rather than
    /// a call that failed while it ran.
    pub fn is_refusal(self) -> bool {
        matches!(
            self,
            Self::Denied
                | Self::CapabilityDenied
                | Self::RateLimited
                | Self::UnknownTool
                | Self::InvalidArguments
                | Self::AuditUnavailable
        )
    }

    /// Every kind, in the order declared.
    pub fn all() -> impl Iterator<Item = ErrorKind> {
        <ErrorKind as strum::IntoEnumIterator>::iter()
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call: the kind and a one-line message written for a model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CallError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// One line, written for a model.
    pub message: String,
}

impl CallError {
    /// A new error.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for CallError {}

/// The outcome of one tool call. Tool failures are data, never a host error.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallResult {
    /// The tool's public name.
    pub tool: String,
    /// Unique id of this call.
    pub call_id: String,
    /// Text for the model (empty on error).
    pub content: String,
    /// Structured data for the application.
    pub artifacts: Vec<Artifact>,
    /// Why the call failed, if it did.
    pub error: Option<CallError>,
    /// Wall-clock time of the call.
    #[serde(rename = "duration_ms", serialize_with = "millis")]
    pub duration: Duration,
}

impl ToolCallResult {
    /// The output, or the error.
    pub fn into_output(self) -> Result<ToolOutput, CallError> {
        match self.error {
            None => Ok(ToolOutput {
                content: self.content,
                artifacts: self.artifacts,
            }),
            Some(error) => Err(error),
        }
    }

    /// True when the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// The text to show a model: the content, or `Error: <message>`.
    pub fn model_text(&self) -> String {
        match &self.error {
            None => self.content.clone(),
            Some(error) => format!("Error: {}", error.message),
        }
    }
}

fn millis<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((duration.as_secs_f64() * 1_000_000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_their_names() {
        let names: Vec<&str> = ErrorKind::all().map(ErrorKind::as_str).collect();
        assert_eq!(names.len(), 15);
        assert_eq!(names[0], "invalid_arguments");
        assert!(names.contains(&"out_of_fuel"));
        for kind in ErrorKind::all() {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }

    #[test]
    fn json_artifacts_carry_their_value() {
        let artifact = Artifact {
            kind: "data".into(),
            mime_type: Some("application/json".into()),
            data: br#"{"a":1}"#.to_vec(),
        };
        let value = serde_json::to_value(&artifact).unwrap();
        assert_eq!(value["json"]["a"], 1);
        assert_eq!(value["size"], 7);
    }
}
