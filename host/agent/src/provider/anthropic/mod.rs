//! Anthropic Messages (`POST {base}/v1/messages`).

use serde_json::{Map, Value, json};

use super::types::{ChatRequest, ChatResponse, Message, ToolCallRequest, Usage};
use super::wire::{StreamDecoder, Wire, WireError, arguments_object};

/// The API version this format follows, sent on every request.
const API_VERSION: &str = "2023-06-01";

/// The Messages API requires `max_tokens`; used when the request has none.
const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The Anthropic Messages wire format.
pub(crate) struct Anthropic;

impl Wire for Anthropic {
    fn url(&self, base_url: &str, _model: &str, _stream: bool) -> String {
        format!("{base_url}/v1/messages")
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![
            ("x-api-key", api_key.to_string()),
            ("anthropic-version", API_VERSION.to_string()),
        ]
    }

    fn body(&self, request: &ChatRequest, model: &str, stream: bool) -> Value {
        // Roles must alternate, and all results of one turn's tool calls go
        // back in one user message: consecutive same-role blocks are merged.
        let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
        for message in &request.messages {
            let (role, blocks) = match message {
                Message::User(text) => ("user", vec![json!({ "type": "text", "text": text })]),
                Message::Assistant { text, tool_calls } => {
                    // Empty text blocks are refused.
                    let text =
                        (!text.trim().is_empty()).then(|| json!({ "type": "text", "text": text }));
                    let calls = tool_calls.iter().map(|call| {
                        json!({
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.name,
                            "input": arguments_object(&call.arguments),
                        })
                    });
                    ("assistant", text.into_iter().chain(calls).collect())
                }
                Message::ToolResult(result) => (
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": result.call_id,
                        "content": result.content,
                        "is_error": result.is_error,
                    })],
                ),
            };
            match turns.last_mut() {
                _ if blocks.is_empty() => {}
                Some((last, existing)) if *last == role => existing.extend(blocks),
                _ => turns.push((role, blocks)),
            }
        }
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|(role, content)| json!({ "role": role, "content": content }))
            .collect();

        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body.insert(
            "max_tokens".into(),
            json!(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        if let Some(system) = &request.system {
            body.insert("system".into(), json!(system));
        }
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request.tools.iter().map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            });
            body.insert("tools".into(), tools.collect());
        }
        if stream {
            body.insert("stream".into(), json!(true));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &Value) -> Result<ChatResponse, WireError> {
        if let Some(error) = body.get("error") {
            return Err(api_error(error));
        }
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| missing("response has no content array"))?;
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for (i, block) in content.iter().enumerate() {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => text.push_str(str_at(block, "text")),
                Some("tool_use") => {
                    let name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| missing(&format!("tool_use block {i} has no name")))?;
                    tool_calls.push(ToolCallRequest {
                        id: str_at(block, "id").to_string(),
                        name: name.to_string(),
                        arguments: block.get("input").map_or("{}".into(), Value::to_string),
                    });
                }
                _ => {} // thinking and other blocks carry nothing to show
            }
        }
        let mut usage = Usage::default();
        if let Some(found) = body.get("usage") {
            add_usage(&mut usage, found);
        }
        Ok(ChatResponse {
            text,
            tool_calls,
            usage: total(usage),
            stop_reason: body
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(AnthropicStream::default())
    }
}

/// Reads counts that may come in pieces (`message_start`, then
/// `message_delta`); a later count replaces an earlier one. Cache reads and
/// writes are prompt tokens too, billed apart.
fn add_usage(usage: &mut Usage, found: &Value) {
    let count = |key: &str| found.get(key).and_then(Value::as_u64);
    let input = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ];
    if input.iter().any(|key| count(key).is_some()) {
        usage.prompt_tokens = input
            .iter()
            .filter_map(|key| count(key))
            .fold(0u64, u64::saturating_add);
    }
    if let Some(output) = count("output_tokens") {
        usage.completion_tokens = output;
    }
}

fn total(usage: Usage) -> Usage {
    Usage {
        total_tokens: usage.prompt_tokens.saturating_add(usage.completion_tokens),
        ..usage
    }
}

fn api_error(error: &Value) -> WireError {
    let kind = str_at(error, "type");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_string);
    WireError(format!("Anthropic returned an error ({kind}): {message}"))
}

