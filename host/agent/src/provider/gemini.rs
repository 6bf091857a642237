//! Gemini API (`generativelanguage` v1beta `generateContent` and
//! `streamGenerateContent`).

use serde_json::{Map, Value, json};

use super::schema;
use super::types::{ChatRequest, ChatResponse, Message, ToolCallRequest, Usage};
use super::wire::{StreamDecoder, Wire, WireError, arguments_object};

/// Gemini 3 refuses a replayed function call without the thought signature
/// it came with, and [`ToolCallRequest`] has no place to keep one. Google's
/// thought-signature guide documents this value for function calls the
/// model did not produce itself: it skips the check (at some cost to the
/// model's reasoning across steps). Older models ignore it.
const UNKNOWN_SIGNATURE: &str = "skip_thought_signature_validator";

/// The Gemini wire format.
pub(crate) struct Gemini;

impl Wire for Gemini {
    fn url(&self, base_url: &str, model: &str, stream: bool) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        if stream {
            format!("{base_url}/v1beta/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{base_url}/v1beta/models/{model}:generateContent")
        }
    }

    fn auth_headers(&self, api_key: &str) -> Vec<(&'static str, String)> {
        vec![("x-goog-api-key", api_key.to_string())]
    }

    fn body(&self, request: &ChatRequest, _model: &str, _stream: bool) -> Value {
        let mut contents: Vec<Value> = Vec::new();
        let mut after_result = false;
        for message in &request.messages {
            match message {
                Message::User(text) => {
                    let part = json!({ "text": text });
                    // Roles must alternate: a prompt right after tool results
                    // (a run stopped early) joins their user content.
                    match contents.last_mut() {
                        Some(last) if last["role"] == "user" => {
                            if let Some(parts) = last["parts"].as_array_mut() {
                                parts.push(part);
                            }
                        }
                        _ => contents.push(json!({ "role": "user", "parts": [part] })),
                    }
                }
                Message::Assistant { text, tool_calls } => {
                    let mut parts = Vec::new();
                    if !text.is_empty() {
                        parts.push(json!({ "text": text }));
                    }
                    for (i, call) in tool_calls.iter().enumerate() {
                        let mut function_call = json!({
                            "name": call.name,
                            "args": arguments_object(&call.arguments),
                        });
                        if !call.id.is_empty() {
                            function_call["id"] = json!(call.id);
                        }
                        let mut part = json!({ "functionCall": function_call });
                        // Only the first call of a step carries a signature.
                        if i == 0 {
                            part["thoughtSignature"] = json!(UNKNOWN_SIGNATURE);
                        }
                        parts.push(part);
                    }
                    // A content without parts is refused.
                    if !parts.is_empty() {
                        contents.push(json!({ "role": "model", "parts": parts }));
                    }
                }
                Message::ToolResult(result) => {
                    let key = if result.is_error { "error" } else { "output" };
                    let mut response = json!({
                        "name": result.name,
                        "response": { key: result.content },
                    });
                    if !result.call_id.is_empty() {
                        response["id"] = json!(result.call_id);
                    }
                    let part = json!({ "functionResponse": response });
                    // All results of one step answer it in a single content.
                    match contents.last_mut().and_then(|c| c["parts"].as_array_mut()) {
                        Some(parts) if after_result => parts.push(part),
                        _ => contents.push(json!({ "role": "user", "parts": [part] })),
                    }
                }
            }
            after_result = matches!(message, Message::ToolResult(_));
        }

        let mut body = Map::new();
        if let Some(system) = &request.system {
            body.insert(
                "systemInstruction".into(),
                json!({ "parts": [{ "text": system }] }),
            );
        }
        body.insert("contents".into(), Value::Array(contents));
        if !request.tools.is_empty() {
            let declarations = request.tools.iter().map(|tool| {
                let mut declaration = json!({ "name": tool.name, "description": tool.description });
                let parameters = schema::gemini(&tool.parameters);
                // An object without properties is refused: a tool without
                // arguments declares no parameters at all.
                if parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| !p.is_empty())
                {
                    declaration["parameters"] = parameters;
                }
                declaration
            });
            body.insert(
                "tools".into(),
                json!([{ "functionDeclarations": declarations.collect::<Vec<_>>() }]),
            );
        }
        if let Some(max) = request.max_tokens {
            body.insert("generationConfig".into(), json!({ "maxOutputTokens": max }));
        }
        Value::Object(body)
    }

    fn parse(&self, body: &Value) -> Result<ChatResponse, WireError> {
        let mut answer = Answer::default();
        answer.read(body, false)?;
        Ok(answer.into_response())
    }

    fn decoder(&self) -> Box<dyn StreamDecoder> {
        Box::new(Answer::default())
    }
}

