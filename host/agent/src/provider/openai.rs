//! OpenAI Chat Completions (`POST {base}/chat/completions`), also spoken by
//! OpenAI-compatible servers such as Ollama, vLLM and llama.cpp.

use serde_json::{Map, Value, json};

use super::schema;
use super::types::{ChatRequest, ChatResponse, Message, ToolCallRequest, Usage};
use super::wire::{StreamDecoder, Wire, WireError};

/// The OpenAI Chat Completions wire format.
pub(crate) struct OpenAi;

impl Wire for OpenAi {
    fn url(&self, base_url: &str, _model: &str, _stream: bool) -> String {
        format!("{base_url}/chat/completions")
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("authorization", format!("Bearer {api_key}"))]
    }

    fn body(&self, request: &ChatRequest, model: &str, stream: bool) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = &request.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        for message in &request.messages {
            messages.push(match message {
                Message::User(text) => json!({ "role": "user", "content": text }),
                Message::Assistant { text, tool_calls } => assistant_message(text, tool_calls),
                Message::ToolResult(result) => json!({
                    "role": "tool",
                    "tool_call_id": result.call_id,
                    "content": result.content,
                }),
            });
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools = request.tools.iter().map(|tool| {
                let mut function = json!({ "name": tool.name, "description": tool.description });
                if tool.strict {
                    function["parameters"] = schema::openai_strict(&tool.parameters);
                    function["strict"] = json!(true);
                } else {
                    function["parameters"] = tool.parameters.clone();
                }
                json!({ "type": "function", "function": function })
            });
            body.insert("tools".into(), tools.collect());
        }
        if let Some(max) = request.max_tokens {
            body.insert(max_tokens_field(model).into(), json!(max));
        }
        if stream {
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({ "include_usage": true }));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &Value) -> Result<ChatResponse, WireError> {
        if let Some(error) = body.get("error") {
            return Err(api_error(error));
        }
        let choice = body
            .pointer("/choices/0")
            .ok_or_else(|| missing("response has no choices[0]"))?;
        let message = choice
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| missing("response has no choices[0].message"))?;
        let mut text = content_text(message.get("content"));
        if text.is_empty()
            && let Some(refusal) = message.get("refusal").and_then(Value::as_str)
        {
            text = refusal.to_string();
        }
        let mut tool_calls = Vec::new();
        for (i, call) in array(message.get("tool_calls")).iter().enumerate() {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(&format!("tool_calls[{i}] has no function.name")))?;
            let arguments = match call.pointer("/function/arguments") {
                Some(Value::String(text)) => text.clone(),
                // Some compatible servers send the arguments as an object.
                Some(other @ Value::Object(_)) => other.to_string(),
                _ => "{}".to_string(),
            };
            tool_calls.push(ToolCallRequest {
                id: string_at(call, "id"),
                name: name.to_string(),
                arguments,
            });
        }
        Ok(ChatResponse {
            text,
            tool_calls,
            usage: body.get("usage").map(usage).unwrap_or_default(),
            stop_reason: choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(OpenAiStream::default())
    }
}

/// OpenAI's reasoning models (o1, o3, o4, gpt-5) refuse the deprecated
/// `max_tokens`; Ollama, LM Studio and older servers know only `max_tokens`.
/// No single field works everywhere, so the model name decides.
fn max_tokens_field(model: &str) -> &'static str {
    let reasoning = ["o1", "o3", "o4", "gpt-5"];
    let is_reasoning = reasoning.iter().any(|prefix| {
        model == *prefix
            || model
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(['-', '.']))
    });
    if is_reasoning {
        "max_completion_tokens"
    } else {
        "max_tokens"
    }
}

fn assistant_message(text: &str, tool_calls: &[ToolCallRequest]) -> Value {
    // `content` is null rather than "" next to tool calls, as OpenAI sends it.
    let content = if text.is_empty() {
        Value::Null
    } else {
        json!(text)
    };
    let mut message = json!({ "role": "assistant", "content": content });
    if !tool_calls.is_empty() {
        let calls = tool_calls.iter().map(|call| {
            json!({
                "id": call.id,
                "type": "function",
                "function": { "name": call.name, "arguments": call.arguments },
            })
        });
        message["tool_calls"] = calls.collect();
    }
    message
}

/// `content` as text: a string, or the text parts of a list of parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn usage(usage: &Value) -> Usage {
    let count = |key| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let (prompt, completion) = (count("prompt_tokens"), count("completion_tokens"));
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: usage
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(prompt.saturating_add(completion)),
    }
}

fn api_error(error: &Value) -> WireError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_string);
    WireError(format!("OpenAI returned an error: {message}"))
}

fn missing(what: &str) -> WireError {
    WireError(format!("OpenAI {what}"))
}

fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn string_at(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Streamed chunks: text in `choices[0].delta.content`, tool calls in
/// `delta.tool_calls[]` fragments keyed by `index`, usage in a last chunk
/// with empty `choices`, then `data: [DONE]`.
#[derive(Default)]
struct OpenAiStream {
    text: String,
    /// Calls by stream index, in order of first appearance.
    calls: Vec<(u64, ToolCallRequest)>,
    usage: Usage,
    stop_reason: Option<String>,
    done: bool,
}

impl OpenAiStream {
    fn call_fragment(&mut self, fragment: &Value) {
        let id = fragment.get("id").and_then(Value::as_str).unwrap_or("");
        // A server that omits `index` sends each call whole, or continues
        // the last one; a new id starts a new call.
        let index = match fragment.get("index").and_then(Value::as_u64) {
            Some(index) => index,
            None => match self.calls.last() {
                Some((last, call)) if id.is_empty() || call.id == id => *last,
                Some((last, _)) => last.saturating_add(1),
                None => 0,
            },
        };
        let position = match self.calls.iter().position(|(i, _)| *i == index) {
            Some(position) => position,
            None => {
                let call = ToolCallRequest {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                };
                self.calls.push((index, call));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[position].1;
        if !id.is_empty() {
            call.id = id.to_string();
        }
        if let Some(name) = fragment.pointer("/function/name").and_then(Value::as_str)
            && call.name.is_empty()
        {
            call.name = name.to_string();
        }
        if let Some(piece) = fragment
            .pointer("/function/arguments")
            .and_then(Value::as_str)
        {
            call.arguments.push_str(piece);
        }
    }
}

impl StreamDecoder for OpenAiStream {
    fn event(&mut self, _event: &str, data: &str) -> Result<Option<String>, WireError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        if self.done || data.is_empty() {
            return Ok(None);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| WireError(format!("OpenAI stream sent a chunk that is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error") {
            return Err(api_error(error));
        }
        if let Some(found) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = usage(found);
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(None);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(None);
        };
        for fragment in array(delta.get("tool_calls")) {
            self.call_fragment(fragment);
        }
        let piece = [delta.get("content"), delta.get("refusal")]
            .into_iter()
            .filter_map(|v| v.and_then(Value::as_str))
            .collect::<String>();
        if piece.is_empty() {
            return Ok(None);
        }
        self.text.push_str(&piece);
        Ok(Some(piece))
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, WireError> {
        if !self.done && self.stop_reason.is_none() {
            return Err(missing("stream ended before a finish_reason or [DONE]"));
        }
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(missing(&format!(
                    "stream sent tool call {index} without a function name"
                )));
            }
            tool_calls.push(call);
        }
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            usage: self.usage,
            stop_reason: self.stop_reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::types::ToolDefinition;
    use super::super::wire::testing::call;
    use super::*;

    fn weather_request(strict: bool) -> ChatRequest {
        ChatRequest {
            model: "gpt-4o-mini".into(),
            system: Some("Be brief.".into()),
            messages: vec![
                Message::User("Weather in Paris and Oslo?".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![
                        call("call_a", "current_weather", r#"{"city":"Paris"}"#),
                        call("call_b", "current_weather", r#"{"city":"Oslo"}"#),
                    ],
                },
                result("call_a", "current_weather", "18 C, clear"),
                result("call_b", "current_weather", "7 C, rain"),
            ],
            tools: vec![ToolDefinition {
                name: "current_weather".into(),
                description: "Current weather in a city.".into(),
                parameters: json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {
                        "city": { "type": "string" },
                        "units": { "type": ["string", "null"], "default": "metric" }
                    },
                    "required": ["city"]
                }),
                strict,
            }],
            max_tokens: Some(256),
        }
    }

    fn result(id: &str, name: &str, content: &str) -> Message {
        super::super::wire::testing::result(id, name, content, false)
    }

    fn feed(chunks: &[&str]) -> (Vec<String>, Result<ChatResponse, WireError>) {
        let events: Vec<(&str, &str)> = chunks.iter().map(|c| ("", *c)).collect();
        super::super::wire::testing::feed(&OpenAi, &events)
    }

    #[test]
    fn body_of_parallel_tool_calls_and_results() {
        let request = weather_request(false);
        let body = OpenAi.body(&request, &request.model, false);
        assert_eq!(body["model"], "gpt-4o-mini");
        assert_eq!(body["max_tokens"], 256);
        assert!(body.get("stream").is_none());
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 5);
        assert_eq!(
            messages[0],
            json!({ "role": "system", "content": "Be brief." })
        );
        assert_eq!(messages[2]["content"], Value::Null);
        assert_eq!(
            messages[2]["tool_calls"][1],
            json!({ "id": "call_b", "type": "function",
                    "function": { "name": "current_weather", "arguments": "{\"city\":\"Oslo\"}" } })
        );
        assert_eq!(
            messages[4],
            json!({ "role": "tool", "tool_call_id": "call_b", "content": "7 C, rain" })
        );
        let function = &body["tools"][0]["function"];
        assert!(function.get("strict").is_none());
        assert_eq!(
            function["parameters"]["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
    }

    #[test]
    fn strict_tools_and_streaming_options() {
        let mut request = weather_request(true);
        request.model = "o3-mini".into();
        let body = OpenAi.body(&request, &request.model, true);
        assert_eq!(body["max_completion_tokens"], 256);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"], json!({ "include_usage": true }));
        let function = &body["tools"][0]["function"];
        assert_eq!(function["strict"], true);
        assert_eq!(function["parameters"]["additionalProperties"], false);
        assert_eq!(function["parameters"]["required"], json!(["city", "units"]));
        assert!(function["parameters"].get("$schema").is_none());
        request.tools.clear();
        assert!(
            OpenAi
                .body(&request, &request.model, false)
                .get("tools")
                .is_none()
        );
    }

    #[test]
    fn max_tokens_field_by_model() {
        assert_eq!(max_tokens_field("gpt-4o"), "max_tokens");
        assert_eq!(max_tokens_field("llama3.1:8b"), "max_tokens");
        assert_eq!(max_tokens_field("o1"), "max_completion_tokens");
        assert_eq!(max_tokens_field("o4-mini"), "max_completion_tokens");
        assert_eq!(max_tokens_field("gpt-5.1"), "max_completion_tokens");
        assert_eq!(max_tokens_field("o1x"), "max_tokens");
    }

    #[test]
    fn parses_tool_call_response() {
        let body = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant", "content": null, "refusal": null,
                    "tool_calls": [
                        { "id": "call_a", "type": "function",
                          "function": { "name": "current_weather", "arguments": "{\"city\":\"Paris\"}" } },
                        { "id": "call_b", "type": "function",
                          "function": { "name": "current_weather", "arguments": "{\"city\":\"Oslo\"}" } }
                    ]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": { "prompt_tokens": 82, "completion_tokens": 40, "total_tokens": 122 }
        });
        let answer = OpenAi.parse(&body).unwrap();
        assert_eq!(answer.text, "");
        assert_eq!(answer.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            answer.tool_calls[1],
            call("call_b", "current_weather", r#"{"city":"Oslo"}"#)
        );
        assert_eq!(answer.usage.total_tokens, 122);
    }

    #[test]
    fn parses_text_response_with_usage() {
        let body = json!({
            "choices": [{ "index": 0, "finish_reason": "stop",
                          "message": { "role": "assistant", "content": "Hello there!" } }],
            "usage": { "prompt_tokens": 9, "completion_tokens": 3 }
        });
        let answer = OpenAi.parse(&body).unwrap();
        assert_eq!(answer.text, "Hello there!");
        assert!(answer.tool_calls.is_empty());
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 9,
                completion_tokens: 3,
                total_tokens: 12
            }
        );
    }

    #[test]
    fn streamed_text_answer() {
        let (shown, answer) = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
            "[DONE]",
        ]);
        assert_eq!(shown, ["Hello", " world"]);
        let answer = answer.unwrap();
        assert_eq!(answer.text, "Hello world");
        assert_eq!(answer.stop_reason.as_deref(), Some("stop"));
        assert_eq!(answer.usage.total_tokens, 7);
    }

    #[test]
    fn streamed_parallel_tool_calls_in_fragments() {
        let (shown, answer) = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"current_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"current_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\":\"Oslo\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        assert!(shown.is_empty());
        let answer = answer.unwrap();
        assert_eq!(
            answer.tool_calls,
            [
                call("call_a", "current_weather", r#"{"city":"Paris"}"#),
                call("call_b", "current_weather", r#"{"city":"Oslo"}"#)
            ]
        );
        assert_eq!(answer.usage, Usage::default());
    }

    #[test]
    fn malformed_input_is_an_error() {
        let no_choices = OpenAi.parse(&json!({ "choices": [] })).unwrap_err();
        assert_eq!(no_choices.0, "OpenAI response has no choices[0]");
        let no_message = OpenAi
            .parse(&json!({ "choices": [{ "index": 0 }] }))
            .unwrap_err();
        assert_eq!(no_message.0, "OpenAI response has no choices[0].message");
        let nameless = json!({ "choices": [{ "message": { "tool_calls": [{ "id": "x" }] } }] });
        assert_eq!(
            OpenAi.parse(&nameless).unwrap_err().0,
            "OpenAI tool_calls[0] has no function.name"
        );
        let error = json!({ "error": { "message": "Rate limit reached", "type": "requests" } });
        assert_eq!(
            OpenAi.parse(&error).unwrap_err().0,
            "OpenAI returned an error: Rate limit reached"
        );
        assert!(OpenAi.parse(&json!("nonsense")).is_err());

        let (_, bad_json) = feed(&["{not json"]);
        assert!(
            bad_json
                .unwrap_err()
                .0
                .starts_with("OpenAI stream sent a chunk that is not JSON")
        );
        let (_, streamed_error) = feed(&[r#"{"error":{"message":"overloaded"}}"#]);
        assert_eq!(
            streamed_error.unwrap_err().0,
            "OpenAI returned an error: overloaded"
        );
        let (_, cut) = feed(&[r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#]);
        assert_eq!(
            cut.unwrap_err().0,
            "OpenAI stream ended before a finish_reason or [DONE]"
        );
        let (_, nameless) = feed(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            nameless.unwrap_err().0,
            "OpenAI stream sent tool call 0 without a function name"
        );
    }
}