fn missing(what: &str) -> WireError {
    WireError(format!("Anthropic {what}"))
}

fn str_at<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// One content block of a streamed message.
enum Block {
    Text,
    Tool {
        id: String,
        name: String,
        json: String,
    },
    Other,
}

/// Streamed events: `message_start`, then per block `content_block_start`,
/// `content_block_delta`s and `content_block_stop`, then `message_delta`
/// (stop reason, output tokens) and `message_stop`; `ping` anywhere.
#[derive(Default)]
struct AnthropicStream {
    text: String,
    /// Blocks by their `index`, in order of arrival.
    blocks: Vec<(u64, Block)>,
    usage: Usage,
    stop_reason: Option<String>,
    started: bool,
    stopped: bool,
}

impl AnthropicStream {
    fn block(&mut self, event: &Value) -> Result<&mut Block, WireError> {
        let index = event
            .get("index")
            .and_then(Value::as_u64)
            .ok_or_else(|| missing("stream sent a content block event without an index"))?;
        self.blocks
            .iter_mut()
            .find(|(i, _)| *i == index)
            .map(|(_, block)| block)
            .ok_or_else(|| {
                missing(&format!(
                    "stream sent a delta for block {index} before it started"
                ))
            })
    }
}

impl StreamDecoder for AnthropicStream {
    fn event(&mut self, event: &str, data: &str) -> Result<Option<String>, WireError> {
        if data.trim().is_empty() {
            return Ok(None);
        }
        let payload: Value = serde_json::from_str(data).map_err(|e| {
            WireError(format!(
                "Anthropic stream sent a {event:?} event that is not JSON: {e}"
            ))
        })?;
        // The `type` field repeats the event name; either may be missing.
        let kind = payload.get("type").and_then(Value::as_str).unwrap_or(event);
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(found) = payload.pointer("/message/usage") {
                    add_usage(&mut self.usage, found);
                }
            }
            "content_block_start" => {
                let index = payload
                    .get("index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| missing("stream sent content_block_start without an index"))?;
                let start = payload.get("content_block").unwrap_or(&Value::Null);
                let (block, text) = match start.get("type").and_then(Value::as_str) {
                    Some("text") => (Block::Text, str_at(start, "text")),
                    Some("tool_use") => {
                        let block = Block::Tool {
                            id: str_at(start, "id").to_string(),
                            name: str_at(start, "name").to_string(),
                            json: String::new(),
                        };
                        (block, "")
                    }
                    _ => (Block::Other, ""),
                };
                self.blocks.push((index, block));
                if !text.is_empty() {
                    self.text.push_str(text);
                    return Ok(Some(text.to_string()));
                }
            }
            "content_block_delta" => {
                let delta = payload.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = str_at(delta, "text").to_string();
                        self.text.push_str(&text);
                        return Ok((!text.is_empty()).then_some(text));
                    }
                    Some("input_json_delta") => match self.block(&payload)? {
                        Block::Tool { json, .. } => json.push_str(str_at(delta, "partial_json")),
                        _ => {
                            return Err(missing(
                                "stream sent input_json_delta for a block that is not tool_use",
                            ));
                        }
                    },
                    _ => {} // thinking, signature and citation deltas
                }
            }
            "message_delta" => {
                if let Some(reason) = payload
                    .pointer("/delta/stop_reason")
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(found) = payload.get("usage") {
                    add_usage(&mut self.usage, found);
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                return Err(api_error(payload.get("error").unwrap_or(&payload)));
            }
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(None)
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, WireError> {
        if !self.started {
            return Err(missing("stream ended before message_start"));
        }
        if !self.stopped && self.stop_reason.is_none() {
            return Err(missing("stream ended before message_stop"));
        }
        let mut tool_calls = Vec::new();
        for (index, block) in self.blocks {
            let Block::Tool { id, name, json } = block else {
                continue;
            };
            if name.is_empty() {
                return Err(missing(&format!(
                    "stream sent tool_use block {index} without a name"
                )));
            }
            tool_calls.push(ToolCallRequest {
                id,
                name,
                // A tool called without arguments streams no JSON at all.
                arguments: if json.is_empty() { "{}".into() } else { json },
            });
        }
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            usage: total(self.usage),
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests;