fn missing(what: &str) -> WireError {
    WireError(format!("Gemini {what}"))
}

/// An error object, as a 200 answer or a stream event may carry one (alone
/// or, from some endpoints, wrapped in a one-element array).
fn api_error(body: &Value) -> Option<WireError> {
    let error = body.get("error").or_else(|| body.pointer("/0/error"))?;
    let status = error
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("error");
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(|| error.to_string(), str::to_string);
    Some(WireError(format!(
        "Gemini returned an error ({status}): {message}"
    )))
}

/// A whole answer, or a streamed one assembled chunk by chunk: every SSE
/// event is a complete `GenerateContentResponse` holding the next piece.
#[derive(Default)]
struct Answer {
    text: String,
    tool_calls: Vec<ToolCallRequest>,
    usage: Usage,
    stop_reason: Option<String>,
    /// Responses with a candidate read so far.
    chunks: usize,
}

impl Answer {
    /// Adds one response; returns the new text. With `streamed`, a chunk
    /// without candidates (usage only) is fine.
    fn read(&mut self, body: &Value, streamed: bool) -> Result<String, WireError> {
        if let Some(error) = api_error(body) {
            return Err(error);
        }
        if let Some(reason) = body
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            return Err(missing(&format!("blocked the prompt ({reason})")));
        }
        if let Some(usage) = body.get("usageMetadata") {
            self.usage = read_usage(usage); // cumulative: the last one wins
        }
        let Some(candidate) = body.pointer("/candidates/0") else {
            if streamed {
                return Ok(String::new());
            }
            return Err(missing("response has no candidates"));
        };
        self.chunks += 1;
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_string());
        }
        // A candidate stopped for safety may have no content at all.
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array);
        let mut new_text = String::new();
        for (i, part) in parts.into_iter().flatten().enumerate() {
            if let Some(call) = part.get("functionCall") {
                let name = call
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| missing(&format!("functionCall in part {i} has no name")))?;
                self.tool_calls.push(ToolCallRequest {
                    // Ids are optional; an empty one is assigned by the agent.
                    id: call
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    name: name.to_string(),
                    arguments: call.get("args").map_or("{}".into(), Value::to_string),
                });
            } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                // Thought summaries are not part of the answer.
                if part.get("thought") != Some(&Value::Bool(true)) {
                    new_text.push_str(text);
                }
            }
        }
        self.text.push_str(&new_text);
        Ok(new_text)
    }

    fn into_response(self) -> ChatResponse {
        ChatResponse {
            text: self.text,
            tool_calls: self.tool_calls,
            usage: self.usage,
            stop_reason: self.stop_reason,
        }
    }
}

/// Thinking tokens are generated and billed as output, so they count as
/// completion tokens.
fn read_usage(usage: &Value) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("promptTokenCount");
    let completion = count("candidatesTokenCount") + count("thoughtsTokenCount");
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: usage
            .get("totalTokenCount")
            .and_then(Value::as_u64)
            .unwrap_or(prompt.saturating_add(completion)),
    }
}

impl StreamDecoder for Answer {
    fn event(&mut self, _event: &str, data: &str) -> Result<Option<String>, WireError> {
        if data.trim().is_empty() {
            return Ok(None);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| WireError(format!("Gemini stream sent a chunk that is not JSON: {e}")))?;
        let text = self.read(&chunk, true)?;
        Ok((!text.is_empty()).then_some(text))
    }

