//! Each provider's wire format end to end (requests as sent, answers as
//! documented, streamed and not), provider failures, and strict schemas.

use std::time::Duration;

use serde_json::{Value, json};
use wasm_agent::agent::{Agent, AgentEvent, AgentTool, RunOptions, StopReason};

use crate::agent::{agent, calculator, drain, fixture, messages, model};
use wasm_agent::ToolHost;
use wasm_agent::agent::{AgentError, RunOutput};

/// The strings of a JSON array, sorted (key order differs with serde_json's
/// `preserve_order`, so tests must not depend on it).
fn sorted_strings(array: &Value) -> Vec<&str> {
    let mut strings: Vec<&str> = array
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    strings.sort_unstable();
    strings
}

/// Runs an agent with `host`'s tools on `input` against `server`.
async fn run_with(
    spec: &str,
    server: &ProviderServer,
    host: &ToolHost,
    input: &str,
) -> Result<RunOutput, AgentError> {
    agent(spec, server, host)
        .build()
        .unwrap()
        .run(input, RunOptions::default())
        .await
}

use crate::provider_server::{ProviderServer, Reply, anthropic, gemini, openai};

#[tokio::test]
async fn openai_runs_parallel_calls_and_feeds_results_back() {
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[
            ("call_1", "calculate", r#"{"expression": "2+3"}"#),
            ("call_2", "calculate", r#"{"expression": "6*7"}"#),
        ]),
        openai::text("2+3 is 5 and 6*7 is 42."),
    ])
    .await;
    let host = calculator().await;
    let agent = agent("openai:gpt-4o-mini", &server, &host).build().unwrap();
    let output = agent
        .run("What are 2+3 and 6*7?", RunOptions::default())
        .await
        .unwrap();

    assert_eq!(output.text, "2+3 is 5 and 6*7 is 42.");
    assert_eq!(output.stop_reason, StopReason::Answered);
    assert_eq!(output.roundtrips, 1);
    let contents: Vec<&str> = output
        .tool_calls
        .iter()
        .map(|c| c.content.as_str())
        .collect();
    assert_eq!(contents, ["5", "42"]);
    assert_eq!(output.usage.total_tokens, 198);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        requests[0].body["tools"][0]["function"]["name"],
        "calculate"
    );
    let sent = messages(&server, 1);
    assert_eq!(sent[0]["role"], "system");
    assert_eq!(sent[2]["tool_calls"][1]["id"], "call_2");
    assert_eq!(
        (
            sent[3]["role"].as_str(),
            sent[3]["tool_call_id"].as_str(),
            sent[3]["content"].as_str()
        ),
        (Some("tool"), Some("call_1"), Some("5"))
    );
    assert_eq!(sent[4]["content"], "42");
}

