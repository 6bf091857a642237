//! Unit tests of the parent module.

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
        json!({ "type": "content_block_start", "index": index, "content_block": block }).to_string()
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
