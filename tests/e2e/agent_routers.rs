//! Tool routers through the library API, against the scripted provider: the
//! lexical router offers the tools a prompt is about; the model router asks
//! a cheaper model and falls back to every tool when its answer is no list.

use std::sync::Arc;

use serde_json::json;
use wasm_agent::agent::{Agent, AgentTool, LexicalRouter, ModelRouter, RunOptions};

use crate::agent::{messages, model, offered};
use crate::provider_server::{ProviderServer, openai};

fn catalogue() -> Vec<AgentTool> {
    [
        ("calculate", "Evaluate an arithmetic expression."),
        ("read_file", "Read a text file from the workspace."),
        ("write_file", "Write a text file in the workspace."),
        ("list_dir", "List the files of a directory."),
        ("fetch_url", "Fetch a web page and return its text."),
        ("get_weather", "Current weather and temperature for a city."),
        (
            "json_query",
            "Query a JSON document with a path expression.",
        ),
        ("send_email", "Send an email message to a recipient."),
    ]
    .into_iter()
    .map(|(name, description)| {
        AgentTool::host(name, description, json!({"type": "object"}), |_, _| async {
            Ok::<_, String>("ok")
        })
        .unwrap()
    })
    .collect()
}

#[tokio::test]
async fn lexical_router_offers_the_relevant_tools() {
    let server = ProviderServer::start(vec![openai::text("Sunny.")]).await;
    let agent = Agent::builder("routed")
        .model(model("openai:m", &server))
        .tools(catalogue())
        .router(Arc::new(LexicalRouter), 2, 1)
        .build()
        .unwrap();
    let output = agent
        .run("What is the weather in Paris today?", RunOptions::default())
        .await
        .unwrap();
    assert_eq!(output.tools_offered, ["get_weather"]);
    assert_eq!(offered(&server, 0), ["get_weather"]);
}

#[tokio::test]
async fn model_router_picks_and_falls_back_to_every_tool() {
    for (router_answer, expected) in [
        (
            "[\"send_email\", \"read_file\"]",
            vec!["send_email", "read_file"],
        ),
        ("I cannot decide.", vec![]),
    ] {
        let server =
            ProviderServer::start(vec![openai::text(router_answer), openai::text("Done.")]).await;
        let agent = Agent::builder("routed")
            .model(model("openai:main", &server))
            .tools(catalogue())
            .router(
                Arc::new(ModelRouter::new(model("openai:cheap", &server))),
                3,
                1,
            )
            .build()
            .unwrap();
        let output = agent
            .run("Mail the report", RunOptions::default())
            .await
            .unwrap();
        let router_prompt = messages(&server, 0)[0]["content"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            router_prompt.contains("- get_weather: Current weather"),
            "{router_prompt}"
        );
        assert_eq!(server.requests()[0].body["model"], "cheap");
        let offered = offered(&server, 1);
        if expected.is_empty() {
            assert_eq!(offered.len(), 8, "a failed selection offers every tool");
        } else {
            assert_eq!(offered, expected);
        }
        assert_eq!(output.usage.total_tokens, 198, "the router's tokens count");
    }
}