    fn finish(self: Box<Self>) -> Result<ChatResponse, WireError> {
        if self.chunks == 0 {
            return Err(missing("stream ended without a candidate"));
        }
        if self.stop_reason.is_none() {
            return Err(missing("stream ended before a finishReason"));
        }
        Ok(self.into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::super::types::ToolDefinition;
    use super::super::wire::testing::call;
    use super::*;

    fn result(id: &str, content: &str, is_error: bool) -> Message {
        super::super::wire::testing::result(id, "current_weather", content, is_error)
    }

    fn feed(chunks: &[&str]) -> (Vec<String>, Result<ChatResponse, WireError>) {
        let events: Vec<(&str, &str)> = chunks.iter().map(|c| ("", *c)).collect();
        super::super::wire::testing::feed(&Gemini, &events)
    }

    #[test]
    fn urls_and_auth() {
        let base = "https://generativelanguage.googleapis.com";
        assert_eq!(
            Gemini.url(base, "gemini-2.5-flash", false),
            format!("{base}/v1beta/models/gemini-2.5-flash:generateContent")
        );
        assert_eq!(
            Gemini.url(base, "models/gemini-2.5-flash", true),
            format!("{base}/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
        );
        assert_eq!(
            Gemini.auth_headers("k"),
            [("x-goog-api-key", "k".to_string())]
        );
    }

    #[test]
    fn a_prompt_after_tool_results_joins_their_user_content() {
        let request = ChatRequest {
            messages: vec![
                Message::User("go".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![call("", "now", "{}")],
                },
                result("", "12:00", false),
                Message::User("and now?".into()),
            ],
            ..ChatRequest::default()
        };
        let body = Gemini.body(&request, &request.model, false);
        let roles: Vec<&str> = body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "model", "user"]);
        assert_eq!(body["contents"][2]["parts"][1]["text"], "and now?");
    }

    #[test]
    fn body_of_parallel_tool_calls_and_results() {
        let request = ChatRequest {
            model: "gemini-2.5-flash".into(),
            system: Some("Be brief.".into()),
            messages: vec![
                Message::User("Weather in Paris and Oslo?".into()),
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![
                        call("", "current_weather", r#"{"city":"Paris"}"#),
                        call("", "current_weather", r#"{"city":"Oslo"}"#),
                    ],
                },
                result("", "18 C, clear", false),
                result("", "no such city", true),
                Message::Assistant {
                    text: "Paris: 18 C.".into(),
                    tool_calls: vec![],
                },
            ],
            tools: vec![
                ToolDefinition {
                    name: "current_weather".into(),
                    description: "Current weather in a city.".into(),
                    parameters: json!({
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "type": "object", "additionalProperties": false,
                        "properties": { "city": { "type": "string" }, "days": { "type": ["integer", "null"], "format": "uint8" } },
                        "required": ["city"]
                    }),
                    strict: false,
                },
                ToolDefinition {
                    name: "now".into(),
                    description: "The time.".into(),
                    parameters: json!({ "type": "object", "properties": {} }),
                    strict: false,
                },
            ],
            max_tokens: Some(512),
        };
        let body = Gemini.body(&request, &request.model, false);
        assert_eq!(
            body["systemInstruction"],
            json!({ "parts": [{ "text": "Be brief." }] })
        );
        assert_eq!(body["generationConfig"], json!({ "maxOutputTokens": 512 }));
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 4);
        assert_eq!(
            contents[1],
            json!({ "role": "model", "parts": [
                { "functionCall": { "name": "current_weather", "args": { "city": "Paris" } },
                  "thoughtSignature": UNKNOWN_SIGNATURE },
                { "functionCall": { "name": "current_weather", "args": { "city": "Oslo" } } }
            ] })
        );
        assert_eq!(
            contents[2],
            json!({ "role": "user", "parts": [
                { "functionResponse": { "name": "current_weather", "response": { "output": "18 C, clear" } } },
                { "functionResponse": { "name": "current_weather", "response": { "error": "no such city" } } }
            ] })
        );
        assert_eq!(
            contents[3],
            json!({ "role": "model", "parts": [{ "text": "Paris: 18 C." }] })
        );
        let declarations = &body["tools"][0]["functionDeclarations"];
        assert_eq!(
            declarations[0]["parameters"],
            json!({ "type": "object", "required": ["city"], "properties": {
                "city": { "type": "string" }, "days": { "type": "integer", "nullable": true } } })
        );
        assert_eq!(
            declarations[1],
            json!({ "name": "now", "description": "The time." })
        );
    }

    #[test]
    fn ids_are_echoed_when_known() {
        let request = ChatRequest {
            messages: vec![
                Message::Assistant {
                    text: String::new(),
                    tool_calls: vec![call("fc_1", "now", "")],
                },
                result("fc_1", "noon", false),
            ],
            ..ChatRequest::default()
        };
        let body = Gemini.body(&request, &request.model, true);
        assert_eq!(
            body["contents"][0]["parts"][0]["functionCall"],
            json!({ "name": "now", "args": {}, "id": "fc_1" })
        );
        assert_eq!(
            body["contents"][1]["parts"][0]["functionResponse"]["id"],
            "fc_1"
        );
        assert!(body.get("tools").is_none() && body.get("generationConfig").is_none());
    }

    #[test]
    fn parses_tool_call_response() {
        let body = json!({
            "candidates": [{
                "content": { "role": "model", "parts": [
                    { "functionCall": { "name": "find_theaters", "args": { "location": "Mountain View, CA", "movie": "Barbie" } },
                      "thoughtSignature": "CiQBcsjafE=" },
                    { "functionCall": { "id": "fc_2", "name": "current_weather", "args": { "city": "Mountain View" } } }
                ] },
                "finishReason": "STOP", "index": 0
            }],
            "usageMetadata": { "promptTokenCount": 90, "candidatesTokenCount": 22, "thoughtsTokenCount": 8, "totalTokenCount": 120 }
        });
        let answer = Gemini.parse(&body).unwrap();
        assert_eq!(
            answer.tool_calls,
            [
                call(
                    "",
                    "find_theaters",
                    r#"{"location":"Mountain View, CA","movie":"Barbie"}"#
                ),
                call("fc_2", "current_weather", r#"{"city":"Mountain View"}"#)
            ]
        );
        assert_eq!(answer.stop_reason.as_deref(), Some("STOP"));
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 90,
                completion_tokens: 30,
                total_tokens: 120
            }
        );
    }

