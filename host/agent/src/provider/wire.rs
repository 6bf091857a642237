//! How one provider family encodes requests and decodes answers. Pure
//! functions over JSON: the HTTP transport lives in `provider::http`.

use serde_json::Value;

use super::types::{ChatRequest, ChatResponse};

/// Tool arguments as a JSON object for formats that carry them parsed
/// (Anthropic `input`, Gemini `args`); text that is not an object becomes `{}`.
pub(crate) fn arguments_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ => Value::Object(Default::default()),
    }
}

/// A provider's answer did not have the documented shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

/// One provider family's wire format.
pub(crate) trait Wire: Send + Sync + 'static {
    /// The full URL of a request to `model` at `base_url` (no trailing slash).
    fn url(&self, base_url: &str, model: &str, stream: bool) -> String;
    /// Headers that carry the API key (and any required version header).
    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)>;
    /// The JSON body of a request to `model` (the request's own `model` is
    /// ignored: the provider decides, so a request need not be copied to set it).
    fn body(&self, request: &ChatRequest, model: &str, stream: bool) -> Value;
    /// Decodes a non-streamed answer.
    fn parse(&self, body: &Value) -> Result<ChatResponse, WireError>;
    /// A decoder for one streamed answer (server-sent events).
    fn decoder(&self) -> Box<dyn StreamDecoder>;
}

/// Assembles a streamed answer event by event.
pub(crate) trait StreamDecoder: Send {
    /// Feeds one server-sent event (`event` is `""` when it had no name;
    /// `data` is the joined data lines). Returns new text to show, if any.
    fn event(&mut self, event: &str, data: &str) -> Result<Option<String>, WireError>;
    /// The whole answer, once the stream has ended.
    fn finish(self: Box<Self>) -> Result<ChatResponse, WireError>;
}

/// Helpers shared by the wire formats' tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::super::types::{Message, ToolCallRequest, ToolResultMessage};
    use super::*;

    /// A tool call.
    pub fn call(id: &str, name: &str, arguments: &str) -> ToolCallRequest {
        ToolCallRequest {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    /// A tool result message.
    pub fn result(id: &str, name: &str, content: &str, is_error: bool) -> Message {
        Message::ToolResult(ToolResultMessage {
            call_id: id.into(),
            name: name.into(),
            content: content.into(),
            is_error,
        })
    }

    /// Streams `(event, data)` pairs through a decoder: the text it showed,
    /// and the assembled answer (or the first error).
    pub fn feed(
        wire: &dyn Wire,
        events: &[(&str, &str)],
    ) -> (Vec<String>, Result<ChatResponse, WireError>) {
        let mut decoder = wire.decoder();
        let mut shown = Vec::new();
        for (event, data) in events {
            match decoder.event(event, data) {
                Ok(Some(text)) => shown.push(text),
                Ok(None) => {}
                Err(e) => return (shown, Err(e)),
            }
        }
        (shown, decoder.finish())
    }
}
