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
mod tests {
    use super::super::types::ToolDefinition;
    use super::super::wire::testing::{call, feed as feed_with};
    use super::*;

    fn result(id: &str, content: &str, is_error: bool) -> Message {
        super::super::wire::testing::result(id, "current_weather", content, is_error)
    }

    fn feed(events: &[(&str, &str)]) -> (Vec<String>, Result<ChatResponse, WireError>) {
        feed_with(&Anthropic, events)
    }

    #[test]
    fn body_of_parallel_tool_calls_and_results() {
        let request = ChatRequest {
            model: "claude-sonnet-4-5".into(),
            system: Some("Be brief.".into()),
            messages: vec![
                Message::User("Weather in Paris and Oslo?".into()),
                Message::Assistant {
                    text: "Checking both.".into(),
                    tool_calls: vec![
                        call("toolu_01A", "current_weather", r#"{"city":"Paris"}"#),
                        call("toolu_01B", "current_weather", "{not json"),
                    ],
                },
                result("toolu_01A", "18 C, clear", false),
                result("toolu_01B", "invalid arguments", true),
                Message::User("And in Rome?".into()),
            ],
            tools: vec![ToolDefinition {
                name: "current_weather".into(),
                description: "Current weather in a city.".into(),
                parameters: json!({ "type": "object", "properties": { "city": { "type": "string" } } }),
                strict: true,
            }],
            max_tokens: None,
        };
        let body = Anthropic.body(&request, &request.model, true);
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["system"], "Be brief.");
        assert_eq!(body["stream"], true);
        assert_eq!(
            body["tools"][0]["input_schema"]["properties"]["city"]["type"],
            "string"
        );
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages.len(),
            3,
            "results and the next question share one user turn"
        );
        assert_eq!(
            messages[1],
            json!({ "role": "assistant", "content": [
                { "type": "text", "text": "Checking both." },
                { "type": "tool_use", "id": "toolu_01A", "name": "current_weather", "input": { "city": "Paris" } },
                { "type": "tool_use", "id": "toolu_01B", "name": "current_weather", "input": {} }
            ] })
        );
        assert_eq!(
            messages[2],
            json!({ "role": "user", "content": [
                { "type": "tool_result", "tool_use_id": "toolu_01A", "content": "18 C, clear", "is_error": false },
                { "type": "tool_result", "tool_use_id": "toolu_01B", "content": "invalid arguments", "is_error": true },
                { "type": "text", "text": "And in Rome?" }
            ] })
        );
        assert_eq!(
            Anthropic.auth_headers("k"),
            [
                ("x-api-key", "k".to_string()),
                ("anthropic-version", "2023-06-01".to_string())
            ]
        );
    }

    #[test]
    fn parses_tool_call_response() {
        let body = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                { "type": "text", "text": "I'll check the weather." },
                { "type": "tool_use", "id": "toolu_01A", "name": "current_weather", "input": { "city": "Paris" } }
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": { "input_tokens": 472, "output_tokens": 65 }
        });
        let answer = Anthropic.parse(&body).unwrap();
        assert_eq!(answer.text, "I'll check the weather.");
        assert_eq!(
            answer.tool_calls,
            [call("toolu_01A", "current_weather", r#"{"city":"Paris"}"#)]
        );
        assert_eq!(answer.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 472,
                completion_tokens: 65,
                total_tokens: 537
            }
        );
    }

    #[test]
    fn parses_text_response_with_usage() {
        let body = json!({
            "type": "message", "role": "assistant",
            "content": [{ "type": "text", "text": "Hi! " }, { "type": "text", "text": "How can I help?" }],
            "stop_reason": "end_turn",
            "usage": { "input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 8 }
        });
        let answer = Anthropic.parse(&body).unwrap();
        assert_eq!(answer.text, "Hi! How can I help?");
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 15,
                completion_tokens: 8,
                total_tokens: 23
            }
        );
    }

    const START: (&str, &str) = (
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#,
    );

    #[test]
    fn streamed_text_answer() {
        let (shown, answer) = feed(&[
            START,
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            ),
            ("ping", r#"{"type": "ping"}"#),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}"#,
            ),
            (
                "content_block_stop",
                r#"{"type":"content_block_stop","index":0}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
            ),
            ("message_stop", r#"{"type":"message_stop"}"#),
        ]);
        assert_eq!(shown, ["Hello", "!"]);
        let answer = answer.unwrap();
        assert_eq!(answer.text, "Hello!");
        assert_eq!(answer.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 25,
                completion_tokens: 15,
                total_tokens: 40
            }
        );
    }

    #[test]
    fn streamed_parallel_tool_calls_in_fragments() {
        let delta = |index: u32, json: &str| {
            let delta = json!({ "type": "input_json_delta", "partial_json": json });
            json!({ "type": "content_block_delta", "index": index, "delta": delta }).to_string()
        };
        let start = |index: u32, id: &str, name: &str| {
            let block = json!({ "type": "tool_use", "id": id, "name": name, "input": {} });
            json!({ "type": "content_block_start", "index": index, "content_block": block })
                .to_string()
        };
        let events = [
            start(0, "toolu_01A", "current_weather"),
            delta(0, ""),
            delta(0, r#"{"city": "Pa"#),
            delta(0, r#"ris"}"#),
            start(1, "toolu_01B", "list_dir"),
            r#"{"type":"content_block_stop","index":1}"#.to_string(),
        ];
        let mut all = vec![START];
        all.extend(events.iter().map(|data| ("", data.as_str())));
        all.push(("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":40}}"#));
        all.push(("message_stop", r#"{"type":"message_stop"}"#));
        let (shown, answer) = feed(&all);
        assert!(shown.is_empty());
        let answer = answer.unwrap();
        assert_eq!(
            answer.tool_calls,
            [
                call("toolu_01A", "current_weather", r#"{"city": "Paris"}"#),
                call("toolu_01B", "list_dir", "{}")
            ]
        );
        assert_eq!(answer.stop_reason.as_deref(), Some("tool_use"));
    }

    #[test]
    fn malformed_input_is_an_error() {
        let no_content = Anthropic.parse(&json!({ "type": "message" })).unwrap_err();
        assert_eq!(no_content.0, "Anthropic response has no content array");
        let nameless = json!({ "content": [{ "type": "tool_use", "id": "t", "input": {} }] });
        assert_eq!(
            Anthropic.parse(&nameless).unwrap_err().0,
            "Anthropic tool_use block 0 has no name"
        );
        let error = json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } });
        let expected = "Anthropic returned an error (overloaded_error): Overloaded";
        assert_eq!(Anthropic.parse(&error).unwrap_err().0, expected);
        assert_eq!(
            feed(&[START, ("error", &error.to_string())])
                .1
                .unwrap_err()
                .0,
            expected
        );

        assert!(
            feed(&[("message_start", "{oops")])
                .1
                .unwrap_err()
                .0
                .contains("not JSON")
        );
        assert_eq!(
            feed(&[]).1.unwrap_err().0,
            "Anthropic stream ended before message_start"
        );
        assert_eq!(
            feed(&[START]).1.unwrap_err().0,
            "Anthropic stream ended before message_stop"
        );
        let orphan = r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{"}}"#;
        let expected = "Anthropic stream sent a delta for block 3 before it started";
        assert_eq!(
            feed(&[START, ("content_block_delta", orphan)])
                .1
                .unwrap_err()
                .0,
            expected
        );
    }
}