    #[test]
    fn parses_text_response_with_usage() {
        let body = json!({
            "candidates": [{ "content": { "role": "model", "parts": [
                { "text": "Weighing the options", "thought": true },
                { "text": "Once upon a time, " }, { "text": "a magic backpack." }
            ] }, "finishReason": "STOP" }],
            "usageMetadata": { "promptTokenCount": 8, "candidatesTokenCount": 10 },
            "modelVersion": "gemini-2.5-flash"
        });
        let answer = Gemini.parse(&body).unwrap();
        assert_eq!(answer.text, "Once upon a time, a magic backpack.");
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 8,
                completion_tokens: 10,
                total_tokens: 18
            }
        );
    }

    #[test]
    fn streamed_text_answer() {
        let (shown, answer) = feed(&[
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello!"}]}}],"usageMetadata":{"promptTokenCount":1}}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":" How can I help?"}]}}]}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"","thoughtSignature":"AY89a1=="}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":9,"totalTokenCount":10}}"#,
        ]);
        assert_eq!(shown, ["Hello!", " How can I help?"]);
        let answer = answer.unwrap();
        assert_eq!(answer.text, "Hello! How can I help?");
        assert_eq!(
            answer.usage,
            Usage {
                prompt_tokens: 1,
                completion_tokens: 9,
                total_tokens: 10
            }
        );
    }

    #[test]
    fn streamed_parallel_tool_calls() {
        let (shown, answer) = feed(&[
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Checking."},{"functionCall":{"name":"current_weather","args":{"city":"Paris"}},"thoughtSignature":"Cq0B"}]}}]}"#,
            r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"current_weather","args":{"city":"Oslo"}}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":20,"totalTokenCount":70}}"#,
        ]);
        assert_eq!(shown, ["Checking."]);
        let answer = answer.unwrap();
        assert_eq!(
            answer.tool_calls,
            [
                call("", "current_weather", r#"{"city":"Paris"}"#),
                call("", "current_weather", r#"{"city":"Oslo"}"#)
            ]
        );
        assert_eq!(answer.usage.total_tokens, 70);
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert_eq!(
            Gemini.parse(&json!({})).unwrap_err().0,
            "Gemini response has no candidates"
        );
        let blocked = json!({ "promptFeedback": { "blockReason": "SAFETY" } });
        assert_eq!(
            Gemini.parse(&blocked).unwrap_err().0,
            "Gemini blocked the prompt (SAFETY)"
        );
        let error = json!({ "error": { "code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT" } });
        let expected = "Gemini returned an error (INVALID_ARGUMENT): API key not valid.";
        assert_eq!(Gemini.parse(&error).unwrap_err().0, expected);
        assert_eq!(Gemini.parse(&json!([error])).unwrap_err().0, expected);
        let nameless = json!({ "candidates": [{ "content": { "parts": [{ "functionCall": { "args": {} } }] } }] });
        assert_eq!(
            Gemini.parse(&nameless).unwrap_err().0,
            "Gemini functionCall in part 0 has no name"
        );

        assert!(
            feed(&["not json"])
                .1
                .unwrap_err()
                .0
                .starts_with("Gemini stream sent a chunk that is not JSON")
        );
        assert_eq!(
            feed(&[&blocked.to_string()]).1.unwrap_err().0,
            "Gemini blocked the prompt (SAFETY)"
        );
        assert_eq!(
            feed(&[]).1.unwrap_err().0,
            "Gemini stream ended without a candidate"
        );
        let cut = r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}]}"#;
        assert_eq!(
            feed(&[cut]).1.unwrap_err().0,
            "Gemini stream ended before a finishReason"
        );
    }
}