#[tokio::test]
async fn anthropic_streams_text_and_fragmented_tool_input() {
    let server = ProviderServer::start(vec![
        anthropic::stream_tool_uses(&[
            ("toolu_01", "calculate", r#"{"expression": "2+3"}"#),
            ("toolu_02", "calculate", r#"{"expression": "1/0"}"#),
        ]),
        anthropic::stream_text(&["The sum ", "is 5; ", "1/0 failed."]),
    ])
    .await;
    let host = calculator().await;
    let agent = agent("anthropic:claude-sonnet-4-5", &server, &host)
        .build()
        .unwrap();
    let events = agent.stream("2+3 and 1/0", RunOptions::default());
    let mut streamed = String::new();
    let output = drain(events, |event| {
        if let AgentEvent::TextDelta(text) = event {
            streamed.push_str(&text);
        }
    })
    .await;
    assert_eq!(streamed, "The sum is 5; 1/0 failed.");
    assert_eq!(output.text, streamed);
    assert_eq!(output.tool_calls[0].content, "5");
    assert!(!output.tool_calls[1].is_ok());

    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/messages");
    assert_eq!(requests[0].header("x-api-key"), Some("sk-test"));
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(requests[0].body["stream"], true);
    assert_eq!(requests[0].body["system"], "Use the tools.");
    assert_eq!(
        requests[0].body["tools"][0]["input_schema"]["type"],
        "object"
    );
    let sent = messages(&server, 1);
    assert_eq!(sent[1]["content"][0]["type"], "tool_use");
    assert_eq!(sent[1]["content"][0]["input"]["expression"], "2+3");
    let results = &sent[2]["content"];
    assert_eq!(sent[2]["role"], "user");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert_eq!(results[0]["is_error"], false);
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: ")
    );
}

#[tokio::test]
async fn anthropic_and_gemini_answers_without_streaming() {
    let host = calculator().await;
    let server = ProviderServer::start(vec![
        anthropic::tool_uses(
            "Let me compute.",
            &[("toolu_9", "calculate", r#"{"expression": "7*6"}"#)],
        ),
        anthropic::text("42"),
    ])
    .await;
    let output = run_with("anthropic:claude-sonnet-4-5", &server, &host, "7*6?")
        .await
        .unwrap();
    assert_eq!(
        (output.text.as_str(), output.tool_calls[0].content.as_str()),
        ("42", "42")
    );
    assert_eq!(output.usage.prompt_tokens, 472 + 600);
    assert_eq!(server.requests()[0].body["max_tokens"], 4096);

    let server = ProviderServer::start(vec![
        gemini::function_calls(&[
            ("calculate", r#"{"expression": "1+1"}"#),
            ("calculate", r#"{"expression": "2+2"}"#),
        ]),
        gemini::text("Two and four."),
    ])
    .await;
    let agent = agent("gemini:gemini-2.5-flash", &server, &host)
        .build()
        .unwrap();
    let output = agent.run("1+1, 2+2", RunOptions::default()).await.unwrap();
    assert_eq!(output.text, "Two and four.");
    let ids: Vec<&str> = output.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1], "calls without provider ids get unique ids");
    let requests = server.requests();
    let answered: Vec<&str> = requests[1].body["contents"][2]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["functionResponse"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(answered, ids, "each response names the call it answers");
    assert_eq!(
        requests[0].path,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    assert_eq!(requests[0].header("x-goog-api-key"), Some("sk-test"));
    let declaration = &requests[0].body["tools"][0]["functionDeclarations"][0];
    assert_eq!(declaration["name"], "calculate");
    assert!(
        declaration["parameters"].get("$schema").is_none(),
        "converted for Gemini"
    );
    let contents = requests[1].body["contents"].as_array().unwrap().clone();
    let responses = &contents[2]["parts"];
    assert_eq!(responses[0]["functionResponse"]["name"], "calculate");
    assert_eq!(responses[1]["functionResponse"]["response"]["output"], "4");
}

#[tokio::test]
async fn gemini_streams_function_calls() {
    let server = ProviderServer::start(vec![
        gemini::stream_function_calls(&[("calculate", r#"{"expression": "3*3"}"#)]),
        gemini::stream_text(&["It is ", "9."]),
    ])
    .await;
    let host = calculator().await;
    let events = agent("gemini:gemini-2.5-flash", &server, &host)
        .build()
        .unwrap()
        .stream("3*3", RunOptions::default());
    let mut finished = Vec::new();
    let output = drain(events, |event| {
        if let AgentEvent::ToolCallFinished(record) = event {
            finished.push(record.content);
        }
    })
    .await;
    assert_eq!(finished, ["9"]);
    assert_eq!(output.text, "It is 9.");
    assert!(
        server.requests()[0]
            .path
            .ends_with(":streamGenerateContent?alt=sse"),
        "{}",
        server.requests()[0].path
    );
}

#[tokio::test]
async fn openai_streams_interleaved_tool_call_fragments() {
    let server = ProviderServer::start(vec![
        openai::stream_tool_calls(&[
            ("call_a", "calculate", r#"{"expression": "10-4"}"#),
            ("call_b", "calculate", r#"{"expression": "2**10"}"#),
        ]),
        openai::stream_text(&["6 ", "and ", "1024."]),
    ])
    .await;
    let host = calculator().await;
    let events = agent("openai:gpt-4o-mini", &server, &host)
        .build()
        .unwrap()
        .stream("10-4 and 2**10", RunOptions::default());
    let (mut text, mut started) = (String::new(), Vec::new());
    let output = drain(events, |event| match event {
        AgentEvent::TextDelta(delta) => text.push_str(&delta),
        AgentEvent::ToolCallStarted { id, arguments, .. } => started.push((id, arguments)),
        _ => {}
    })
    .await;
    assert_eq!(text, "6 and 1024.");
    started.sort();
    assert_eq!(
        started,
        [
            (
                "call_a".to_string(),
                r#"{"expression": "10-4"}"#.to_string()
            ),
            (
                "call_b".to_string(),
                r#"{"expression": "2**10"}"#.to_string()
            )
        ]
    );
    assert_eq!(output.tool_calls[0].content, "6");
    assert_eq!(output.usage.total_tokens, 198, "usage from the final chunk");
    let first = &server.requests()[0].body;
    assert_eq!(first["stream"], true);
    assert_eq!(first["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn provider_errors_are_clear_and_rate_limits_are_retried() {
    let unauthorized = ProviderServer::start(vec![Reply::Error {
        status: 401,
        retry_after: None,
        body: json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
    }])
    .await;
    let host = calculator().await;
    let error = run_with("openai:m", &unauthorized, &host, "hi")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("401")
            && error.contains("Incorrect API key")
            && error.contains("OPENAI_API_KEY"),
        "{error}"
    );
    assert_eq!(unauthorized.requests().len(), 1, "401 is not retried");

    let limited = ProviderServer::start(vec![
        Reply::Error {
            status: 429,
            retry_after: Some("0"),
            body: json!({"error": {"message": "Rate limit reached"}}),
        },
        Reply::Error {
            status: 503,
            retry_after: None,
            body: json!({"error": {"message": "overloaded"}}),
        },
        openai::text("finally"),
    ])
    .await;
    let output = run_with("openai:m", &limited, &host, "hi").await.unwrap();
    assert_eq!(output.text, "finally");
    assert_eq!(limited.requests().len(), 3);

    let down = ProviderServer::start(vec![]).await;
    let error = run_with("openai:m", &down, &host, "hi")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("500"), "{error}");
    assert_eq!(down.requests().len(), 3, "one attempt and two retries");
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let server = ProviderServer::start(vec![
        Reply::Error {
            status: 429,
            retry_after: Some("1"),
            body: json!({"error": {"message": "Rate limit reached"}}),
        },
        openai::text("later"),
    ])
    .await;
    let agent = Agent::builder("patient")
        .model(model("openai:m", &server))
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let output = agent.run("hi", RunOptions::default()).await.unwrap();
    assert_eq!(output.text, "later");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "waited as asked, not the 10 ms backoff: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn broken_provider_answers_are_errors_not_crashes() {
    let garbage = ProviderServer::start(vec![Reply::Sse(vec![(None, "{not json".into())])]).await;
    let plain = Agent::builder("a")
        .model(model("openai:m", &garbage))
        .build()
        .unwrap();
    let mut events = plain.stream("hi", RunOptions::default());
    let error = loop {
        if let AgentEvent::Done(outcome) = events.next().await.unwrap() {
            break outcome.unwrap_err().to_string();
        }
    };
    assert!(error.contains("unexpected answer"), "{error}");

    // A stream cut after some text: an error, and no retry that would show
    // the text twice.
    let cut = ProviderServer::start(vec![Reply::Sse(vec![(
        None,
        json!({"id": "x", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": null}]})
        .to_string(),
    )])])
    .await;
    let plain = Agent::builder("a")
        .model(model("openai:m", &cut))
        .build()
        .unwrap();
    let mut events = plain.stream("hi", RunOptions::default());
    let mut shown = String::new();
    let outcome = loop {
        match events.next().await.unwrap() {
            AgentEvent::TextDelta(text) => shown.push_str(&text),
            AgentEvent::Done(outcome) => break outcome,
            _ => {}
        }
    };
    assert!(outcome.is_err());
    assert_eq!(shown, "Hel");
    assert_eq!(cut.requests().len(), 1);

    // A model error after a tool ran keeps what the run did.
    let late = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "calculate", r#"{"expression": "1+1"}"#)]),
        Reply::Error {
            status: 400,
            retry_after: None,
            body: json!({"error": {"message": "context length exceeded"}}),
        },
    ])
    .await;
    let host = calculator().await;
    let error = run_with("openai:m", &late, &host, "1+1").await.unwrap_err();
    let partial = error.partial().expect("the run so far");
    assert_eq!(partial.tool_calls[0].content, "2");
    assert!(error.to_string().contains("context length exceeded"));
}

#[tokio::test]
async fn strict_tools_send_openai_structured_output_schemas() {
    let server = ProviderServer::start(vec![openai::text("ok"), anthropic::text("ok")]).await;
    let host = fixture(Duration::from_secs(5)).await;
    let tools = || {
        AgentTool::all_from(&host)
            .into_iter()
            .filter(|t| t.name() == "state_set" || t.name() == "big_output")
            .map(|t| {
                let strict = t.name() == "state_set";
                t.strict(strict)
            })
    };
    let agent = Agent::builder("strict")
        .model(model("openai:m", &server))
        .tools(tools())
        .build()
        .unwrap();
    agent.run("x", RunOptions::default()).await.unwrap();
    let sent = server.requests()[0].body["tools"].clone();
    let strict = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "state_set")
        .unwrap();
    assert_eq!(strict["function"]["strict"], true);
    let parameters = &strict["function"]["parameters"];
    assert_eq!(parameters["additionalProperties"], false);
    assert_eq!(sorted_strings(&parameters["required"]), ["key", "value"]);
    assert!(parameters.get("$schema").is_none());
    let loose = sent
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "big_output")
        .unwrap();
    assert!(loose["function"].get("strict").is_none_or(|s| s == false));

    // Other providers ignore the flag and get the schema as it is.
    let agent = Agent::builder("strict")
        .model(model("anthropic:claude-sonnet-4-5", &server))
        .tools(tools())
        .build()
        .unwrap();
    agent.run("x", RunOptions::default()).await.unwrap();
    let sent = &server.requests()[1].body["tools"];
    assert!(sent[0].get("strict").is_none() && sent[1].get("strict").is_none());
}

#[tokio::test]
async fn strict_calls_may_send_null_for_optional_arguments() {
    // Strict mode makes optional properties required-but-nullable, so models
    // send null for them; the tool must see them as not given.
    let server = ProviderServer::start(vec![
        openai::tool_calls(&[("c1", "search", r#"{"query": "rust", "limit": null}"#)]),
        openai::text("ok"),
    ])
    .await;
    let search = AgentTool::host(
        "search",
        "Search the catalogue.",
        json!({
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
            "additionalProperties": false
        }),
        |arguments: Value, _| async move { Ok::<_, String>(arguments.to_string()) },
    )
    .unwrap()
    .strict(true);
    let agent = Agent::builder("strict")
        .model(model("openai:m", &server))
        .tool(search)
        .build()
        .unwrap();
    let output = agent.run("find", RunOptions::default()).await.unwrap();
    let call = &output.tool_calls[0];
    assert!(call.is_ok(), "{:?}", call.error);
    assert_eq!(call.content, r#"{"query":"rust"}"#);
    let sent = &server.requests()[0].body["tools"][0]["function"]["parameters"];
    assert_eq!(
        sorted_strings(&sent["required"]),
        ["limit", "query"],
        "every property required"
    );
}
